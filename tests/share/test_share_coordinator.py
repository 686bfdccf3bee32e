"""The share coordinator's core (kbroker/share/coordinator.py), API by API: every answer and refusal, and
durability (DESIGN.md rule 11). The records, the batch combiner, replay and the properties are in
test_share_coordinator_state.py."""

from __future__ import annotations

import pytest

from kbroker.effects import Persist, Respond
from kbroker.share.coordinator import ShareCoordinatorConfig, ShareCoordinatorShard
from kbroker.share.persisted import StateBatch
from kbroker.share.state_records import (ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue,
                                         decode_key, decode_value)
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME
from tests.share.coordinator_calls import (  # noqa: F401 (log and shard are fixtures)
    ACKNOWLEDGED, ARCHIVED, AVAILABLE, GROUP, MISSING, NOW_MS, ONE_PARTITION, T1, T2, TOPICS, Initialize, Summary,
    Write, batches, delete, done, failed, initialize, initialized, log, only, persist_of, read, shard, summary, write)


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
