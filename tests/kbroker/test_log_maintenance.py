"""The broker enforces retention and compacts compacted topics in the background."""

from __future__ import annotations

import time

import confluent_kafka
import confluent_kafka.admin as admin

from kbroker.testing import running_broker

FAST = {"log.retention.check.interval.ms": 100, "log.cleaner.backoff.ms": 100}


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout_s} s")


def produce(bootstrap: str, topic: str, pairs) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.size": 600})
    for key, value in pairs:
        producer.produce(topic, value, key=key, partition=0)
        producer.flush(10)  # one batch each: segments of 1,000 bytes roll every few
    assert producer.flush(10) == 0


def test_old_segments_of_a_delete_topic_go_after_retention_ms():
    with running_broker(settings=FAST) as broker:
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = admin.NewTopic("expiring", 1, config={"segment.bytes": "1000", "retention.ms": "300"})
        client.create_topics([topic])["expiring"].result(10)
        produce(broker.bootstrap, "expiring", [(None, b"x" * 300) for _ in range(20)])
        log = broker.broker.logs.logs[("expiring", 0)]
        assert len(log.segments) > 3
        wait_for(lambda: len(log.segments) == 1, 10, "expired segments deleted")
        assert log.log_start_offset == log.segments[0].base_offset > 0
        low, high = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "w"}).get_watermark_offsets(
            confluent_kafka.TopicPartition("expiring", 0), timeout=10)
        assert (low, high) == (log.log_start_offset, 20)


def test_a_compacted_topic_keeps_the_latest_value_per_key():
    with running_broker(settings=FAST) as broker:
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = admin.NewTopic("compacted", 1, config={"segment.bytes": "1000", "cleanup.policy": "compact"})
        client.create_topics([topic])["compacted"].result(10)
        produce(broker.bootstrap, "compacted", [(b"k%d" % (n % 3), b"v%d" % n + b"." * 200) for n in range(30)])
        log = broker.broker.logs.logs[("compacted", 0)]
        wait_for(lambda: sum(s.size for s in log.segments[:-1]) < 1500, 10, "closed segments compacted")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "c",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition("compacted", 0, 0)])
        latest = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            messages = consumer.consume(100, 0.5)
            if not messages:
                break
            for message in messages:
                latest[message.key()] = message.value().split(b".")[0]
        consumer.close()
        assert latest == {b"k0": b"v27", b"k1": b"v28", b"k2": b"v29"}
