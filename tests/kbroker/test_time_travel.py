"""Time on demand (kbroker/testing/time_travel.py): a broker on an OffsetClock is moved ahead, and what falls due
meanwhile happens before ``advance_time`` returns: a member's session runs out, a transaction outlives its
timeout, an idle transactional id or producer id is forgotten, old segments go, a share record's lock runs
out. Requests over real sockets (testkit.raw_client), no sleeps: each step either is due or is not."""

from __future__ import annotations

import os
import time
import uuid
from types import SimpleNamespace

import pytest
import trio

from kbroker.log.clock import SYSTEM_CLOCK, OffsetClock
from kbroker.testing import running_broker
from kbroker.testing.time_travel import advance
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.raw_client import call

SESSION_MS = 30_000
TXN_TIMEOUT_MS = 20_000
TXN_ID_EXPIRATION_MS = 3_600_000
PRODUCER_ID_EXPIRATION_MS = 600_000
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "transactional.id.expiration.ms": TXN_ID_EXPIRATION_MS,
            "producer.id.expiration.ms": PRODUCER_ID_EXPIRATION_MS, "transaction.state.log.num.partitions": 1,
            "offsets.topic.num.partitions": 1}
TIMEOUT_S = 15

JoinGroup = API_BY_NAME["JoinGroup"].request_class
SyncGroup = API_BY_NAME["SyncGroup"].request_class
Heartbeat = API_BY_NAME["Heartbeat"].request_class
FindCoordinator = API_BY_NAME["FindCoordinator"].request_class
InitProducerId = API_BY_NAME["InitProducerId"].request_class
AddPartitionsToTxn = API_BY_NAME["AddPartitionsToTxn"].request_class
EndTxn = API_BY_NAME["EndTxn"].request_class
Produce = API_BY_NAME["Produce"].request_class
ListOffsets = API_BY_NAME["ListOffsets"].request_class
DescribeProducers = API_BY_NAME["DescribeProducers"].request_class


@pytest.fixture(scope="module")
def running():
    with running_broker(settings=SETTINGS) as running:
        assert isinstance(running.broker.clock, OffsetClock)  # a test broker's clock can be moved
        yield running


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def retried(api_name: str, version: int, body, port: int, retry=(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                                                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                                                    ErrorCode.NOT_COORDINATOR)):
    """As a client: asked again while the coordinator is being made or loaded (bounded)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        answer = call(port, api_name, version, body)
        if answer.error_code not in retry or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


# -- the clock ---------------------------------------------------------------------------------------------------


def test_an_offset_clock_reads_the_hosts_clocks_plus_what_it_was_moved():
    clock = OffsetClock()
    assert abs(clock.wall_ms() - time.time() * 1000) < 1000
    clock.advance(3_600_000)
    assert clock.offset_ms == 3_600_000
    assert abs(clock.wall_ms() - 3_600_000 - time.time() * 1000) < 1000
    assert abs(clock.monotonic_ms() - 3_600_000 - time.monotonic() * 1000) < 1000
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.offset_ms == 3_600_000


def test_advance_refuses_a_broker_whose_clock_cannot_move():
    with pytest.raises(TypeError, match="OffsetClock"):
        trio.run(advance, SimpleNamespace(clock=SYSTEM_CLOCK), 1000)


# -- groups --------------------------------------------------------------------------------------------------------


def test_a_member_whose_session_runs_out_on_the_brokers_clock_leaves_its_group(running):
    group = unique("sessions")
    retried("FindCoordinator", 3, FindCoordinator(key=group, key_type=0), running.port)
    protocol = JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"")
    join = JoinGroup(group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, member_id="",
                     protocol_type="consumer", protocols=[protocol])
    joined = retried("JoinGroup", 3, join, running.port)
    assert joined.error_code == ErrorCode.NONE
    member, generation = joined.member_id, joined.generation_id
    synced = call(running.port, "SyncGroup", 3, SyncGroup(group_id=group, generation_id=generation, member_id=member,
        assignments=[SyncGroup.SyncGroupRequestAssignment(member_id=member, assignment=b"")]))
    assert synced.error_code == ErrorCode.NONE
    running.advance_time(SESSION_MS - 5_000)  # not yet: the session counts from the last heartbeat
    assert running.group(group)["state"] == "Stable"
    beat = Heartbeat(group_id=group, generation_id=generation, member_id=member)
    assert call(running.port, "Heartbeat", 3, beat).error_code == ErrorCode.NONE
    running.advance_time(SESSION_MS - 5_000)  # a whole session after the first step, but not after the heartbeat
    assert [m["member_id"] for m in running.group(group)["members"]] == [member]
    running.advance_time(5_001)
    assert running.group(group)["state"] == "Empty" and running.group(group)["members"] == []
    assert call(running.port, "Heartbeat", 3, beat).error_code == ErrorCode.UNKNOWN_MEMBER_ID


# -- transactions -------------------------------------------------------------------------------------------------


def begin(port: int, transactional_id: str, topic: str) -> tuple[int, int]:
    retried("FindCoordinator", 3, FindCoordinator(key=transactional_id, key_type=1), port)  # makes __transaction_state
    init = retried("InitProducerId", 1, InitProducerId(transactional_id=transactional_id,
                                                       transaction_timeout_ms=TXN_TIMEOUT_MS), port)
    assert init.error_code == ErrorCode.NONE
    producer = (init.producer_id, init.producer_epoch)
    added = call(port, "AddPartitionsToTxn", 3, AddPartitionsToTxn(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer[0],
        v3_and_below_producer_epoch=producer[1], v3_and_below_topics=[
            AddPartitionsToTxn.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.NONE
    return producer


def produce(running, topic: str, values, *, producer=(-1, -1), sequence=-1, transactional_id=None) -> int:
    """One batch to partition 0 (acks=all), stamped with the broker's time (the module's tests moved it ahead:
    a record stamped by the host's clock would look that much older); its error code."""
    batch = build_batch([Record(offset_delta=i, value=v) for i, v in enumerate(values)], producer_id=producer[0],
                        producer_epoch=producer[1], base_sequence=sequence, transactional=transactional_id is not None,
                        base_timestamp=running.broker.clock.wall_ms())
    port = running.port
    data = Produce.TopicProduceData
    body = Produce(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=batch)])])
    return call(port, "Produce", 9, body).responses[0].partition_responses[0].error_code


def test_a_transaction_outliving_its_timeout_is_aborted_and_its_id_forgotten_later(running):
    topic, transactional_id = unique("txn-timeout"), unique("tid")
    running.create_topic(topic)
    producer = begin(running.port, transactional_id, topic)
    assert produce(running, topic, [b"never"], producer=producer, sequence=0,
                   transactional_id=transactional_id) == ErrorCode.NONE
    running.advance_time(TXN_TIMEOUT_MS // 2)
    [ongoing] = [t for t in running.transactions() if t["transactional_id"] == transactional_id]
    assert ongoing["state"] == "Ongoing" and ongoing["partitions"] == [(topic, 0)]
    running.advance_time(TXN_TIMEOUT_MS // 2 + 1)
    [aborted] = [t for t in running.transactions() if t["transactional_id"] == transactional_id]
    # Aborted by the coordinator, markers written, and the producer fenced: its epoch was bumped.
    assert (aborted["state"], aborted["producer_id"], aborted["producer_epoch"]) == (
        "CompleteAbort", producer[0], producer[1] + 1)
    assert running.records(topic) == []
    committed = call(running.port, "EndTxn", 3, EndTxn(transactional_id=transactional_id, producer_id=producer[0],
                                                       producer_epoch=producer[1], committed=True))
    assert committed.error_code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
    running.advance_time(TXN_ID_EXPIRATION_MS - 60_000)
    assert transactional_id in [t["transactional_id"] for t in running.transactions()]
    running.advance_time(60_001)
    assert transactional_id not in [t["transactional_id"] for t in running.transactions()]


# -- producer ids and retention -----------------------------------------------------------------------------------


def producer_ids(port: int, topic: str) -> list[int]:
    answer = call(port, "DescribeProducers", 0, DescribeProducers(topics=[
        DescribeProducers.TopicRequest(name=topic, partition_indexes=[0])]))
    [partition] = answer.topics[0].partitions
    assert partition.error_code == ErrorCode.NONE
    return [state.producer_id for state in partition.active_producers]


def test_an_idle_producer_id_is_forgotten_after_producer_id_expiration_ms(running):
    topic = unique("idle-producer")
    running.create_topic(topic)
    init = call(running.port, "InitProducerId", 1, InitProducerId(transactional_id=None, transaction_timeout_ms=-1))
    producer = (init.producer_id, init.producer_epoch)
    assert produce(running, topic, [b"a", b"b"], producer=producer, sequence=0) == ErrorCode.NONE
    assert producer_ids(running.port, topic) == [producer[0]]
    running.advance_time(PRODUCER_ID_EXPIRATION_MS // 2)
    assert producer_ids(running.port, topic) == [producer[0]]
    running.advance_time(PRODUCER_ID_EXPIRATION_MS // 2 + 1)
    assert producer_ids(running.port, topic) == []
    # As Kafka: an expired producer's next batch is taken whatever its sequence, and it is known again.
    assert produce(running, topic, [b"c"], producer=producer, sequence=2) == ErrorCode.NONE
    assert producer_ids(running.port, topic) == [producer[0]]


def earliest_offset(port: int, topic: str) -> int:
    wanted = ListOffsets.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-2)  # EARLIEST
    request = ListOffsets(replica_id=-1, isolation_level=0,
                          topics=[ListOffsets.ListOffsetsTopic(name=topic, partitions=[wanted])])
    [answer] = call(port, "ListOffsets", 5, request).topics[0].partitions
    assert answer.error_code == ErrorCode.NONE
    return answer.offset


def test_segments_older_than_retention_ms_are_deleted_with_their_files_the_active_one_too(running):
    retention_ms, segment_ms = 3_600_000, 600_000
    topic = unique("retention")
    running.create_topic(topic, config={"retention.ms": str(retention_ms), "segment.ms": str(segment_ms),
                                        "message.timestamp.type": "LogAppendTime"})  # stamped by the broker's clock
    assert produce(running, topic, [b"old"]) == ErrorCode.NONE
    directory = os.path.join(running.data_dir, f"{topic}-0")
    first_segment = "00000000000000000000.log"
    running.advance_time(segment_ms)
    assert produce(running, topic, [b"new"]) == ErrorCode.NONE  # into a segment of its own: segment.ms went by
    assert sorted(name for name in os.listdir(directory) if name.endswith(".log")) == [
        first_segment, "00000000000000000001.log"]
    running.advance_time(retention_ms - segment_ms - 60_000)
    assert earliest_offset(running.port, topic) == 0  # not old enough yet
    running.advance_time(60_001)  # the first segment's record is now older than retention.ms; the second's is not
    assert earliest_offset(running.port, topic) == 1
    assert [r["value"] for r in running.records(topic)] == [b"new"]
    running.advance_time(running.broker.config.get("log.segment.delete.delay.ms"))  # file.delete.delay.ms
    assert not [name for name in os.listdir(directory) if name.startswith("00000000000000000000.")]
    # As in Kafka, the active segment goes too once all of it is old: a new one is rolled where the log ends.
    running.advance_time(retention_ms)
    assert earliest_offset(running.port, topic) == 2 and running.records(topic) == []
    assert sorted(name for name in os.listdir(directory) if name.endswith(".log")) == ["00000000000000000002.log"]
    assert produce(running, topic, [b"next"]) == ErrorCode.NONE
    assert [(r["offset"], r["value"]) for r in running.records(topic)] == [(2, b"next")]


# -- share groups --------------------------------------------------------------------------------------------------


def test_a_share_records_lock_runs_out_on_the_brokers_clock(running):
    from tests.kbroker.test_share_requests import acquired, fetch, join, prepare
    from testkit.raw_client import Connection

    name = unique("share-lock")
    topic_id = prepare(running, name, 1)
    lock_ms = running.broker.config.get("group.share.record.lock.duration.ms")
    with Connection(running.port) as connection:
        join(connection, name, "m1")
        assert acquired(fetch(connection, name, "m1", 0, topic_id)) == [(0, 0, 1)]
        running.advance_time(lock_ms // 2)
        assert acquired(fetch(connection, name, "m1", 1, topic_id, max_wait_ms=0)) == []  # still held
        running.advance_time(lock_ms // 2 + 1)
        assert acquired(fetch(connection, name, "m1", 2, topic_id, max_wait_ms=0)) == [(0, 0, 2)]  # delivered again


def test_retention_rolls_an_old_active_segment_away_and_a_restart_starts_where_it_ended(tmp_path):
    """The log underneath (kbroker/log/partition_log.py): all of the log old and committed, the active segment
    goes as in Kafka, and its successor's file is there at once, so that a restart (here without a clean
    close) starts the log at the same offset rather than at 0."""
    from kbroker.log.config import LogConfig
    from kbroker.log.partition_log import Log

    directory = str(tmp_path / "aged-0")
    log = Log.open(directory, LogConfig(retention_ms=1_000), now_ms=1_000)
    for _ in range(2):
        log.append(bytearray(build_batch([Record(value=b"x")], base_timestamp=1_000)), now_ms=1_000)
    log.flush()
    assert log.apply_retention(now_ms=10_000) == [] and log.log_start_offset == 0  # no high watermark: kept
    assert log.apply_retention(now_ms=10_000, high_watermark=1) == []  # not all of it committed: kept
    assert log.apply_retention(now_ms=10_000, high_watermark=2) == [0]
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)
    assert sorted(name for name in os.listdir(directory) if name.endswith(".log")) == ["00000000000000000002.log"]
    log.flush()
    again = Log.open(directory, LogConfig(retention_ms=1_000), now_ms=20_000)
    try:
        assert (again.log_start_offset, again.log_end_offset) == (2, 2)
        assert again.append(bytearray(build_batch([Record(value=b"y")], base_timestamp=20_000)),
                            now_ms=20_000).first_offset == 2
    finally:
        again.close()
        log.close()
