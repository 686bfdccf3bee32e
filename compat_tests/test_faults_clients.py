"""Faults on demand as confluent-kafka lives them (kbroker/faults.py): each fault is set on a broker in this
process and the stock client's own reaction is what the test looks at: its retry that succeeds, its
rebalance callbacks, its fatal error, its delivery report, its reconnect, its new lookup of the coordinator.
Every wait is bounded; nothing asserts on wall-clock time."""

from __future__ import annotations

import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kbroker.testing import running_broker

TIMEOUT_S = 30
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
            "transaction.state.log.num.partitions": 1}


@pytest.fixture(scope="module")
def running():
    with running_broker(settings=SETTINGS) as running:
        yield running


@pytest.fixture(autouse=True)
def cleared(running):
    yield
    running.faults.clear()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def wait_until(condition, what: str, step=None, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        if step is not None:
            step()
        else:
            time.sleep(0.05)


def deliver(producer, topic: str, value: bytes, **kwargs):
    """Produce one record and wait for its delivery report: (error, message)."""
    reports = []
    producer.produce(topic, value, on_delivery=lambda error, message: reports.append((error, message)), **kwargs)
    wait_until(lambda: reports, f"the delivery report of {value!r}", step=lambda: producer.poll(0.1))
    return reports[0]


def consume(running, topic: str, count: int, group_id: str | None = None, **settings) -> list:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": group_id or unique("g"),
                                         "auto.offset.reset": "earliest", **settings})
    try:
        consumer.subscribe([topic])
        messages = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append(message)
        return messages
    finally:
        consumer.close()


@pytest.mark.parametrize("error", ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"])
def test_a_producer_retries_a_refused_produce_and_succeeds(running, error):
    topic = unique("retried")
    running.create_topic(topic, partitions=1)
    fault = running.faults.fail("Produce", error, count=2, topic=topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "retry.backoff.ms": 50})
    failed, message = deliver(producer, topic, b"once")
    assert failed is None and message.offset() == 0
    assert fault.fired == 2  # refused twice, accepted at the third try
    assert [m.value() for m in consume(running, topic, 1)] == [b"once"]  # appended once: the refusals wrote nothing


def test_a_consumer_rebalances_when_the_group_is_made_to(running):
    topic, group_id = unique("rebalanced"), unique("group")
    running.create_topic(topic, partitions=2)
    events = []
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": group_id,
                                         "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic], on_assign=lambda c, parts: events.append(("assigned", len(parts))),
                           on_revoke=lambda c, parts: events.append(("revoked", len(parts))))
        wait_until(lambda: ("assigned", 2) in events, "the first assignment", step=lambda: consumer.poll(0.1))
        events.clear()
        assert running.faults.rebalance(group_id) is True
        # The next heartbeat hears REBALANCE_IN_PROGRESS: the client gives its partitions up and joins again.
        wait_until(lambda: ("assigned", 2) in events, "the assignment after the rebalance",
                   step=lambda: consumer.poll(0.1))
        assert events[0] == ("revoked", 2), events
    finally:
        consumer.close()


def test_a_fenced_transactional_producer_gets_a_fatal_error(running):
    topic, transactional_id = unique("fenced"), unique("txn")
    running.create_topic(topic, partitions=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"before the fence")
    producer.flush(TIMEOUT_S)
    epoch = running.faults.fence_producer(transactional_id)
    assert epoch >= 1
    with pytest.raises(KafkaException) as raised:
        producer.produce(topic, b"after the fence")
        producer.flush(TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    # librdkafka hears INVALID_PRODUCER_EPOCH for its next batch and raises its own fatal "fenced" error.
    assert error.fatal() and error.code() == KafkaError._FENCED, error
    # The fence aborted the open transaction: a read_committed consumer reads past it and sees none of it.
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": unique("g"),
                                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        assert high >= 2  # the record and the abort marker
        wait_until(lambda: consumer.position([TopicPartition(topic, 0)])[0].offset >= high,
                   "the consumer passing the aborted transaction", step=lambda: _no_record(consumer))
    finally:
        consumer.close()


def test_a_consumer_group_rebalance_moves_its_members_to_a_new_epoch(running):
    topic, group_id = unique("rebalanced-848"), unique("group")
    running.create_topic(topic, partitions=2)
    events = []
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": group_id,
                                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})

    def epochs():  # (group epoch, the member's epoch), read in the broker's thread
        group = running.broker.groups.coordinator.groups[group_id]
        return group.group_epoch, [member.member_epoch for member in group.members.values()]

    try:
        consumer.subscribe([topic], on_assign=lambda c, parts: events.append(("assigned", len(parts))))
        wait_until(lambda: ("assigned", 2) in events, "the first assignment", step=lambda: consumer.poll(0.1))
        before, _ = running.in_broker(epochs)
        assert running.faults.rebalance(group_id) is True
        # KIP-848 rebalances are incremental: the lone member keeps its partitions and heartbeats its way to the
        # new epoch (no callbacks for partitions that did not move).
        wait_until(lambda: running.in_broker(epochs) == (before + 1, [before + 1]), "the member at the new epoch",
                   step=lambda: consumer.poll(0.1))
    finally:
        consumer.close()


def _no_record(consumer) -> None:
    message = consumer.poll(0.1)
    assert message is None or message.error() is not None, f"read a record of an aborted transaction: {message.value()}"


def test_disk_full_fails_a_producer_without_retries_until_it_is_over(running):
    topic = unique("full")
    running.create_topic(topic, partitions=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "retries": 0,
                                         "enable.idempotence": False})
    running.faults.disk_full(True)
    failed, _ = deliver(producer, topic, b"refused")
    assert failed is not None and failed.code() == KafkaError.KAFKA_STORAGE_ERROR, failed
    running.faults.disk_full(False)
    failed, message = deliver(producer, topic, b"taken")
    assert failed is None and message.offset() == 0  # the refused one left nothing behind


def test_clients_reconnect_after_their_connections_are_closed(running):
    topic = unique("reconnected")
    running.create_topic(topic, partitions=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "client.id": "to-be-cut"})
    assert deliver(producer, topic, b"first")[0] is None
    assert running.faults.close_connections(client_id="to-be-cut") >= 1
    failed, message = deliver(producer, topic, b"second")
    assert failed is None and message.offset() == 1
    assert [m.value() for m in consume(running, topic, 2)] == [b"first", b"second"]


def test_a_consumer_finds_its_coordinator_again_after_it_moved(running):
    topic, group_id = unique("moved"), unique("group")
    running.create_topic(topic, partitions=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap})
    for value in (b"a", b"b"):
        assert deliver(producer, topic, value)[0] is None
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": group_id,
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        messages = []
        wait_until(lambda: messages, "the first record", step=lambda: _collect(consumer, messages))
        fault = running.faults.move_coordinator(group=group_id)
        # The commit is answered NOT_COORDINATOR; the client looks its coordinator up again and commits there.
        wait_until(lambda: _committed(consumer, messages[0]), "the commit after the move")
        assert fault.fired >= 1 and not fault.active
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed[0].offset == messages[0].offset() + 1
    finally:
        consumer.close()


def _collect(consumer, messages: list) -> None:
    message = consumer.poll(0.1)
    if message is not None and message.error() is None:
        messages.append(message)


def _committed(consumer, message) -> bool:
    try:
        consumer.commit(message=message, asynchronous=False)
    except KafkaException as error:  # retriable (NOT_COORDINATOR, the coordinator being looked up): again
        assert error.args[0].retriable() or error.args[0].code() in (
            KafkaError.NOT_COORDINATOR, KafkaError._WAIT_COORD, KafkaError.COORDINATOR_NOT_AVAILABLE), error
        time.sleep(0.1)
        return False
    return True


def test_a_delayed_fetch_still_brings_the_records(running):
    topic = unique("delayed")
    running.create_topic(topic, partitions=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap})
    assert deliver(producer, topic, b"late")[0] is None
    fault = running.faults.delay("Fetch", ms=500, count=2, topic=topic)
    assert [m.value() for m in consume(running, topic, 1)] == [b"late"]
    assert fault.fired == 2


def test_an_unavailable_partition_holds_a_producer_back_until_cleared(running):
    topic = unique("unavailable")
    running.create_topic(topic, partitions=1)
    fault = running.faults.make_unavailable(topic, 0)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap,
                                         "topic.metadata.refresh.interval.ms": 500})
    reports = []
    producer.produce(topic, b"waits", on_delivery=lambda error, message: reports.append((error, message)))
    wait_until(lambda: fault.fired >= 2, "the producer asking for the leaderless partition",
               step=lambda: producer.poll(0.1))
    assert reports == []  # no leader, nothing sent
    running.faults.clear()
    wait_until(lambda: reports, "the delivery once the partition is back", step=lambda: producer.poll(0.1))
    assert reports[0][0] is None and reports[0][1].offset() == 0


def test_a_transactional_producer_finds_its_coordinator_again_after_it_moved(running):
    topic, transactional_id = unique("moved-txn"), unique("txn")
    running.create_topic(topic, partitions=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"committed after the move")
    producer.flush(TIMEOUT_S)
    fault = running.faults.move_coordinator(transactional_id=transactional_id)
    producer.commit_transaction(TIMEOUT_S)  # EndTxn is answered NOT_COORDINATOR, found again, and retried
    assert fault.fired >= 1 and not fault.active
    committed = consume(running, topic, 1, **{"isolation.level": "read_committed"})
    assert [m.value() for m in committed] == [b"committed after the move"]
