"""Client quotas (issue 11, point 4): AlterClientQuotas sets a 1 MB/s producer_byte_rate on one
client id; a confluent-kafka producer under it, producing as fast as it can, gets within 20% of
1 MB/s over 10 s (throttle_time_ms and a muted connection, KIP-219), while a producer with another
client id, at the same time, is not held back. DescribeClientQuotas shows the quota. And
controller_mutation_rate (KIP-599) holds back creating and deleting partitions, and
connection_creation_rate (KIP-612) the connections one IP opens."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from testkit import raw_client
from testkit.broker_process import BrokerProcess
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import encode_request
from kbroker.wire.schema import API_BY_NAME

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

QUOTA_BYTES_PER_S = 1_000_000
MEASURE_S = 10
WARM_UP_S = 2
VALUE = b"q" * 10_000


def alter_quota(port: int, client_id: str, key: str, value: float, remove: bool = False) -> int:
    Request = API_BY_NAME["AlterClientQuotas"].request_class
    entry = Request.EntryData(entity=[Request.EntryData.EntityData(entity_type="client-id", entity_name=client_id)],
                              ops=[Request.EntryData.OpData(key=key, value=value, remove=remove)])
    response = raw_client.call(port, "AlterClientQuotas", 1, Request(entries=[entry], validate_only=False))
    return response.entries[0].error_code


def produce_for(bootstrap: str, topic: str, client_id: str, seconds: float, rates: dict) -> None:
    """Produce as fast as the client is let for WARM_UP_S + ``seconds``; ``rates[client_id]`` = bytes/s
    acknowledged over the last ``seconds``. (Kafka's rate counts at least quota.window.num - 1 whole
    windows from the start, so a new client's first second may burst; the quota holds from then on.)"""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 5,
                         "batch.size": 64 * 1024, "queue.buffering.max.kbytes": 2048})
    acknowledged = [0]

    def delivered(error, message):
        if error is None:
            acknowledged[0] += len(message.value())

    measure_from = time.monotonic() + WARM_UP_S
    deadline = measure_from + seconds
    at_start = None
    while time.monotonic() < deadline:
        if at_start is None and time.monotonic() >= measure_from:
            at_start = acknowledged[0]
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:  # the client's queue is full: it is being throttled
            producer.poll(0.05)
            continue
        producer.poll(0)
    rates[client_id] = (acknowledged[0] - at_start) / (time.monotonic() - measure_from)
    producer.purge()  # what is still queued would take its throttled time to leave
    producer.flush(5)


@pytest.mark.slow
def test_a_producer_is_held_to_its_byte_rate_and_others_are_not(tmp_path):
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("quota-limited", 1, 1), NewTopic("quota-free", 1, 1)]).values():
            future.result(30)
        assert alter_quota(broker.port, "limited", "producer_byte_rate", QUOTA_BYTES_PER_S) == ErrorCode.NONE
        Describe = API_BY_NAME["DescribeClientQuotas"].request_class
        described = raw_client.call(broker.port, "DescribeClientQuotas", 1, Describe(
            components=[Describe.ComponentData(entity_type="client-id", match_type=0, match="limited")], strict=True))
        assert [(e.entity[0].entity_name, e.values[0].key, e.values[0].value) for e in described.entries] == [
            ("limited", "producer_byte_rate", QUOTA_BYTES_PER_S)]

        rates: dict[str, float] = {}
        threads = [threading.Thread(target=produce_for, args=(broker.bootstrap, topic, client_id, MEASURE_S, rates))
                   for topic, client_id in (("quota-limited", "limited"), ("quota-free", "free"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WARM_UP_S + MEASURE_S + 60)
        print(f"limited to {QUOTA_BYTES_PER_S / 1e6:.1f} MB/s: {rates['limited'] / 1e6:.2f} MB/s; "
              f"another client at the same time: {rates['free'] / 1e6:.2f} MB/s")
        assert abs(rates["limited"] - QUOTA_BYTES_PER_S) <= 0.2 * QUOTA_BYTES_PER_S
        assert rates["free"] > 3 * QUOTA_BYTES_PER_S
    finally:
        broker.kill()


def _create(port: int, version: int, topics: dict[str, int]):
    Request = API_BY_NAME["CreateTopics"].request_class
    return raw_client.call(port, "CreateTopics", version, Request(topics=[
        Request.CreatableTopic(name=name, num_partitions=count, replication_factor=1, assignments=[], configs=[])
        for name, count in topics.items()], timeout_ms=10_000, validate_only=False))


def test_controller_mutation_rate_refuses_or_throttles_topic_changes(tmp_path):
    """KIP-599: 0.5 partition mutations per second gives a burst of 5.5 (11 windows of 1 s); a
    request is taken while credit is left, even if it overdraws; once below zero, CreateTopics v6+,
    CreatePartitions v3+ and DeleteTopics v5+ answer THROTTLING_QUOTA_EXCEEDED and older versions
    do the change and throttle. The quota is raw_client's client id's; another client id is free."""
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        assert alter_quota(broker.port, "compat-test", "controller_mutation_rate", 0.5) == ErrorCode.NONE
        first = _create(broker.port, 7, {"m-a": 5, "m-b": 20, "m-c": 1})  # 5.5 -> 0.5 -> -19.5 -> refused
        assert [(t.name, t.error_code) for t in first.topics] == [
            ("m-a", ErrorCode.NONE), ("m-b", ErrorCode.NONE), ("m-c", ErrorCode.THROTTLING_QUOTA_EXCEEDED)]
        assert 35_000 <= first.throttle_time_ms <= 39_000  # 19.5 credits at 0.5/s
        assert first.topics[2].error_message == "The throttling quota has been exceeded."

        older = _create(broker.port, 5, {"m-d": 1})  # v5: made, and throttled
        assert older.topics[0].error_code == ErrorCode.NONE and older.throttle_time_ms > 35_000

        Partitions = API_BY_NAME["CreatePartitions"].request_class
        grown = raw_client.call(broker.port, "CreatePartitions", 3, Partitions(
            topics=[Partitions.CreatePartitionsTopic(name="m-a", count=6, assignments=None)], timeout_ms=10_000,
            validate_only=False))
        assert grown.results[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED and grown.throttle_time_ms > 0

        Delete = API_BY_NAME["DeleteTopics"].request_class
        deleted = raw_client.call(broker.port, "DeleteTopics", 5, Delete(topic_names=["m-a"], timeout_ms=10_000))
        assert deleted.responses[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        deleted = raw_client.call(broker.port, "DeleteTopics", 4, Delete(topic_names=["m-a"], timeout_ms=10_000))
        assert deleted.responses[0].error_code == ErrorCode.NONE and deleted.throttle_time_ms > 0

        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "unlimited"})
        admin.create_topics([NewTopic("m-free", 50, 1)])["m-free"].result(30)  # another client id: no quota

        assert alter_quota(broker.port, "compat-test", "controller_mutation_rate", 0, remove=True) == ErrorCode.NONE
        again = _create(broker.port, 7, {"m-c": 30})
        assert again.topics[0].error_code == ErrorCode.NONE and again.throttle_time_ms == 0
        listed = raw_client.call(broker.port, "Metadata", 1, raw_client.request("Metadata", topics=None))
        assert {t.name for t in listed.topics} == {"m-b", "m-c", "m-d", "m-free"}
    finally:
        broker.kill()


def _served(port: int, count: int, source: str) -> int:
    """Open ``count`` connections from ``source`` at once, send ApiVersions on each: how many are answered
    (the others are closed by the broker)."""
    api = API_BY_NAME["ApiVersions"]
    connections = []
    try:
        for _ in range(count):
            connection = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
            connection.sendall(encode_request(api.key, 0, 1, "conn", api.request_class()))
            connections.append(connection)
        answered = 0
        for connection in connections:
            try:
                answered += len(connection.recv(4)) == 4  # a response's size: it was served
            except ConnectionError:
                pass
        return answered
    finally:
        for connection in connections:
            connection.close()


def test_connection_creation_rate_closes_connections_over_an_ips_rate(tmp_path):
    """KIP-612: with 5 connections per second for 127.0.0.1, a burst of 120 is served as far as Kafka's
    rate allows (at the start, 11 samples of 1 s make it count over at least 10 s: about 50) and the
    rest closed; the same burst from 127.0.0.2, which has no quota, is served whole."""
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        Request = API_BY_NAME["AlterClientQuotas"].request_class
        entry = Request.EntryData(entity=[Request.EntryData.EntityData(entity_type="ip", entity_name="127.0.0.1")],
                                  ops=[Request.EntryData.OpData(key="connection_creation_rate", value=5, remove=False)])
        response = raw_client.call(broker.port, "AlterClientQuotas", 1, Request(entries=[entry], validate_only=False))
        assert response.entries[0].error_code == ErrorCode.NONE
        limited = _served(broker.port, 120, "127.0.0.1")
        print(f"127.0.0.1 at 5 connections/s: {limited} of a burst of 120 served")
        assert 40 <= limited <= 60, limited
        assert _served(broker.port, 120, "127.0.0.2") == 120
    finally:
        broker.kill()
