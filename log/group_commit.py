"""Group commit for threaded callers: many appends share one fsync.

Every caller appends under ``lock`` and then waits until the log's recovery
point covers its batch. Whoever finds no fsync under way becomes the flusher:
it takes a :class:`~log.partition_log.FlushJob` for everything appended so
far, runs the fsync with the lock released (so others keep appending), then
records the new recovery point under the lock. It wakes every writer the
fsync covered (they return without touching the lock again) and one that it
did not cover, who runs the next fsync for everything appended meanwhile.

Before taking its job a flusher waits, at most as long as the last fsync took
(never over ``GATHER_S_MAX``), for the writers queued on the lock and those
the last fsync released to append: otherwise the released writers always
miss the next fsync and the threads split into two cohorts, each fsync
carrying only half of them.

The broker does the same with trio; this serves tests, benchmarks and any
thread-based caller.
"""

from __future__ import annotations

import threading
import time

from kbroker.log.partition_log import AppendResult, Log

GATHER_S_MAX = 0.001


class _Waiter:
    __slots__ = ("last_offset", "returns", "event", "covered")

    def __init__(self, last_offset: int, returns: bool) -> None:
        self.last_offset = last_offset
        self.returns = returns  # an append_durably caller, likely back soon with more
        self.event = threading.Event()
        self.covered = False  # woken because durable, not to take over the flushing


class GroupCommit:
    """Durable appends to ``log`` for threads that all use ``lock`` to reach it."""

    def __init__(self, log: Log, lock: threading.Lock) -> None:
        self.log = log
        self.lock = lock
        self._appended = threading.Condition(lock)  # a writer appended; for a gathering flusher
        self._flushing = False
        self._waiters: list[_Waiter] = []
        self._last_fsync_s = GATHER_S_MAX
        # Updated before a writer takes ``lock``, so under a lock of their own.
        self._arrivals = threading.Lock()
        self._arriving = 0  # writers in append_durably that have not appended yet
        self._returning = 0  # writers the last fsync released, not back yet
        self.fsync_count = 0  # flush jobs run, for tests and benchmarks

    def append_durably(self, data, **append_options) -> AppendResult:
        """Append ``data`` (see :meth:`Log.append`) and return once it is fsynced."""
        with self._arrivals:
            self._arriving += 1
            self._returning = max(0, self._returning - 1)
        with self.lock:
            with self._arrivals:
                self._arriving -= 1
            result = self.log.append(data, **append_options)
            if self._flushing and not (self._arriving or self._returning):
                self._appended.notify()  # the last one a gathering flusher waits for
            waiter = self._wait_locked(result.last_offset, returns=True)
        self._await(waiter)
        return result

    def wait_durable(self, last_offset: int) -> None:
        """Block until every offset up to ``last_offset`` is fsynced (for appends made under ``lock``)."""
        with self.lock:
            waiter = self._wait_locked(last_offset, returns=False)
        self._await(waiter)

    def _wait_locked(self, last_offset: int, returns: bool) -> _Waiter | None:
        """Flush while nobody else does; None once durable, else a waiter to block on unlocked."""
        while self.log.recovery_point <= last_offset:
            if self._flushing:
                waiter = _Waiter(last_offset, returns)
                self._waiters.append(waiter)
                return waiter
            self._flush_locked(returns)
        return None

    def _await(self, waiter: _Waiter | None) -> None:
        while waiter is not None:
            waiter.event.wait()
            if waiter.covered:
                return
            with self.lock:  # woken to run the next fsync
                waiter = self._wait_locked(waiter.last_offset, waiter.returns)

    def _flush_locked(self, returns: bool) -> None:
        """Run one fsync with the lock released; called and returns with it held."""
        self._flushing = True
        self._gather()
        job = self.log.begin_flush()
        try:
            self.lock.release()
            try:
                started = time.monotonic()
                job.run()
                self._last_fsync_s = min(GATHER_S_MAX, time.monotonic() - started)
            finally:
                self.lock.acquire()
            self.log.complete_flush(job)
            self.fsync_count += 1
        finally:
            # On failure too: the first waiter left takes over and tries the next fsync itself.
            self._flushing = False
            self._wake(returns)

    def _wake(self, flusher_returns: bool) -> None:
        recovery_point = self.log.recovery_point
        released = int(flusher_returns)
        waiting = []
        for waiter in self._waiters:
            if waiter.last_offset < recovery_point:
                waiter.covered = True
                waiter.event.set()
                released += waiter.returns
            else:
                waiting.append(waiter)
        if waiting:
            waiting.pop(0).event.set()
        self._waiters = waiting
        with self._arrivals:
            self._returning = released

    def _gather(self) -> None:
        """Let queued and just-released writers append before the job is taken (lock held)."""
        deadline = time.monotonic() + self._last_fsync_s
        while self._arriving or self._returning:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                with self._arrivals:
                    self._returning = 0  # those not back by now are not coming soon
                return
            self._appended.wait(remaining)
