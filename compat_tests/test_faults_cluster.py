"""Leadership and coordinators moved between the nodes of a real three-node cluster (issue 43:
RunningCluster.move_leader and move_coordinator, kbroker/testing/leadership.py) as confluent-kafka lives it:
the producer's request refused by the old leader and retried on the new one with nothing lost or doubled,
the consumer's commit refused by the old coordinator and made again at the new one. The client's own log
(librdkafka's debug lines, caught through a logger) shows what it met. Every wait is bounded."""

from __future__ import annotations

import logging
import uuid

import confluent_kafka
import confluent_kafka.admin
import pytest
from confluent_kafka import TopicPartition

from kbroker.testing import running_cluster

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(nodes=3) as cluster:
        yield cluster


class ClientLog(logging.Handler):
    """librdkafka's log lines, kept."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"rdkafka-{uuid.uuid4().hex[:8]}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def saw(self, *words: str) -> bool:
        return any(all(word in line for word in words) for line in self.lines)


def leader_of(cluster, topic: str, partition: int = 0) -> int:
    metadata = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(
        topic, timeout=TIMEOUT_S)
    return metadata.topics[topic].partitions[partition].leader


def produce(producer, topic: str, values: list[bytes]) -> list:
    failures = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, _: error and failures.append(error))
    assert producer.flush(TIMEOUT_S) == 0
    return failures


def read_all(cluster, topic: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"reader-{topic}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    try:
        while len(values) < count:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"only {len(values)} of {count} records read"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_a_producer_follows_a_moved_leader_and_loses_nothing(cluster):
    topic = f"moved-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, replication_factor=3)
    log = ClientLog()
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "enable.idempotence": True, "debug": "msg,broker"}, logger=log.logger)
    assert produce(producer, topic, [b"before-%d" % i for i in range(50)]) == []
    old = leader_of(cluster, topic)
    new = next(node.node_id for node in cluster.nodes if node.node_id != old)

    epoch = cluster.move_leader(topic, 0, new)

    assert leader_of(cluster, topic) == new and epoch > 0
    assert produce(producer, topic, [b"after-%d" % i for i in range(50)]) == []  # retried where it must be
    assert log.saw("Not leader") or log.saw("NOT_LEADER"), "the producer never met the old leader's refusal"
    assert read_all(cluster, topic, 100) == [b"before-%d" % i for i in range(50)] + [b"after-%d" % i for i in range(50)]


def test_a_leader_moved_to_a_node_that_held_no_replica_gets_one_first(cluster):
    topic = f"grown-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, replication_factor=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    assert produce(producer, topic, [b"kept"]) == []
    old = leader_of(cluster, topic)
    new = next(node.node_id for node in cluster.nodes if node.node_id != old)

    cluster.move_leader(topic, 0, new)

    assert leader_of(cluster, topic) == new
    assert produce(producer, topic, [b"also kept"]) == []
    assert read_all(cluster, topic, 2) == [b"kept", b"also kept"]


def test_a_consumer_group_follows_a_moved_coordinator(cluster):
    topic, group = f"committed-{uuid.uuid4().hex[:8]}", f"group-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, replication_factor=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap})
    assert produce(producer, topic, [b"one", b"two", b"three"]) == []
    log = ClientLog()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                         "enable.auto.commit": False, "debug": "cgrp"}, logger=log.logger)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        target = _other_nodes(cluster, group)[0]
        partition = cluster.move_coordinator(target, group=group)
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)  # refused once, then made

        for _ in range(5):  # a consumer's log lines reach the logger from its poll()
            consumer.poll(0.05)
        # The old coordinator's refusal: NOT_COORDINATOR once it has resigned the group's partition, or
        # COORDINATOR_NOT_AVAILABLE for a commit whose write raced the move (Kafka maps the write's
        # NOT_ENOUGH_REPLICAS or REQUEST_TIMED_OUT so too); then the client's new lookup finds the new one.
        refused = [line for line in log.lines if "Not coordinator" in line or "Coordinator not available" in line]
        assert refused and log.saw("changing coordinator", f"-> {target}"), \
            "the consumer never met the old coordinator's refusal and found the new one:\n" + "\n".join(
                line for line in log.lines if "COORD" in line or "COMMIT" in line)
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed.offset == 2 and 0 <= partition < 50
    finally:
        consumer.close()


def test_a_transactional_producer_follows_a_moved_coordinator(cluster):
    topic, transactional_id = f"paid-{uuid.uuid4().hex[:8]}", f"txn-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, replication_factor=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"first")
    producer.commit_transaction(TIMEOUT_S)
    coordinator = _coordinator(cluster, transactional_id, key_type=1)

    cluster.move_coordinator(next(n.node_id for n in cluster.nodes if n.node_id != coordinator),
                             transactional_id=transactional_id)

    producer.begin_transaction()
    producer.produce(topic, b"second")
    producer.commit_transaction(TIMEOUT_S)  # its EndTxn refused by the old coordinator, then sent to the new
    assert _coordinator(cluster, transactional_id, key_type=1) != coordinator
    assert read_all(cluster, topic, 2) == [b"first", b"second"]


def test_move_coordinator_takes_exactly_one_key(cluster):
    with pytest.raises(ValueError, match="exactly one"):
        cluster.move_coordinator(1)
    with pytest.raises(ValueError, match="exactly one"):
        cluster.move_coordinator(1, group="g", transactional_id="t")


def _coordinator(cluster, key: str, key_type: int = 0) -> int:
    from kbroker.tools.client import Client

    client = Client(cluster.bootstrap, timeout_s=TIMEOUT_S)
    try:
        answer = client.bootstrap.call("FindCoordinator", key=key, key_type=key_type)
        assert answer.error_code == 0, answer
        return answer.node_id
    finally:
        client.close()


def _other_nodes(cluster, group: str) -> list[int]:
    """The nodes other than ``group``'s coordinator now."""
    current = _coordinator(cluster, group)
    return [node.node_id for node in cluster.nodes if node.node_id != current]
