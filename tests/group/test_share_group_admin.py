"""The share groups' admin APIs in the group core: AlterShareGroupOffsets, DeleteShareGroupOffsets and the
first step of DeleteGroups, as records of which share-partitions are initializing, initialized and deleting
(Kafka 4.2's GroupMetadataManager), and as the coordinator routes them."""

from __future__ import annotations

import pytest

from kbroker.effects import CoordinatorError, Persist
from kbroker.group.coordinator import CoordinatorConfig, GroupCoordinator
from kbroker.group.share import (NO_OFFSETS_MESSAGE, UNKNOWN_TOPIC_MESSAGE, InitializeShareGroupState, ShareGroup,
                                 ShareGroupConfig)
from kbroker.wire.errors import ErrorCode
from tests.group.test_coordinator_share_groups import HeartbeatRequest, settle
from tests.group.test_share_group import ORDERS, PAYMENTS, Harness, record_kinds, replayed, settled_group, topics_view

NAMES = {ORDERS: "orders", PAYMENTS: "payments"}


def empty_group(**partition_counts: int) -> Harness:
    """A group whose one member subscribed to orders (initialized) and left."""
    harness, (a,) = settled_group(1, **partition_counts)
    a.leave()
    return harness


def share_partitions(harness: Harness) -> tuple[dict, dict, dict]:
    """(initializing, initialized, deleting) as the group's records leave them."""
    stored = harness.group.persisted_state()
    return ({topic_id: set(info.partitions) for topic_id, info in stored.initializing.items()},
            {topic_id: set(info.partitions) for topic_id, info in stored.initialized.items()}, dict(stored.deleting))


# -- AlterShareGroupOffsets ----------------------------------------------------------------------------------


def test_alter_records_the_partitions_initializing_and_asks_for_them_at_the_group_epoch():
    harness = empty_group(orders=3, payments=2)
    initialize, effects = harness.group.alter_offsets({ORDERS: {0: 5, 2: 7}, PAYMENTS: {1: 0}}, NAMES, harness.now_ms)
    assert initialize == InitializeShareGroupState("group", harness.group.group_epoch,
                                                   {ORDERS: frozenset({0, 2}), PAYMENTS: frozenset({1})},
                                                   {ORDERS: {0: 5, 2: 7}, PAYMENTS: {1: 0}})
    assert record_kinds(effects[0].records) == ["StatePartitionMetadata"]
    harness.carry_out(effects)
    assert share_partitions(harness) == ({ORDERS: {0, 2}, PAYMENTS: {1}}, {ORDERS: {0, 1, 2}}, {})
    # The share coordinator set them: initialized, the next member is assigned them
    harness.carry_out(harness.group.state_initialized({ORDERS: {0, 2}}, harness.topics, harness.now_ms))
    assert share_partitions(harness) == ({PAYMENTS: {1}}, {ORDERS: {0, 1, 2}}, {})
    assert replayed(harness.persisted, harness).persisted_state() == harness.group.persisted_state()


def test_alter_refuses_a_group_with_members_and_changes_nothing():
    harness, _ = settled_group(1)
    before = harness.group.persisted_state()
    with pytest.raises(CoordinatorError) as refusal:
        harness.group.alter_offsets({ORDERS: {0: 1}}, NAMES, harness.now_ms)
    assert (refusal.value.error_code, str(refusal.value)) == (ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    assert harness.group.persisted_state() == before


def test_alter_with_nothing_to_set_writes_nothing():
    harness = empty_group()
    assert harness.group.alter_offsets({ORDERS: {}}, NAMES, harness.now_ms) == (None, [])


def test_a_topic_altered_while_deleting_is_no_longer_deleting():
    harness = empty_group(orders=2)
    deleted, _, effects = harness.group.begin_offsets_deletion(["orders"], harness.topics, harness.now_ms)
    harness.carry_out(effects)
    assert share_partitions(harness) == ({}, {}, {ORDERS: "orders"})
    _, effects = harness.group.alter_offsets({ORDERS: {1: 3}}, NAMES, harness.now_ms)
    harness.carry_out(effects)
    assert share_partitions(harness) == ({ORDERS: {1}}, {}, {})


# -- DeleteShareGroupOffsets ---------------------------------------------------------------------------------


def test_offsets_deletion_moves_initialized_topics_to_deleting_then_forgets_them():
    harness = empty_group(orders=2, payments=1)
    harness.carry_out(harness.group.alter_offsets({PAYMENTS: {0: 0}}, NAMES, harness.now_ms)[1])
    harness.carry_out(harness.group.state_initialized({PAYMENTS: {0}}, harness.topics, harness.now_ms))
    deleted, refused, effects = harness.group.begin_offsets_deletion(["orders", "gone"], harness.topics,
                                                                     harness.now_ms)
    assert deleted == {ORDERS: frozenset({0, 1})}
    assert refused == [("gone", UNKNOWN_TOPIC_MESSAGE)]
    harness.carry_out(effects)
    assert share_partitions(harness) == ({}, {PAYMENTS: {0}}, {ORDERS: "orders"})
    harness.carry_out(harness.group.offsets_deleted([ORDERS], harness.topics, harness.now_ms))
    assert share_partitions(harness) == ({}, {PAYMENTS: {0}}, {})
    # Nothing left of orders: a second deletion says so
    deleted, refused, _ = harness.group.begin_offsets_deletion(["orders"], harness.topics, harness.now_ms)
    assert (deleted, refused) == ({}, [("orders", NO_OFFSETS_MESSAGE)])


def test_a_topic_still_deleting_is_deleted_again_whole():
    harness = empty_group(orders=2)
    harness.carry_out(harness.group.begin_offsets_deletion(["orders"], harness.topics, harness.now_ms)[2])
    harness.topics = topics_view(orders=3)  # it grew meanwhile
    deleted, refused, _ = harness.group.begin_offsets_deletion(["orders"], harness.topics, harness.now_ms)
    assert (deleted, refused) == ({ORDERS: frozenset({0, 1, 2})}, [])


def test_offsets_deletion_answers_nothing_without_a_partitions_record_and_refuses_once_it_is_emptied():
    never = ShareGroup("never", ShareGroupConfig(), 0)  # no ShareGroupStatePartitionMetadata ever written
    assert never.begin_offsets_deletion(["orders", "gone"], topics_view(orders=1), 0) == ({}, [], [])
    harness = Harness()
    harness.client("a").join()
    harness.clients[0].leave()
    harness.carry_out(harness.group.begin_deletion(harness.topics, harness.now_ms)[1])
    harness.carry_out(harness.group.offsets_deleted([ORDERS], harness.topics, harness.now_ms))
    # The record stands, empty (Kafka 4.4 answers each topic then, as the differential suite saw)
    deleted, refused, _ = harness.group.begin_offsets_deletion(["orders", "gone"], harness.topics, harness.now_ms)
    assert (deleted, refused) == ({}, [("orders", NO_OFFSETS_MESSAGE), ("gone", UNKNOWN_TOPIC_MESSAGE)])
    assert replayed(harness.persisted, harness).persisted_state().state_partitions_recorded


def test_offsets_deletion_refuses_a_group_with_members():
    harness, _ = settled_group(1)
    with pytest.raises(CoordinatorError) as refusal:
        harness.group.begin_offsets_deletion(["orders"], harness.topics, harness.now_ms)
    assert refusal.value.error_code == ErrorCode.NON_EMPTY_GROUP


# -- DeleteGroups --------------------------------------------------------------------------------------------


def test_group_deletion_first_records_every_share_partition_deleting():
    harness = empty_group(orders=2, payments=3)
    harness.carry_out(harness.group.alter_offsets({PAYMENTS: {2: 0}}, NAMES, harness.now_ms)[1])
    doomed, effects = harness.group.begin_deletion(harness.topics, harness.now_ms)
    assert doomed == {ORDERS: frozenset({0, 1}), PAYMENTS: frozenset({2})}
    harness.carry_out(effects)
    assert share_partitions(harness) == ({}, {}, {ORDERS: "orders", PAYMENTS: "payments"})
    # Tried again after a failure: the deleting topics' partitions are all deleted, a topic gone is dropped
    harness.topics = topics_view(payments=3)
    doomed, effects = harness.group.begin_deletion(harness.topics, harness.now_ms)
    assert doomed == {PAYMENTS: frozenset({0, 1, 2})}
    harness.carry_out(effects)
    assert share_partitions(harness) == ({}, {}, {PAYMENTS: "payments"})
    harness.carry_out(harness.group.delete(harness.now_ms))
    assert not replayed(harness.persisted, harness).persisted_state().exists


def test_group_deletion_refuses_a_group_with_members():
    harness, _ = settled_group(1)
    with pytest.raises(CoordinatorError) as refusal:
        harness.group.begin_deletion(harness.topics, harness.now_ms)
    assert refusal.value.error_code == ErrorCode.NON_EMPTY_GROUP


# -- in the coordinator --------------------------------------------------------------------------------------


def coordinator() -> GroupCoordinator:
    made = GroupCoordinator(CoordinatorConfig())
    for partition in range(made.config.partition_count):
        made.finish_load(partition, 0)
    return made


def test_alter_makes_a_share_group_that_does_not_exist_and_refuses_other_kinds():
    groups = coordinator()
    initialize, effects = groups.alter_share_group_offsets("fresh", {ORDERS: {0: 4}}, NAMES, 0)
    assert isinstance(groups.groups["fresh"], ShareGroup)
    assert initialize.state_epoch == 1 and initialize.start_offsets == {ORDERS: {0: 4}}  # a new group's epoch
    settle(effects)
    assert groups.groups["fresh"].listed() == ("fresh", "share", "Empty", "share")
    groups.classic_group("classic", 0, create=True)
    with pytest.raises(CoordinatorError) as refusal:
        groups.alter_share_group_offsets("classic", {ORDERS: {0: 4}}, NAMES, 0)
    assert (refusal.value.error_code, str(refusal.value)) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                              "Group classic is not a share group.")


def test_a_share_group_made_by_an_alter_not_written_is_gone_again():
    groups = coordinator()
    _, effects = groups.alter_share_group_offsets("fresh", {ORDERS: {0: 4}}, NAMES, 0)
    settle(effects, durable=False)
    assert "fresh" not in groups.groups
    assert groups.alter_share_group_offsets("none", {}, NAMES, 0) == (None, [])
    assert "none" not in groups.groups  # nothing to write: nothing made


def test_the_coordinator_routes_the_admin_steps_to_share_groups_only():
    groups = coordinator()
    group = groups.share_group("queue", 0, now_ms=0)
    joining = HeartbeatRequest(group_id="queue", member_id="m", member_epoch=0, subscribed_topic_names=["orders"])
    _, effects = group.heartbeat(joining, "c", "h", topics_view(orders=2), 0)
    settle(effects)
    initialize = next(effect for effect in effects if isinstance(effect, InitializeShareGroupState))
    settle(group.state_initialized(initialize.partitions, topics_view(orders=2), 0))
    assert groups.initialized_share_partitions("queue") == {ORDERS: frozenset({0, 1})}
    assert groups.initialized_share_partitions("nobody") == {}
    groups.classic_group("classic", 0, create=True)
    assert groups.share_group_state_deletion("classic", topics_view(orders=2), 0) is None
    assert groups.share_group_state_deletion("nobody", topics_view(orders=2), 0) is None
    with pytest.raises(CoordinatorError) as refusal:
        groups.share_group_state_deletion("queue", topics_view(orders=2), 0)
    assert refusal.value.error_code == ErrorCode.NON_EMPTY_GROUP
    with pytest.raises(CoordinatorError) as refusal:
        groups.share_group_offsets_deletion("nobody", ["orders"], topics_view(orders=2), 0)
    assert (refusal.value.error_code, str(refusal.value)) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nobody not found.")
    settle(group.heartbeat(HeartbeatRequest(group_id="queue", member_id="m", member_epoch=-1), "c", "h",
                           topics_view(orders=2), 0)[1])
    doomed, effects = groups.share_group_state_deletion("queue", topics_view(orders=2), 0)
    assert doomed == {ORDERS: frozenset({0, 1})}
    assert all(isinstance(effect, Persist) for effect in effects)

