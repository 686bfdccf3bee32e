"""Retention and compaction of every partition, in the background (Kafka's LogManager and LogCleaner).

Every ``log.retention.check.interval.ms`` old segments of ``delete`` topics
go; every ``log.cleaner.backoff.ms`` a ``compact`` topic whose dirty part is
at least ``min.cleanable.dirty.ratio`` of its cleanable bytes is compacted
(``__consumer_offsets`` among them).

Both run on the event loop between other work: retention only unlinks whole
segments, and a cleaning round rewrites closed segments of one partition at
a time. Where cleaning stopped is kept in memory, not in Kafka's
``cleaner-offset-checkpoint`` file: after a restart a log is cleaned from its
start again, which costs work but loses nothing.

What is old is decided on the wall reading of the ``Clock`` it is given (kbroker/log/clock.py), as
records' timestamps are wall-clock milliseconds; the rounds are paced by trio's clock, which sleeps.
"""

from __future__ import annotations

import contextlib
import logging

import trio

from kbroker.log.cleaner import clean, cleanable_range
from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.log.descriptor_cache import out_of_descriptors
from kbroker.log.offline import out_of_space

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _next_round_if_out_of_descriptors(work: str, key: tuple[str, int]):
    """Out of file descriptors or of space, a partition's retention or compaction waits for the next round;
    the broker goes on (a clean is abandoned whole, crash-safely: kbroker/log/segment_swap.py)."""
    try:
        yield
    except OSError as error:
        if not (out_of_descriptors(error) or out_of_space(error)):
            raise
        logger.warning("%s-%d: %s put off to the next round: %s", *key, work, error)


class LogMaintenance:
    def __init__(self, logs, config, clock: Clock = SYSTEM_CLOCK, offline=lambda: False) -> None:
        """``offline()``: whether the log directory went offline (a failed fsync); nothing on it is then
        deleted or rewritten, as Kafka stops its cleaner and retention on an offline directory."""
        self.logs = logs  # the LogManager: its ``logs`` dict changes as topics come and go
        self.offline = offline
        self.retention_interval_s = config.log_retention_check_interval_ms / 1000
        self.cleaner_enabled = config.log_cleaner_enable
        self.cleaner_backoff_s = config.log_cleaner_backoff_ms / 1000
        self.first_dirty: dict[tuple[str, int], int] = {}
        self.clock = clock

    def reconfigure(self, config) -> None:
        """Take a changed log.cleaner.backoff.ms (a dynamic broker config) from the next round on."""
        self.cleaner_backoff_s = config.log_cleaner_backoff_ms / 1000

    async def run(self) -> None:
        next_retention = next_cleaning = trio.current_time()
        while True:
            now = trio.current_time()
            if self.offline():
                return
            if now >= next_retention:
                next_retention = now + self.retention_interval_s
                await self.enforce_retention()
            if self.cleaner_enabled and now >= next_cleaning:
                next_cleaning = now + self.cleaner_backoff_s
                await self.compact()
            await trio.sleep(max(0.0, min(next_retention, next_cleaning if self.cleaner_enabled else next_retention)
                                 - trio.current_time()))

    async def enforce_retention(self) -> None:
        for key, log in list(self.logs.logs.items()):
            if self.offline():
                return
            if log.config.delete:
                with _next_round_if_out_of_descriptors("retention", key):
                    deleted = log.apply_retention(self.clock.wall_ms())
                    if deleted:
                        logger.info("%s-%d: retention deleted %d segment(s); log starts at %d", *key, len(deleted),
                                    log.log_start_offset)
            await trio.lowlevel.checkpoint()

    async def compact(self) -> None:
        for key, log in list(self.logs.logs.items()):
            if self.offline():
                return
            with _next_round_if_out_of_descriptors("compaction", key):
                if log.config.compact and self._worth_cleaning(key, log):
                    result = clean(log, now_ms=self.clock.wall_ms(), first_dirty_offset=self.first_dirty.get(key))
                    self.first_dirty[key] = result.next_dirty_offset
            await trio.lowlevel.checkpoint()

    def _worth_cleaning(self, key, log) -> bool:
        """The dirty share of the cleanable bytes reaches the topic's min.cleanable.dirty.ratio."""
        first_dirty, first_uncleanable = cleanable_range(log, self.clock.wall_ms(), self.first_dirty.get(key))
        if first_uncleanable <= first_dirty:
            return False
        clean_bytes = dirty_bytes = 0
        for segment in log.segments[:-1]:
            if segment.base_offset >= first_uncleanable:
                break
            if segment.base_offset >= first_dirty:
                dirty_bytes += segment.size
            else:
                clean_bytes += segment.size
        total = clean_bytes + dirty_bytes
        return total > 0 and dirty_bytes / total >= log.config.min_cleanable_dirty_ratio
