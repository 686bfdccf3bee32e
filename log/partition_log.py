"""One partition's log: an ordered run of segments in ``<topic>-<partition>/``.

Synchronous and single-owner: one thread (the broker's trio thread) appends,
reads, truncates and applies retention. The only work meant for another
thread is the fsync of :meth:`Log.begin_flush`'s job, which touches nothing
but file descriptors; the owner then records the new recovery point with
:meth:`Log.complete_flush`. Segments removed by retention or truncation keep
their descriptors open for ``file.delete.delay.ms`` so regions already handed
to a sender stay readable.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from kbroker.log.append_origin import AppendOrigin
from kbroker.log.checkpoint import fsync_directory, fsync_file, fsync_file_and_directory
from kbroker.log.config import LogConfig
from kbroker.log.descriptor_cache import DESCRIPTORS, DescriptorCache
from kbroker.log.producer_state import (
    DuplicateBatch,
    ProducerStateManager,
    delete_snapshots_after,
    delete_snapshots_before,
    load_latest_snapshot,
    read_txn_marker,
)
from kbroker.log.segment import FileRegion, LogSegment, SegmentSettings
from kbroker.log.segment_swap import complete_interrupted_swaps
from kbroker.log.txn_index import AbortedTxn
from kbroker.log.validator import ValidatedBatches
from kbroker.wire.records import (
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    iter_batches,
    stamp_base_offset,
    stamp_log_append_time,
    stamp_partition_leader_epoch,
)

logger = logging.getLogger("kbroker.log.partition_log")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
_RELATIVE_OFFSET_MAX = 2**31 - 1
_RANDOM = random.Random()


class OffsetOutOfRange(Exception):
    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class OffsetsOutOfOrder(ValueError):
    """A follower's batch does not continue the log (its base offset is behind the end)."""


class ProducerStateError(Exception):
    """The producer state refused a batch: ``error_code`` is what the client gets."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    max_timestamp: int
    offset_of_max_timestamp: int
    batch_count: int
    duplicate: bool = False  # a retried batch already in the log; offsets are the original ones
    flush_messages_reached: bool = False  # flush.messages unflushed messages: the caller should fsync now
    leader_epoch: int = -1  # the epoch a leader appended under (what its wait for replication checks); -1: none


class WriteBeforeFsyncFailed(OSError):
    """A flush job's first writes (``Log.defer_write``) failed, a full disk say: it ran no fsync, and the
    next flush tries them again. Not an fsync failure: nothing written before is in doubt."""


@dataclass
class FlushJob:
    """An fsync of everything up to ``target_offset``; ``run`` may go to a worker thread."""

    target_offset: int
    segments: list[LogSegment]
    active: LogSegment | None = None  # the active segment when the job began
    directory: str | None = None  # set when a segment was created since the last flush
    truncations: int = 0  # the log's truncation count when the job began
    epoch_checkpoint: str | None = None  # the leader-epoch checkpoint, when written without fsync since
    epoch_writes: int = 0  # how many such writes this job makes durable
    snapshots: tuple[str, ...] = ()  # producer snapshots written at rolls without fsync since (and other files)
    rolled: tuple[LogSegment, ...] = ()  # segments rolled since whose indexes are not synced yet
    writes: tuple[Callable[[], None], ...] = ()  # files to write first (Log.defer_write), off the event loop

    def run(self) -> None:
        self.write_first()
        for segment in self.segments:
            # One fsync, not three: the active segment's indexes are recovery's to rebuild.
            segment.flush(indexes=segment is not self.active)
        for segment in self.rolled:
            if segment not in self.segments:
                segment.flush_indexes()
        if self.epoch_checkpoint is not None:
            fsync_file_and_directory(self.epoch_checkpoint)
        for path in self.snapshots:
            try:
                fsync_file(path)
            except FileNotFoundError:
                pass  # deleted meanwhile with its segment: nothing to keep
        if self.directory is not None or self.snapshots:
            fsync_directory(self.directory or os.path.dirname(self.snapshots[0]))  # new names must be durable too

    def write_first(self) -> None:
        """The files the job writes before its fsyncs (or a syncfs covering them)."""
        try:
            for write in self.writes:
                write()
        except OSError as error:
            raise WriteBeforeFsyncFailed(error.errno, f"{error.strerror} (before the fsync)", error.filename) from error


def _make_directory(directory: str) -> bool:
    """Make ``directory`` (and its parents); False if it was there already."""
    try:
        os.mkdir(directory)
    except FileExistsError:
        return False
    except FileNotFoundError:
        os.makedirs(directory, exist_ok=True)
    return True


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Log:
    def __init__(self, directory: str, config: LogConfig, descriptors: DescriptorCache | None = None) -> None:
        self.directory = directory
        self.config = config
        self.descriptors = DESCRIPTORS if descriptors is None else descriptors  # where its segments' files open
        self.settings = SegmentSettings(config.index_interval_bytes, config.segment_index_bytes)
        self.segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self._truncations = 0  # bumped whenever the end moves back; flush jobs begun before count for nothing
        self._last_flush_ms = _now_ms()
        self._retired: list[tuple[int, LogSegment]] = []
        self._unsynced_files: list[str] = []  # producer snapshots (and partition.metadata) the next flush syncs
        self._deferred_writes: list[Callable[[], None]] = []  # what the next flush writes first (defer_write)
        self._unsynced_indexes: list[LogSegment] = []  # rolled segments whose indexes the next flush syncs
        self.recovered_epochs: list[tuple[int, int]] = []  # the epochs of the batches recovery checked on open
        self._active_created_ms = 0
        self._roll_jitter_ms = 0  # the active segment's share of segment.jitter.ms
        self.random = _RANDOM  # where segment.jitter.ms draws from; a test may give its own, seeded
        # Set by the LogManager: the topic id from partition.metadata and the
        # leader epoch cache kept in leader-epoch-checkpoint.
        self.topic_id = None
        self.leader_epochs = None
        self.producer_state = ProducerStateManager()
        self.created = False  # True when open() made the directory: it held nothing before
        self.directory_made = True  # False until the first write of a log opened with defer_directory
        self.on_directory_made: Callable[[Log], None] | None = None  # told once the deferred directory exists
        self.on_start_moved: Callable[[], None] | None = None  # told when retention or DeleteRecords moves the start

    # -- opening --------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        now_ms: int | None = None,
        descriptors: DescriptorCache | None = None,
        defer_directory: bool = False,
        prepared: bool = False,
    ) -> Log:
        """Open (or create) a partition directory, recovering what may be torn.

        With ``defer_directory`` a directory that is not there is made only before the log's first
        write (:meth:`make_directory`): creating thousands of partitions then costs no file system
        call but a look (on a VM disk a mkdir alone took 0.24 ms, the partition.metadata file 0.6 ms).

        Every segment from the one holding ``recovery_point`` on is checked batch
        by batch; the log is cut at the first bad batch and any segment after it
        is dropped. Segments before it are trusted and opened lazily. Segment files open on use through
        ``descriptors``, the process's descriptor cache unless given one.

        ``prepared``: the directory was made just now, holding the first segment's empty file and no other
        (kbroker/log/preparer.py); it is opened as a new one.
        """
        log = cls(directory, config or LogConfig(), descriptors)
        now_ms = _now_ms() if now_ms is None else now_ms
        log._active_created_ms = log._last_flush_ms = now_ms
        log._roll_jitter_ms = log._draw_roll_jitter()
        if defer_directory and not prepared and not os.path.isdir(directory):
            log._start_empty(log_start_offset)
            log.created = True
            log.directory_made = False
            return log
        if prepared or _make_directory(directory):
            # A directory made just now holds nothing to scan, recover or replay: creating
            # thousands of partitions then costs one mkdir each and no file until data comes.
            log._start_empty(log_start_offset)
            log.created = True
            return log
        for base_offset in log._scan_directory():
            log._add_segment(log.new_segment(base_offset))
        if log.segments:
            log.log_start_offset = max(log_start_offset, log.segments[0].base_offset)
            log._recover_from(recovery_point)
        else:
            log._start_empty(log_start_offset)
        log._load_producer_state()
        return log

    def make_directory(self) -> None:
        """Make the directory a log opened with ``defer_directory`` put off (its first write comes)."""
        if self.directory_made:
            return
        _make_directory(self.directory)
        self.directory_made = True
        if self.on_directory_made is not None:
            self.on_directory_made(self)

    def defer_write(self, write: Callable[[], None]) -> None:
        """Have the next flush with data (in the flusher's thread) call ``write`` first, which writes a file
        that needs no fsync (it can be made again) and handles its own errors."""
        self._deferred_writes.append(write)

    def _start_empty(self, log_start_offset: int) -> None:
        # A new log: nothing to recover or make durable (lost in a crash, it is simply
        # created again); its files appear with the first batch.
        segment = self.new_segment(max(log_start_offset, 0))
        segment.start_empty()
        self._add_segment(segment)
        self.log_start_offset = segment.base_offset
        self.recovery_point = segment.base_offset

    def _load_producer_state(self) -> None:
        """The newest producer snapshot at or below the log end, plus every batch after it."""
        delete_snapshots_after(self.directory, self.log_end_offset)
        found = load_latest_snapshot(self.directory, self.log_end_offset)
        state = found[1] if found is not None else ProducerStateManager()
        index = max(0, self._segment_index_for(state.end_offset))
        for segment in self.segments[index:]:
            for position, header in segment.batches_from(0):
                if header.last_offset < state.end_offset:
                    continue
                marker = None
                if header.is_control:
                    marker = read_txn_marker(segment.read_at(position, header.batch_length + LOG_OVERHEAD))
                state.replay(header, marker)
        self.producer_state = state

    def _scan_directory(self) -> list[int]:
        # A crash mid-compaction: unfinished .cleaned files go, complete .swap files replace what they cleaned.
        complete_interrupted_swaps(self.directory)
        base_offsets = []
        for name in os.listdir(self.directory):
            stem, dot, suffix = name.partition(".")
            if name.endswith((".tmp", ".cleaned", ".deleted")):
                # Leftovers of an interrupted write, clean or delete: never part of the log.
                os.unlink(os.path.join(self.directory, name))
            elif suffix == "log" and stem.isdigit():
                base_offsets.append(int(stem))
        for name in os.listdir(self.directory):
            stem, _, suffix = name.partition(".")
            if suffix in ("index", "timeindex", "txnindex") and stem.isdigit() and int(stem) not in base_offsets:
                os.unlink(os.path.join(self.directory, name))
        return sorted(base_offsets)

    def _recover_from(self, recovery_point: int) -> None:
        # Segments before the one holding the recovery point were fsynced: trusted, opened lazily.
        first = max(0, self._segment_index_for(recovery_point))
        index = first
        truncated_at = None
        while index < len(self.segments):
            segment = self.segments[index]
            expected = self.segments[index - 1].next_offset if index > first else None
            truncated = segment.recover(expected)
            self.recovered_epochs.extend(segment.recovered_epochs)
            segment.recovered_epochs = []
            if truncated:
                truncated_at = index
                break
            index += 1
        if truncated_at is not None:
            for segment in self.segments[truncated_at + 1 :]:
                logger.warning("%s: dropping segment %d after a corrupt one", self.directory, segment.base_offset)
                segment.close()
                segment.unlink()
            del self.segments[truncated_at + 1 :]
            del self._base_offsets[truncated_at + 1 :]
        if first >= len(self.segments) or self.active_segment.next_offset is None:
            self.active_segment.load_tail()
        for segment, following in zip(self.segments, self.segments[1:]):
            if segment.next_offset is None:
                segment.next_offset = following.base_offset
        if truncated_at is not None or self.log_end_offset > recovery_point:
            # What recovery kept past the recovery point may not have reached the disk (a process crash
            # leaves it in the page cache), and a cut should stay cut. Below the recovery point all was
            # fsynced before it was checkpointed: a restart after a clean stop fsyncs nothing.
            for segment in self.segments[first:]:
                segment.flush()
        self.recovery_point = self.log_end_offset
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)

    def new_segment(self, base_offset: int) -> LogSegment:
        """A segment of this log at ``base_offset`` (not yet added to it)."""
        return LogSegment(self.directory, base_offset, self.settings, self.descriptors)

    def _add_segment(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self._base_offsets.append(segment.base_offset)

    def _segment_index_for(self, offset: int) -> int:
        return bisect.bisect_right(self._base_offsets, offset) - 1

    # -- state ----------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active_segment.next_offset

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def __repr__(self) -> str:
        return f"Log({self.directory!r}, start={self.log_start_offset}, end={self.log_end_offset}, segments={len(self.segments)})"

    # -- appending ------------------------------------------------------------

    def append(
        self,
        records,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        *,
        leader_epoch: int | None = None,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Append one or more whole batches; ``origin`` decides what is checked and stamped
        (kbroker/log/append_origin.py).

        ``records`` is the bytes of whole batches, whose headers and CRC-32C are checked here, or the
        :class:`ValidatedBatches` of :func:`kbroker.log.validator.validate_produce`, whose headers are
        taken as they are: the Produce path parses each header once.

        A leader's append (``CLIENT``, ``COORDINATOR``) stamps base offsets (and ``leader_epoch``,
        and LogAppendTime when the topic asks for it) in place, so the bytes must be writable. A
        ``REPLICATION`` append keeps the batches' offsets and epochs, which must continue the log.

        A leader's batches go through the producer state first: a retried batch returns its
        original offsets with ``duplicate`` set and is not written again; a sequence gap or fenced
        epoch raises :class:`ProducerStateError`.
        """
        now_ms = _now_ms() if now_ms is None else now_ms
        if not self.directory_made:
            self.make_directory()
        if isinstance(records, ValidatedBatches):
            view, batches = memoryview(records.buffer), records.batches
        else:
            view = memoryview(records)
            batches = list(iter_batches(view, verify_crc=True))
        if origin.checks_producer_state:
            duplicate = self._check_producer_state(view, batches, origin)
            if duplicate is not None:
                return AppendResult(duplicate.first_offset, duplicate.last_offset, -1, duplicate.timestamp,
                                    duplicate.last_offset, 1, duplicate=True,
                                    leader_epoch=-1 if leader_epoch is None else leader_epoch)
        applied = []  # (header, first offset, last offset, position) per batch, for the producer state
        next_offset = self.log_end_offset
        first_offset = None
        max_timestamp, offset_of_max, first_timestamp = -1, next_offset, None
        batch_count = 0
        epoch_starts: list[tuple[int, int]] = []  # (leader epoch, first offset) where the epoch changes
        append_time = now_ms if self.config.message_timestamp_type == "LogAppendTime" else -1
        assign_offsets = origin.assigns_offsets
        for position, header in batches:
            if assign_offsets:
                stamp_base_offset(view, position, next_offset)
                if leader_epoch is not None:
                    stamp_partition_leader_epoch(view, position, leader_epoch)
                if append_time != -1:
                    stamp_log_append_time(view, position, append_time)
                base_offset = next_offset
            else:
                base_offset = header.base_offset
                if base_offset < next_offset:
                    raise OffsetsOutOfOrder(f"batch at {base_offset} does not continue the log at {next_offset}")
            epoch = leader_epoch if assign_offsets else header.partition_leader_epoch
            if epoch is not None and epoch >= 0 and (not epoch_starts or epoch_starts[-1][0] != epoch):
                epoch_starts.append((epoch, base_offset))
            last_offset = base_offset + header.last_offset_delta
            applied.append((header, base_offset, last_offset, position))
            timestamp = append_time if append_time != -1 else header.max_timestamp
            if timestamp > max_timestamp:
                max_timestamp, offset_of_max = timestamp, last_offset
            if first_timestamp is None:
                first_timestamp = timestamp
            if first_offset is None:
                first_offset = base_offset
            next_offset = last_offset + 1
            batch_count += 1
        if first_offset is None:
            raise ValueError("nothing to append")
        last_offset = next_offset - 1
        # Each step that writes can fail for space (a full disk) and leaves nothing of this append behind:
        # the epochs are restored, a roll is tried again next time, a partial batch is cut off.
        if self.leader_epochs is not None and epoch_starts:
            self.leader_epochs.assign_many(epoch_starts)
        self._maybe_roll(len(view), first_offset, last_offset, now_ms)
        self.active_segment.append(view, last_offset, max_timestamp, offset_of_max, first_timestamp, first_offset)
        self._update_producer_state(view, applied)
        # Kafka's UnifiedLog.append flushes here; the fsync is the caller's to run off its thread.
        reached = self.unflushed_messages >= self.config.flush_messages
        return AppendResult(first_offset, last_offset, append_time, max_timestamp, offset_of_max, batch_count,
                            flush_messages_reached=reached, leader_epoch=-1 if leader_epoch is None else leader_epoch)

    def _check_producer_state(self, view, batches, origin: AppendOrigin) -> DuplicateBatch | None:
        for position, header in batches:
            if header.producer_id < 0:
                continue
            marker = read_txn_marker(view, position) if header.is_control else None
            validation = self.producer_state.validate(header, is_from_client=origin.checks_sequences, marker=marker)
            if validation.duplicate is not None:
                if len(batches) != 1:
                    raise ProducerStateError(validation.error or 0, "a duplicate batch among several")
                return validation.duplicate
            if validation.error:
                raise ProducerStateError(validation.error, validation.message)
        return None

    def _update_producer_state(self, view, applied) -> None:
        state = self.producer_state
        for header, first_offset, last_offset, position in applied:
            marker = read_txn_marker(view, position) if header.is_control else None
            completed = state.update(header, first_offset, last_offset, marker=marker)
            if completed is not None and completed.is_aborted:
                aborted = AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, state.last_stable_offset(completed))
                self.active_segment.append_aborted(aborted)

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided (the replica layer bounds it by the high watermark)."""
        first_unstable = self.producer_state.first_unstable_offset()
        return self.log_end_offset if first_unstable is None else first_unstable

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), for read_committed fetches."""
        found: list[AbortedTxn] = []
        for segment in self.segments[max(0, self._segment_index_for(fetch_offset)) :]:
            result = segment.collect_aborted(fetch_offset, upper_bound)
            found.extend(result.aborted)
            if result.is_complete:
                break
        return found

    def _maybe_roll(self, size: int, first_offset: int, last_offset: int, now_ms: int) -> None:
        active = self.active_segment
        offsets_overflow = last_offset - active.base_offset > _RELATIVE_OFFSET_MAX
        if active.size == 0 and not offsets_overflow:
            return
        too_big = active.size + size > self.config.segment_bytes
        too_old = now_ms - self._active_created_ms >= self.config.segment_ms - self._roll_jitter_ms
        if too_big or too_old or offsets_overflow or active.indexes_full:
            self.roll(now_ms, first_offset)

    def _draw_roll_jitter(self) -> int:
        """How much earlier than segment.ms a new segment rolls (Kafka's LogConfig.randomSegmentJitter), so
        that partitions created together do not all roll at once."""
        jitter_ms = min(self.config.segment_jitter_ms, self.config.segment_ms)
        return self.random.randrange(jitter_ms) if jitter_ms > 0 else 0

    def roll(self, now_ms: int | None = None, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset."""
        base_offset = self.log_end_offset if base_offset is None else base_offset
        previous = self.active_segment
        if previous.size == 0 and base_offset == previous.base_offset:
            return previous
        # Flushes left its indexes unsynced while it was active; the next flush syncs them (off the
        # appending thread), and until then the checkpointed recovery point stays before the segment
        # (trusted_recovery_point), so that a restart rebuilds them rather than trusting them.
        previous.write_indexes()
        self._unsynced_indexes.append(previous)
        segment = self.new_segment(base_offset)
        segment.next_offset = base_offset
        self._add_segment(segment)
        self._active_created_ms = _now_ms() if now_ms is None else now_ms
        self._roll_jitter_ms = self._draw_roll_jitter()
        # As Kafka: a producer snapshot per segment bounds the replay after a restart. Written here, made
        # durable by the next flush, off the appending thread (Kafka flushes it in the background too); one
        # lost in a crash, or torn (its CRC tells), only makes recovery replay from an older one.
        if self.producer_state.end_offset == base_offset:
            self._unsynced_files.append(self.producer_state.take_snapshot(self.directory, durable=False))
        return segment

    # -- reading --------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int, upper_bound: int | None = None, min_one_batch: bool = True) -> FileRegion | None:
        """Batches from the one holding ``start_offset`` as one file region.

        At most ``max_bytes`` unless the first batch alone is larger and
        ``min_one_batch`` (Kafka's rule, so a consumer is never stuck); never
        past ``upper_bound`` (the high watermark or last stable offset). None
        when there is nothing to read yet.
        """
        end = self.log_end_offset
        if start_offset < self.log_start_offset or start_offset > end:
            raise OffsetOutOfRange(start_offset, self.log_start_offset, end)
        if upper_bound is not None and start_offset >= upper_bound:
            return None
        index = self._segment_index_for(start_offset)
        while 0 <= index < len(self.segments):
            region = self.segments[index].read(start_offset, max_bytes, upper_bound, min_one_batch)
            if region is not None:
                return region
            index += 1
        return None

    def read_bytes(self, start_offset: int, max_bytes: int, upper_bound: int | None = None, min_one_batch: bool = True) -> bytes:
        region = self.read(start_offset, max_bytes, upper_bound, min_one_batch)
        return b"" if region is None else region.read()

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: (timestamp, offset) for a timestamp or EARLIEST/LATEST/MAX_TIMESTAMP."""
        if timestamp == EARLIEST_TIMESTAMP:
            return -1, self.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return -1, self.log_end_offset
        if timestamp == MAX_TIMESTAMP:
            best = None
            for segment in self.segments:
                if segment.next_offset is not None and segment.next_offset <= self.log_start_offset:
                    continue
                if segment.max_timestamp == -1 and segment.size:
                    segment.load_tail()
                if best is None or segment.max_timestamp > best[0]:
                    found = segment.find_max_timestamp(self.log_start_offset)
                    if found is not None and (best is None or found[0] > best[0]):
                        best = found
            return best
        for segment in self.segments:
            if segment.next_offset is not None and segment.next_offset <= self.log_start_offset:
                continue
            if segment.max_timestamp == -1:
                segment.load_tail()
            if segment.max_timestamp < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    # -- moving the ends ------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove everything from ``offset`` on (a follower diverged from its leader)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self._truncations += 1
        keep = self._segment_index_for(offset)
        for segment in self.segments[keep + 1 :]:
            self._retire(segment)
        del self.segments[keep + 1 :]
        del self._base_offsets[keep + 1 :]
        self.active_segment.truncate_to(offset)
        if self.leader_epochs is not None:
            self.leader_epochs.truncate_from_end(self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self._load_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.make_directory()
        self._truncations += 1
        for segment in self.segments:
            self._retire(segment)
        self.segments, self._base_offsets = [], []
        segment = self.new_segment(offset)
        segment.next_offset = offset
        self._add_segment(segment)
        # Its file now, not at the first append: a restart finds the log starting at ``offset`` (a Raft store
        # whose snapshot covers everything is such a log); the next flush syncs it and its name.
        with open(segment.log_path, "ab"):
            pass
        self._unsynced_files.append(segment.log_path)
        self.log_start_offset = self.recovery_point = offset
        if self.leader_epochs is not None:
            self.leader_epochs.clear()
        delete_snapshots_after(self.directory, -1)
        self.producer_state = ProducerStateManager(end_offset=offset)

    def advance_log_start_offset(self, offset: int) -> None:
        """DeleteRecords: records below ``offset`` are gone for readers at once."""
        if offset > self.log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        moved = offset > self.log_start_offset
        self.log_start_offset = max(self.log_start_offset, offset)
        if self.leader_epochs is not None:
            self.leader_epochs.truncate_from_start(self.log_start_offset)
        if moved:
            self._start_moved()

    def _start_moved(self) -> None:
        if self.on_start_moved is not None:
            self.on_start_moved()

    def apply_retention(self, now_ms: int | None = None, high_watermark: int | None = None) -> list[int]:
        """Delete whole old segments; returns their base offsets.

        A segment goes when it lies wholly below the log start offset, when its
        newest timestamp is older than ``retention.ms``, or while the log is
        over ``retention.bytes`` by at least its size; only a prefix of the log
        is ever deleted. The active segment goes too by age or size, as in Kafka
        (UnifiedLog.deleteSegments), once the ``high_watermark`` given has reached
        the log end: a new, empty one is rolled first and the log starts there.
        """
        now_ms = _now_ms() if now_ms is None else now_ms
        config = self.config
        excess = self.size_bytes - config.retention_bytes if config.retention_bytes >= 0 else -1
        deleted = []
        while self.segments:
            segment = self.segments[0]
            if segment.max_timestamp == -1 and segment.size:
                segment.load_tail()
            expired = config.delete and config.retention_ms >= 0 and now_ms - segment.max_timestamp > config.retention_ms
            oversized = config.delete and excess >= segment.size > 0
            if len(self.segments) == 1:  # the active one
                if not ((expired or oversized) and segment.size and high_watermark is not None
                        and high_watermark >= self.log_end_offset):
                    break
                following = self.roll(now_ms)
                # Its file now, as after a full truncation: a restart finds the log starting there, not at 0.
                with open(following.log_path, "ab"):
                    pass
                self._unsynced_files.append(following.log_path)
            following = self.segments[1]
            below_start = following.base_offset <= self.log_start_offset
            if not (below_start or expired or oversized):
                break
            excess -= segment.size
            deleted.append(segment.base_offset)
            self._retire(segment, now_ms)
            del self.segments[0]
            del self._base_offsets[0]
            self.log_start_offset = max(self.log_start_offset, following.base_offset)
        if deleted:
            delete_snapshots_before(self.directory, self.segments[0].base_offset)
            self._start_moved()
        self.close_retired(now_ms)
        return deleted

    def replace_segments(self, old_base_offsets, new_segments: list[LogSegment], now_ms: int | None = None) -> None:
        """Put ``new_segments`` in place of the consecutive closed segments at ``old_base_offsets``.

        Compaction's swap, once the files are in place. The replaced segments'
        descriptors stay open for ``file.delete.delay.ms``, as after retention.
        """
        old = sorted(old_base_offsets)
        first = bisect.bisect_left(self._base_offsets, old[0]) if old else 0
        last = first + len(old)
        if not old or self._base_offsets[first:last] != old or last >= len(self.segments):
            raise ValueError(f"{old} is not a run of closed segments of {self!r}")
        new = sorted(new_segments, key=lambda segment: segment.base_offset)
        if new and (new[0].base_offset < old[0] or new[-1].base_offset >= self._base_offsets[last]):
            raise ValueError(f"segments at {[segment.base_offset for segment in new]} do not fit in place of {old}")
        deadline = (_now_ms() if now_ms is None else now_ms) + self.config.file_delete_delay_ms
        self._retired.extend((deadline, segment) for segment in self.segments[first:last])
        self._forget_unsynced_indexes(self.segments[first:last])
        self.segments[first:last] = new
        self._base_offsets[first:last] = [segment.base_offset for segment in new]

    def _forget_unsynced_indexes(self, gone: list[LogSegment]) -> None:
        """Segments leaving the log need no index sync (and must not hold the recovery point back)."""
        self._unsynced_indexes = [segment for segment in self._unsynced_indexes if segment not in gone]

    def _retire(self, segment: LogSegment, now_ms: int | None = None) -> None:
        self._forget_unsynced_indexes([segment])
        segment.unlink()
        now_ms = _now_ms() if now_ms is None else now_ms  # the caller's clock, as close_retired's
        self._retired.append((now_ms + self.config.file_delete_delay_ms, segment))

    def close_retired(self, now_ms: int | None = None, everything: bool = False) -> None:
        now_ms = _now_ms() if now_ms is None else now_ms
        keep = []
        for deadline, segment in self._retired:
            if everything or deadline <= now_ms:
                segment.close()
            else:
                keep.append((deadline, segment))
        self._retired = keep

    # -- durability -----------------------------------------------------------

    def begin_flush(self) -> FlushJob:
        """What to fsync to make everything appended so far durable."""
        first = max(0, self._segment_index_for(self.recovery_point))
        segments = list(self.segments[first:])
        created = any(segment.base_offset >= self.recovery_point for segment in segments)
        epochs = self.leader_epochs
        epoch_writes = epochs.unsynced_writes if epochs is not None else 0
        return FlushJob(
            self.log_end_offset, segments, self.active_segment, self.directory if created else None, self._truncations,
            epochs.checkpoint_file.path if epoch_writes else None, epoch_writes, tuple(self._unsynced_files),
            tuple(self._unsynced_indexes), tuple(self._deferred_writes),
        )

    def complete_flush(self, job: FlushJob, now_ms: int | None = None) -> None:
        # An fsync that ran across a truncation may have synced bytes that are gone
        # and missed ones appended in their place: it proves nothing.
        if job.truncations == self._truncations and job.target_offset > self.recovery_point:
            self.recovery_point = min(job.target_offset, self.log_end_offset)
        if job.epoch_writes and self.leader_epochs is not None:
            self.leader_epochs.synced(job.epoch_writes)
        del self._unsynced_files[:len(job.snapshots)]
        del self._deferred_writes[:len(job.writes)]
        self._unsynced_indexes = [segment for segment in self._unsynced_indexes if segment not in job.rolled]
        self._last_flush_ms = _now_ms() if now_ms is None else now_ms  # flush.ms counts from here

    def flush(self) -> None:
        """fsync here and now (the owner's thread blocks)."""
        if self.recovery_point >= self.log_end_offset and not self._unsynced_indexes and not self._unsynced_files:
            return
        job = self.begin_flush()
        job.run()
        self.complete_flush(job)

    @property
    def trusted_recovery_point(self) -> int:
        """The recovery point to checkpoint: below it a restart trusts the segments and their indexes as
        they are. The recovery point, or the base of the first rolled segment whose indexes no flush has
        synced yet, if that is lower."""
        return min([self.recovery_point, *(segment.base_offset for segment in self._unsynced_indexes)])

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended since the last flush (Kafka's LocalLog.unflushedMessages)."""
        return max(0, self.log_end_offset - self.recovery_point)

    def flush_due(self, now_ms: int | None = None) -> bool:
        """Whether ``flush.ms`` says the unflushed data should be fsynced now (Kafka's
        LogManager.flushDirtyLogs asks this of every log each ``log.flush.scheduler.interval.ms``)."""
        now_ms = _now_ms() if now_ms is None else now_ms
        return self.recovery_point < self.log_end_offset and now_ms - self._last_flush_ms >= self.config.flush_ms

    def close(self, snapshot: bool = True) -> None:
        """Close the files, after a producer snapshot at the log end (a clean restart replays nothing);
        ``snapshot=False`` for a log about to be deleted, which no restart reads."""
        if snapshot and self.producer_state.end_offset == self.log_end_offset and len(self.producer_state):
            self.producer_state.take_snapshot(self.directory)
        for segment in self.segments:
            segment.close()
        self.close_retired(everything=True)
