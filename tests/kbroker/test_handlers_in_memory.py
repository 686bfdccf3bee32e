"""Handlers called directly over in-memory parts (tests/kbroker/in_memory_parts.py): no Broker, no listener,
no socket. Produce and Fetch go to real partitions over real logs in tmp_path, whose fsyncs run when the
test says; Metadata reads an image; OffsetCommit, OffsetFetch and FindCoordinator go through a real
GroupShell whose offsets partition is one of those real partitions. The live-broker tests (test_server.py,
compat_tests/) cover the same APIs over the wire."""

from __future__ import annotations

import uuid

import pytest
import trio
import trio.testing

from kbroker.group.shell import OFFSETS_TOPIC, GroupShell
from kbroker.handlers import Deferred, fetch, find_coordinator, offset_commit, offset_fetch, produce
from kbroker.log.clock import FakeClock
from kbroker.metadata.image import PartitionState, TopicImage
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch, iter_batches
from kbroker.wire.records import decode_records
from kbroker.wire.schema import API_BY_NAME
from tests.kbroker.in_memory_parts import (HOST, PORT, THIS_NODE, MemoryFlusher, MemoryNode, context, metadata_answer,
                                           replicas_on_disk, topic_led_here)

pytestmark = pytest.mark.trio

TOPIC_ID = uuid.UUID(int=7)
ProduceRequest = API_BY_NAME["Produce"].request_class
FetchRequest = API_BY_NAME["Fetch"].request_class
MetadataRequest = API_BY_NAME["Metadata"].request_class
OffsetCommitRequest = API_BY_NAME["OffsetCommit"].request_class
OffsetFetchRequest = API_BY_NAME["OffsetFetch"].request_class
FindCoordinatorRequest = API_BY_NAME["FindCoordinator"].request_class


@pytest.fixture
def flusher() -> MemoryFlusher:
    return MemoryFlusher()


@pytest.fixture
def node(tmp_path, flusher) -> MemoryNode:
    """This node leads both partitions of "events" and is their only replica."""
    return MemoryNode(topic_led_here("events", 2, TOPIC_ID), open_replica=replicas_on_disk(tmp_path, flusher))


def batch(*values: bytes) -> bytes:
    return build_batch([Record(offset_delta=i, value=value) for i, value in enumerate(values)])


async def produce_to(node, records: bytes, *, acks: int = 1, index: int = 0):
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        data(name="events", partition_data=[data.PartitionProduceData(index=index, records=records)])])
    return await produce.handle(node, context("Produce", 9), request)


async def fetch_from(node, offset: int, *, index: int = 0, version: int = 13):
    topic = FetchRequest.FetchTopic
    wanted = topic.FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20)
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        topic(topic="events", topic_id=TOPIC_ID, partitions=[wanted])])
    response = await fetch.handle(node, context("Fetch", version), request)
    [answered] = response.responses
    [partition] = answered.partitions
    return partition


def values_of(records) -> list[bytes]:
    data = records if isinstance(records, bytes) else records.read()  # a log's file region, read here
    return [record.value for position, _ in iter_batches(data) for record in decode_records(data, position)[1]]


# -- Produce ------------------------------------------------------------------------------------------------


async def test_produce_with_acks_1_appends_at_once_and_answers_once_the_records_are_visible(node, flusher):
    """A lone in-sync replica's high watermark is its fsynced end: acks=1 is answered after the fsync the
    append started (DESIGN rule 12), and the second append is not held behind the first's answer."""
    flusher.held = True
    first = await produce_to(node, batch(b"a", b"b"))
    second = await produce_to(node, batch(b"c"))
    assert isinstance(first, Deferred) and isinstance(second, Deferred)
    partition = node.partition("events", 0)
    assert partition.log.log_end_offset == 3 and partition.high_watermark == 0  # both appended, not yet visible
    async with trio.open_nursery() as nursery:
        nursery.start_soon(first.ready)
        nursery.start_soon(second.ready)
        await trio.testing.wait_all_tasks_blocked()
        flusher.release()
    assert partition.high_watermark == 3
    [first_result], [second_result] = (answer.response.responses[0].partition_responses for answer in (first, second))
    assert (first_result.error_code, first_result.base_offset) == (ErrorCode.NONE, 0)
    assert (second_result.error_code, second_result.base_offset) == (ErrorCode.NONE, 2)


async def test_produce_with_acks_all_is_answered_once_the_batch_is_committed(node, flusher):
    flusher.held = True
    answer = await produce_to(node, batch(b"a"), acks=-1)
    assert isinstance(answer, Deferred)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer.ready)
        await trio.testing.wait_all_tasks_blocked()
        assert node.partition("events", 0).high_watermark == 0  # still waiting for its fsync
        flusher.release()
    [result] = answer.response.responses[0].partition_responses
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
    assert node.partition("events", 0).high_watermark == 1


async def test_a_batch_whose_crc_does_not_match_is_a_corrupt_message_and_nothing_is_written(node):
    corrupt = bytearray(batch(b"value"))
    corrupt[-1] ^= 0xFF  # a byte of the record, under the CRC
    [result] = (await produce_to(node, bytes(corrupt))).responses[0].partition_responses
    assert result.error_code == ErrorCode.CORRUPT_MESSAGE
    assert node.partition("events", 0).log.log_end_offset == 0


async def test_produce_with_acks_0_gets_no_answer(node):
    assert await produce_to(node, batch(b"a"), acks=0) is None
    assert node.partition("events", 0).log.log_end_offset == 1


# -- Fetch --------------------------------------------------------------------------------------------------


async def test_fetch_reads_back_what_was_produced_with_the_high_watermark(node):
    await produce_to(node, batch(b"a", b"b"))
    await produce_to(node, batch(b"c"))
    answer = await fetch_from(node, 0)
    assert answer.error_code == ErrorCode.NONE
    assert (answer.high_watermark, answer.last_stable_offset, answer.log_start_offset) == (3, 3, 0)
    assert values_of(answer.records) == [b"a", b"b", b"c"]
    assert values_of((await fetch_from(node, 2)).records) == [b"c"]  # the batch holding offset 2
    assert values_of((await fetch_from(node, 0, index=1)).records) == []  # the other partition is empty


async def test_fetch_stops_at_the_high_watermark(node, flusher):
    await produce_to(node, batch(b"a"))
    flusher.held = True
    await produce_to(node, batch(b"b"))  # appended, not yet durable: consumers do not see it
    answer = await fetch_from(node, 0)
    assert answer.high_watermark == 1 and values_of(answer.records) == [b"a"]
    flusher.release()
    assert values_of((await fetch_from(node, 0)).records) == [b"a", b"b"]


async def test_fetching_past_the_log_end_is_out_of_range(node):
    await produce_to(node, batch(b"a"))
    assert (await fetch_from(node, 1)).error_code == ErrorCode.NONE  # the log end: nothing yet, no error
    answer = await fetch_from(node, 5)
    assert answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # as Kafka answers a consumer's partition in error: no offsets (the differential suite compares it)
    assert (answer.high_watermark, answer.last_stable_offset, answer.log_start_offset) == (-1, -1, -1)


async def test_fetch_by_topic_name_before_version_13(node):
    await produce_to(node, batch(b"a"))
    assert values_of((await fetch_from(node, 0, version=12)).records) == [b"a"]


# -- Metadata -----------------------------------------------------------------------------------------------


def metadata_request(*names: str | None, auto_create: bool = False):
    topics = None if names == (None,) else [MetadataRequest.MetadataRequestTopic(name=name) for name in names]
    return MetadataRequest(topics=topics, allow_auto_topic_creation=auto_create)


async def test_metadata_names_this_node_as_broker_and_controller_and_the_partitions(tmp_path):
    followed = PartitionState(1, leader=2, leader_epoch=4, replicas=(2, 1, 3), isr=(2, 1))
    events = TopicImage("events", TOPIC_ID, (topic_led_here("events").partitions[0], followed))
    response = await metadata_answer(MemoryNode(events), metadata_request(None))
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(THIS_NODE, HOST, PORT)]
    assert (response.cluster_id, response.controller_id) == ("in-memory", THIS_NODE)
    [topic] = response.topics
    assert (topic.error_code, topic.name, topic.topic_id, topic.is_internal) == (
        ErrorCode.NONE, "events", TOPIC_ID, False)
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in topic.partitions] == [(0, THIS_NODE, 0, [THIS_NODE], [THIS_NODE]), (1, 2, 4, [2, 1, 3], [2, 1])]


async def test_metadata_of_an_unknown_topic_creates_nothing_unless_asked(node):
    response = await metadata_answer(node, metadata_request("events", "missing"))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("events", ErrorCode.NONE), ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert node.auto_created == []


async def test_metadata_asks_for_auto_creation_when_the_client_and_the_broker_allow_it(tmp_path):
    refusing = MemoryNode(settings={"auto.create.topics.enable": False})
    response = await metadata_answer(refusing, metadata_request("new", auto_create=True))
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and refusing.auto_created == []
    allowing = MemoryNode()
    response = await metadata_answer(allowing, metadata_request("new", auto_create=True))
    assert allowing.auto_created == ["new"]  # asked of the controller; not in the image yet, so unknown for now
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_metadata_leaves_out_topics_the_principal_may_not_describe(tmp_path):
    node = MemoryNode(topic_led_here("events"), topic_led_here("secret"), refused={"secret"})
    everything = await metadata_answer(node, metadata_request(None))
    assert [t.name for t in everything.topics] == ["events"]
    named = await metadata_answer(node, metadata_request("secret"))
    assert named.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


# -- a group: OffsetCommit, OffsetFetch and FindCoordinator through the group shell ---------------------------


@pytest.fixture
async def group_node(tmp_path, flusher, nursery) -> MemoryNode:
    """A node leading "events" and the one partition of __consumer_offsets, its GroupShell running."""
    node = MemoryNode(topic_led_here("events", 2, TOPIC_ID), topic_led_here(OFFSETS_TOPIC),
                      open_replica=replicas_on_disk(tmp_path, flusher),
                      settings={"offsets.topic.num.partitions": 1})
    await start_shell(node, nursery)
    return node


async def start_shell(node: MemoryNode, nursery) -> None:
    node.groups = GroupShell(node, FakeClock())
    await nursery.start(node.groups.run)
    await trio.testing.wait_all_tasks_blocked()  # the offsets partition loaded
    assert node.groups.coordinator.loaded == {0}


async def commit(node, group_id: str, offsets: dict[int, int], topic: str = "events"):
    partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    request = OffsetCommitRequest(group_id=group_id, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            partition(partition_index=index, committed_offset=offset, committed_metadata="m")
            for index, offset in offsets.items()])])
    response = await offset_commit.handle(node, context("OffsetCommit", 8), request)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def committed(node, group_id: str, indexes: list[int]):
    group = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest(groups=[group(group_id=group_id, topics=[
        group.OffsetFetchRequestTopics(name="events", partition_indexes=indexes)])])
    [answer] = (await offset_fetch.handle(node, context("OffsetFetch", 8), request)).groups
    assert answer.error_code == ErrorCode.NONE
    return {p.partition_index: (p.committed_offset, p.metadata, p.error_code) for t in answer.topics
            for p in t.partitions}


async def test_offsets_committed_are_fetched_and_survive_a_reload_of_the_offsets_partition(group_node, nursery):
    assert await commit(group_node, "readers", {0: 42}) == {("events", 0): ErrorCode.NONE}
    assert await committed(group_node, "readers", [0, 1]) == {0: (42, "m", ErrorCode.NONE), 1: (-1, "", ErrorCode.NONE)}
    assert group_node.partition(OFFSETS_TOPIC, 0).high_watermark > 0  # the commit is a durable record

    await start_shell(group_node, nursery)  # a new coordinator, rebuilt from the offsets partition's records
    assert await committed(group_node, "readers", [0]) == {0: (42, "m", ErrorCode.NONE)}


async def test_a_commit_to_an_unknown_partition_is_refused_and_kept_from_the_group(group_node):
    assert await commit(group_node, "readers", {0: 1, 7: 1}) == {
        ("events", 0): ErrorCode.NONE, ("events", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert await commit(group_node, "readers", {0: 1}, topic="missing") == {
        ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert set(group_node.groups.coordinator.offsets.of_group("readers")) == {("events", 0)}


async def test_find_coordinator_names_this_node_for_a_group(group_node):
    request = FindCoordinatorRequest(key_type=find_coordinator.GROUP, coordinator_keys=["readers"])
    [found] = (await find_coordinator.handle(group_node, context("FindCoordinator", 4), request)).coordinators
    assert (found.error_code, found.key, found.node_id, found.host, found.port) == (
        ErrorCode.NONE, "readers", THIS_NODE, HOST, PORT)
