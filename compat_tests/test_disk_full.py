"""A full disk (issue 26), for real: the broker's data directory on a 24 MiB tmpfs.

An idempotent acks=all producer fills it. Produce is then answered KAFKA_STORAGE_ERROR (what librdkafka
retries until its message timeout), while fetch and metadata go on; every acknowledged record reads
back. DeleteRecords frees half of the partition, and writes are acknowledged again, with no restart.
Filled again and SIGKILLed, the broker starts on the full disk and every acknowledged record it still
holds is there. The broker keeps log.dir.min.free.bytes (2 MiB here) free for its own writes: the
metadata quorum's records at the restart, checkpoints (kbroker/log/free_space.py). A disk another process
filled to the last byte refuses the start in one line naming the directory, and the broker starts with every
acknowledged record once space is freed.

Mounting needs root (CI runs as root); elsewhere the test says why it skips.
"""

from __future__ import annotations

import subprocess
import time

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.broker_process import BrokerProcess
from testkit.raw_client import call

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "fill"
VALUE_BYTES = 10_000
SETTINGS = ("log.segment.bytes=1048576", "log.retention.check.interval.ms=500", "log.segment.delete.delay.ms=0",
            "log.dir.min.free.bytes=2097152")
Produce = API_BY_NAME["Produce"].request_class


@pytest.fixture
def small_disk(tmp_path):
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 24 MiB tmpfs for the data directory (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(bootstrap: str, first: int, limit: int) -> tuple[list[int], dict[str, int]]:
    """Produce numbered records until the broker refuses them; (numbers acknowledged, errors by name)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                         "linger.ms": 5, "message.timeout.ms": 4000})
    acknowledged, errors = [], {}

    def delivered(error, message):
        if error is None:
            acknowledged.append(int(message.key()))
        else:
            errors[error.name()] = errors.get(error.name(), 0) + 1

    padding = b"x" * VALUE_BYTES
    for number in range(first, first + limit):
        while True:
            try:
                producer.produce(TOPIC, padding, key=str(number).encode(), on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if errors:
            break
    producer.flush(30)
    return acknowledged, errors


def read_all(bootstrap: str) -> tuple[int, set[int]]:
    """(log start offset, the record numbers held from it to the high watermark)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, low)])
        numbers, offset = set(), low
        deadline = time.monotonic() + 60
        while offset < high and time.monotonic() < deadline:
            for message in consumer.consume(500, 1):
                assert message.error() is None, message.error()
                numbers.add(int(message.key()))
                offset = message.offset() + 1
        assert offset >= high, f"read up to {offset} of {high}"
        return low, numbers
    finally:
        consumer.close()


def produce_until_refused(port: int, first: int) -> tuple[list[int], int]:
    """Single records until one is refused, as the broker answers them (librdkafka only reports its own
    timeout): (numbers acknowledged, the refusal's error code). At most 4 MiB, past the room left."""
    data = Produce.TopicProduceData
    acknowledged = []
    for number in range(first, first + 4 * 1024 * 1024 // VALUE_BYTES):
        body = Produce(acks=-1, timeout_ms=5000, topic_data=[data(name=TOPIC, partition_data=[
            data.PartitionProduceData(index=0, records=build_batch([
                Record(key=str(number).encode(), value=b"y" * VALUE_BYTES)]))])])
        error_code = call(port, "Produce", 9, body).responses[0].partition_responses[0].error_code
        if error_code != ErrorCode.NONE:
            return acknowledged, error_code
        acknowledged.append(number)
    return acknowledged, ErrorCode.NONE


def test_a_full_disk_refuses_writes_with_a_kafka_error_and_recovers_without_a_restart(small_disk):
    broker = BrokerProcess(small_disk / "data", None, *SETTINGS)
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([confluent_kafka.admin.NewTopic(TOPIC, 1)])[TOPIC].result(10)
        started = time.monotonic()
        acknowledged, errors = fill(broker.bootstrap, 0, 5000)
        filled_s = time.monotonic() - started
        assert acknowledged and errors, (len(acknowledged), errors)
        last_ones, refusal = produce_until_refused(broker.port, 50_000)
        assert refusal == ErrorCode.KAFKA_STORAGE_ERROR
        acknowledged += last_ones
        assert broker.process.poll() is None
        low, held = read_all(broker.bootstrap)  # fetch and metadata go on
        assert low == 0 and set(acknowledged) <= held

        high = len(held)
        freed_at = time.monotonic()
        deleted = admin.delete_records([TopicPartition(TOPIC, 0, high // 2)])
        for future in deleted.values():
            future.result(10)
        resumed = []
        while not resumed and time.monotonic() - freed_at < 60:
            resumed, _ = fill(broker.bootstrap, 100_000, 1)
        resumed_s = time.monotonic() - freed_at
        assert resumed, "no write acknowledged within a minute of DeleteRecords"

        refilled, errors = fill(broker.bootstrap, 200_000, 5000)
        assert refilled and errors, (len(refilled), errors)
        broker.kill()
        restarted_at = time.monotonic()
        broker.start()  # on the full disk
        restart_s = time.monotonic() - restarted_at
        low, held = read_all(broker.bootstrap)
        kept = [number for number in acknowledged if number >= low] + resumed + refilled
        assert set(kept) <= held
        assert produce_until_refused(broker.port, 300_000)[1] == ErrorCode.KAFKA_STORAGE_ERROR
        print(f"\nfilled 24 MiB in {filled_s:.1f} s ({len(acknowledged)} acknowledged, then {errors}); writes "
              f"acknowledged again {resumed_s:.1f} s after DeleteRecords; restarted on the full disk in "
              f"{restart_s:.1f} s with all {len(kept)} acknowledged records from offset {low} held")
    finally:
        broker.kill()


def test_a_disk_another_process_filled_to_the_last_byte_refuses_the_start_in_one_line(small_disk):
    """The broker's own writes stop log.dir.min.free.bytes short of the end; another process's need not. Then
    the metadata quorum cannot write its state at the start: the broker says so in one line naming the
    directory and exits non-zero, and once space is freed it starts with every acknowledged record."""
    broker = BrokerProcess(small_disk / "data", None, *SETTINGS)
    broker.start()
    try:
        acknowledged, errors = fill(broker.bootstrap, 0, 200)
        assert len(acknowledged) == 200 and not errors, errors
        assert broker.stop() == 0
    finally:
        broker.kill()
    ballast = small_disk / "ballast"
    with open(ballast, "wb") as file:  # to the last byte
        block = b"\0" * 65536
        try:
            while True:
                file.write(block)
                file.flush()
        except OSError:
            pass
    ended = subprocess.run(broker.command(), capture_output=True, text=True, timeout=60)
    lines = ended.stderr.strip().splitlines()
    print(f"\nstart on a disk filled to the last byte: exit {ended.returncode}, {lines[-1]!r}")
    assert ended.returncode == 1 and "Traceback" not in ended.stderr + ended.stdout
    assert lines[-1] == f"kbroker: cannot start: No space left on device (in {broker.data_dir}): free some space there"
    ballast.unlink()
    broker.start()
    try:
        assert set(acknowledged) <= read_all(broker.bootstrap)[1]
    finally:
        broker.kill()
