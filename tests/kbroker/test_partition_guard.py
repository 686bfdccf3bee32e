"""The partition guard (kbroker/handlers/partition_guard.py) in memory: Kafka's checks before a partition
is acted on, in Kafka's order (KafkaApis, then ReplicaManager.getPartitionOrError, then Partition.getLocalLog),
and the handlers that use it answering as Kafka does where their order was another before."""

import uuid
from types import SimpleNamespace

import pytest
import trio

from kbroker.handlers import describe_producers, fetch, list_offsets, produce
from kbroker.handlers.partition_guard import guard_topic
from kbroker.metadata.image import PartitionState, TopicImage
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME
from tests.kbroker.in_memory_parts import THIS_NODE, MemoryNode, context

LEADER_EPOCH = 5
TOPIC_ID = uuid.UUID(int=7)


def events_node(refused=()) -> MemoryNode:
    """A broker with one topic: partition 0 led here, 1 followed here, 2 with no replica here; the replicas
    it opens are names only (the guard hands them over, these tests look no further)."""
    partitions = (
        PartitionState(0, leader=THIS_NODE, leader_epoch=LEADER_EPOCH, replicas=(1, 2), isr=(1, 2)),
        PartitionState(1, leader=2, leader_epoch=LEADER_EPOCH, replicas=(2, 1), isr=(2, 1)),  # a follower here
        PartitionState(2, leader=2, leader_epoch=LEADER_EPOCH, replicas=(2, 3), isr=(2, 3)),  # no replica here
    )
    return MemoryNode(TopicImage("events", TOPIC_ID, partitions), refused=refused,
                      open_replica=lambda topic, index, state, node_id: SimpleNamespace(topic=topic, index=index))


def guarded(broker=None, name="events", index=0, epoch=None, **options):
    require_leader = options.pop("require_leader", True)
    guard = guard_topic(broker or events_node(), context(), AclOperation.READ, name=name, **options)
    return guard.partition(index, epoch, require_leader=require_leader)


def test_the_leader_s_partition_at_its_epoch_or_without_one():
    for epoch in (None, -1, LEADER_EPOCH):
        partition, error_code = guarded(epoch=epoch)
        assert error_code == ErrorCode.NONE and (partition.topic, partition.index) == ("events", 0)


def test_authorization_comes_before_the_topic_is_looked_up():
    """KafkaApis authorizes first: a refused principal learns nothing of which topics exist."""
    broker = events_node(refused={"events", "missing"})
    assert guarded(broker) == (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert guarded(broker, name="missing") == (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert guarded(broker, index=2, epoch=0) == (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert (AclOperation.READ, ResourceType.TOPIC, "missing") in broker.authorization.asked


@pytest.mark.parametrize("name, index", [("missing", 0), ("events", 3), ("events", -1)])
def test_an_unknown_topic_or_partition(name, index):
    assert guarded(name=name, index=index, epoch=0) == (None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_an_unknown_topic_id_is_told_before_authorization():
    """A topic id names no topic to authorize (KafkaApis.handleFetchRequest: UNKNOWN_TOPIC_ID first)."""
    broker = events_node(refused={"events"})
    assert guarded(broker, name=None, topic_id=uuid.UUID(int=8)) == (None, ErrorCode.UNKNOWN_TOPIC_ID)
    assert broker.authorization.asked == []
    assert guarded(broker, name=None, topic_id=TOPIC_ID) == (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert guarded(events_node(), name=None, topic_id=TOPIC_ID, index=3) == (None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_a_cluster_decision_stands_for_the_topic_s_acl():
    """A follower's CLUSTER_ACTION: granted, no topic ACL is asked; refused, every topic is refused, known or not."""
    broker = events_node(refused={"events"})
    assert guarded(broker, authorized=True)[1] == ErrorCode.NONE and broker.authorization.asked == []
    assert guarded(events_node(), authorized=False) == (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert guarded(events_node(), name=None, topic_id=uuid.UUID(int=8), authorized=False) == (
        None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def test_a_partition_without_a_replica_here_is_not_led_here_whatever_the_epoch():
    """ReplicaManager.getPartitionOrError: a partition this broker does not host, before any epoch check."""
    for epoch in (None, 0, LEADER_EPOCH, LEADER_EPOCH + 1):
        assert guarded(index=2, epoch=epoch) == (None, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        assert guarded(index=2, epoch=epoch, require_leader=False) == (None, ErrorCode.NOT_LEADER_OR_FOLLOWER)


@pytest.mark.parametrize("index", [0, 1])
def test_the_epoch_is_checked_before_leadership(index):
    """Partition.getLocalLog: checkCurrentLeaderEpoch, then requireLeader; a follower knows the epoch too."""
    assert guarded(index=index, epoch=LEADER_EPOCH - 1) == (None, ErrorCode.FENCED_LEADER_EPOCH)
    assert guarded(index=index, epoch=LEADER_EPOCH + 1) == (None, ErrorCode.UNKNOWN_LEADER_EPOCH)


def test_a_follower_serves_only_what_does_not_need_the_leader():
    for epoch in (None, LEADER_EPOCH):
        assert guarded(index=1, epoch=epoch) == (None, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        partition, error_code = guarded(index=1, epoch=epoch, require_leader=False)
        assert error_code == ErrorCode.NONE and partition.index == 1


def test_find_stops_before_the_replica():
    guard = guard_topic(events_node(), context(), AclOperation.WRITE, name="events")
    assert [guard.find(index) for index in (0, 1, 2, 3)] == [ErrorCode.NONE] * 3 + [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert guard.local(2) == (None, ErrorCode.NOT_LEADER_OR_FOLLOWER)


# -- the handlers, where Kafka's order differed from theirs --------------------------------------------------

def test_list_offsets_on_a_follower_with_a_stale_epoch_is_fenced():
    """It was NOT_LEADER_OR_FOLLOWER before the epoch was looked at; Kafka fences first."""
    request_class = API_BY_NAME["ListOffsets"].request_class
    topic = request_class.ListOffsetsTopic
    request = request_class(replica_id=-1, isolation_level=0, topics=[topic(name="events", partitions=[
        topic.ListOffsetsPartition(partition_index=1, current_leader_epoch=epoch, timestamp=-1)
        for epoch in (LEADER_EPOCH - 1, LEADER_EPOCH + 1, LEADER_EPOCH)])])
    response = trio.run(list_offsets.handle, events_node(), context("ListOffsets", 7), request)
    assert [p.error_code for p in response.topics[0].partitions] == [
        ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER]


def test_produce_with_bad_acks_to_an_unknown_topic_is_told_the_topic_is_unknown():
    """KafkaApis.handleProduceRequest sets unknown topics aside before ReplicaManager.appendRecords checks acks."""
    request_class = API_BY_NAME["Produce"].request_class
    data = request_class.TopicProduceData
    request = request_class(acks=2, timeout_ms=1000, topic_data=[
        data(name=name, partition_data=[data.PartitionProduceData(index=index, records=b"")])
        for name, index in (("missing", 0), ("events", 9), ("events", 0), ("events", 2), ("refused", 0))])
    response = trio.run(produce.handle, events_node(refused={"refused"}), context("Produce", 9), request)
    assert [t.partition_responses[0].error_code for t in response.responses] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REQUIRED_ACKS,
        ErrorCode.INVALID_REQUIRED_ACKS, ErrorCode.TOPIC_AUTHORIZATION_FAILED]


def test_a_refused_follower_fetch_is_refused_for_an_unknown_topic_id_too():
    """KafkaApis.handleFetchRequest refuses a follower without CLUSTER_ACTION every partition, before topic ids."""
    request_class = API_BY_NAME["Fetch"].request_class
    topic = request_class.FetchTopic
    request = request_class(replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1024, isolation_level=0, topics=[
        topic(topic_id=topic_id, partitions=[topic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)])
        for topic_id in (uuid.UUID(int=8), TOPIC_ID)])
    response = trio.run(fetch.handle, events_node(refused={"cluster"}), context("Fetch", 13), request)
    assert [t.partitions[0].error_code for t in response.responses] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED] * 2


def test_describe_producers_of_a_partition_without_a_replica_here():
    """ReplicaManager.activeProducerState: NOT_LEADER_OR_FOLLOWER (this broker used to fail on the missing log)."""
    request_class = API_BY_NAME["DescribeProducers"].request_class
    request = request_class(topics=[request_class.TopicRequest(name="events", partition_indexes=[2, 3])])
    response = trio.run(describe_producers.handle, events_node(), context("DescribeProducers", 0), request)
    assert [p.error_code for p in response.topics[0].partitions] == [
        ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
