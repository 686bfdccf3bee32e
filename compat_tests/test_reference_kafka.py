"""The test kit's reference Apache Kafka (testkit/reference_kafka.py) is a working Kafka: a single node
starts within 20 s, answers ApiVersions and Metadata in our codec, and takes a produce and a fetch from
confluent-kafka; three nodes form one quorum and replicate a topic to all three. Start times are
printed (``pytest -s``)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.kafka_oracle import kafka_required, start_reference_kafka
from compat_tests.kafka_oracle import reference_kafka, reference_kafka_cluster  # noqa: F401
from kbroker.wire.schema import API_BY_NAME
from testkit import maven, raw_client
from testkit.reference_kafka import ReferenceKafka

START_SECONDS_MAX = 20
ApiVersionsRequest = API_BY_NAME["ApiVersions"].request_class
MetadataRequest = API_BY_NAME["Metadata"].request_class
DescribeQuorumRequest = API_BY_NAME["DescribeQuorum"].request_class
ZERO_UUID = uuid.UUID(int=0)
PRODUCE_KEY, FETCH_KEY, METADATA_KEY = (API_BY_NAME[name].key for name in ("Produce", "Fetch", "Metadata"))


def api_versions(port: int):
    return raw_client.call(port, "ApiVersions", 3, ApiVersionsRequest(
        client_software_name="reference-kafka-test", client_software_version="1"))


def metadata(port: int, topics=None):
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=name) for name in topics]
    return raw_client.call(port, "Metadata", 12, MetadataRequest(
        topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False))


def describe_quorum(port: int):
    partition = DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)
    answer = raw_client.call(port, "DescribeQuorum", 2, DescribeQuorumRequest(
        topics=[DescribeQuorumRequest.TopicData(topic_name="__cluster_metadata", partitions=[partition])]))
    assert answer.error_code == 0, answer
    [topic] = answer.topics
    [found] = topic.partitions
    assert found.error_code == 0, found
    return found


def create_topic(bootstrap: str, name: str, replication_factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=replication_factor)])[name].result(30)


def produce(bootstrap: str, topic: str, count: int) -> list[int]:
    """The offsets ``count`` records were acknowledged at (acks=all)."""
    offsets, errors = [], []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def delivered(error, message) -> None:
        if error is not None:
            errors.append(error)
        else:
            offsets.append(message.offset())

    for index in range(count):
        producer.produce(topic, key=f"k{index}".encode(), value=f"v{index}".encode(), on_delivery=delivered)
    assert producer.flush(30) == 0, "records still unacknowledged after 30 s"
    assert not errors, errors
    return sorted(offsets)


def consume(bootstrap: str, topic: str, count: int, timeout_s: float = 30) -> list[tuple[bytes, bytes]]:
    """The first ``count`` records of partition 0, fetched from offset 0 (assigned: no group to join)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reference-kafka-test",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    records = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            records.append((message.key(), message.value()))
    finally:
        consumer.close()
    return records


def test_a_single_node_starts_in_time_and_answers_api_versions_and_metadata(reference_kafka):
    print(f"single node: ready in {reference_kafka.start_seconds:.1f} s")
    assert reference_kafka.start_seconds <= START_SECONDS_MAX
    [node] = reference_kafka.nodes
    versions = api_versions(node.port)
    assert versions.error_code == 0
    advertised = {api.api_key: (api.min_version, api.max_version) for api in versions.api_keys}
    assert {PRODUCE_KEY, FETCH_KEY, METADATA_KEY} <= set(advertised)
    assert {feature.name for feature in versions.finalized_features} >= {"metadata.version"}
    answer = metadata(node.port)
    assert [(broker.node_id, broker.host, broker.port) for broker in answer.brokers] == [(1, "127.0.0.1", node.port)]
    assert answer.cluster_id == reference_kafka.cluster_id
    assert answer.controller_id == 1


def test_a_single_node_takes_a_produce_and_a_fetch_from_confluent_kafka(reference_kafka):
    topic = f"reference-{uuid.uuid4().hex[:8]}"
    create_topic(reference_kafka.bootstrap, topic, replication_factor=1)
    assert produce(reference_kafka.bootstrap, topic, 20) == list(range(20))
    assert consume(reference_kafka.bootstrap, topic, 20) == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    [described] = metadata(reference_kafka.ports[0], [topic]).topics
    assert described.error_code == 0 and [p.leader_id for p in described.partitions] == [1]


@pytest.mark.slow
def test_three_nodes_form_one_quorum(reference_kafka_cluster):
    print(f"three nodes: ready in {reference_kafka_cluster.start_seconds:.1f} s")
    assert reference_kafka_cluster.start_seconds <= START_SECONDS_MAX
    quorum = describe_quorum(reference_kafka_cluster.ports[0])  # a broker forwards it to the controller
    assert sorted(voter.replica_id for voter in quorum.current_voters) == [1, 2, 3]
    assert quorum.leader_id in (1, 2, 3) and quorum.observers == []
    for node in reference_kafka_cluster.nodes:
        assert sorted(broker.node_id for broker in metadata(node.port).brokers) == [1, 2, 3]


@pytest.mark.slow
def test_three_nodes_replicate_a_topic_to_all_three(reference_kafka_cluster):
    bootstrap = reference_kafka_cluster.bootstrap
    topic = f"replicated-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, replication_factor=3)
    assert produce(bootstrap, topic, 30) == list(range(30))
    [described] = metadata(reference_kafka_cluster.ports[1], [topic]).topics
    [partition] = described.partitions
    assert sorted(partition.replica_nodes) == [1, 2, 3]
    assert sorted(partition.isr_nodes) == [1, 2, 3]  # acks=all: every replica in sync has the records
    assert len(consume(bootstrap, topic, 30)) == 30


@pytest.mark.slow
def test_a_dynamic_quorum_single_node_formats_standalone(tmp_path):
    kafka = start_reference_kafka(tmp_path, quorum="dynamic")
    try:
        print(f"single node, dynamic quorum: ready in {kafka.start_seconds:.1f} s")
        [voter] = describe_quorum(kafka.nodes[0].controller_port).current_voters
        assert voter.replica_id == 1 and voter.replica_directory_id != ZERO_UUID  # KIP-853: voters by directory
        features = {f.name: f.max_version_level for f in api_versions(kafka.ports[0]).finalized_features}
        assert features.get("kraft.version") == 1
    finally:
        kafka.stop()


def test_node_settings_are_refused_as_overrides(tmp_path):
    with pytest.raises(ValueError, match="listeners"):
        ReferenceKafka(tmp_path, {"listeners": "PLAINTEXT://127.0.0.1:9092"})


def test_without_maven_the_reason_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no classpath cached
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn
    with pytest.raises(maven.Unavailable) as missing:
        maven.classpath("kafka")
    assert "mvn not found" in str(missing.value) and "\n" not in str(missing.value)


def test_without_maven_central_the_reason_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("KBTEST_MAVEN_REPO", str(tmp_path / "empty-repository"))
    # A proxy on the discard port, which nothing serves: Central cannot be reached.
    monkeypatch.setenv("MAVEN_OPTS", "-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=9 "
                                     "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=9")
    with pytest.raises(maven.Unavailable) as missing:
        maven.classpath("kafka")
    reason = str(missing.value)
    assert reason.startswith("Maven could not resolve the 'kafka' profile") and "\n" not in reason, reason


def test_ci_fails_rather_than_skips(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("KBTEST_REQUIRE_KAFKA", raising=False)
    assert not kafka_required()
    monkeypatch.setenv("CI", "true")
    assert kafka_required()
    monkeypatch.setenv("CI", "")
    monkeypatch.setenv("KBTEST_REQUIRE_KAFKA", "1")
    assert kafka_required()
