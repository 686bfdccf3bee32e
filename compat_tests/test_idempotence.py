"""Idempotent producers never duplicate across a forced retry; plain ones do (so the test has teeth).

A proxy between client and broker drops the answer to some produce requests
after the broker appended them, closing the connection: the client cannot
know the batch landed and sends it again.
"""

import time

import confluent_kafka
import kafka
import pytest

from testkit.broker_process import BrokerProcess, free_port
from compat_tests.cutting_proxy import CuttingProxy

COUNT = 3_000
PARTITIONS = 2


@pytest.fixture
def proxied(tmp_path):
    """A broker process that advertises the proxy's address, so every client connection goes through it."""
    broker_port = free_port()
    with CuttingProxy(broker_port, every=15, cuts=4) as proxy:
        broker = BrokerProcess(tmp_path, broker_port, f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}", "num.partitions=2")
        broker.start()
        try:
            yield proxy, broker
        finally:
            broker.kill()


def produce_confluent(bootstrap, topic, idempotent):
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": idempotent, "acks": "all", "linger.ms": 2,
        "batch.num.messages": 50, "retry.backoff.ms": 20, "reconnect.backoff.ms": 20,
    })
    errors = []
    for i in range(COUNT):
        producer.produce(topic, f"m-{i}".encode(), key=str(i % 7).encode(), on_delivery=lambda e, _m: e and errors.append(e))
        if i % 200 == 0:
            producer.poll(0.01)
    assert producer.flush(60) == 0
    assert errors == []


def produce_kafka_python(bootstrap, topic, idempotent):
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=idempotent, acks="all", linger_ms=2,
                                   batch_size=400, retries=100, retry_backoff_ms=20, reconnect_backoff_ms=20)
    futures = [producer.send(topic, f"m-{i}".encode(), key=str(i % 7).encode()) for i in range(COUNT)]
    producer.flush(60)
    for future in futures:
        future.get(timeout=10)
    producer.close()


def consume(bootstrap, topic):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 30
    idle_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - idle_since < 2:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values[message.partition()].append(int(message.value().split(b"-")[1]))
            idle_since = time.monotonic()
    consumer.close()
    return values


PRODUCERS = {"confluent-kafka": produce_confluent, "kafka-python": produce_kafka_python}


@pytest.mark.slow
@pytest.mark.parametrize("client", PRODUCERS)
def test_an_idempotent_producer_never_duplicates_across_forced_retries(proxied, client):
    proxy, broker = proxied
    bootstrap = f"127.0.0.1:{proxy.port}"
    PRODUCERS[client](bootstrap, "idempotent", idempotent=True)
    assert proxy.cut >= 3, "the proxy should have cut connections under the producer"
    values = consume(broker.bootstrap, "idempotent")
    assert sorted(v for vs in values.values() for v in vs) == list(range(COUNT))
    for per_partition in values.values():
        assert per_partition == sorted(per_partition)  # idempotence also keeps order across the retries


@pytest.mark.slow
def test_a_plain_producer_duplicates_across_the_same_retries(proxied):
    proxy, broker = proxied
    produce_confluent(f"127.0.0.1:{proxy.port}", "plain", idempotent=False)
    assert proxy.cut >= 3
    values = [v for vs in consume(broker.bootstrap, "plain").values() for v in vs]
    assert set(values) == set(range(COUNT))
    assert len(values) > COUNT  # each cut batch was written twice
