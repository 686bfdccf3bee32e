"""The console's Kafka client of its own broker: the admin commands' blocking client (kbroker/tools/client.py)
on the broker's listener over loopback, logged in as the console's user, run in a worker thread.

Every change the console makes, and every read that goes beyond the broker's own state (groups, the
quorum, messages), is a Kafka request from that user: the broker's authorizer answers it exactly as it
answers a client with the same credentials, and a group's lag is computed by the same code as
``kbroker groups describe``.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

from kbroker.config.client import ClientSecurity
from kbroker.tools.client import Client

_TIMEOUT_S = 15  # each socket operation's; a page shows the error after that
_THREADS = 4  # the console's own worker threads: never the ones the broker's fsyncs wait for
_limiter: trio.CapacityLimiter | None = None
_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")  # the console's order of preference
Answer = TypeVar("Answer")


@dataclass(frozen=True)
class Listener:
    """The listener the console's client uses: where, its security protocol, and its SASL mechanism."""
    host: str
    port: int
    protocol: str
    mechanism: str | None

    @property
    def needs_login(self) -> bool:
        return self.mechanism is not None

    def security(self, username: str = "", password: str = "") -> ClientSecurity:
        context = None
        if self.protocol in ("SSL", "SASL_SSL"):  # our own listener, over loopback: nothing to verify
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        return ClientSecurity(self.protocol, context, self.mechanism, username, password)


def choose_listener(listeners: list[tuple[str, int, str, tuple[str, ...]]]) -> Listener:
    """Of the broker's client listeners as (host, bound port, security protocol, SASL mechanisms): a SASL one
    where there is one (a broker that authenticates anyone asks the console's users too), else the first."""
    with_sasl = [listener for listener in listeners if listener[2].startswith("SASL_")]
    host, port, protocol, mechanisms = (with_sasl or listeners)[0]
    mechanism = next((m for m in _MECHANISMS if m in mechanisms), None) if protocol.startswith("SASL_") else None
    return Listener("127.0.0.1" if host in ("", "0.0.0.0", "localhost") else "::1" if host == "::" else host,
                    port, protocol, mechanism)


class UserClient:
    """One user's client, made on first use and again after a failure; one request at a time."""

    def __init__(self, listener: Listener, security: ClientSecurity) -> None:
        self.listener = listener
        self.security = security
        self._client: Client | None = None
        self._lock = trio.Lock()

    async def run(self, function: Callable[[Client], Answer]) -> Answer:
        """``function(client)`` in a worker thread. A broken connection is dropped, so the next call makes
        another; the error goes to the caller."""
        global _limiter
        if _limiter is None:
            _limiter = trio.CapacityLimiter(_THREADS)
        async with self._lock:
            return await trio.to_thread.run_sync(self._run, function, limiter=_limiter)

    def _run(self, function: Callable[[Client], Answer]) -> Answer:
        if self._client is None:
            self._client = Client(f"{self.listener.host}:{self.listener.port}", _TIMEOUT_S, self.security)
        try:
            return function(self._client)
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            client.close()
