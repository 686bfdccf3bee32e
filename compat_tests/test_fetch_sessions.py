"""Fetch sessions (KIP-227) over real sockets: a full request opens a session, incremental ones name only what
changed and are answered with only the partitions that have something new; the session errors; the cache's
bound; and the clients that use sessions (Kafka's Java consumer, kafka-python) reading through them."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Producer

from compat_tests.java_harness import java_harness  # noqa: F401  (the session fixture)
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.raw_client import Connection, call, request

Fetch = API_BY_NAME["Fetch"].request_class
NO_TOPIC_ID = uuid.UUID(int=0)
PARTITIONS = 4


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        yield running


@pytest.fixture
def topic(broker, request):
    name = f"sessions-{request.node.name}".replace("[", "-").replace("]", "")[:200]
    broker.create_topic(name, partitions=PARTITIONS)
    for index in range(PARTITIONS):
        produce(broker, name, index)
    return name


def produce(broker, topic: str, partition: int, value: bytes = b"v" * 100) -> None:
    data = request("Produce").TopicProduceData
    body = request("Produce", acks=-1, timeout_ms=5000, topic_data=[data(name=topic, partition_data=[
        data.PartitionProduceData(index=partition, records=build_batch([Record(offset_delta=0, value=value)]))])])
    [result] = call(broker.port, "Produce", 9, body).responses[0].partition_responses
    assert result.error_code == ErrorCode.NONE


class Session:
    """One client's fetch session on a kept connection, at Fetch v12 (topic names) or v13+ (topic ids)."""

    def __init__(self, broker, topic: str, version: int) -> None:
        self.connection = Connection(broker.port)
        self.topic, self.version = topic, version
        self.topic_id = broker.broker.image.topics[topic].topic_id
        self.session_id, self.epoch = 0, 0

    def fetch(self, offsets: dict[int, int], *, forgotten=(), epoch=None, session_id=None, max_bytes=1 << 20,
              max_wait_ms=0, min_bytes=0, version=None):
        """Send the partitions in ``offsets`` (index -> fetch offset) and ``forgotten`` indexes; the answer,
        and the session's id and next epoch as the answer leaves them."""
        wanted = [Fetch.FetchTopic.FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20)
                  for index, offset in offsets.items()]
        topics = [Fetch.FetchTopic(topic=self.topic, topic_id=self.topic_id, partitions=wanted)] if wanted else []
        gone = [Fetch.ForgottenTopic(topic=self.topic, topic_id=self.topic_id, partitions=list(forgotten))] if forgotten else []
        body = Fetch(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                     session_id=self.session_id if session_id is None else session_id,
                     session_epoch=self.epoch if epoch is None else epoch, topics=topics, forgotten_topics_data=gone)
        answer = self.connection.call("Fetch", version or self.version, body)
        if answer.error_code == ErrorCode.NONE and answer.session_id:
            self.session_id, self.epoch = answer.session_id, self.epoch + 1
        return answer

    def close(self) -> None:
        self.connection.close()


def carried(answer) -> dict[int, object]:
    return {partition.partition_index: partition for topic in answer.responses for partition in topic.partitions}


@pytest.fixture(params=[12, 17], ids=["v12-names", "v17-ids"])
def session(broker, topic, request):
    opened = Session(broker, topic, request.param)
    yield opened
    opened.close()


def test_a_full_request_opens_a_session_and_incremental_ones_carry_only_what_changed(broker, topic, session):
    first = session.fetch({index: 0 for index in range(PARTITIONS)})
    assert first.error_code == ErrorCode.NONE and first.session_id != 0
    assert sorted(carried(first)) == list(range(PARTITIONS))
    assert all(partition.records for partition in carried(first).values())

    caught_up = session.fetch({index: 1 for index in range(PARTITIONS)})  # new offsets: nothing else changed
    assert (caught_up.error_code, caught_up.session_id, carried(caught_up)) == (ErrorCode.NONE, session.session_id, {})
    idle = session.fetch({})  # names nothing: the session's offsets stand
    assert carried(idle) == {}

    produce(broker, topic, 2)
    news = session.fetch({})
    assert list(carried(news)) == [2]
    partition = carried(news)[2]
    assert partition.records and partition.high_watermark == 2
    if session.version >= 13:
        assert news.responses[0].topic_id == session.topic_id
    else:
        assert news.responses[0].topic == topic


def test_a_forgotten_partition_is_no_longer_answered(broker, topic, session):
    session.fetch({index: 1 for index in range(PARTITIONS)})
    session.fetch({}, forgotten=[0])
    produce(broker, topic, 0)
    produce(broker, topic, 1)
    assert list(carried(session.fetch({}))) == [1]


def test_session_errors_are_answered_with_no_partitions(broker, topic, session):
    session.fetch({index: 1 for index in range(PARTITIONS)})
    unknown = session.fetch({0: 1}, session_id=session.session_id ^ 0x5A5A, epoch=1)
    assert (unknown.error_code, unknown.session_id, unknown.responses) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    wrong_epoch = session.fetch({0: 1}, epoch=session.epoch + 5)
    assert (wrong_epoch.error_code, wrong_epoch.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])
    other_version = 13 if session.version < 13 else 12  # a session keyed by names asked by id, or the other way
    mismatch = session.fetch({}, version=other_version)
    assert mismatch.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert session.fetch({}).error_code == ErrorCode.NONE  # none of those moved the session on


def test_the_final_epoch_closes_the_session_and_answers_in_full(broker, topic, session):
    session.fetch({index: 1 for index in range(PARTITIONS)})
    opened = session.session_id
    closing = session.fetch({0: 0, 1: 1}, epoch=-1)
    assert (closing.error_code, closing.session_id) == (ErrorCode.NONE, 0)
    assert sorted(carried(closing)) == [0, 1]  # sessionless: every partition named is answered
    assert broker.broker.fetch_sessions.session(opened) is None
    assert session.fetch({}, session_id=opened, epoch=2).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_session_long_polls_on_partitions_the_request_does_not_name(broker, topic, session):
    session.fetch({index: 1 for index in range(PARTITIONS)})
    threading.Timer(0.3, produce, (broker, topic, 3)).start()
    started = time.monotonic()
    answer = session.fetch({}, max_wait_ms=10_000, min_bytes=1)
    assert list(carried(answer)) == [3] and carried(answer)[3].records
    assert time.monotonic() - started < 9, "the fetch waited out max_wait_ms: the produce did not wake it"


def test_partitions_that_returned_records_go_to_the_back_of_the_session(broker, topic):
    """With room for one partition's data per answer, a session reads its partitions in turn, not the first
    one over and over (Kafka's rotation for fetch.max.bytes fairness)."""
    for _ in range(3):
        for index in range(PARTITIONS):
            produce(broker, topic, index, b"r" * 2000)
    session = Session(broker, topic, 17)
    try:
        offsets = {index: 1 for index in range(PARTITIONS)}
        served = []
        answer = session.fetch(dict(offsets), max_bytes=1)  # the first batch is always given whole
        for _ in range(8):
            [index] = [index for index, partition in carried(answer).items() if partition.records]
            served.append(index)
            offsets[index] += 1
            answer = session.fetch({index: offsets[index]}, max_bytes=1)
        # The session opens in the request's order, as Kafka's does (no rotation at opening): partition 0 again,
        # then each in turn.
        assert served == [0, 0, 1, 2, 3, 0, 1, 2]
    finally:
        session.close()


def test_a_full_cache_opens_no_session(tmp_path):
    with running_broker(str(tmp_path), settings={"max.incremental.fetch.session.cache.slots": 1}) as full:
        full.create_topic("bounded", partitions=2)
        first, second = (Session(full, "bounded", 17) for _ in range(2))
        try:
            assert first.fetch({0: 0, 1: 0}).session_id != 0
            refused = second.fetch({0: 0, 1: 0})
            assert (refused.error_code, refused.session_id) == (ErrorCode.NONE, 0)  # answered in full, sessionless
            assert sorted(carried(refused)) == [0, 1]
            assert first.fetch({}).error_code == ErrorCode.NONE  # the first session was kept
        finally:
            first.close()
            second.close()


def test_kafka_python_reads_through_a_session(broker):
    kafka = pytest.importorskip("kafka")
    topic = "sessions-kafka-python"
    broker.create_topic(topic, partitions=40)
    cache = broker.broker.fetch_sessions
    incremental_before = cache.incremental_requests
    produced = _produce_spread(broker, topic, partitions=range(0, 40, 4), count=400)
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                   consumer_timeout_ms=5000, fetch_max_wait_ms=100)
    try:
        consumer.assign([kafka.TopicPartition(topic, index) for index in range(40)])
        late = threading.Thread(target=_produce_spread, args=(broker, topic, range(1, 40, 8), 200, "late"))
        received = []
        for message in consumer:
            received.append((message.partition, message.value))
            if len(received) == 10:
                late.start()
            if len(received) >= 600:
                break
    finally:
        consumer.close()
        late.join(10)
    expected = produced + _spread(range(1, 40, 8), 200, "late")
    assert sorted(received) == sorted(expected)
    assert cache.incremental_requests > incremental_before


def test_the_java_consumer_reads_through_a_session(broker, java_harness):
    topic = "sessions-java"
    broker.create_topic(topic, partitions=200)
    cache = broker.broker.fetch_sessions
    opened_before, incremental_before = cache.opened, cache.incremental_requests
    _produce_spread(broker, topic, partitions=range(0, 200, 20), count=1000)
    late = threading.Timer(1.0, _produce_spread, (broker, topic, range(5, 200, 40), 500, "late"))
    late.start()
    try:
        run = java_harness.run("consume", broker.bootstrap, topic, "1500")
    finally:
        late.join(15)
    assert run.one("consumed")["count"] == 1500, run.stderr[-2000:]
    assert cache.opened > opened_before and cache.incremental_requests > incremental_before


def _spread(partitions, count: int, prefix: str = "early") -> list[tuple[int, bytes]]:
    partitions = list(partitions)
    return [(partitions[i % len(partitions)], f"{prefix}-{i}".encode()) for i in range(count)]


def _produce_spread(broker, topic: str, partitions, count: int, prefix: str = "early") -> list[tuple[int, bytes]]:
    records = _spread(partitions, count, prefix)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for index, value in records:
        producer.produce(topic, value, partition=index)
    assert producer.flush(10) == 0
    return records


def test_a_moved_log_start_is_answered_at_the_next_incremental_fetch(broker, topic, session):
    """DeleteRecords moves no high watermark, but marks the partition for the session's next read."""
    for _ in range(2):
        produce(broker, topic, 1)
    session.fetch({index: 3 if index == 1 else 1 for index in range(PARTITIONS)})
    assert carried(session.fetch({})) == {}
    deleted = request("DeleteRecords", timeout_ms=5000, topics=[request("DeleteRecords").DeleteRecordsTopic(
        name=topic, partitions=[request("DeleteRecords").DeleteRecordsTopic.DeleteRecordsPartition(
            partition_index=1, offset=2)])])
    [result] = call(broker.port, "DeleteRecords", 2, deleted).topics[0].partitions
    assert result.error_code == ErrorCode.NONE
    found = carried(session.fetch({}))
    assert list(found) == [1] and found[1].log_start_offset == 2


def test_a_deleted_topic_is_answered_at_the_next_incremental_fetch(broker, topic, session):
    session.fetch({index: 1 for index in range(PARTITIONS)})
    deleted = call(broker.port, "DeleteTopics", 6, request("DeleteTopics", timeout_ms=5000, topics=[
        request("DeleteTopics").DeleteTopicState(name=topic, topic_id=NO_TOPIC_ID)]))
    assert deleted.responses[0].error_code == ErrorCode.NONE
    answer = session.fetch({}, max_wait_ms=2000, min_bytes=1)
    errors = {partition.error_code for partition in carried(answer).values()}
    assert sorted(carried(answer)) == list(range(PARTITIONS))
    assert errors <= {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID}, errors


def test_a_closed_or_evicted_session_leaves_no_marks_on_its_partitions(tmp_path):
    with running_broker(str(tmp_path), settings={"max.incremental.fetch.session.cache.slots": 1}) as small:
        small.create_topic("marks", partitions=3)
        replicas = [small.broker.partition("marks", index) for index in range(3)]
        first = Session(small, "marks", 17)
        try:
            first.fetch({index: 0 for index in range(3)})
            assert all(len(replica.advance_watchers._events) == 1 for replica in replicas)
            first.fetch({}, epoch=-1)  # closed
            assert all(len(replica.advance_watchers._events) == 0 for replica in replicas)
            first.session_id, first.epoch = 0, 0
            first.fetch({0: 0})
            assert len(replicas[0].advance_watchers._events) == 1
            bigger = Session(small, "marks", 17)  # more partitions: worth evicting the first for, once it is stale
            small.broker.fetch_sessions.eviction_ms = 0
            time.sleep(0.01)
            first.fetch({})  # used after its creation: evictable from now on
            assert bigger.fetch({index: 0 for index in range(3)}).session_id != 0
            assert small.broker.fetch_sessions.session(first.session_id) is None
            assert [len(replica.advance_watchers._events) for replica in replicas] == [1, 1, 1]  # the newcomer's
            bigger.close()
        finally:
            first.close()
