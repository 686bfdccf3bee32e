"""Log compaction (``cleanup.policy=compact``): Kafka's log cleaner for one partition.

:func:`clean` makes one cleaning round:

1. The dirty range runs from the first dirty offset (the caller's
   ``cleaner-offset-checkpoint`` entry, else the log start) to the first
   uncleanable offset: the active segment's base, the last stable offset, and
   the first segment whose newest timestamp is within ``min.compaction.lag.ms``
   of now, whichever comes first. The lag is judged per segment, as Kafka does.
2. An offset map (key -> latest offset) is built over the dirty range,
   skipping aborted transactional batches and control batches. It holds at
   most ``max_offset_map_entries`` keys; when full, the round ends early and
   ``next_dirty_offset`` says where the next one starts.
3. Every closed segment below the map's end is rewritten, in groups of
   consecutive segments totalling at most ``segment.bytes`` (and the index
   limits), each group into one segment that keeps the group's first base
   offset, and swapped in crash-safely (:mod:`log.segment_swap`).

What survives, per batch (records keep their offsets; batches keep their base
offset, last offset, producer id, epoch, base sequence, leader epoch,
timestamp type and compression; a batch with nothing removed and nothing to
stamp is copied byte for byte):

- A record survives when it holds the latest offset for its key in the map
  (or lies past the map's end) and has a value, or is a tombstone whose delete
  horizon has not passed.
- Delete horizon (KIP-534): the first clean that keeps a tombstone stamps its
  batch with ``now + delete.retention.ms`` (in baseTimestamp, attribute bit
  0x40; record timestamps are unchanged), and a later clean at or past that
  time drops it. So ``delete.retention.ms`` counts from the first clean that
  saw the tombstone, not from when it was written.
- Records without a key: Kafka refuses them on a compacted topic at produce
  time; the cleaner drops any it meets in the cleaned range, as Kafka's does.
- Transactions: records of aborted transactions are dropped. An ABORT marker
  stays while this round still saw batches of its transaction; a COMMIT
  marker stays while the round saw any batch of its transaction. A marker no
  longer needed is stamped with a delete horizon first and dropped by a clean
  past it, so consumers that fetched the data in between still see it.
  Aborted transactions come from the log's transaction indexes unless the
  caller passes them: any iterable of ``(producer_id, first_offset,
  last_offset[, last_stable_offset])``. Those whose ABORT marker a cleaned
  segment keeps go into its ``.txnindex`` (with last stable offset 0 when none
  was given: never claims the search is complete, so always safe).
- Empty batches are kept where Kafka keeps them, as a bare 61-byte header with
  the original offsets and producer fields: the batch holding an active
  producer's last data offset (or, with no data offset, its marker of the
  current epoch), so sequence numbers and epochs survive for idempotence; and
  the batch ending the round. We also keep the last batch of every group
  (Kafka does not): a cleaned segment then always reaches the next offset of
  the last segment it replaces, which crash recovery relies on.
  Active producers come from the log's producer state unless the caller passes
  a mapping ``producer_id -> (last_data_offset, producer_epoch)`` (or objects
  with those attributes; a negative last data offset means none).

Compaction is one of the few places that decode records (DESIGN.md, rule 2).
The clean is synchronous and must run on the log's owning thread: it reads
closed segments and replaces them in :attr:`Log.segments`
(:meth:`Log.replace_segments`). An exception before a swap begins removes the
partial files and leaves the log as it was; one during a swap leaves files
that :meth:`Log.open` completes, and the caller should reopen the log (Kafka
takes the directory offline). Deciding when a log needs cleaning
(``min.cleanable.dirty.ratio``, ``max.compaction.lag.ms``) and keeping the
``cleaner-offset-checkpoint`` are the caller's job.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.log.segment import LogSegment
from kbroker.log.segment_swap import CLEANED_SUFFIX, remove_segment_files, swap_in
from kbroker.log.txn_index import AbortedTxn
from kbroker.wire.records import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    ControlRecordType,
    control_record_type,
    decode_records,
    iter_batches,
    rebuild_batch,
)

if TYPE_CHECKING:
    from kbroker.log.partition_log import Log

logger = logging.getLogger("kbroker.log.cleaner")

DEFAULT_MAX_OFFSET_MAP_ENTRIES = 1_000_000
_READ_CHUNK_BYTES = 1024 * 1024
_RELATIVE_OFFSET_MAX = 2**31 - 1
_OFFSET_INDEX_ENTRY_BYTES = 8
_TIME_INDEX_ENTRY_BYTES = 12


@dataclass
class CleanResult:
    first_dirty_offset: int
    first_uncleanable_offset: int
    # Where the next round's dirty range starts: checkpoint it (cleaner-offset-checkpoint).
    next_dirty_offset: int
    replaced: list[tuple[list[int], int]] = field(default_factory=list)  # (old base offsets, new base offset)
    keys_mapped: int = 0
    records_read: int = 0
    records_retained: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    keyless_records_dropped: int = 0
    aborted_batches_dropped: int = 0
    markers_dropped: int = 0


def cleanable_range(
    log: Log, now_ms: int, first_dirty_offset: int | None = None, last_stable_offset: int | None = None
) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset), Kafka's cleanableOffsets."""
    start = log.log_start_offset
    first_dirty = start if first_dirty_offset is None else first_dirty_offset
    if first_dirty < start or first_dirty > log.log_end_offset:
        # Truncated or removed under the checkpoint: the whole log is dirty again.
        first_dirty = start
    bounds = [log.active_segment.base_offset, log.last_stable_offset if last_stable_offset is None else last_stable_offset]
    lag_ms = max(log.config.min_compaction_lag_ms, 0)
    if lag_ms > 0:
        for segment, following in zip(log.segments, log.segments[1:]):
            if following.base_offset <= first_dirty:
                continue
            if segment.max_timestamp == -1 and segment.size:
                segment.load_tail()
            if segment.max_timestamp > now_ms - lag_ms:
                bounds.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(bounds))


def clean(
    log: Log,
    *,
    now_ms: int,
    first_dirty_offset: int | None = None,
    last_stable_offset: int | None = None,
    aborted_transactions: Iterable | None = None,
    active_producers: Mapping | None = None,
    max_offset_map_entries: int = DEFAULT_MAX_OFFSET_MAP_ENTRIES,
) -> CleanResult:
    """One cleaning round over ``log``; see the module documentation."""
    if not log.config.compact:
        raise ValueError(f"cleanup.policy={log.config.cleanup_policy} does not compact")
    first_dirty, first_uncleanable = cleanable_range(log, now_ms, first_dirty_offset, last_stable_offset)
    result = CleanResult(first_dirty, first_uncleanable, first_dirty)
    if first_uncleanable <= first_dirty:
        return result
    if aborted_transactions is None:
        aborted_transactions = log.collect_aborted_transactions(0, first_uncleanable)
    aborted = sorted((tuple(entry) for entry in aborted_transactions), key=lambda entry: entry[1])
    offset_map = _build_offset_map(log, first_dirty, first_uncleanable, aborted, max_offset_map_entries)
    end_offset = offset_map.latest_offset + 1
    result.next_dirty_offset = end_offset
    result.keys_mapped = len(offset_map.offsets)
    cleaner = _GroupCleaner(
        log, offset_map, _TransactionTracker(aborted), _last_records(log, active_producers), now_ms, first_uncleanable, result
    )
    segments = [segment for segment in log.segments[:-1] if segment.base_offset < end_offset]
    for group in _group_segments(segments, log.config.segment_bytes, log.config.segment_index_bytes, first_uncleanable):
        cleaner.clean_group(group)
    logger.info(
        "%s: cleaned [%d, %d): %d of %d records kept, %d -> %d bytes",
        log.directory, first_dirty, end_offset, result.records_retained, result.records_read, result.bytes_read, result.bytes_written,
    )
    return result


# -- the offset map ---------------------------------------------------------------


class _OffsetMap:
    def __init__(self) -> None:
        self.offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def latest_for(self, key: bytes) -> int:
        return self.offsets.get(key, -1)


def _build_offset_map(log: Log, start: int, end: int, aborted: list, max_entries: int) -> _OffsetMap:
    offset_map = _OffsetMap()
    tracker = _TransactionTracker(entry for entry in aborted if entry[2] >= start and entry[1] < end)
    dirty = [
        segment
        for segment, following in zip(log.segments, log.segments[1:] + [None])
        if segment.base_offset < end and (following is None or following.base_offset > start)
    ]
    next_starts = [segment.base_offset for segment in dirty[1:]] + [end]
    for segment, next_start in zip(dirty, next_starts):
        _, position = segment.offset_index.lookup(start)
        for header, data in _read_batches(segment, position):
            if header.base_offset >= end:
                break
            full = len(offset_map.offsets) + header.record_count > max_entries
            if full and offset_map.latest_offset >= start:
                return offset_map
            if header.is_control:
                tracker.on_control_batch(header, _control_type(data))
            elif not tracker.on_data_batch(header):
                for record in decode_records(data)[1]:
                    offset = header.base_offset + record.offset_delta
                    if record.key is not None and start <= offset < end:
                        offset_map.offsets[record.key] = offset
            if header.last_offset >= start:
                offset_map.latest_offset = max(offset_map.latest_offset, min(header.last_offset, end - 1))
        # Offsets compacted away at the segment's end still count as mapped.
        offset_map.latest_offset = max(offset_map.latest_offset, next_start - 1)
    return offset_map


# -- transactions -----------------------------------------------------------------


class _TransactionTracker:
    """Which transactional batches are aborted and which markers are still needed.

    Kafka's CleanedTransactionMetadata, fed the aborted transactions sorted by
    first offset and the batches in offset order.
    """

    def __init__(self, aborted: Iterable) -> None:
        self._pending = sorted(aborted, key=lambda entry: entry[1])
        self._next = 0
        self._ongoing_aborted: dict[int, list] = {}  # producer id -> [entry, offset of a batch seen or None]
        self._ongoing_committed: set[int] = set()
        self.kept_aborts: list = []  # entries whose ABORT marker the current output keeps

    def _start_up_to(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next][1] <= offset:
            entry = self._pending[self._next]
            self._next += 1
            current = self._ongoing_aborted.get(entry[0])
            if current is None or current[0][2] < entry[1]:
                self._ongoing_aborted[entry[0]] = [entry, None]

    def on_data_batch(self, header: BatchHeader) -> bool:
        """Whether the batch belongs to an aborted transaction (and can go)."""
        self._start_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None and ongoing[0][2] < header.base_offset:
            # Its marker lies behind us yet was never read: compacted away, the transaction is over.
            del self._ongoing_aborted[header.producer_id]
            ongoing = None
        if ongoing is not None:
            ongoing[1] = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, control_type: int | None) -> bool:
        """Whether the marker is no longer needed (it may then go after its delete horizon)."""
        self._start_up_to(header.last_offset)
        if control_type is None:
            return True  # emptied by an earlier clean
        producer_id = header.producer_id
        if control_type == ControlRecordType.ABORT:
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing[1] is not None:
                self.kept_aborts.append(ongoing[0])
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False


def _control_type(data) -> int | None:
    records = decode_records(data)[1]
    return control_record_type(records[0].key) if records else None


def _last_records(log: Log, active_producers: Mapping | None) -> dict[int, tuple[int | None, int]]:
    """producer id -> (last data offset or None, epoch), Kafka's lastRecordsOfActiveProducers."""
    if active_producers is None:
        active_producers = log.producer_state.producer_entries()
    last_records = {}
    for producer_id, entry in active_producers.items():
        if isinstance(entry, tuple):
            last_data_offset, producer_epoch = entry
        else:
            last_data_offset, producer_epoch = entry.last_data_offset, entry.producer_epoch
        if last_data_offset is not None and last_data_offset < 0:
            last_data_offset = None
        last_records[producer_id] = (last_data_offset, producer_epoch)
    return last_records


# -- grouping and reading -----------------------------------------------------------


def _group_segments(segments: list[LogSegment], max_bytes: int, max_index_bytes: int, first_uncleanable: int) -> list[list[LogSegment]]:
    """Consecutive segments whose sizes (log and each index) fit one segment, Kafka's groupSegmentsBySize."""
    groups = []
    index = 0
    while index < len(segments):
        group = [segments[index]]
        log_bytes, offset_index_bytes, time_index_bytes = _sizes(segments[index])
        index += 1
        while index < len(segments):
            candidate = segments[index]
            candidate_log, candidate_offset_index, candidate_time_index = _sizes(candidate)
            last_offset = segments[index + 1].base_offset - 1 if index + 1 < len(segments) else first_uncleanable - 1
            fits = (
                log_bytes + candidate_log <= max_bytes
                and offset_index_bytes + candidate_offset_index <= max_index_bytes
                and time_index_bytes + candidate_time_index <= max_index_bytes
                and (candidate_log == 0 or last_offset - group[0].base_offset <= _RELATIVE_OFFSET_MAX)
            )
            if not fits:
                break
            group.append(candidate)
            log_bytes += candidate_log
            offset_index_bytes += candidate_offset_index
            time_index_bytes += candidate_time_index
            index += 1
        groups.append(group)
    return groups


def _sizes(segment: LogSegment) -> tuple[int, int, int]:
    return (
        segment.size,
        segment.offset_index.entries * _OFFSET_INDEX_ENTRY_BYTES,
        segment.time_index.entries * _TIME_INDEX_ENTRY_BYTES,
    )


def _read_batches(segment: LogSegment, position: int = 0):
    """(header, batch bytes) for each whole batch from ``position``, read in large chunks."""
    size = segment.size
    while position < size:
        chunk = memoryview(segment.read_at(position, min(_READ_CHUNK_BYTES, size - position)))
        consumed = 0
        for batch_position, header in iter_batches(chunk, allow_partial_tail=True):
            consumed = batch_position + header.size
            yield header, chunk[batch_position:consumed]
        if consumed == 0:
            # One batch larger than a chunk.
            header = BatchHeader.read(segment.read_at(position, HEADER_SIZE))
            data = memoryview(segment.read_at(position, header.size))
            consumed = len(data)
            for _, header in iter_batches(data):
                yield header, data
        position += consumed


# -- rewriting --------------------------------------------------------------------------


class _GroupCleaner:
    def __init__(self, log: Log, offset_map: _OffsetMap, tracker: _TransactionTracker, last_records, now_ms: int, round_end: int, result: CleanResult) -> None:
        self.log = log
        self.offset_map = offset_map
        self.tracker = tracker
        self.last_records = last_records
        self.now_ms = now_ms
        self.round_end = round_end
        self.delete_retention_ms = log.config.delete_retention_ms
        self.result = result

    def clean_group(self, group: list[LogSegment]) -> None:
        """Rewrite ``group`` into one segment and swap it in."""
        log, base_offset = self.log, group[0].base_offset
        remove_segment_files(log.directory, base_offset, CLEANED_SUFFIX)  # leftovers of a failed attempt
        cleaned = _cleaned_segment(log, base_offset)
        self.tracker.kept_aborts = []
        try:
            for index, segment in enumerate(group):
                self._clean_segment_into(segment, cleaned, last_of_group=index == len(group) - 1)
            for entry in self.tracker.kept_aborts:
                cleaned.append_aborted(AbortedTxn(*entry[:4]) if len(entry) >= 4 else AbortedTxn(*entry[:3], 0))
            for index_file in (cleaned.offset_index, cleaned.time_index):
                if not os.path.exists(index_file.path):
                    index_file.rewrite([])
            cleaned.flush()
        except Exception:
            cleaned.close()
            remove_segment_files(log.directory, base_offset, CLEANED_SUFFIX)
            raise
        cleaned.close()
        swap_in(log.directory, base_offset, group)  # regions of the old segments keep reading (LogSegment.unlink)
        replacement = log.new_segment(base_offset)
        replacement.next_offset = cleaned.next_offset if cleaned.next_offset is not None else base_offset
        replacement.max_timestamp = cleaned.max_timestamp
        replacement.offset_of_max_timestamp = cleaned.offset_of_max_timestamp
        replacement.first_batch_timestamp = cleaned.first_batch_timestamp
        log.replace_segments([segment.base_offset for segment in group], [replacement], self.now_ms)
        self.result.replaced.append(([segment.base_offset for segment in group], base_offset))

    def _clean_segment_into(self, segment: LogSegment, cleaned: LogSegment, last_of_group: bool) -> None:
        previous = None
        for batch in _read_batches(segment):
            if previous is not None:
                self._clean_batch(*previous, cleaned, last_of_group=False)
            previous = batch
        if previous is not None:
            self._clean_batch(*previous, cleaned, last_of_group=last_of_group)

    def _clean_batch(self, header: BatchHeader, data, cleaned: LogSegment, last_of_group: bool) -> None:
        result = self.result
        result.bytes_read += header.size
        control_type = None
        if header.is_control:
            control_type = _control_type(data)
            discardable = self.tracker.on_control_batch(header, control_type)
            horizon_passed = header.has_delete_horizon and header.base_timestamp <= self.now_ms
            discard_records = discardable and horizon_passed
        else:
            discardable = discard_records = self.tracker.on_data_batch(header)
        keep_empty = self._keeps_producer_state(header, control_type) or header.next_offset == self.round_end or last_of_group
        if discard_records and not keep_empty:
            result.records_read += header.record_count
            if header.is_control:
                result.markers_dropped += 1
            else:
                result.aborted_batches_dropped += 1
            return
        _, records = decode_records(data)
        result.records_read += len(records)
        if discard_records:
            kept = []
        elif header.is_control:
            kept = records
        else:
            kept = [record for record in records if self._keeps_record(header, record)]
        result.records_retained += len(kept)
        needs_horizon = not header.has_delete_horizon and (
            (discardable and header.is_control) or any(record.value is None for record in kept)
        )
        if kept and len(kept) == len(records) and not needs_horizon:
            batch = bytes(data)
        elif kept:
            horizon = self.now_ms + self.delete_retention_ms if needs_horizon else None
            batch = _rebuild(header, kept, horizon)
        elif keep_empty:
            batch = _empty_batch(header)
        else:
            return
        written = BatchHeader.read(batch)
        cleaned.append(batch, written.last_offset, written.max_timestamp, written.last_offset, written.max_timestamp)
        result.bytes_written += len(batch)

    def _keeps_producer_state(self, header: BatchHeader, control_type: int | None) -> bool:
        if header.producer_id < 0:
            return False
        last_record = self.last_records.get(header.producer_id)
        if last_record is None:
            return False
        last_data_offset, producer_epoch = last_record
        if last_data_offset is not None:
            return header.last_offset == last_data_offset
        return header.is_control and header.producer_epoch == producer_epoch

    def _keeps_record(self, header: BatchHeader, record) -> bool:
        offset = header.base_offset + record.offset_delta
        if offset > self.offset_map.latest_offset:
            return True
        if record.key is None:
            self.result.keyless_records_dropped += 1
            return False
        if offset < self.offset_map.latest_for(record.key):
            return False
        if record.value is not None:
            return True
        return not header.has_delete_horizon or self.now_ms < header.base_timestamp


def _cleaned_segment(log: Log, base_offset: int) -> LogSegment:
    """A segment writing to ``<base>.log.cleaned`` and its ``.cleaned`` indexes."""
    segment = log.new_segment(base_offset)
    segment.log_path += CLEANED_SUFFIX
    for index_file in (segment.offset_index, segment.time_index, segment.txn_index):
        index_file.path += CLEANED_SUFFIX
    segment.next_offset = base_offset
    return segment


def _rebuild(header: BatchHeader, kept: list, delete_horizon_ms: int | None) -> bytes:
    """The batch with only ``kept`` records, its offsets and producer fields unchanged.

    Record timestamps are unchanged too: with a new delete horizon in
    baseTimestamp every timestamp delta is re-expressed against it.
    """
    base_timestamp = header.base_timestamp if delete_horizon_ms is None else delete_horizon_ms
    timestamps = [header.base_timestamp + record.timestamp_delta for record in kept]
    for record, timestamp in zip(kept, timestamps):
        record.timestamp_delta = timestamp - base_timestamp
    log_append_time = header.timestamp_type == LOG_APPEND_TIME
    return rebuild_batch(
        header,
        kept,
        base_timestamp=base_timestamp,
        max_timestamp=header.max_timestamp if log_append_time else max(timestamps),
        delete_horizon=header.has_delete_horizon or delete_horizon_ms is not None,
    )


def _empty_batch(header: BatchHeader) -> bytes:
    """Kafka's empty batch: the header alone, timestamps set to the batch's max timestamp."""
    return rebuild_batch(header, [], compression=0, base_timestamp=header.max_timestamp, delete_horizon=False)
