"""OffsetCommit (8): store a group's consumed positions; answered once they are durable.

Member and generation (or KIP-848 member epoch) are checked by the group;
``generation_id_or_member_epoch = -1`` with no member is a "simple" commit,
allowed only for a group without members. From v10 topics come by id.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.group.shell import now_ms
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed, require_group
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

OffsetCommitResponse = API_BY_NAME["OffsetCommit"].response_class
TopicResult = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResult = TopicResult.OffsetCommitResponsePartition
_TOPIC_IDS_FROM = 10


@handlers.handles("OffsetCommit", 2, 10)
async def handle(broker, context, request):
    from kbroker.group.offsets import CommittedOffset  # the group cores load at the first group request

    shell, image, now = broker.groups, broker.image, now_ms()
    by_id = context.api_version >= _TOPIC_IDS_FROM
    names = {topic.topic_id: name for name, topic in image.topics.items()} if by_id else {}
    commits, unknown, refused = {}, set(), set()
    for topic in request.topics:
        name = names.get(topic.topic_id) if by_id else topic.name
        if name is not None and not allowed(broker, context, AclOperation.READ, ResourceType.TOPIC, name):
            refused.add(name)
        for partition in topic.partitions:
            if name is None:
                unknown.add((topic.topic_id, partition.partition_index))
                continue
            if name in refused:
                continue
            commits[(name, partition.partition_index)] = CommittedOffset(
                offset=partition.committed_offset,
                leader_epoch=partition.committed_leader_epoch,
                metadata=partition.committed_metadata or "",
                commit_timestamp_ms=now,
            )
    try:
        require_group(broker, context, AclOperation.READ, request.group_id)
        errors, effects = shell.coordinator.commit_offsets(
            request.group_id, request.member_id, request.group_instance_id, request.generation_id_or_member_epoch,
            context.api_version, commits)
        if not await shell.wait_applied(request.group_id, effects):
            errors = {key: ErrorCode.COORDINATOR_NOT_AVAILABLE for key in errors}
    except CoordinatorError as error:
        errors = {key: error.error_code for key in commits}
    topics = []
    for topic in request.topics:
        name = names.get(topic.topic_id) if by_id else topic.name
        results = []
        for partition in topic.partitions:
            key = (name, partition.partition_index)
            code = ErrorCode.UNKNOWN_TOPIC_ID if name is None else errors.get(key, ErrorCode.NONE)
            if name in refused:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            results.append(PartitionResult(partition_index=partition.partition_index, error_code=code))
        topics.append(TopicResult(name=topic.name, topic_id=topic.topic_id, partitions=results))
    return OffsetCommitResponse(topics=topics)
