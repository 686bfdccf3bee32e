"""Retention and compaction of every partition, in the background (Kafka's LogManager and LogCleaner).

Every ``log.retention.check.interval.ms`` old segments of ``delete`` topics
go; every ``log.cleaner.backoff.ms`` a ``compact`` topic whose dirty part is
at least ``min.cleanable.dirty.ratio`` of its cleanable bytes is compacted
(``__consumer_offsets`` among them). Every ``producer.id.expiration.check.interval.ms`` (Kafka's internal
setting, 10 minutes) producers idle for ``producer.id.expiration.ms`` are forgotten, as Kafka's
LogManager removes expired producers: a producer in an open transaction is kept.

Both run on the event loop between other work: retention only unlinks whole
segments, and a cleaning round rewrites closed segments of one partition at
a time. Where cleaning stopped is kept in memory, not in Kafka's
``cleaner-offset-checkpoint`` file: after a restart a log is cleaned from its
start again, which costs work but loses nothing.

What is old is decided on the wall reading of the ``Clock`` it is given (kbroker/log/clock.py), as
records' timestamps are wall-clock milliseconds; the rounds are paced by trio's clock, which sleeps. A test
that moved the clock ahead (kbroker/testing/time_travel.py) has one round of each run at once
(:meth:`LogMaintenance.run_due_now`).
"""

from __future__ import annotations

import contextlib
import logging

import trio

from kbroker.log.cleaner import clean, cleanable_range
from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.log.descriptor_cache import out_of_descriptors
from kbroker.log.offline import out_of_space
from kbroker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

logger = logging.getLogger(__name__)
_PRODUCER_EXPIRY_CHECK_S = 600  # Kafka's producer.id.expiration.check.interval.ms (internal), 10 minutes


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
    def __init__(self, logs, config, clock: Clock = SYSTEM_CLOCK, offline=lambda: False,
                 high_watermark=lambda key: None) -> None:
        """``offline()``: whether the log directory went offline (a failed fsync); nothing on it is then
        deleted or rewritten, as Kafka stops its cleaner and retention on an offline directory.
        ``high_watermark((topic, partition))``: the partition's, or None where it is not known (then retention
        keeps the active segment; with it, the active segment goes too once all of it is old, as in Kafka)."""
        self.logs = logs  # the LogManager: its ``logs`` dict changes as topics come and go
        self.offline = offline
        self.high_watermark = high_watermark
        self.retention_interval_s = config.log_retention_check_interval_ms / 1000
        self.cleaner_enabled = config.log_cleaner_enable
        self.cleaner_backoff_s = config.log_cleaner_backoff_ms / 1000
        self.first_dirty: dict[tuple[str, int], int] = {}
        self.clock = clock
        self.producer_id_expiration_ms = getattr(config, "producer_id_expiration_ms", DEFAULT_PRODUCER_ID_EXPIRATION_MS)

    def reconfigure(self, config) -> None:
        """Take a changed log.cleaner.backoff.ms and producer.id.expiration.ms (dynamic broker configs) from the
        next round on."""
        self.cleaner_backoff_s = config.log_cleaner_backoff_ms / 1000
        self.producer_id_expiration_ms = config.producer_id_expiration_ms

    async def run(self) -> None:
        next_retention = next_cleaning = next_expiry = trio.current_time()
        while True:
            now = trio.current_time()
            if self.offline():
                return
            if now >= next_retention:
                next_retention = now + self.retention_interval_s
                await self.enforce_retention()
            if now >= next_expiry:
                next_expiry = now + _PRODUCER_EXPIRY_CHECK_S
                self.remove_expired_producers()
            if self.cleaner_enabled and now >= next_cleaning:
                next_cleaning = now + self.cleaner_backoff_s
                await self.compact()
            await trio.sleep(max(0.0, min(next_retention, next_expiry, next_cleaning if self.cleaner_enabled
                                          else next_retention) - trio.current_time()))

    async def run_due_now(self) -> None:
        """One round of each, at the clock's time now, whatever the intervals: expired producer ids, retention (with
        the descriptors of deleted segments closed once file.delete.delay.ms went by), compaction. For a test
        that moved the clock ahead (kbroker/testing/time_travel.py)."""
        if self.offline():
            return
        self.remove_expired_producers()
        await self.enforce_retention()
        if self.cleaner_enabled:
            await self.compact()

    def remove_expired_producers(self) -> None:
        """Forget the producers idle for producer.id.expiration.ms in every log (not those in a transaction)."""
        now = self.clock.wall_ms()
        for log in list(self.logs.logs.values()):
            state = log.producer_state
            state.producer_id_expiration_ms = self.producer_id_expiration_ms  # the broker's setting, dynamic
            state.remove_expired_producers(now)

    async def enforce_retention(self) -> None:
        for key, log in list(self.logs.logs.items()):
            if self.offline():
                return
            if log.config.delete:
                with _next_round_if_out_of_descriptors("retention", key):
                    deleted = log.apply_retention(self.clock.wall_ms(), self.high_watermark(key))
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
