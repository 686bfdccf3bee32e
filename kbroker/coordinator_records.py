"""What the coordinators' internal topics (``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``) share in their records: a key or value is an int16 (the record's type or
version) followed by a struct of our schema grammar, and a key is placed in a partition by Kafka's
``Utils.abs(key.hashCode()) % partitions`` with Java's String.hashCode."""

from __future__ import annotations

import struct

from kbroker.wire.primitives import DecodeError
from kbroker.wire.schema.codegen import CodeGenerator
from kbroker.wire.schema.declaration import RecordSpec

INT16 = struct.Struct(">h")
_generator = CodeGenerator()


def coordinator_partition(key: str, partition_count: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitionCount``, with Java's String.hashCode."""
    code = 0
    encoded = key.encode("utf-16-be")
    for index in range(0, len(encoded), 2):  # over UTF-16 code units, as Java does
        code = (31 * code + (encoded[index] << 8 | encoded[index + 1])) & 0xFFFFFFFF
    if code >= 1 << 31:
        code -= 1 << 32
    code = 0 if code == -(1 << 31) else abs(code)
    return code % partition_count


def read_version(view: memoryview, what: str) -> int:
    """The int16 a key or value starts with."""
    if len(view) < 2:
        raise DecodeError(f"{what}: {len(view)} bytes, too short for a version")
    return INT16.unpack_from(view, 0)[0]


def read_struct(spec: RecordSpec, version: int, flexible: bool, view: memoryview):
    """The struct after the int16; every byte must belong to it."""
    try:
        value, end = _generator.reader(spec.message, version, flexible)(view, 2)
    except (struct.error, IndexError, OverflowError, UnicodeDecodeError, ValueError) as error:
        raise DecodeError(f"truncated or malformed {spec.name}: {error}") from None
    if end != len(view):
        raise DecodeError(f"{len(view) - end} bytes left over after {spec.name}")
    return value
