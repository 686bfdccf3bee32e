"""Time, injected (the design's rule 8): the parts whose logic depends on time read it from a ``Clock``
they are given, so that tests drive them with a ``FakeClock`` instead of sleeping or patching.

Two readings, as Kafka's ``Time`` has: ``wall_ms``, milliseconds since the epoch, for what is stored or
shown (record timestamps, a group's or a transaction's times, retention); ``monotonic_ms``, which never
steps back, for intervals and rates (quota windows, how long something took).

A test broker runs on an ``OffsetClock``: the host's clocks plus an offset a test moves ahead
(kbroker/testing/time_travel.py), so that timeouts and retention fall due without sleeping.

Here in ``log`` so that every part may import it (``kbroker`` -> ``raft`` -> ``log`` -> ``wire``).
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "OffsetClock", "SYSTEM_CLOCK", "SystemClock"]


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the epoch (may step when the host's clock is set)."""

    def monotonic_ms(self) -> int:
        """Milliseconds from an arbitrary origin, never stepping back."""


class SystemClock:
    """The host's clocks."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class FakeClock:
    """A clock that moves only when told: ``advance(ms)`` moves both readings; ``set_wall_ms`` steps the
    wall clock alone (either way), as an operator setting the host's clock would."""

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_ms: int = 0) -> None:
        self._wall_ms, self._monotonic_ms = wall_ms, monotonic_ms

    def wall_ms(self) -> int:
        return self._wall_ms

    def monotonic_ms(self) -> int:
        return self._monotonic_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a clock cannot advance by {ms} ms: monotonic time never steps back")
        self._wall_ms += ms
        self._monotonic_ms += ms

    def set_wall_ms(self, wall_ms: int) -> None:
        self._wall_ms = wall_ms

    def __repr__(self) -> str:
        return f"FakeClock(wall_ms={self._wall_ms}, monotonic_ms={self._monotonic_ms})"


class OffsetClock:
    """The host's clocks plus an offset that only grows: ``advance(ms)`` moves both readings ahead at once, and
    time goes on passing from there as the host's does. What a test broker runs on (kbroker/testing), so that a
    test can make a session time out, a transaction outlive its timeout or records age past retention without
    sleeping, while everything else (sockets, the clients' own timers) keeps real time. Never steps back."""

    def __init__(self) -> None:
        self._offset_ms = 0

    @property
    def offset_ms(self) -> int:
        """How far ahead of the host's clocks it reads."""
        return self._offset_ms

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self._offset_ms

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000 + self._offset_ms

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a clock cannot advance by {ms} ms: monotonic time never steps back")
        self._offset_ms += ms

    def __repr__(self) -> str:
        return f"OffsetClock(offset_ms={self._offset_ms})"
