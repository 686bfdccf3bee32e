"""The records of ``__share_group_state``, byte for byte as Kafka 4.2 writes them (KIP-932, KIP-1226).

Declared in our schema grammar from Kafka's ``share-coordinator/src/main/resources/common/message/``
``ShareSnapshotKey/Value.json`` and ``ShareUpdateKey/Value.json``. A key starts with an int16 that names the
record type (0 a snapshot, 1 an update: the JSONs' ``apiKey``, as every coordinator key is written), then the
key struct, never flexible: group id, topic id, partition. A value starts with its int16 version (0), then
the value struct, flexible; a tombstone has no value.

- ShareSnapshot: a share-partition's whole state (state epoch, leader epoch, start offset, state batches,
  and the delivery complete count of KIP-1226), written when the state is initialized and every
  ``share.coordinator.snapshot.update.records.per.snapshot`` updates; its tombstone deletes the state.
- ShareUpdate: one write's batches and start offset, to be combined with the snapshot and updates before
  it (kbroker/share/coordinator.py); it has no state epoch, which only a snapshot sets.

What a record does to a share-partition's state (:func:`apply_record`, Kafka's ShareCoordinatorShard.replay)
is here too, with the state it builds (:class:`StoredShareState`) and the way batches combine
(:func:`combine_state_batches`, Kafka's PersisterStateBatchCombiner): where batches overlap, the higher
delivery count wins, and at the same count the higher state (a record's delivery count only grows);
ranges below the start offset are dropped; touching equal ranges are joined.

The updates after a snapshot matter, so the topic must never be compacted (the two record types of one
share-partition have different keys): Kafka creates it with cleanup.policy=delete and retention.ms=-1 and
deletes only records older than every share-partition's last snapshot.
"""

from __future__ import annotations

import heapq
import struct
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from kbroker.coordinator_records import read_struct, read_version
from kbroker.share.persisted import UNINITIALIZED_START_OFFSET, PersistedState, StateBatch
from kbroker.wire.primitives import DecodeError
from kbroker.wire.schema.codegen import CodeGenerator
from kbroker.wire.schema.declaration import parse_record_declaration
from kbroker.wire.schema.values import make_value_class

__all__ = ["SHARE_SNAPSHOT", "SHARE_UPDATE", "ShareSnapshotKey", "ShareSnapshotValue", "ShareUpdateKey",
           "ShareUpdateValue", "StoredShareState", "apply_record", "combine_state_batches", "decode_key",
           "decode_value", "encode_key", "encode_value", "key_fields", "record_type"]

SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1  # the record types (Kafka's CoordinatorRecordType SHARE_SNAPSHOT, SHARE_UPDATE)
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1
DEFAULT_EPOCH = 0  # the state epoch of a share-partition known from updates only; an initialized one's leader epoch

SHARE_SNAPSHOT_KEY = """
ShareSnapshotKey 0 versions 0 flexible none

record
  group_id: string
  topic_id: uuid
  partition: int32
"""

# Kafka 4.0 declared this key at version 1, the number it is written with; 4.2 says type 1, version 0.
# The bytes are the same: the struct has no versioned field.
SHARE_UPDATE_KEY = """
ShareUpdateKey 1 versions 1 flexible none

record
  group_id: string
  topic_id: uuid
  partition: int32
"""

SHARE_SNAPSHOT_VALUE = """
ShareSnapshotValue 0 versions 0 flexible 0+

record
  snapshot_epoch: int32
  state_epoch: int32
  leader_epoch: int32
  start_offset: int64
  delivery_complete_count: int32 tag 0 = -1
  create_timestamp: int64
  write_timestamp: int64
  state_batches: []StateBatch

struct StateBatch
  first_offset: int64
  last_offset: int64
  delivery_state: int8
  delivery_count: int16
"""

SHARE_UPDATE_VALUE = """
ShareUpdateValue 1 versions 0 flexible 0+

record
  snapshot_epoch: int32
  leader_epoch: int32
  start_offset: int64
  delivery_complete_count: int32 tag 0 = -1
  state_batches: []StateBatch

struct StateBatch
  first_offset: int64
  last_offset: int64
  delivery_state: int8
  delivery_count: int16
"""

_KEY_SPECS = {SHARE_SNAPSHOT: parse_record_declaration(SHARE_SNAPSHOT_KEY),
              SHARE_UPDATE: parse_record_declaration(SHARE_UPDATE_KEY)}
_VALUE_SPECS = {SHARE_SNAPSHOT: parse_record_declaration(SHARE_SNAPSHOT_VALUE),
                SHARE_UPDATE: parse_record_declaration(SHARE_UPDATE_VALUE)}

ShareSnapshotKey = make_value_class(_KEY_SPECS[SHARE_SNAPSHOT].message)
ShareUpdateKey = make_value_class(_KEY_SPECS[SHARE_UPDATE].message)
ShareSnapshotValue = make_value_class(_VALUE_SPECS[SHARE_SNAPSHOT].message)
ShareUpdateValue = make_value_class(_VALUE_SPECS[SHARE_UPDATE].message)

_TYPE_BY_MESSAGE = {spec.message: record_type for specs in (_KEY_SPECS, _VALUE_SPECS)
                    for record_type, spec in specs.items()}
_VALUE_VERSION = 0  # the only one
_INT16 = struct.Struct(">h")
_generator = CodeGenerator()


def record_type(value) -> int:
    """SHARE_SNAPSHOT or SHARE_UPDATE for a key or value of ``__share_group_state``."""
    found = _TYPE_BY_MESSAGE.get(getattr(value, "_spec", None))
    if found is None:
        raise ValueError(f"not a __share_group_state record: {value!r}")
    return found


def key_fields(key) -> tuple[str, object, int]:
    """(group id, topic id, partition): the share-partition a key names."""
    return key.group_id, key.topic_id, key.partition


def encode_key(key) -> bytes:
    spec = _KEY_SPECS[record_type(key)]
    out = bytearray(_INT16.pack(spec.key))
    _generator.writer(spec.message, spec.versions.low, False)(out, key)
    return bytes(out)


def encode_value(value) -> bytes:
    spec = _VALUE_SPECS[record_type(value)]
    out = bytearray(_INT16.pack(_VALUE_VERSION))
    _generator.writer(spec.message, _VALUE_VERSION, True)(out, value)
    return bytes(out)


def decode_key(data):
    view = memoryview(data)
    kind = read_version(view, "key")
    spec = _KEY_SPECS.get(kind)
    if spec is None:
        raise DecodeError(f"unknown __share_group_state record type {kind}")
    return read_struct(spec, spec.versions.low, False, view)


def decode_value(key, data):
    """The value belonging to ``key`` (None for a tombstone)."""
    if data is None:
        return None
    spec = _VALUE_SPECS[record_type(key)]
    view = memoryview(data)
    version = read_version(view, spec.name)
    if version not in spec.versions:
        raise DecodeError(f"{spec.name} v{version} is outside v{spec.versions}")
    return read_struct(spec, version, version in spec.flexible, view)






# -- the state they build ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredShareState:
    """One share-partition's state (Kafka's ShareGroupOffset), with what fences requests: the highest
    leader epoch of any of its records and the highest state epoch of its snapshots (Kafka's leaderEpochMap
    and stateEpochMap), and the updates written since the snapshot that reset the count."""

    persisted: PersistedState  # what ReadShareGroupState answers
    snapshot_epoch: int = 0
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
    create_timestamp_ms: int = 0
    write_timestamp_ms: int = 0
    leader_epoch_seen: int = -1
    state_epoch_seen: int | None = None  # None: known from updates only
    updates_since_snapshot: int = 0


# -- combining state batches -------------------------------------------------------------------------------


def combine_state_batches(batches_so_far: Iterable[StateBatch], new_batches: Iterable[StateBatch],
                          start_offset: int) -> tuple[StateBatch, ...]:
    """Kafka's PersisterStateBatchCombiner.combineStateBatches: both lists as one set of ranges, sorted,
    disjoint, touching equal ranges joined. Ranges below ``start_offset`` are dropped or cut (not when it
    is -1, unknown); where ranges overlap, each offset takes the batch with the highest delivery count,
    then the highest delivery state."""
    pruned = [_pruned(batch, start_offset) for batch in (*batches_so_far, *new_batches)]
    pruned = [batch for batch in pruned if batch is not None]
    if len(pruned) < 2:
        return tuple(pruned)
    events = []  # (offset, 0 an end before 1 a beginning at the same offset, priority)
    for batch in pruned:
        priority = (batch.delivery_count, batch.delivery_state)
        events.append((batch.first_offset, 1, priority))
        events.append((batch.last_offset + 1, 0, priority))
    events.sort()
    active: Counter[tuple[int, int]] = Counter()
    highest: list[tuple[int, int]] = []  # negated priorities, possibly stale: checked against ``active``
    combined: list[StateBatch] = []
    open_from, winner = 0, None
    index = 0
    while index < len(events):  # bounded: each step consumes at least one event
        offset = events[index][0]
        if winner is not None and offset > open_from:
            _append_joined(combined, open_from, offset - 1, winner)
        while index < len(events) and events[index][0] == offset:
            _, begins, priority = events[index]
            index += 1
            if begins:
                active[priority] += 1
                heapq.heappush(highest, (-priority[0], -priority[1]))
            else:
                active[priority] -= 1
        while highest and active[(-highest[0][0], -highest[0][1])] <= 0:
            heapq.heappop(highest)
        winner = (-highest[0][0], -highest[0][1]) if highest else None
        open_from = offset
    return tuple(combined)


def _pruned(batch: StateBatch, start_offset: int) -> StateBatch | None:
    if start_offset == UNINITIALIZED_START_OFFSET or batch.first_offset >= start_offset:
        return batch
    if batch.last_offset < start_offset:
        return None
    return StateBatch(start_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)


def _append_joined(combined: list[StateBatch], first_offset: int, last_offset: int,
                   priority: tuple[int, int]) -> None:
    delivery_count, delivery_state = priority
    if combined:
        tail = combined[-1]
        if (tail.last_offset + 1 == first_offset and tail.delivery_state == delivery_state
                and tail.delivery_count == delivery_count):
            combined[-1] = StateBatch(tail.first_offset, last_offset, delivery_state, delivery_count)
            return
    combined.append(StateBatch(first_offset, last_offset, delivery_state, delivery_count))


# -- what a record does ------------------------------------------------------------------------------------


def apply_record(stored: StoredShareState | None, key, value, updates_per_snapshot: int) -> StoredShareState | None:
    """``stored`` after the record ``key``/``value`` (Kafka's handleShareSnapshot, handleShareUpdate)."""
    if record_type(key) == SHARE_SNAPSHOT:
        if value is None:
            return None  # deleted
        updates = stored.updates_since_snapshot if stored is not None else 0
        return StoredShareState(
            PersistedState(value.state_epoch, value.start_offset, _batches_of(value), value.leader_epoch),
            snapshot_epoch=value.snapshot_epoch, delivery_complete_count=value.delivery_complete_count,
            create_timestamp_ms=value.create_timestamp, write_timestamp_ms=value.write_timestamp,
            leader_epoch_seen=value.leader_epoch if stored is None else max(stored.leader_epoch_seen,
                                                                            value.leader_epoch),
            state_epoch_seen=value.state_epoch if stored is None or stored.state_epoch_seen is None
            else max(stored.state_epoch_seen, value.state_epoch),
            # Kafka resets the count only at a snapshot the count caused (not at an initialize's).
            updates_since_snapshot=0 if updates >= updates_per_snapshot else updates)
    if value is None:
        return stored  # Kafka never writes an update's tombstone; a snapshot's deletes
    if stored is None:  # an update without its snapshot: Kafka keeps what it says, at state epoch 0
        start_offset = value.start_offset
        return StoredShareState(
            PersistedState(DEFAULT_EPOCH, start_offset, combine_state_batches((), _batches_of(value), start_offset),
                           value.leader_epoch),
            snapshot_epoch=value.snapshot_epoch, delivery_complete_count=value.delivery_complete_count,
            leader_epoch_seen=value.leader_epoch, updates_since_snapshot=1)
    before = stored.persisted
    start_offset = before.start_offset if value.start_offset == UNINITIALIZED_START_OFFSET else value.start_offset
    leader_epoch = before.leader_epoch if value.leader_epoch == -1 else value.leader_epoch
    batches = combine_state_batches(before.state_batches, _batches_of(value), start_offset)
    return StoredShareState(
        PersistedState(before.state_epoch, start_offset, batches, leader_epoch),
        snapshot_epoch=stored.snapshot_epoch, delivery_complete_count=value.delivery_complete_count,
        create_timestamp_ms=stored.create_timestamp_ms, write_timestamp_ms=stored.write_timestamp_ms,
        leader_epoch_seen=max(stored.leader_epoch_seen, value.leader_epoch),
        state_epoch_seen=stored.state_epoch_seen, updates_since_snapshot=stored.updates_since_snapshot + 1)


def _batches_of(value) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(batch.first_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)
                 for batch in value.state_batches)
