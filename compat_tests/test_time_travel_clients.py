"""Time on demand as stock clients live it (kbroker/testing/time_travel.py): the broker's clock is moved ahead
while confluent-kafka's own timers keep real time, and each client reacts as it would to that much time gone
by at a Kafka broker: a consumer whose session ran out loses its partitions and joins again, a transactional
producer whose transaction outlived transaction.timeout.ms is fenced and its records never reach a
read_committed consumer, old segments are gone from ListOffsets and from the disk, an idle producer id is no
longer described (kafka-python's admin client asks). No test sleeps for the broker's timeouts."""

from __future__ import annotations

import os
import time
import uuid

import confluent_kafka
import pytest

from kbroker.testing import running_broker

TIMEOUT_S = 30
CLIENT_SESSION_MS = 120_000  # a classic member's session, as the client asks for it
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
            "transaction.state.log.num.partitions": 1,
            # KIP-848 members heartbeat at the interval the broker gives them: short, so the test is quick
            "group.consumer.heartbeat.interval.ms": 500}


@pytest.fixture(scope="module")
def running():
    with running_broker(settings=SETTINGS) as running:  # on an OffsetClock, as every test broker
        yield running


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def poll_until(consumer, condition, what: str, timeout_s: float = TIMEOUT_S) -> list:
    """Poll (serving the client's callbacks) until ``condition()``; the messages polled meanwhile."""
    messages = []
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            messages.append(message)
    return messages


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_consumer_whose_session_ran_out_at_the_broker_loses_its_partitions_and_rejoins(running, protocol):
    topic, group_id = unique("sessions"), unique(f"group-{protocol}")
    running.create_topic(topic, partitions=2)
    settings = {"bootstrap.servers": running.bootstrap, "group.id": group_id, "group.protocol": protocol,
                "auto.offset.reset": "earliest"}
    if protocol == "classic":  # the session is the client's to ask for: long, so only the broker's time moves
        settings |= {"session.timeout.ms": CLIENT_SESSION_MS, "heartbeat.interval.ms": 300}
    events = []
    consumer = confluent_kafka.Consumer(settings)
    try:
        consumer.subscribe([topic], on_assign=lambda c, parts: events.append(("assigned", len(parts))),
                           on_revoke=lambda c, parts: events.append(("revoked", len(parts))),
                           on_lost=lambda c, parts: events.append(("lost", len(parts))))
        poll_until(consumer, lambda: ("assigned", 2) in events, "the first assignment")
        before = running.group(group_id)
        [member] = before["members"]
        session_ms = CLIENT_SESSION_MS if protocol == "classic" else running.broker.config.get(
            "group.consumer.session.timeout.ms")
        events.clear()
        running.advance_time(session_ms + 1_000)
        assert member["member_id"] not in [m["member_id"] for m in running.group(group_id)["members"]]  # gone at once
        # The client hears it at its next heartbeat (UNKNOWN_MEMBER_ID): its partitions are lost, not revoked
        # in order, and it joins again as a new member and gets them back.
        poll_until(consumer, lambda: ("assigned", 2) in events, "the assignment after the session ran out")
        assert events[0] == ("lost", 2), events
        after = wait_for_members(running, group_id)
        if protocol == "classic":  # a new member id; a KIP-848 member keeps its own (KIP-1082), at epoch 0 again
            assert after["members"][0]["member_id"] != member["member_id"]
        assert after["members"][0]["assignment"] == {topic: [0, 1]}
    finally:
        consumer.close()


def wait_for_members(running, group_id: str) -> dict:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        seen = running.group(group_id)
        if seen["state"] == "Stable" and seen["members"] and seen["members"][0]["assignment"]:
            return seen
        assert time.monotonic() < deadline, seen
        time.sleep(0.05)


def test_a_transaction_that_outlived_its_timeout_is_aborted_and_its_commit_fails(running):
    topic, transactional_id = unique("txn-timeout"), unique("tid")
    running.create_topic(topic)
    timeout_ms = 60_000
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "transactional.id": transactional_id,
                                         "transaction.timeout.ms": timeout_ms})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for n in range(3):
        producer.produce(topic, b"doomed-%d" % n)
    assert producer.flush(TIMEOUT_S) == 0
    running.advance_time(timeout_ms + 1_000)
    [state] = [t for t in running.transactions() if t["transactional_id"] == transactional_id]
    assert state["state"] == "CompleteAbort"
    with pytest.raises(confluent_kafka.KafkaException) as failed:
        producer.commit_transaction(TIMEOUT_S)
    error = failed.value.args[0]
    # Its epoch was bumped by the abort: the coordinator answers PRODUCER_FENCED, as Kafka's does, and librdkafka
    # makes that a fatal error (the application must close the producer and make a new one).
    assert error.fatal() and error.code() == confluent_kafka.KafkaError._FENCED, error
    assert running.records(topic) == []
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": unique("reader"),
                                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                         "enable.partition.eof": True})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        read, at_end = [], []
        deadline = time.monotonic() + TIMEOUT_S
        while not at_end:
            assert time.monotonic() < deadline, "no end of partition"
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None and message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                at_end.append(message.offset())
            elif message.error() is None:
                read.append(message.value())
        assert read == [] and at_end[0] == 4  # three records and the ABORT marker, none of them read
    finally:
        consumer.close()


def test_records_older_than_retention_ms_are_gone_from_list_offsets_and_the_disk(running):
    retention_ms, segment_ms = 3_600_000, 600_000
    topic = unique("retention")
    # LogAppendTime: records are stamped by the broker's clock, so those written after a move are younger.
    running.create_topic(topic, config={"retention.ms": retention_ms, "segment.ms": segment_ms,
                                        "message.timestamp.type": "LogAppendTime"})
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap})
    producer.produce(topic, b"old", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    running.advance_time(segment_ms)
    producer.produce(topic, b"new", partition=0)  # into a new segment: segment.ms went by
    assert producer.flush(TIMEOUT_S) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": unique("reader")})
    try:
        partition = confluent_kafka.TopicPartition(topic, 0)
        assert consumer.get_watermark_offsets(partition, TIMEOUT_S) == (0, 2)
        running.advance_time(retention_ms - segment_ms + 1_000)
        assert consumer.get_watermark_offsets(partition, TIMEOUT_S) == (1, 2)
        assert [r["value"] for r in running.records(topic)] == [b"new"]
        running.advance_time(60_000)  # file.delete.delay.ms
        directory = os.path.join(running.data_dir, f"{topic}-0")
        assert not [name for name in os.listdir(directory) if name.startswith("00000000000000000000.")]
        # The active segment goes too once all of it is old, as at Kafka 4.4 (which rolls a new one first).
        running.advance_time(retention_ms)
        assert consumer.get_watermark_offsets(partition, TIMEOUT_S) == (2, 2)
    finally:
        consumer.close()
    assert running.records(topic) == []


def test_an_idle_producer_id_expires_and_the_producer_goes_on(running):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    topic = unique("idle")
    running.create_topic(topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "enable.idempotence": True})
    producer.produce(topic, b"first", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    admin = KafkaAdminClient(bootstrap_servers=running.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        def producers() -> list[int]:
            [state] = admin.describe_producers([TopicPartition(topic, 0)]).values()
            return [active.producer_id for active in state.active_producers]

        [producer_id] = producers()
        running.advance_time(running.broker.config.get("producer.id.expiration.ms") + 1_000)
        assert producers() == []
        # As at Kafka: the producer's next batch is taken (an unknown producer may start at any sequence).
        delivered = []
        producer.produce(topic, b"second", partition=0, on_delivery=lambda error, message: delivered.append(error))
        assert producer.flush(TIMEOUT_S) == 0 and delivered == [None]
        assert producers() == [producer_id]
    finally:
        admin.close()
    assert [r["value"] for r in running.records(topic)] == [b"first", b"second"]
