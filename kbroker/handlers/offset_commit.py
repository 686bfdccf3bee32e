"""OffsetCommit (8): store a group's consumed positions; answered once they are durable.

Member and generation (or KIP-848 member epoch) are checked by the group;
``generation_id_or_member_epoch = -1`` with no member is a "simple" commit,
allowed only for a group without members. From v10 topics come by id.

As Kafka's KafkaApis.handleOffsetCommitRequest, a topic the metadata does not
have, or a partition past its count, is answered UNKNOWN_TOPIC_OR_PARTITION
(an id it does not know UNKNOWN_TOPIC_ID) and kept from the group; a request
left with nothing to commit is answered without asking the group at all.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

OffsetCommitResponse = API_BY_NAME["OffsetCommit"].response_class
TopicResult = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResult = TopicResult.OffsetCommitResponsePartition
_TOPIC_IDS_FROM = 10


@handlers.handles("OffsetCommit", 2, 10)
async def handle(broker, context, request):
    # The group cores load at the first group request.
    from kbroker.group.offsets import CommittedOffset, unknown_partitions

    image, now = broker.image, broker.groups.now_ms()
    by_id = context.api_version >= _TOPIC_IDS_FROM
    names = [image.topic_names.get(topic.topic_id) if by_id else topic.name for topic in request.topics]
    if not allowed(broker, context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _answer(request, names, lambda name, index: ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = {name for name in names
               if name is not None and not allowed(broker, context, AclOperation.READ, ResourceType.TOPIC, name)}
    wanted = [(name, partition) for name, topic in zip(names, request.topics)
              if name is not None and name not in refused for partition in topic.partitions]
    unknown = unknown_partitions(image.topics, [(name, partition.partition_index) for name, partition in wanted])
    commits = {
        (name, partition.partition_index): CommittedOffset(
            offset=partition.committed_offset,
            leader_epoch=partition.committed_leader_epoch,
            metadata=partition.committed_metadata or "",
            commit_timestamp_ms=now,
        )
        for name, partition in wanted if (name, partition.partition_index) not in unknown
    }
    errors = await _commit(broker.groups, request, context.api_version, commits) if commits else {}

    def error_of(name, index):
        if name is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        if name in refused:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if (name, index) in unknown:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return errors.get((name, index), ErrorCode.NONE)

    return _answer(request, names, error_of)


async def _commit(shell, request, version: int, commits) -> dict:
    try:
        errors, effects = shell.coordinator.commit_offsets(
            request.group_id, request.member_id, request.group_instance_id, request.generation_id_or_member_epoch,
            version, commits)
        if not await shell.wait_applied(request.group_id, effects):
            errors = dict.fromkeys(errors, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    except CoordinatorError as error:
        errors = dict.fromkeys(commits, error.error_code)
    return errors


def _answer(request, names, error_of):
    return OffsetCommitResponse(topics=[
        TopicResult(name=topic.name, topic_id=topic.topic_id, partitions=[
            PartitionResult(partition_index=p.partition_index, error_code=error_of(name, p.partition_index))
            for p in topic.partitions])
        for name, topic in zip(names, request.topics)])
