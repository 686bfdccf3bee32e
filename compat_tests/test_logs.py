"""The broker's log as a person reads it: the start line names every address served, normal protocol
steps (a first JoinGroup's MEMBER_ID_REQUIRED, NOT_CONTROLLER while a quorum elects) stay out of it,
and errors that need a person stay in."""

from __future__ import annotations

import re
import time

import pytest

from testkit.broker_process import BrokerProcess, free_port
from testkit.quorum_process import Quorum
from kbroker.event_log import is_protocol_step

confluent_kafka = pytest.importorskip("confluent_kafka")

ROUTINE = ("MEMBER_ID_REQUIRED", "NOT_CONTROLLER", "REBALANCE_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE",
           "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "LEADER_NOT_AVAILABLE", "no longer led here",
           "records loaded")

METADATA_REFUSED = r"INFO kbroker\.requests: Metadata v\d+ .*INVALID_TOPIC_EXCEPTION@not a topic name!"


def join_a_group_and_read(bootstrap: str, topic: str) -> None:
    """A produce and a classic consumer group's first join, as any application starts."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"one")
    assert producer.flush(20) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "readers",
                                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return
        raise AssertionError("the consumer read nothing in 30 s")
    finally:
        consumer.close()


def test_a_broker_logs_its_addresses_and_no_protocol_steps_but_real_errors(tmp_path):
    metrics_port = free_port()
    broker = BrokerProcess(tmp_path / "data", None, f"metrics.port={metrics_port}")
    broker.start()
    try:
        join_a_group_and_read(broker.bootstrap, "orders")
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("not a topic name!", b"x")  # INVALID_TOPIC_EXCEPTION: a person should see this
        producer.flush(5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(re.search(METADATA_REFUSED, line) for line in broker.log_tail):
            time.sleep(0.05)
        log = "".join(broker.log_tail)
    finally:
        broker.kill()
    [ready] = [line for line in log.splitlines() if "ready on" in line]
    assert f"PLAINTEXT://127.0.0.1:{broker.port}" in ready and f"http://0.0.0.0:{metrics_port}" in ready
    assert f"data in {tmp_path / 'data'}" in ready
    assert not [line for line in log.splitlines() if any(word in line for word in ROUTINE)], log
    assert re.search(METADATA_REFUSED, log), log
    assert "CreateTopics" not in log, "an invalid name is refused by the broker, not sent on to the controller"


@pytest.mark.slow
def test_a_cluster_starting_and_serving_a_group_logs_no_protocol_steps(tmp_path):
    cluster = Quorum(tmp_path, combined=True)
    try:
        cluster.start()
        join_a_group_and_read(",".join(node.bootstrap for node in cluster.nodes), "clicks")
        for node in cluster.nodes:
            node.stop()
        logs = {node.node_id: open(node.log_path).read() for node in cluster.nodes}
    finally:
        cluster.close()
    for node in cluster.nodes:
        log = logs[node.node_id]
        [ready] = [line for line in log.splitlines() if "ready on" in line]
        assert (f"PLAINTEXT://127.0.0.1:{node.client_port}, CONTROLLER://127.0.0.1:{node.controller_port}"
                in ready), ready
        routine = [line for line in log.splitlines() if any(word in line for word in ROUTINE)]
        assert not routine, f"node {node.node_id}:\n" + "\n".join(routine)


def test_which_answers_are_protocol_steps():
    assert is_protocol_step("JoinGroup", "MEMBER_ID_REQUIRED")
    assert is_protocol_step("BrokerRegistration", "NOT_CONTROLLER")
    assert is_protocol_step("Produce", "NOT_LEADER_OR_FOLLOWER@orders-0")
    assert is_protocol_step("Metadata", "UNKNOWN_TOPIC_OR_PARTITION@orders")
    assert not is_protocol_step("Produce", "UNKNOWN_TOPIC_OR_PARTITION@orders-0")
    for needs_a_person in ("CORRUPT_MESSAGE", "KAFKA_STORAGE_ERROR", "TOPIC_AUTHORIZATION_FAILED",
                           "NOT_ENOUGH_REPLICAS", "INVALID_TOPIC_EXCEPTION", "UNKNOWN_MEMBER_ID", "17"):
        assert not is_protocol_step("Produce", needs_a_person)
