"""The records of ``__transaction_state``, byte for byte as Kafka writes them.

Declared in our schema grammar from Kafka's
``transaction-coordinator/src/main/resources/common/message/TransactionLog*.json``.
The key is an int16 version (0) and the transactional id; the value an int16
version and the transaction's metadata, flexible from version 1 (which adds
the producer ids of an epoch overflow and the client's transaction version as
tagged fields). A tombstone (no value) forgets an expired transactional id.
"""

from __future__ import annotations

import struct

from kbroker import coordinator_records
from kbroker.coordinator_records import read_struct, read_version
from kbroker.wire.primitives import DecodeError
from kbroker.wire.schema.codegen import CodeGenerator
from kbroker.wire.schema.declaration import parse_record_declaration
from kbroker.wire.schema.values import make_value_class

TRANSACTION_LOG_KEY = """
TransactionLogKey 0 versions 0 flexible none

record
  transactional_id: string
"""

TRANSACTION_LOG_VALUE = """
TransactionLogValue 0 versions 0-1 flexible 1+

record
  producer_id: int64
  previous_producer_id: int64 v1+ tag 0 = -1
  next_producer_id: int64 v1+ tag 1 = -1
  producer_epoch: int16
  transaction_timeout_ms: int32
  transaction_status: int8
  transaction_partitions: []PartitionsSchema?
    topic: string
    partition_ids: []int32
  transaction_last_update_timestamp_ms: int64
  transaction_start_timestamp_ms: int64
  client_transaction_version: int16 v1+ tag 2
"""

_KEY_SPEC = parse_record_declaration(TRANSACTION_LOG_KEY)
_VALUE_SPEC = parse_record_declaration(TRANSACTION_LOG_VALUE)
TransactionLogKey = make_value_class(_KEY_SPEC.message)
TransactionLogValue = make_value_class(_VALUE_SPEC.message)
PartitionsSchema = TransactionLogValue.PartitionsSchema

_INT16 = struct.Struct(">h")
_generator = CodeGenerator()


def encode_key(key) -> bytes:
    out = bytearray(_INT16.pack(0))
    _generator.writer(_KEY_SPEC.message, 0, False)(out, key)
    return bytes(out)


def encode_value(value) -> bytes:
    """Version 1 (flexible) for a client of transaction version 2, else 0, as Kafka picks by the
    transaction version in use (version 0 cannot hold the tagged fields)."""
    version = 1 if value.client_transaction_version >= 2 else 0
    out = bytearray(_INT16.pack(version))
    _generator.writer(_VALUE_SPEC.message, version, version in _VALUE_SPEC.flexible)(out, value)
    return bytes(out)


def decode_key(data):
    view = memoryview(data)
    version = read_version(view, "TransactionLogKey")
    if version != 0:
        raise DecodeError(f"unknown __transaction_state key version {version}")
    return read_struct(_KEY_SPEC, version, False, view)


def decode_value(key, data):
    """The value of ``key``'s record, None for a tombstone."""
    if data is None:
        return None
    view = memoryview(data)
    version = read_version(view, "TransactionLogValue")
    if version not in _VALUE_SPEC.versions:
        raise DecodeError(f"TransactionLogValue v{version} is outside v{_VALUE_SPEC.versions}")
    return read_struct(_VALUE_SPEC, version, version in _VALUE_SPEC.flexible, view)


def coordinator_partition(transactional_id: str, partition_count: int) -> int:
    """The ``__transaction_state`` partition of a transactional id: Java's hashCode, as for groups."""
    return coordinator_records.coordinator_partition(transactional_id, partition_count)
