"""One segment of a partition log: ``<base offset>.log`` and its indexes.

The ``.log`` file holds whole record batches exactly as they arrived (offsets
stamped). Reads hand out file regions for ``os.sendfile``; only the 61-byte
batch headers are ever parsed on the read path.

Files open on use and may be closed between uses by the process's
:class:`~kbroker.log.descriptor_cache.DescriptorCache`: every method that
touches a descriptor pins the segment while it runs, and a file region pins it
only while it is read or sent (kbroker/log/descriptor_cache.py says why that
is safe on every thread).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import weakref
from dataclasses import dataclass

from kbroker.wire.crc import crc32c

from kbroker.log.descriptor_cache import DESCRIPTORS, DescriptorCache
from kbroker.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from kbroker.log.txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from kbroker.wire.records import HEADER_SIZE, LOG_OVERHEAD, MAGIC, BatchHeader, decode_records
from kbroker.wire.schema import Region

logger = logging.getLogger("kbroker.log.segment")

_SCAN_CHUNK_BYTES = 1024 * 1024
_RELATIVE_OFFSET_MAX = 2**31 - 1  # index entries hold offsets relative to the base in 32 bits
_RECENT_POSITIONS = 64
_LOG_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class ClosedSegmentError(OSError):
    """The segment's files were unlinked or replaced, or its log closed: there is nothing to reopen."""


class FileRegion(Region):
    """``length`` bytes of a segment's log file from ``position``: what sendfile sends.

    A region holds its segment, not a descriptor: a fetch answer may carry thousands of regions, and
    the segment's file may be closed while one waits to be sent. :meth:`descriptor` pins it open for
    the send; a segment unlinked meanwhile keeps its file open for the regions that refer to it.
    """

    __slots__ = ("segment", "position", "length", "__weakref__")

    def __init__(self, segment: LogSegment, position: int, length: int) -> None:
        self.segment = segment
        self.position = position
        self.length = length
        segment.region_made(self)

    def descriptor(self) -> PinnedDescriptor:
        """``with region.descriptor() as fd:`` the log file's descriptor, open until the block ends (which
        may wait: a send to a slow socket)."""
        return PinnedDescriptor(self.segment)

    def read(self) -> bytes:
        return self.segment.read_at(self.position, self.length)

    def record_count(self) -> int:
        """Records in the region's whole batches, from their headers alone (a partial last batch
        is not counted: the reader discards it)."""
        count, position, end = 0, self.position, self.position + self.length
        with self.descriptor() as fd:
            while position + HEADER_SIZE <= end:
                header = BatchHeader.read(os.pread(fd, HEADER_SIZE, position))
                if header.size < HEADER_SIZE:  # not a batch the log wrote: never loop in place
                    break
                position += header.size
                if position > end:
                    break
                count += header.record_count
        return count

    def __repr__(self) -> str:
        return f"FileRegion({self.segment.log_path!r}, position={self.position}, length={self.length})"


class PinnedDescriptor:
    """A segment pinned, and its log file's descriptor, for a ``with`` block."""

    __slots__ = ("segment",)

    def __init__(self, segment: LogSegment) -> None:
        self.segment = segment

    def __enter__(self) -> int:
        segment = self.segment
        segment.cache.pin(segment)
        try:
            return segment.log_descriptor()
        except BaseException:
            segment.cache.unpin(segment)
            raise

    def __exit__(self, *exception) -> None:
        self.segment.cache.unpin(self.segment)


def _pinned(method):
    """The segment stays pinned (its descriptors open) while ``method`` runs."""

    @functools.wraps(method)
    def pinned(self, *args, **kwargs):
        cache = self.cache
        cache.pin(self)
        try:
            return method(self, *args, **kwargs)
        finally:
            cache.unpin(self)

    return pinned


@dataclass(frozen=True)
class SegmentSettings:
    index_interval_bytes: int = 4096
    max_index_bytes: int = 10 * 1024 * 1024


class LogSegment:
    """A ``.log`` file of whole batches with its offset and time indexes.

    Files open on use, through ``descriptors`` (the process's cache unless given one), which closes
    them again when the segment has been idle longest. ``next_offset`` (one past the last offset) is
    known once the segment has been appended to, recovered, or ``load_tail``-ed.
    """

    def __init__(self, directory: str, base_offset: int, settings: SegmentSettings,
                 descriptors: DescriptorCache | None = None) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.settings = settings
        self.cache = DESCRIPTORS if descriptors is None else descriptors
        self.pins = 0  # threads using the descriptors now (changed under the cache's lock)
        self.detached = False  # the files were unlinked or replaced, or closed for good: never reopened
        self.closing = False  # closed while pinned: the last unpin closes the files
        self._regions: weakref.WeakSet | None = None  # the file regions handed out and still referred to
        # One join for the four names (os.path.join four times was a third of opening a new log).
        stem = os.path.join(directory, segment_file_name(base_offset, ""))
        self.log_path = stem + ".log"
        opener = self.cache.open
        self.offset_index = OffsetIndex(stem + ".index", base_offset, settings.max_index_bytes, opener)
        self.time_index = TimeIndex(stem + ".timeindex", base_offset, settings.max_index_bytes, opener)
        self.txn_index = TransactionIndex(stem + ".txnindex", base_offset, opener)
        self._fd: int | None = None
        self._size: int | None = None
        self.next_offset: int | None = None
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None
        self._bytes_since_index_entry = 0
        # Where recent appends put their first batch: a consumer at the tail asks
        # for exactly those offsets, and is then answered without an index scan.
        self._recent_positions: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, next_offset={self.next_offset})"

    # -- files ----------------------------------------------------------------

    def log_descriptor(self) -> int:
        """The log file's descriptor, reopened if the cache closed it; only for a caller holding a pin."""
        descriptor = self._fd
        if descriptor is None:
            with self.cache.lock:  # the flusher's thread may want it at the same moment
                descriptor = self._fd
                if descriptor is None:
                    if self.detached:
                        raise ClosedSegmentError(errno.EBADF, "segment closed, unlinked or replaced", self.log_path)
                    descriptor = self._fd = self.cache.open(self.log_path, _LOG_FLAGS)
        return descriptor

    def descriptor_count(self) -> int:
        """How many descriptors the segment has open (what the cache counts)."""
        return ((self._fd is not None) + self.offset_index.is_open + self.time_index.is_open
                + self.txn_index.is_open)

    def close_descriptors(self) -> None:
        """Close every open file; the next use reopens them (unless the segment is detached)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def pinned(self) -> PinnedDescriptor:
        """``with segment.pinned():`` its files stay open (once opened) until the block ends."""
        return PinnedDescriptor(self)

    def region_made(self, region: FileRegion) -> None:
        if self._regions is None:
            self._regions = weakref.WeakSet()
        self._regions.add(region)

    @property
    def size(self) -> int:
        if self._size is None:
            self._size = self._file_size()
        return self._size

    @_pinned
    def _file_size(self) -> int:
        if self._fd is None and not self.detached:
            try:
                return os.stat(self.log_path).st_size  # a segment never read needs no descriptor for this
            except FileNotFoundError:
                pass  # opening creates it
        return os.fstat(self.log_descriptor()).st_size

    @_pinned
    def read_at(self, position: int, length: int) -> bytes:
        """``length`` bytes of the log file from ``position`` (fewer at its end)."""
        return os.pread(self.log_descriptor(), length, position)

    @_pinned
    def flush(self, indexes: bool = True) -> None:
        """fsync the log and its indexes; safe to call from a worker thread.

        ``indexes=False`` leaves the offset and time indexes out, for the active
        segment: recovery rebuilds those from the log, and the first flush after a roll
        syncs them (:meth:`flush_indexes`) before the segment can be trusted without one.
        The transaction index is not rebuilt, so it always goes with the log.
        A segment detached meanwhile (retired, replaced, its log closed) has nothing left to keep.
        """
        if self.detached:
            return
        try:
            descriptor = self.log_descriptor()
        except ClosedSegmentError:
            return
        os.fsync(descriptor)
        if indexes:
            self.flush_indexes()
        self.txn_index.flush()

    @_pinned
    def write_indexes(self) -> None:
        """Hand the indexes' buffered entries to their files, without fsync (a roll does, on the appending
        thread; :meth:`flush_indexes` later makes them durable)."""
        self.offset_index.write_pending()
        self.time_index.write_pending()

    @_pinned
    def flush_indexes(self) -> None:
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        """Close the files for good (the log closes, or a retired segment's delete delay ran out). A region
        being sent keeps its descriptor until the send is over: the last unpin closes it."""
        with self.cache.lock:
            self.detached = True
            self.cache.forget(self)
            if self.pins:
                self.closing = True
            else:
                self.close_descriptors()

    def unlink(self, keep_open: bool = False) -> None:
        """Remove the files and detach the segment: nothing reopens its path, which may name another
        file soon (a new segment at the same offset, a compaction's replacement). Regions handed out
        before keep reading: the log file stays open for them (or when ``keep_open``: the log still
        reads the segment), opened now if the cache had closed it, until :meth:`close`; otherwise it
        closes at once."""
        with self.cache.lock:
            keep_open = keep_open or bool(self._regions)
            if keep_open and not self.detached:
                self.log_descriptor()
            self.detached = True
            self.cache.forget(self)
            if not keep_open:
                if self.pins:
                    self.closing = True
                else:
                    self.close_descriptors()
        for path in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    # -- appending ------------------------------------------------------------

    @_pinned
    def append(self, data, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int, first_timestamp: int,
               first_offset: int | None = None) -> None:
        """Write whole batches (offsets already stamped) at the end of the file."""
        position = self.size
        view = memoryview(data)
        written = 0
        descriptor = self.log_descriptor()
        try:
            while written < len(view):
                written += os.write(descriptor, view[written:])
        except OSError:
            # Leave no partial batch behind: the log must stay a sequence of whole batches.
            os.ftruncate(descriptor, position)
            raise
        self._size = position + len(view)
        if first_offset is not None:
            if len(self._recent_positions) >= _RECENT_POSITIONS:
                self._recent_positions.clear()
            self._recent_positions[first_offset] = position
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = first_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = offset_of_max_timestamp
        if self._bytes_since_index_entry > self.settings.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += len(view)
        self.next_offset = last_offset + 1

    @property
    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    @_pinned
    def append_aborted(self, aborted: AbortedTxn) -> None:
        """Note an aborted transaction whose marker this segment holds (the transaction index)."""
        self.txn_index.append(aborted)

    @_pinned
    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted(fetch_offset, upper_bound_offset)

    # -- scanning -------------------------------------------------------------

    # Methods named with an underscore here read through the descriptor without pinning: their callers
    # hold the pin (a pin costs a lock; a read of one batch would take several).

    def _header_at(self, position: int) -> BatchHeader | None:
        data = os.pread(self.log_descriptor(), HEADER_SIZE, position)
        if len(data) < HEADER_SIZE:
            return None
        return BatchHeader.read(data)

    def batches_from(self, position: int = 0, end: int | None = None):
        """(position, header) of each batch from ``position``; headers only. Pinned a batch at a time:
        the caller may hold the generator as long as it likes."""
        end = self.size if end is None else end
        while position + HEADER_SIZE <= end:
            with self.pinned():
                header = self._header_at(position)
            if header is None:
                return
            yield position, header
            position += header.batch_length + LOG_OVERHEAD

    def _batches(self, position: int = 0):
        """:meth:`batches_from` for a caller holding the pin."""
        end = self.size
        while position + HEADER_SIZE <= end:
            header = self._header_at(position)
            if header is None:
                return
            yield position, header
            position += header.batch_length + LOG_OVERHEAD

    @_pinned
    def translate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset``, via the index: (position, header)."""
        return self._translate(offset)

    def _translate(self, offset: int) -> tuple[int, BatchHeader] | None:
        recent = self._recent_positions.get(offset)
        if recent is not None:
            header = self._header_at(recent)
            if header is not None and header.base_offset == offset:
                return recent, header
        position = self._index_lookup(self.offset_index, offset)[1]
        for batch_position, header in self._batches(position):
            if header.last_offset >= offset:
                return batch_position, header
        return None

    def _index_lookup(self, index, key: int) -> tuple[int, int]:
        """``index.lookup(key)``; an index first loaded here and found torn or out of
        order (a segment trusted without recovery) is rebuilt from the log first."""
        try:
            return index.lookup(key)
        except CorruptIndexError as error:
            logger.warning("%s: rebuilding indexes: %s", self.log_path, error)
            self.recover()
            return index.lookup(key)

    def start_empty(self) -> None:
        """A brand-new segment (no file of its name exists): nothing to recover; its files
        appear with the first append, or flush."""
        self._size = 0
        self.next_offset = self.base_offset

    @_pinned
    def load_tail(self) -> None:
        """Learn next offset and max timestamp of a segment that needs no recovery."""
        try:
            self.offset_index.check()
            self.time_index.check()
        except CorruptIndexError as error:
            logger.warning("rebuilding indexes: %s", error)
            self.recover()
            return
        # The time index's last entry sums up the batches up to its offset; scan the rest
        # (from there, not from the last offset entry: the time index may be shorter).
        _, indexed_offset = self.time_index.last_entry()
        _, position = self.offset_index.lookup(indexed_offset)
        self.next_offset = self.base_offset
        for _, header in self._batches(position):
            self.next_offset = header.last_offset + 1
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        indexed_timestamp, indexed_offset = self.time_index.last_entry()
        if indexed_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = indexed_timestamp, indexed_offset

    @_pinned
    def recover(self, expected_base_offset: int | None = None) -> int:
        """Validate every batch, rebuild both indexes, cut the file at the first bad batch.

        Returns the number of bytes truncated; ``recovered_epochs`` holds the leader epochs of the batches
        kept, where they change (for the leader epoch cache). A batch is bad when it is torn
        (runs past the end of the file), has a bad length, magic or CRC-32C,
        or goes back in offsets.
        """
        self._recent_positions.clear()
        self.recovered_epochs = []  # (leader epoch, first offset) where the batches' epoch changes
        size = self.size
        descriptor = self.log_descriptor()
        position = 0
        # Never below the base offset: an empty segment (the log end after a truncation) ends where it starts.
        next_offset = self.base_offset if expected_base_offset is None else max(expected_base_offset, self.base_offset)
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        max_timestamp, offset_of_max = -1, self.base_offset
        since_entry = 0
        reason = None
        chunk, chunk_start = b"", 0
        while position < size:
            if size - position < HEADER_SIZE:
                reason = "torn header"
                break
            if position + HEADER_SIZE > chunk_start + len(chunk):
                chunk_start, chunk = position, os.pread(descriptor, max(_SCAN_CHUNK_BYTES, HEADER_SIZE), position)
            header = BatchHeader.read(chunk, position - chunk_start)
            batch_size = header.batch_length + LOG_OVERHEAD
            if header.magic != MAGIC or header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                reason = f"bad magic {header.magic} or length {header.batch_length}"
                break
            if position + batch_size > size:
                reason = "torn batch"
                break
            if position + batch_size > chunk_start + len(chunk):
                chunk_start, chunk = position, os.pread(descriptor, max(_SCAN_CHUNK_BYTES, batch_size), position)
            start = position - chunk_start
            if crc32c(memoryview(chunk)[start + 21 : start + batch_size]) != header.crc:
                reason = f"CRC mismatch at offset {header.base_offset}"
                break
            if header.base_offset < next_offset or header.last_offset < header.base_offset:
                reason = f"offset {header.base_offset} goes backwards (expected >= {next_offset})"
                break
            if header.last_offset - self.base_offset > _RELATIVE_OFFSET_MAX:
                reason = f"offset {header.last_offset} is out of range for segment {self.base_offset}"
                break
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
            if since_entry > self.settings.index_interval_bytes:
                offset_entries.append((header.last_offset, position))
                if not time_entries or max_timestamp > time_entries[-1][0]:
                    time_entries.append((max_timestamp, offset_of_max))
                since_entry = 0
            since_entry += batch_size
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = header.max_timestamp
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (not self.recovered_epochs or self.recovered_epochs[-1][0] != epoch):
                self.recovered_epochs.append((epoch, header.base_offset))
            next_offset = header.last_offset + 1
            position += batch_size
        truncated = size - position
        if truncated:
            logger.warning("%s: truncating %d bytes at position %d: %s", self.log_path, truncated, position, reason)
            os.ftruncate(descriptor, position)
            self._size = position
        self.offset_index.rewrite(offset_entries, empty_file=False)
        self.time_index.rewrite(time_entries, empty_file=False)
        self.txn_index.truncate_to(next_offset)
        self.next_offset = next_offset
        self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, offset_of_max
        self._bytes_since_index_entry = since_entry
        return truncated

    # -- reading --------------------------------------------------------------

    @_pinned
    def read(self, start_offset: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool) -> FileRegion | None:
        """A region from the batch holding ``start_offset``, at most ``max_bytes``
        (but a whole first batch when ``min_one_batch``), ending before ``upper_bound``."""
        found = self._translate(start_offset)
        if found is None:
            return None
        start, first = found
        if upper_bound is not None and first.base_offset >= upper_bound:
            return None
        end = self.size
        if upper_bound is not None and self.next_offset is not None and upper_bound < self.next_offset:
            bound = self._translate(upper_bound)
            if bound is not None:
                end = bound[0]  # as Kafka: the batch holding the bound is not visible yet
        length = min(max_bytes, end - start)
        first_size = first.batch_length + LOG_OVERHEAD
        if min_one_batch and length < first_size:
            length = min(first_size, end - start)
        if length <= 0:
            return None
        return FileRegion(self, start, length)

    @_pinned
    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``start_offset``
        with a timestamp >= ``timestamp``, or None."""
        _, indexed_offset = self._index_lookup(self.time_index, timestamp)
        _, position = self._index_lookup(self.offset_index, max(indexed_offset, start_offset))
        for batch_position, header in self._batches(position):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            for offset, record_timestamp in self._record_timestamps(batch_position, header):
                if offset >= start_offset and record_timestamp >= timestamp:
                    return record_timestamp, offset
        return None

    @_pinned
    def find_max_timestamp(self, start_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with the largest timestamp at or
        after ``start_offset``, or None. As Kafka: a record's offset, not its batch's."""
        if self.max_timestamp == -1 and self.size:
            self.load_tail()
        found = self._translate(self.offset_of_max_timestamp)
        if found is not None and found[1].base_offset >= start_offset:
            # Every batch before the one that first reached the maximum stays below it.
            candidates = [found]
        else:
            begin = self._translate(start_offset)
            candidates = [] if begin is None else self._batches(begin[0])
        best = None
        for position, header in candidates:
            if best is not None and header.max_timestamp <= best[0]:
                continue
            for offset, timestamp in self._record_timestamps(position, header):
                if offset >= start_offset and (best is None or timestamp > best[0]):
                    best = timestamp, offset
        return best

    def _record_timestamps(self, position: int, header: BatchHeader):
        """(offset, timestamp) of each record of the batch at ``position``."""
        _, records = decode_records(self.read_at(position, header.batch_length + LOG_OVERHEAD))
        for record in records:
            timestamp = header.max_timestamp if header.timestamp_type == 1 else header.base_timestamp + record.timestamp_delta
            yield header.base_offset + record.offset_delta, timestamp

    @_pinned
    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and all after it; returns bytes removed."""
        found = self._translate(offset)
        if found is None:
            # Nothing to cut, but a segment opened lazily only guessed its next offset
            # (the following segment's base): it is about to become the log end.
            self.recover_tail_state()
            return 0
        position, _ = found
        removed = self.size - position
        self._recent_positions.clear()
        os.ftruncate(self.log_descriptor(), position)
        self._size = position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.recover_tail_state()
        return removed

    @_pinned
    def recover_tail_state(self) -> None:
        """Recompute next offset and max timestamp after the end moved back."""
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.first_batch_timestamp = None
        self.load_tail()
        if self.size == 0:
            self._bytes_since_index_entry = 0
