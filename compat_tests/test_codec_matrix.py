"""Every codec written by each Python client is read back, byte for byte, by the other two.

The Java client's half of the matrix (Java <-> confluent-kafka) is in
test_java_client.py. Each produced batch is also checked on disk to carry
the codec asked for, so a client that silently falls back to uncompressed
(as librdkafka does when it thinks the broker lacks a codec) fails here.
"""

import asyncio
import os
import time

import aiokafka
import confluent_kafka
import kafka
import pytest

from kbroker.testing import running_broker
from kbroker.wire.compression import CODEC_NAMES
from kbroker.wire.records import iter_batches

CODECS = ["gzip", "snappy", "lz4", "zstd"]
COUNT = 300


def payloads(tag):
    out = []
    for i in range(COUNT):
        key = None if i % 11 == 0 else f"{tag}-k{i % 13}".encode()
        value = None if i % 17 == 5 and key is not None else (f"{tag}-v{i}-".encode() * (1 + i % 9))
        headers = [("h", str(i).encode()), ("empty", b"")] if i % 4 == 0 else []
        out.append((key, value, headers))
    return out


def produce_confluent(bootstrap, topic, codec, items):
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
    for key, value, headers in items:
        producer.produce(topic, value, key, partition=0, headers=headers)
    assert producer.flush(20) == 0


def produce_kafka_python(bootstrap, topic, codec, items):
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
    for key, value, headers in items:
        producer.send(topic, value, key, headers=headers, partition=0)
    producer.flush(20)
    producer.close()


def produce_aiokafka(bootstrap, topic, codec, items):
    async def run():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, value, key, partition=0, headers=headers) for key, value, headers in items]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


def read_confluent(bootstrap, topic):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + 20
    while len(out) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            out.append((message.key(), message.value(), message.headers() or []))
    consumer.close()
    return out


def read_kafka_python(bootstrap, topic):
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    partition = kafka.TopicPartition(topic, 0)
    consumer.assign([partition])
    out = []
    deadline = time.monotonic() + 20
    while len(out) < COUNT and time.monotonic() < deadline:
        for record in consumer.poll(timeout_ms=200).get(partition, []):
            out.append((record.key, record.value, list(record.headers)))
    consumer.close()
    return out


def read_aiokafka(bootstrap, topic):
    async def run():
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        partition = aiokafka.TopicPartition(topic, 0)
        consumer.assign([partition])
        out = []
        try:
            deadline = time.monotonic() + 20
            while len(out) < COUNT and time.monotonic() < deadline:
                batch = await consumer.getmany(partition, timeout_ms=200)
                out += [(r.key, r.value, list(r.headers)) for r in batch.get(partition, [])]
        finally:
            await consumer.stop()
        return out

    return asyncio.run(run())


PRODUCERS = {"confluent": produce_confluent, "kafka-python": produce_kafka_python, "aiokafka": produce_aiokafka}
READERS = {"confluent": read_confluent, "kafka-python": read_kafka_python, "aiokafka": read_aiokafka}


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        yield running


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("writer", PRODUCERS)
def test_written_by_one_client_read_by_the_others(broker, writer, codec):
    topic = f"matrix-{writer}-{codec}"
    items = payloads(topic)
    PRODUCERS[writer](broker.bootstrap, topic, codec, items)
    segment = os.path.join(broker.data_dir, f"{topic}-0", "00000000000000000000.log")
    with open(segment, "rb") as data:
        stored = {CODEC_NAMES[header.compression] for _, header in iter_batches(data.read())}
    assert stored == {codec}
    for reader, read in READERS.items():
        if reader != writer:
            assert read(broker.bootstrap, topic) == items, f"{reader} read {writer}'s {codec}"
