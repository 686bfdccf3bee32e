"""Produce validation, in one place (Kafka's LogValidator, with UnifiedLog.analyzeAndValidateRecords).

One partition's records field of a Produce request goes through three steps:

1. :func:`read_produced` parses the batch headers, once. The handler needs them before anything is
   checked: a transactional batch joins its transaction (KIP-890) first, as in Kafka, whose
   ReplicaManager verifies the transaction before the log looks at the CRC.
2. :func:`validate_produce` checks what Kafka checks of a producer's batch, in the order kbroker
   always has: the headers and CRC-32C, exactly one batch, ``max.message.bytes``, zstd only from
   Produce v7 (KIP-110), then the records where the topic's settings make them matter (below), and
   recompression to the topic's ``compression.type``. A refusal raises :class:`BatchRefused`
   carrying the error code, message and record errors of the partition's answer.
3. ``Log.append(validated, AppendOrigin.CLIENT)`` takes the :class:`ValidatedBatches` as they are,
   headers and all, and only stamps and writes: nothing is parsed twice.

The validation stays ahead of the append rather than inside it, where Kafka's UnifiedLog.append
calls LogValidator, because between the two sits the check that the transaction was verified
(kbroker/txn/verification.py, which needs the broker, not the log): Kafka makes it after
LogValidator, in the producer state's analysis, with a guard handed to the append. Handing the
validated headers on keeps Kafka's order and parses each header once per partition.

Batches stay opaque on the hot path (DESIGN.md, rule 2): the header and CRC
are checked without looking inside. A record is read only where a topic's
settings make its records matter, and only on that topic: so far a compacted
topic (``cleanup.policy`` naming ``compact``, alone or with ``delete``), whose
every record must have a key, since compaction keeps the latest record per
key. Kafka refuses such a batch whole at produce time (LogValidator.validateKey)
rather than letting the cleaner drop the records later, and names each
keyless record by its index in the batch (KIP-467), so a producer fails just
those records' sends with INVALID_RECORD.

Likewise a topic that bounds its CreateTime timestamps
(``message.timestamp.before.max.ms`` / ``after.max.ms``, KIP-937): a record
stamped outside ``[now - before, now + after]`` refuses its batch with
INVALID_TIMESTAMP (LogValidator.validateTimestamp).

A topic whose ``compression.type`` names a codec has a batch compressed otherwise decoded and
rebuilt with that codec, as Kafka does.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from kbroker.log.config import NEVER, LogConfig
from kbroker.wire import DecodeError
from kbroker.wire.compression import CODEC_NAMES, ZSTD
from kbroker.wire.crc import crc32c
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import BatchHeader, decode_records, iter_batches, recompress_batch

_NO_TIMESTAMP = -1  # a record without a timestamp: nothing to bound
_ERRORS_SHOWN = 3  # in the message, as Kafka's; the response lists them all
_CRC_FROM = 21  # the CRC-32C covers a batch from its attributes to its end (kbroker/wire/records.py)
_ZSTD_FROM_PRODUCE_VERSION = 7  # KIP-110
_CODECS = {name: codec for codec, name in CODEC_NAMES.items()} | {"uncompressed": 0}


class RecordError(NamedTuple):
    batch_index: int
    message: str


class BatchRefused(Exception):
    """A produced batch is refused: the partition's answer carries ``error_code``, ``message`` (None:
    Kafka sends none) and ``record_errors`` (KIP-467: the refused records by their index)."""

    def __init__(self, error_code: int, message: str | None = None, record_errors: list[RecordError] = ()) -> None:
        super().__init__(message if message is not None else ErrorCode(error_code).name)
        self.error_code = error_code
        self.message = message
        self.record_errors = list(record_errors)

    @classmethod
    def undecodable(cls, error: DecodeError) -> BatchRefused:
        """CORRUPT_MESSAGE, or the code the codec's error names (INVALID_RECORD for an old magic)."""
        return cls(getattr(error, "error_code", ErrorCode.CORRUPT_MESSAGE), str(error))


class RecordValidationError(BatchRefused):
    """The batch is refused because of these records (Kafka's RecordValidationException)."""

    def __init__(self, record_errors: list[RecordError], error_code: int = ErrorCode.INVALID_RECORD) -> None:
        shown = ", ".join(f"RecordError(batchIndex={e.batch_index}, message='{e.message}')"
                          for e in record_errors[:_ERRORS_SHOWN])
        super().__init__(error_code, f"One or more records have been rejected due to {len(record_errors)} record "
                                     f"errors in total, and only showing the first three errors at most: [{shown}]",
                         record_errors)


class ProducedBatches(NamedTuple):
    """A partition's records field as a Produce request brought it, its headers parsed (not yet checked)."""

    records: object  # bytes-like, or None when the request carried none
    batches: list[tuple[int, BatchHeader]]  # (position, header) of each batch read before ``error``
    error: DecodeError | None  # what stopped the reading, refused by validate_produce

    @property
    def transactional_header(self) -> BatchHeader | None:
        """The first batch's header if it is transactional (what KIP-890's verification needs)."""
        if self.batches and self.batches[0][1].is_transactional:
            return self.batches[0][1]
        return None


class ValidatedBatches(NamedTuple):
    """Batches :func:`validate_produce` passed: writable (the log stamps them in place), headers and
    CRCs checked, for ``Log.append`` to take without parsing them again."""

    buffer: bytearray | memoryview
    batches: list[tuple[int, BatchHeader]]


def read_produced(records) -> ProducedBatches:
    """Parse the headers of a Produce request's records field for one partition, once."""
    batches: list[tuple[int, BatchHeader]] = []
    if records is None:
        return ProducedBatches(None, batches, None)
    try:
        for batch in iter_batches(records):
            batches.append(batch)
    except DecodeError as error:  # kept for validate_produce, which refuses it in its turn
        return ProducedBatches(records, batches, error)
    return ProducedBatches(records, batches, None)


def validate_produce(produced: ProducedBatches, config: LogConfig, topic: str, partition: int, produce_version: int,
                     now_ms: int | None = None) -> ValidatedBatches:
    """What may be appended of ``produced`` as a client's batch, or :class:`BatchRefused`."""
    records = produced.records
    if records is None:
        raise BatchRefused(ErrorCode.INVALID_RECORD)
    view = memoryview(records)
    for position, header in produced.batches:  # as iter_batches(verify_crc=True): each CRC, then what stopped it
        if crc32c(view[position + _CRC_FROM : position + header.size]) != header.crc:
            raise BatchRefused(ErrorCode.CORRUPT_MESSAGE)  # no message, as Kafka answers a CorruptRecordException
    if produced.error is not None:
        raise BatchRefused.undecodable(produced.error)
    if len(produced.batches) != 1:
        raise BatchRefused(ErrorCode.INVALID_RECORD, "a produce request must carry exactly one record batch per partition")
    if len(records) > config.max_message_bytes:
        raise BatchRefused(ErrorCode.MESSAGE_TOO_LARGE)
    header = produced.batches[0][1]
    if header.compression == ZSTD and produce_version < _ZSTD_FROM_PRODUCE_VERSION:
        raise BatchRefused(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    codec = _CODECS.get(config.compression_type)
    try:
        validate_records(records, config, topic, partition, now_ms, header)  # reads records only where the topic asks
        if codec is None or header.compression == codec:
            # The log stamps offsets in place; frames from the server are writable already.
            return ValidatedBatches(bytearray(records) if view.readonly else records, produced.batches)
        rebuilt = bytearray(recompress_batch(records, codec))
    except DecodeError as error:
        raise BatchRefused.undecodable(error) from None
    if len(rebuilt) > config.max_message_bytes:  # Kafka checks the rebuilt batch as well
        raise BatchRefused(ErrorCode.MESSAGE_TOO_LARGE)
    return ValidatedBatches(rebuilt, [(0, BatchHeader.read(rebuilt))])  # a new batch: its own header


def validate_records(batch, config: LogConfig, topic: str, partition: int, now_ms: int | None = None,
                     header: BatchHeader | None = None) -> None:
    """Raise :class:`RecordValidationError` if the topic's settings refuse records of ``batch`` (one
    whole, CRC-checked batch); a bad batch raises the codec's CorruptRecordError. Other topics' batches
    are not read at all. A transaction marker passes: its control record has a key. ``header``: the batch's
    header, when the caller has read it already."""
    bounded = config.message_timestamp_type == "CreateTime" and (
        config.message_timestamp_before_max_ms != NEVER or config.message_timestamp_after_max_ms != NEVER)
    if bounded:
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        bounded = not _within_bounds_by_header(header or BatchHeader.read(batch), config, now_ms)
    if not config.compact and not bounded:
        return
    header, records = decode_records(batch)  # decompressed as needed
    if bounded:
        _validate_timestamps(header, records, config, now_ms)
    if not config.compact:
        return
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
    refused = [RecordError(index, message) for index, record in enumerate(records) if record.key is None]
    if refused:
        raise RecordValidationError(refused)


def _within_bounds_by_header(header: BatchHeader, config: LogConfig, now_ms: int) -> bool:
    """Whether the batch header alone shows every record within the topic's bounds, so that its records
    need not be read: a batch without timestamps, or (with no lower bound, as by default) one whose max
    timestamp is not beyond ``after.max.ms``. Kafka 4's default bound of an hour ahead is then checked
    on every produce without decoding a record; only a batch that breaks it is decoded, to name its
    records."""
    if header.base_timestamp == _NO_TIMESTAMP:
        return True
    return (config.message_timestamp_before_max_ms == NEVER
            and header.max_timestamp <= now_ms + config.message_timestamp_after_max_ms)


def _validate_timestamps(header, records, config: LogConfig, now_ms: int) -> None:
    earliest = now_ms - config.message_timestamp_before_max_ms
    latest = now_ms + config.message_timestamp_after_max_ms
    refused = []
    for index, record in enumerate(records):
        timestamp = header.base_timestamp + record.timestamp_delta
        if header.base_timestamp != _NO_TIMESTAMP and not earliest <= timestamp <= latest:
            refused.append(RecordError(index, f"Timestamp {timestamp} of message with offset "
                                              f"{header.base_offset + record.offset_delta} is out of range. "
                                              f"The timestamp should be within [{earliest}, {latest}]"))
    if refused:
        raise RecordValidationError(refused, ErrorCode.INVALID_TIMESTAMP)
