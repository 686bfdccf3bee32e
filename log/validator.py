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
"""

from __future__ import annotations

from typing import NamedTuple

from kbroker.log.config import LogConfig
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import decode_records

_ERRORS_SHOWN = 3  # in the message, as Kafka's; the response lists them all


class RecordError(NamedTuple):
    batch_index: int
    message: str


class RecordValidationError(Exception):
    """The batch is refused because of these records (Kafka's RecordValidationException)."""

    error_code = ErrorCode.INVALID_RECORD

    def __init__(self, record_errors: list[RecordError]) -> None:
        shown = ", ".join(f"RecordError(batchIndex={e.batch_index}, message='{e.message}')"
                          for e in record_errors[:_ERRORS_SHOWN])
        super().__init__(f"One or more records have been rejected due to {len(record_errors)} record errors in total, "
                         f"and only showing the first three errors at most: [{shown}]")
        self.record_errors = record_errors


def validate_records(batch, config: LogConfig, topic: str, partition: int) -> None:
    """Raise :class:`RecordValidationError` if the topic's settings refuse records of ``batch`` (one
    whole, CRC-checked batch); a bad batch raises the codec's CorruptRecordError. Other topics' batches
    are not read at all. A transaction marker passes: its control record has a key."""
    if not config.compact:
        return
    _, records = decode_records(batch)  # decompressed as needed
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
    refused = [RecordError(index, message) for index, record in enumerate(records) if record.key is None]
    if refused:
        raise RecordValidationError(refused)
