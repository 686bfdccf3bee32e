"""The group coordinator over a real __consumer_offsets partition whose writes fail or wait (DESIGN.md rule 11):
a commit, a classic generation or a consumer group's change counts only once its record is durable, and never if
its append or its fsync fails.

The handlers are called directly over tests/kbroker/in_memory_parts.py: a real GroupShell, a real Partition
over a real Log in tmp_path, fsyncs run by a MemoryFlusher that the test holds back or makes fail, and appends
that raise while the test says so (as a full disk's would).
"""

from __future__ import annotations

import dataclasses

import pytest
import trio
import trio.testing

from kbroker.group.classic import GroupState
from kbroker.group.shell import OFFSETS_TOPIC, GroupShell
from kbroker.handlers import (consumer_group_describe, consumer_group_heartbeat, describe_groups, join_group,
                              offset_commit, offset_fetch, sync_group)
from kbroker.log.clock import FakeClock
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME
from tests.kbroker.in_memory_parts import (FSYNC_FAILED, THIS_NODE, FailingAppends, MemoryFlusher, MemoryNode, answer_of,
                                           fail_writes, replicas_on_disk, running, topic_led_here)

pytestmark = pytest.mark.trio

OffsetCommitRequest = API_BY_NAME["OffsetCommit"].request_class
OffsetFetchRequest = API_BY_NAME["OffsetFetch"].request_class
JoinGroupRequest = API_BY_NAME["JoinGroup"].request_class
SyncGroupRequest = API_BY_NAME["SyncGroup"].request_class
DescribeGroupsRequest = API_BY_NAME["DescribeGroups"].request_class
ConsumerGroupHeartbeatRequest = API_BY_NAME["ConsumerGroupHeartbeat"].request_class
ConsumerGroupDescribeRequest = API_BY_NAME["ConsumerGroupDescribe"].request_class


@pytest.fixture
def flusher() -> MemoryFlusher:
    return MemoryFlusher()


@pytest.fixture
async def node(tmp_path, flusher, nursery) -> MemoryNode:
    """A node leading "events" and the one __consumer_offsets partition (appends failing at will), its shell running."""
    node = MemoryNode(topic_led_here("events", 2), topic_led_here(OFFSETS_TOPIC),
                      open_replica=replicas_on_disk(tmp_path, flusher),
                      settings={"offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0})
    node.replicas[(OFFSETS_TOPIC, 0)] = FailingAppends(node.partition(OFFSETS_TOPIC, 0))
    await start_shell(node, nursery)
    return node


async def start_shell(node: MemoryNode, nursery) -> None:
    """A new coordinator, rebuilt from the offsets partition's records."""
    node.groups = await running(GroupShell(node, FakeClock()), nursery)


def fail(node: MemoryNode, flusher: MemoryFlusher, how: str | None) -> None:
    fail_writes(node, flusher, OFFSETS_TOPIC, how)


async def commit(node, offset: int) -> int:
    partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    request = OffsetCommitRequest(group_id="readers", member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name="events", partitions=[
            partition(partition_index=0, committed_offset=offset, committed_metadata="")])])
    [topic] = (await answer_of(offset_commit, node, "OffsetCommit", 8, request)).topics
    return topic.partitions[0].error_code


async def committed(node, *, require_stable: bool = False) -> tuple[int, int]:
    """(error code, offset) of events-0 for the group, as OffsetFetch v8 answers."""
    group = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest(require_stable=require_stable, groups=[group(group_id="readers", topics=[
        group.OffsetFetchRequestTopics(name="events", partition_indexes=[0])])])
    [answer] = (await answer_of(offset_fetch, node, "OffsetFetch", 8, request)).groups
    [partition] = answer.topics[0].partitions
    return answer.error_code or partition.error_code, partition.committed_offset


@pytest.mark.parametrize("how", ["append", "fsync"])
async def test_a_commit_not_written_is_answered_an_error_and_the_old_offset_stays(node, flusher, nursery, how):
    assert await commit(node, 5) == ErrorCode.NONE
    fail(node, flusher, how)
    assert await commit(node, 9) == ErrorCode.COORDINATOR_NOT_AVAILABLE  # retriable: the consumer commits again
    assert await committed(node) == (ErrorCode.NONE, 5)
    assert await committed(node, require_stable=True) == (ErrorCode.NONE, 5)
    fail(node, flusher, None)
    if how == "append":  # nothing of it reached the log: a coordinator loaded from it has the old offset too
        await start_shell(node, nursery)
        assert await committed(node) == (ErrorCode.NONE, 5)
    assert await commit(node, 12) == ErrorCode.NONE  # once writes work again
    assert await committed(node) == (ErrorCode.NONE, 12)
    await start_shell(node, nursery)
    assert await committed(node) == (ErrorCode.NONE, 12)


@pytest.mark.parametrize("fsync_fails", [False, True])
async def test_a_commit_is_fetched_only_once_its_record_is_durable(node, flusher, nursery, fsync_fails):
    """Kafka's OffsetFetch reads the committed state; with require_stable it waits behind the writes under way."""
    assert await commit(node, 5) == ErrorCode.NONE
    flusher.held = True
    answers = {}

    async def ask(name, call):
        answers[name] = await call

    nursery.start_soon(ask, "commit", commit(node, 9))
    await trio.testing.wait_all_tasks_blocked()
    assert await committed(node) == (ErrorCode.NONE, 5)  # appended, not yet durable
    nursery.start_soon(ask, "stable", committed(node, require_stable=True))
    await trio.testing.wait_all_tasks_blocked()
    assert not answers  # the commit waits for its fsync, the stable fetch for the commit

    flusher.failing = FSYNC_FAILED if fsync_fails else None
    flusher.release()
    await trio.testing.wait_all_tasks_blocked()
    if fsync_fails:
        assert answers == {"commit": ErrorCode.COORDINATOR_NOT_AVAILABLE, "stable": (ErrorCode.NONE, 5)}
    else:
        assert answers == {"commit": ErrorCode.NONE, "stable": (ErrorCode.NONE, 9)}
    assert await committed(node) == answers["stable"]


def join_request(member_id: str) -> object:
    return JoinGroupRequest(group_id="readers", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                            member_id=member_id, group_instance_id=None, protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])


async def join(node, member_id: str):
    return await answer_of(join_group, node, "JoinGroup", 9, join_request(member_id))


async def sync(node, member_id: str, generation: int) -> object:
    request = SyncGroupRequest(group_id="readers", generation_id=generation, member_id=member_id,
                               group_instance_id=None, protocol_type="consumer", protocol_name="range",
                               assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id,
                                                                                      assignment=b"events-0")])
    return await answer_of(sync_group, node, "SyncGroup", 5, request)


async def described(node) -> tuple[str, list[bytes]]:
    [group] = (await answer_of(describe_groups, node, "DescribeGroups", 5,
                               DescribeGroupsRequest(groups=["readers"]))).groups
    return group.group_state, [member.member_assignment for member in group.members]


@pytest.mark.parametrize("how", ["append", "fsync"])
async def test_a_generation_whose_assignment_is_not_written_never_becomes_stable(node, flusher, nursery, how):
    member_id = (await join(node, "")).member_id  # KIP-394: the first join hands out the member id
    joined = await join(node, member_id)
    assert (joined.error_code, joined.generation_id, joined.leader) == (ErrorCode.NONE, 1, member_id)

    fail(node, flusher, how)
    assert (await sync(node, member_id, 1)).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert await described(node) == (GroupState.PREPARING_REBALANCE.value, [b""])  # no Stable generation 1
    assert node.groups.coordinator.groups["readers"].members[member_id].assignment == b""

    fail(node, flusher, None)  # the member rejoins, as a client does after the error
    rejoined = await join(node, member_id)
    assert (rejoined.error_code, rejoined.generation_id) == (ErrorCode.NONE, 2)
    synced = await sync(node, member_id, 2)
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"events-0")
    assert await described(node) == (GroupState.STABLE.value, [b"events-0"])

    await start_shell(node, nursery)
    group = node.groups.coordinator.groups["readers"]
    assert (group.generation_id, group.members[member_id].assignment) == (2, b"events-0")


async def test_a_generation_is_stable_only_once_its_assignment_is_durable(node, flusher, nursery):
    member_id = (await join(node, "")).member_id
    await join(node, member_id)
    flusher.held = True
    answers = []

    async def leader_syncs():
        answers.append(await sync(node, member_id, 1))

    nursery.start_soon(leader_syncs)
    await trio.testing.wait_all_tasks_blocked()
    assert not answers and await described(node) == (GroupState.COMPLETING_REBALANCE.value, [b""])
    flusher.release()
    await trio.testing.wait_all_tasks_blocked()
    assert answers[0].assignment == b"events-0"
    assert await described(node) == (GroupState.STABLE.value, [b"events-0"])


async def consumer_join(node, member_id: str):
    """A KIP-848 consumer (ConsumerGroupHeartbeat v1) joining with its own member id, subscribed to events."""
    request = ConsumerGroupHeartbeatRequest(group_id="readers", member_id=member_id, member_epoch=0,
                                            rebalance_timeout_ms=10_000, subscribed_topic_names=["events"],
                                            topic_partitions=[])
    return await answer_of(consumer_group_heartbeat, node, "ConsumerGroupHeartbeat", 1, request)


async def consumer_members(node) -> dict[str, int]:
    request = ConsumerGroupDescribeRequest(group_ids=["readers"])
    [group] = (await answer_of(consumer_group_describe, node, "ConsumerGroupDescribe", 0, request)).groups
    return {member.member_id: member.member_epoch for member in group.members}


@pytest.mark.parametrize("how", ["append", "fsync"])
async def test_a_consumer_group_join_not_written_is_undone(node, flusher, nursery, how):
    assert (await consumer_join(node, "first")).error_code == ErrorCode.NONE
    fail(node, flusher, how)
    answer = await consumer_join(node, "second")
    assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert await consumer_members(node) == {"first": 2}  # the group as its log has it: no second, epoch 2

    fail(node, flusher, None)
    joined = await consumer_join(node, "second")
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.NONE, 3)
    await start_shell(node, nursery)
    assert set(await consumer_members(node)) == {"first", "second"}


async def test_a_commit_waiting_when_leadership_moves_away_fails_at_once(node, flusher, nursery):
    """Kafka's runtime fails the writes still pending on a partition it unloads: the client finds the new
    coordinator, which loads what was committed. Without that, the answer would wait for a commit that this
    broker, no longer the leader, never sees."""
    assert await commit(node, 5) == ErrorCode.NONE
    flusher.held = True
    answers = {}

    async def ask():
        answers["commit"] = await commit(node, 9)

    nursery.start_soon(ask)
    await trio.testing.wait_all_tasks_blocked()
    assert not answers
    offsets = node.image.topics[OFFSETS_TOPIC]
    moved = dataclasses.replace(offsets, partitions=tuple(
        dataclasses.replace(state, leader=THIS_NODE + 1, leader_epoch=state.leader_epoch + 1)
        for state in offsets.partitions))
    node.image = dataclasses.replace(node.image, topics={**node.image.topics, OFFSETS_TOPIC: moved})
    node.groups.leadership_changed()
    with trio.fail_after(5):
        while not answers:
            await trio.sleep(0.01)
    assert answers["commit"] in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)
