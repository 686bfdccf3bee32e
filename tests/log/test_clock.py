"""The injected clock (log/clock.py): the system clock reads the host's, the fake moves only when told."""

from __future__ import annotations

import time

import pytest

from kbroker.log.clock import SYSTEM_CLOCK, Clock, FakeClock


def test_the_system_clock_reads_the_hosts_clocks():
    clock: Clock = SYSTEM_CLOCK
    assert abs(clock.wall_ms() - time.time() * 1000) < 1000
    first = clock.monotonic_ms()
    assert abs(first - time.monotonic() * 1000) < 1000
    assert clock.monotonic_ms() >= first


def test_a_fake_clock_moves_only_when_told():
    clock: Clock = FakeClock(wall_ms=5_000, monotonic_ms=7)
    assert (clock.wall_ms(), clock.monotonic_ms()) == (5_000, 7)
    clock.advance(250)
    assert (clock.wall_ms(), clock.monotonic_ms()) == (5_250, 257)
    clock.set_wall_ms(1_000)  # the host's clock set back: monotonic time does not follow
    assert (clock.wall_ms(), clock.monotonic_ms()) == (1_000, 257)
    with pytest.raises(ValueError):
        clock.advance(-1)
