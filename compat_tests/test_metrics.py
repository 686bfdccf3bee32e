"""Metrics, health and readiness on metrics.port (issue 12, points 2 and 3), scraped from real
broker processes while stock clients work; the log as JSON lines naming each error a client saw."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from testkit import raw_client
from testkit.broker_process import BrokerProcess, free_port
from testkit.quorum_process import Quorum, until

confluent_kafka = pytest.importorskip("confluent_kafka")
prometheus_parser = pytest.importorskip("prometheus_client.parser")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kbroker.wire.schema import API_BY_NAME  # noqa: E402


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def samples(port: int) -> dict[tuple, float]:
    """(sample name, sorted labels) -> value, from one scrape."""
    status, text = get(port, "/metrics")
    assert status == 200
    found = {}
    for family in prometheus_parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_traffic_latency_and_group_lag_are_measured(tmp_path):
    metrics_port = free_port()
    broker = BrokerProcess(tmp_path / "data", None, f"metrics.port={metrics_port}")
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("measured", 1, 1)])["measured"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for index in range(100):
            producer.produce("measured", f"value-{index}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lagging",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([TopicPartition("measured", 0, 0)])
        read = 0
        deadline = time.monotonic() + 30
        while read < 60 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read += 1
        consumer.commit(offsets=[TopicPartition("measured", 0, 60)], asynchronous=False)
        consumer.close()  # the consumer stops 40 records short

        found = samples(metrics_port)
        topic = (("topic", "measured"),)
        assert found[("kbroker_topic_messages_in_total", topic)] == 100
        assert found[("kbroker_topic_bytes_in_total", topic)] > 100 * len("value-00")
        assert found[("kbroker_topic_bytes_out_total", topic)] > 0
        assert found[("kbroker_topic_messages_out_total", topic)] == 100  # fetched ahead of the 60 it read
        for api in ("Produce", "Fetch"):
            assert found[("kbroker_request_latency_seconds_count", (("api", api),))] > 0
            assert ("kbroker_request_latency_seconds_bucket", (("api", api), ("le", "0.01"))) in found
        lag = (("group", "lagging"), ("partition", "0"), ("topic", "measured"))
        assert found[("kbroker_consumer_group_lag", lag)] == 40
        assert found[("kbroker_log_size_bytes", (("partition", "0"), ("topic", "measured")))] > 0
        assert found[("kbroker_leader_count", ())] >= 1
        assert found[("kbroker_active_controller", ())] == 1
        assert found[("kbroker_under_replicated_partitions", ())] == 0
        assert found[("kbroker_offline_partitions", ())] == 0
        assert found[("kbroker_log_remaining_logs_to_recover", ())] == 0  # a fresh directory: nothing found
        assert found[("kbroker_fsync_seconds_count", ())] > 0
        assert found[("kbroker_connections_accepted_total", (("listener", "PLAINTEXT"),))] >= 3  # the three clients
        assert get(metrics_port, "/health") == (200, "ok\n")
        assert get(metrics_port, "/ready")[0] == 200
        assert get(metrics_port, "/nothing")[0] == 404
    finally:
        broker.kill()


@pytest.mark.slow
def test_ready_only_once_registered_and_unfenced_and_not_when_cut_off(tmp_path):
    """A cluster node serves /health at once, /ready only once the quorum has unfenced it; with the
    rest of the quorum gone its lease runs out and /ready says so, until the others return."""
    cluster = Quorum(tmp_path, combined=True)
    ports = {node.node_id: free_port() for node in cluster.nodes}
    for node in cluster.nodes:
        node.overrides += (f"metrics.port={ports[node.node_id]}",)
    first = cluster.nodes[0]
    try:
        first.launch(cluster.voters)  # alone: no quorum, so it cannot register
        until(lambda: get(ports[1], "/health")[0] == 200, 20, "node 1 to answer /health")
        status, reason = get(ports[1], "/ready")
        assert status == 503, reason  # not registered: its client listeners are not even open yet
        for node in cluster.nodes[1:]:
            node.launch(cluster.voters)
        until(lambda: all(get(port, "/ready")[0] == 200 for port in ports.values()), 30, "every node ready")
        for node in cluster.nodes[1:]:
            node.kill()
        until(lambda: get(ports[1], "/ready")[0] == 503, 20, "node 1 to say it is cut off")
        assert get(ports[1], "/health")[0] == 200
        for node in cluster.nodes[1:]:
            node.launch(cluster.voters)
        until(lambda: get(ports[1], "/ready")[0] == 200, 30, "node 1 ready again")
    finally:
        cluster.close()


def test_the_log_is_json_lines_and_names_every_error_a_client_was_told(tmp_path):
    broker = BrokerProcess(tmp_path / "data", None, "logging.format=json", "logging.requests=true",
                           "auto.create.topics.enable=false")
    broker.start()
    try:
        wanted = API_BY_NAME["Metadata"].request_class.MetadataRequestTopic(name="missing")
        Metadata = raw_client.request("Metadata", topics=[wanted], allow_auto_topic_creation=False)
        response = raw_client.call(broker.port, "Metadata", 12, Metadata)
        assert response.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("UNKNOWN_TOPIC" in line for line in broker.log_tail):
            time.sleep(0.05)
        events = [json.loads(line) for line in list(broker.log_tail) if line.strip()]
        assert all({"time", "level", "logger", "message"} <= event.keys() for event in events)
        [error] = [e for e in events if e.get("errors")]
        assert error["api"] == "Metadata" and error["correlation_id"] == 1 and error["client_id"] == "compat-test"
        assert error["errors"] == ["UNKNOWN_TOPIC_OR_PARTITION@missing"]
    finally:
        broker.kill()
