"""A failed fsync takes the log directory offline (issue 26, fsyncgate): the acks=all produce waiting for
it is never answered with success, the fsync is never tried again, and from then on the directory's
partitions answer KAFKA_STORAGE_ERROR to Produce, Fetch and ListOffsets, while the node goes on answering.
Handlers called directly over in-memory parts (tests/kbroker/in_memory_parts.py) and real logs in tmp_path,
whose fsyncs a MemoryFlusher fails with EIO on demand."""

from __future__ import annotations

import errno
import uuid

import pytest
import trio

from kbroker.handlers import fetch, list_offsets, produce
from kbroker.log.offline import LogDirOffline
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from tests.kbroker.in_memory_parts import (FSYNC_FAILED, MemoryFlusher, MemoryNode, answer_of, context, metadata_answer,
                                           replicas_on_disk, topic_led_here)

pytestmark = pytest.mark.trio

TOPIC_ID = uuid.UUID(int=2626)
ProduceRequest = API_BY_NAME["Produce"].request_class
FetchRequest = API_BY_NAME["Fetch"].request_class
ListOffsetsRequest = API_BY_NAME["ListOffsets"].request_class
MetadataRequest = API_BY_NAME["Metadata"].request_class


class CountingFlusher(MemoryFlusher):
    """A MemoryFlusher that counts the fsync jobs it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.submitted = 0

    def submit(self, job, done) -> None:
        self.submitted += 1
        super().submit(job, done)


@pytest.fixture
def flusher() -> CountingFlusher:
    return CountingFlusher()


@pytest.fixture
def node(tmp_path, flusher) -> MemoryNode:
    return MemoryNode(topic_led_here("events", 2, TOPIC_ID), topic_led_here("other"),
                      open_replica=replicas_on_disk(tmp_path, flusher))


def batch(*values: bytes) -> bytes:
    return build_batch([Record(offset_delta=i, value=value) for i, value in enumerate(values)])


def produce_request(records: bytes, *, acks: int, topic: str = "events", index: int = 0):
    data = ProduceRequest.TopicProduceData
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=index, records=records)])])


async def produce_to(node, records: bytes, *, acks: int = -1, topic: str = "events", index: int = 0):
    request = produce_request(records, acks=acks, topic=topic, index=index)
    [result] = (await answer_of(produce, node, "Produce", 9, request)).responses[0].partition_responses
    return result


async def fetch_from(node, offset: int = 0, index: int = 0):
    topic = FetchRequest.FetchTopic
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[topic(
        topic="events", topic_id=TOPIC_ID,
        partitions=[topic.FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    [answered] = (await fetch.handle(node, context("Fetch", 13), request)).responses
    return answered.partitions[0]


async def list_offsets_of(node, index: int = 0):
    topic = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[topic(
        name="events", partitions=[topic.ListOffsetsPartition(partition_index=index, timestamp=-1)])])
    answer = await answer_of(list_offsets, node, "ListOffsets", 7, request)
    return answer.topics[0].partitions[0]


async def acks_all_answer(node, records: bytes):
    """The answer to an acks=all produce whose fsync fails: its error code, or the LogDirOffline that
    its wait raised (the produce handler lets it out: the connection closes, no answer is sent)."""
    try:
        return (await produce_to(node, records)).error_code
    except LogDirOffline:
        return "no answer"


async def test_a_waiting_acks_all_produce_is_never_answered_with_success(node, flusher):
    assert (await produce_to(node, batch(b"kept"))).error_code == ErrorCode.NONE
    assert flusher.submitted == 1
    flusher.failing = FSYNC_FAILED
    assert await acks_all_answer(node, batch(b"lost?")) in (ErrorCode.KAFKA_STORAGE_ERROR, "no answer")
    assert flusher.submitted == 2  # the one fsync that failed, and no second try
    partition = node.partition("events", 0)
    assert partition.high_watermark == 1 and partition.log.recovery_point == 1  # "lost?" was never committed
    assert isinstance(node.log_dir_offline, LogDirOffline)


async def test_a_waiting_acks_all_produce_is_answered_kafka_storage_error(node, flusher):
    flusher.failing = FSYNC_FAILED
    assert (await produce_to(node, batch(b"lost?"))).error_code == ErrorCode.KAFKA_STORAGE_ERROR


async def test_waiters_of_the_failed_fsync_all_fail_and_no_fsync_follows(node, flusher):
    """Many produces share the failing fsync: each gets the error; the fsyncs they asked for meanwhile
    (which would succeed over pages the kernel may have dropped) never run."""
    flusher.held = True
    flusher.failing = FSYNC_FAILED
    answers = []
    async with trio.open_nursery() as nursery:
        for value in (b"a", b"b", b"c"):
            nursery.start_soon(lambda value=value: _collect(answers, acks_all_answer(node, batch(value))))
        await trio.testing.wait_all_tasks_blocked()
        assert flusher.submitted == 1  # one fsync under way, the others wait to follow it
        flusher.release()
    assert len(answers) == 3 and ErrorCode.NONE not in answers
    assert flusher.submitted == 1
    assert node.partition("events", 0).high_watermark == 0


async def _collect(answers: list, answer) -> None:
    answers.append(await answer)


async def test_after_a_failed_fsync_the_directory_answers_kafka_storage_error_and_the_node_goes_on(node, flusher):
    assert (await produce_to(node, batch(b"a"))).error_code == ErrorCode.NONE
    flusher.failing = FSYNC_FAILED
    await acks_all_answer(node, batch(b"b"))
    flusher.failing = None
    submitted = flusher.submitted
    for acks in (-1, 1, 0):
        answer = await answer_of(produce, node, "Produce", 9, produce_request(batch(b"c"), acks=acks))
        if acks == 0:
            assert answer is None
        else:
            assert answer.responses[0].partition_responses[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    for index in (0, 1):  # the whole directory, not only the partition whose fsync failed
        assert (await fetch_from(node, 0, index)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert (await list_offsets_of(node, index)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert (await produce_to(node, batch(b"d"), topic="other")).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert flusher.submitted == submitted  # nothing more fsynced, nothing more appended
    assert node.partition("events", 0).log.log_end_offset == 2
    answer = await metadata_answer(node, MetadataRequest(topics=None))
    assert {topic.name for topic in answer.topics} == {"events", "other"}  # still answering


async def test_an_unknown_partition_is_still_unknown_when_the_directory_is_offline(node, flusher):
    """Kafka's order: the topic's existence before the partition's directory."""
    flusher.failing = FSYNC_FAILED
    await acks_all_answer(node, batch(b"b"))
    assert (await produce_to(node, batch(b"c"), index=5)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_out_of_descriptors_at_the_fsync_is_not_a_failed_fsync(node, flusher):
    """A flush whose file could not be opened never ran its fsync: its waiters get the error, the
    directory stays online and the next flush (a first fsync of those pages) acknowledges them."""
    partition = node.partition("events", 0)
    partition.append(bytearray(batch(b"a")))
    flusher.failing = OSError(errno.EMFILE, "Too many open files")
    with pytest.raises(OSError) as raised:
        await partition.wait_durable(0)
    assert raised.value.errno == errno.EMFILE
    assert node.log_dir_offline is None
    flusher.failing = None
    assert (await produce_to(node, batch(b"b"))).error_code == ErrorCode.NONE
    assert node.partition("events", 0).high_watermark == 2
