"""Three combined broker+controller processes on loopback, seen through stock clients.

Every broker shows the same three brokers and the same partition leaders; a topic
created through any of them (the request is forwarded to the active controller) has
replication factor 3. A broker that stops heartbeating is fenced after
``broker.session.timeout.ms`` and its leaderships move to the other ISR members;
one that stops cleanly hands them over first (controlled shutdown).

These tests look at metadata, and produce to and consume from partition leaders;
test_replication.py is where the data's replication is put to the test.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic)
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic as KafkaPythonNewTopic

from testkit import raw_client
from testkit.quorum_process import Quorum, until
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME

pytestmark = pytest.mark.timeout(300)

MetadataRequest = API_BY_NAME["Metadata"].request_class
ProduceRequest = API_BY_NAME["Produce"].request_class
FetchRequest = API_BY_NAME["Fetch"].request_class
ListOffsetsRequest = API_BY_NAME["ListOffsets"].request_class
OffsetForLeaderEpochRequest = API_BY_NAME["OffsetForLeaderEpoch"].request_class
SESSION_TIMEOUT_MS = 3000  # compat_tests/quorum_process.py's QUICK_QUORUM


@pytest.fixture
def cluster(tmp_path):
    quorum = Quorum(tmp_path, combined=True)
    try:
        quorum.start()
        until(lambda: all(len(brokers_seen_by(node)) == 3 for node in quorum.nodes), 30, "three live brokers")
        yield quorum
    finally:
        quorum.close()


def brokers_seen_by(node) -> list[int]:
    try:
        return sorted(AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=5).brokers)
    except KafkaException:  # a broker still catching up with the metadata knows no brokers yet
        return []


def metadata_of(node, topics=None):
    """Metadata v12 asked of this very node (a stock client picks whichever broker it likes)."""
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=name) for name in topics]
    return raw_client.call(node.client_port, "Metadata", 12, MetadataRequest(
        topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False))


def leaders_seen_by(node, topic: str) -> dict[int, tuple]:
    [found] = metadata_of(node, [topic]).topics
    return {p.partition_index: (p.leader_id, tuple(p.replica_nodes), tuple(sorted(p.isr_nodes)))
            for p in found.partitions}


def same_everywhere(cluster, topic: str, nodes=None):
    views = [leaders_seen_by(node, topic) for node in nodes or cluster.nodes]
    return views[0] if views[0] and all(view == views[0] for view in views) else None


def test_every_broker_shows_three_brokers_and_the_same_leaders_of_a_replicated_topic(cluster):
    for node in cluster.nodes:
        assert brokers_seen_by(node) == [1, 2, 3]
    admin = AdminClient({"bootstrap.servers": cluster.node(2).bootstrap})
    admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=3)])["orders"].result(15)
    leaders = until(lambda: same_everywhere(cluster, "orders"), 15, "one view of orders")
    assert len(leaders) == 6
    assert all(sorted(replicas) == [1, 2, 3] and sorted(isr) == [1, 2, 3] for _, replicas, isr in leaders.values())
    assert {leader for leader, _, _ in leaders.values()} == {1, 2, 3}  # leadership spread over the brokers

    kafka_python = KafkaAdminClient(bootstrap_servers=cluster.node(3).bootstrap, request_timeout_ms=15000)
    try:
        kafka_python.create_topics([KafkaPythonNewTopic("payments", num_partitions=3, replication_factor=3)])
        described = kafka_python.describe_topics(["payments"])
    finally:
        kafka_python.close()
    assert {p["partition_index"]: p["leader_id"] for p in described[0]["partitions"]} == {
        p: leader for p, (leader, _, _) in until(lambda: same_everywhere(cluster, "payments"), 15, "payments").items()}
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic("orders", num_partitions=1, replication_factor=3)])["orders"].result(15)


def test_admin_changes_through_any_broker_reach_every_broker(cluster):
    admin = [AdminClient({"bootstrap.servers": node.bootstrap}) for node in cluster.nodes]
    admin[0].create_topics([NewTopic("grows", num_partitions=2, replication_factor=2)])["grows"].result(15)
    admin[1].create_partitions([NewPartitions("grows", 5)])["grows"].result(15)
    until(lambda: len(same_everywhere(cluster, "grows") or ()) == 5, 15, "five partitions everywhere")
    resource = ConfigResource(ConfigResource.Type.TOPIC, "grows", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin[2].incremental_alter_configs([resource])[resource].result(15)

    def retention_everywhere():
        values = set()
        for client in admin:
            described = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "grows")])
            values.add(next(iter(described.values())).result(15)["retention.ms"].value)
        return values == {"3600000"}
    until(retention_everywhere, 15, "the new retention.ms on every broker")
    admin[2].delete_topics(["grows"])["grows"].result(15)
    until(lambda: all("grows" not in client.list_topics(timeout=5).topics for client in admin), 15, "grows gone")


@pytest.mark.slow
def test_records_go_to_each_partitions_leader_and_come_back(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
    admin.create_topics([NewTopic("events", num_partitions=3, replication_factor=3)])["events"].result(15)
    until(lambda: same_everywhere(cluster, "events"), 15, "one view of events")
    producer = Producer({"bootstrap.servers": cluster.node(1).bootstrap, "enable.idempotence": True})
    for i in range(300):
        producer.produce("events", key=str(i).encode(), value=f"value-{i}".encode(), partition=i % 3)
    assert producer.flush(20) == 0
    consumer = KafkaConsumer("events", bootstrap_servers=cluster.node(3).bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, group_id=None, enable_auto_commit=False)
    try:
        values = {message.value for _, message in zip(range(300), consumer)}
    finally:
        consumer.close()
    assert values == {f"value-{i}".encode() for i in range(300)}


@pytest.mark.slow
def test_a_broker_that_stops_heartbeating_is_fenced_and_its_leaderships_move(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
    admin.create_topics([NewTopic("moves", num_partitions=6, replication_factor=3)])["moves"].result(15)
    before = until(lambda: same_everywhere(cluster, "moves"), 15, "one view of moves")
    victim = cluster.node(3)
    assert any(leader == 3 for leader, _, _ in before.values())
    victim.kill()
    killed_at = time.monotonic()
    rest = [node for node in cluster.nodes if node is not victim]
    until(lambda: all(sorted(b.node_id for b in metadata_of(node).brokers) == [1, 2] for node in rest),
          10 * SESSION_TIMEOUT_MS / 1000, "broker 3 fenced")
    print(f"\nbroker 3 fenced {time.monotonic() - killed_at:.1f} s after SIGKILL "
          f"(broker.session.timeout.ms={SESSION_TIMEOUT_MS})")
    after = until(lambda: same_everywhere(cluster, "moves", rest), 15, "one view of moves without broker 3")
    for partition, (leader, replicas, isr) in after.items():
        assert leader in (1, 2) and 3 not in isr and replicas == before[partition][1]

    survivor = cluster.node(2)  # a clean stop hands its leaderships over before it goes
    survivor.stop()

    def handed_to_node_1():  # node 1 applies the committed handover a moment after node 2 has gone
        view = same_everywhere(cluster, "moves", [cluster.node(1)])
        return view if view and all(leader == 1 for leader, _, _ in view.values()) else None

    try:
        until(handed_to_node_1, 15, "node 1 leading every partition")
    except AssertionError:
        raise AssertionError(f"node 1 leading every partition: node 1 shows {leaders_seen_by(cluster.node(1), 'moves')} "
                             f"(partition: (leader, replicas, isr)), node 2 had shown {after}") from None


@pytest.mark.slow
def test_broker_only_nodes_follow_a_controller_only_quorum(tmp_path):
    """process.roles=broker beside process.roles=controller, as a production Kafka cluster is laid out:
    the brokers replicate the metadata as observers and take admin requests for the controllers."""
    quorum = Quorum(tmp_path, brokers=2)
    try:
        quorum.start()
        first, second = quorum.brokers
        until(lambda: brokers_seen_by(first) == brokers_seen_by(second) == [4, 5], 30, "both brokers")
        admin = AdminClient({"bootstrap.servers": first.bootstrap})
        admin.create_topics([NewTopic("observed", num_partitions=4, replication_factor=2)])["observed"].result(15)
        leaders = until(lambda: same_everywhere(quorum, "observed", quorum.brokers), 15, "one view of observed")
        assert {leader for leader, _, _ in leaders.values()} == {4, 5}
        assert sorted(o.replica_id for o in quorum.describe(quorum.leader()).observers) == [4, 5]
        quorum.leader().kill()  # the brokers carry on under the next controller
        admin = AdminClient({"bootstrap.servers": second.bootstrap})
        admin.create_topics([NewTopic("after", num_partitions=1, replication_factor=2)])["after"].result(30)
        until(lambda: same_everywhere(quorum, "after", quorum.brokers), 15, "one view of after")
    finally:
        quorum.close()


def test_a_request_to_a_follower_names_the_leader(cluster):
    """KIP-951: Produce v10+ and Fetch v16+ answered NOT_LEADER_OR_FOLLOWER carry the current leader and
    its endpoint, so the client need not ask for metadata first."""
    admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
    admin.create_topics([NewTopic("hinted", num_partitions=1, replication_factor=3)])["hinted"].result(15)
    leader, _, _ = until(lambda: same_everywhere(cluster, "hinted"), 15, "one view of hinted")[0]
    follower = next(node for node in cluster.nodes if node.node_id != leader)
    batch = build_batch([Record(value=b"misdirected")])
    produce = raw_client.call(follower.client_port, "Produce", 11, ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name="hinted", partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)])]))
    answer = produce.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and answer.current_leader.leader_id == leader
    assert [(n.node_id, n.port) for n in produce.node_endpoints] == [(leader, cluster.node(leader).client_port)]
    topic_id = metadata_of(follower, ["hinted"]).topics[0].topic_id
    fetch = raw_client.call(follower.client_port, "Fetch", 16, FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                   last_fetched_epoch=-1, log_start_offset=-1,
                                                   partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id=""))
    answer = fetch.responses[0].partitions[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and answer.current_leader.leader_id == leader
    assert [n.node_id for n in fetch.node_endpoints] == [leader]


@pytest.mark.slow
def test_leader_epochs_tell_a_consumer_where_each_epoch_ended(cluster):
    """KIP-320: records written under one leader, the leader stopped, more written under the next.
    OffsetForLeaderEpoch at the new leader ends the first epoch where the second began and the
    second at the log end; stale and future epochs in Fetch, ListOffsets and OffsetForLeaderEpoch are
    FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH; a follower is NOT_LEADER_OR_FOLLOWER. A librdkafka
    consumer that read the first records goes on across the change (it validates its position with
    OffsetForLeaderEpoch) and reads the rest once each, in order."""
    bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("epochs", num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])["epochs"].result(15)
    until(lambda: same_everywhere(cluster, "epochs"), 15, "one view of epochs")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "epochs", "enable.auto.commit": False})
    try:
        for index in range(5):
            producer.produce("epochs", f"first-{index}".encode(), partition=0)
        assert producer.flush(30) == 0
        consumer.assign([TopicPartition("epochs", 0, 0)])
        read = poll_values(consumer, 5)
        first_leader, first_epoch = leader_and_epoch(cluster.node(1), "epochs")
        cluster.node(first_leader).stop()  # a controlled shutdown: the next leader takes over at once
        rest = [node for node in cluster.nodes if node.node_id != first_leader]
        until(lambda: leader_and_epoch(rest[0], "epochs")[0] in {n.node_id for n in rest}, 15, "a new leader")
        for index in range(3):
            producer.produce("epochs", f"second-{index}".encode(), partition=0)
        assert producer.flush(30) == 0
        read += poll_values(consumer, 3)
        assert read == [f"first-{i}" for i in range(5)] + [f"second-{i}" for i in range(3)]
    finally:
        consumer.close()

    leader_id, epoch = leader_and_epoch(rest[0], "epochs")
    leader = cluster.node(leader_id)
    follower = next(node for node in rest if node is not leader)
    assert epoch > first_epoch

    def end_of(node, leader_epoch, current_leader_epoch=epoch, partition=0):
        [answer] = raw_client.call(node.client_port, "OffsetForLeaderEpoch", 4, OffsetForLeaderEpochRequest(
            replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="epochs", partitions=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
        ).topics[0].partitions
        return answer.error_code, answer.leader_epoch, answer.end_offset

    assert end_of(leader, first_epoch) == (ErrorCode.NONE, first_epoch, 5)
    assert end_of(leader, epoch) == (ErrorCode.NONE, epoch, 8)
    assert end_of(leader, epoch, current_leader_epoch=-1) == (ErrorCode.NONE, epoch, 8)
    assert end_of(leader, first_epoch, current_leader_epoch=first_epoch)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert end_of(leader, epoch, current_leader_epoch=epoch + 1)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert end_of(leader, epoch, partition=1)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert end_of(follower, epoch)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER

    def list_offsets(current_leader_epoch):
        return raw_client.call(leader.client_port, "ListOffsets", 7, ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(name="epochs", partitions=[
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=current_leader_epoch, timestamp=-1)])])
        ).topics[0].partitions[0]

    assert (list_offsets(epoch).error_code, list_offsets(epoch).offset) == (ErrorCode.NONE, 8)
    assert list_offsets(first_epoch).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert list_offsets(epoch + 1).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    topic_id = metadata_of(leader, ["epochs"]).topics[0].topic_id
    fetch = raw_client.call(leader.client_port, "Fetch", 16, FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=0, current_leader_epoch=first_epoch, fetch_offset=0,
                                                   last_fetched_epoch=-1, log_start_offset=-1,
                                                   partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id=""))
    assert fetch.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH


def leader_and_epoch(node, topic: str) -> tuple[int, int]:
    [found] = metadata_of(node, [topic]).topics
    return found.partitions[0].leader_id, found.partitions[0].leader_epoch


def poll_values(consumer: Consumer, count: int, timeout_s: float = 30) -> list[str]:
    values = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
    return values
