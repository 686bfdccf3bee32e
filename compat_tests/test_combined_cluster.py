"""Three combined broker+controller processes on loopback, seen through stock clients.

Every broker shows the same three brokers and the same partition leaders; a topic
created through any of them (the request is forwarded to the active controller) has
replication factor 3. A broker that stops heartbeating is fenced after
``broker.session.timeout.ms`` and its leaderships move to the other ISR members;
one that stops cleanly hands them over first (controlled shutdown).

Partition data is not replicated yet (the next issue): these tests look at metadata,
and produce to and consume from partition leaders.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic as KafkaPythonNewTopic

from compat_tests import raw_client
from compat_tests.quorum_process import Quorum, until
from wire.schema import API_BY_NAME

pytestmark = pytest.mark.timeout(300)

MetadataRequest = API_BY_NAME["Metadata"].request_class
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


def test_records_go_to_each_partitions_leader_and_come_back(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
    admin.create_topics([NewTopic("events", num_partitions=3, replication_factor=3)])["events"].result(15)
    until(lambda: same_everywhere(cluster, "events"), 15, "one view of events")
    producer = Producer({"bootstrap.servers": cluster.node(1).bootstrap})
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
    handed = until(lambda: same_everywhere(cluster, "moves", [cluster.node(1)]), 15, "node 1's view")
    assert all(leader == 1 for leader, _, _ in handed.values())
