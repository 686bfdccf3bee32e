"""Fetch over a raw socket: size limits, long polls, topic ids, isolation levels."""

import socket
import threading
import time
import uuid

import pytest

from compat_tests.test_errors import call
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.records import Record, build_batch, iter_batches
from kbroker.wire.schema import API_BY_NAME

Fetch = API_BY_NAME["Fetch"].request_class
Produce = API_BY_NAME["Produce"].request_class
CreateTopics = API_BY_NAME["CreateTopics"].request_class
BATCHES = 10
VALUE = b"v" * 1000


def batch(i):
    return build_batch([Record(offset_delta=0, value=VALUE + str(i).encode())])


def produce(port, topic, partition, count=BATCHES):
    data = Produce.TopicProduceData
    for i in range(count):
        body = Produce(acks=-1, timeout_ms=5000, topic_data=[data(name=topic, partition_data=[data.PartitionProduceData(index=partition, records=batch(i))])])
        [result] = call(port, "Produce", 9, body).responses[0].partition_responses
        assert result.error_code == 0


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        topic = CreateTopics.CreatableTopic(name="filled", num_partitions=3, replication_factor=1)
        empty = CreateTopics.CreatableTopic(name="empty", num_partitions=1, replication_factor=1)
        call(running.port, "CreateTopics", 7, CreateTopics(topics=[topic, empty], timeout_ms=5000))
        for partition in range(3):
            produce(running.port, "filled", partition)
        yield running


def fetch(broker, partitions, *, version=12, topic="filled", max_bytes=2**31 - 1, partition_max_bytes=1 << 20, min_bytes=0, max_wait_ms=0,
          isolation_level=0, topic_id=None):
    wanted = [Fetch.FetchTopic.FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=partition_max_bytes) for p, offset in partitions]
    body = Fetch(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation_level,
                 topics=[Fetch.FetchTopic(topic=topic, topic_id=topic_id or uuid.UUID(int=0), partitions=wanted)])
    response = call(broker.port, "Fetch", version, body)
    return {p.partition_index: p for p in response.responses[0].partitions}


def sizes(result):
    """The sizes of the whole batches returned (a partial batch may end the data, as on Kafka)."""
    if not result.records:
        return []
    return [header.size for _, header in iter_batches(bytes(result.records), allow_partial_tail=True)]


def test_everything_fits(broker):
    results = fetch(broker, [(0, 0), (1, 0), (2, 0)])
    for result in results.values():
        assert result.error_code == 0 and result.high_watermark == BATCHES and result.log_start_offset == 0
        assert len(sizes(result)) == BATCHES


def test_partition_max_bytes_limits_each_partition_to_whole_batches(broker):
    one = sizes(fetch(broker, [(0, 0)])[0])[0]
    results = fetch(broker, [(0, 0), (1, 0), (2, 0)], partition_max_bytes=3 * one + 10)
    assert [len(sizes(r)) for r in results.values()] == [3, 3, 3]


def test_the_first_batch_comes_back_even_when_larger_than_the_limits(broker):
    """KIP-74: a consumer must always be able to make progress."""
    results = fetch(broker, [(0, 4), (1, 0)], partition_max_bytes=100, max_bytes=100)
    assert len(sizes(results[0])) == 1
    assert sizes(results[1]) == []


def test_max_bytes_caps_the_whole_response(broker):
    one = sizes(fetch(broker, [(0, 0)])[0])[0]
    results = fetch(broker, [(0, 0), (1, 0), (2, 0)], max_bytes=12 * one)
    counts = [len(sizes(r)) for r in results.values()]
    assert counts[0] == BATCHES and counts[1] == 2 and counts[2] == 0
    assert sum(sum(sizes(r)) for r in results.values()) <= 12 * one


def test_a_fetch_from_the_end_waits_for_max_wait(broker):
    started = time.monotonic()
    results = fetch(broker, [(0, BATCHES)], min_bytes=1, max_wait_ms=400)
    assert time.monotonic() - started >= 0.3  # it waited (no upper bound: this is not a timing test)
    assert sizes(results[0]) == []


def test_a_long_poll_is_answered_when_data_arrives(broker):
    def produce_later():
        time.sleep(0.3)
        produce(broker.port, "empty", 0, count=1)

    writer = threading.Thread(target=produce_later)
    writer.start()
    results = fetch(broker, [(0, 0)], topic="empty", min_bytes=1, max_wait_ms=20_000)
    writer.join()
    assert len(sizes(results[0])) == 1


def test_pipelined_long_poll_does_not_reorder_answers(broker):
    """A Fetch parked in a long poll and a Metadata behind it: answers still come back in request order."""
    fetch_body = Fetch(max_wait_ms=500, min_bytes=1, topics=[Fetch.FetchTopic(topic="filled", partitions=[
        Fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=BATCHES, partition_max_bytes=1024)])])
    metadata = API_BY_NAME["Metadata"]
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as connection:
        connection.sendall(encode_request(1, 12, 1, "t", fetch_body) + encode_request(metadata.key, 12, 2, "t", metadata.request_class(topics=None)))
        stream = connection.makefile("rb")
        first, second = (stream.read(int.from_bytes(stream.read(4), "big")) for _ in range(2))
    assert decode_response(1, 12, first)[0] == 1
    assert decode_response(metadata.key, 12, second)[0] == 2


def test_topic_ids_from_v13(broker):
    topic_id = broker.broker.image.topics["filled"].topic_id
    results = fetch(broker, [(1, 0)], version=16, topic_id=topic_id)
    assert len(sizes(results[1])) == BATCHES
    assert fetch(broker, [(0, 0)], version=16, topic_id=uuid.UUID(int=99))[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert fetch(broker, [(0, 0)], version=12, topic="nope")[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(broker, [(7, 0)])[7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_read_committed_without_transactions_reads_to_the_high_watermark(broker):
    result = fetch(broker, [(2, 0)], isolation_level=1)[2]
    assert result.last_stable_offset == result.high_watermark == BATCHES
    assert len(sizes(result)) == BATCHES and not result.aborted_transactions


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 15, 17])
def test_every_version_reads(broker, version):
    topic_id = broker.broker.image.topics["filled"].topic_id
    results = fetch(broker, [(0, 3)], version=version, topic_id=topic_id)
    assert results[0].error_code == 0 and len(sizes(results[0])) == BATCHES - 3
