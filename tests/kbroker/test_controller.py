"""Three controllers in one trio run, talking Kafka's quorum RPCs over loopback sockets:
election, changes committed on a majority, NOT_CONTROLLER elsewhere, and a wiped node
catching up from a snapshot. (compat_tests/test_controller_quorum.py does the same with
processes and SIGKILL.)"""

from __future__ import annotations

import uuid

import pytest
import trio

from testkit import raw_client
from kbroker.config import BrokerConfig
from kbroker.controller.controller import Controller
from kbroker.controller.state import decode_change, encode_change, image_records
from kbroker.listen import bind_listeners
from kbroker.metadata import records
from kbroker.metadata.image import MetadataImage, apply_record
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

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
    endpoints = [records.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=1, security_protocol=0),
                 records.RegisterBrokerRecord.BrokerEndpoint(name="SECURE", host="h", port=2, security_protocol=3)]
    quota_entity = [records.ClientQuotaRecord.EntityData(entity_type="user", entity_name=None),
                    records.ClientQuotaRecord.EntityData(entity_type="client-id", entity_name="c1")]
    change = [records.RegisterBrokerRecord(broker_id=1, broker_epoch=5, end_points=endpoints, rack="r1", fenced=False),
              *topic_change("a"), records.ProducerIdsRecord(broker_id=1, next_producer_id=2000),
              records.UserScramCredentialRecord(name="alice", mechanism=2, salt=b"s", stored_key=b"k",
                                                server_key=b"v", iterations=4096),
              records.UserScramCredentialRecord(name="bob", mechanism=1, salt=b"s", stored_key=b"k",
                                                server_key=b"v", iterations=4096),
              records.RemoveUserScramCredentialRecord(name="bob", mechanism=1),
              records.AccessControlEntryRecord(id=uuid.UUID(int=1), resource_type=2, resource_name="a",
                                               pattern_type=3, principal="User:alice", host="*", operation=4,
                                               permission_type=3),
              records.AccessControlEntryRecord(id=uuid.UUID(int=2), resource_type=3, resource_name="g",
                                               pattern_type=4, principal="User:*", host="*", operation=3,
                                               permission_type=2),
              records.RemoveAccessControlEntryRecord(id=uuid.UUID(int=1)),
              records.ClientQuotaRecord(entity=quota_entity, key="producer_byte_rate", value=1e6),
              records.ClientQuotaRecord(entity=quota_entity, key="consumer_byte_rate", value=2e6),
              records.ClientQuotaRecord(entity=quota_entity, key="consumer_byte_rate", remove=True)]
    for record in decode_change(encode_change(change)):
        image = apply_record(image, record)
    assert set(image.scram_credentials) == {("alice", 2)} and set(image.acls) == {uuid.UUID(int=2)}
    assert image.client_quotas == {(("client-id", "c1"), ("user", None)): {"producer_byte_rate": 1e6}}
    assert image.brokers[0].address("SECURE") == ("h", 2)
    rebuilt = MetadataImage(cluster_id="c", controller_id=-1)
    for record in decode_change(encode_change(image_records(image))):
        rebuilt = apply_record(rebuilt, record)
    fields = ("brokers", "topics", "next_producer_id", "scram_credentials", "acls", "client_quotas")
    assert [getattr(rebuilt, name) for name in fields] == [getattr(image, name) for name in fields]


# -- what brokers ask of the controller, over its listener ------------------------------------------------

Registration = API_BY_NAME["BrokerRegistration"].request_class
Heartbeat = API_BY_NAME["BrokerHeartbeat"].request_class
AlterPartition = API_BY_NAME["AlterPartition"].request_class
AllocateProducerIds = API_BY_NAME["AllocateProducerIds"].request_class
CreateTopics = API_BY_NAME["CreateTopics"].request_class


async def call(controller, api_name, version, body):
    return await trio.to_thread.run_sync(raw_client.call, controller.config.controller_endpoints[0].port, api_name,
                                         version, body)


async def register(controller, broker_id, rack=None) -> int:
    listener = Registration.Listener(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id, security_protocol=0)
    response = await call(controller, "BrokerRegistration", 0, Registration(
        broker_id=broker_id, cluster_id=controller.cluster_id, incarnation_id=uuid.uuid4(), listeners=[listener],
        features=[], rack=rack))
    assert response.error_code == ErrorCode.NONE
    return response.broker_epoch


async def heartbeat(controller, broker_id, epoch, offset=1 << 40, shut_down=False):
    return await call(controller, "BrokerHeartbeat", 0, Heartbeat(
        broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=offset, want_fence=False,
        want_shut_down=shut_down))


async def one_controller(nursery, tmp_path, **extra) -> Controller:
    configs, sockets = quorum_configs(tmp_path, count=1, **extra)
    controller = start(nursery, configs[0], sockets[0])
    await active_of([controller])
    return controller


def live(controller) -> list[int]:
    return [broker.node_id for broker in controller.image.live_brokers]


@pytest.mark.trio
async def test_a_broker_is_fenced_until_caught_up_and_when_it_shuts_down(tmp_path):
    async with trio.open_nursery() as nursery:
        controller = await one_controller(nursery, tmp_path)
        epochs = {broker_id: await register(controller, broker_id) for broker_id in (1, 2, 3)}
        assert epochs[1] < epochs[2] < epochs[3] and live(controller) == []
        behind = await heartbeat(controller, 1, epochs[1], offset=epochs[1] - 1)
        assert (behind.is_caught_up, behind.is_fenced) == (False, True)
        for broker_id, epoch in epochs.items():
            answer = await heartbeat(controller, broker_id, epoch)
            assert (answer.error_code, answer.is_caught_up, answer.is_fenced) == (ErrorCode.NONE, True, False)
        assert live(controller) == [1, 2, 3]
        assert (await heartbeat(controller, 1, epochs[1] - 1)).error_code == ErrorCode.STALE_BROKER_EPOCH
        assert (await heartbeat(controller, 9, 1)).error_code == ErrorCode.BROKER_ID_NOT_REGISTERED

        created = await call(controller, "CreateTopics", 7, CreateTopics(timeout_ms=5000, validate_only=False, topics=[
            CreateTopics.CreatableTopic(name="t", num_partitions=3, replication_factor=3, assignments=[],
                                        configs=[])]))
        assert created.topics[0].error_code == ErrorCode.NONE
        leaders_before = [p.leader for p in controller.image.topics["t"].partitions]
        assert sorted(leaders_before) == [1, 2, 3]
        going = await heartbeat(controller, 2, epochs[2], shut_down=True)  # controlled shutdown
        assert (going.should_shut_down, going.is_fenced) == (True, True)
        assert live(controller) == [1, 3]
        for partition in controller.image.topics["t"].partitions:
            assert partition.leader in (1, 3) and 2 not in partition.isr
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_a_broker_without_heartbeats_is_fenced_after_its_session(tmp_path):
    async with trio.open_nursery() as nursery:
        controller = await one_controller(nursery, tmp_path, **{"broker.session.timeout.ms": 400})
        epoch = await register(controller, 1)
        await heartbeat(controller, 1, epoch)
        assert live(controller) == [1]
        with trio.fail_after(5):
            while live(controller):
                await trio.sleep(0.05)
        assert (await heartbeat(controller, 1, epoch)).is_fenced is False  # heartbeats again: unfenced
        assert live(controller) == [1]
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_alter_partition_takes_only_current_changes_from_the_leader(tmp_path):
    async with trio.open_nursery() as nursery:
        controller = await one_controller(nursery, tmp_path)
        epochs = {broker_id: await register(controller, broker_id) for broker_id in (1, 2, 3)}
        for broker_id, epoch in epochs.items():
            await heartbeat(controller, broker_id, epoch)
        await call(controller, "CreateTopics", 7, CreateTopics(timeout_ms=5000, validate_only=False, topics=[
            CreateTopics.CreatableTopic(name="t", num_partitions=1, replication_factor=3, assignments=[], configs=[])]))
        topic = controller.image.topics["t"]
        state = topic.partitions[0]
        leader = state.leader
        follower = next(r for r in state.replicas if r != leader)

        async def alter(broker_id, isr, partition_epoch, leader_epoch=state.leader_epoch, version=2):
            partition = AlterPartition.TopicData.PartitionData(
                partition_index=0, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                new_isr=list(isr), new_isr_with_epochs=[
                    AlterPartition.TopicData.PartitionData.BrokerState(broker_id=b, broker_epoch=epochs[b]) for b in isr])
            response = await call(controller, "AlterPartition", version, AlterPartition(
                broker_id=broker_id, broker_epoch=epochs[broker_id],
                topics=[AlterPartition.TopicData(topic_id=topic.topic_id, partitions=[partition])]))
            return response.error_code, response.topics[0].partitions[0] if response.topics else None

        shrunk = [r for r in state.isr if r != follower]
        code, answer = await alter(leader, shrunk, state.partition_epoch)
        assert (code, answer.error_code, answer.isr, answer.partition_epoch) == (
            ErrorCode.NONE, ErrorCode.NONE, shrunk, state.partition_epoch + 1)
        assert controller.image.topics["t"].partitions[0].isr == tuple(shrunk)
        assert (await alter(leader, state.isr, state.partition_epoch))[1].error_code == ErrorCode.INVALID_UPDATE_VERSION
        assert (await alter(follower, state.isr, state.partition_epoch + 1))[1].error_code == ErrorCode.INVALID_REQUEST
        assert (await alter(leader, state.isr, state.partition_epoch + 1, leader_epoch=state.leader_epoch - 1)
                )[1].error_code == ErrorCode.FENCED_LEADER_EPOCH
        await heartbeat(controller, follower, epochs[follower], shut_down=True)  # fenced: may not rejoin
        now = controller.image.topics["t"].partitions[0]
        code, answer = await alter(leader, [*now.isr, follower], now.partition_epoch, now.leader_epoch, version=3)
        assert answer.error_code == ErrorCode.INELIGIBLE_REPLICA
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_producer_id_blocks_never_overlap(tmp_path):
    async with trio.open_nursery() as nursery:
        controller = await one_controller(nursery, tmp_path)
        epoch = await register(controller, 1)
        blocks = []
        for _ in range(3):
            answer = await call(controller, "AllocateProducerIds", 0, AllocateProducerIds(broker_id=1, broker_epoch=epoch))
            assert answer.error_code == ErrorCode.NONE
            blocks.append((answer.producer_id_start, answer.producer_id_start + answer.producer_id_len))
        assert all(end <= next_start for (_, end), (next_start, _) in zip(blocks, blocks[1:]))
        stale = await call(controller, "AllocateProducerIds", 0, AllocateProducerIds(broker_id=1, broker_epoch=epoch - 1))
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
        nursery.cancel_scope.cancel()
