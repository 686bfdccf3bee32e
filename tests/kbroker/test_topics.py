"""Creating and deleting topics with stock admin clients; the metadata survives a restart."""

import os
import time
import uuid

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from compat_tests.test_errors import call
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME
from testkit.raw_client import request


def create(client, *topics, validate_only=False):
    futures = client.create_topics(list(topics), validate_only=validate_only, operation_timeout=10)
    outcomes = {}
    for name, future in futures.items():
        try:
            future.result(timeout=10)
            outcomes[name] = "ok"
        except confluent_kafka.KafkaException as error:
            outcomes[name] = ErrorCode(error.args[0].code()).name  # Kafka's names, not librdkafka's
    return outcomes


def test_create_describe_delete_and_restart(tmp_path):
    with running_broker(str(tmp_path)) as broker:
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        assert create(
            client,
            admin.NewTopic("orders", num_partitions=3),
            admin.NewTopic("defaults"),
            admin.NewTopic("compacted", 1, config={"cleanup.policy": "compact", "segment.bytes": "1048576"}),
        ) == {"orders": "ok", "defaults": "ok", "compacted": "ok"}
        metadata = client.list_topics(timeout=10)
        assert {name: len(topic.partitions) for name, topic in metadata.topics.items()} == {"orders": 3, "defaults": 1, "compacted": 1}
        assert all(p.leader == 1 and p.replicas == [1] and p.isrs == [1] for p in metadata.topics["orders"].partitions.values())
        assert broker.broker.logs.logs.get(("orders", 2)) is None  # a partition's log is built on its first use
        give_up = time.monotonic() + 10  # its directory is made meanwhile, in worker threads
        while not (tmp_path / "orders-2" / "partition.metadata").exists() and time.monotonic() < give_up:
            time.sleep(0.01)
        assert sorted(os.listdir(tmp_path / "orders-2")) == ["00000000000000000000.log", "partition.metadata"]
        described = call(broker.port, "DescribeLogDirs", 4, request("DescribeLogDirs", topics=None))
        listed = {(topic.name, p.partition_index, p.partition_size) for topic in described.results[0].topics
                  for p in topic.partitions}
        assert {("orders", index, 0) for index in range(3)} <= listed  # hosted here all the same, empty
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        producer.produce("orders", b"first", partition=2)
        assert producer.flush(10) == 0
        assert broker.broker.partition("orders", 2).log.recovery_point == 1  # the ack waited for its flush
        client.delete_topics(["defaults"], operation_timeout=10)["defaults"].result(timeout=10)
        assert not (tmp_path / "defaults-0").exists()

    with running_broker(str(tmp_path)) as broker:
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        metadata = client.list_topics(timeout=10)
        assert sorted(metadata.topics) == ["compacted", "orders"]
        assert broker.broker.image.topics["compacted"].configs == {"cleanup.policy": "compact", "segment.bytes": "1048576"}


def test_errors_clients_rely_on(kbroker):
    client = admin.AdminClient({"bootstrap.servers": kbroker.bootstrap})
    assert create(client, admin.NewTopic("taken")) == {"taken": "ok"}
    assert create(
        client,
        admin.NewTopic("taken"),
        admin.NewTopic("bad/name"),
        admin.NewTopic("x" * 250),
        admin.NewTopic("zero", num_partitions=0),
        admin.NewTopic("too-many-replicas", 1, replication_factor=3),
        admin.NewTopic("bad-config", 1, config={"retention.ms": "soon"}),
        admin.NewTopic("unknown-config", 1, config={"no.such.config": "1"}),
        admin.NewTopic("bad-codec", 1, config={"compression.type": "brotli"}),
    ) == {
        "taken": "TOPIC_ALREADY_EXISTS",
        "bad/name": "INVALID_TOPIC_EXCEPTION",
        "x" * 250: "INVALID_TOPIC_EXCEPTION",
        "zero": "INVALID_PARTITIONS",
        "too-many-replicas": "INVALID_REPLICATION_FACTOR",
        "bad-config": "INVALID_CONFIG",
        "unknown-config": "INVALID_CONFIG",
        "bad-codec": "INVALID_CONFIG",
    }
    assert create(client, admin.NewTopic("dry-run", 2), validate_only=True) == {"dry-run": "ok"}
    assert "dry-run" not in client.list_topics(timeout=10).topics
    outcome = client.delete_topics(["never-created"], operation_timeout=10)["never-created"]
    with pytest.raises(confluent_kafka.KafkaException) as caught:
        outcome.result(timeout=10)
    assert caught.value.args[0].code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_kafka_python_admin_creates_and_lists(kbroker):
    import kafka.admin

    client = kafka.admin.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        client.create_topics([kafka.admin.NewTopic("from-kafka-python", 4, 1)])
        assert "from-kafka-python" in client.list_topics()
        client.delete_topics(["from-kafka-python"])
        assert "from-kafka-python" not in client.list_topics()
    finally:
        client.close()


def test_explicit_replica_assignments(kbroker_clean):
    kbroker = kbroker_clean  # the broker in this process: its image shows the partitions
    import kafka.admin

    client = kafka.admin.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        def placed(name, assignments):
            topic = kafka.admin.NewTopic(name, num_partitions=-1, replication_factor=-1, replica_assignments=assignments)
            [result] = client.create_topics([topic], raise_errors=False)["topics"]
            return ErrorCode(result["error_code"]).name

        assert placed("placed", {0: [1], 1: [1], 2: [1]}) == "NONE"
        assert placed("unknown-broker", {0: [2]}) == "INVALID_REPLICA_ASSIGNMENT"
        assert placed("repeated-broker", {0: [1, 1]}) == "INVALID_REPLICA_ASSIGNMENT"
        assert placed("gap", {0: [1], 2: [1]}) == "INVALID_REPLICA_ASSIGNMENT"
    finally:
        client.close()
    assert len(kbroker.broker.image.topics["placed"].partitions) == 3


def test_delete_topics_by_id(kbroker_clean):
    kbroker = kbroker_clean  # the broker in this process: its image names the topic id
    client = admin.AdminClient({"bootstrap.servers": kbroker.bootstrap})
    assert create(client, admin.NewTopic("doomed")) == {"doomed": "ok"}
    topic_id = kbroker.broker.image.topics["doomed"].topic_id
    request = API_BY_NAME["DeleteTopics"].request_class
    state = request.DeleteTopicState
    unknown_id = uuid.UUID(int=7)
    response = call(kbroker.port, "DeleteTopics", 6, request(topics=[state(name=None, topic_id=topic_id), state(name=None, topic_id=unknown_id)], timeout_ms=5000))
    by_id = {r.topic_id: r for r in response.responses}
    assert (by_id[topic_id].name, by_id[topic_id].error_code) == ("doomed", ErrorCode.NONE)
    assert by_id[unknown_id].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert "doomed" not in client.list_topics(timeout=10).topics
