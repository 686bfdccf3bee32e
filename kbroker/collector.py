"""How the ``kbroker`` command keeps Python's cycle collector from pausing the event loop for long.

A full (generation 2) collection walks every tracked object the process holds. A broker's objects are
mostly long-lived: each open connection keeps some 80 (its tasks, their frames, the stream, the session),
each partition some more. With 5,000 idle connections that is 420,000 objects and a pause of 225-366 ms
on this project's test machine, every time a full collection comes round, which a producer beside them
sees as its p99 (bench/idle_connections_bench.py).

So, as CPython's ``gc.freeze`` is meant to be used: whatever survives a full collection is frozen, and
the next full collections walk only what was made since. Cycles among frozen objects (a connection that
was frozen and has closed since) are not found until the frozen objects are walked again: they are
unfrozen, for the next full collection to walk, once the process's memory blocks have doubled since
they were last walked or ``WALK_ALL_EVERY_S`` has passed. The pause of that walk comes at most once per
doubling of the process's objects or per interval, rather than once per 25 % of new long-lived objects
(CPython's own rule). (The blocks, ``sys.getallocatedblocks``, are counted in 0.2 ms; the frozen
objects themselves, ``gc.get_freeze_count``, would be walked to be counted: 5-40 ms at 400,000.)

Only the command does this: it owns its process. A broker run inside a test's process
(kbroker.testing) leaves that process's collector alone.
"""

from __future__ import annotations

import gc
import logging
import sys
import time

import trio

logger = logging.getLogger("kbroker.collector")

CHECK_EVERY_S = 1.0  # how often the task looks for a full collection that has happened
WALK_ALL_EVERY_S = 600.0  # the frozen objects are walked again at least this often


class FreezeAfterFullCollections:
    """The policy, with its clock and the ``gc`` functions it calls given, for tests."""

    def __init__(self, *, clock=time.monotonic, collector=gc, allocated_blocks=sys.getallocatedblocks) -> None:
        self._clock = clock
        self._gc = collector
        self._allocated_blocks = allocated_blocks
        self._full_collections = self._count_full()
        self._walked_blocks = allocated_blocks()  # the process's blocks when everything was last walked
        self._walked_at = clock()
        self.freezes = 0
        self.thaws = 0

    def _count_full(self) -> int:
        return self._gc.get_stats()[2]["collections"]

    def check(self) -> None:
        """After a full collection: freeze its survivors, or thaw everything for the next one to walk."""
        full = self._count_full()
        if full == self._full_collections:
            return
        self._full_collections = full
        blocks = self._allocated_blocks()
        now = self._clock()
        if self._walked_blocks is not None and (
                blocks > 2 * self._walked_blocks or now - self._walked_at >= WALK_ALL_EVERY_S):
            self._gc.unfreeze()  # the next full collection walks everything, finding cycles among them
            logger.debug("unfrozen for a full walk: %d blocks, %d when last walked", blocks, self._walked_blocks)
            self._walked_at = now
            self._walked_blocks = None
            self.thaws += 1
            return
        self._gc.freeze()
        if self._walked_blocks is None:  # this collection walked everything: what it kept is the new mark
            self._walked_blocks = blocks
        self.freezes += 1


async def keep_full_collections_short(policy: FreezeAfterFullCollections | None = None) -> None:
    """Run the policy every ``CHECK_EVERY_S``, for as long as the broker serves."""
    policy = policy or FreezeAfterFullCollections()
    while True:
        await trio.sleep(CHECK_EVERY_S)
        policy.check()
