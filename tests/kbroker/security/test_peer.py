"""How a node reaches other nodes' secured listeners (kbroker/security/peer.py): the SCRAM and
PLAIN client side, the settings it is built from, and real connections to a broker's TLS and SASL
listeners on loopback."""

from __future__ import annotations

import base64
import ssl

import pytest
import trio

from kbroker.broker import Broker, BrokerSettings, ListenerSettings
from kbroker.config import BrokerConfig, ConfigError
from kbroker.security.peer import PeerSecurity, PeerUnreachable
from kbroker.security.scram import (SCRAM_MECHANISMS, AuthenticationFailed, PlainServer, ScramClient, ScramServer,
                                    credential_from_password, plain_token, scram_mechanism)
from kbroker.wire.frame import decode_response, encode_request, read_frame
from kbroker.wire.schema import API_BY_NAME

SHA256 = scram_mechanism("SCRAM-SHA-256")
MECHANISMS = pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS, ids=lambda m: m.name)

# RFC 7677, section 3
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_the_scram_client_reproduces_rfc_7677():
    client = ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)
    with pytest.raises(AuthenticationFailed, match="signature"):
        client.verify(RFC_SERVER_FINAL[:-4] + b"AAA=")


@MECHANISMS
def test_the_scram_client_and_server_agree(mechanism):
    server = ScramServer(mechanism, {"we,ird=": credential_from_password(mechanism, "secret")}.get)
    client = ScramClient(mechanism, "we,ird=", "secret")
    client.verify(server.step(client.final(server.step(client.first()))))
    assert server.complete and server.username == "we,ird="


@pytest.mark.parametrize("server_first, complaint", [
    (b"r=othernonce,s=QUJD,i=4096", "nonce"),  # not the client's nonce extended
    (b"r=abc,s=QUJD,i=4096", "nonce"),  # the client's nonce alone
    (b"r=abcdef,s=QUJD,i=100", "iterations"),  # too few: a server lowering the work factor
    (b"r=abcdef,s=QUJD,i=999999", "iterations"),  # too many: a server making us spin
    (b"r=abcdef,s=!!,i=4096", "malformed"),
    (b"r=abcdef,i=4096", "malformed"),
    (b"r=abcdef,s=QUJD,i=many", "malformed"),
    (b"\xff\xfe", "invalid credentials"),
])
def test_the_scram_client_refuses_a_bad_server_first_message(server_first, complaint):
    with pytest.raises(AuthenticationFailed, match=complaint):
        ScramClient(SHA256, "a", "p", nonce="abc").final(server_first)


def test_a_server_final_message_before_the_exchange_proves_nothing():
    with pytest.raises(AuthenticationFailed):
        ScramClient(SHA256, "a", "p").verify(b"v=" + base64.b64encode(b"x" * 32))


def test_the_plain_token_is_what_the_plain_server_takes():
    server = PlainServer(lambda user, password: (user, password) == ("broker", "pw"))
    assert server.step(plain_token("broker", "pw")) == b"" and server.username == "broker"


def _config(**settings) -> BrokerConfig:
    base = {"listeners": "INTERNAL://127.0.0.1:0", "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL"}
    return BrokerConfig.from_mapping({**base, **settings})


JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
        'password="broker-secret";')


def test_inter_broker_sasl_takes_kafkas_settings():
    peers = PeerSecurity.inter_broker(_config(**{
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": JAAS}))
    assert (peers.listener, peers.protocol, peers.mechanism, peers.username, peers.password) == \
        ("INTERNAL", "SASL_PLAINTEXT", "SCRAM-SHA-512", "broker", "broker-secret")
    assert peers.ssl_context is None
    assert PeerSecurity.inter_broker(BrokerConfig.from_mapping({})) == PeerSecurity()


@pytest.mark.parametrize("settings, named", [
    ({"sasl.enabled.mechanisms": "PLAIN"}, "sasl.mechanism.inter.broker.protocol"),  # Kafka's default: GSSAPI
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
      "listener.name.internal.scram-sha-256.sasl.jaas.config": JAAS}, "sasl.enabled.mechanisms"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
     "sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
      "listener.name.internal.scram-sha-256.sasl.jaas.config": "ScramLoginModule required password=\"x\";"},
     "sasl.jaas.config"),
])
def test_inter_broker_sasl_without_what_it_needs_is_refused_naming_the_setting(settings, named):
    with pytest.raises(ConfigError) as refused:
        PeerSecurity.inter_broker(_config(**settings))
    assert refused.value.setting == named


def test_the_controller_listener_is_reached_with_its_own_mechanism():
    config = BrokerConfig.from_mapping({
        "process.roles": "controller", "node.id": 1, "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config":
            'PlainLoginModule required username="c" password="p" user_c="p";'})
    peers = PeerSecurity.controller(config)
    assert (peers.listener, peers.mechanism, peers.username, peers.password) == ("CONTROLLER", "PLAIN", "c", "p")


# -- against a live broker's listeners ------------------------------------------------------------------------

PLAIN_JAAS = 'PlainLoginModule required username="broker" password="pw" user_broker="pw";'


async def _serving(nursery, tmp_path, protocol: str, **settings) -> tuple[Broker, BrokerConfig]:
    config = BrokerConfig.from_mapping({
        "listeners": "INTERNAL://127.0.0.1:0", "listener.security.protocol.map": f"INTERNAL:{protocol}",
        "inter.broker.listener.name": "INTERNAL", "log.dirs": str(tmp_path), **settings})
    broker = Broker(BrokerSettings(listeners=(ListenerSettings("INTERNAL", protocol, "127.0.0.1", 0),),
                                   data_dir=str(tmp_path)), config)
    await nursery.start(broker.run)
    return broker, config


async def _api_versions(stream) -> int:
    api = API_BY_NAME["ApiVersions"]
    await stream.send_all(encode_request(api.key, 3, 7, "t", api.request_class(client_software_name="t",
                                                                             client_software_version="1")))
    return decode_response(api.key, 3, await read_frame(stream))[1].error_code


@pytest.mark.trio
async def test_a_peer_logs_in_with_plain_and_then_talks_kafka(tmp_path):
    async with trio.open_nursery() as nursery:
        broker, config = await _serving(nursery, tmp_path, "SASL_PLAINTEXT", **{
            "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS})
        stream = await broker.peers.security.connect("127.0.0.1", broker.port)
        async with stream:
            assert await _api_versions(stream) == 0
        wrong = PeerSecurity("INTERNAL", "SASL_PLAINTEXT", mechanism="PLAIN", username="broker", password="no")
        with pytest.raises(PeerUnreachable, match="SASL_AUTHENTICATION_FAILED"):
            await wrong.connect("127.0.0.1", broker.port)
        unoffered = PeerSecurity("INTERNAL", "SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", username="b", password="p")
        with pytest.raises(PeerUnreachable, match="UNSUPPORTED_SASL_MECHANISM"):
            await unoffered.connect("127.0.0.1", broker.port)
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_a_peer_reaching_a_plaintext_port_with_tls_fails_cleanly(tmp_path):
    async with trio.open_nursery() as nursery:
        broker, _ = await _serving(nursery, tmp_path, "PLAINTEXT")
        tls = PeerSecurity("INTERNAL", "SSL", ssl.create_default_context())
        with trio.fail_after(15), pytest.raises(OSError):
            await tls.connect("127.0.0.1", broker.port)
        nursery.cancel_scope.cancel()
