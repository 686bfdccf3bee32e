"""A partition this broker leads: its log, durability and the high watermark.

On a single node the high watermark is the durable end of the log: a batch
becomes visible to consumers once it is fsynced, which is also when an
``acks=all`` produce is answered (DESIGN.md, rule 5). Many producers share
each fsync: the first one waiting hands it to the broker's flusher thread
(kbroker/flusher.py), the others wait for it (group commit).
"""

from __future__ import annotations

import trio

from kbroker.flusher import Flusher
from log.partition_log import Log


class Partition:
    def __init__(self, topic: str, index: int, log: Log, flusher: Flusher, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self._flusher = flusher
        self._flushing: trio.Event | None = None  # set when the fsync under way is done
        self._flush_error: BaseException | None = None
        self._wanted = -1  # the highest offset someone asked to be made durable
        self._advanced = trio.Event()  # set (and replaced) whenever the high watermark moves

    @property
    def high_watermark(self) -> int:
        return self.log.recovery_point

    @property
    def last_stable_offset(self) -> int:
        return min(self.log.last_stable_offset, self.high_watermark)

    def advanced(self) -> trio.Event:
        """An event set the next time the high watermark moves (for long-polling fetches)."""
        return self._advanced

    def start_flush(self, offset: int) -> None:
        """Have everything up to ``offset`` made durable, without waiting: a flush starts now,
        or follows the one under way if that began before ``offset`` was appended."""
        self._wanted = max(self._wanted, offset)
        if self.log.recovery_point <= offset and self._flushing is None:
            self._begin_flush()

    async def wait_durable(self, offset: int) -> None:
        """Return once everything up to ``offset`` is fsynced, sharing fsyncs with other waiters."""
        self.start_flush(offset)
        while self.log.recovery_point <= offset:
            if self._flushing is None:  # the last flush failed: try again
                self._begin_flush()
            await self._flushing.wait()
            if self._flush_error is not None:
                raise self._flush_error

    def _begin_flush(self) -> None:
        self._flushing = trio.Event()
        self._flusher.submit(self.log.begin_flush(), self._flushed)

    def _flushed(self, job, error: BaseException | None) -> None:
        """The flusher's report, in the trio thread (so it lands even if every waiter was cancelled)."""
        self._flush_error = error
        if error is None:
            self.log.complete_flush(job)
        flushing, self._flushing = self._flushing, None
        # What was asked for meanwhile (and still exists: a truncation may have cut it) goes next.
        wanted = min(self._wanted, self.log.log_end_offset - 1)
        if error is None and self.log.recovery_point <= wanted:
            self._begin_flush()
        flushing.set()
        advanced, self._advanced = self._advanced, trio.Event()
        advanced.set()
