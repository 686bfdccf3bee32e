"""Stock clients over TLS and SASL (issue 11, point 1): confluent-kafka and kafka-python produce and
consume over SSL with client certificates, SASL_SSL with SCRAM-SHA-256 and SCRAM-SHA-512, and
SASL_PLAINTEXT with PLAIN; a wrong password, an unknown user, a missing or untrusted client
certificate cannot produce, consume or list topics."""

from __future__ import annotations

import uuid

import pytest

from compat_tests.secure_broker import PASSWORDS, SecureBroker, make_certificates

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,  # noqa: E402
                                   UserScramCredentialUpsertion)

WAYS = ["SSL", "SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
REFUSED = [("SSL-no-certificate", "alice", None), ("SSL-untrusted-certificate", "alice", None),
           ("SCRAM-SHA-256", "alice", "wrong"), ("SCRAM-SHA-512", "nobody", "x"), ("PLAIN", "alice", "wrong"),
           ("PLAIN", "nobody", "x")]
MESSAGES = 20


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    directory = tmp_path_factory.mktemp("secure")
    process = SecureBroker(directory / "data", make_certificates(directory))
    process.start()
    try:
        admin = AdminClient(process.confluent_config("PLAINTEXT"))
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
                   for user, password in PASSWORDS.items()
                   for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=30)
        yield process
    finally:
        process.kill()


def _topic(broker) -> str:
    name = f"secure-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(broker.confluent_config("PLAINTEXT"))
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    return name


@pytest.mark.parametrize("way", WAYS)
def test_confluent_kafka_produces_and_consumes(broker, way):
    topic = _topic(broker)
    producer = Producer({**broker.confluent_config(way), "acks": "all"})
    for index in range(MESSAGES):
        producer.produce(topic, f"{way}-{index}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**broker.confluent_config(way), "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        for _ in range(200):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
            if len(values) == MESSAGES:
                break
    finally:
        consumer.close()
    assert values == [f"{way}-{index}" for index in range(MESSAGES)]


@pytest.mark.parametrize("way", WAYS)
def test_kafka_python_produces_and_consumes(broker, way):
    topic = _topic(broker)
    producer = kafka.KafkaProducer(**broker.kafka_python_config(way), acks="all")
    for index in range(MESSAGES):
        producer.send(topic, f"{way}-{index}".encode())
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, **broker.kafka_python_config(way), group_id=f"g-{topic}",
                                   auto_offset_reset="earliest", consumer_timeout_ms=15000)
    try:
        values = [message.value.decode() for _, message in zip(range(MESSAGES), consumer)]
    finally:
        consumer.close()
    assert values == [f"{way}-{index}" for index in range(MESSAGES)]


@pytest.mark.parametrize("way, user, password", REFUSED, ids=[f"{w}-{u}-{p}" for w, u, p in REFUSED])
def test_confluent_kafka_is_refused(broker, way, user, password):
    topic = _topic(broker)
    config = broker.confluent_config(way, user, password)
    with pytest.raises(KafkaException):
        AdminClient(config).list_topics(timeout=3)
    producer = Producer({**config, "message.timeout.ms": 2000})
    delivered = []
    producer.produce(topic, b"x", on_delivery=lambda error, _message: delivered.append(error))
    producer.flush(10)
    assert delivered and delivered[0] is not None  # not acknowledged
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        got = [consumer.poll(0.5) for _ in range(4)]
    finally:
        consumer.close()
    assert not [m for m in got if m is not None and m.error() is None]
    assert _end_offset(broker, topic) == 0  # nothing was written


@pytest.mark.parametrize("way, user, password", REFUSED, ids=[f"{w}-{u}-{p}" for w, u, p in REFUSED])
def test_kafka_python_is_refused(broker, way, user, password):
    config = broker.kafka_python_config(way, user, password)
    with pytest.raises(kafka.errors.KafkaError):
        consumer = kafka.KafkaConsumer(**config, request_timeout_ms=3000, bootstrap_timeout_ms=3000)
        try:
            consumer.topics()
        finally:
            consumer.close()
    with pytest.raises(kafka.errors.KafkaError):
        producer = kafka.KafkaProducer(**config, max_block_ms=3000, request_timeout_ms=3000, bootstrap_timeout_ms=3000)
        try:
            producer.send("anything", b"x").get(timeout=3)
        finally:
            producer.close(0)


def _end_offset(broker, topic: str) -> int:
    consumer = Consumer({**broker.confluent_config("PLAINTEXT"), "group.id": "probe"})
    try:
        _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return high
