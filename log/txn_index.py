"""The `.txnindex` of a segment: the aborted transactions whose markers it holds.

A READ_COMMITTED fetch returns, next to the records, the aborted transactions
overlapping the fetched range so the consumer can drop their records; this index
answers that without scanning the log. Entries are Kafka's AbortedTxn, 34 bytes,
big-endian: version int16 (0), producer_id int64, first_offset int64,
last_offset int64, last_stable_offset int64. They are appended in increasing
last_offset (the marker's offset) order.
"""

import logging
import os
import struct
from collections.abc import Callable
from typing import Iterator, NamedTuple

from kbroker.log.descriptor_cache import fsync_closed_file, open_descriptor

logger = logging.getLogger("kbroker.log.txn_index")

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
# Read many whole entries per system call; the files are small but may be scanned per fetch.
_READ_CHUNK_BYTES = ENTRY_SIZE * 1024


class TransactionIndexError(Exception):
    """The index holds something no valid index holds; the log loader rebuilds it."""


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the ABORT marker
    last_stable_offset: int  # the partition's LSO when the marker was written

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(
            ABORTED_TXN_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


class TxnIndexSearchResult(NamedTuple):
    aborted: list[AbortedTxn]
    # True when a later segment cannot hold more relevant aborts, so the search stops here.
    is_complete: bool


class TransactionIndex:
    """One segment's transaction index file.

    Nothing is opened, read or created until first use: a broker holds thousands of
    segments and most never see an aborted transaction. Reads of an absent file see
    no entries; the first append creates it.
    """

    def __init__(self, path, start_offset: int = 0, opener: Callable[[str, int, int], int] = open_descriptor):
        self.path = os.fspath(path)
        self.start_offset = start_offset  # the segment's base offset, for sanity_check
        self._opener = opener  # os.open, or a descriptor cache's (which makes room when out of descriptors)
        self._descriptor: int | None = None
        # The path last found absent: reads see no entries without trying to open it again (a read_committed
        # fetch reads each segment's index). Only this index creates its file (append), which forgets it.
        self._absent_path: str | None = None
        self._unsynced = False  # written since the last fsync (perhaps through a descriptor closed since)
        self._size_bytes = 0
        self._last_offset: int | None = None
        # How many bytes of a torn trailing entry were cut off when the file was opened.
        self.torn_bytes_dropped = 0

    # --- writing -----------------------------------------------------------------

    def append(self, aborted_txn: AbortedTxn) -> None:
        if aborted_txn.first_offset > aborted_txn.last_offset:
            raise ValueError(f"{aborted_txn} ends before it starts")
        descriptor = self._open(create=True)
        if self._last_offset is not None and aborted_txn.last_offset <= self._last_offset:
            raise ValueError(
                f"last offset {aborted_txn.last_offset} of an appended transaction must be greater than "
                f"{self._last_offset}, the last offset in {self.path}"
            )
        data = aborted_txn.to_bytes()
        written = os.pwrite(descriptor, data, self._size_bytes)
        if written != len(data):  # only on a full disk; leave no half entry behind
            os.ftruncate(descriptor, self._size_bytes)
            raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
        self._size_bytes += len(data)
        self._last_offset = aborted_txn.last_offset
        self._unsynced = True

    @property
    def is_open(self) -> bool:
        return self._descriptor is not None

    def flush(self) -> None:
        """fsync what was appended or truncated since the last flush; a no-op if nothing was.

        May run on the flusher's thread while the owner appends: a file closed since it was written
        is opened for the fsync alone, leaving the index's own descriptor to the owner."""
        if not self._unsynced:
            return
        self._unsynced = False  # before the fsync: a write after it is not covered and sets it again
        try:
            descriptor = self._descriptor
            if descriptor is not None:
                os.fsync(descriptor)
            else:
                fsync_closed_file(self.path, self._opener)
        except BaseException:
            self._unsynced = True
            raise

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (the log was truncated there)."""
        previous_last_offset = None
        for position, aborted_txn in self._entries_with_positions():
            if aborted_txn.last_offset >= offset:
                self._truncate_file(position)
                self._last_offset = previous_last_offset
                return
            previous_last_offset = aborted_txn.last_offset

    def reset(self) -> None:
        """Remove every entry (the file stays, empty, if it existed)."""
        if self._open(create=False) is not None:
            self._truncate_file(0)
        self._last_offset = None

    def close(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None

    def delete(self) -> bool:
        """Close and remove the file; False if there was none."""
        self.close()
        self._last_offset = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path) -> None:
        """Move the file (e.g. to its `.deleted` name); an absent file just changes name."""
        new_path = os.fspath(new_path)
        try:
            if os.path.exists(self.path):
                os.replace(self.path, new_path)  # the open descriptor keeps working
        finally:
            self.path = new_path

    # --- reading -----------------------------------------------------------------

    def all_aborted(self) -> list[AbortedTxn]:
        return [aborted_txn for _, aborted_txn in self._entries_with_positions()]

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset).

        Kafka's collectAbortedTxns. Once an entry's last stable offset reaches the upper
        bound, every transaction that could overlap the range had already started when
        that marker was written and so is found at or before it: the search is complete
        and needs no later segment.
        """
        aborted = []
        for _, aborted_txn in self._entries_with_positions():
            if aborted_txn.last_offset >= fetch_offset and aborted_txn.first_offset < upper_bound_offset:
                aborted.append(aborted_txn)
            if aborted_txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(aborted, True)
        return TxnIndexSearchResult(aborted, False)

    def sanity_check(self) -> int:
        """Open the file (repairing a torn tail) and check every entry belongs to this segment.

        Returns how many bytes of a torn trailing entry were dropped. Raises
        TransactionIndexError, as Kafka's sanityCheck does, for an entry whose marker
        precedes the segment's start offset.
        """
        for _, aborted_txn in self._entries_with_positions():
            if aborted_txn.last_offset < self.start_offset:
                raise TransactionIndexError(
                    f"last offset of {aborted_txn} in {self.path} is before the segment start {self.start_offset}"
                )
        return self.torn_bytes_dropped

    # --- internals -----------------------------------------------------------------

    def _open(self, create: bool) -> int | None:
        """The file's descriptor, opening it on first use; None if absent and not `create`."""
        if self._descriptor is not None:
            return self._descriptor
        if not create and self._absent_path == self.path:
            return None
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | (os.O_CREAT if create else 0)
        try:
            descriptor = self._opener(self.path, flags, 0o644)
        except FileNotFoundError:
            if create:
                raise
            self._absent_path = self.path
            return None
        self._absent_path = None
        try:
            size_bytes = os.fstat(descriptor).st_size
            torn_bytes = size_bytes % ENTRY_SIZE
            if torn_bytes:
                # A crash mid-append leaves part of an entry; it was never acknowledged,
                # and recovery rebuilds the index from the log if anything is missing.
                size_bytes -= torn_bytes
                os.ftruncate(descriptor, size_bytes)
                logger.warning(
                    "dropped a torn trailing entry of %d bytes from %s (truncated to %d bytes)",
                    torn_bytes, self.path, size_bytes,
                )
            last_offset = None
            if size_bytes:
                last_entry = os.pread(descriptor, ENTRY_SIZE, size_bytes - ENTRY_SIZE)
                last_offset = self._decode(last_entry, size_bytes - ENTRY_SIZE).last_offset
        except BaseException:
            os.close(descriptor)
            raise
        self._descriptor = descriptor
        self._size_bytes = size_bytes
        self.torn_bytes_dropped += torn_bytes
        # Unlike Kafka, remember the last offset across restarts so the ordering check holds then too.
        self._last_offset = last_offset
        return descriptor

    def _entries_with_positions(self) -> Iterator[tuple[int, AbortedTxn]]:
        descriptor = self._open(create=False)
        if descriptor is None:
            return
        position = 0
        end = self._size_bytes  # a generator consumed lazily must not run past a truncation
        while position < end:
            chunk = os.pread(descriptor, min(_READ_CHUNK_BYTES, end - position), position)
            if len(chunk) < ENTRY_SIZE:
                raise TransactionIndexError(f"{self.path} shrank under us at byte {position}")
            whole_bytes = len(chunk) - len(chunk) % ENTRY_SIZE
            for start in range(0, whole_bytes, ENTRY_SIZE):
                yield position + start, self._decode(chunk[start : start + ENTRY_SIZE], position + start)
            position += whole_bytes

    def _decode(self, data: bytes, position: int) -> AbortedTxn:
        version, *fields = _ENTRY.unpack(data)
        if version > ABORTED_TXN_VERSION:
            raise TransactionIndexError(
                f"unexpected aborted transaction version {version} at byte {position} of {self.path}"
            )
        return AbortedTxn(*fields)

    def _truncate_file(self, size_bytes: int) -> None:
        os.ftruncate(self._descriptor, size_bytes)
        self._size_bytes = size_bytes
        self._unsynced = True
