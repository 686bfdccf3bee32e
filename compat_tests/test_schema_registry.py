"""The schema registry in the broker (issue 27) with confluent-kafka's own registry client and serializers.

A broker process serves the registry on schema.registry.listeners; producers serialize through it and
consumers read back, Avro first. An evolution the compatibility level forbids is refused at serialize time
with the registry's 409. Bad requests get Confluent's error bodies. Ids survive a SIGKILL and are never
given twice.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from testkit.broker_process import BrokerProcess, free_port

USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "kbroker.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "kbroker.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "long"},
    {"name": "email", "type": ["null", "string"], "default": None}]})
USER_BAD = json.dumps({"type": "record", "name": "User", "namespace": "kbroker.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "country", "type": "string"}]})  # a new field with no default


@pytest.fixture
def registry_broker(tmp_path):
    port = free_port()
    broker = BrokerProcess(tmp_path / "data", None, f"schema.registry.listeners=http://127.0.0.1:{port}")
    broker.registry_url = f"http://127.0.0.1:{port}"
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


def rest(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, object]:
    """(status, decoded JSON body) of one request to the registry."""
    request = urllib.request.Request(url, data=body, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def produce_and_read(bootstrap: str, topic: str, serialize, deserialize, values: list) -> list:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read, deadline = [], time.monotonic() + 30
    try:
        while len(read) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(deserialize(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return read


def test_avro_through_the_brokers_registry_and_an_evolution_the_level_forbids(registry_broker):
    client = SchemaRegistryClient({"url": registry_broker.registry_url})
    users = [{"name": f"user-{i}", "age": 20 + i} for i in range(5)]
    read = produce_and_read(registry_broker.bootstrap, "users", AvroSerializer(client, USER_V1),
                            AvroDeserializer(client), users)
    assert read == users
    latest = client.get_latest_version("users-value")
    assert (latest.version, latest.schema_id) == (1, 1)
    assert json.loads(client.get_schema(1).schema_str) == json.loads(USER_V1)

    evolved = AvroSerializer(client, USER_V2)  # int -> long, an optional field: BACKWARD compatible
    value = evolved({"name": "n", "age": 7, "email": "e@x"}, SerializationContext("users", MessageField.VALUE))
    assert value[0] == 0 and int.from_bytes(value[1:5], "big") == 2
    assert client.get_versions("users-value") == [1, 2]

    with pytest.raises(SchemaRegistryError) as refused:
        AvroSerializer(client, USER_BAD)({"name": "n", "country": "c"}, SerializationContext("users", MessageField.VALUE))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert not client.test_compatibility("users-value", Schema(USER_BAD, "AVRO"))
    client.set_compatibility("users-value", "NONE")
    assert client.register_schema("users-value", Schema(USER_BAD, "AVRO")) == 3


def test_bad_requests_get_confluents_error_bodies(registry_broker):
    url = registry_broker.registry_url
    versions = f"{url}/subjects/s/versions"
    cases = [
        (rest(versions, "POST", b"{not json"), 400, None),
        (rest(versions, "POST", json.dumps({"schema": "{}", "schemaType": "XML"}).encode()), 422, 42201),
        (rest(versions, "POST", json.dumps({"schema": '{"type": "record"}'}).encode()), 422, 42201),
        (rest(versions, "POST", json.dumps({"schema": "x" * (5 << 20)}).encode()), 422, 42209),
        (rest(f"{url}/schemas/ids/12345"), 404, 40403),
        (rest(f"{url}/subjects/nobody/versions"), 404, 40401),
        (rest(f"{url}/subjects/nobody/versions/zero"), 422, 42202),
        (rest(f"{url}/config", "PUT", json.dumps({"compatibility": "SIDEWAYS"}).encode()), 422, 42203),
        (rest(f"{url}/nowhere"), 404, 404),
    ]
    for (status, body), wanted_status, wanted_code in cases:
        assert status == wanted_status, body
        assert isinstance(body, dict) and isinstance(body.get("message"), str), body
        if wanted_code is not None:
            assert body["error_code"] == wanted_code, body
    assert registry_broker.process.poll() is None  # and the broker goes on
    assert rest(f"{url}/subjects") == (200, [])


ADDRESS_AVRO = json.dumps({"type": "record", "name": "Address", "namespace": "kbroker.test",
                           "fields": [{"name": "city", "type": "string"}]})
PERSON_AVRO = json.dumps({"type": "record", "name": "Person", "namespace": "kbroker.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "home", "type": "kbroker.test.Address"}]})


def test_the_rest_api_route_by_route(registry_broker):
    """Every route of Confluent's API that the serializers leave out, with the shapes Confluent answers:
    lookups, ids' subjects and versions, raw schemas, references and referencedby, normalize,
    compatibility against a version, per-subject config and modes (READONLY refuses writes)."""
    url = registry_broker.registry_url

    def call(path, method="GET", body=None):
        return rest(f"{url}{path}", method, None if body is None else json.dumps(body).encode())

    assert call("/") == (200, {})
    assert call("/schemas/types")[1] and set(call("/schemas/types")[1]) == {"AVRO", "JSON", "PROTOBUF"}
    assert call("/subjects/address/versions", "POST", {"schema": ADDRESS_AVRO}) == (200, {"id": 1})
    person = {"schema": PERSON_AVRO, "references": [
        {"name": "kbroker.test.Address", "subject": "address", "version": 1}]}
    assert call("/subjects/people-value/versions", "POST", person) == (200, {"id": 2})
    spaced = {"schema": json.dumps(json.loads(ADDRESS_AVRO), indent=4)}  # the same schema, laid out otherwise
    assert call("/subjects/address/versions", "POST", spaced) == (200, {"id": 1})
    reordered = {"schema": json.dumps(dict(reversed(json.loads(ADDRESS_AVRO).items())))}  # keys in another order
    assert call("/subjects/address-copy/versions?normalize=true", "POST", {"schema": ADDRESS_AVRO}) == (
        200, {"id": 3})  # normalized, a text of its own
    assert call("/subjects/address-copy/versions?normalize=true", "POST", reordered) == (200, {"id": 3})

    status, found = call("/subjects/people-value", "POST", person)
    assert status == 200 and (found["subject"], found["version"], found["id"]) == ("people-value", 1, 2)
    assert found["references"] == person["references"]
    status, missing = call("/subjects/address", "POST", {"schema": PERSON_AVRO, "references": person["references"]})
    assert (status, missing["error_code"]) == (404, 40403)
    assert call("/subjects/nobody", "POST", {"schema": ADDRESS_AVRO})[1]["error_code"] == 40401
    assert call("/schemas/ids/2/subjects") == (200, ["people-value"])
    assert call("/schemas/ids/2/versions") == (200, [{"subject": "people-value", "version": 1}])
    assert call("/subjects/address/versions/latest/schema") == (200, json.loads(ADDRESS_AVRO))
    assert call("/schemas/ids/1/schema") == (200, json.loads(ADDRESS_AVRO))
    assert call("/subjects/address/versions/1/referencedby") == (200, [2])
    status, refused = call("/subjects/address/versions/1", "DELETE")
    assert (status, refused["error_code"]) == (422, 42206)  # still referenced

    evolved = json.dumps({**json.loads(ADDRESS_AVRO), "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]})  # no default: not BACKWARD
    assert call("/compatibility/subjects/address/versions/latest", "POST", {"schema": evolved}) == (
        200, {"is_compatible": False})
    assert call("/compatibility/subjects/address/versions/1?verbose=true", "POST",
                {"schema": evolved})[1]["messages"]
    assert call("/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call("/config/address")[1]["error_code"] == 40408
    assert call("/config/address?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call("/config/address", "PUT", {"compatibility": "FORWARD"}) == (200, {"compatibility": "FORWARD"})
    assert call("/compatibility/subjects/address/versions/latest", "POST", {"schema": evolved}) == (
        200, {"is_compatible": True})
    assert call("/config/address", "DELETE") == (200, {"compatibilityLevel": "FORWARD"})
    assert call("/config/address?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})

    assert call("/mode") == (200, {"mode": "READWRITE"})
    assert call("/mode/address", "PUT", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, refused = call("/subjects/address/versions", "POST", {"schema": evolved})
    assert (status, refused["error_code"]) == (422, 42205)
    assert call("/subjects/people-value/versions", "POST", person) == (200, {"id": 2})  # other subjects write
    assert call("/mode/address", "DELETE") == (200, {"mode": "READONLY"})
    assert call("/mode/address")[1]["error_code"] == 40409
    status, refused = call("/subjects/address/versions", "POST", {"schema": evolved})
    assert (status, refused["error_code"]) == (409, 409)  # BACKWARD again: a new field wants a default
    with_default = json.dumps({**json.loads(ADDRESS_AVRO), "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": "string", "default": ""}]})
    assert call("/subjects/address/versions", "POST", {"schema": with_default, "schemaType": "AVRO"}) == (
        200, {"id": 4})


def test_ids_survive_a_sigkill_and_are_never_given_twice(registry_broker):
    client = SchemaRegistryClient({"url": registry_broker.registry_url})
    first = client.register_schema("a-value", Schema(USER_V1, "AVRO"))
    second = client.register_schema("b-value", Schema(USER_V2, "AVRO"))
    assert (first, second) == (1, 2)
    assert rest(f"{registry_broker.registry_url}/subjects/b-value?permanent=false", "DELETE") == (200, [1])
    assert rest(f"{registry_broker.registry_url}/subjects/b-value?permanent=true", "DELETE") == (200, [1])
    registry_broker.kill()
    registry_broker.start()
    client = SchemaRegistryClient({"url": registry_broker.registry_url})
    assert json.loads(client.get_schema(1).schema_str) == json.loads(USER_V1)
    assert client.get_subjects() == ["a-value"]
    third = client.register_schema("c-value", Schema(USER_BAD, "AVRO"))
    assert third == 3  # 2 was given before its subject was deleted


def test_no_schemas_topic_with_fewer_live_brokers_than_its_replication_factor(tmp_path):
    """As Kafka does for __consumer_offsets: _schemas is not created with fewer replicas than asked for.
    A lone broker asked for two refuses writes with a retriable 50001 that says why, and creates nothing."""
    port = free_port()
    broker = BrokerProcess(tmp_path / "data", None, f"schema.registry.listeners=http://127.0.0.1:{port}",
                           "schema.registry.topic.replication.factor=2")
    broker.start()
    try:
        status, body = rest(f"http://127.0.0.1:{port}/subjects/s-value/versions", "POST",
                            json.dumps({"schema": USER_V1}).encode())
        assert (status, body["error_code"]) == (500, 50001), body
        assert "schema.registry.topic.replication.factor is 2 and 1 broker(s) are live" in body["message"]
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        assert "_schemas" not in metadata.topics
        assert rest(f"http://127.0.0.1:{port}/subjects") == (200, [])
    finally:
        broker.kill()


ORDER_V1 = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                       "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
                       "required": ["id"], "additionalProperties": False})
ORDER_REQUIRING_MORE = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order",
                                   "type": "object", "properties": {"id": {"type": "integer"},
                                                                    "item": {"type": "string"}},
                                   "required": ["id", "item"], "additionalProperties": False})


def test_json_schema_through_the_brokers_registry(registry_broker):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    client = SchemaRegistryClient({"url": registry_broker.registry_url})
    orders = [{"id": i, "item": f"thing-{i}"} for i in range(4)]
    read = produce_and_read(registry_broker.bootstrap, "orders", JSONSerializer(ORDER_V1, client),
                            JSONDeserializer(ORDER_V1), orders)
    assert read == orders
    registered = client.get_latest_version("orders-value")
    assert registered.schema.schema_type == "JSON" and json.loads(registered.schema.schema_str) == json.loads(ORDER_V1)
    with pytest.raises(SchemaRegistryError) as refused:  # a newly required property: not BACKWARD compatible
        JSONSerializer(ORDER_REQUIRING_MORE, client)({"id": 1, "item": "x"},
                                                     SerializationContext("orders", MessageField.VALUE))
    assert refused.value.http_status_code == 409 and "REQUIRED_PROPERTY_ADDED" in refused.value.error_message


def test_the_pytest_fixture_serves_a_registry_on_first_use(kbroker):
    url = kbroker.schema_registry_url
    assert url == kbroker.schema_registry_url  # the same one when asked again
    client = SchemaRegistryClient({"url": url})
    users = [{"name": "ada", "age": 36}]
    assert produce_and_read(kbroker.bootstrap, "fixture-users", AvroSerializer(client, USER_V1),
                            AvroDeserializer(client), users) == users
    assert client.get_subjects() == ["fixture-users-value"]


ADDRESS_PROTO = """syntax = "proto3";
package kbroker.pbtest;
message Address { string city = 1; }
"""
USER_PROTO = """syntax = "proto3";
package kbroker.pbtest;
import "kbroker_pbtest/address.proto";
import "google/protobuf/timestamp.proto";
message User {
  string name = 1;
  int32 age = 2;
  Address address = 3;
  google.protobuf.Timestamp joined = 4;
}
"""


def protoc(tmp_path, *arguments: str) -> None:
    import os
    import subprocess
    import sys

    import grpc_tools

    bundle = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}", f"-I{bundle}", *arguments],
                   check=True, capture_output=True, timeout=60)


def test_protobuf_through_the_brokers_registry(registry_broker, tmp_path, monkeypatch):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    (tmp_path / "kbroker_pbtest").mkdir()
    (tmp_path / "kbroker_pbtest" / "address.proto").write_text(ADDRESS_PROTO)
    (tmp_path / "kbroker_pbtest" / "user.proto").write_text(USER_PROTO)
    protoc(tmp_path, f"--python_out={tmp_path}", "kbroker_pbtest/address.proto", "kbroker_pbtest/user.proto")
    monkeypatch.syspath_prepend(str(tmp_path))
    from kbroker_pbtest import user_pb2  # generated just now

    url = registry_broker.registry_url
    users = [user_pb2.User(name=f"user-{i}", age=30 + i, address={"city": f"city-{i}"}) for i in range(4)]
    users[0].joined.FromSeconds(1_700_000_000)
    reader = ProtobufDeserializer(user_pb2.User, {}, SchemaRegistryClient({"url": url}))  # asks the broker
    read = produce_and_read(registry_broker.bootstrap, "pb-users", ProtobufSerializer(
        user_pb2.User, SchemaRegistryClient({"url": url})), reader, users)
    assert read == users
    client = SchemaRegistryClient({"url": url})
    assert sorted(client.get_subjects()) == ["kbroker_pbtest/address.proto", "pb-users-value"]
    registered = client.get_latest_version("pb-users-value")
    assert registered.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject) for r in registered.schema.references] == [
        ("kbroker_pbtest/address.proto", "kbroker_pbtest/address.proto")]  # timestamp.proto is well known

    client.register_schema("pb-address", Schema(ADDRESS_PROTO, "PROTOBUF"))  # as Java's serializer registers: source
    text_id = client.register_schema("pb-text-value", Schema(USER_PROTO, "PROTOBUF", [
        SchemaReference("kbroker_pbtest/address.proto", "pb-address", 1)]))
    status, body = rest(f"{url}/schemas/ids/{text_id}")
    assert status == 200 and body["schema"] == USER_PROTO  # source is kept as sent
    status, body = rest(f"{url}/subjects/pb-text-value/versions/1?format=serialized")
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(body["schema"]))
    assert [message.name for message in descriptor.message_type] == ["User"]
    assert list(descriptor.dependency) == ["kbroker_pbtest/address.proto", "google/protobuf/timestamp.proto"]

    (tmp_path / "kbroker_pbtest" / "user.proto").write_text(USER_PROTO.replace("int32 age", "string age"))
    protoc(tmp_path, f"--descriptor_set_out={tmp_path / 'evolved.pb'}", "--include_imports", "kbroker_pbtest/user.proto")
    pool = descriptor_pool.DescriptorPool()  # apart from the default pool, which holds the first User
    for file in descriptor_pb2.FileDescriptorSet.FromString((tmp_path / "evolved.pb").read_bytes()).file:
        pool.Add(file)
    evolved = message_factory.GetMessageClass(pool.FindMessageTypeByName("kbroker.pbtest.User"))
    with pytest.raises(SchemaRegistryError) as refused:  # int32 -> string: not BACKWARD compatible
        ProtobufSerializer(evolved, client)(evolved(name="n", age="old"), SerializationContext("pb-users",
                                                                                             MessageField.VALUE))
    assert refused.value.http_status_code == 409 and "FIELD_SCALAR_KIND_CHANGED" in refused.value.error_message

