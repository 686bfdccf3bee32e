"""The share coordinator's core (kbroker/share/coordinator.py) and the records of ``__share_group_state``
(kbroker/share/state_records.py): every API and its answers, the batch combiner, snapshots, durability
(DESIGN.md rule 11), replay, and where a share-partition's state lives."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.effects import Persist, Respond
from kbroker.share import coordinator as coordinator_module
from kbroker.share.coordinator import ShareCoordinatorConfig, ShareCoordinatorShard, coordinator_key, state_partition
from kbroker.share.persisted import StateBatch
from kbroker.share.state_records import (ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue,
                                         combine_state_batches, decode_key, decode_value, encode_key, encode_value)
from kbroker.wire import DecodeError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
GROUP = "group"
T1, T2, MISSING = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=99)
TOPICS = {T1: 4, T2: 2}  # topic id -> partition count, as the metadata says
ONE_PARTITION = ShareCoordinatorConfig(state_topic_partition_count=1, updates_per_snapshot=3)
NOW_MS = 1_700_000_000_000

Initialize = API_BY_NAME["InitializeShareGroupState"].request_class
Read = API_BY_NAME["ReadShareGroupState"].request_class
Write = API_BY_NAME["WriteShareGroupState"].request_class
Delete = API_BY_NAME["DeleteShareGroupState"].request_class
Summary = API_BY_NAME["ReadShareGroupStateSummary"].request_class


# -- requests, and what a shell would do with the effects --------------------------------------------------


def initialize(*partitions, group=GROUP):
    """``partitions``: (topic, partition, state epoch, start offset) each."""
    return Initialize(group_id=group, topics=[
        Initialize.InitializeStateData(topic_id=topic, partitions=[Initialize.InitializeStateData.PartitionData(
            partition=partition, state_epoch=state_epoch, start_offset=start_offset)])
        for topic, partition, state_epoch, start_offset in partitions])


def write(start_offset, *batches, topic=T1, partition=0, state_epoch=1, leader_epoch=0, delivery_complete_count=-1,
          group=GROUP):
    """``batches``: (first, last, state, count) each."""
    data = Write.WriteStateData.PartitionData
    return Write(group_id=group, topics=[Write.WriteStateData(topic_id=topic, partitions=[data(
        partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
        delivery_complete_count=delivery_complete_count,
        state_batches=[data.StateBatch(first_offset=first, last_offset=last, delivery_state=state,
                                       delivery_count=count) for first, last, state, count in batches])])])


def read(*partitions, group=GROUP):
    """``partitions``: (topic, partition, leader epoch) each."""
    return Read(group_id=group, topics=[Read.ReadStateData(topic_id=topic, partitions=[
        Read.ReadStateData.PartitionData(partition=partition, leader_epoch=leader_epoch)])
        for topic, partition, leader_epoch in partitions])


def summary(*partitions, group=GROUP):
    """``partitions``: (topic, partition) each."""
    return Summary(group_id=group, topics=[Summary.ReadStateSummaryData(topic_id=topic, partitions=[
        Summary.ReadStateSummaryData.PartitionData(partition=partition, leader_epoch=0)])
        for topic, partition in partitions])


def delete(*partitions, group=GROUP):
    return Delete(group_id=group, topics=[Delete.DeleteStateData(topic_id=topic, partitions=[
        Delete.DeleteStateData.PartitionData(partition=partition)]) for topic, partition in partitions])


class Log:
    """The records a shell made durable, in order, written and read back as bytes."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def durable(self, effects: list, now_ms: int = NOW_MS) -> None:
        for effect in effects:
            if isinstance(effect, Persist):
                self.records += [(encode_key(key), None if value is None else encode_value(value))
                                 for key, value in effect.records]
                assert effect.on_durable(now_ms) == []

    def replayed(self, config: ShareCoordinatorConfig = ONE_PARTITION, partition: int = 0) -> ShareCoordinatorShard:
        shard = ShareCoordinatorShard(partition, config, TOPICS.get)
        for key_bytes, value_bytes in self.records:
            key = decode_key(key_bytes)
            shard.replay(key, decode_value(key, value_bytes))
        return shard


def persist_of(effects: list) -> Persist | None:
    persists = [effect for effect in effects if isinstance(effect, Persist)]
    assert len(persists) <= 1
    return persists[0] if persists else None


def failed(effects: list, error_code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> None:
    assert persist_of(effects).on_failure(error_code, NOW_MS) == []


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def shard() -> ShareCoordinatorShard:
    return ShareCoordinatorShard(0, ONE_PARTITION, TOPICS.get)


def done(shard: ShareCoordinatorShard, log: Log, call: str, request, now_ms: int = NOW_MS):
    """The call, its records made durable; the response."""
    response, effects = getattr(shard, call)(7, request, now_ms)
    assert effects[-1] == Respond(7, response)
    log.durable(effects, now_ms)
    return response


def only(response):
    """The single partition result of a response."""
    [topic] = response.results
    [result] = topic.partitions
    return result


def batches(state) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.persisted.state_batches]


def initialized(shard, log, start_offset=0, state_epoch=1, topic=T1, partition=0):
    assert only(done(shard, log, "initialize_state", initialize((topic, partition, state_epoch, start_offset)))
                ).error_code == ErrorCode.NONE


# -- the records -------------------------------------------------------------------------------------------


def test_records_are_kafkas_bytes():
    key = ShareUpdateKey(group_id="g", topic_id=uuid.UUID(int=5), partition=3)
    assert encode_key(key).hex() == "0001" + "0001" "67" + "00" * 15 + "05" + "00000003"  # type 1, "g", uuid, 3
    assert encode_key(ShareSnapshotKey(group_id="g", topic_id=uuid.UUID(int=5), partition=3))[:2] == b"\x00\x00"
    value = ShareSnapshotValue(snapshot_epoch=1, state_epoch=2, leader_epoch=3, start_offset=4,
                               delivery_complete_count=7, create_timestamp=8, write_timestamp=9,
                               state_batches=[ShareSnapshotValue.StateBatch(first_offset=4, last_offset=5,
                                                                           delivery_state=2, delivery_count=1)])
    # version 0; the fields; the batch array (compact) and its empty tags; then tag 0 (4 bytes): 7
    assert encode_value(value).hex() == ("0000" "00000001" "00000002" "00000003" "0000000000000004"
                                         "0000000000000008" "0000000000000009"
                                         "02" "0000000000000004" "0000000000000005" "02" "0001" "00"
                                         "01" "00" "04" "00000007")
    untagged = ShareUpdateValue(snapshot_epoch=1, leader_epoch=2, start_offset=3)
    assert untagged.delivery_complete_count == -1
    assert encode_value(untagged).hex().endswith("0100")  # no batches, no tagged field: the default is left out


@pytest.mark.parametrize("key, value", [
    (ShareSnapshotKey(group_id="g", topic_id=T1, partition=1),
     ShareSnapshotValue(snapshot_epoch=3, state_epoch=2, leader_epoch=5, start_offset=10, delivery_complete_count=4,
                        create_timestamp=1, write_timestamp=2,
                        state_batches=[ShareSnapshotValue.StateBatch(first_offset=10, last_offset=12,
                                                                    delivery_state=4, delivery_count=2)])),
    (ShareUpdateKey(group_id="g", topic_id=T2, partition=0),
     ShareUpdateValue(snapshot_epoch=3, leader_epoch=5, start_offset=-1,
                      state_batches=[ShareUpdateValue.StateBatch(first_offset=1, last_offset=1, delivery_state=0,
                                                                 delivery_count=1)])),
    (ShareSnapshotKey(group_id="g", topic_id=T1, partition=0), None),
])
def test_records_round_trip(key, value):
    decoded_key = decode_key(encode_key(key))
    assert decoded_key == key
    assert decode_value(decoded_key, None if value is None else encode_value(value)) == value


@pytest.mark.parametrize("data, message", [
    (b"\x00", "too short"),
    (b"\x00\x02" + b"\x00\x01g" + bytes(20), "unknown __share_group_state record type 2"),
    (b"\x00\x00\x00\x01g" + bytes(10), "truncated"),
    (encode_key(ShareSnapshotKey(group_id="g", topic_id=T1, partition=0)) + b"\x00", "left over"),
])
def test_unreadable_keys_are_decode_errors(data, message):
    with pytest.raises(DecodeError, match=message):
        decode_key(data)


def test_a_value_of_an_unknown_version_is_a_decode_error():
    key = ShareUpdateKey(group_id="g", topic_id=T1, partition=0)
    data = b"\x00\x01" + encode_value(ShareUpdateValue())[2:]
    with pytest.raises(DecodeError, match="v1 is outside"):
        decode_value(key, data)


# -- where a share-partition's state lives -----------------------------------------------------------------


def java_hash(text: str) -> int:
    """Java's String.hashCode, written out as its definition: s[0]*31^(n-1) + ... + s[n-1], as an int."""
    units = text.encode("utf-16-be")
    code = sum(((units[i] << 8) | units[i + 1]) * 31 ** (len(units) // 2 - 1 - i // 2) for i in range(0, len(units), 2))
    code %= 1 << 32
    return code - (1 << 32) if code >= 1 << 31 else code


def test_the_java_hash_written_out_is_javas():
    assert java_hash("hello") == 99162322
    assert java_hash("polygenelubricants") == -(1 << 31)


def test_the_coordinator_key_prints_the_topic_id_as_kafka_does():
    assert coordinator_key("my:group", uuid.UUID(int=1), 3) == "my:group:AAAAAAAAAAAAAAAAAAAAAQ:3"


@pytest.mark.parametrize("group_id", ["group", "g-😀", "", "a" * 300])
@pytest.mark.parametrize("partition_count", [1, 7, 50])
def test_a_share_partition_maps_to_abs_of_its_keys_hash_modulo_the_partition_count(group_id, partition_count):
    for topic_id, partition in [(T1, 0), (uuid.UUID("f1d7a41c-0d6e-4a59-9ad4-3b9f2c9f0e11"), 17)]:
        code = java_hash(coordinator_key(group_id, topic_id, partition))
        assert state_partition(group_id, topic_id, partition, partition_count) == abs(code) % partition_count


def test_a_hash_of_integer_min_value_maps_to_partition_0(monkeypatch):
    monkeypatch.setattr(coordinator_module, "coordinator_key", lambda *key: "polygenelubricants")
    assert state_partition("g", T1, 0, 7) == 0  # Kafka's Utils.abs(Integer.MIN_VALUE) is 0


def test_a_share_partition_kept_by_another_partition_is_not_coordinated_here(log):
    config = ShareCoordinatorConfig(state_topic_partition_count=50)
    home = state_partition(GROUP, T1, 0, 50)
    elsewhere = ShareCoordinatorShard((home + 1) % 50, config, TOPICS.get)
    response, effects = elsewhere.initialize_state(1, initialize((T1, 0, 1, 0)), NOW_MS)
    assert only(response).error_code == ErrorCode.NOT_COORDINATOR and persist_of(effects) is None
    here = ShareCoordinatorShard(home, config, TOPICS.get)
    assert only(done(here, log, "initialize_state", initialize((T1, 0, 1, 0)))).error_code == ErrorCode.NONE


def test_settings_are_checked():
    with pytest.raises(ValueError):
        ShareCoordinatorConfig(updates_per_snapshot=501)
    with pytest.raises(ValueError):
        ShareCoordinatorConfig(updates_per_snapshot=-1)
    with pytest.raises(ValueError):
        ShareCoordinatorConfig(state_topic_partition_count=0)
    with pytest.raises(ValueError):
        ShareCoordinatorShard(1, ONE_PARTITION, TOPICS.get)
    assert ShareCoordinatorConfig() == ShareCoordinatorConfig(state_topic_partition_count=50, updates_per_snapshot=500)


# -- InitializeShareGroupState -----------------------------------------------------------------------------


def test_initialize_writes_a_snapshot_and_answers_once_it_is_durable(shard, log):
    response, effects = shard.initialize_state(1, initialize((T1, 0, 4, 100)), NOW_MS)
    persist, respond = effects
    assert respond == Respond(1, response)
    [(key, value)] = persist.records
    assert key == ShareSnapshotKey(group_id=GROUP, topic_id=T1, partition=0)
    assert value == ShareSnapshotValue(snapshot_epoch=0, state_epoch=4, leader_epoch=0, start_offset=100,
                                       delivery_complete_count=0, create_timestamp=NOW_MS, write_timestamp=NOW_MS)
    assert shard.state(GROUP, T1, 0) is None  # not before it is durable
    assert only(response).error_code == ErrorCode.NOT_COORDINATOR  # what is heard if the partition moves meanwhile
    log.durable(effects)
    assert only(response).error_code == ErrorCode.NONE
    stored = shard.state(GROUP, T1, 0)
    assert (stored.persisted.state_epoch, stored.persisted.start_offset, stored.delivery_complete_count) == (4, 100, 0)


def test_an_unknown_start_offset_has_no_delivery_complete_count(shard, log):
    initialized(shard, log, start_offset=-1)
    assert shard.state(GROUP, T1, 0).delivery_complete_count == -1
    result = only(done(shard, log, "read_state_summary", summary((T1, 0))))
    assert (result.start_offset, result.delivery_complete_count) == (-1, -1)


def test_initialize_with_a_lower_state_epoch_is_fenced(shard, log):
    initialized(shard, log, state_epoch=5)
    response, effects = shard.initialize_state(1, initialize((T1, 0, 4, 0)), NOW_MS)
    assert (only(response).error_code, persist_of(effects)) == (ErrorCode.FENCED_STATE_EPOCH, None)


def test_initialize_again_with_the_same_state_epoch_and_start_offset_writes_nothing(shard, log):
    initialized(shard, log, start_offset=10, state_epoch=2)
    response, effects = shard.initialize_state(1, initialize((T1, 0, 2, 10)), NOW_MS)
    assert effects == [Respond(1, response)] and only(response).error_code == ErrorCode.NONE


def test_initialize_again_starts_over_with_a_new_snapshot(shard, log):
    initialized(shard, log, start_offset=0, state_epoch=2)
    done(shard, log, "write_state", write(0, (0, 9, ACKNOWLEDGED, 1), state_epoch=2))
    initialized(shard, log, start_offset=5, state_epoch=2)  # the same state epoch, another start offset
    stored = shard.state(GROUP, T1, 0)
    assert (stored.snapshot_epoch, stored.persisted.start_offset, batches(stored)) == (1, 5, [])
    initialized(shard, log, start_offset=3, state_epoch=3)  # AlterShareGroupOffsets: backwards, a new state epoch
    stored = shard.state(GROUP, T1, 0)
    assert (stored.snapshot_epoch, stored.persisted.state_epoch, stored.persisted.start_offset) == (2, 3, 3)


@pytest.mark.parametrize("partition, state_epoch, topic, expected, message", [
    (-1, 1, T1, ErrorCode.INVALID_REQUEST, "The partition id cannot be a negative number."),
    (0, -1, T1, ErrorCode.INVALID_REQUEST, "The state epoch cannot be a negative number."),
    (0, 1, MISSING, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
    (4, 1, T1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
])
def test_initialize_refusals(shard, partition, state_epoch, topic, expected, message):
    response, effects = shard.initialize_state(1, initialize((topic, partition, state_epoch, 0)), NOW_MS)
    assert (only(response).error_code, only(response).error_message) == (expected, message)
    assert effects == [Respond(1, response)]


@pytest.mark.parametrize("call, request_value", [
    ("initialize_state", initialize((T1, 0, 1, 0), group="")),
    ("initialize_state", Initialize(group_id=GROUP, topics=[])),
    ("write_state", Write(group_id=GROUP, topics=[Write.WriteStateData(topic_id=T1, partitions=[])])),
    ("read_state", read((T1, 0, 0), group="")),
    ("read_state_summary", Summary(group_id=GROUP, topics=[])),
    ("delete_state", delete((T1, 0), group="")),
])
def test_a_request_without_group_topics_or_partitions_gets_an_empty_answer(shard, call, request_value):
    response, effects = getattr(shard, call)(1, request_value, NOW_MS)
    assert response.results == [] and effects == [Respond(1, response)]


def test_a_repeated_initialize_waits_for_the_one_on_its_way(shard, log):
    first, first_effects = shard.initialize_state(1, initialize((T1, 0, 1, 0)), NOW_MS)
    again, again_effects = shard.initialize_state(2, initialize((T1, 0, 1, 0)), NOW_MS)
    assert persist_of(again_effects).records == ()  # nothing to write: it waits for the first
    log.durable(first_effects)
    log.durable(again_effects)
    assert only(first).error_code == only(again).error_code == ErrorCode.NONE


def test_a_repeated_initialize_whose_twin_failed_is_retriable(shard, log):
    _, first_effects = shard.initialize_state(1, initialize((T1, 0, 1, 0)), NOW_MS)
    again, again_effects = shard.initialize_state(2, initialize((T1, 0, 1, 0)), NOW_MS)
    failed(first_effects)
    log.durable(again_effects)
    assert only(again).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert shard.state(GROUP, T1, 0) is None


# -- WriteShareGroupState ----------------------------------------------------------------------------------


def test_a_write_is_a_share_update_of_its_batches(shard, log):
    initialized(shard, log)
    response, effects = shard.write_state(1, write(0, (0, 4, ACKNOWLEDGED, 1), (5, 9, AVAILABLE, 1)), NOW_MS)
    [(key, value)] = persist_of(effects).records
    assert key == ShareUpdateKey(group_id=GROUP, topic_id=T1, partition=0)
    assert value == ShareUpdateValue(snapshot_epoch=0, leader_epoch=0, start_offset=0, delivery_complete_count=0,
                                     state_batches=[
                                         ShareUpdateValue.StateBatch(first_offset=0, last_offset=4, delivery_state=2,
                                                                     delivery_count=1),
                                         ShareUpdateValue.StateBatch(first_offset=5, last_offset=9, delivery_state=0,
                                                                     delivery_count=1)])
    log.durable(effects)
    assert only(response).error_code == ErrorCode.NONE
    assert batches(shard.state(GROUP, T1, 0)) == [(0, 4, ACKNOWLEDGED, 1), (5, 9, AVAILABLE, 1)]


def test_writing_an_uninitialized_share_partition_is_refused(shard):
    response, effects = shard.write_state(1, write(0, (0, 1, ACKNOWLEDGED, 1)), NOW_MS)
    assert (only(response).error_code, only(response).error_message) == (
        ErrorCode.INVALID_REQUEST, "Write operation on uninitialized share partition not allowed.")
    assert persist_of(effects) is None


@pytest.mark.parametrize("options, expected", [
    (dict(leader_epoch=2), ErrorCode.FENCED_LEADER_EPOCH),  # a reader recorded 3
    (dict(leader_epoch=3, state_epoch=1), ErrorCode.FENCED_STATE_EPOCH),  # initialized at 2
    (dict(leader_epoch=-1), ErrorCode.INVALID_REQUEST),
    (dict(leader_epoch=3, state_epoch=-1), ErrorCode.INVALID_REQUEST),
    (dict(leader_epoch=3, partition=-1), ErrorCode.INVALID_REQUEST),
    (dict(leader_epoch=3, topic=MISSING), ErrorCode.INVALID_REQUEST),  # no state for it: uninitialized first
])
def test_write_refusals(shard, log, options, expected):
    initialized(shard, log, state_epoch=2)
    done(shard, log, "read_state", read((T1, 0, 3)))
    response, effects = shard.write_state(1, write(0, (0, 1, ACKNOWLEDGED, 1), **{"state_epoch": 2, **options}),
                                          NOW_MS)
    assert only(response).error_code == expected and persist_of(effects) is None


def test_a_write_to_a_partition_the_metadata_does_not_know_is_refused(log):
    partition_counts = dict(TOPICS)
    shard = ShareCoordinatorShard(0, ONE_PARTITION, partition_counts.get)
    initialized(shard, log)
    del partition_counts[T1]  # the topic was deleted
    response, _ = shard.write_state(1, write(0, (0, 1, ACKNOWLEDGED, 1)), NOW_MS)
    assert only(response).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_batch_ending_before_it_begins_is_refused(shard, log):
    initialized(shard, log)
    response, effects = shard.write_state(1, write(0, (5, 4, ACKNOWLEDGED, 1)), NOW_MS)
    assert only(response).error_code == ErrorCode.INVALID_REQUEST and persist_of(effects) is None


def test_a_write_neither_sets_the_leader_epoch_nor_the_state_epoch(shard, log):
    initialized(shard, log, state_epoch=2)
    done(shard, log, "write_state", write(0, (0, 1, ACKNOWLEDGED, 1), state_epoch=9, leader_epoch=9))
    stored = shard.state(GROUP, T1, 0)
    assert (stored.persisted.state_epoch, stored.state_epoch_seen) == (2, 2)
    assert (stored.persisted.leader_epoch, stored.leader_epoch_seen) == (0, 0)
    # Only a reader's leader epoch fences: a write at 5 still goes through after one at 9.
    assert only(done(shard, log, "write_state", write(0, (2, 2, ACKNOWLEDGED, 1), state_epoch=2, leader_epoch=5))
                ).error_code == ErrorCode.NONE


def test_every_n_updates_a_snapshot_of_the_whole_state(shard, log):
    initialized(shard, log)  # updates_per_snapshot=3
    kinds = []
    for offset in range(8):
        _, effects = shard.write_state(1, write(0, (offset, offset, ACKNOWLEDGED if offset % 2 else AVAILABLE, 1)),
                                       NOW_MS + offset)
        [(key, value)] = persist_of(effects).records
        kinds.append(type(key).__name__)
        log.durable(effects)
    assert kinds == ["ShareUpdateKey"] * 3 + ["ShareSnapshotKey"] + ["ShareUpdateKey"] * 3 + ["ShareSnapshotKey"]
    snapshot = decode_value(decode_key(log.records[-1][0]), log.records[-1][1])
    assert (snapshot.snapshot_epoch, snapshot.state_epoch, snapshot.create_timestamp) == (2, 1, NOW_MS + 7)
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in snapshot.state_batches] == [
        (offset, offset, ACKNOWLEDGED if offset % 2 else AVAILABLE) for offset in range(8)]
    assert shard.state(GROUP, T1, 0).snapshot_epoch == 2


def test_with_zero_updates_per_snapshot_every_write_is_a_snapshot(log):
    shard = ShareCoordinatorShard(0, ShareCoordinatorConfig(state_topic_partition_count=1, updates_per_snapshot=0),
                                  TOPICS.get)
    initialized(shard, log)
    for offset in range(3):
        _, effects = shard.write_state(1, write(0, (offset, offset, ACKNOWLEDGED, 1)), NOW_MS)
        assert isinstance(persist_of(effects).records[0][0], ShareSnapshotKey)
        log.durable(effects)
    assert batches(shard.state(GROUP, T1, 0)) == [(0, 2, ACKNOWLEDGED, 1)]


def test_an_initialize_snapshot_does_not_restart_the_update_count(shard, log):
    initialized(shard, log)
    for offset in range(2):
        done(shard, log, "write_state", write(0, (offset, offset, ACKNOWLEDGED, 1)))
    initialized(shard, log, start_offset=10)  # Kafka resets the count only at the snapshot the count caused
    _, effects = shard.write_state(1, write(10, (10, 10, ACKNOWLEDGED, 1)), NOW_MS)
    assert isinstance(persist_of(effects).records[0][0], ShareUpdateKey)
    log.durable(effects)
    _, effects = shard.write_state(1, write(10, (11, 11, ACKNOWLEDGED, 1)), NOW_MS)
    assert isinstance(persist_of(effects).records[0][0], ShareSnapshotKey)


def test_a_write_carrying_an_older_start_offset_cannot_move_it_back(shard, log):
    initialized(shard, log)
    done(shard, log, "write_state", write(10, (10, 19, AVAILABLE, 1)))
    response, effects = shard.write_state(1, write(5, (5, 12, ACKNOWLEDGED, 1)), NOW_MS)  # made before the move
    [(_, value)] = persist_of(effects).records
    assert value.start_offset == 10
    assert [(b.first_offset, b.last_offset) for b in value.state_batches] == [(10, 12)]  # what lies below is dropped
    log.durable(effects)
    assert only(response).error_code == ErrorCode.NONE
    stored = shard.state(GROUP, T1, 0)
    assert stored.persisted.start_offset == 10
    assert batches(stored) == [(10, 12, ACKNOWLEDGED, 1), (13, 19, AVAILABLE, 1)]


@pytest.mark.parametrize("start_offset, delivery_complete_count, expected", [
    (10, 3, 7),  # the same start offset: the larger count
    (10, 9, 9),
    (5, 9, 7),  # an older start offset: the count as it stands
    (12, 2, 2),  # a newer start offset: the write's count
    (12, -1, -1),  # ... even a v0 write's, which has none
])
def test_the_delivery_complete_count_follows_the_start_offsets(shard, log, start_offset, delivery_complete_count,
                                                               expected):
    initialized(shard, log)
    done(shard, log, "write_state", write(10, (10, 16, ACKNOWLEDGED, 1), delivery_complete_count=7))
    done(shard, log, "write_state", write(start_offset, delivery_complete_count=delivery_complete_count))
    assert shard.state(GROUP, T1, 0).delivery_complete_count == expected
    assert only(done(shard, log, "read_state_summary", summary((T1, 0)))).delivery_complete_count == expected


def test_a_v0_write_has_no_delivery_complete_count(shard, log):
    initialized(shard, log)
    api = API_BY_NAME["WriteShareGroupState"]
    sent = write(3, (3, 4, ACKNOWLEDGED, 1), delivery_complete_count=5)
    request = api.decode_request(0, memoryview(api.encode_request(0, sent)))  # v0 cannot carry it
    assert request.topics[0].partitions[0].delivery_complete_count == -1
    done(shard, log, "write_state", request)
    assert shard.state(GROUP, T1, 0).delivery_complete_count == -1


# -- ReadShareGroupState -----------------------------------------------------------------------------------


def test_a_read_answers_the_state(shard, log):
    initialized(shard, log, state_epoch=3)
    done(shard, log, "write_state", write(0, (0, 2, ACKNOWLEDGED, 1), (3, 5, AVAILABLE, 2), state_epoch=3))
    response, effects = shard.read_state(1, read((T1, 0, 0)), NOW_MS)
    assert effects == [Respond(1, response)]  # the same leader epoch: nothing to write, answered at once
    result = only(response)
    assert (result.error_code, result.state_epoch, result.start_offset) == (ErrorCode.NONE, 3, 0)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches] == [
        (0, 2, ACKNOWLEDGED, 1), (3, 5, AVAILABLE, 2)]


def test_a_read_with_a_newer_leader_epoch_records_it_and_fences_the_older_leader(shard, log):
    initialized(shard, log)
    done(shard, log, "write_state", write(0, (0, 2, ACKNOWLEDGED, 1)))
    response, effects = shard.read_state(1, read((T1, 0, 4)), NOW_MS)
    [(key, value)] = persist_of(effects).records
    assert isinstance(key, ShareUpdateKey)
    assert (value.leader_epoch, value.start_offset, value.state_batches) == (4, 0, [])
    assert only(response).state_batches == []  # filled in once durable
    log.durable(effects)
    assert [(b.first_offset, b.last_offset) for b in only(response).state_batches] == [(0, 2)]
    assert shard.state(GROUP, T1, 0).persisted.leader_epoch == 4
    fenced, _ = shard.write_state(1, write(0, (3, 3, ACKNOWLEDGED, 1), leader_epoch=3), NOW_MS)
    assert only(fenced).error_code == ErrorCode.FENCED_LEADER_EPOCH
    stale_read, _ = shard.read_state(1, read((T1, 0, 3)), NOW_MS)
    assert only(stale_read).error_code == ErrorCode.FENCED_LEADER_EPOCH


@pytest.mark.parametrize("topic, partition, leader_epoch, expected, message", [
    (T1, 1, 0, ErrorCode.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed."),
    (T1, 0, -1, ErrorCode.INVALID_REQUEST, "The leader epoch cannot be a negative number."),
    (T1, -1, 0, ErrorCode.INVALID_REQUEST, "The partition id cannot be a negative number."),
])
def test_read_refusals(shard, log, topic, partition, leader_epoch, expected, message):
    initialized(shard, log)
    response, effects = shard.read_state(1, read((topic, partition, leader_epoch)), NOW_MS)
    assert (only(response).error_code, only(response).error_message) == (expected, message)
    assert effects == [Respond(1, response)]


def test_a_read_waits_for_the_writes_on_their_way_and_shows_what_became_durable(shard, log):
    initialized(shard, log)
    _, kept = shard.write_state(1, write(0, (0, 1, ACKNOWLEDGED, 1)), NOW_MS)
    _, lost = shard.write_state(2, write(0, (2, 3, ACKNOWLEDGED, 1)), NOW_MS)
    response, effects = shard.read_state(3, read((T1, 0, 0)), NOW_MS)
    assert persist_of(effects).records == ()  # it waits: the shell settles a partition's writes in order
    log.durable(kept)
    failed(lost)
    log.durable(effects)
    assert [(b.first_offset, b.last_offset) for b in only(response).state_batches] == [(0, 1)]


def test_a_read_whose_initialize_failed_meanwhile_finds_nothing(shard, log):
    _, init_effects = shard.initialize_state(1, initialize((T1, 0, 1, 0)), NOW_MS)
    response, effects = shard.read_state(2, read((T1, 0, 0)), NOW_MS)
    failed(init_effects)
    log.durable(effects)
    assert only(response).error_code == ErrorCode.INVALID_REQUEST


# -- ReadShareGroupStateSummary ----------------------------------------------------------------------------


def test_a_summary_of_a_share_partition_without_state(shard):
    response, effects = shard.read_state_summary(1, summary((T1, 0)), NOW_MS)
    result = only(response)
    assert effects == [Respond(1, response)]
    assert (result.error_code, result.start_offset, result.delivery_complete_count, result.state_epoch,
            result.leader_epoch) == (ErrorCode.NONE, -1, -1, 0, 0)


def test_a_summary_of_a_share_partition(shard, log):
    initialized(shard, log, state_epoch=2)
    done(shard, log, "read_state", read((T1, 0, 6)))
    done(shard, log, "write_state", write(4, (4, 9, ACKNOWLEDGED, 1), state_epoch=2, leader_epoch=6,
                                          delivery_complete_count=6))
    result = only(done(shard, log, "read_state_summary", summary((T1, 0))))
    assert (result.start_offset, result.delivery_complete_count, result.state_epoch, result.leader_epoch) == (
        4, 6, 2, 6)
    api = API_BY_NAME["ReadShareGroupStateSummary"]
    response = done(shard, log, "read_state_summary", summary((T1, 0)))
    assert api.decode_response(0, memoryview(api.encode_response(0, response))).results[0].partitions[0] \
        .delivery_complete_count == -1  # v0 does not carry it
    assert api.decode_response(1, memoryview(api.encode_response(1, response))).results[0].partitions[0] \
        .delivery_complete_count == 6


@pytest.mark.parametrize("topic, partition, expected", [
    (MISSING, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (T2, 2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (T1, -1, ErrorCode.INVALID_REQUEST),
])
def test_summary_refusals(shard, topic, partition, expected):
    response, _ = shard.read_state_summary(1, summary((topic, partition)), NOW_MS)
    assert only(response).error_code == expected


def test_a_summary_waits_for_a_write_on_its_way(shard, log):
    initialized(shard, log)
    _, effects = shard.write_state(1, write(3, (3, 5, AVAILABLE, 1)), NOW_MS)
    response, summary_effects = shard.read_state_summary(2, summary((T1, 0)), NOW_MS)
    assert persist_of(summary_effects).records == ()
    log.durable(effects)
    log.durable(summary_effects)
    assert only(response).start_offset == 3


# -- DeleteShareGroupState ---------------------------------------------------------------------------------


def test_delete_writes_a_tombstone_and_the_state_is_gone(shard, log):
    initialized(shard, log)
    done(shard, log, "write_state", write(0, (0, 1, ACKNOWLEDGED, 1)))
    response, effects = shard.delete_state(1, delete((T1, 0)), NOW_MS)
    assert persist_of(effects).records == ((ShareSnapshotKey(group_id=GROUP, topic_id=T1, partition=0), None),)
    assert shard.state(GROUP, T1, 0) is not None  # until the tombstone is durable
    log.durable(effects)
    assert only(response).error_code == ErrorCode.NONE and shard.state(GROUP, T1, 0) is None
    assert only(done(shard, log, "read_state", read((T1, 0, 0)))).error_code == ErrorCode.INVALID_REQUEST
    assert only(done(shard, log, "read_state_summary", summary((T1, 0)))).start_offset == -1
    initialized(shard, log, start_offset=7)  # a new start: snapshot epoch 0 again, the old epochs forgotten
    stored = shard.state(GROUP, T1, 0)
    assert (stored.snapshot_epoch, stored.persisted.start_offset) == (0, 7)
    assert log.replayed().states() == shard.states()


def test_deleting_what_is_not_there_writes_nothing(shard):
    response, effects = shard.delete_state(1, delete((T1, 0)), NOW_MS)
    assert effects == [Respond(1, response)] and only(response).error_code == ErrorCode.NONE


@pytest.mark.parametrize("topic, partition, expected", [
    (MISSING, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (T1, -1, ErrorCode.INVALID_REQUEST)])
def test_delete_refusals(shard, topic, partition, expected):
    response, _ = shard.delete_state(1, delete((topic, partition)), NOW_MS)
    assert only(response).error_code == expected


# -- durability --------------------------------------------------------------------------------------------


def test_a_failed_write_leaves_the_state_as_it_was_and_says_why(shard, log):
    initialized(shard, log)
    done(shard, log, "write_state", write(0, (0, 1, ACKNOWLEDGED, 1)))
    before = shard.states()
    response, effects = shard.write_state(1, write(5, (5, 9, ARCHIVED, 1)), NOW_MS)
    failed(effects, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert only(response).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert only(response).error_message
    assert shard.states() == before and shard.writes_in_flight == 0
    # The next write is built on the durable state, not on the failed one.
    _, effects = shard.write_state(1, write(0, (2, 2, ACKNOWLEDGED, 1)), NOW_MS)
    assert persist_of(effects).records[0][1].start_offset == 0
    log.durable(effects)
    assert batches(shard.state(GROUP, T1, 0)) == [(0, 2, ACKNOWLEDGED, 1)]


def test_writes_on_their_way_see_each_other_and_a_failure_between_them_is_dropped(shard, log):
    initialized(shard, log)
    _, first = shard.write_state(1, write(0, (0, 4, AVAILABLE, 1)), NOW_MS)
    _, second = shard.write_state(2, write(2, (5, 6, ACKNOWLEDGED, 1)), NOW_MS)
    _, third = shard.write_state(3, write(0, (7, 7, ARCHIVED, 1)), NOW_MS)
    assert persist_of(third).records[0][1].start_offset == 2  # it sees the second's start offset
    assert shard.writes_in_flight == 3 and shard.state(GROUP, T1, 0).persisted.state_batches == ()
    log.durable(first)
    failed(second)
    log.durable(third)
    stored = shard.state(GROUP, T1, 0)
    assert (stored.persisted.start_offset, batches(stored)) == (2, [(2, 4, AVAILABLE, 1), (7, 7, ARCHIVED, 1)])
    assert log.replayed().states() == shard.states()  # the durable state is the replay of the durable records


def test_a_request_for_several_share_partitions_writes_one_batch_and_answers_each(log):
    shard = ShareCoordinatorShard(0, ONE_PARTITION, TOPICS.get)
    response, effects = shard.initialize_state(1, initialize((T1, 0, 1, 0), (T2, 1, 1, 5), (MISSING, 0, 1, 0),
                                                             (T1, 1, 2, 3)), NOW_MS)
    assert [type(key).__name__ for key, _ in persist_of(effects).records] == ["ShareSnapshotKey"] * 3
    log.durable(effects)
    answers = [(topic.topic_id, [(p.partition, p.error_code) for p in topic.partitions]) for topic in response.results]
    assert answers == [(T1, [(0, ErrorCode.NONE)]), (T2, [(1, ErrorCode.NONE)]),
                       (MISSING, [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]), (T1, [(1, ErrorCode.NONE)])]
    assert sorted(shard.states()) == sorted([(GROUP, T1, 0), (GROUP, T2, 1), (GROUP, T1, 1)])
    response, effects = shard.read_state(1, read((T1, 0, 0), (T2, 1, 2), (T1, 3, 0)), NOW_MS)
    log.durable(effects)
    assert [(r.partitions[0].error_code, r.partitions[0].start_offset) for r in response.results] == [
        (ErrorCode.NONE, 0), (ErrorCode.NONE, 5), (ErrorCode.INVALID_REQUEST, 0)]


def test_without_a_waiter_the_caller_reads_the_response_once_the_writes_are_settled(shard, log):
    response, effects = shard.initialize_state(None, initialize((T1, 0, 1, 0)), NOW_MS)
    assert [type(effect) for effect in effects] == [Persist]
    failed(effects, ErrorCode.NOT_COORDINATOR)
    assert only(response).error_code == ErrorCode.NOT_COORDINATOR


# -- combining batches -------------------------------------------------------------------------------------


def sb(*batch_tuples) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(*batch) for batch in batch_tuples)


COMBINER_CASES = [
    # (so far, new, start offset, combined): each batch (first, last, state, count)
    ("both empty", [], [], 0, []),
    ("one batch is kept as it is", [(0, 9, 0, 1)], [], -1, [(0, 9, 0, 1)]),
    ("equal batches overlapping join", [(0, 5, 0, 1)], [(3, 9, 0, 1)], -1, [(0, 9, 0, 1)]),
    ("equal batches touching join", [(0, 4, 2, 1)], [(5, 9, 2, 1)], -1, [(0, 9, 2, 1)]),
    ("a gap is kept", [(0, 3, 2, 1)], [(5, 9, 2, 1)], -1, [(0, 3, 2, 1), (5, 9, 2, 1)]),
    ("a higher delivery count wins", [(0, 9, 2, 1)], [(3, 5, 0, 2)], -1, [(0, 2, 2, 1), (3, 5, 0, 2), (6, 9, 2, 1)]),
    ("a lower delivery count loses", [(3, 5, 0, 3)], [(0, 9, 4, 2)], -1, [(0, 2, 4, 2), (3, 5, 0, 3), (6, 9, 4, 2)]),
    ("at the same count the higher state wins", [(0, 9, 0, 1)], [(2, 4, 2, 1)], -1,
     [(0, 1, 0, 1), (2, 4, 2, 1), (5, 9, 0, 1)]),
    ("archived beats acknowledged", [(0, 4, 4, 1)], [(0, 9, 2, 1)], -1, [(0, 4, 4, 1), (5, 9, 2, 1)]),
    ("a lower state does not undo a higher one", [(0, 9, 2, 1)], [(0, 9, 0, 1)], -1, [(0, 9, 2, 1)]),
    ("same first offset, new one longer and higher", [(0, 4, 0, 1)], [(0, 9, 2, 1)], -1, [(0, 9, 2, 1)]),
    ("same last offset, new one inside and lower", [(0, 9, 2, 2)], [(5, 9, 0, 1)], -1, [(0, 9, 2, 2)]),
    ("overlapping new batches among themselves", [], [(0, 5, 0, 1), (3, 8, 2, 1), (4, 4, 0, 3)], -1,
     [(0, 2, 0, 1), (3, 3, 2, 1), (4, 4, 0, 3), (5, 8, 2, 1)]),
    ("unsorted input comes out sorted", [(20, 29, 0, 1)], [(0, 9, 2, 1)], -1, [(0, 9, 2, 1), (20, 29, 0, 1)]),
    ("below the start offset is dropped", [(0, 4, 0, 1)], [(5, 9, 2, 1)], 5, [(5, 9, 2, 1)]),
    ("a batch across the start offset is cut", [(0, 9, 0, 1)], [], 6, [(6, 9, 0, 1)]),
    ("cut, then joined", [(0, 6, 2, 1)], [(7, 9, 2, 1)], 3, [(3, 9, 2, 1)]),
    ("everything below the start offset", [(0, 4, 0, 1)], [(2, 8, 2, 1)], 9, []),
    ("a start offset of -1 prunes nothing", [(0, 4, 0, 1)], [], -1, [(0, 4, 0, 1)]),
    ("many updates to one offset", [(5, 5, 0, 1)], [(5, 5, 0, 2), (5, 5, 4, 2), (5, 5, 2, 2)], -1, [(5, 5, 4, 2)]),
]


@pytest.mark.parametrize("so_far, new, start_offset, expected", [case[1:] for case in COMBINER_CASES],
                         ids=[case[0] for case in COMBINER_CASES])
def test_the_batch_combiner(so_far, new, start_offset, expected):
    assert combine_state_batches(sb(*so_far), sb(*new), start_offset) == sb(*expected)


# -- replay ------------------------------------------------------------------------------------------------


def test_replaying_the_records_gives_the_same_state_and_the_same_answers(log):
    shard = ShareCoordinatorShard(0, ONE_PARTITION, TOPICS.get)
    initialized(shard, log, state_epoch=2)
    initialized(shard, log, topic=T2, partition=1, start_offset=-1)
    for step in range(11):  # more than three updates per snapshot: snapshots and updates in the log
        done(shard, log, "write_state", write(step, (step, step + 3, step % 3 * 2, 1 + step % 2), state_epoch=2,
                                              leader_epoch=step // 4, delivery_complete_count=step), NOW_MS + step)
        if step % 4 == 3:
            done(shard, log, "read_state", read((T1, 0, step // 4 + 1)))
    done(shard, log, "write_state", write(0, (0, 0, ACKNOWLEDGED, 1), topic=T2, partition=1))
    kinds = [decode_key(key).__class__.__name__ for key, _ in log.records]
    assert "ShareUpdateKey" in kinds and kinds.count("ShareSnapshotKey") > 2
    replayed = log.replayed()
    assert replayed.states() == shard.states()
    for request in (read((T1, 0, 3)), read((T2, 1, 0))):
        assert replayed.read_state(1, request, NOW_MS)[0] == shard.read_state(1, request, NOW_MS)[0]
    assert (replayed.read_state_summary(1, summary((T1, 0), (T2, 1)), NOW_MS)[0]
            == shard.read_state_summary(1, summary((T1, 0), (T2, 1)), NOW_MS)[0])
    # What comes next is written the same way after a reload: the same record.
    next_write = write(20, (20, 25, ARCHIVED, 2), state_epoch=2, leader_epoch=3)
    assert (persist_of(replayed.write_state(1, next_write, NOW_MS)[1]).records
            == persist_of(shard.write_state(1, next_write, NOW_MS)[1]).records)


def test_an_update_without_its_snapshot_is_kept_as_kafka_keeps_it():
    shard = ShareCoordinatorShard(0, ONE_PARTITION, TOPICS.get)
    key = ShareUpdateKey(group_id=GROUP, topic_id=T1, partition=0)
    shard.replay(key, ShareUpdateValue(snapshot_epoch=0, leader_epoch=2, start_offset=5, state_batches=[
        ShareUpdateValue.StateBatch(first_offset=5, last_offset=6, delivery_state=2, delivery_count=1)]))
    shard.replay(key, None)  # an update's tombstone: Kafka never writes one, and it deletes nothing
    stored = shard.state(GROUP, T1, 0)
    assert (stored.persisted.state_epoch, stored.persisted.start_offset, stored.state_epoch_seen) == (0, 5, None)
    assert batches(stored) == [(5, 6, ACKNOWLEDGED, 1)]


def test_an_update_with_start_offset_minus_one_keeps_the_start_offset(log):
    shard = ShareCoordinatorShard(0, ONE_PARTITION, TOPICS.get)
    initialized(shard, log, start_offset=4)
    shard.replay(ShareUpdateKey(group_id=GROUP, topic_id=T1, partition=0),
                 ShareUpdateValue(snapshot_epoch=0, leader_epoch=-1, start_offset=-1))
    stored = shard.state(GROUP, T1, 0)
    assert (stored.persisted.start_offset, stored.persisted.leader_epoch) == (4, 0)


# -- properties --------------------------------------------------------------------------------------------

OFFSET_MAX = 40
BATCH = st.tuples(st.integers(0, OFFSET_MAX), st.integers(0, 6), st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED]),
                  st.integers(1, 4)).map(lambda t: (t[0], min(t[0] + t[1], OFFSET_MAX), t[2], t[3]))
WRITE = st.tuples(st.integers(0, OFFSET_MAX), st.lists(BATCH, max_size=4))
OUTCOME = st.sampled_from(["durable", "durable", "durable", "failed"])


def model_after(model: dict[int, tuple[int, int]], start: int, start_offset: int,
                new_batches: list[tuple[int, int, int, int]]) -> tuple[dict[int, tuple[int, int]], int]:
    """The naive state: per offset, the (delivery count, state) with the highest priority ever written, and
    the start offset as the highest ever written, below which nothing is kept."""
    start = max(start, start_offset)
    model = dict(model)
    for first, last, state, count in new_batches:
        for offset in range(first, last + 1):  # bounded: offsets up to OFFSET_MAX
            model[offset] = max(model.get(offset, (count, state)), (count, state))
    return {offset: value for offset, value in model.items() if offset >= start}, start


def flattened(state_batches) -> dict[int, tuple[int, int]]:
    """(delivery count, state) per offset of well-formed batches."""
    per_offset = {}
    previous = None
    for batch in state_batches:
        assert batch.first_offset <= batch.last_offset
        if previous is not None:  # sorted, disjoint, touching equal batches joined
            assert previous.last_offset < batch.first_offset
            assert not (previous.last_offset + 1 == batch.first_offset
                        and (previous.delivery_state, previous.delivery_count)
                        == (batch.delivery_state, batch.delivery_count))
        for offset in range(batch.first_offset, batch.last_offset + 1):
            per_offset[offset] = (batch.delivery_count, batch.delivery_state)
        previous = batch
    return per_offset


@settings(max_examples=200, deadline=None)
@given(writes=st.lists(st.tuples(WRITE, OUTCOME), max_size=25), updates_per_snapshot=st.sampled_from([0, 1, 2, 5, 500]),
       in_flight=st.integers(1, 4))
def test_the_combined_state_is_the_per_offset_model_and_replay_rebuilds_it(writes, updates_per_snapshot, in_flight):
    config = ShareCoordinatorConfig(state_topic_partition_count=1, updates_per_snapshot=updates_per_snapshot)
    shard, log = ShareCoordinatorShard(0, config, TOPICS.get), Log()
    initialized(shard, log)
    model, start = {}, 0
    waiting: list[tuple[list, str, tuple]] = []  # writes on their way, settled in order, up to ``in_flight``
    any_failed = False

    def settle_first():
        nonlocal model, start, any_failed
        effects, outcome, (start_offset, new_batches) = waiting.pop(0)
        if outcome == "failed":
            failed(effects)
            any_failed = True
        else:
            log.durable(effects)
            model, start = model_after(model, start, start_offset, new_batches)

    for step, ((start_offset, new_batches), outcome) in enumerate(writes):
        _, effects = shard.write_state(1, write(start_offset, *new_batches), NOW_MS + step)
        waiting.append((effects, outcome, (start_offset, new_batches)))
        if len(waiting) >= in_flight:
            settle_first()
    while waiting:  # bounded: one write settled per turn
        settle_first()
    stored = shard.state(GROUP, T1, 0)
    assert shard.writes_in_flight == 0
    if not any_failed or in_flight == 1:
        # A snapshot made while a write that later failed was on its way holds that write's batches (the log
        # says so, and a reload would too), so the model holds when no failure had a write after it in flight.
        assert (flattened(stored.persisted.state_batches), stored.persisted.start_offset) == (model, start)
    else:
        flattened(stored.persisted.state_batches)  # still well formed
    assert log.replayed(config).states() == shard.states()


@settings(max_examples=100, deadline=None)
@given(so_far=st.lists(BATCH, max_size=5), new=st.lists(BATCH, max_size=5), start_offset=st.integers(-1, OFFSET_MAX))
def test_the_combiner_is_the_per_offset_model(so_far, new, start_offset):
    combined = combine_state_batches(sb(*so_far), sb(*new), start_offset)
    expected, _ = model_after({}, 0, 0, so_far + new)
    if start_offset >= 0:
        expected = {offset: value for offset, value in expected.items() if offset >= start_offset}
    assert flattened(combined) == expected
