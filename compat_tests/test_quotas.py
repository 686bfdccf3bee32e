"""Client quotas (issue 11, point 4): AlterClientQuotas sets a 1 MB/s producer_byte_rate on one
client id; a confluent-kafka producer under it, producing as fast as it can, gets within 20% of
1 MB/s over 10 s (throttle_time_ms and a muted connection, KIP-219), while a producer with another
client id, at the same time, is not held back. DescribeClientQuotas shows the quota."""

from __future__ import annotations

import threading
import time

import pytest

from compat_tests import raw_client
from compat_tests.broker_process import BrokerProcess
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

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
