"""Record batches, magic v2: header view, CRC-32C, stamping, record (de)coding.

A batch on the wire and on disk::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8
    | crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64
    | maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32
    | recordCount int32 | records...

``batchLength`` counts everything after itself; the CRC-32C covers attributes
to the end, so the broker can stamp the base offset and the leader epoch
without recomputing it. The records are compressed as a whole when the
attributes name a codec.

The broker hot path (produce, replication, fetch) treats batches as opaque
bytes: one ``unpack_from`` of the 61-byte header, one CRC over a memoryview,
a few ``pack_into`` stamps. Records are decoded only where semantics need
them (compaction, recompression, control records, tests).

Message sets of magic v0 and v1 are recognised (their magic byte sits at the
same offset, 16) and rejected: Kafka 4 dropped them and so do we.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kbroker.wire.crc import crc32c

from kbroker.wire.compression import MAX_DECOMPRESSED_SIZE, ZSTD, compress, decompress
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import DecodeError, read_varint, read_varlong, write_varint, write_varlong

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "CorruptRecordError",
    "UnsupportedMagicError",
    "BatchHeader",
    "Record",
    "ControlRecordType",
    "read_magic",
    "is_legacy_message_set",
    "iter_batches",
    "count_records",
    "validate_batch",
    "stamp_base_offset",
    "stamp_partition_leader_epoch",
    "stamp_log_append_time",
    "decode_records",
    "encode_record",
    "build_batch",
    "rebuild_batch",
    "recompress_batch",
    "build_control_batch",
    "control_record_type",
    "end_txn_marker_coordinator_epoch",
]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset and batchLength, which batchLength does not count
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2

_PARTITION_LEADER_EPOCH_OFFSET = 12
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_MARKER = struct.Struct(">hi")  # version, coordinator epoch
_INT32_MAX = 2**31 - 1


class CorruptRecordError(DecodeError):
    """A batch or record is malformed: bad length, CRC mismatch, bad record encoding."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class UnsupportedMagicError(DecodeError):
    """Not a v2 batch. Kafka answers a produce request carrying one with INVALID_RECORD."""

    error_code = ErrorCode.INVALID_RECORD


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch, from a single ``unpack_from``.

    A snapshot: stamping the buffer afterwards does not change it.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @classmethod
    def read(cls, buf, pos: int = 0) -> BatchHeader:
        """The header at ``pos``, unchecked (see :func:`validate_batch`)."""
        try:
            return tuple.__new__(cls, HEADER.unpack_from(buf, pos))
        except struct.error:
            raise CorruptRecordError("truncated record batch header") from None

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, from baseOffset to its last record."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """Compaction put a delete horizon in baseTimestamp (KIP-534)."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """The sequence number of the last record; sequences wrap to 0 after int32 max."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (_INT32_MAX + 1)


def read_magic(buf, pos: int = 0) -> int:
    """The magic byte of the batch or legacy message at ``pos``."""
    try:
        magic = buf[pos + _MAGIC_OFFSET]
    except IndexError:
        raise CorruptRecordError("too short to hold a magic byte") from None
    return magic - 256 if magic > 127 else magic


def is_legacy_message_set(buf, pos: int = 0) -> bool:
    """Whether the data at ``pos`` is a v0/v1 message set rather than a v2 batch."""
    return read_magic(buf, pos) in (0, 1)


def _unsupported_magic(magic: int) -> UnsupportedMagicError:
    if magic in (0, 1):
        return UnsupportedMagicError(f"magic v{magic} message sets are not supported")
    return UnsupportedMagicError(f"unknown record batch magic {magic}")


def iter_batches(
    buf, *, allow_partial_tail: bool = False, verify_crc: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` for each batch in a records field, in order.

    Produce data must hold whole batches: a truncated last batch raises
    :class:`CorruptRecordError`. A fetch response may end with a partial batch
    (the broker cut it at the size limit); with ``allow_partial_tail`` it is
    silently skipped, and the bytes of whole batches end where the last
    yielded batch ends. With ``verify_crc`` every yielded batch has passed
    :func:`validate_batch`.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            # Too short for a header: a partial batch, unless what is there is already wrong.
            if end - pos > _MAGIC_OFFSET and buf[pos + _MAGIC_OFFSET] != MAGIC:
                raise _unsupported_magic(read_magic(buf, pos))
            if end - pos >= LOG_OVERHEAD:
                (batch_length,) = _INT32.unpack_from(buf, pos + 8)
                if batch_length < MIN_BATCH_LENGTH:
                    raise CorruptRecordError(f"record batch length {batch_length} is too small")
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"truncated record batch: {end - pos} bytes left")
        header = tuple.__new__(BatchHeader, HEADER.unpack_from(buf, pos))
        batch_end = _check_header(header, pos, end, allow_partial_tail)
        if batch_end < 0:
            return
        if verify_crc:
            _check_crc(buf, pos, batch_end, header)
        yield pos, header
        pos = batch_end


def count_records(buf) -> int:
    """Records in a records field's whole batches (a fetch's partial last batch is not counted)."""
    return sum(header.record_count for _, header in iter_batches(buf, allow_partial_tail=True))


def validate_batch(buf, pos: int = 0) -> BatchHeader:
    """The header of the batch at ``pos`` after checking magic, length, CRC-32C and counts.

    Raises :class:`UnsupportedMagicError` for anything but a v2 batch and
    :class:`CorruptRecordError` for everything else wrong.
    """
    end = len(buf)
    if end - pos < HEADER_SIZE:
        if end - pos > _MAGIC_OFFSET and buf[pos + _MAGIC_OFFSET] != MAGIC:
            raise _unsupported_magic(read_magic(buf, pos))
        raise CorruptRecordError(f"record batch of {end - pos} bytes is shorter than its header")
    header = tuple.__new__(BatchHeader, HEADER.unpack_from(buf, pos))
    batch_end = _check_header(header, pos, end, False)
    _check_crc(buf, pos, batch_end, header)
    return header


def _check_header(header: BatchHeader, pos: int, end: int, allow_partial: bool) -> int:
    """Where the batch ends, or -1 if it is a partial tail that ``allow_partial`` permits."""
    if header.magic != MAGIC:
        raise _unsupported_magic(header.magic)
    batch_length = header.batch_length
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"record batch length {batch_length} is too small")
    batch_end = pos + LOG_OVERHEAD + batch_length
    if batch_end > end:
        if allow_partial:
            return -1
        raise CorruptRecordError(
            f"record batch of {batch_length + LOG_OVERHEAD} bytes runs past the "
            f"{end - pos} bytes available"
        )
    # Every record has its own offset delta in 0..lastOffsetDelta; compaction
    # may leave fewer records than that (or none), never more.
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError("negative record count or last offset delta")
    if header.record_count > header.last_offset_delta + 1:
        raise CorruptRecordError(
            f"{header.record_count} records cannot fit in offset delta {header.last_offset_delta}"
        )
    # Checked here, not at decompression, because the hot path never
    # decompresses: a batch no consumer could read must not reach the log.
    codec = header.attributes & COMPRESSION_MASK
    if codec > ZSTD:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    return batch_end


def _check_crc(buf, pos: int, batch_end: int, header: BatchHeader) -> None:
    if crc32c(memoryview(buf)[pos + _ATTRIBUTES_OFFSET : batch_end]) != header.crc:
        raise CorruptRecordError("record batch CRC-32C mismatch")


def stamp_base_offset(buf, pos: int, base_offset: int) -> None:
    """Set the batch's base offset in place; outside the CRC, so nothing else changes."""
    _INT64.pack_into(buf, pos, base_offset)


def stamp_partition_leader_epoch(buf, pos: int, epoch: int) -> None:
    """Set the batch's partition leader epoch in place; outside the CRC too."""
    _INT32.pack_into(buf, pos + _PARTITION_LEADER_EPOCH_OFFSET, epoch)


def stamp_log_append_time(buf, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as maxTimestamp, as Kafka does.

    Readers then take every record's timestamp from maxTimestamp. Both fields
    are under the CRC, so it is recomputed (skipped when nothing changes).
    """
    (attributes,) = _INT16.unpack_from(buf, pos + _ATTRIBUTES_OFFSET)
    (max_timestamp,) = _INT64.unpack_from(buf, pos + _MAX_TIMESTAMP_OFFSET)
    stamped = attributes | TIMESTAMP_TYPE_MASK
    if stamped == attributes and max_timestamp == timestamp_ms:
        return
    _INT16.pack_into(buf, pos + _ATTRIBUTES_OFFSET, stamped)
    _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, timestamp_ms)
    (batch_length,) = _INT32.unpack_from(buf, pos + 8)
    batch_end = pos + LOG_OVERHEAD + batch_length
    crc = crc32c(memoryview(buf)[pos + _ATTRIBUTES_OFFSET : batch_end])
    _UINT32.pack_into(buf, pos + _CRC_OFFSET, crc)


@dataclass(slots=True)
class Record:
    """One record of a v2 batch; its offset and timestamp are deltas from the batch's base."""

    offset_delta: int = 0
    timestamp_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0  # unused by Kafka so far; kept for byte-exact round trips


def decode_records(
    buf, pos: int = 0, *, max_uncompressed_size: int = MAX_DECOMPRESSED_SIZE
) -> tuple[BatchHeader, list[Record]]:
    """The validated header and every record of the batch at ``pos``, decompressed as needed."""
    header = validate_batch(buf, pos)
    if header.record_count == 0:
        # Compaction leaves empty batches whose attributes may still name a
        # codec with no compressed payload at all; Kafka does not look inside.
        return header, []
    data = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression:
        try:
            data = memoryview(decompress(header.compression, data, max_uncompressed_size))
        except DecodeError as error:
            raise CorruptRecordError(f"record batch does not decompress: {error}") from None
    try:
        return header, _decode_records(data, header.record_count)
    except CorruptRecordError:
        raise
    except (DecodeError, IndexError, UnicodeDecodeError) as error:
        raise CorruptRecordError(f"malformed record: {error}") from None


def _decode_records(data: memoryview, count: int) -> list[Record]:
    end = len(data)
    # The smallest record takes 7 bytes; refusing an impossible count up front
    # keeps a forged header from making us loop.
    if count * 7 > end:
        raise CorruptRecordError(f"{end} bytes cannot hold {count} records")
    records = []
    pos = 0
    for _ in range(count):
        length, pos = read_varint(data, pos)
        record_end = pos + length
        if length < 6 or record_end > end:
            raise CorruptRecordError(f"record length {length} is invalid")
        attributes = data[pos]
        timestamp_delta, pos = read_varlong(data, pos + 1)
        offset_delta, pos = read_varint(data, pos)
        key, pos = _read_varbytes(data, pos, record_end)
        value, pos = _read_varbytes(data, pos, record_end)
        header_count, pos = read_varint(data, pos)
        if header_count < 0:
            raise CorruptRecordError(f"negative header count {header_count}")
        headers = []
        for _ in range(header_count):
            name_length, pos = read_varint(data, pos)
            name_end = pos + name_length
            if name_length < 0 or name_end > record_end:
                raise CorruptRecordError(f"header key length {name_length} is invalid")
            name = str(data[pos:name_end], "utf-8")
            header_value, pos = _read_varbytes(data, name_end, record_end)
            headers.append((name, header_value))
        if pos != record_end:
            raise CorruptRecordError(f"record length {length} disagrees with its fields")
        if attributes > 127:
            attributes -= 256  # an int8
        records.append(Record(offset_delta, timestamp_delta, key, value, headers, attributes))
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the last record")
    return records


def _read_varbytes(data: memoryview, pos: int, limit: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos)
    if length == -1:
        return None, pos
    value_end = pos + length
    if length < 0 or value_end > limit:
        raise CorruptRecordError(f"field length {length} is invalid")
    return bytes(data[pos:value_end]), value_end


def _write_varbytes(out: bytearray, value) -> None:
    if value is None:
        out.append(1)  # zigzag varint of -1
        return
    write_varint(out, len(value))
    out += value


def encode_record(out: bytearray, record: Record) -> None:
    """Append ``record``, length-prefixed, to ``out``."""
    body = bytearray()
    body.append(record.attributes & 0xFF)
    write_varlong(body, record.timestamp_delta)
    write_varint(body, record.offset_delta)
    _write_varbytes(body, record.key)
    _write_varbytes(body, record.value)
    write_varint(body, len(record.headers))
    for name, header_value in record.headers:
        encoded_name = name.encode()
        write_varint(body, len(encoded_name))
        body += encoded_name
        _write_varbytes(body, header_value)
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: int = CREATE_TIME,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    base_timestamp: int = 0,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon: bool = False,
) -> bytes:
    """A complete v2 batch holding ``records``, CRC included.

    Record offsets and timestamps are ``base + delta`` as the records say.
    ``max_timestamp`` defaults to the largest record timestamp and
    ``last_offset_delta`` to the largest offset delta (both give way to an
    explicit value, as for LogAppendTime or a compacted batch).
    """
    out = bytearray(HEADER_SIZE)
    body = bytearray()
    for record in records:
        encode_record(body, record)
    out += compress(compression, body, compression_level) if compression else body
    if last_offset_delta is None:
        last_offset_delta = max((record.offset_delta for record in records), default=0)
    if max_timestamp is None:
        largest_delta = max((record.timestamp_delta for record in records), default=0)
        max_timestamp = base_timestamp + largest_delta
    attributes = (
        compression
        | (TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_MASK if transactional else 0)
        | (CONTROL_MASK if control else 0)
        | (DELETE_HORIZON_MASK if delete_horizon else 0)
    )
    HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,  # the CRC, computed below over what follows it
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    _UINT32.pack_into(out, _CRC_OFFSET, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def rebuild_batch(header: BatchHeader, records: Sequence[Record], **changes) -> bytes:
    """A batch of ``records`` carrying ``header``'s fields, except those ``changes`` names.

    ``changes`` are :func:`build_batch` keywords, e.g. ``compression=GZIP``.
    """
    fields = dict(
        base_offset=header.base_offset,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        control=header.is_control,
        timestamp_type=header.timestamp_type,
        partition_leader_epoch=header.partition_leader_epoch,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        last_offset_delta=header.last_offset_delta,
        delete_horizon=header.has_delete_horizon,
    )
    return build_batch(records, **(fields | changes))


def recompress_batch(buf, codec: int, level: int | None = None, pos: int = 0) -> bytes:
    """The batch at ``pos`` rewritten with its records compressed by ``codec``.

    For a topic whose ``compression.type`` names a codec: offsets, timestamps,
    producer id, epoch, sequence and the transactional flag carry over, only
    the compression (and so the CRC) changes.
    """
    header, records = decode_records(buf, pos)
    return rebuild_batch(header, records, compression=codec, compression_level=level)


class ControlRecordType(enum.IntEnum):
    """The ``type`` in a control record's key, as Kafka numbers them."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def build_control_batch(
    kind: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker batch: one control record ending (COMMIT) or aborting a transaction."""
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"a transaction marker is ABORT or COMMIT, not {kind}")
    marker = Record(
        key=_CONTROL_KEY.pack(0, kind),
        value=_END_TXN_MARKER.pack(0, coordinator_epoch),
    )
    return build_batch(
        [marker],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=timestamp_ms,
    )


def control_record_type(key: bytes | None) -> int:
    """The type of a control record from its key (a :class:`ControlRecordType` when known)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    version, kind = _CONTROL_KEY.unpack_from(key)
    # Like Kafka, read newer key versions as version 0; negative ones are corrupt.
    if version < 0:
        raise CorruptRecordError(f"control record key version {version}")
    return kind


def end_txn_marker_coordinator_epoch(value: bytes | None) -> int:
    """The coordinator epoch in a COMMIT or ABORT control record's value."""
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise CorruptRecordError("transaction marker value is shorter than 6 bytes")
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"transaction marker version {version}")
    return coordinator_epoch
