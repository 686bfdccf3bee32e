"""The broker enforces retention and compacts compacted topics in the background: retention by time on a
FakeClock (kbroker/replication/log_maintenance.py over real logs, no sleeps), compaction through a broker."""

from __future__ import annotations

import time
from types import SimpleNamespace

import confluent_kafka
import confluent_kafka.admin as admin
import pytest
import trio

from kbroker.log.clock import FakeClock
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from kbroker.replication.log_maintenance import LogMaintenance
from kbroker.testing import running_broker
from kbroker.wire.records import Record, build_batch

FAST = {"log.retention.check.interval.ms": 100, "log.cleaner.backoff.ms": 100}
RETENTION_MS = 300


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


def expiring_log(tmp_path, clock: FakeClock, **config) -> Log:
    """A delete topic's log of 1,000-byte segments: 20 batches of 300 bytes, each stamped (CreateTime) 10 ms
    after the one before, the clock moving with them."""
    log = Log.open(str(tmp_path / "expiring-0"), LogConfig(segment_bytes=1000, retention_ms=RETENTION_MS, **config),
                   now_ms=clock.wall_ms())
    for _ in range(20):
        log.append(bytearray(build_batch([Record(value=b"x" * 300)], base_timestamp=clock.wall_ms())),
                   now_ms=clock.wall_ms())
        clock.advance(10)
    return log


def maintenance_of(log: Log, clock: FakeClock, offline=lambda: False) -> LogMaintenance:
    config = SimpleNamespace(log_retention_check_interval_ms=100, log_cleaner_enable=False, log_cleaner_backoff_ms=100)
    return LogMaintenance(SimpleNamespace(logs={("expiring", 0): log}), config, clock, offline=offline)


@pytest.mark.trio
async def test_old_segments_of_a_delete_topic_go_after_retention_ms_on_the_maintenance_clock(tmp_path):
    clock = FakeClock()
    log = expiring_log(tmp_path, clock)
    maintenance = maintenance_of(log, clock)
    newest_of_first = log.segments[0].max_timestamp
    assert len(log.segments) > 3 and clock.wall_ms() - newest_of_first < RETENTION_MS
    await maintenance.enforce_retention()
    assert log.log_start_offset == 0  # nothing is old yet
    clock.advance(newest_of_first + RETENTION_MS - clock.wall_ms())
    await maintenance.enforce_retention()
    assert log.log_start_offset == 0  # the first segment's newest record is exactly retention.ms old
    clock.advance(1)
    await maintenance.enforce_retention()
    assert log.log_start_offset == log.segments[0].base_offset > 0  # that segment went, and only what was as old
    clock.advance(RETENTION_MS)
    await maintenance.enforce_retention()
    assert len(log.segments) == 1 and log.log_start_offset == log.segments[0].base_offset  # never the active one
    assert log.log_end_offset == 20
    log.close()


@pytest.mark.trio
async def test_nothing_is_deleted_on_a_log_directory_gone_offline(tmp_path, autojump_clock):
    """After a failed fsync (issue 26) what is on disk is what a restart recovers from: retention leaves it,
    as Kafka stops its retention and cleaner on an offline directory."""
    clock = FakeClock()
    log = expiring_log(tmp_path, clock)
    offline = [False]
    maintenance = maintenance_of(log, clock, offline=lambda: offline[0])
    clock.advance(60_000)
    offline[0] = True
    await maintenance.enforce_retention()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(maintenance.run)
        await trio.sleep(1)
        assert len(log.segments) > 3 and log.log_start_offset == 0
        nursery.cancel_scope.cancel()
    offline[0] = False  # (a restart, in a broker)
    await maintenance.enforce_retention()
    assert len(log.segments) == 1
    log.close()


@pytest.mark.trio
async def test_the_retention_rounds_run_every_check_interval_and_read_the_clock_they_are_given(tmp_path,
                                                                                                autojump_clock):
    """Paced by trio's clock (jumping here), deciding by the maintenance clock (a FakeClock)."""
    clock = FakeClock()
    log = expiring_log(tmp_path, clock)
    maintenance = maintenance_of(log, clock)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(maintenance.run)
        await trio.sleep(10.03)  # a hundred rounds, and the FakeClock has not moved: nothing is old
        assert len(log.segments) > 3 and log.log_start_offset == 0
        clock.advance(60_000)
        await trio.sleep(0.05)
        assert len(log.segments) > 3  # not until the next round, at 10.1 s
        await trio.sleep(0.05)
        assert len(log.segments) == 1
        nursery.cancel_scope.cancel()
    log.close()


def test_a_compacted_topic_keeps_the_latest_value_per_key():
    with running_broker(settings=FAST) as broker:
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        # internal.segment.bytes: Kafka's own way for tests below segment.bytes' floor of 1 MiB
        topic = admin.NewTopic("compacted", 1, config={"internal.segment.bytes": "1000", "cleanup.policy": "compact",
                                                          # any dirty segment is cleaned: with Kafka's 0.5, a round
                                                          # run mid-produce can leave a last dirty segment under half
                                                          # of the cleanable bytes, never cleaned (a slow machine)
                                                          "min.cleanable.dirty.ratio": "0.01"})
        client.create_topics([topic])["compacted"].result(10)
        produce(broker.bootstrap, "compacted", [(b"k%d" % (n % 3), b"v%d" % n + b"." * 200) for n in range(30)])
        log = broker.broker.logs.logs[("compacted", 0)]
        wait_for(lambda: sum(s.size for s in log.segments[:-1]) < 1500, 10, "closed segments compacted")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "c",
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition("compacted", 0, 0)])
        latest, read = {}, 0
        deadline = time.monotonic() + 10
        # Until the log end (offset 29) is read, not until a first empty poll: the cleaned segments hold empty
        # batches, one fetch each, and a loaded machine can take longer than one poll over them.
        while time.monotonic() < deadline and read < 30:
            for message in consumer.consume(100, 0.5):
                latest[message.key()] = message.value().split(b".")[0]
                read = message.offset() + 1
        consumer.close()
        assert latest == {b"k0": b"v27", b"k1": b"v28", b"k2": b"v29"}
