"""Faults on demand (kbroker/faults.py): what they match, and that each answer has the shape Kafka sends,
seen over raw sockets with kbroker's own codec against a broker in this process."""

from __future__ import annotations

import socket
import struct

import pytest

from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME

Produce = API_BY_NAME["Produce"].request_class
Fetch = API_BY_NAME["Fetch"].request_class
ListOffsets = API_BY_NAME["ListOffsets"].request_class
OffsetCommit = API_BY_NAME["OffsetCommit"].request_class


class Raw:
    """One connection speaking exact versions, with a client id of its own."""

    def __init__(self, port: int, client_id: str = "faults-test") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.client_id = client_id
        self.correlation_id = 0
        self.call("ApiVersions", 3)

    def send(self, api: str, version: int, **fields) -> int:
        self.correlation_id += 1
        body = API_BY_NAME[api].request_class(**fields)
        self.sock.sendall(encode_request(API_BY_NAME[api].key, version, self.correlation_id, self.client_id, body))
        return self.correlation_id

    def receive(self, api: str, version: int):
        size = struct.unpack(">i", self._read(4))[0]
        return decode_response(API_BY_NAME[api].key, version, self._read(size))

    def call(self, api: str, version: int, **fields):
        sent = self.send(api, version, **fields)
        correlation_id, response = self.receive(api, version)
        assert correlation_id == sent
        return response

    def closed(self) -> bool:
        """Whether the broker closed the connection (waits for it, bounded by the socket's timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        running.create_topic("orders", partitions=2)
        running.create_topic("audit", partitions=1)
        yield running


@pytest.fixture
def raw(broker):
    connection = Raw(broker.port)
    yield connection
    connection.close()
    broker.faults.clear()


def produce(raw: Raw, topics: dict[str, list[int]], *, acks: int = -1, version: int = 9):
    batch = bytes(build_batch([Record(offset_delta=0, value=b"v")]))
    data = [Produce.TopicProduceData(name=name, partition_data=[
        Produce.TopicProduceData.PartitionProduceData(index=index, records=batch) for index in indexes])
        for name, indexes in topics.items()]
    return raw.call("Produce", version, acks=acks, timeout_ms=5000, topic_data=data)


def end_offset(raw: Raw, topic: str, partition: int) -> int:
    Topic = ListOffsets.ListOffsetsTopic
    answer = raw.call("ListOffsets", 7, replica_id=-1, topics=[Topic(name=topic, partitions=[
        Topic.ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
    return answer.topics[0].partitions[0].offset


def by_partition(answer) -> dict[tuple[str, int], object]:
    return {(topic.name, partition.index): partition for topic in answer.responses
            for partition in topic.partition_responses}


def test_a_faulted_partition_is_refused_and_not_appended_while_the_others_are_served(broker, raw):
    before = end_offset(raw, "orders", 0), end_offset(raw, "orders", 1), end_offset(raw, "audit", 0)
    fault = broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", topic="orders", partition=0)
    answer = by_partition(produce(raw, {"orders": [0, 1], "audit": [0]}))
    refused = answer[("orders", 0)]
    assert (refused.error_code, refused.base_offset, refused.log_append_time_ms, refused.log_start_offset) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1)
    assert answer[("orders", 1)].error_code == answer[("audit", 0)].error_code == ErrorCode.NONE
    assert (end_offset(raw, "orders", 0), end_offset(raw, "orders", 1), end_offset(raw, "audit", 0)) == (
        before[0], before[1] + 1, before[2] + 1)
    assert fault.fired == 1 and not fault.active
    assert by_partition(produce(raw, {"orders": [0]}))[("orders", 0)].error_code == ErrorCode.NONE  # count=1 used
    assert all(server.faults is None for server in broker.broker.servers)  # the hook is gone with the fault


def test_produce_by_topic_id_is_matched_by_name(broker, raw):
    topic_id = broker.broker.image.topics["audit"].topic_id
    batch = bytes(build_batch([Record(offset_delta=0, value=b"v")]))
    broker.faults.fail("Produce", 56, topic="audit")  # KAFKA_STORAGE_ERROR by number
    answer = raw.call("Produce", 13, acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        topic_id=topic_id, partition_data=[Produce.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    [topic] = answer.responses
    assert topic.topic_id == topic_id and topic.partition_responses[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR


def test_count_none_lasts_until_cleared(broker, raw):
    fault = broker.faults.fail("Produce", "REQUEST_TIMED_OUT", count=None, topic="audit")
    for _ in range(3):
        assert by_partition(produce(raw, {"audit": [0]}))[("audit", 0)].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert fault.fired == 3 and fault.remaining is None
    broker.faults.clear()
    assert by_partition(produce(raw, {"audit": [0]}))[("audit", 0)].error_code == ErrorCode.NONE
    assert fault.fired == 3


def test_acks_0_produce_refused_closes_the_connection(broker, raw):
    broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", topic="audit")
    batch = bytes(build_batch([Record(offset_delta=0, value=b"v")]))
    raw.send("Produce", 9, acks=0, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name="audit", partition_data=[Produce.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    assert raw.closed()


def test_fetch_answers_the_faulted_partition_with_the_error_and_serves_the_other(broker, raw):
    produce(raw, {"orders": [1]})
    broker.faults.fail("Fetch", "NOT_LEADER_OR_FOLLOWER", topic="orders", partition=0)
    Topic = Fetch.FetchTopic
    answer = raw.call("Fetch", 12, max_wait_ms=10_000, min_bytes=1 << 30, topics=[Topic(topic="orders", partitions=[
        Topic.FetchPartition(partition=index, fetch_offset=0, partition_max_bytes=1 << 20) for index in (0, 1)])])
    assert answer.error_code == ErrorCode.NONE
    partitions = {p.partition_index: p for topic in answer.responses for p in topic.partitions}
    refused = partitions[0]
    assert (refused.error_code, refused.high_watermark, refused.aborted_transactions) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, None)
    assert partitions[1].error_code == ErrorCode.NONE and partitions[1].high_watermark >= 1


def test_a_fetch_session_partition_the_request_does_not_name_is_faulted_too(broker, raw):
    Topic = Fetch.FetchTopic
    opened = raw.call("Fetch", 12, max_wait_ms=0, min_bytes=0, session_id=0, session_epoch=0, topics=[Topic(
        topic="audit", partitions=[Topic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    assert opened.session_id != 0
    fault = broker.faults.fail("Fetch", "FENCED_LEADER_EPOCH", topic="audit")
    incremental = raw.call("Fetch", 12, max_wait_ms=10_000, min_bytes=1 << 30, session_id=opened.session_id,
                           session_epoch=1, topics=[])
    [topic] = incremental.responses
    assert (topic.topic, [(p.partition_index, p.error_code) for p in topic.partitions]) == (
        "audit", [(0, ErrorCode.FENCED_LEADER_EPOCH)])
    assert fault.fired == 1


def test_create_topics_refuses_the_faulted_topic_and_creates_the_other(broker, raw):
    Creatable = API_BY_NAME["CreateTopics"].request_class.CreatableTopic
    broker.faults.fail("CreateTopics", "POLICY_VIOLATION", topic="refused-topic")
    answer = raw.call("CreateTopics", 7, timeout_ms=10_000, topics=[
        Creatable(name=name, num_partitions=1, replication_factor=1) for name in ("refused-topic", "created-topic")])
    assert {topic.name: topic.error_code for topic in answer.topics} == {
        "refused-topic": ErrorCode.POLICY_VIOLATION, "created-topic": ErrorCode.NONE}
    assert "created-topic" in broker.broker.image.topics and "refused-topic" not in broker.broker.image.topics


def test_metadata_and_partition_apis_of_an_unavailable_partition(broker, raw):
    fault = broker.faults.make_unavailable("orders", 1)
    [topic] = raw.call("Metadata", 12, topics=[API_BY_NAME["Metadata"].request_class.MetadataRequestTopic(
        name="orders")]).topics
    partitions = {p.partition_index: p for p in topic.partitions}
    assert topic.error_code == ErrorCode.NONE
    assert (partitions[1].error_code, partitions[1].leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    assert (partitions[0].error_code, partitions[0].leader_id) == (ErrorCode.NONE, broker.broker.node_id)
    assert by_partition(produce(raw, {"orders": [0, 1]}))[("orders", 1)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    Topic = ListOffsets.ListOffsetsTopic
    listed = raw.call("ListOffsets", 7, replica_id=-1, topics=[Topic(name="orders", partitions=[
        Topic.ListOffsetsPartition(partition_index=1, timestamp=-1)])])
    refused = listed.topics[0].partitions[0]
    assert (refused.error_code, refused.offset, refused.timestamp) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
    assert fault.fired == 3 and fault.active
    broker.faults.clear()
    assert by_partition(produce(raw, {"orders": [1]}))[("orders", 1)].error_code == ErrorCode.NONE


def test_whole_request_answers_carry_kafkas_fields(broker, raw):
    broker.faults.fail("JoinGroup", "COORDINATOR_LOAD_IN_PROGRESS", group="g-join")
    protocol = API_BY_NAME["JoinGroup"].request_class.JoinGroupRequestProtocol(name="range", metadata=b"")
    joined = raw.call("JoinGroup", 9, group_id="g-join", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                      member_id="", protocol_type="consumer", protocols=[protocol])
    assert (joined.error_code, joined.generation_id, joined.protocol_name, joined.member_id, joined.members) == (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, None, "", [])
    broker.faults.fail("InitProducerId", "COORDINATOR_NOT_AVAILABLE", transactional_id="t-init")
    init = raw.call("InitProducerId", 4, transactional_id="t-init", transaction_timeout_ms=10_000)
    assert (init.error_code, init.producer_id, init.producer_epoch) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1)
    # A group filter matches nothing in a request without that group: this one is handled.
    other = broker.faults.fail("Heartbeat", "REBALANCE_IN_PROGRESS", group="g-other")
    beat = raw.call("Heartbeat", 4, group_id="g-unknown", generation_id=1, member_id="m")
    assert beat.error_code != ErrorCode.REBALANCE_IN_PROGRESS and other.fired == 0 and other.active


def test_find_coordinator_errors_per_key_and_at_the_top_in_old_versions(broker, raw):
    broker.faults.fail("FindCoordinator", 15, count=2, group="g-a")  # COORDINATOR_NOT_AVAILABLE
    answer = raw.call("FindCoordinator", 4, key_type=0, coordinator_keys=["g-a", "g-b"])
    by_key = {coordinator.key: coordinator for coordinator in answer.coordinators}
    assert (by_key["g-a"].error_code, by_key["g-a"].node_id, by_key["g-a"].host, by_key["g-a"].port) == (
        ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    assert (by_key["g-b"].error_code, by_key["g-b"].node_id) == (ErrorCode.NONE, broker.broker.node_id)
    old = raw.call("FindCoordinator", 3, key="g-a", key_type=0)
    assert (old.error_code, old.node_id, old.host, old.port) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)


def test_describe_groups_errs_per_group(broker, raw):
    broker.faults.fail("DescribeGroups", "COORDINATOR_LOAD_IN_PROGRESS", group="g-x")
    answer = raw.call("DescribeGroups", 5, groups=["g-x", "g-y"])
    codes = {group.group_id: group.error_code for group in answer.groups}
    assert codes == {"g-x": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "g-y": ErrorCode.NONE}


def test_move_coordinator_answers_not_coordinator_until_the_coordinator_is_found_again(broker, raw):
    fault = broker.faults.move_coordinator(group="g-moved")
    Topic = OffsetCommit.OffsetCommitRequestTopic
    commit = {"group_id": "g-moved", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [Topic(
        name="orders", partitions=[Topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]}
    refused = raw.call("OffsetCommit", 8, **commit)
    assert refused.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    assert raw.call("OffsetCommit", 8, **commit).topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    found = raw.call("FindCoordinator", 4, key_type=0, coordinator_keys=["g-moved"])
    assert (found.coordinators[0].error_code, found.coordinators[0].node_id) == (ErrorCode.NONE, broker.broker.node_id)
    assert raw.call("OffsetCommit", 8, **commit).topics[0].partitions[0].error_code == ErrorCode.NONE
    assert fault.fired == 2 and not fault.active


def test_a_delayed_answer_keeps_its_place_in_order(broker, raw):
    fault = broker.faults.delay("Metadata", ms=300)
    first = raw.send("Metadata", 12, topics=[])
    second = raw.send("ApiVersions", 3)
    assert raw.receive("Metadata", 12)[0] == first
    assert raw.receive("ApiVersions", 3)[0] == second
    assert fault.fired == 1


def test_disk_full_refuses_appends_until_it_is_over(broker, raw):
    broker.faults.disk_full(True)
    assert by_partition(produce(raw, {"audit": [0]}))[("audit", 0)].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    broker.faults.disk_full(False)
    assert by_partition(produce(raw, {"audit": [0]}))[("audit", 0)].error_code == ErrorCode.NONE


def test_close_connections_by_client_id(broker, raw):
    other = Raw(broker.port, client_id="the-other-one")
    try:
        assert broker.faults.close_connections(client_id="the-other-one") == 1
        assert other.closed()
        assert raw.call("ApiVersions", 3).error_code == ErrorCode.NONE  # this one's client id differs
        assert broker.faults.close_connections() >= 1
        assert raw.closed()
    finally:
        other.close()


def test_refusals_of_what_cannot_be_faulted(broker):
    with pytest.raises(LookupError):
        broker.faults.fail("Produc", "NOT_LEADER_OR_FOLLOWER")
    with pytest.raises(LookupError):
        broker.faults.fail("Produce", "NOT_AN_ERROR")
    with pytest.raises(ValueError):
        broker.faults.fail("Produce", 6, count=0)
    with pytest.raises(ValueError):
        broker.faults.move_coordinator()
    with pytest.raises(LookupError):
        broker.faults.rebalance("no-such-group")
