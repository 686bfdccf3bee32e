"""Topic settings clients see the effect of: compression.type, LogAppendTime, offsets by timestamp, seeks,
keys required on a compacted topic."""

import os
import time

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from kbroker.testing import running_broker
from kbroker.wire.compression import GZIP, LZ4, NONE, ZSTD
from kbroker.wire.records import iter_batches


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        yield running


def create(broker, name, partitions=1, **configs):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, config=configs)])[name].result(timeout=10)


def produce(broker, topic, values, codec="none", **extra):
    """Produce ``values`` to partition 0 and return the delivered messages, in order."""
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5, **extra})
    delivered = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda error, message: delivered.append((error, message)))
    assert producer.flush(30) == 0
    assert all(error is None for error, _ in delivered), delivered
    return [message for _, message in delivered]


def consume(broker, topic, count, start=confluent_kafka.OFFSET_BEGINNING):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, start)])
    received = []
    deadline = time.monotonic() + 30
    while len(received) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            received.append(message)
    consumer.close()
    return received


def stored_codecs(broker, topic):
    """The codec of every batch in partition 0's segment files, read from disk."""
    directory = os.path.join(broker.data_dir, f"{topic}-0")
    codecs = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".log"):
            with open(os.path.join(directory, name), "rb") as segment:
                codecs += [header.compression for _, header in iter_batches(segment.read())]
    return codecs


@pytest.mark.parametrize(
    ("topic_codec", "producer_codec", "stored"),
    [("zstd", "none", ZSTD), ("gzip", "lz4", GZIP), ("uncompressed", "snappy", NONE), ("producer", "lz4", LZ4), ("lz4", "lz4", LZ4)],
)
def test_topic_compression_type_recompresses(broker, topic_codec, producer_codec, stored):
    topic = f"codec-{topic_codec}-{producer_codec}"
    create(broker, topic, **{"compression.type": topic_codec})
    values = [f"value-{i}".encode() * 20 for i in range(500)]
    delivered = produce(broker, topic, values, producer_codec, **{"enable.idempotence": True})
    assert [m.offset() for m in delivered] == list(range(500))
    assert [m.value() for m in consume(broker, topic, 500)] == values
    codecs = stored_codecs(broker, topic)
    assert codecs and set(codecs) == {stored}


def test_a_recompressed_batch_keeps_its_producer_id_and_sequences(broker):
    topic = "codec-idempotent"
    create(broker, topic, **{"compression.type": "gzip"})
    produce(broker, topic, [f"v{i}".encode() for i in range(300)], "none", **{"enable.idempotence": True, "batch.num.messages": 50})
    directory = os.path.join(broker.data_dir, f"{topic}-0")
    with open(os.path.join(directory, "00000000000000000000.log"), "rb") as segment:
        headers = [header for _, header in iter_batches(segment.read())]
    assert {h.compression for h in headers} == {GZIP}
    assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]  # one producer from offset 0
    assert headers[-1].last_offset == 299


def test_log_append_time_stamps_the_broker_clock(broker):
    topic = "append-time"
    create(broker, topic, **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    delivered = produce(broker, topic, [b"a", b"b", b"c"], "lz4")
    after = int(time.time() * 1000)
    for message in delivered:  # the produce response carries log_append_time_ms
        kind, stamp = message.timestamp()
        assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME and before <= stamp <= after
    received = consume(broker, topic, 3)
    assert [m.value() for m in received] == [b"a", b"b", b"c"]
    for message in received:
        kind, stamp = message.timestamp()
        assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME and before <= stamp <= after


def test_create_time_is_kept_as_the_producer_set_it(broker):
    topic = "create-time"
    create(broker, topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"old", partition=0, timestamp=1_000_000)
    assert producer.flush(10) == 0
    [message] = consume(broker, topic, 1)
    assert message.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, 1_000_000)


def deliveries(broker, topic, messages, codec="none", linger_ms=0, idempotence=False):
    """Produce (key, value) pairs to partition 0: each message's delivery error code, None where it was delivered."""
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                                         "linger.ms": linger_ms, "enable.idempotence": idempotence})
    reports = []
    for key, value in messages:
        producer.produce(topic, value, key=key, partition=0,
                         on_delivery=lambda error, message: reports.append(None if error is None else error.code()))
        if not linger_ms:
            producer.flush(30)  # a batch of its own
    assert producer.flush(30) == 0
    return reports


@pytest.mark.parametrize(("policy", "idempotence"), [("compact", False), ("compact", True), ("compact,delete", False)])
def test_a_compacted_topic_refuses_records_without_a_key(broker, policy, idempotence):
    """Kafka's LogValidator: INVALID_RECORD, which the producer sees in the record's delivery report (KIP-467);
    an idempotent producer carries on with its next records."""
    topic = f"keyed-{policy.replace(',', '-')}-{idempotence}"
    create(broker, topic, **{"cleanup.policy": policy})
    reports = deliveries(broker, topic, [(b"k1", b"kept"), (None, b"refused"), (b"k2", b"kept too")],
                         idempotence=idempotence)
    assert reports == [None, confluent_kafka.KafkaError.INVALID_RECORD, None]
    assert [(m.key(), m.value()) for m in consume(broker, topic, 2)] == [(b"k1", b"kept"), (b"k2", b"kept too")]


def test_a_compressed_batch_holding_a_record_without_a_key_is_refused_whole(broker):
    topic = "keyed-lz4"
    create(broker, topic, **{"cleanup.policy": "compact"})
    value = b"compressible " * 100  # librdkafka sends a batch uncompressed when lz4 would not make it smaller
    reports = deliveries(broker, topic, [(b"k1", value), (None, value), (b"k3", value)], codec="lz4", linger_ms=200)
    assert reports == [confluent_kafka.KafkaError.INVALID_RECORD] * 3  # one batch: Kafka appends all of it or none
    assert deliveries(broker, topic, [(b"k4", value), (b"k5", value)], codec="lz4", linger_ms=200) == [None, None]
    assert [(m.offset(), m.key()) for m in consume(broker, topic, 2)] == [(0, b"k4"), (1, b"k5")]
    assert stored_codecs(broker, topic) == [LZ4]  # the same producer's batches are compressed


def test_a_delete_topic_takes_records_without_a_key(broker):
    topic = "unkeyed"
    create(broker, topic, **{"cleanup.policy": "delete"})
    assert deliveries(broker, topic, [(None, b"a")]) == [None]
    assert deliveries(broker, topic, [(None, b"b"), (None, b"c")], codec="lz4", linger_ms=200) == [None, None]
    assert [m.value() for m in consume(broker, topic, 3)] == [b"a", b"b", b"c"]


@pytest.fixture(scope="module")
def timed_topic(broker):
    """Partition 0 holds 100 records with timestamps 10_000, 10_010, ..., in batches of 10."""
    topic = "timed"
    create(broker, topic, partitions=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.num.messages": 10})
    for i in range(100):
        producer.produce(topic, f"v{i}".encode(), partition=0, timestamp=10_000 + 10 * i)
    assert producer.flush(10) == 0
    return topic


@pytest.mark.parametrize(("timestamp", "offset"), [(0, 0), (10_000, 0), (10_001, 1), (10_500, 50), (10_990, 99), (10_991, -1)])
def test_confluent_offsets_for_times(broker, timed_topic, timestamp, offset):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        [found] = consumer.offsets_for_times([confluent_kafka.TopicPartition(timed_topic, 0, timestamp)], timeout=10)
    finally:
        consumer.close()
    assert found.error is None
    assert found.offset == offset if offset >= 0 else found.offset == confluent_kafka.OFFSET_END


def test_kafka_python_offsets_for_times_and_seek(broker, timed_topic):
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        partition = kafka.TopicPartition(timed_topic, 0)
        consumer.assign([partition])
        found = consumer.offsets_for_times({partition: 10_205})[partition]
        assert (found.offset, found.timestamp) == (21, 10_210)
        assert consumer.offsets_for_times({partition: 99_999})[partition] is None
        assert consumer.beginning_offsets([partition]) == {partition: 0}
        assert consumer.end_offsets([partition]) == {partition: 100}
        consumer.seek(partition, found.offset)
        records = consumer.poll(timeout_ms=5000, max_records=3)[partition]
        assert [(r.offset, r.timestamp, r.value) for r in records] == [(21 + i, 10_210 + 10 * i, f"v{21 + i}".encode()) for i in range(3)]
        consumer.seek(partition, 97)
        assert [r.offset for r in consumer.poll(timeout_ms=5000)[partition]] == [97, 98, 99]
        consumer.seek_to_beginning(partition)
        assert consumer.poll(timeout_ms=5000, max_records=1)[partition][0].offset == 0
    finally:
        consumer.close()


def test_confluent_seek_backwards_and_forwards(broker, timed_topic):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(timed_topic, 0, 90)])
        first = [m.offset() for m in _poll(consumer, 10)]
        assert first == list(range(90, 100))
        consumer.seek(confluent_kafka.TopicPartition(timed_topic, 0, 5))
        assert [m.offset() for m in _poll(consumer, 3)] == [5, 6, 7]
        consumer.seek(confluent_kafka.TopicPartition(timed_topic, 0, 60))
        assert [m.value() for m in _poll(consumer, 2)] == [b"v60", b"v61"]
    finally:
        consumer.close()


def _poll(consumer, count):
    received = []
    deadline = time.monotonic() + 20
    while len(received) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            received.append(message)
    return received


def test_admin_list_offsets_earliest_latest_max_timestamp_and_for_timestamp(broker, timed_topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    partition = confluent_kafka.TopicPartition(timed_topic, 0)
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(), "max": OffsetSpec.max_timestamp(), "at": OffsetSpec.for_timestamp(10_450)}
    results = {name: admin.list_offsets({partition: spec})[partition].result(timeout=10) for name, spec in specs.items()}
    assert results["earliest"].offset == 0
    assert results["latest"].offset == 100
    assert (results["max"].offset, results["max"].timestamp) == (99, 10_990)
    assert (results["at"].offset, results["at"].timestamp) == (45, 10_450)
