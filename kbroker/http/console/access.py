"""Who is using the console, and that a changing request comes from the console's own page.

On a broker whose listeners authenticate, a user signs in with the credentials a Kafka client would use;
the broker itself checks them (kafka.py logs in to its listener with them) and the console then acts as
that principal. Without authentication every user is the principal a client of the listener gets,
User:ANONYMOUS, as on Kafka. A session lives in memory, behind a random cookie, until it has been idle
for ``IDLE_S``; at most ``MAX_SESSIONS`` are kept, the least recently used dropped first.

Changing requests are POSTs that carry the session's CSRF token in a form field (the synchronizer token);
the cookies are SameSite=Strict and HttpOnly. A request without the token, or with another's, is refused.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from kbroker.http.console.kafka import Listener, UserClient

COOKIE = "kbroker_console"
IDLE_S = 8 * 3600
MAX_SESSIONS = 1000
ANONYMOUS = "User:ANONYMOUS"


@dataclass
class Session:
    principal: str
    client: UserClient
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    last_used: float = 0.0
    flash: tuple[str, bool] | None = None  # what the next page says of the last change: (text, refused?)


@dataclass(frozen=True)
class Viewer:
    """What the authorizer asks of a request: who, and from which host (kbroker/security/authorization.py)."""
    principal: str
    client_host: str


class Sessions:
    def __init__(self, listener: Listener, clock: Callable[[], float] = time.monotonic) -> None:
        self.listener = listener
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def find(self, token: str | None) -> Session | None:
        """The session behind a cookie, if it lives; using it keeps it alive."""
        session = self._sessions.get(token or "")
        if session is None:
            return None
        now = self._clock()
        if now - session.last_used > IDLE_S:
            self.close(token)
            return None
        session.last_used = now
        self._sessions.move_to_end(token)
        return session

    def open(self, principal: str, client: UserClient) -> str:
        """A new session's cookie value."""
        while len(self._sessions) >= MAX_SESSIONS:
            _, dropped = self._sessions.popitem(last=False)
            dropped.client.close()
        token = secrets.token_urlsafe(32)
        self._sessions[token] = Session(principal, client, last_used=self._clock())
        return token

    def anonymous(self) -> str:
        """A session for a user of a broker that authenticates no one."""
        return self.open(ANONYMOUS, UserClient(self.listener, self.listener.security()))

    def close(self, token: str | None) -> None:
        session = self._sessions.pop(token or "", None)
        if session is not None:
            session.client.close()


def csrf_matches(session: Session, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(session.csrf.encode(), sent.encode())
