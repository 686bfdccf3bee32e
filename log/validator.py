"""Checks of a produced batch that need its records read (Kafka's LogValidator).

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
"""

from __future__ import annotations

import time
from typing import NamedTuple

from kbroker.log.config import NEVER, LogConfig
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import decode_records

_NO_TIMESTAMP = -1  # a record without a timestamp: nothing to bound
_ERRORS_SHOWN = 3  # in the message, as Kafka's; the response lists them all


class RecordError(NamedTuple):
    batch_index: int
    message: str


class RecordValidationError(Exception):
    """The batch is refused because of these records (Kafka's RecordValidationException)."""

    error_code = ErrorCode.INVALID_RECORD

    def __init__(self, record_errors: list[RecordError], error_code: int = ErrorCode.INVALID_RECORD) -> None:
        shown = ", ".join(f"RecordError(batchIndex={e.batch_index}, message='{e.message}')"
                          for e in record_errors[:_ERRORS_SHOWN])
        super().__init__(f"One or more records have been rejected due to {len(record_errors)} record errors in total, "
                         f"and only showing the first three errors at most: [{shown}]")
        self.record_errors = record_errors
        self.error_code = error_code


def validate_records(batch, config: LogConfig, topic: str, partition: int, now_ms: int | None = None) -> None:
    """Raise :class:`RecordValidationError` if the topic's settings refuse records of ``batch`` (one
    whole, CRC-checked batch); a bad batch raises the codec's CorruptRecordError. Other topics' batches
    are not read at all. A transaction marker passes: its control record has a key."""
    bounded = config.message_timestamp_type == "CreateTime" and (
        config.message_timestamp_before_max_ms != NEVER or config.message_timestamp_after_max_ms != NEVER)
    if not config.compact and not bounded:
        return
    header, records = decode_records(batch)  # decompressed as needed
    if bounded:
        _validate_timestamps(header, records, config, time.time_ns() // 1_000_000 if now_ms is None else now_ms)
    if not config.compact:
        return
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
    refused = [RecordError(index, message) for index, record in enumerate(records) if record.key is None]
    if refused:
        raise RecordValidationError(refused)


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
