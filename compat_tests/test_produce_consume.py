"""Stock clients produce and consume through a live broker: exact bytes, order, partitions."""

import asyncio
import time

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from kbroker.testing import running_broker
from kbroker.wire.murmur2 import default_partition

PARTITIONS = 3
COUNT = 10_000


def create_topic(bootstrap, name, partitions=PARTITIONS):
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([admin.NewTopic(name, partitions)])[name].result(timeout=10)


def messages(count, prefix):
    """Keys (some null), values (some tombstones, one 1 MiB) and headers, all distinct."""
    produced = []
    for i in range(count):
        key = None if i % 97 == 0 else f"{prefix}-key-{i % 500}".encode()
        value = None if i % 89 == 1 and key is not None else f"{prefix}-value-{i}".encode()
        headers = [("seq", str(i).encode())] if i % 3 == 0 else []
        produced.append((key, value, headers))
    produced.append((b"big", b"\x01" * (1024 * 1024 - 200), []))
    return produced


def consume_all(bootstrap, topic, expected, timeout_s=60):
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "fetch.max.bytes": 4 * 1024 * 1024}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    received = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout_s
    while sum(map(len, received.values())) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        received[message.partition()].append((message.offset(), message.key(), message.value(), message.headers() or []))
    consumer.close()
    return received


def check(received, produced):
    """Every message once, in per-partition order, on its murmur2 partition when keyed."""
    flat = [entry for entries in received.values() for entry in entries]
    assert len(flat) == len(produced)
    for partition, entries in received.items():
        assert [offset for offset, *_ in entries] == list(range(len(entries)))
        for _, key, _, _ in entries:
            if key is not None:
                assert default_partition(key, PARTITIONS) == partition
    as_produced = sorted((k or b"", v or b"", tuple(h)) for k, v, h in produced)
    as_received = sorted((k or b"", v or b"", tuple(h)) for _, k, v, h in flat)
    assert as_received == as_produced


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        yield running


def test_confluent_kafka(broker):
    create_topic(broker.bootstrap, "confluent")
    produced = messages(COUNT, "c")
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": "lz4",
            "message.max.bytes": 2_000_000,
            "partitioner": "murmur2_random",  # the Java client's partitioner; librdkafka's default differs
        }
    )
    for key, value, headers in produced:
        producer.produce("confluent", key=key, value=value, headers=headers, partition=-1 if key else 0)
    assert producer.flush(30) == 0
    check(consume_all(broker.bootstrap, "confluent", len(produced)), produced)


def test_kafka_python(broker):
    import kafka

    create_topic(broker.bootstrap, "kafka-python")
    produced = messages(COUNT, "k")
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip", linger_ms=5, max_request_size=2_000_000)
    for key, value, headers in produced:
        producer.send("kafka-python", key=key, value=value, headers=headers, partition=None if key else 0)
    producer.flush(30)
    producer.close()
    check(consume_all(broker.bootstrap, "kafka-python", len(produced)), produced)


def test_aiokafka(broker):
    import aiokafka

    create_topic(broker.bootstrap, "aiokafka")
    produced = messages(COUNT, "a")

    async def produce():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="zstd", linger_ms=5, max_request_size=2_000_000)
        await producer.start()
        try:
            futures = [
                await producer.send("aiokafka", key=key, value=value, headers=headers, partition=None if key else 0)
                for key, value, headers in produced
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(produce(), 60))
    check(consume_all(broker.bootstrap, "aiokafka", len(produced)), produced)


def test_a_consumer_blocked_in_poll_gets_a_new_message_quickly(broker):
    create_topic(broker.bootstrap, "latency", partitions=1)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "fetch.wait.max.ms": 5000, "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition("latency", 0, confluent_kafka.OFFSET_BEGINNING)])
    consumer.poll(1.0)  # connected and waiting in a long poll
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    delays = []
    for i in range(5):
        sent = time.monotonic()
        producer.produce("latency", value=b"%d" % i)
        producer.flush(10)
        message = None
        while message is None and time.monotonic() - sent < 5:
            message = consumer.poll(0.01)
        assert message is not None and message.value() == b"%d" % i
        delays.append(time.monotonic() - sent)
    consumer.close()
    assert sorted(delays)[2] < 0.1, delays
