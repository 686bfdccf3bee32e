"""Share groups in the group coordinator: created by a join, loaded from their records, listed as type
"share", deleted; never turned into (or out of) a classic or consumer group, with Kafka's answers."""

from __future__ import annotations

import uuid

import pytest

from kbroker.effects import CoordinatorError, Persist
from kbroker.group import records
from kbroker.group.classic import ClassicGroup
from kbroker.group.consumer import TopicsView
from kbroker.group.coordinator import CoordinatorConfig, GroupCoordinator
from kbroker.group.share import ShareGroup
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

HeartbeatRequest = API_BY_NAME["ShareGroupHeartbeat"].request_class
ORDERS = uuid.UUID(int=7)
TOPICS = TopicsView(by_name={"orders": (ORDERS, 2)})


def coordinator() -> GroupCoordinator:
    made = GroupCoordinator(CoordinatorConfig())
    for partition in range(made.config.partition_count):
        made.finish_load(partition, 0)
    return made


def settle(effects, durable: bool = True) -> None:
    """Tell every Persist its fate, in order, as the shell would."""
    for effect in effects:
        if isinstance(effect, Persist):
            if durable and effect.on_durable:
                settle(effect.on_durable(0))
            elif not durable and effect.on_failure:
                settle(effect.on_failure(ErrorCode.COORDINATOR_NOT_AVAILABLE, 0))


def joined(groups: GroupCoordinator, group_id: str = "queue") -> ShareGroup:
    group = groups.share_group(group_id, 0, now_ms=0)
    response, effects = group.heartbeat(HeartbeatRequest(group_id=group_id, member_id="m1", member_epoch=0,
                                                         subscribed_topic_names=["orders"]), "c", "/127.0.0.1", TOPICS, 0)
    assert response.error_code == ErrorCode.NONE
    settle(effects)
    return group


def test_a_join_creates_a_share_group_and_a_heartbeat_without_one_is_group_id_not_found():
    groups = coordinator()
    with pytest.raises(CoordinatorError) as refused:
        groups.share_group("queue", 3, now_ms=0)
    assert refused.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert "queue" not in groups.groups
    group = joined(groups)
    assert groups.share_group("queue", 1, now_ms=0) is group
    assert [(group_id, g.listed()) for group_id, g in groups.listed()] == [
        ("queue", ("queue", "share", "Stable", "share"))]


def test_share_and_other_groups_never_change_kind():
    groups = coordinator()
    joined(groups)
    groups.classic_group("classic", 0, create=True)
    with pytest.raises(CoordinatorError) as refused:
        groups.share_group("classic", 0, now_ms=0)
    assert (refused.value.error_code, str(refused.value)) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                              "Group classic is not a share group.")
    with pytest.raises(CoordinatorError) as refused:
        groups.classic_group("queue", 0, create=True)  # JoinGroup
    assert refused.value.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    with pytest.raises(CoordinatorError) as refused:
        groups.consumer_group("queue", 0, create=True)  # ConsumerGroupHeartbeat
    assert (refused.value.error_code, str(refused.value)) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                              "Group queue is not a consumer group.")
    with pytest.raises(CoordinatorError) as refused:
        groups.commit_offsets("queue", "m1", None, 1, 9, {})
    assert refused.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    with pytest.raises(CoordinatorError) as refused:
        groups.described_share_group("classic")
    assert refused.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert isinstance(groups.groups["classic"], ClassicGroup)


def test_a_share_group_is_loaded_from_its_records_and_a_tombstone_removes_it():
    written = coordinator()
    group = joined(written)
    loaded = coordinator()
    for key, value in group.records():
        loaded.replay(key, value, now_ms=0)
    assert isinstance(loaded.groups["queue"], ShareGroup)
    assert loaded.groups["queue"].persisted_state() == group.persisted_state()
    for key, value in records_deleting(group):
        loaded.replay(key, value, now_ms=0)
    assert "queue" not in loaded.groups


def records_deleting(group: ShareGroup) -> list:
    from kbroker.group.share_records import deletion_records

    return deletion_records(group.group_id, group.persisted_state())


def test_delete_groups_refuses_a_share_group_with_members_and_deletes_an_empty_one():
    groups = coordinator()
    group = joined(groups)
    with pytest.raises(CoordinatorError) as refused:
        groups.delete_group("queue")
    assert refused.value.error_code == ErrorCode.NON_EMPTY_GROUP
    _, effects = group.heartbeat(HeartbeatRequest(group_id="queue", member_id="m1", member_epoch=-1), "c",
                                 "/127.0.0.1", TOPICS, 0)
    settle(effects)
    effects = groups.delete_group("queue")
    assert "queue" not in groups.groups  # gone for requests at once
    tombstones = [pair for effect in effects if isinstance(effect, Persist) for pair in effect.records]
    assert (records.ShareGroupMetadataKey(group_id="queue"), None) in tombstones
    settle(effects)
    assert "queue" not in groups.groups


def test_a_share_group_whose_tombstones_fail_comes_back():
    groups = coordinator()
    group = joined(groups)
    _, effects = group.heartbeat(HeartbeatRequest(group_id="queue", member_id="m1", member_epoch=-1), "c",
                                 "/127.0.0.1", TOPICS, 0)
    settle(effects)
    settle(groups.delete_group("queue"), durable=False)
    assert groups.groups["queue"] is group
