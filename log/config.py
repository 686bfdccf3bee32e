"""A partition log's settings, under Kafka's topic config names and defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields

NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE: "no limit"


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0  # each segment rolls up to this much before segment.ms, at random
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    flush_messages: int = NEVER
    flush_ms: int = NEVER
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = NEVER
    min_cleanable_dirty_ratio: float = 0.5
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    message_timestamp_before_max_ms: int = NEVER  # how far in the past a CreateTime timestamp may be
    message_timestamp_after_max_ms: int = 3_600_000  # how far in the future (Kafka 4: an hour)
    compression_type: str = "producer"  # or a codec the broker recompresses batches to
    file_delete_delay_ms: int = 60000
    max_message_bytes: int = 1024 * 1024 + 12
    # Confluent Server's: each record's value (key) must be in the schema registry's wire format and name a
    # schema registered for the topic's subject (the broker checks it; kbroker/schemas/validation.py).
    confluent_value_schema_validation: bool = False
    confluent_key_schema_validation: bool = False

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def from_properties(cls, properties: dict[str, str], base: LogConfig | None = None) -> LogConfig:
        """Settings from Kafka topic config names (``segment.bytes`` ...); unknown names raise."""
        base = base or cls()
        known = {f.name.replace("_", "."): f for f in fields(cls)}
        values = {}
        for name, text in properties.items():
            field = known.get(name)
            if field is None:
                raise KeyError(f"unknown log config {name!r}")
            values[field.name] = _value(field.type, text)
        return cls(**{**{f.name: getattr(base, f.name) for f in fields(cls)}, **values})


def _value(kind: str, text: str):
    if kind == "str":
        return text
    if kind == "float":
        return float(text)
    if kind == "bool":
        if text.strip().lower() not in ("true", "false"):
            raise ValueError(f"{text!r} is not a boolean")
        return text.strip().lower() == "true"
    return int(text)
