"""One connection's security state: who its client is and what it may send yet.

Kafka's server-side SASL state machine (SaslServerAuthenticator): on a SASL
listener only ApiVersions and SaslHandshake are admitted until a handshake
picks a mechanism, then SaslAuthenticate until the exchange completes;
anything else closes the connection. Once authenticated, another SaslHandshake
or SaslAuthenticate (re-authentication aside) is answered ILLEGAL_SASL_STATE
and the connection goes on, as Kafka's KafkaApis answers them. A v0 handshake is followed by the
mechanism's tokens as bare size-prefixed frames instead of SaslAuthenticate
requests. A failed exchange is answered with SASL_AUTHENTICATION_FAILED and
the connection closed. With ``connections.max.reauth.ms`` (KIP-368) the
session ends after that long: the client re-authenticates on the same
connection (as the same principal), or the next request after expiry closes it.
"""

from __future__ import annotations

import hmac
import time
from typing import Callable

from kbroker.security.listener import ANONYMOUS, ListenerSecurity
from kbroker.security.scram import AuthenticationFailed, PlainServer, ScramServer, scram_mechanism
from kbroker.wire.errors import ErrorCode

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


class Session:
    def __init__(self, security: ListenerSecurity, credentials: Callable, principal: str = ANONYMOUS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``credentials(user, mechanism)`` is the user's SCRAM credential for a mechanism, or None."""
        self.security = security
        self.principal = principal  # the certificate's subject on TLS, else ANONYMOUS until SASL says who
        self.authenticated = not security.uses_sasl
        self.closing = False  # answer what is queued, then close (a failed or refused authentication)
        self.raw_tokens = False  # after a v0 handshake: the next frames are bare SASL tokens
        self.client_id: str | None = None  # as its ApiVersions request named it (KIP-511), for close_connections
        # Called once the connection has closed: what a handler tied to it (a share session) lets go of.
        self.on_close: list[Callable[[], None]] = []
        self._credentials = credentials
        self._clock = clock
        self._exchange: ScramServer | PlainServer | None = None
        self._expires_at: float | None = None

    @property
    def max_frame_bytes(self) -> int | None:
        """The frame limit until authenticated (sasl.server.max.receive.size); None afterwards."""
        return None if self.authenticated else self.security.max_receive_bytes

    def admits(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may come now; if not, the connection closes (as Kafka's)."""
        if api_key in (API_VERSIONS, SASL_HANDSHAKE):
            return True
        if api_key == SASL_AUTHENTICATE:
            if self._exchange is not None:
                return not self.raw_tokens
            return self.authenticated and (self._expires_at is None or self._clock() < self._expires_at)
        if not self.authenticated or self._exchange is not None:
            return False
        return self._expires_at is None or self._clock() < self._expires_at

    def handshake(self, mechanism: str, version: int) -> int:
        """SaslHandshake: the error code to answer (the connection closes after a mechanism refused or a
        handshake in the middle of an exchange; once authenticated, it goes on)."""
        security = self.security
        reauthenticating = self.authenticated and security.reauth_ms > 0 and version >= 1
        if self._exchange is not None:
            self.closing = True
            return ErrorCode.ILLEGAL_SASL_STATE
        if not security.uses_sasl or self.authenticated and not reauthenticating:
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in security.mechanisms:
            self.closing = True
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        if mechanism == "PLAIN":
            self._exchange = PlainServer(self._check_plain)
        else:
            scram = scram_mechanism(mechanism)
            self._exchange = ScramServer(scram, lambda user: self._credentials(user, scram.type))
        self.raw_tokens = version == 0
        return ErrorCode.NONE

    @property
    def exchanging(self) -> bool:
        """Whether a SASL exchange is under way (a SaslAuthenticate now is one of its steps)."""
        return self._exchange is not None

    def authenticate(self, token: bytes) -> tuple[bytes, int]:
        """One SASL token in, the answer token and (once complete) the session lifetime in ms out.

        Raises AuthenticationFailed; the caller answers it and closes the connection."""
        exchange = self._exchange
        if exchange is None:
            raise AuthenticationFailed("no SASL handshake before SaslAuthenticate")
        try:
            answer = exchange.step(token)
        except AuthenticationFailed:
            self.closing = True
            raise
        if not exchange.complete:
            return answer, 0
        principal = "User:" + exchange.username
        if self.authenticated and principal != self.principal:
            self.closing = True
            raise AuthenticationFailed(f"cannot change principal from {self.principal} to {principal} when "
                                       "re-authenticating")
        self.principal, self.authenticated = principal, True
        self._exchange, self.raw_tokens = None, False
        lifetime_ms = self.security.reauth_ms
        self._expires_at = self._clock() + lifetime_ms / 1000 if lifetime_ms else None
        return answer, lifetime_ms

    def _check_plain(self, user: str, password: str) -> bool:
        expected = self.security.plain_users.get(user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())
