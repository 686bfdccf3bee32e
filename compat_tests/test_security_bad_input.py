"""Hostile and out-of-order authentication (issue 11, point 5), and KIP-368 re-authentication.

Raw frames over real sockets against a broker with SASL_PLAINTEXT and SSL listeners: requests
before authentication, SaslAuthenticate before a handshake, unknown mechanisms, malformed PLAIN
and SCRAM tokens, an oversized token, a second handshake, TLS garbage. Each gets Kafka's error
and a closed connection, or a clean close, and the broker goes on serving a well-behaved client.
"""

from __future__ import annotations

import random
import socket
import ssl
import struct
import time

import pytest

from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.schema import API_BY_NAME

trustme = pytest.importorskip("trustme", reason="the trustme package (test extra) makes the TLS certificates")

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
MAX_TOKEN = 4096
REAUTH_MS = 1500


class Connection:
    """One raw client connection: requests out, responses in, and whether the broker closed it."""

    def __init__(self, address: str, wrap=None) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        if wrap is not None:
            self.sock = wrap(self.sock)
        self.correlation = 0

    def send(self, api_name: str, version: int, **fields) -> None:
        api = API_BY_NAME[api_name]
        self.correlation += 1
        self.sock.sendall(encode_request(api.key, version, self.correlation, "bad-input", api.request_class(**fields)))

    def call(self, api_name: str, version: int, **fields):
        self.send(api_name, version, **fields)
        size = struct.unpack(">i", self._receive(4))[0]
        return decode_response(API_BY_NAME[api_name].key, version, self._receive(size))[1]

    def raw(self, token: bytes) -> bytes:
        """A bare size-prefixed SASL token (after a v0 handshake) and its bare answer."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)
        return self._receive(struct.unpack(">i", self._receive(4))[0])

    def closed_by_broker(self, within_s: float = 5) -> bool:
        self.sock.settimeout(within_s)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True
        except socket.timeout:
            return False

    def _receive(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bad-input")
    ca = trustme.CA()
    keystore = str(directory / "broker.pem")
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(keystore)
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,REAUTH://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,"
                                          "REAUTH:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.connections.max.reauth.ms": REAUTH_MS,
        "sasl.server.max.receive.size": MAX_TOKEN,
        "ssl.keystore.location": keystore,
    }
    with running_broker(str(directory / "data"), settings=settings) as running:
        yield running


def plain_token(user: str = "alice", password: str = "alice-secret") -> bytes:
    return f"\0{user}\0{password}".encode()


def authenticated(broker, listener: str = "SASL_PLAINTEXT") -> Connection:
    connection = Connection(broker.address(listener))
    assert connection.call("SaslHandshake", 1, mechanism="PLAIN").error_code == ErrorCode.NONE
    answer = connection.call("SaslAuthenticate", 2, auth_bytes=plain_token())
    assert answer.error_code == ErrorCode.NONE
    return connection


def still_serving(broker) -> None:
    connection = authenticated(broker)
    try:
        assert connection.call("Metadata", 12, topics=None).brokers
    finally:
        connection.close()


def test_requests_before_authentication_close_the_connection(broker):
    for api_name, version, fields in [("Metadata", 12, {"topics": None}),
                                      ("SaslAuthenticate", 2, {"auth_bytes": plain_token()})]:
        connection = Connection(broker.address("SASL_PLAINTEXT"))
        assert connection.call("ApiVersions", 3, client_software_name="t", client_software_version="1").api_keys
        connection.send(api_name, version, **fields)
        assert connection.closed_by_broker(), f"{api_name} before a handshake was served"
        connection.close()
    still_serving(broker)


def test_an_unknown_mechanism_is_refused_with_the_offered_ones(broker):
    connection = Connection(broker.address("SASL_PLAINTEXT"))
    answer = connection.call("SaslHandshake", 1, mechanism="GSSAPI")
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert sorted(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
    assert connection.closed_by_broker()
    still_serving(broker)


@pytest.mark.parametrize("mechanism, token", [
    ("PLAIN", b"\0only-two"), ("PLAIN", b"\0alice\0wrong"), ("PLAIN", b"\0nobody\0x"), ("PLAIN", b"\xff\xfe\0a\0b"),
    ("PLAIN", b"mallory\0alice\0alice-secret"), ("SCRAM-SHA-256", b"garbage"), ("SCRAM-SHA-256", b"p=x,,n=a,r=b"),
    ("SCRAM-SHA-256", b"n,,n=a=ZZ,r=abc"), ("SCRAM-SHA-256", b""),
], ids=lambda value: repr(value)[:24])
def test_malformed_and_wrong_tokens_fail_and_close(broker, mechanism, token):
    connection = Connection(broker.address("SASL_PLAINTEXT"))
    assert connection.call("SaslHandshake", 1, mechanism=mechanism).error_code == ErrorCode.NONE
    answer = connection.call("SaslAuthenticate", 2, auth_bytes=token)
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.error_message
    assert connection.closed_by_broker()
    still_serving(broker)


def test_random_tokens_never_authenticate(broker):
    generator = random.Random(11)
    for _ in range(40):
        token = bytes(generator.randrange(256) for _ in range(generator.randrange(0, 200)))
        mechanism = generator.choice(["PLAIN", "SCRAM-SHA-256"])
        connection = Connection(broker.address("SASL_PLAINTEXT"))
        assert connection.call("SaslHandshake", 1, mechanism=mechanism).error_code == ErrorCode.NONE
        answer = connection.call("SaslAuthenticate", 2, auth_bytes=token)
        if mechanism == "SCRAM-SHA-256" and answer.error_code == ErrorCode.NONE:
            assert answer.auth_bytes.startswith(b"r=")  # a well-formed first message: the exchange goes on
        else:
            assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        connection.close()
    still_serving(broker)


def test_an_oversized_token_closes_the_connection(broker):
    connection = Connection(broker.address("SASL_PLAINTEXT"))
    assert connection.call("SaslHandshake", 1, mechanism="PLAIN").error_code == ErrorCode.NONE
    connection.sock.sendall(struct.pack(">i", 50 * 1024 * 1024))  # announces 50 MiB before authenticating
    assert connection.closed_by_broker()
    connection = Connection(broker.address("SASL_PLAINTEXT"))
    connection.call("SaslHandshake", 1, mechanism="PLAIN")
    connection.send("SaslAuthenticate", 2, auth_bytes=b"\0alice\0" + b"x" * MAX_TOKEN)
    assert connection.closed_by_broker()
    still_serving(broker)


def test_a_second_handshake_without_reauthentication_is_illegal(broker):
    """Answered as Kafka 4.4 answers it (compat_tests/differential_security_sessions.py): the error, and the
    authenticated connection goes on."""
    connection = authenticated(broker)
    answer = connection.call("SaslHandshake", 1, mechanism="PLAIN")
    assert (answer.error_code, answer.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])
    answer = connection.call("SaslAuthenticate", 2, auth_bytes=plain_token())
    assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert connection.call("Metadata", 12, topics=None).brokers
    connection.close()


def test_a_v0_handshake_takes_bare_tokens(broker):
    connection = Connection(broker.address("SASL_PLAINTEXT"))
    assert connection.call("SaslHandshake", 0, mechanism="PLAIN").error_code == ErrorCode.NONE
    assert connection.raw(plain_token()) == b""
    assert connection.call("Metadata", 12, topics=None).brokers
    connection.close()
    connection = Connection(broker.address("SASL_PLAINTEXT"))
    connection.call("SaslHandshake", 0, mechanism="PLAIN")
    connection.sock.sendall(struct.pack(">i", 9) + b"\0alice\0no")
    assert connection.closed_by_broker()


def test_tls_garbage_and_plaintext_on_the_tls_listener_are_closed(broker):
    for garbage in (b"\x16\x03\x01\x00\x05hello", b"GET / HTTP/1.1\r\n\r\n", bytes(range(256)) * 4):
        connection = Connection(broker.address("SSL"))
        connection.sock.sendall(garbage)
        assert connection.closed_by_broker()
        connection.close()
    connection = Connection(broker.address("SSL"))
    connection.send("ApiVersions", 3, client_software_name="t", client_software_version="1")  # Kafka, not TLS
    assert connection.closed_by_broker()
    still_serving(broker)


@pytest.mark.slow
def test_sessions_end_after_connections_max_reauth_ms_unless_renewed(broker):
    """KIP-368: the lifetime is announced; a client that re-authenticates in time goes on, as the
    same principal; a request after expiry closes the connection."""
    connection = Connection(broker.address("REAUTH"))
    connection.call("SaslHandshake", 1, mechanism="PLAIN")
    answer = connection.call("SaslAuthenticate", 2, auth_bytes=plain_token())
    assert answer.error_code == ErrorCode.NONE and answer.session_lifetime_ms == REAUTH_MS
    for _ in range(2):  # renewed twice, each time before the session ends
        time.sleep(REAUTH_MS / 1000 / 2)
        assert connection.call("SaslHandshake", 1, mechanism="PLAIN").error_code == ErrorCode.NONE
        assert connection.call("SaslAuthenticate", 2, auth_bytes=plain_token()).error_code == ErrorCode.NONE
        assert connection.call("Metadata", 12, topics=None).brokers
    time.sleep(REAUTH_MS / 1000 + 0.3)
    connection.send("Metadata", 12, topics=None)
    assert connection.closed_by_broker()
