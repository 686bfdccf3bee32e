"""Three controllers in one trio run, talking Kafka's quorum RPCs over loopback sockets:
election, changes committed on a majority, NOT_CONTROLLER elsewhere, and a wiped node
catching up from a snapshot. (compat_tests/test_controller_quorum.py does the same with
processes and SIGKILL.)"""

from __future__ import annotations

import uuid

import pytest
import trio

from kbroker.config import BrokerConfig
from kbroker.controller.controller import Controller
from kbroker.controller.state import decode_change, encode_change, image_records
from kbroker.listen import bind_listeners
from kbroker.metadata import records
from kbroker.metadata.image import MetadataImage, apply_record
from wire.errors import ErrorCode

FAST = {"controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.timeout.ms": 300,
        "controller.quorum.request.timeout.ms": 500}


def quorum_configs(tmp_path, count: int = 3, **extra) -> tuple[list[BrokerConfig], list]:
    sockets = [bind_listeners("127.0.0.1", 0)[0] for _ in range(count)]
    voters = ",".join(f"{i + 1}@127.0.0.1:{s.getsockname()[1]}" for i, s in enumerate(sockets))
    configs = [BrokerConfig.from_mapping({
        "process.roles": "controller", "node.id": i + 1, "controller.listener.names": "CONTROLLER",
        "listeners": f"CONTROLLER://127.0.0.1:{s.getsockname()[1]}", "controller.quorum.voters": voters,
        "log.dirs": str(tmp_path / f"c{i + 1}"), **FAST, **extra}) for i, s in enumerate(sockets)]
    return configs, sockets


def start(nursery, config, sock) -> Controller:
    controller = Controller(config, sockets=(sock,))
    controller.scope = trio.CancelScope()

    async def run():
        with controller.scope:
            await controller.run()

    nursery.start_soon(run)
    return controller


async def active_of(controllers, timeout_s: float = 10) -> Controller:
    with trio.fail_after(timeout_s):
        while True:
            active = [c for c in controllers if c.is_active]
            if active:
                return active[0]
            await trio.sleep(0.02)


def topic_change(name: str) -> list:
    topic_id = uuid.uuid4()
    return [records.TopicRecord(name=name, topic_id=topic_id),
            records.PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1], isr=[1], leader=1,
                                    leader_epoch=0, partition_epoch=0)]


async def converged(controllers, names: set[str], timeout_s: float = 10) -> None:
    with trio.fail_after(timeout_s):
        while any(set(c.image.topics) != names for c in controllers):
            await trio.sleep(0.02)


@pytest.mark.trio
async def test_a_quorum_elects_one_leader_and_commits_changes_on_every_voter(tmp_path):
    configs, sockets = quorum_configs(tmp_path)
    async with trio.open_nursery() as nursery:
        controllers = [start(nursery, c, s) for c, s in zip(configs, sockets)]
        leader = await active_of(controllers)
        assert [c.is_active for c in controllers].count(True) == 1
        for i in range(20):
            assert await leader.submit(topic_change(f"t{i}")) is None
        follower = next(c for c in controllers if c is not leader)
        assert await follower.submit(topic_change("refused")) == ErrorCode.NOT_CONTROLLER
        await converged(controllers, {f"t{i}" for i in range(20)})
        ids = {c.image.topics["t7"].topic_id for c in controllers}
        assert len(ids) == 1
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_a_leader_that_resigns_hands_over_and_no_change_is_lost(tmp_path):
    configs, sockets = quorum_configs(tmp_path)
    async with trio.open_nursery() as nursery:
        controllers = [start(nursery, c, s) for c, s in zip(configs, sockets)]
        leader = await active_of(controllers)
        assert await leader.submit(topic_change("before")) is None
        await leader.shutdown()
        leader.scope.cancel()
        rest = [c for c in controllers if c is not leader]
        successor = await active_of(rest, timeout_s=5)
        assert await successor.submit(topic_change("after")) is None
        await converged(rest, {"before", "after"})
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_a_wiped_voter_rejoins_from_the_leaders_snapshot(tmp_path):
    configs, sockets = quorum_configs(tmp_path, **{"metadata.log.max.record.bytes.between.snapshots": 1000,
                                                    "metadata.log.segment.bytes": 2000})
    names = {f"topic-{i:03}" for i in range(60)}
    async with trio.open_nursery() as nursery:
        controllers = [start(nursery, c, s) for c, s in zip(configs, sockets)]
        leader = await active_of(controllers)
        victim = next(c for c in controllers if c is not leader)
        victim.scope.cancel()
        for name in sorted(names):
            assert await leader.submit(topic_change(name)) is None
        assert leader.driver.node.log_start > 0  # snapshots were taken and the log below them dropped
        await trio.sleep(0.1)  # the victim's listener closes
        index = controllers.index(victim)
        wiped = tmp_path / f"c{index + 1}"
        for path in sorted(wiped.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        sock = bind_listeners("127.0.0.1", configs[index].controller_endpoints[0].port)[0]
        reborn = start(nursery, configs[index], sock)
        await converged([reborn], names, timeout_s=15)
        assert reborn.driver.node.log_start > 0  # it started from a snapshot, not from offset 0
        nursery.cancel_scope.cancel()


def test_a_snapshot_rebuilds_the_image_it_was_taken_from():
    image = MetadataImage(cluster_id="c", controller_id=-1)
    endpoint = records.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=1, security_protocol=0)
    change = [records.RegisterBrokerRecord(broker_id=1, broker_epoch=5, end_points=[endpoint], rack="r1", fenced=False),
              *topic_change("a"), records.ProducerIdsRecord(broker_id=1, next_producer_id=2000)]
    for record in decode_change(encode_change(change)):
        image = apply_record(image, record)
    rebuilt = MetadataImage(cluster_id="c", controller_id=-1)
    for record in decode_change(encode_change(image_records(image))):
        rebuilt = apply_record(rebuilt, record)
    assert (rebuilt.brokers, rebuilt.topics, rebuilt.next_producer_id) == (image.brokers, image.topics,
                                                                          image.next_producer_id)
