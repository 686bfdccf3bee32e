"""The KRaft metadata records kept in ``__cluster_metadata`` (DESIGN.md, rule 3).

Declared in our schema grammar (:mod:`wire.schema.declaration`) from Kafka's
``metadata/src/main/resources/common/metadata/*.json``: field order is wire
order, names are Kafka's in snake_case, defaults are Kafka's.

Each record value in the log is framed as Kafka's metadata record serde frames
an ``ApiMessageAndVersion``: unsigned varints for the frame version (1), the
record's key and its version, then the record in flexible encoding (every
metadata record is flexible from version 0)::

    codec = MetadataRecordCodec()
    data = codec.encode(TopicRecord(name="orders", topic_id=topic_id))
    codec.decode(data)  # TopicRecord(name='orders', topic_id=...)
"""

from __future__ import annotations

import struct

from kbroker.wire.primitives import DecodeError, read_uvarint, write_uvarint
from kbroker.wire.schema.codegen import CodeGenerator
from kbroker.wire.schema.declaration import RecordSpec, parse_record_declaration
from kbroker.wire.schema.values import make_value_class

__all__ = [
    "FRAME_VERSION",
    "KEY_BY_CLASS",
    "RECORD_BY_KEY",
    "RECORD_BY_NAME",
    "MetadataRecordCodec",
    "RegisterBrokerRecord",
    "TopicRecord",
    "PartitionRecord",
    "ConfigRecord",
    "PartitionChangeRecord",
    "FenceBrokerRecord",
    "UnfenceBrokerRecord",
    "RemoveTopicRecord",
    "FeatureLevelRecord",
    "ProducerIdsRecord",
    "NoOpRecord",
    "UserScramCredentialRecord",
    "RemoveUserScramCredentialRecord",
    "ClientQuotaRecord",
    "AccessControlEntryRecord",
    "RemoveAccessControlEntryRecord",
]

FRAME_VERSION = 1

REGISTER_BROKER_RECORD = """
RegisterBrokerRecord 0 versions 0-3 flexible 0+

record
  broker_id: int32
  is_migrating_zk_broker: bool v2+ = false
  incarnation_id: uuid
  broker_epoch: int64
  end_points: []BrokerEndpoint
    name: string
    host: string
    port: uint16
    security_protocol: int16
  features: []BrokerFeature
    name: string
    min_supported_version: int16
    max_supported_version: int16
  rack: string?
  fenced: bool = true
  in_controlled_shutdown: bool v1+ = false
  log_dirs: []uuid v3+ tag 0
"""

TOPIC_RECORD = """
TopicRecord 2 versions 0 flexible 0+

record
  name: string
  topic_id: uuid
"""

# v1 adds directories (KIP-858); v2 the eligible leader replicas (KIP-966).
PARTITION_RECORD = """
PartitionRecord 3 versions 0-2 flexible 0+

record
  partition_id: int32 = -1
  topic_id: uuid
  replicas: []int32
  isr: []int32
  removing_replicas: []int32
  adding_replicas: []int32
  leader: int32 = -1
  leader_recovery_state: int8 tag 0 = 0
  leader_epoch: int32 = -1
  partition_epoch: int32 = -1
  directories: []uuid v1+
  eligible_leader_replicas: []int32? v2+ tag 1 = null
  last_known_elr: []int32? v2+ tag 2 = null
"""

CONFIG_RECORD = """
ConfigRecord 4 versions 0 flexible 0+

record
  resource_type: int8
  resource_name: string
  name: string
  value: string?
"""

# Every change is a tagged field whose default means "unchanged" (leader -2: no change).
PARTITION_CHANGE_RECORD = """
PartitionChangeRecord 5 versions 0-2 flexible 0+

record
  partition_id: int32 = -1
  topic_id: uuid
  isr: []int32? tag 0 = null
  leader: int32 tag 1 = -2
  replicas: []int32? tag 2 = null
  removing_replicas: []int32? tag 3 = null
  adding_replicas: []int32? tag 4 = null
  leader_recovery_state: int8 tag 5 = -1
  directories: []uuid? v1+ tag 8 = null
  eligible_leader_replicas: []int32? v2+ tag 6 = null
  last_known_elr: []int32? v2+ tag 7 = null
"""

FENCE_BROKER_RECORD = """
FenceBrokerRecord 7 versions 0 flexible 0+

record
  id: int32
  epoch: int64
"""

UNFENCE_BROKER_RECORD = """
UnfenceBrokerRecord 8 versions 0 flexible 0+

record
  id: int32
  epoch: int64
"""

REMOVE_TOPIC_RECORD = """
RemoveTopicRecord 9 versions 0 flexible 0+

record
  topic_id: uuid
"""

# New logs and snapshots begin with one; its version can never pass 0.
FEATURE_LEVEL_RECORD = """
FeatureLevelRecord 12 versions 0 flexible 0+

record
  name: string
  feature_level: int16
"""

PRODUCER_IDS_RECORD = """
ProducerIdsRecord 15 versions 0 flexible 0+

record
  broker_id: int32
  broker_epoch: int64 = -1
  next_producer_id: int64
"""

# Security records (DESIGN.md rule 3: credentials and ACLs live in the metadata log like everything else).
USER_SCRAM_CREDENTIAL_RECORD = """
UserScramCredentialRecord 11 versions 0 flexible 0+

record
  name: string
  mechanism: int8
  salt: bytes
  stored_key: bytes
  server_key: bytes
  iterations: int32
"""

CLIENT_QUOTA_RECORD = """
ClientQuotaRecord 14 versions 0 flexible 0+

record
  entity: []EntityData
    entity_type: string
    entity_name: string?
  key: string
  value: float64
  remove: bool
"""

ACCESS_CONTROL_ENTRY_RECORD = """
AccessControlEntryRecord 18 versions 0 flexible 0+

record
  id: uuid
  resource_type: int8
  resource_name: string
  pattern_type: int8
  principal: string
  host: string
  operation: int8
  permission_type: int8
"""

REMOVE_ACCESS_CONTROL_ENTRY_RECORD = """
RemoveAccessControlEntryRecord 19 versions 0 flexible 0+

record
  id: uuid
"""

REMOVE_USER_SCRAM_CREDENTIAL_RECORD = """
RemoveUserScramCredentialRecord 22 versions 0 flexible 0+

record
  name: string
  mechanism: int8
"""

NO_OP_RECORD = """
NoOpRecord 20 versions 0 flexible 0+

record
"""

DECLARATIONS = [
    REGISTER_BROKER_RECORD,
    TOPIC_RECORD,
    PARTITION_RECORD,
    CONFIG_RECORD,
    PARTITION_CHANGE_RECORD,
    FENCE_BROKER_RECORD,
    UNFENCE_BROKER_RECORD,
    REMOVE_TOPIC_RECORD,
    FEATURE_LEVEL_RECORD,
    PRODUCER_IDS_RECORD,
    USER_SCRAM_CREDENTIAL_RECORD,
    CLIENT_QUOTA_RECORD,
    ACCESS_CONTROL_ENTRY_RECORD,
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
    NO_OP_RECORD,
]


def _load() -> dict[int, RecordSpec]:
    by_key: dict[int, RecordSpec] = {}
    for text in DECLARATIONS:
        spec = parse_record_declaration(text)
        if spec.key in by_key:
            raise ValueError(f"metadata record key {spec.key} declared twice")
        if spec.flexible.low > spec.versions.low:
            raise ValueError(f"{spec.name}: metadata records are flexible in every version")
        by_key[spec.key] = spec
    return dict(sorted(by_key.items()))


RECORD_BY_KEY: dict[int, RecordSpec] = _load()
RECORD_BY_NAME: dict[str, RecordSpec] = {spec.name: spec for spec in RECORD_BY_KEY.values()}
KEY_BY_CLASS: dict[type, int] = {make_value_class(spec.message): key for key, spec in RECORD_BY_KEY.items()}
# The generated classes' shared DEFAULT instances are of a frozen subclass; both map by spec.
_RECORD_BY_MESSAGE = {spec.message: spec for spec in RECORD_BY_KEY.values()}

RegisterBrokerRecord = make_value_class(RECORD_BY_NAME["RegisterBrokerRecord"].message)
TopicRecord = make_value_class(RECORD_BY_NAME["TopicRecord"].message)
PartitionRecord = make_value_class(RECORD_BY_NAME["PartitionRecord"].message)
ConfigRecord = make_value_class(RECORD_BY_NAME["ConfigRecord"].message)
PartitionChangeRecord = make_value_class(RECORD_BY_NAME["PartitionChangeRecord"].message)
FenceBrokerRecord = make_value_class(RECORD_BY_NAME["FenceBrokerRecord"].message)
UnfenceBrokerRecord = make_value_class(RECORD_BY_NAME["UnfenceBrokerRecord"].message)
RemoveTopicRecord = make_value_class(RECORD_BY_NAME["RemoveTopicRecord"].message)
FeatureLevelRecord = make_value_class(RECORD_BY_NAME["FeatureLevelRecord"].message)
ProducerIdsRecord = make_value_class(RECORD_BY_NAME["ProducerIdsRecord"].message)
NoOpRecord = make_value_class(RECORD_BY_NAME["NoOpRecord"].message)
UserScramCredentialRecord = make_value_class(RECORD_BY_NAME["UserScramCredentialRecord"].message)
RemoveUserScramCredentialRecord = make_value_class(RECORD_BY_NAME["RemoveUserScramCredentialRecord"].message)
ClientQuotaRecord = make_value_class(RECORD_BY_NAME["ClientQuotaRecord"].message)
AccessControlEntryRecord = make_value_class(RECORD_BY_NAME["AccessControlEntryRecord"].message)
RemoveAccessControlEntryRecord = make_value_class(RECORD_BY_NAME["RemoveAccessControlEntryRecord"].message)


def record_spec_of(value) -> RecordSpec:
    """The declaration of a record value; ValueError if it is not a metadata record."""
    spec = _RECORD_BY_MESSAGE.get(getattr(value, "_spec", None))
    if spec is None:
        raise ValueError(f"not a metadata record: {value!r}")
    return spec


class MetadataRecordCodec:
    """Metadata record values to and from their framed bytes in ``__cluster_metadata``."""

    def __init__(self) -> None:
        self._generator = CodeGenerator()

    def encode(self, value, version: int | None = None) -> bytes:
        """The framed record, at ``version`` or else the record's newest version."""
        spec = record_spec_of(value)
        if version is None:
            version = spec.versions.high
        elif version not in spec.versions:
            raise ValueError(f"{spec.name} v{version} is outside v{spec.versions}")
        out = bytearray()
        write_uvarint(out, FRAME_VERSION)
        write_uvarint(out, spec.key)
        write_uvarint(out, version)
        self._generator.writer(spec.message, version, True)(out, value)
        return bytes(out)

    def decode(self, data):
        """The record value in ``data``, which must hold exactly one framed record."""
        return self.decode_with_version(data)[0]

    def decode_with_version(self, data) -> tuple[object, int]:
        """``(value, version)``: the version a record was written at matters when replaying a log."""
        view = data if isinstance(data, memoryview) else memoryview(data)
        frame_version, pos = read_uvarint(view, 0)
        if frame_version != FRAME_VERSION:
            raise DecodeError(f"metadata record frame version {frame_version}, expected {FRAME_VERSION}")
        key, pos = read_uvarint(view, pos)
        version, pos = read_uvarint(view, pos)
        spec = RECORD_BY_KEY.get(key)
        if spec is None:
            raise DecodeError(f"unknown metadata record key {key}")
        if version not in spec.versions:
            raise DecodeError(f"{spec.name} v{version} is outside v{spec.versions}")
        reader = self._generator.reader(spec.message, version, True)
        try:
            value, end = reader(view, pos)
        except (struct.error, IndexError, OverflowError, UnicodeDecodeError) as error:
            raise DecodeError(f"truncated or malformed {spec.name}: {error}") from None
        if end != len(view):
            raise DecodeError(f"{len(view) - end} bytes left over after {spec.name}")
        return value, version
