"""The group shell (the coordinator runtime around the core) on a FakeClock: a member's session runs
out when the clock says so, and the group's records carry the clock's time. No sleeps, no patching:
the test moves the clock and asks the runtime to fire what is due, as its timer task does."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
import trio
import trio.testing

from kbroker.config.broker_config import BrokerConfig
from kbroker.group.classic import GroupState
from kbroker.group.shell import OFFSETS_TOPIC, GroupShell
from kbroker.log.clock import FakeClock
from kbroker.metadata.image import MetadataImage, PartitionState, TopicImage
from kbroker.wire.records import BatchHeader
from kbroker.wire.schema import API_BY_NAME

pytestmark = pytest.mark.trio

JoinGroupRequest = API_BY_NAME["JoinGroup"].request_class
SyncGroupRequest = API_BY_NAME["SyncGroup"].request_class
SESSION_MS = 10_000
NODE_ID = 1


class MemoryPartition:
    """An offsets partition in memory: empty at load, every append durable at once."""

    def __init__(self) -> None:
        self.log = SimpleNamespace(log_start_offset=0, log_end_offset=0)
        self.batches: list[bytes] = []

    def append(self, batch, **_origin):
        self.batches.append(bytes(batch))
        return SimpleNamespace(last_offset=len(self.batches) - 1, leader_epoch=0)

    async def wait_committed(self, offset: int, leader_epoch: int) -> None:
        return None


class MemoryBroker:
    """What the runtime asks of a broker: its settings, the image (this node leads the offsets topic), partitions."""

    node_id = NODE_ID
    serving = True

    def __init__(self) -> None:
        self.config = BrokerConfig.from_mapping({"offsets.topic.num.partitions": 1,
                                                 "group.initial.rebalance.delay.ms": 0})
        leader = PartitionState(partition=0, leader=NODE_ID, leader_epoch=0, replicas=(NODE_ID,), isr=(NODE_ID,))
        offsets = TopicImage(OFFSETS_TOPIC, uuid.uuid4(), (leader,))
        self.image = MetadataImage(cluster_id="fake-clock", controller_id=NODE_ID, topics={OFFSETS_TOPIC: offsets})
        self.offsets = MemoryPartition()

    def partition(self, topic: str, index: int) -> MemoryPartition:
        assert (topic, index) == (OFFSETS_TOPIC, 0)
        return self.offsets


async def ask(shell: GroupShell, call) -> object:
    """A request as its handler makes it: the core's effects carried out, then the waiter's answer."""
    waiter = shell.new_waiter()
    shell.apply("g", call(waiter))
    answer = shell.deferred(waiter)
    await answer.ready()
    return answer.response


async def test_a_member_that_stops_heartbeating_is_gone_once_the_clock_passes_its_session():
    clock, broker = FakeClock(), MemoryBroker()
    shell = GroupShell(broker, clock)
    async with trio.open_nursery() as nursery:
        await nursery.start(shell.run)
        await trio.testing.wait_all_tasks_blocked()  # the offsets partition loaded
        assert shell.coordinator.loaded == {0}
        group = shell.coordinator.classic_group("g", shell.now_ms(), create=True)

        def join(member_id: str):
            request = JoinGroupRequest(group_id="g", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=30_000,
                                       member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                       protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
            return lambda waiter: group.join(waiter, request, 9, "c", "/127.0.0.1", shell.now_ms())

        member_id = (await ask(shell, join(""))).member_id  # KIP-394: the first join hands out the id
        joined = await ask(shell, join(member_id))
        assert joined.leader == member_id
        assignment = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=b"a")]
        sync = SyncGroupRequest(group_id="g", generation_id=joined.generation_id, member_id=member_id,
                                group_instance_id=None, assignments=assignment)
        await ask(shell, lambda waiter: group.sync(waiter, sync, 5, shell.now_ms()))
        assert group.state is GroupState.STABLE
        stored = len(broker.offsets.batches)

        clock.advance(SESSION_MS - 1)
        assert shell.fire_timers() == 1  # due in a millisecond
        assert group.state is GroupState.STABLE and len(broker.offsets.batches) == stored

        clock.advance(1)
        shell.fire_timers()
        await trio.testing.wait_all_tasks_blocked()
        assert group.state is GroupState.EMPTY and not group.members
        [emptied] = broker.offsets.batches[stored:]  # the empty group, stored at the clock's time
        assert BatchHeader.read(emptied).base_timestamp == clock.wall_ms()
        nursery.cancel_scope.cancel()
