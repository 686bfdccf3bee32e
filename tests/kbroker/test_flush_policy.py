"""Kafka's flush policy on real logs: flush.messages (log.flush.interval.messages) and flush.ms
(log.flush.interval.ms, looked at every log.flush.scheduler.interval.ms), with the fsyncs on the
flusher thread, never on trio's (Kafka: UnifiedLog.append, LogManager.flushDirtyLogs)."""

import os
import threading

import pytest
import trio

from kbroker.log.clock import FakeClock
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import FlushJob, Log
from kbroker.replication.flusher import Flusher, flush_dirty_logs
from kbroker.replication.replica import Partition
from kbroker.testing import running_broker
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.raw_client import call

Produce = API_BY_NAME["Produce"].request_class
CreateTopics = API_BY_NAME["CreateTopics"].request_class


def batch(count: int = 1) -> bytearray:
    return bytearray(build_batch([Record(offset_delta=i, value=b"v") for i in range(count)]))


def partition_of(tmp_path, flusher: Flusher, clock: FakeClock | None = None, **config) -> Partition:
    clock = clock or FakeClock()
    log = Log.open(str(tmp_path / "p-0"), LogConfig(**config), now_ms=clock.wall_ms())
    return Partition("p", 0, log, flusher, 0, node_id=1, replicas=(1,), isr=(1,), leader=1, clock=clock)


@pytest.fixture
def fsync_threads(monkeypatch):
    """The name of the thread of every fsync made from here on."""
    names = []
    real_fsync = os.fsync

    def recording_fsync(descriptor):
        names.append(threading.current_thread().name)
        return real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return names


async def wait_recovery_point(partition: Partition, offset: int) -> None:
    with trio.fail_after(10):
        while partition.log.recovery_point < offset:
            await trio.sleep(0.005)


def test_an_append_reaching_flush_messages_asks_for_a_flush_and_makes_none_itself(tmp_path, fsync_threads):
    log = Log.open(str(tmp_path / "p-0"), LogConfig(flush_messages=3))
    assert not log.append(batch(2)).flush_messages_reached
    assert log.append(batch(1)).flush_messages_reached
    assert (log.recovery_point, log.unflushed_messages, fsync_threads) == (0, 3, [])  # the caller fsyncs, elsewhere
    log.flush()
    assert (log.recovery_point, log.unflushed_messages) == (3, 0)
    assert not log.append(batch(1)).flush_messages_reached  # counted from the last flush again
    log.close()


def test_flush_ms_says_when_unflushed_data_is_due(tmp_path):
    now_ms = 1_700_000_000_000
    log = Log.open(str(tmp_path / "p-0"), LogConfig(flush_ms=60_000), now_ms=now_ms)  # counted from the opening
    assert not log.flush_due(now_ms + 120_000)  # nothing unflushed
    log.append(batch(1))
    assert not log.flush_due(now_ms + 59_999)
    assert log.flush_due(now_ms + 60_000)
    job = log.begin_flush()
    job.run()
    log.complete_flush(job, now_ms + 60_000)
    assert not log.flush_due(now_ms + 120_000)  # nothing unflushed
    log.append(batch(1))
    assert not log.flush_due(now_ms + 119_999)  # counted from the last flush
    assert log.flush_due(now_ms + 120_000)
    log.close()


@pytest.mark.trio
async def test_flush_ms_counts_on_the_partitions_clock(tmp_path):
    flusher, clock = Flusher(), FakeClock()
    partition = partition_of(tmp_path, flusher, clock, flush_ms=60_000)
    for expected_end in (2, 3):  # from the log's opening, then from the flush before
        partition.append(batch(expected_end - partition.log.log_end_offset))
        clock.advance(59_999)
        partition.flush_if_due()
        assert partition._flushing is None  # not due yet: no fsync started
        clock.advance(1)
        partition.flush_if_due()
        await wait_recovery_point(partition, expected_end)
    flusher.stop()


@pytest.mark.trio
async def test_flush_messages_flushes_on_the_flusher_thread_without_anyone_waiting(tmp_path, fsync_threads):
    flusher = Flusher()
    leader = partition_of(tmp_path / "leader", flusher, flush_messages=3)
    follower = partition_of(tmp_path / "follower", flusher, flush_messages=3)
    leader.append(batch(2))
    assert not leader.flush_policy_waits(1)
    leader.append(batch(1))  # the third unflushed message
    assert leader.flush_policy_waits(2)
    await wait_recovery_point(leader, 3)
    assert not leader.flush_policy_waits(2)
    follower.append_replicated(batch(3))  # a follower's append counts too
    await wait_recovery_point(follower, 3)
    assert fsync_threads and set(fsync_threads) == {"kbroker-flusher"}
    flusher.stop()


@pytest.mark.trio
async def test_the_scheduler_flushes_data_older_than_flush_ms(tmp_path, fsync_threads):
    flusher = Flusher()
    partition = partition_of(tmp_path, flusher, flush_ms=0)
    partition.append(batch(5))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(flush_dirty_logs, lambda: [partition], 10)
        await wait_recovery_point(partition, 5)
        nursery.cancel_scope.cancel()
    assert set(fsync_threads) == {"kbroker-flusher"}
    flusher.stop()


@pytest.mark.trio
async def test_with_neither_set_appends_wait_for_the_callers_flush(tmp_path):
    flusher = Flusher()
    partition = partition_of(tmp_path, flusher)
    result = partition.append(batch(1000))
    partition.flush_if_due()
    assert not result.flush_messages_reached and not partition.flush_policy_waits(999)
    assert partition.log.recovery_point == 0 and partition._flushing is None  # nothing started an fsync
    partition.start_flush(result.last_offset)  # as the produce handler does
    await wait_recovery_point(partition, 1000)
    flusher.stop()


def test_the_broker_setting_reaches_topics_and_acks_1_is_answered_after_that_fsync(monkeypatch):
    """Kafka fsyncs in the append that reaches flush.messages, so even acks=1 is answered after it; and on a
    lone in-sync replica (here, a single node) every acks=1 answer waits for its fsync, the one that makes
    its records visible (DESIGN rule 12), whatever flush.messages says."""
    gate = threading.Event()  # open: the fsyncs of starting and creating topics go through
    gate.set()
    real_run = FlushJob.run
    threads = set()

    def slow_run(job):
        threads.add(threading.current_thread().name)
        gate.wait(10)
        real_run(job)

    monkeypatch.setattr(FlushJob, "run", slow_run)
    with running_broker(settings={"log.flush.interval.messages": 2}) as running:
        call(running.port, "CreateTopics", 7, CreateTopics(topics=[
            CreateTopics.CreatableTopic(name="every-two", num_partitions=1, replication_factor=1),
            CreateTopics.CreatableTopic(name="default", num_partitions=1, replication_factor=1, configs=[
                CreateTopics.CreatableTopic.CreatableTopicConfig(name="flush.messages", value=str(2**63 - 1))]),
        ], timeout_ms=5000))

        def produce(topic: str, count: int):
            data = Produce.TopicProduceData
            body = Produce(acks=1, timeout_ms=5000, topic_data=[
                data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=batch(count))])])
            [result] = call(running.port, "Produce", 9, body).responses[0].partition_responses
            assert result.error_code == 0
            return running.broker.partition(topic, 0).log

        for topic, count, fsynced in (("default", 2, 2), ("every-two", 1, 1), ("every-two", 1, 2)):
            gate.clear()  # from here the flusher thread holds every fsync until the gate opens
            threads.clear()
            threading.Timer(0.3, gate.set).start()
            assert produce(topic, count).recovery_point == fsynced  # answered once fsynced
            assert threads == {"kbroker-flusher"}  # not the broker's trio thread, which serves on meanwhile
