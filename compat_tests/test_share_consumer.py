"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka's share consumer) against a broker
process: records handed out one by one across consumers, acknowledged (accept, release, reject), redelivered
when their consumer dies or stops, archived after group.share.delivery.count.limit deliveries, and all of it
kept across a kill -9 of the broker.

The broker runs with short timings so that the scenarios take seconds: heartbeats every 200 ms, acquisition
locks of 3 s, three deliveries at most, at most 100 records in flight per share-partition.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from testkit.broker_process import BrokerProcess

LOCK_DURATION_MS = 3000
DELIVERY_COUNT_LIMIT = 3
BROKER_OVERRIDES = ("group.share.heartbeat.interval.ms=200", "group.share.min.heartbeat.interval.ms=100",
                    f"group.share.record.lock.duration.ms={LOCK_DURATION_MS}",
                    "group.share.min.record.lock.duration.ms=1000",
                    f"group.share.delivery.count.limit={DELIVERY_COUNT_LIMIT}",
                    "group.share.partition.max.record.locks=100")
TIMEOUT_S = 30
QUIET_S = 2  # how long a consumer must see nothing to say nothing more is coming


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("share-broker"), None, *BROKER_OVERRIDES)
    process.start()
    yield process
    process.kill()


def prepare(bootstrap: str, name: str, records: int) -> None:
    """A one-partition topic ``name`` holding ``records`` records (values v0, v1, ...), and a share group
    ``name`` that starts from the earliest record (share.auto.offset.reset=earliest)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT_S)
    group = ConfigResource(ResourceType.GROUP, name, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([group]).values():
        future.result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n in range(records):
        producer.produce(name, b"v%d" % n)
    assert producer.flush(TIMEOUT_S) == 0


def share_consumer(bootstrap: str, group: str, *, explicit: bool = False) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit" if explicit else "implicit"})
    consumer.subscribe([group])
    return consumer


def poll_until(consumer: ShareConsumer, count: int, timeout_s: float = TIMEOUT_S) -> list:
    """Poll until ``count`` records came (or the timeout): the records, in order of arrival."""
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += [message for message in consumer.poll(0.2) if message.error() is None]
    return got


def nothing_more(consumer: ShareConsumer, quiet_s: float = QUIET_S) -> list:
    """What the consumer receives within ``quiet_s``: nothing, when every record is done."""
    got = []
    deadline = time.monotonic() + quiet_s
    while time.monotonic() < deadline:
        got += [message.offset() for message in consumer.poll(0.2) if message.error() is None]
    return got


def test_three_consumers_together_receive_every_record_once(broker):
    prepare(broker.bootstrap, "together", 300)
    consumers = [share_consumer(broker.bootstrap, "together") for _ in range(3)]
    received: dict[int, list[int]] = {}  # offset -> the consumers it went to
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(received) < 300 and time.monotonic() < deadline:
            for index, consumer in enumerate(consumers):  # each poll accepts what the previous one returned
                for message in consumer.poll(0.1):
                    if message.error() is None:
                        received.setdefault(message.offset(), []).append(index)
    finally:
        for consumer in consumers:
            consumer.commit_sync(TIMEOUT_S)  # accepts what the last poll returned (librdkafka's close does not)
            consumer.close()
    assert sorted(received) == list(range(300))
    assert all(len(owners) == 1 for owners in received.values()), {o: c for o, c in received.items() if len(c) > 1}
    late = share_consumer(broker.bootstrap, "together")
    try:
        assert nothing_more(late) == []  # every record was accepted: none comes again
    finally:
        late.close()


def test_release_redelivers_at_once_and_reject_archives(broker):
    prepare(broker.bootstrap, "acknowledged", 4)
    consumer = share_consumer(broker.bootstrap, "acknowledged", explicit=True)
    try:
        first = poll_until(consumer, 4)
        assert [(m.offset(), m.delivery_count()) for m in first] == [(0, 1), (1, 1), (2, 1), (3, 1)]
        kinds = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT, 2: AcknowledgeType.ACCEPT,
                 3: AcknowledgeType.ACCEPT}
        for message in first:
            consumer.acknowledge(message, kinds[message.offset()])
        assert all(error is None for error in consumer.commit_sync(TIMEOUT_S).values())
        again = poll_until(consumer, 1, timeout_s=LOCK_DURATION_MS / 1000 / 2)  # well before any lock runs out
        assert [(m.offset(), m.delivery_count(), m.value()) for m in again] == [(0, 2, b"v0")]
        consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
        assert nothing_more(consumer) == []  # 1 was rejected: archived, never delivered again
    finally:
        consumer.close()


def test_a_record_released_delivery_count_limit_times_is_archived(broker):
    prepare(broker.bootstrap, "limited", 1)
    consumer = share_consumer(broker.bootstrap, "limited", explicit=True)
    deliveries = []
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while len(deliveries) < DELIVERY_COUNT_LIMIT and time.monotonic() < deadline:
            for message in consumer.poll(0.2):
                if message.error() is None:
                    deliveries.append((message.offset(), message.delivery_count()))
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
        assert deliveries == [(0, count) for count in range(1, DELIVERY_COUNT_LIMIT + 1)]
        consumer.commit_sync(TIMEOUT_S)
        assert nothing_more(consumer) == []
    finally:
        consumer.close()


def start_worker(bootstrap: str, group: str) -> tuple[subprocess.Popen, list[dict]]:
    """A share consumer process that takes records and holds them: the process and the records it got."""
    worker = subprocess.Popen([sys.executable, "-m", "compat_tests.share_worker", bootstrap, group, group],
                              stdout=subprocess.PIPE, text=True)
    held = [json.loads(worker.stdout.readline())]
    return worker, held


def test_the_records_of_a_killed_consumer_go_to_the_others(broker):
    prepare(broker.bootstrap, "killed", 5)
    worker, held = start_worker(broker.bootstrap, "killed")
    try:
        assert held[0] == {"offset": 0, "delivery_count": 1}
    finally:
        worker.kill()  # SIGKILL, holding records 0-4: its connection closes, and they go back
        worker.wait(TIMEOUT_S)
    consumer = share_consumer(broker.bootstrap, "killed", explicit=True)
    try:
        again = poll_until(consumer, 5)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(n, 2) for n in range(5)]
        for message in again:
            consumer.acknowledge(message)
        consumer.commit_sync(TIMEOUT_S)
    finally:
        consumer.close()


def test_the_records_of_a_stopped_consumer_go_to_the_others_once_their_locks_run_out(broker):
    prepare(broker.bootstrap, "stopped", 5)
    worker, held = start_worker(broker.bootstrap, "stopped")
    acquired_at = time.monotonic()
    worker.send_signal(signal.SIGSTOP)  # alive, connected, silent: only the acquisition locks free its records
    consumer = share_consumer(broker.bootstrap, "stopped", explicit=True)
    try:
        again = poll_until(consumer, 5)
        waited = time.monotonic() - acquired_at
        assert [(m.offset(), m.delivery_count()) for m in again] == [(n, 2) for n in range(5)]
        assert waited >= LOCK_DURATION_MS / 1000 * 0.9, f"redelivered after {waited:.2f} s"
        for message in again:
            consumer.acknowledge(message)
        consumer.commit_sync(TIMEOUT_S)
    finally:
        consumer.close()
        worker.kill()
        worker.wait(TIMEOUT_S)


def test_acknowledgements_and_delivery_counts_survive_a_broker_kill(tmp_path):
    broker = BrokerProcess(tmp_path / "data", None, *BROKER_OVERRIDES)
    broker.start()
    try:
        prepare(broker.bootstrap, "restarted", 10)
        consumer = share_consumer(broker.bootstrap, "restarted", explicit=True)
        first = poll_until(consumer, 10)
        assert [m.offset() for m in first] == list(range(10))
        for message in first:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT if message.offset() < 5 else AcknowledgeType.RELEASE)
        assert all(error is None for error in consumer.commit_sync(TIMEOUT_S).values())
        consumer.close()
        broker.kill()  # SIGKILL: what was acknowledged was answered only once it was durable
        broker.start()
        consumer = share_consumer(broker.bootstrap, "restarted", explicit=True)
        try:
            again = poll_until(consumer, 5)
            assert [(m.offset(), m.delivery_count()) for m in again] == [(n, 2) for n in range(5, 10)]
            for message in again:
                consumer.acknowledge(message)
            consumer.commit_sync(TIMEOUT_S)
            assert nothing_more(consumer) == []
        finally:
            consumer.close()
    finally:
        broker.kill()
