"""Share groups at their limits (issue 45, scenarios 1 and 6), with confluent-kafka's ShareConsumer against
kbroker and against the reference Kafka 4.4, each test the same on both, so that Kafka shows what is right.

1. How many records one poll gets. librdkafka sends ``max.poll.records`` as ShareFetch's max_records (and
   batch_size), in the default acquire mode, batch_optimized: the broker stops acquiring at the end of the
   batch that reaches the limit, so a poll gets whole producer batches: 50 records of batches of 10 for
   max.poll.records=45, a whole batch of 100 for 50.
2. A group's ``share.record.lock.duration.ms`` (IncrementalAlterConfigs on the GROUP resource) must lie
   within the broker's group.share.min/max.record.lock.duration.ms: INVALID_CONFIG otherwise, nothing
   clamped. With the minimum lowered, records a consumer does not acknowledge are delivered again after the
   group's duration, also when it was set after the group's share-partitions were first fetched (Kafka reads
   it at every acquisition).

Both brokers run with the same settings: short share-group heartbeats (a member is assigned sooner) and a
record lock minimum of 1 s. Every wait is bounded.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from compat_tests.kafka_oracle import start_reference_kafka
from kbroker.testing import running_broker

SETTINGS = {"group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
            "group.share.min.record.lock.duration.ms": 1000}
GROUP_LOCK_MS = 2000
TIMEOUT_S = 20  # the first records of a new group (Kafka assigns its first share group's partitions in ~3 s)
POLL_S = 0.2


@pytest.fixture(scope="module")
def kbroker_limits():
    with running_broker(settings=SETTINGS) as broker:
        yield broker


@pytest.fixture(scope="module")
def kafka_limits(tmp_path_factory):
    kafka = start_reference_kafka(tmp_path_factory.mktemp("share-limits-kafka"), overrides=SETTINGS)
    yield kafka
    kafka.stop()


@pytest.fixture(params=["kbroker", "kafka"])
def broker(request):
    return request.getfixturevalue("kbroker_limits" if request.param == "kbroker" else "kafka_limits")


def alter_group(bootstrap: str, group: str, name: str, value: str) -> None:
    """Sets one config of ``group``; KafkaException if the broker refuses it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)


def prepare(broker, name: str, batches: list[int]) -> None:
    """Topic ``name`` (one partition) holding producer batches of ``batches`` records, and share group
    ``name`` reading it from the earliest record."""
    broker.create_topic(name, 1)
    alter_group(broker.bootstrap, name, "share.auto.offset.reset", "earliest")
    produce(broker.bootstrap, name, batches)


def produce(bootstrap: str, topic: str, batches: list[int], first: int = 0) -> None:
    """One produce request per batch: each is flushed before the next is produced."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10_000})
    for size in batches:
        for n in range(first, first + size):
            producer.produce(topic, b"v%d" % n)
        assert producer.flush(TIMEOUT_S) == 0
        first += size


def share_consumer(bootstrap: str, group: str, **config) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    consumer.subscribe([group])
    return consumer


def next_records(consumer: ShareConsumer, timeout_s: float = TIMEOUT_S) -> list:
    """The records of the next poll that returns any (none once ``timeout_s`` went by)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        records = [message for message in consumer.poll(POLL_S) if message.error() is None]
        if records:
            return records
    return []


def poll_sizes(consumer: ShareConsumer, total: int) -> list[int]:
    """How many records each poll returned, until ``total`` came (bounded)."""
    sizes: list[int] = []
    deadline = time.monotonic() + TIMEOUT_S
    while sum(sizes) < total and time.monotonic() < deadline:
        records = next_records(consumer, deadline - time.monotonic())
        if records:
            sizes.append(len(records))
    return sizes


def closed(consumer: ShareConsumer) -> None:
    consumer.commit_sync(TIMEOUT_S)  # librdkafka's close does not accept the last poll's records
    consumer.close()


# -- 1. max.poll.records: whole batches --------------------------------------------------------------------

@pytest.mark.parametrize("max_poll_records, batches, sizes", [
    ("45", [10] * 10, [50, 50]),  # the fifth batch reaches 45: it comes whole
    ("50", [10] * 10, [50, 50]),  # on a batch boundary: exactly
    ("50", [100], [100]),  # one batch of 100 for "half of 100": the whole batch, as Kafka gives it
    ("7", [3, 3, 3, 3], [9, 3]),
])
def test_a_poll_gets_whole_batches_up_to_max_poll_records(broker, request, max_poll_records, batches, sizes):
    name = f"limits-{request.node.callspec.id}".replace("[", "-").replace("]", "")
    prepare(broker, name, batches)
    consumer = share_consumer(broker.bootstrap, name, **{"max.poll.records": max_poll_records})
    try:
        got = poll_sizes(consumer, sum(batches))
    finally:
        closed(consumer)
    assert got == sizes


# -- 6. the group's record lock duration ---------------------------------------------------------------------

@pytest.mark.parametrize("value", ["999", "61000"])
def test_a_group_lock_duration_outside_the_brokers_bounds_is_refused(broker, value):
    with pytest.raises(KafkaException) as refused:
        alter_group(broker.bootstrap, f"limits-refused-{value}", "share.record.lock.duration.ms", value)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_records_not_acknowledged_come_again_after_the_groups_lock_duration(broker, request):
    """The group's lock duration is set once the consumer has fetched (its share-partition is loaded); the
    records it then receives and does not acknowledge (it does not poll: its next poll would accept them)
    come to it again, delivered twice, once the group's lock ran out."""
    name = f"limits-lock-{request.node.callspec.id}"
    prepare(broker, name, [5])
    consumer = share_consumer(broker.bootstrap, name)
    try:
        assert [m.offset() for m in next_records(consumer)] == [0, 1, 2, 3, 4]
        alter_group(broker.bootstrap, name, "share.record.lock.duration.ms", str(GROUP_LOCK_MS))
        consumer.commit_sync(TIMEOUT_S)  # accepts 0-4
        produce(broker.bootstrap, name, [5], first=5)
        first = next_records(consumer, 5)
        assert [(m.offset(), m.delivery_count()) for m in first] == [(n, 1) for n in range(5, 10)]
        received_at = time.monotonic()
        time.sleep(GROUP_LOCK_MS / 1000 + 1)  # not polling: nothing is acknowledged meanwhile
        again = next_records(consumer, 5)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(n, 2) for n in range(5, 10)]
        assert time.monotonic() - received_at < GROUP_LOCK_MS / 1000 + 6
    finally:
        closed(consumer)
