"""Broker-side schema validation (issue 27): a topic with confluent.value.schema.validation (or
confluent.key.schema.validation) refuses records whose value (key) is not in the schema registry's wire
format or names a schema id not registered for the topic's subject, with INVALID_RECORD naming each record;
records serialized through the registry pass; topics without it keep their batches opaque."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from compat_tests.test_errors import produce
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch

SCHEMA = json.dumps({"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]})


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        topics = [NewTopic("checked", 1, config={"confluent.value.schema.validation": "true"}),
                  NewTopic("checked-keys", 1, config={"confluent.key.schema.validation": "true"}),
                  NewTopic("unchecked", 1)]
        for future in admin.create_topics(topics).values():
            future.result(10)
        running.registry = SchemaRegistryClient({"url": running.schema_registry_url})
        yield running


def serialized(broker, topic: str, value: dict, field=MessageField.VALUE, schema: str = SCHEMA) -> bytes:
    return AvroSerializer(broker.registry, schema)(value, SerializationContext(topic, field))


def test_records_serialized_through_the_registry_pass(broker):
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    errors = []
    for celsius in (1.5, 2.5):
        producer.produce("checked", serialized(broker, "checked", {"celsius": celsius}),
                         on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(10) == 0 and errors == [None, None]


@pytest.mark.parametrize("version", [8, 9, 12])
def test_records_not_naming_a_registered_schema_are_refused_each_by_its_index(broker, version):
    good = serialized(broker, "checked", {"celsius": 3.0})
    other = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "celsius", "type": "double"}]})
    registered_elsewhere = serialized(broker, "other-topic", {"celsius": 4.0}, schema=other)  # another subject's
    unknown_id = b"\x00" + (999).to_bytes(4, "big") + good[5:]
    records = [Record(offset_delta=0, value=good), Record(offset_delta=1, value=b"plain text"),
               Record(offset_delta=2, value=unknown_id), Record(offset_delta=3, value=None),
               Record(offset_delta=4, value=registered_elsewhere)]
    result = produce(broker.port, "checked", build_batch(records), version=version)
    assert result.error_code == ErrorCode.INVALID_RECORD
    refused = {error.batch_index: error.batch_index_error_message for error in result.record_errors}
    assert sorted(refused) == [1, 2, 3, 4]
    assert "not in the schema registry's wire format" in refused[1] and "checked partition 0" in refused[1]
    assert "schema id 999, which is not registered for subject checked-value" in refused[2]
    assert result.error_message.startswith("One or more records have been rejected due to 4 record errors")
    assert produce(broker.port, "checked", build_batch(records[:1]), version=version).error_code == ErrorCode.NONE


def test_keys_are_checked_where_the_topic_asks(broker):
    key = serialized(broker, "checked-keys", {"celsius": 5.0}, MessageField.KEY)
    assert produce(broker.port, "checked-keys", build_batch([Record(offset_delta=0, key=key, value=b"any")])
                   ).error_code == ErrorCode.NONE
    assert produce(broker.port, "checked-keys", build_batch([Record(offset_delta=0, key=b"k", value=b"any")])
                   ).error_code == ErrorCode.INVALID_RECORD


def test_a_client_sees_invalid_record_and_other_topics_stay_opaque(broker):
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    delivered = {}
    for topic in ("checked", "unchecked"):
        producer.produce(topic, b"not avro", on_delivery=lambda error, message: delivered.update({message.topic(): error}))
    assert producer.flush(10) == 0
    assert delivered["checked"] is not None and delivered["checked"].code() == confluent_kafka.KafkaError.INVALID_RECORD
    assert delivered["unchecked"] is None
