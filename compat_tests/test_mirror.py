"""kbroker mirror (issue 12, point 5): 100,000 records mirrored between two single-node brokers
while the mirror process is SIGKILLed and restarted three times. The target holds every record,
each partition in the source's order once duplicates (at-least-once after a kill) are dropped,
with keys, values, headers and timestamps intact; the duplicates are counted and printed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from testkit.broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC, PARTITIONS, COUNT = "orders", 3, 100_000
KILL_AT = (15_000, 45_000, 75_000)  # target records seen before each SIGKILL
DEADLINE_S = 180
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_mirror(source: BrokerProcess, target: BrokerProcess, log_path) -> subprocess.Popen:
    with open(log_path, "a") as log:
        return subprocess.Popen([sys.executable, "-m", "kbroker.cli", "mirror", "--source", source.bootstrap,
                                 "--target", target.bootstrap, "--topics", "ord.*", "--group", "mirror-test"],
                                cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def end_offsets(broker: BrokerProcess, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    except confluent_kafka.KafkaException:
        return [0] * PARTITIONS  # not created on the target yet
    finally:
        consumer.close()


def committed(source: BrokerProcess) -> int:
    """How many source records the mirror's group has committed (every partition's offset, summed)."""
    consumer = Consumer({"bootstrap.servers": source.bootstrap, "group.id": "mirror-test"})
    try:
        offsets = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        consumer.close()
    return sum(max(position.offset, 0) for position in offsets)


def read_all(broker: BrokerProcess, topic: str, ends: list[int]) -> dict[int, list]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    found: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    while sum(map(len, found.values())) < sum(ends) and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.5):
            if message.error() is None:
                found[message.partition()].append(
                    (message.key(), message.value(), message.headers(), message.timestamp()[1]))
    consumer.close()
    return found


@pytest.mark.slow
def test_mirroring_survives_three_kills_without_losing_a_record(tmp_path):
    source, target = BrokerProcess(tmp_path / "source"), BrokerProcess(tmp_path / "target")
    source.start()
    target.start()
    mirror = None
    try:
        admin = AdminClient({"bootstrap.servers": source.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": source.bootstrap, "linger.ms": 20})
        for index in range(COUNT):
            while True:
                try:
                    producer.produce(TOPIC, f"value-{index}".encode(), key=f"key-{index}".encode(),
                                     partition=index % PARTITIONS, headers=[("index", str(index).encode())],
                                     timestamp=1_700_000_000_000 + index)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(60) == 0

        kills = 0
        deadline = time.monotonic() + DEADLINE_S
        log_path = tmp_path / "mirror.log"
        mirror = start_mirror(source, target, log_path)
        for threshold in KILL_AT:
            while sum(end_offsets(target, TOPIC)) < threshold and time.monotonic() < deadline:
                time.sleep(0.05)
            mirror.send_signal(signal.SIGKILL)
            mirror.wait(10)
            kills += 1
            log_path.write_text("")
            mirror = start_mirror(source, target, log_path)
        # The last one running (its partitions assigned), caught up and committed: then stopped cleanly.
        while "copying" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        while committed(source) < COUNT and time.monotonic() < deadline:
            time.sleep(0.2)
        mirror.send_signal(signal.SIGTERM)
        assert mirror.wait(60) == 0, log_path.read_text()
        mirror = None

        found = read_all(target, TOPIC, end_offsets(target, TOPIC))
        duplicates = 0
        for partition, records in found.items():
            expected = [index for index in range(COUNT) if index % PARTITIONS == partition]
            seen, order = set(), []
            for key, value, headers, timestamp in records:
                index = int(value.decode().split("-")[1])
                assert key == f"key-{index}".encode() and headers == [("index", str(index).encode())]
                assert timestamp == 1_700_000_000_000 + index
                if index in seen:
                    duplicates += 1
                    continue
                seen.add(index)
                order.append(index)
            assert order == expected, f"partition {partition}: lost or reordered records"
        print(f"mirrored {COUNT:,} records through {kills} SIGKILLs of the mirror: 0 lost, "
              f"{duplicates:,} duplicates (at-least-once), every partition in order")
        assert kills == 3
    finally:
        if mirror is not None and mirror.poll() is None:
            mirror.kill()
            mirror.wait(10)
        source.kill()
        target.kill()
