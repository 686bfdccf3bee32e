"""Kafka's own Java client (kafka-clients 4.3.0) against a live broker, through compat_tests/java/KafkaCompat.java."""

import time

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from compat_tests.java_harness import java_harness  # noqa: F401  (the session fixture)
from kbroker.testing import running_broker
from wire.murmur2 import default_partition

PARTITIONS = 3
COUNT = 10_000
CODECS = ("gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        yield running


def create_topic(bootstrap, name, partitions=PARTITIONS):
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([admin.NewTopic(name, partitions)])[name].result(timeout=10)


def records(count, prefix):
    """(key, value, headers): null and empty keys, tombstones, empty values, several and null-valued headers."""
    produced = []
    for i in range(count):
        key = None if i % 101 == 0 else b"" if i % 211 == 5 else f"{prefix}-key-{i % 400}".encode()
        value = None if i % 89 == 1 else b"" if i % 97 == 2 else f"{prefix}-value-{i}-".encode() + bytes([i % 256]) * (i % 50)
        headers = []
        if i % 2 == 0:
            headers.append(("seq", str(i).encode()))
        if i % 5 == 0:
            headers.append(("bin", bytes(range(i % 7, 256, 37))))
            headers.append(("seq", None))  # repeated names and null values keep their order
        produced.append((key, value, headers))
    return produced


def as_stdin(produced):
    def hex_or_dash(data):
        return "-" if data is None else data.hex()

    return "".join(
        f"{hex_or_dash(key)}\t{hex_or_dash(value)}\t{','.join(f'{name.encode().hex()}:{hex_or_dash(v)}' for name, v in headers)}\n"
        for key, value, headers in produced
    )


def as_tuple(line):
    """A consumed record line as (key, value, headers), bytes exactly."""
    def unhex(text):
        return None if text is None else bytes.fromhex(text)

    return unhex(line["key"]), unhex(line["value"]), [(name, unhex(value)) for name, value in line["headers"]]


def produce_with_java(harness, bootstrap, topic, produced, codec):
    run = harness.run("produce", bootstrap, topic, codec, stdin=as_stdin(produced))
    summary = run.one("produced")
    assert run.returncode == 0 and summary["errors"] == 0, (run.of_type("send_error")[:5], run.stderr[-2000:])
    assert summary["count"] == len(produced)
    config = run.one("producer_config")
    assert config == {"type": "producer_config", "enable.idempotence": True, "acks": "-1"}  # 4.x defaults, untouched
    acks = {line["index"]: (line["partition"], line["offset"]) for line in run.of_type("ack")}
    assert sorted(acks) == list(range(len(produced)))
    return acks, summary


def check_acks(acks, produced, partitions=PARTITIONS):
    """Keyed records on their murmur2 partition; offsets per partition dense and in send order."""
    by_partition = {p: [] for p in range(partitions)}
    for index in range(len(produced)):
        partition, offset = acks[index]
        key = produced[index][0]
        if key is not None:
            assert partition == default_partition(key, partitions), (index, key)
        by_partition[partition].append(offset)
    for partition, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {partition} offsets out of send order"


def consume_with_java(harness, bootstrap, topic, count, seeks=""):
    run = harness.run("consume", bootstrap, topic, str(count), *([seeks] if seeks else []))
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.of_type("record")
    assert run.one("consumed")["count"] == len(lines) == count, f"consumed {len(lines)} of {count}"
    return lines


def check_consumed(lines, produced, acks):
    """Every record once, at the offset it was acknowledged with, bytes exact, in per-partition order."""
    expected = {acks[index]: produced[index] for index in range(len(produced))}
    seen = {}
    for line in lines:
        position = (line["partition"], line["offset"])
        assert position not in seen, f"{position} consumed twice"
        seen[position] = as_tuple(line)
    assert seen.keys() == expected.keys()
    for position, record in expected.items():
        assert seen[position] == (record[0], record[1], record[2]), position
    for partition in range(PARTITIONS):
        offsets = [line["offset"] for line in lines if line["partition"] == partition]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))) if offsets else True, f"partition {partition} out of order"


def test_describe_cluster_and_list_topics(java_harness, broker):
    run = java_harness.run("metadata", broker.bootstrap)
    assert run.of_type("error") == []
    cluster = run.one("cluster")
    assert cluster["cluster_id"] == broker.broker.cluster_id
    assert cluster["controller"] == 1
    assert cluster["nodes"] == [{"id": 1, "host": broker.host, "port": broker.port}]
    assert "__cluster_metadata" not in run.one("topics")["names"]


def test_admin_create_describe_alter_delete(java_harness, broker):
    run = java_harness.run("admin-create-describe-delete", broker.bootstrap, "java-admin", "3")
    errors = {line["step"]: line["error"] for line in run.of_type("error")}
    assert errors == {"createTopicsAgain": "TopicExistsException", "describeDeletedTopic": "UnknownTopicOrPartitionException"}
    created = run.one("created")
    assert created["partitions"] == 3
    described = run.one("described")
    assert described["topic_id"] == created["topic_id"] and not described["internal"]
    assert described["partitions"] == [{"partition": p, "leader": 1, "replicas": [1], "isr": [1]} for p in range(3)]
    assert "java-admin" in run.one("topics")["names"]
    configs = run.one("configs")
    assert configs["retention.ms"] == "3600000" and configs["source"] == "DYNAMIC_TOPIC_CONFIG"
    grown = run.one("described_after_create_partitions")
    assert [p["partition"] for p in grown["partitions"]] == [0, 1, 2, 3] and grown["topic_id"] == created["topic_id"]
    assert run.one("deleted")["topic"] == "java-admin"
    assert "java-admin" not in broker.broker.image.topics


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_producer_and_assigned_consumer(java_harness, broker, codec):
    topic = f"java-{codec}"
    create_topic(broker.bootstrap, topic)
    produced = records(COUNT, codec)
    acks, _ = produce_with_java(java_harness, broker.bootstrap, topic, produced, codec)
    check_acks(acks, produced)
    check_consumed(consume_with_java(java_harness, broker.bootstrap, topic, COUNT), produced, acks)


def test_seek_to_offsets(java_harness, broker):
    topic = "java-seek"
    create_topic(broker.bootstrap, topic)
    produced = [(f"k{i % 11}".encode(), f"v{i}".encode(), []) for i in range(600)]
    acks, _ = produce_with_java(java_harness, broker.bootstrap, topic, produced, "none")
    ends = {p: sum(1 for a in acks.values() if a[0] == p) for p in range(PARTITIONS)}
    seeks = {0: ends[0] // 2, 1: ends[1] - 1, 2: 0}
    wanted = sum(ends[p] - seeks[p] for p in range(PARTITIONS))
    lines = consume_with_java(java_harness, broker.bootstrap, topic, wanted, ",".join(f"{p}={o}" for p, o in seeks.items()))
    for partition in range(PARTITIONS):
        offsets = [line["offset"] for line in lines if line["partition"] == partition]
        assert offsets == list(range(seeks[partition], ends[partition]))
    by_position = {position: produced[index] for index, position in acks.items()}
    assert all(as_tuple(line) == by_position[(line["partition"], line["offset"])] for line in lines)


@pytest.mark.parametrize("codec", CODECS)
def test_java_reads_what_confluent_kafka_wrote(java_harness, broker, codec):
    topic = f"from-librdkafka-{codec}"
    create_topic(broker.bootstrap, topic)
    produced = records(2_000, "c")
    acks = {}
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "compression.type": codec, "linger.ms": 5,
         "partitioner": "murmur2_random"}
    )

    def delivered(index):
        def report(error, message):
            assert error is None, error
            acks[index] = (message.partition(), message.offset())
        return report

    for index, (key, value, headers) in enumerate(produced):
        producer.produce(topic, key=key, value=value, headers=headers, on_delivery=delivered(index))
        producer.poll(0)
    assert producer.flush(30) == 0
    lines = consume_with_java(java_harness, broker.bootstrap, topic, len(produced))
    check_consumed(lines, produced, acks)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_reads_what_java_wrote(java_harness, broker, codec):
    topic = f"from-java-{codec}"
    create_topic(broker.bootstrap, topic)
    produced = records(2_000, "j")
    acks, _ = produce_with_java(java_harness, broker.bootstrap, topic, produced, codec)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = {}
    deadline = time.monotonic() + 60
    while len(seen) < len(produced) and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        seen[(message.partition(), message.offset())] = (message.key(), message.value(), message.headers() or [])
    consumer.close()
    assert seen == {acks[index]: record for index, record in enumerate(produced)}
