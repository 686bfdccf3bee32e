"""Broker-side schema validation (Confluent Server's ``confluent.value.schema.validation`` and
``confluent.key.schema.validation`` topic configs).

On a topic that asks for it, each produced record's value (key) must be in the schema registry's wire
format, a zero magic byte then a four-byte big-endian schema id, and the id must be registered for the
topic's subject under the default TopicNameStrategy (``<topic>-value``, ``<topic>-key``). Otherwise the
whole batch is refused with INVALID_RECORD and a record error naming each record. Only such topics'
batches are decoded; every other topic's stay opaque.
"""

from __future__ import annotations

from kbroker.log.config import LogConfig
from kbroker.log.validator import RecordError, RecordValidationError
from kbroker.schemas.registry import Registry
from kbroker.wire.records import decode_records

_MAGIC = 0
_HEADER_BYTES = 5


def validates(config: LogConfig) -> bool:
    return config.confluent_value_schema_validation or config.confluent_key_schema_validation


def check_batch(batch, config: LogConfig, topic: str, partition: int, registry: Registry) -> None:
    """Raise RecordValidationError (INVALID_RECORD) naming every record of ``batch`` (one whole,
    CRC-checked batch) whose value or key the topic's settings refuse."""
    _, records = decode_records(batch)
    checks = [(field, f"{topic}-{field}", registered_ids(registry, f"{topic}-{field}"))
              for field, wanted in (("key", config.confluent_key_schema_validation),
                                    ("value", config.confluent_value_schema_validation)) if wanted]
    refused = []
    for index, record in enumerate(records):
        for field, subject, ids in checks:
            problem = _problem(getattr(record, field), subject, ids)
            if problem is not None:
                refused.append(RecordError(index, f"Log record for topic {topic} partition {partition} at batch "
                                                  f"index {index}: its {field} {problem}"))
                break
    if refused:
        raise RecordValidationError(refused)


def registered_ids(registry: Registry, subject: str) -> set[int]:
    """The ids of the subject's live versions (none if there is no such subject)."""
    return {entry.id for entry in registry.subjects.get(subject, {}).values() if not entry.deleted}


def _problem(data: bytes | None, subject: str, ids: set[int]) -> str | None:
    if data is None or len(data) < _HEADER_BYTES or data[0] != _MAGIC:
        return "is not in the schema registry's wire format (a zero byte, then a 4-byte schema id)"
    schema_id = int.from_bytes(data[1:_HEADER_BYTES], "big")
    if schema_id not in ids:
        return f"names schema id {schema_id}, which is not registered for subject {subject}"
    return None
