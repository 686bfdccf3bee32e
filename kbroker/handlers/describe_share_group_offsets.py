"""DescribeShareGroupOffsets (90): each share-partition's start offset, leader epoch and (v1) lag.

As Kafka 4.2's KafkaApis and GroupCoordinatorService.describeShareGroupOffsets: DESCRIBE on the group,
then on each topic (a topic named that may not be described answers TOPIC_AUTHORIZATION_FAILED; with all
topics asked for, v1's null, such topics are left out). The start offset and leader epoch are the share
coordinator's (ReadShareGroupStateSummary); a share-partition it has no state of, or could not answer
for, answers -1, as a topic the metadata does not have does: no data rather than an error. The lag
(KIP-1226) is the partition's end offset less the start offset and the delivery complete count, or -1
while either is unknown. All topics means the share-partitions the group has initialized.
"""

from __future__ import annotations

import uuid

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.handlers.share_admin import MESSAGES, refusal_message
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

Response = API_BY_NAME["DescribeShareGroupOffsets"].response_class
Group = Response.DescribeShareGroupOffsetsResponseGroup
Topic = Group.DescribeShareGroupOffsetsResponseTopic
Partition = Topic.DescribeShareGroupOffsetsResponsePartition
ListOffsetsTopic = API_BY_NAME["ListOffsets"].request_class.ListOffsetsTopic

NO_OFFSET = -1  # Kafka's UNINITIALIZED_START_OFFSET and UNINITIALIZED_LAG
NO_LEADER_EPOCH = 0  # Kafka's DEFAULT_LEADER_EPOCH, for a share-partition the share coordinator did not answer for
_LATEST = -1  # ListOffsets' timestamp of the end of a partition
_LIST_OFFSETS_VERSION = 7
_PEER_TIMEOUT_S = 10.0


@handlers.handles("DescribeShareGroupOffsets", 0, 1)
async def handle(broker, context, request):
    return Response(groups=[await _described(broker, context, wanted, context.api_version >= 1)
                            for wanted in request.groups])


async def _described(broker, context, wanted, with_lag: bool):
    group_id = wanted.group_id
    if not allowed(broker, context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return Group(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = broker.groups.topics_view()
    asked: list[tuple[str, uuid.UUID, list[int]]] = []  # (name, id, partitions) to ask the share coordinator of
    answered: list = []  # topics answered without asking: unknown ones, then unauthorized ones
    if wanted.topics is None:
        try:
            initialized = broker.groups.coordinator.initialized_share_partitions(group_id)
        except CoordinatorError as error:
            return Group(group_id=group_id, error_code=error.error_code, error_message=refusal_message(error))
        for topic_id, partitions in initialized.items():
            name = topics.names_by_id.get(topic_id)
            if name is not None and allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                asked.append((name, topic_id, sorted(partitions)))
    else:
        refused = []
        for topic in wanted.topics:
            if not allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic_name):
                refused.append(Topic(topic_name=topic.topic_name, topic_id=ZERO_UUID, partitions=[Partition(
                    partition_index=p, start_offset=NO_OFFSET, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message=MESSAGES[ErrorCode.TOPIC_AUTHORIZATION_FAILED]) for p in topic.partitions]))
            elif topic.topic_name in topics.by_name:
                asked.append((topic.topic_name, topics.by_name[topic.topic_name][0], list(topic.partitions)))
            else:
                answered.append(Topic(topic_name=topic.topic_name, topic_id=ZERO_UUID, partitions=[
                    Partition(partition_index=p, start_offset=NO_OFFSET) for p in topic.partitions]))
        answered += refused
    summaries = await broker.groups.share_state_summaries(
        group_id, {topic_id: frozenset(partitions) for _, topic_id, partitions in asked}) if asked else {}
    lagging = [(name, p) for name, topic_id, partitions in asked for p in partitions
               if _has_lag(summaries[(topic_id, p)])] if with_lag else []
    ends = await _end_offsets(broker, lagging)
    described = [Topic(topic_name=name, topic_id=topic_id, partitions=[
        _partition(p, summaries[(topic_id, p)], ends.get((name, p))) for p in partitions])
        for name, topic_id, partitions in asked]
    return Group(group_id=group_id, topics=described + answered)


def _has_lag(summary) -> bool:
    """Whether the lag can be known (Kafka's shouldComputeSharePartitionLag)."""
    return (summary.error_code == ErrorCode.NONE and summary.start_offset != NO_OFFSET
            and summary.delivery_complete_count != NO_OFFSET)


def _partition(index: int, summary, end: tuple[int, int] | None):
    if summary.error_code != ErrorCode.NONE:
        return Partition(partition_index=index, start_offset=NO_OFFSET, leader_epoch=NO_LEADER_EPOCH)
    if end is None:
        return Partition(partition_index=index, start_offset=summary.start_offset, leader_epoch=summary.leader_epoch)
    error_code, end_offset = end
    if error_code != ErrorCode.NONE:
        return Partition(partition_index=index, error_code=error_code)
    return Partition(partition_index=index, start_offset=summary.start_offset, leader_epoch=summary.leader_epoch,
                     lag=end_offset - summary.start_offset - summary.delivery_complete_count)


async def _end_offsets(broker, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(error code, end offset) of each (topic, partition): the high watermark of the replica here when this
    broker leads it, else ListOffsets (latest) to its leader, as Kafka's PartitionMetadataClient asks."""
    image = broker.image
    found: dict[tuple[str, int], tuple[int, int]] = {}
    remote: dict[int, list[tuple[str, int]]] = {}
    for name, index in partitions:
        topic = image.topics.get(name)
        if topic is None or index >= len(topic.partitions):
            found[(name, index)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_OFFSET)
        elif broker.leads(topic, index):
            found[(name, index)] = (ErrorCode.NONE, broker.partition(name, index).high_watermark)
        else:
            remote.setdefault(topic.partitions[index].leader, []).append((name, index))
    for leader, led in remote.items():
        found.update(await _listed_offsets(broker, leader, led))
    return found


async def _listed_offsets(broker, leader: int, partitions: list[tuple[str, int]]) -> dict:
    address = broker.image.peer_address(leader)
    if address is None:
        return {key: (ErrorCode.LEADER_NOT_AVAILABLE, NO_OFFSET) for key in partitions}
    by_topic: dict[str, list[int]] = {}
    for name, index in partitions:
        by_topic.setdefault(name, []).append(index)
    wanted = ListOffsetsTopic.ListOffsetsPartition
    request = API_BY_NAME["ListOffsets"].request_class(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsTopic(name=name, partitions=[wanted(partition_index=p, timestamp=_LATEST) for p in indexes])
        for name, indexes in by_topic.items()])
    try:
        response = await broker.peers.call(address, "ListOffsets", _LIST_OFFSETS_VERSION, request,
                                           timeout_s=_PEER_TIMEOUT_S)
    except OSError:
        return {key: (ErrorCode.REQUEST_TIMED_OUT, NO_OFFSET) for key in partitions}
    found = {(topic.name, p.partition_index): (p.error_code, p.offset)
             for topic in response.topics for p in topic.partitions}
    return {key: found.get(key, (ErrorCode.UNKNOWN_SERVER_ERROR, NO_OFFSET)) for key in partitions}
