"""How this node reaches other nodes: over their inter-broker listener (replica fetches,
transaction markers) or their controller listener (the quorum, a broker's requests to the
controller), with that listener's security protocol, as Kafka's brokers do.

TLS uses the listener's own ``ssl.*`` settings from the client's side (kbroker.security.listener.
client_ssl_context). SASL uses the mechanism of ``sasl.mechanism.inter.broker.protocol`` or
``sasl.mechanism.controller.protocol`` and logs in with the ``username`` and ``password`` of the
listener's JAAS line for that mechanism, the line that also lists PLAIN's users:

    listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.\\
        ScramLoginModule required username="broker" password="broker-secret";

Anything missing stops the broker at start with the setting named. A connection that cannot be
secured or authenticated fails with :class:`PeerUnreachable`, an OSError like a refused connection,
so callers retry it as they retry any other.
"""

from __future__ import annotations

import errno
import socket
import ssl
from dataclasses import dataclass

import trio

from kbroker.config import BrokerConfig, ConfigError
from kbroker.security.listener import SUPPORTED_MECHANISMS, client_ssl_context, jaas_login
from kbroker.security.login import sasl_login
from kbroker.security.scram import AuthenticationFailed
from kbroker.wire import DecodeError
from kbroker.wire.frame import decode_response, encode_request, read_frame
from kbroker.wire.schema import API_BY_NAME

_SETUP_TIMEOUT_S = 10.0  # TLS handshake and SASL exchange together
# A link between nodes that carries nothing back is dead well before TCP's own limits say so (its
# retransmissions back off for minutes; a connection waiting for an answer sends nothing at all).
# Each of these bounds how long a node keeps trusting a link the network has silently dropped, and so
# how long after a partition heals it still waits on one (issue 44): a connect, a segment left
# unacknowledged (TCP_USER_TIMEOUT), an idle connection whose peer stops answering keepalive probes.
_CONNECT_TIMEOUT_S = 3.0
_UNACKNOWLEDGED_MS_MAX = 5000
_KEEPALIVE_IDLE_S, _KEEPALIVE_INTERVAL_S, _KEEPALIVE_PROBES = 2, 1, 3


class PeerUnreachable(ConnectionError):
    """The connection was made but could not be secured or authenticated."""


@dataclass(frozen=True)
class PeerSecurity:
    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None  # SASL, when the protocol uses it
    username: str = ""
    password: str = ""

    @classmethod
    def inter_broker(cls, config: BrokerConfig) -> PeerSecurity:
        listener = config.get("inter.broker.listener.name")
        return cls.from_config(config, listener, "sasl.mechanism.inter.broker.protocol")

    @classmethod
    def controller(cls, config: BrokerConfig) -> PeerSecurity:
        """Kafka's rule: a node reaches the controllers on the first of controller.listener.names."""
        names = config.controller_listener_names
        if not names:
            return cls()
        return cls.from_config(config, names[0], "sasl.mechanism.controller.protocol")

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str, mechanism_setting: str) -> PeerSecurity:
        protocol = config.security_protocol_map.get(listener, "PLAINTEXT")
        context = client_ssl_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
        if not protocol.startswith("SASL_"):
            return cls(listener, protocol, context)
        mechanism = config.get(mechanism_setting)
        if mechanism not in SUPPORTED_MECHANISMS:
            raise _error(config, mechanism_setting, f"listener {listener} ({protocol}) is how nodes reach each "
                         f"other: set {mechanism_setting} to one of {', '.join(SUPPORTED_MECHANISMS)}, not "
                         f"{mechanism}")
        enabled = config.for_listener(listener, "sasl.enabled.mechanisms")
        if mechanism not in enabled:
            raise _error(config, "sasl.enabled.mechanisms", f"listener {listener} must enable {mechanism}, "
                         f"the mechanism of {mechanism_setting}")
        jaas_name = f"{mechanism.lower()}.sasl.jaas.config"
        login = jaas_login(config.for_listener(listener, jaas_name) or config.for_listener(listener, "sasl.jaas.config")
                           or "")
        if not login.get("username") or "password" not in login:
            raise _error(config, "sasl.jaas.config", f"nodes log in to listener {listener} with {mechanism}: set "
                         f"listener.name.{listener.lower()}.{jaas_name} with username=\"...\" and password=\"...\"")
        return cls(listener, protocol, context, mechanism, login["username"], login["password"])

    async def connect(self, host: str, port: int, client_id: str = "kbroker") -> trio.abc.Stream:
        """A connection to (host, port), secured and authenticated as the listener wants.
        Raises OSError (PeerUnreachable when connected but refused)."""
        stream = None
        with trio.move_on_after(_CONNECT_TIMEOUT_S):
            stream = await trio.open_tcp_stream(host, port)
            _give_up_on_silence(stream.socket)
        if stream is None:
            raise TimeoutError(errno.ETIMEDOUT, f"connecting to {host}:{port} took over {_CONNECT_TIMEOUT_S} s")
        if self.ssl_context is None and self.mechanism is None:
            return stream
        try:
            with trio.fail_after(_SETUP_TIMEOUT_S):
                if self.ssl_context is not None:
                    stream = trio.SSLStream(stream, self.ssl_context, server_hostname=host)
                    await stream.do_handshake()
                if self.mechanism is not None:
                    await self._authenticate(stream, client_id)
        except BaseException as error:
            await trio.aclose_forcefully(stream)
            if isinstance(error, (trio.BrokenResourceError, trio.TooSlowError, DecodeError, EOFError,
                                  AuthenticationFailed)):
                cause = error.__cause__ or error
                raise PeerUnreachable(f"{self.protocol} to {host}:{port} (listener {self.listener}): "
                                      f"{cause}") from error
            raise
        return stream

    async def _authenticate(self, stream, client_id: str) -> None:
        steps = sasl_login(self.mechanism, self.username, self.password)
        response, correlation_id = None, 0
        while True:  # the steps are few: a handshake and one or two tokens
            try:
                api_name, version, request = steps.send(response)
            except StopIteration:
                return
            api, correlation_id = API_BY_NAME[api_name], correlation_id + 1
            await stream.send_all(encode_request(api.key, version, correlation_id, client_id, request))
            response = decode_response(api.key, version, await read_frame(stream))[1]


def _error(config: BrokerConfig, name: str, message: str) -> ConfigError:
    return ConfigError(message, name, None, config.source(name))


def _give_up_on_silence(sock) -> None:
    """A connection to another node fails once its peer has gone silent (see _UNACKNOWLEDGED_MS_MAX)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, _KEEPALIVE_IDLE_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, _KEEPALIVE_INTERVAL_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, _KEEPALIVE_PROBES)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, _UNACKNOWLEDGED_MS_MAX)
