"""The records of ``__consumer_offsets``, byte for byte as Kafka writes them.

Declared in our schema grammar (:mod:`wire.schema.declaration`) from Kafka's
``group-coordinator/src/main/resources/common/message/*.json``. A record's key
is an int16 version, which says what the record is (0 and 1 an offset commit,
2 a classic group, 3-8 the parts of a KIP-848 consumer group, 10-15 those of a
KIP-932 share group), followed by the key struct, never flexible. Its value is an int16 version followed by the
value struct, flexible from the version Kafka says; a tombstone has no value.
"""

from __future__ import annotations

import struct

from kbroker.coordinator_records import coordinator_partition, read_struct, read_version  # where a group id goes, and the codec
from kbroker.wire.primitives import DecodeError
from kbroker.wire.schema.codegen import CodeGenerator
from kbroker.wire.schema.declaration import RecordSpec, parse_record_declaration
from kbroker.wire.schema.values import make_value_class

# -- keys: the header's number is the key version that names the record ------------------

OFFSET_COMMIT_KEY = """
OffsetCommitKey 0 versions 0-1 flexible none

record
  group: string
  topic: string
  partition: int32
"""

GROUP_METADATA_KEY = """
GroupMetadataKey 2 versions 2 flexible none

record
  group: string
"""

CONSUMER_GROUP_METADATA_KEY = """
ConsumerGroupMetadataKey 3 versions 3 flexible none

record
  group_id: string
"""

CONSUMER_GROUP_PARTITION_METADATA_KEY = """
ConsumerGroupPartitionMetadataKey 4 versions 4 flexible none

record
  group_id: string
"""

CONSUMER_GROUP_MEMBER_METADATA_KEY = """
ConsumerGroupMemberMetadataKey 5 versions 5 flexible none

record
  group_id: string
  member_id: string
"""

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = """
ConsumerGroupTargetAssignmentMetadataKey 6 versions 6 flexible none

record
  group_id: string
"""

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = """
ConsumerGroupTargetAssignmentMemberKey 7 versions 7 flexible none

record
  group_id: string
  member_id: string
"""

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = """
ConsumerGroupCurrentMemberAssignmentKey 8 versions 8 flexible none

record
  group_id: string
  member_id: string
"""

# KIP-932 share groups, at Kafka 4.2's types (9, ShareGroupPartitionMetadata, was Kafka 4.0's early
# access only; its place is taken by the metadata hash in ShareGroupMetadataValue).

SHARE_GROUP_MEMBER_METADATA_KEY = """
ShareGroupMemberMetadataKey 10 versions 10 flexible none

record
  group_id: string
  member_id: string
"""

SHARE_GROUP_METADATA_KEY = """
ShareGroupMetadataKey 11 versions 11 flexible none

record
  group_id: string
"""

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = """
ShareGroupTargetAssignmentMetadataKey 12 versions 12 flexible none

record
  group_id: string
"""

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = """
ShareGroupTargetAssignmentMemberKey 13 versions 13 flexible none

record
  group_id: string
  member_id: string
"""

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = """
ShareGroupCurrentMemberAssignmentKey 14 versions 14 flexible none

record
  group_id: string
  member_id: string
"""

SHARE_GROUP_STATE_PARTITION_METADATA_KEY = """
ShareGroupStatePartitionMetadataKey 15 versions 15 flexible none

record
  group_id: string
"""

# -- values: the header's number is the key version they belong to ---------------------------

OFFSET_COMMIT_VALUE = """
OffsetCommitValue 0 versions 0-4 flexible 4+

record
  offset: int64
  leader_epoch: int32 v3+ = -1
  metadata: string
  commit_timestamp: int64
  expire_timestamp: int64 v1 = -1
"""

GROUP_METADATA_VALUE = """
GroupMetadataValue 2 versions 0-4 flexible 4+

record
  protocol_type: string
  generation: int32
  protocol: string?
  leader: string?
  current_state_timestamp: int64 v2+ = -1
  members: []MemberMetadata
    member_id: string
    group_instance_id: string? v3+ = null
    client_id: string
    client_host: string
    rebalance_timeout: int32 v1+ = -1
    session_timeout: int32
    subscription: bytes
    assignment: bytes
"""

CONSUMER_GROUP_METADATA_VALUE = """
ConsumerGroupMetadataValue 3 versions 0 flexible 0+

record
  epoch: int32
"""

CONSUMER_GROUP_PARTITION_METADATA_VALUE = """
ConsumerGroupPartitionMetadataValue 4 versions 0 flexible 0+

record
  topics: []TopicMetadata
    topic_id: uuid
    topic_name: string
    num_partitions: int32
    partition_metadata: []PartitionMetadata
      partition: int32
      racks: []string
"""

CONSUMER_GROUP_MEMBER_METADATA_VALUE = """
ConsumerGroupMemberMetadataValue 5 versions 0 flexible 0+

record
  instance_id: string?
  rack_id: string?
  client_id: string
  client_host: string
  subscribed_topic_names: []string
  subscribed_topic_regex: string?
  rebalance_timeout_ms: int32 = -1
  server_assignor: string?
  classic_member_metadata: ClassicMemberMetadata? tag 0 = null
    session_timeout_ms: int32
    supported_protocols: []ClassicProtocol
      name: string
      metadata: bytes
"""

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = """
ConsumerGroupTargetAssignmentMetadataValue 6 versions 0 flexible 0+

record
  assignment_epoch: int32
"""

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = """
ConsumerGroupTargetAssignmentMemberValue 7 versions 0 flexible 0+

record
  topic_partitions: []TopicPartition
    topic_id: uuid
    partitions: []int32
"""

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = """
ConsumerGroupCurrentMemberAssignmentValue 8 versions 0 flexible 0+

record
  member_epoch: int32
  previous_member_epoch: int32
  state: int8
  assigned_partitions: []TopicPartitions
  partitions_pending_revocation: []TopicPartitions

struct TopicPartitions
  topic_id: uuid
  partitions: []int32
"""

SHARE_GROUP_MEMBER_METADATA_VALUE = """
ShareGroupMemberMetadataValue 10 versions 0 flexible 0+

record
  rack_id: string?
  client_id: string
  client_host: string
  subscribed_topic_names: []string
"""

SHARE_GROUP_METADATA_VALUE = """
ShareGroupMetadataValue 11 versions 0 flexible 0+

record
  epoch: int32
  metadata_hash: int64
"""

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = """
ShareGroupTargetAssignmentMetadataValue 12 versions 0 flexible 0+

record
  assignment_epoch: int32
"""

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = """
ShareGroupTargetAssignmentMemberValue 13 versions 0 flexible 0+

record
  topic_partitions: []TopicPartition
    topic_id: uuid
    partitions: []int32
"""

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = """
ShareGroupCurrentMemberAssignmentValue 14 versions 0 flexible 0+

record
  member_epoch: int32
  previous_member_epoch: int32
  state: int8
  assigned_partitions: []TopicPartitions

struct TopicPartitions
  topic_id: uuid
  partitions: []int32
"""

SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = """
ShareGroupStatePartitionMetadataValue 15 versions 0 flexible 0+

record
  initializing_topics: []TopicPartitionsInfo
  initialized_topics: []TopicPartitionsInfo
  deleting_topics: []TopicInfo

struct TopicPartitionsInfo
  topic_id: uuid
  topic_name: string
  partitions: []int32

struct TopicInfo
  topic_id: uuid
  topic_name: string
"""

_KEYS = [OFFSET_COMMIT_KEY, GROUP_METADATA_KEY, CONSUMER_GROUP_METADATA_KEY, CONSUMER_GROUP_PARTITION_METADATA_KEY,
         CONSUMER_GROUP_MEMBER_METADATA_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
         CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
         SHARE_GROUP_MEMBER_METADATA_KEY, SHARE_GROUP_METADATA_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
         SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
         SHARE_GROUP_STATE_PARTITION_METADATA_KEY]
_VALUES = [OFFSET_COMMIT_VALUE, GROUP_METADATA_VALUE, CONSUMER_GROUP_METADATA_VALUE, CONSUMER_GROUP_PARTITION_METADATA_VALUE,
           CONSUMER_GROUP_MEMBER_METADATA_VALUE, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
           CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
           SHARE_GROUP_MEMBER_METADATA_VALUE, SHARE_GROUP_METADATA_VALUE, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
           SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
           SHARE_GROUP_STATE_PARTITION_METADATA_VALUE]

_KEY_SPECS = [parse_record_declaration(text) for text in _KEYS]
_VALUE_SPECS = [parse_record_declaration(text) for text in _VALUES]
_KEY_SPEC_BY_VERSION: dict[int, RecordSpec] = {v: spec for spec in _KEY_SPECS for v in range(spec.versions.low, spec.versions.high + 1)}
_VALUE_SPEC_BY_KEY_TYPE: dict[int, RecordSpec] = {spec.key: spec for spec in _VALUE_SPECS}
_CLASSES = {spec.name: make_value_class(spec.message) for spec in _KEY_SPECS + _VALUE_SPECS}
_SPEC_BY_MESSAGE = {spec.message: spec for spec in _KEY_SPECS + _VALUE_SPECS}

OffsetCommitKey = _CLASSES["OffsetCommitKey"]
OffsetCommitValue = _CLASSES["OffsetCommitValue"]
GroupMetadataKey = _CLASSES["GroupMetadataKey"]
GroupMetadataValue = _CLASSES["GroupMetadataValue"]
ConsumerGroupMetadataKey = _CLASSES["ConsumerGroupMetadataKey"]
ConsumerGroupMetadataValue = _CLASSES["ConsumerGroupMetadataValue"]
ConsumerGroupPartitionMetadataKey = _CLASSES["ConsumerGroupPartitionMetadataKey"]
ConsumerGroupPartitionMetadataValue = _CLASSES["ConsumerGroupPartitionMetadataValue"]
ConsumerGroupMemberMetadataKey = _CLASSES["ConsumerGroupMemberMetadataKey"]
ConsumerGroupMemberMetadataValue = _CLASSES["ConsumerGroupMemberMetadataValue"]
ConsumerGroupTargetAssignmentMetadataKey = _CLASSES["ConsumerGroupTargetAssignmentMetadataKey"]
ConsumerGroupTargetAssignmentMetadataValue = _CLASSES["ConsumerGroupTargetAssignmentMetadataValue"]
ConsumerGroupTargetAssignmentMemberKey = _CLASSES["ConsumerGroupTargetAssignmentMemberKey"]
ConsumerGroupTargetAssignmentMemberValue = _CLASSES["ConsumerGroupTargetAssignmentMemberValue"]
ConsumerGroupCurrentMemberAssignmentKey = _CLASSES["ConsumerGroupCurrentMemberAssignmentKey"]
ConsumerGroupCurrentMemberAssignmentValue = _CLASSES["ConsumerGroupCurrentMemberAssignmentValue"]
ShareGroupMemberMetadataKey = _CLASSES["ShareGroupMemberMetadataKey"]
ShareGroupMemberMetadataValue = _CLASSES["ShareGroupMemberMetadataValue"]
ShareGroupMetadataKey = _CLASSES["ShareGroupMetadataKey"]
ShareGroupMetadataValue = _CLASSES["ShareGroupMetadataValue"]
ShareGroupTargetAssignmentMetadataKey = _CLASSES["ShareGroupTargetAssignmentMetadataKey"]
ShareGroupTargetAssignmentMetadataValue = _CLASSES["ShareGroupTargetAssignmentMetadataValue"]
ShareGroupTargetAssignmentMemberKey = _CLASSES["ShareGroupTargetAssignmentMemberKey"]
ShareGroupTargetAssignmentMemberValue = _CLASSES["ShareGroupTargetAssignmentMemberValue"]
ShareGroupCurrentMemberAssignmentKey = _CLASSES["ShareGroupCurrentMemberAssignmentKey"]
ShareGroupCurrentMemberAssignmentValue = _CLASSES["ShareGroupCurrentMemberAssignmentValue"]
ShareGroupStatePartitionMetadataKey = _CLASSES["ShareGroupStatePartitionMetadataKey"]
ShareGroupStatePartitionMetadataValue = _CLASSES["ShareGroupStatePartitionMetadataValue"]
SHARE_GROUP_KEYS = (ShareGroupMemberMetadataKey, ShareGroupMetadataKey, ShareGroupTargetAssignmentMetadataKey,
                    ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey,
                    ShareGroupStatePartitionMetadataKey)

# The versions Kafka 4 writes: offset commits as key v1 (value v1 only when an expiry is set, else v3),
# classic groups as value v3, consumer- and share-group records at their only version.
_WRITTEN_KEY_VERSION = {"OffsetCommitKey": 1}
_WRITTEN_VALUE_VERSION = {"OffsetCommitValue": 3, "GroupMetadataValue": 3}
_INT16 = struct.Struct(">h")
_generator = CodeGenerator()


def _spec(value) -> RecordSpec:
    spec = _SPEC_BY_MESSAGE.get(getattr(value, "_spec", None))
    if spec is None:
        raise ValueError(f"not a __consumer_offsets record: {value!r}")
    return spec


def encode_key(key) -> bytes:
    spec = _spec(key)
    version = _WRITTEN_KEY_VERSION.get(spec.name, spec.versions.low)
    out = bytearray(_INT16.pack(version))
    _generator.writer(spec.message, version, False)(out, key)
    return bytes(out)


def encode_value(value, version: int | None = None) -> bytes:
    spec = _spec(value)
    if version is None:
        version = _WRITTEN_VALUE_VERSION.get(spec.name, spec.versions.high)
        if spec.name == "OffsetCommitValue" and value.expire_timestamp >= 0:
            version = 1  # the only version that keeps an explicit expiry
    elif version not in spec.versions:
        raise ValueError(f"{spec.name} v{version} is outside v{spec.versions}")
    out = bytearray(_INT16.pack(version))
    _generator.writer(spec.message, version, version in spec.flexible)(out, value)
    return bytes(out)


def decode_key(data):
    view = memoryview(data)
    version = read_version(view, "key")
    spec = _KEY_SPEC_BY_VERSION.get(version)
    if spec is None:
        raise DecodeError(f"unknown __consumer_offsets key version {version}")
    return read_struct(spec, version, False, view)


def decode_value(key, data):
    """The value belonging to ``key`` (None for a tombstone)."""
    if data is None:
        return None
    spec = _VALUE_SPEC_BY_KEY_TYPE[_spec(key).key]
    view = memoryview(data)
    version = read_version(view, spec.name)
    if version not in spec.versions:
        raise DecodeError(f"{spec.name} v{version} is outside v{spec.versions}")
    return read_struct(spec, version, version in spec.flexible, view)


def group_id_of(key) -> str:
    return key.group if _spec(key).key <= 2 else key.group_id





