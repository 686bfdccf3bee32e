"""The coordinator core: ownership, offsets, deletion, retention and rebuilding from records."""

from __future__ import annotations

import pytest

from kbroker.group import records
from kbroker.group.classic import ClassicGroup, GroupState
from kbroker.group.coordinator import CoordinatorConfig, GroupCoordinator, CoordinatorError
from kbroker.effects import Persist
from kbroker.group.offsets import CommittedOffset
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

JoinGroupRequest = API_BY_NAME["JoinGroup"].request_class
Protocol = JoinGroupRequest.JoinGroupRequestProtocol

PARTITIONS = 4


def loaded_coordinator(**options) -> GroupCoordinator:
    coordinator = GroupCoordinator(CoordinatorConfig(partition_count=PARTITIONS, **options),
                                   classic_member_id=lambda client: f"{client}-1")
    for partition in range(PARTITIONS):
        coordinator.finish_load(partition, 0)
    return coordinator


def persisted(effects) -> list:
    """The records of ``effects``, appended and durable: the core is told so, as its shell tells it."""
    for effect in effects:
        if isinstance(effect, Persist) and effect.on_durable is not None:
            effect.on_durable(0)
    return [pair for effect in effects if isinstance(effect, Persist) for pair in effect.records]


def offset(value: int, at_ms: int = 0) -> CommittedOffset:
    return CommittedOffset(offset=value, leader_epoch=-1, metadata="m", commit_timestamp_ms=at_ms)


def test_requests_for_partitions_not_loaded_are_refused_with_kafkas_codes():
    coordinator = GroupCoordinator(CoordinatorConfig(partition_count=PARTITIONS))
    partition = coordinator.partition_of("g")
    with pytest.raises(CoordinatorError) as refused:
        coordinator.check("g")
    assert refused.value.error_code == ErrorCode.NOT_COORDINATOR
    coordinator.begin_load(partition)
    with pytest.raises(CoordinatorError) as refused:
        coordinator.check("g")
    assert refused.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    coordinator.finish_load(partition, 0)
    coordinator.check("g")


def test_simple_commits_create_an_empty_group_and_survive_a_rebuild():
    coordinator = loaded_coordinator()
    errors, effects = coordinator.commit_offsets("g", "", None, -1, 9, {("t", 0): offset(5), ("t", 1): offset(7)})
    assert set(errors.values()) == {ErrorCode.NONE}
    written = persisted(effects)
    assert coordinator.offsets.get("g", "t", 1).offset == 7
    assert coordinator.groups["g"].state is GroupState.EMPTY

    rebuilt = loaded_coordinator()
    for key, value in written:
        rebuilt.replay(records.decode_key(records.encode_key(key)), records.decode_value(key, records.encode_value(value)), 0)
    assert rebuilt.offsets.get("g", "t", 0) == coordinator.offsets.get("g", "t", 0)
    assert isinstance(rebuilt.groups["g"], ClassicGroup)


def test_commits_with_a_generation_need_a_group():
    coordinator = loaded_coordinator()
    for version, code in ((8, ErrorCode.ILLEGAL_GENERATION), (9, ErrorCode.GROUP_ID_NOT_FOUND)):
        with pytest.raises(CoordinatorError) as refused:
            coordinator.commit_offsets("nobody", "member", None, 3, version, {("t", 0): offset(1)})
        assert refused.value.error_code == code


def test_metadata_too_large_is_refused_per_partition():
    coordinator = loaded_coordinator(offset_metadata_max_bytes=4)
    big = CommittedOffset(offset=1, leader_epoch=-1, metadata="x" * 5, commit_timestamp_ms=0)
    errors, effects = coordinator.commit_offsets("g", "", None, -1, 9, {("t", 0): big, ("t", 1): offset(2)})
    assert errors == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): ErrorCode.NONE}
    assert [key.partition for key, _ in persisted(effects)] == [1]
    assert coordinator.offsets.get("g", "t", 0) is None and coordinator.offsets.get("g", "t", 1).offset == 2


def test_an_active_group_cannot_be_deleted_and_an_empty_one_leaves_tombstones():
    coordinator = loaded_coordinator()
    group = coordinator.classic_group("g", 0, create=True)
    request = JoinGroupRequest(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                               protocol_type="consumer", protocols=[Protocol(name="range", metadata=b"")])
    group.join(1, request, 3, "c", "h", 0)  # v3: no member id handshake; waits out the initial delay
    assert list(group.members) == ["c-1"]
    with pytest.raises(CoordinatorError) as refused:
        coordinator.delete_group("g")
    assert refused.value.error_code == ErrorCode.NON_EMPTY_GROUP
    with pytest.raises(CoordinatorError) as refused:
        coordinator.delete_group("unknown")
    assert refused.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    persisted(coordinator.commit_offsets("h", "", None, -1, 9, {("t", 0): offset(1)})[1])
    tombstones = persisted(coordinator.delete_group("h"))
    assert all(value is None for _, value in tombstones)
    assert {type(key) for key, _ in tombstones} == {records.OffsetCommitKey, records.GroupMetadataKey}
    assert "h" not in coordinator.groups


def test_offsets_of_an_empty_group_expire_after_the_retention():
    coordinator = loaded_coordinator(offsets_retention_ms=1000)
    persisted(coordinator.commit_offsets("g", "", None, -1, 9, {("t", 0): offset(1, at_ms=100)})[1])
    coordinator.after("g", [])
    assert coordinator.expire_offsets(500) == []
    [(group_id, effects)] = coordinator.expire_offsets(100 + 1000)
    assert group_id == "g" and persisted(effects) == [(records.OffsetCommitKey(group="g", topic="t", partition=0), None)]


def test_transactional_commits_wait_for_their_marker():
    coordinator = loaded_coordinator()
    partition = coordinator.partition_of("g")
    errors, effects = coordinator.commit_transactional_offsets("g", 7, 0, "", None, -1, {("t", 0): offset(3)})
    assert errors == {("t", 0): ErrorCode.NONE}
    persisted(effects)
    assert [effect.producer for effect in effects] == [(7, 0)]  # written inside producer 7's transaction
    assert coordinator.offsets.get("g", "t", 0) is None
    assert coordinator.offsets.pending_partitions("g") == {("t", 0)}
    coordinator.transaction_ended(partition + 1, 7, commit=True)  # another partition's marker: not ours
    assert coordinator.offsets.get("g", "t", 0) is None
    coordinator.transaction_ended(partition, 7, commit=True)
    assert coordinator.offsets.get("g", "t", 0).offset == 3 and not coordinator.offsets.pending_partitions("g")

    persisted(coordinator.commit_transactional_offsets("g", 8, 0, "", None, -1, {("t", 0): offset(9)})[1])
    coordinator.transaction_ended(partition, 8, commit=False)
    assert coordinator.offsets.get("g", "t", 0).offset == 3  # the aborted commit never counted


def test_a_commit_is_fetched_only_once_durable_and_never_if_its_write_fails():
    coordinator = loaded_coordinator()
    persisted(coordinator.commit_offsets("g", "", None, -1, 9, {("t", 0): offset(1)})[1])
    _, [first] = coordinator.commit_offsets("g", "", None, -1, 9, {("t", 0): offset(2)})
    _, [second] = coordinator.commit_offsets("g", "", None, -1, 9, {("t", 0): offset(3)})
    assert coordinator.offsets.get("g", "t", 0).offset == 1  # what OffsetFetch shows: neither is durable
    assert coordinator.offsets.latest_of_group("g")[("t", 0)].offset == 3  # what a write sees

    first.on_failure(ErrorCode.COORDINATOR_NOT_AVAILABLE, 0)  # told in append order: the first failed
    assert coordinator.offsets.get("g", "t", 0).offset == 1
    second.on_durable(0)
    assert coordinator.offsets.get("g", "t", 0).offset == 3

    _, [third] = coordinator.commit_offsets("g", "", None, -1, 9, {("t", 0): offset(4)})
    third.on_failure(ErrorCode.COORDINATOR_NOT_AVAILABLE, 0)
    assert coordinator.offsets.get("g", "t", 0).offset == 3
    assert coordinator.offsets.latest_of_group("g")[("t", 0)].offset == 3


def test_a_group_whose_deletion_is_not_written_is_back_with_its_offsets():
    coordinator = loaded_coordinator()
    persisted(coordinator.commit_offsets("g", "", None, -1, 9, {("t", 0): offset(1)})[1])
    group = coordinator.groups["g"]
    [tombstones] = coordinator.delete_group("g")
    assert "g" not in coordinator.groups  # gone for the requests that follow
    assert coordinator.offsets.get("g", "t", 0).offset == 1  # still committed until the tombstones are durable
    tombstones.on_failure(ErrorCode.COORDINATOR_NOT_AVAILABLE, 0)
    assert coordinator.groups["g"] is group and coordinator.offsets.get("g", "t", 0).offset == 1

    persisted(coordinator.delete_group("g"))
    assert "g" not in coordinator.groups and coordinator.offsets.get("g", "t", 0) is None


def test_a_transactional_commit_waits_for_its_write_and_its_marker_in_either_order():
    coordinator = loaded_coordinator()
    partition = coordinator.partition_of("g")
    _, [failed] = coordinator.commit_transactional_offsets("g", 7, 0, "", None, -1, {("t", 0): offset(3)})
    failed.on_failure(ErrorCode.COORDINATOR_NOT_AVAILABLE, 0)
    assert not coordinator.offsets.pending_partitions("g")  # never written: nothing to wait for

    _, [written] = coordinator.commit_transactional_offsets("g", 7, 0, "", None, -1, {("t", 0): offset(4)})
    coordinator.transaction_ended(partition, 7, commit=True)  # the marker's fsync reported first
    assert coordinator.offsets.get("g", "t", 0) is None
    written.on_durable(0)
    assert coordinator.offsets.get("g", "t", 0).offset == 4 and not coordinator.offsets.pending_partitions("g")
