"""A client's SASL login to a Kafka listener, sans-IO: :func:`sasl_login` is a generator that
yields the requests to send, as (API name, version, request), and is sent each decoded response.
The broker's own connections to other nodes (kbroker/security/peer.py, on trio) and the admin
commands' blocking client (kbroker/tools/client.py) drive the same steps:

    SaslHandshake v1 (the mechanism), then SaslAuthenticate v2 once for PLAIN, twice for SCRAM
    (client-first, client-final), the server's final message checked.

A refusal raises :class:`kbroker.security.scram.AuthenticationFailed` with the broker's words.
"""

from __future__ import annotations

from typing import Generator

from kbroker.security.scram import AuthenticationFailed, ScramClient, plain_token, scram_mechanism
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

SaslHandshakeRequest = API_BY_NAME["SaslHandshake"].request_class
SaslAuthenticateRequest = API_BY_NAME["SaslAuthenticate"].request_class
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

Steps = Generator[tuple[str, int, object], object, None]


def sasl_login(mechanism: str, username: str, password: str) -> Steps:
    if mechanism not in MECHANISMS:
        raise AuthenticationFailed(f"SASL mechanism {mechanism} is not supported here; use one of "
                                   f"{', '.join(MECHANISMS)}")
    handshake = yield "SaslHandshake", 1, SaslHandshakeRequest(mechanism=mechanism)
    if handshake.error_code != ErrorCode.NONE:
        raise AuthenticationFailed(f"{_name(handshake.error_code)}: the listener offers "
                                   f"{', '.join(handshake.mechanisms) or 'no mechanism'}, not {mechanism}")
    scram = scram_mechanism(mechanism)
    if scram is None:
        yield from _authenticate(plain_token(username, password))
        return
    client = ScramClient(scram, username, password)
    server_first = yield from _authenticate(client.first())
    client.verify((yield from _authenticate(client.final(server_first))))


def _authenticate(token: bytes) -> Generator[tuple[str, int, object], object, bytes]:
    response = yield "SaslAuthenticate", 2, SaslAuthenticateRequest(auth_bytes=token)
    if response.error_code != ErrorCode.NONE:
        raise AuthenticationFailed(f"{_name(response.error_code)}: {response.error_message}")
    return response.auth_bytes


def _name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"
