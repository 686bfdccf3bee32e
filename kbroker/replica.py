"""A partition this broker leads: its log, durability and the high watermark.

On a single node the high watermark is the durable end of the log: a batch
becomes visible to consumers once it is fsynced, which is also when an
``acks=all`` produce is answered (DESIGN.md, rule 5). Many producers share
each fsync: the first one waiting runs it in a worker thread, the others
wait for it (group commit).
"""

from __future__ import annotations

import trio

from log.partition_log import Log


class Partition:
    def __init__(self, topic: str, index: int, log: Log, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self._flushing: trio.Event | None = None
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

    async def wait_durable(self, offset: int) -> None:
        """Return once everything up to ``offset`` is fsynced, sharing fsyncs with other waiters."""
        while self.log.recovery_point <= offset:
            if self._flushing is not None:
                await self._flushing.wait()
                continue
            self._flushing = trio.Event()
            try:
                job = self.log.begin_flush()
                await trio.to_thread.run_sync(job.run)
                self.log.complete_flush(job)
            finally:
                flushing, self._flushing = self._flushing, None
                flushing.set()
            advanced, self._advanced = self._advanced, trio.Event()
            advanced.set()
