"""Which of a consumer's fetch session partitions may have something new, so that its incremental requests
read only those.

A session of 2,000 partitions of which 10 receive data would otherwise read 2,000 partitions per request
to answer 10 (Kafka reads them all; here each read is Python, ~15 us). A :class:`SessionWatch` is attached
to the session (``FetchSessionCache.attach``) and gives every partition it read a :class:`_Touch` in the
partition's ``advance_watchers`` (kbroker/replication/replica.py): when the high watermark or the log start
moves (retention, DeleteRecords) or the partition goes offline, the touch marks the partition, and wakes the
session's long poll. An incremental
request then reads the partitions it names, the touched ones, and those that still had something to give
(records left behind for want of fetch.max.bytes, an error); the others are as their last answer said and
are not answered anyway.

What touches no partition is caught by reading every partition again: when the metadata image changed since
the last full read (leaders, epochs, topics, ACLs), and, should anything else slip through, at least every
``FULL_READ_MS``. Followers' sessions are always read whole: each fetch tells the leader where the follower
is (the ISR depends on it).
"""

from __future__ import annotations

import trio

from kbroker.fetch_sessions import PartitionKey

FULL_READ_MS = 10_000


class _Touch:
    """One partition's mark in its session, set at most once (watchers forget what they fired)."""

    __slots__ = ("watch", "key", "partition", "fired")

    def __init__(self, watch: SessionWatch, key: PartitionKey, partition) -> None:
        self.watch, self.key, self.partition, self.fired = watch, key, partition, False

    def set(self) -> None:  # what the partition's Watchers call
        self.fired = True
        self.watch.touch(self.key)


class SessionWatch:
    __slots__ = ("touched", "_armed", "image", "full_read_ms", "moved")

    def __init__(self) -> None:
        self.touched: set[PartitionKey] = set()
        self._armed: dict[PartitionKey, _Touch] = {}
        self.image = None  # the metadata image at the last full read
        self.full_read_ms: int | None = None
        self.moved = trio.Event()  # set when a partition is touched: a waiting fetch reads again

    def reads_all(self, image, now_ms: int) -> bool:
        """Whether this request reads every partition of the session (and counts as the last full read)."""
        if image is self.image and self.full_read_ms is not None and now_ms - self.full_read_ms < FULL_READ_MS:
            return False
        self.image, self.full_read_ms = image, now_ms
        return True

    def touch(self, key: PartitionKey) -> None:
        self.touched.add(key)
        self.moved.set()

    def read(self, key: PartitionKey, partition, settled: bool) -> None:
        """Partition ``key`` was read (``partition``: its replica, None when answered with an error);
        ``settled``: it gave everything it had up to its high watermark, no error."""
        if settled:
            self.touched.discard(key)
        else:
            self.touched.add(key)
        touch = self._armed.get(key)
        if partition is None:
            return
        if touch is not None and not touch.fired:
            if touch.partition is partition:
                return
            touch.partition.advance_watchers.discard(touch)  # a replica opened anew (a new leadership)
        touch = self._armed[key] = _Touch(self, key, partition)
        partition.advance_watchers.add(touch)

    def forget(self, key: PartitionKey) -> None:
        self.touched.discard(key)
        touch = self._armed.pop(key, None)
        if touch is not None and not touch.fired:
            touch.partition.advance_watchers.discard(touch)

    def release(self) -> None:
        """The session is gone: its partitions keep no marks of it."""
        for key in list(self._armed):
            self.forget(key)
