"""Idempotent and transactional producer state of one partition (Kafka's ProducerStateManager).

For every producer id that wrote to the partition we remember its epoch, the
sequence ranges and offsets of its last five batches, the epoch of the last
transaction coordinator that wrote a marker for it, and the first offset of its
ongoing transaction. That is what the broker needs to

- answer a retried batch with the offsets it was first written at instead of
  writing it twice (a producer keeps at most five batches in flight);
- refuse a sequence gap (OUT_OF_ORDER_SEQUENCE_NUMBER) or a fenced epoch
  (INVALID_PRODUCER_EPOCH), and data outside a transaction while one is open
  (INVALID_TXN_STATE);
- know where the oldest open transaction starts, which bounds the last stable offset.

Protocol of use, for each batch in log order::

    validation = state.validate(header)          # before the append
    if validation.duplicate: answer with validation.duplicate, do not append
    elif validation.error: answer with validation.error
    else: append, then state.update(header, first_offset, last_offset)

The three steps must run without another append to the same partition in
between (Kafka holds the log lock across them): a producer with several batches
in flight would otherwise be validated against state that misses its previous
batch. Acknowledging the produce still waits for fsync and replication apart.

Replicas, the group and transaction coordinators' own writes and recovery do not
validate sequences: the log is the authority, so ``update``/``replay`` accept any
batch and never fail on content. Unknown producers are accepted at any sequence,
as Kafka does since 2.5 (KIP-360): the producer's state may simply have expired
or been deleted with old segments, and UNKNOWN_PRODUCER_ID is no longer returned
on produce.

The state is rebuilt after a restart from the newest snapshot at or below the
recovery point plus ``replay`` of every batch header after it. Our snapshot
format (version 2) keeps all five batches per producer, where Kafka's version 1
keeps only the last, so a retry of any in-flight batch is still recognised as a
duplicate after a restart; Kafka's version 1 files are read too.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from kbroker.wire.crc import crc32c

from kbroker.log.checkpoint import fsync_directory, write_atomically
from kbroker.log.descriptor_cache import open_file
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import (
    BatchHeader,
    ControlRecordType,
    control_record_type,
    decode_records,
    end_txn_marker_coordinator_epoch,
)

__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "BATCHES_TO_RETAIN",
    "BatchMetadata",
    "CompletedTxn",
    "DuplicateBatch",
    "ProducerEntry",
    "ProducerStateManager",
    "TxnMarker",
    "Validation",
    "delete_snapshots_after",
    "delete_snapshots_before",
    "list_snapshot_offsets",
    "load_latest_snapshot",
    "read_txn_marker",
    "snapshot_path",
]

logger = logging.getLogger("kbroker.log.producer_state")

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms
BATCHES_TO_RETAIN = 5  # the producer's max.in.flight.requests.per.connection limit with idempotence

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_OFFSET = -1
_INT32_MAX = 2**31 - 1


class BatchMetadata(NamedTuple):
    """Where one of a producer's recent batches landed; enough to answer its retry."""

    first_sequence: int
    last_sequence: int
    last_offset: int
    offset_delta: int  # last_offset - first_offset
    max_timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def _retained_batches() -> deque[BatchMetadata]:
    return deque(maxlen=BATCHES_TO_RETAIN)


@dataclass(slots=True)
class ProducerEntry:
    """Everything known about one producer id. Read it; only the manager changes it."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    # Oldest first; the deque drops the oldest when a sixth arrives, bounding memory.
    batches: deque[BatchMetadata] = field(default_factory=_retained_batches)
    coordinator_epoch: int = -1
    current_txn_first_offset: int = NO_OFFSET
    last_timestamp: int = NO_TIMESTAMP

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else NO_OFFSET

    @property
    def has_ongoing_txn(self) -> bool:
        return self.current_txn_first_offset >= 0

    def set_epoch(self, producer_epoch: int) -> None:
        # Sequences restart at 0 in a new epoch, so the old batches can no longer be retried.
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        last_sequence = header.last_sequence
        for batch in self.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last_sequence:
                return batch
        return None


class DuplicateBatch(NamedTuple):
    """The original append of a retried batch: the broker answers with these, appending nothing."""

    first_offset: int
    last_offset: int
    timestamp: int  # the original max timestamp; the LogAppendTime when the topic uses it


class Validation(NamedTuple):
    """What ``validate`` decided. Append only when ``should_append``."""

    error: ErrorCode = ErrorCode.NONE
    duplicate: DuplicateBatch | None = None
    message: str = ""  # for the produce response's error_message and the broker log

    @property
    def should_append(self) -> bool:
        return self.error == ErrorCode.NONE and self.duplicate is None


_ACCEPT = Validation()


class TxnMarker(NamedTuple):
    """The one record of a COMMIT or ABORT control batch, which the header alone does not tell."""

    kind: ControlRecordType
    coordinator_epoch: int


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker; the log records aborted ones in its transaction index."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


def read_txn_marker(batch, pos: int = 0) -> TxnMarker | None:
    """The marker in the control batch at ``pos``, or None if compaction emptied the batch.

    Also None for control records that are not transaction markers (Raft's
    leader-change and snapshot records), which carry no producer state.
    """
    _, records = decode_records(batch, pos)
    if not records:
        return None
    kind = control_record_type(records[0].key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    return TxnMarker(ControlRecordType(kind), end_txn_marker_coordinator_epoch(records[0].value))


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    # Sequences are int32 and wrap to 0 after the maximum rather than going negative.
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == _INT32_MAX)


class ProducerStateManager:
    """The producer state of one partition, as of ``end_offset`` (every batch below it applied)."""

    def __init__(
        self,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        end_offset: int = 0,
    ) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._end_offset = end_offset
        self._producers: dict[int, ProducerEntry] = {}
        # first offset -> producer id. Transactions start in log order, so insertion
        # order is first-offset order and the oldest is the first key: O(1) for the LSO.
        self._ongoing: dict[int, int] = {}

    @property
    def end_offset(self) -> int:
        """The offset of the next batch to apply; the offset a snapshot of this state is taken at."""
        return self._end_offset

    def producer_entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def producer_entries(self) -> dict[int, ProducerEntry]:
        """A copy of the producer id -> entry map (the entries themselves are live)."""
        return dict(self._producers)

    def __len__(self) -> int:
        return len(self._producers)

    # --- validation, before the append ---------------------------------------------

    def validate(
        self, header: BatchHeader, *, is_from_client: bool = True, marker: TxnMarker | None = None
    ) -> Validation:
        """Whether the batch may be appended, as Kafka's ProducerAppendInfo decides.

        ``is_from_client=False`` is Kafka's COORDINATOR origin (the group and
        transaction coordinators' own writes, which carry no sequence numbers):
        epochs and transaction state are checked, sequences and duplicates are not.
        For a control batch pass its ``marker`` so a fenced coordinator is refused.
        Client control batches and client batches without a sequence are refused
        earlier, by batch validation (INVALID_RECORD), as Kafka's LogValidator does.
        """
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID:
            return _ACCEPT  # not idempotent: nothing to check
        entry = self._producers.get(producer_id)
        if entry is None:
            return _ACCEPT  # unknown (or expired) producer: any epoch and sequence, see module doc
        if header.is_control:
            return self._validate_marker(entry, header, marker)
        if is_from_client:
            duplicate = entry.find_duplicate(header)
            if duplicate is not None:
                return Validation(
                    duplicate=DuplicateBatch(duplicate.first_offset, duplicate.last_offset, duplicate.max_timestamp)
                )
        if header.producer_epoch < entry.producer_epoch:
            return Validation(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                message=f"epoch {header.producer_epoch} of producer {producer_id} is older than "
                f"the last seen epoch {entry.producer_epoch}",
            )
        if is_from_client:
            refusal = self._check_sequence(entry, header)
            if refusal is not None:
                return refusal
        if entry.has_ongoing_txn and not header.is_transactional:
            return Validation(
                ErrorCode.INVALID_TXN_STATE,
                message=f"non-transactional batch from producer {producer_id} while its transaction "
                f"from offset {entry.current_txn_first_offset} is ongoing",
            )
        return _ACCEPT

    @staticmethod
    def _check_sequence(entry: ProducerEntry, header: BatchHeader) -> Validation | None:
        first_sequence = header.base_sequence
        if entry.producer_epoch == NO_PRODUCER_EPOCH:
            return None  # no epoch known yet: like an unknown producer, any sequence goes
        if header.producer_epoch != entry.producer_epoch:
            # A bumped epoch resets the sequence; anything else means batches of the new epoch were lost.
            if first_sequence != 0:
                return Validation(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    message=f"new epoch {header.producer_epoch} of producer {entry.producer_id} "
                    f"starts at sequence {first_sequence}, not 0",
                )
            return None
        # With no batch left (only a marker was seen in this epoch) the next sequence is 0:
        # the producer must reset rather than continue from state we no longer have.
        last_sequence = entry.last_sequence
        if not _in_sequence(last_sequence, first_sequence):
            return Validation(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                message=f"sequence {first_sequence} of producer {entry.producer_id} does not follow "
                f"its last sequence {last_sequence}",
            )
        return None

    @staticmethod
    def _validate_marker(entry: ProducerEntry, header: BatchHeader, marker: TxnMarker | None) -> Validation:
        if header.producer_epoch < entry.producer_epoch:
            return Validation(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                message=f"marker epoch {header.producer_epoch} of producer {entry.producer_id} is older "
                f"than the last seen epoch {entry.producer_epoch}",
            )
        if marker is not None and marker.coordinator_epoch < entry.coordinator_epoch:
            return Validation(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                message=f"coordinator epoch {marker.coordinator_epoch} for producer {entry.producer_id} "
                f"is older than {entry.coordinator_epoch}",
            )
        return _ACCEPT

    # --- update, after the append ----------------------------------------------------

    def update(
        self, header: BatchHeader, first_offset: int, last_offset: int, *, marker: TxnMarker | None = None
    ) -> CompletedTxn | None:
        """Apply a batch just appended at ``first_offset..last_offset``; never refuses content.

        Batches must come in log order. A control batch needs its ``marker``
        (``read_txn_marker``); without one it changes nothing, like a marker
        compaction removed. Returns the transaction a marker ended, if it had data.
        """
        if first_offset < self._end_offset or last_offset < first_offset:
            raise ValueError(
                f"batch at offsets {first_offset}..{last_offset} is not after the producer state's "
                f"end offset {self._end_offset}; truncation must reload the state"
            )
        self._end_offset = last_offset + 1
        if header.producer_id == NO_PRODUCER_ID:
            return None
        if header.is_control:
            return self._apply_marker(header, first_offset, marker)
        self._apply_data(header, first_offset, last_offset)
        return None

    def replay(self, header: BatchHeader, marker: TxnMarker | None = None) -> CompletedTxn | None:
        """``update`` for a batch read back from the log, skipping batches already in the state.

        Recovery may replay from before the snapshot it loaded (or replay twice);
        those batches are below ``end_offset`` and already counted.
        """
        if header.last_offset < self._end_offset:
            return None
        return self.update(header, header.base_offset, header.last_offset, marker=marker)

    def _entry_for_update(self, producer_id: int) -> ProducerEntry:
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(producer_id)
        return entry

    def _apply_data(self, header: BatchHeader, first_offset: int, last_offset: int) -> None:
        entry = self._entry_for_update(header.producer_id)
        entry.set_epoch(header.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                last_offset,
                last_offset - first_offset,
                header.max_timestamp,
            )
        )
        # The batch's own timestamp rather than the broker clock: replicas and
        # recovery then derive the same state from the same log.
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and not entry.has_ongoing_txn:
            entry.current_txn_first_offset = first_offset
            self._ongoing[first_offset] = header.producer_id
        elif entry.has_ongoing_txn and not header.is_transactional:
            # validate() refuses this on a leader; in the log anyway (an old replica's
            # data), the transaction stays open until its marker, as in Kafka.
            logger.warning(
                "non-transactional batch at offset %d from producer %d inside its transaction from offset %d",
                first_offset,
                header.producer_id,
                entry.current_txn_first_offset,
            )

    def _apply_marker(self, header: BatchHeader, offset: int, marker: TxnMarker | None) -> CompletedTxn | None:
        if marker is None:
            return None
        entry = self._entry_for_update(header.producer_id)
        completed = None
        # A marker for a producer with no data in this partition's transaction ends
        # nothing: it must not reach the transaction index or move the LSO.
        if entry.has_ongoing_txn:
            completed = CompletedTxn(
                header.producer_id,
                entry.current_txn_first_offset,
                offset,
                marker.kind == ControlRecordType.ABORT,
            )
            del self._ongoing[entry.current_txn_first_offset]
            entry.current_txn_first_offset = NO_OFFSET
        entry.set_epoch(header.producer_epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        return completed

    # --- transactions and expiration ---------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest ongoing transaction: the LSO may not pass it."""
        return next(iter(self._ongoing), None)

    def ongoing_transactions(self) -> list[tuple[int, int]]:
        """``(first_offset, producer_id)`` of every ongoing transaction, oldest first."""
        return list(self._ongoing.items())

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO right after ``completed``'s marker (call after its ``update``), for the txn index."""
        first_unstable = self.first_unstable_offset()
        return completed.last_offset + 1 if first_unstable is None else first_unstable

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer_id_expiration_ms``; returns how many.

        A producer inside a transaction is kept however old: its transaction
        still holds back the LSO, and only its marker may end it.
        """
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if self._is_expired(entry, now_ms)
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        return len(expired)

    def _is_expired(self, entry: ProducerEntry, now_ms: int) -> bool:
        return not entry.has_ongoing_txn and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    # --- snapshots ----------------------------------------------------------------------

    def take_snapshot(self, directory, offset: int | None = None, *, durable: bool = True) -> str:
        """Write the state to ``<offset>.snapshot`` in ``directory``; returns its path.

        ``offset`` defaults to ``end_offset``; a larger one (the log end offset
        after batches without a producer id) is fine, a smaller one would make
        recovery apply batches twice. ``durable`` blocks on two fsyncs (run it in a
        worker thread); without it, the caller makes the file durable later.
        """
        if offset is None:
            offset = self._end_offset
        if offset < self._end_offset:
            raise ValueError(f"snapshot offset {offset} is below the state's end offset {self._end_offset}")
        path = snapshot_path(directory, offset)
        write_atomically(path, _encode_snapshot(offset, self._producers.values()), durable=durable)
        logger.info("wrote producer snapshot %s with %d producers", path, len(self._producers))
        return path

    def _load_entries(self, entries: list[ProducerEntry], now_ms: int | None) -> None:
        for entry in sorted(entries, key=lambda entry: entry.current_txn_first_offset):
            if now_ms is not None and self._is_expired(entry, now_ms):
                continue
            self._producers[entry.producer_id] = entry
            if entry.has_ongoing_txn:
                self._ongoing[entry.current_txn_first_offset] = entry.producer_id


# --- snapshot files -----------------------------------------------------------------------
#
# Kafka's version 1: version int16, crc uint32 (CRC-32C of everything after it),
# entry count int32, then per producer producer_id int64, epoch int16,
# last_sequence int32, last_offset int64, offset_delta int32, timestamp int64,
# coordinator_epoch int32, current_txn_first_offset int64 (its last batch only).
#
# Ours, version 2: version int16, crc uint32 (same coverage), snapshot offset
# int64 (must match the file name, so a misplaced file is not trusted), entry
# count int32, then per producer producer_id int64, epoch int16,
# coordinator_epoch int32, current_txn_first_offset int64, last_timestamp int64,
# batch count int8 (0..5), then per batch, oldest first, first_sequence int32,
# last_sequence int32, last_offset int64, offset_delta int32, max_timestamp int64.

KAFKA_SNAPSHOT_VERSION = 1
SNAPSHOT_VERSION = 2
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_NAME = re.compile(r"([0-9]{20})\.snapshot")
_PREFIX = struct.Struct(">hI")
_CRC_END = _PREFIX.size  # the CRC covers everything after the prefix
_V2_HEADER = struct.Struct(">qi")
_V2_ENTRY = struct.Struct(">qhiqqb")
_V2_BATCH = struct.Struct(">iiqiq")
_V1_COUNT = struct.Struct(">i")
_V1_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(Exception):
    """A snapshot file that cannot be trusted; recovery deletes it and rebuilds from the log."""


def snapshot_path(directory, offset: int) -> str:
    return os.path.join(os.fspath(directory), f"{offset:020d}{SNAPSHOT_SUFFIX}")


def list_snapshot_offsets(directory) -> list[int]:
    """The offsets of the snapshots in ``directory``, ascending (temporary files excluded)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(match.group(1)) for name in names if (match := _SNAPSHOT_NAME.fullmatch(name)))


def delete_snapshots_after(directory, offset: int) -> list[int]:
    """Delete the snapshots above ``offset`` (log truncation); returns their offsets.

    The deletion is made durable: a snapshot of truncated-away history that
    came back after a crash would later be loaded as if it described the new log.
    """
    doomed = [snapshot for snapshot in list_snapshot_offsets(directory) if snapshot > offset]
    _delete_snapshots(directory, doomed)
    return doomed


def delete_snapshots_before(directory, offset: int) -> list[int]:
    """Delete the snapshots below ``offset`` (retention moved the log start); returns their offsets."""
    doomed = [snapshot for snapshot in list_snapshot_offsets(directory) if snapshot < offset]
    _delete_snapshots(directory, doomed)
    return doomed


def _delete_snapshots(directory, offsets: list[int]) -> None:
    for offset in offsets:
        try:
            os.unlink(snapshot_path(directory, offset))
        except FileNotFoundError:
            pass
    if offsets:
        fsync_directory(directory)


def load_latest_snapshot(
    directory,
    max_offset: int,
    *,
    now_ms: int | None = None,
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
) -> tuple[int, ProducerStateManager] | None:
    """The newest readable snapshot at or below ``max_offset`` and the state it holds.

    Corrupt snapshots on the way are deleted (and logged), and the next older one
    is tried; None when none is left, so the caller replays from the log start.
    With ``now_ms``, producers that expired meanwhile are dropped, as Kafka does.
    Leftover temporary files of interrupted writes are removed.
    """
    _remove_temporary_files(directory)
    for offset in reversed(list_snapshot_offsets(directory)):
        if offset > max_offset:
            continue
        path = snapshot_path(directory, offset)
        try:
            with open_file(path, "rb") as snapshot:
                entries = _decode_snapshot(snapshot.read(), offset)
        except CorruptSnapshotError as error:
            logger.warning("deleting corrupt producer snapshot %s: %s", path, error)
            _delete_snapshots(directory, [offset])
            continue
        manager = ProducerStateManager(producer_id_expiration_ms=producer_id_expiration_ms, end_offset=offset)
        manager._load_entries(entries, now_ms)
        logger.info("loaded producer snapshot %s with %d producers", path, len(manager))
        return offset, manager
    return None


def _encode_snapshot(offset: int, entries) -> bytes:
    body = bytearray(_V2_HEADER.pack(offset, len(entries)))
    for entry in sorted(entries, key=lambda entry: entry.producer_id):
        body += _V2_ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
            entry.last_timestamp,
            len(entry.batches),
        )
        for batch in entry.batches:
            body += _V2_BATCH.pack(*batch)
    return _PREFIX.pack(SNAPSHOT_VERSION, crc32c(body)) + body


def _decode_snapshot(data: bytes, offset: int) -> list[ProducerEntry]:
    if len(data) < _PREFIX.size:
        raise CorruptSnapshotError(f"{len(data)} bytes cannot hold the version and CRC")
    version, crc = _PREFIX.unpack_from(data)
    if version not in (KAFKA_SNAPSHOT_VERSION, SNAPSHOT_VERSION):
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c(memoryview(data)[_CRC_END:])
    if computed != crc:
        raise CorruptSnapshotError(f"CRC-32C mismatch: stored {crc:#010x}, computed {computed:#010x}")
    try:
        if version == KAFKA_SNAPSHOT_VERSION:
            entries = _decode_kafka_entries(data)
        else:
            entries = _decode_entries(data, offset)
    except struct.error:
        raise CorruptSnapshotError("truncated snapshot") from None
    first_offsets = [entry.current_txn_first_offset for entry in entries if entry.has_ongoing_txn]
    if len(set(first_offsets)) != len(first_offsets):
        raise CorruptSnapshotError("two transactions start at the same offset")
    if len({entry.producer_id for entry in entries}) != len(entries):
        raise CorruptSnapshotError("a producer id appears twice")
    return entries


def _decode_entries(data: bytes, offset: int) -> list[ProducerEntry]:
    stored_offset, count = _V2_HEADER.unpack_from(data, _CRC_END)
    if stored_offset != offset:
        raise CorruptSnapshotError(f"holds offset {stored_offset}, not the {offset} of its name")
    position = _CRC_END + _V2_HEADER.size
    # Checked before looping so that a forged count cannot make us spin.
    if count < 0 or count * _V2_ENTRY.size > len(data) - position:
        raise CorruptSnapshotError(f"entry count {count} does not fit the file")
    entries = []
    for _ in range(count):
        producer_id, epoch, coordinator_epoch, txn_first_offset, last_timestamp, batch_count = (
            _V2_ENTRY.unpack_from(data, position)
        )
        position += _V2_ENTRY.size
        if producer_id < 0 or not 0 <= batch_count <= BATCHES_TO_RETAIN:
            raise CorruptSnapshotError(f"producer id {producer_id} with {batch_count} batches")
        entry = ProducerEntry(producer_id, epoch, coordinator_epoch=coordinator_epoch, last_timestamp=last_timestamp)
        entry.current_txn_first_offset = max(txn_first_offset, NO_OFFSET)
        for _ in range(batch_count):
            entry.batches.append(BatchMetadata(*_V2_BATCH.unpack_from(data, position)))
            position += _V2_BATCH.size
        entries.append(entry)
    if position != len(data):
        raise CorruptSnapshotError(f"{len(data) - position} bytes after the last entry")
    return entries


def _decode_kafka_entries(data: bytes) -> list[ProducerEntry]:
    (count,) = _V1_COUNT.unpack_from(data, _CRC_END)
    position = _CRC_END + _V1_COUNT.size
    if count < 0 or count * _V1_ENTRY.size != len(data) - position:
        raise CorruptSnapshotError(f"entry count {count} does not match the file size")
    entries = []
    for _ in range(count):
        (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first_offset) = _V1_ENTRY.unpack_from(data, position)  # fmt: skip
        position += _V1_ENTRY.size
        entry = ProducerEntry(producer_id, epoch, coordinator_epoch=coordinator_epoch, last_timestamp=timestamp)
        entry.current_txn_first_offset = max(txn_first_offset, NO_OFFSET)
        if last_offset >= 0:  # Kafka writes -1 for a producer with no batch (only a marker)
            if last_sequence == NO_SEQUENCE:
                first_sequence = NO_SEQUENCE
            else:
                first_sequence = (last_sequence - offset_delta) % (_INT32_MAX + 1)
            entry.batches.append(BatchMetadata(first_sequence, last_sequence, last_offset, offset_delta, timestamp))
        entries.append(entry)
    return entries


def _remove_temporary_files(directory) -> None:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if name.endswith(SNAPSHOT_SUFFIX + ".tmp"):
            logger.info("removing unfinished producer snapshot %s", name)
            os.unlink(os.path.join(directory, name))
