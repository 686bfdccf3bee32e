"""OffsetDelete (47): remove a group's committed offsets for partitions it no longer consumes.

Offsets of topics the group's members still subscribe to are kept
(GROUP_SUBSCRIBED_TO_TOPIC), as Kafka does. As Kafka's KafkaApis, a partition the
metadata does not have is answered UNKNOWN_TOPIC_OR_PARTITION without asking the
coordinator.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed, require_group
from kbroker.effects import CoordinatorError
from kbroker.group.offsets import unknown_partitions
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

OffsetDeleteResponse = API_BY_NAME["OffsetDelete"].response_class
TopicResult = OffsetDeleteResponse.OffsetDeleteResponseTopic
PartitionResult = TopicResult.OffsetDeleteResponsePartition


@handlers.handles("OffsetDelete", 0, 0)
async def handle(broker, context, request):
    shell = broker.groups
    wanted = [(topic.name, partition.partition_index) for topic in request.topics for partition in topic.partitions]
    refused = {name for name, _ in wanted if not allowed(broker, context, AclOperation.READ, ResourceType.TOPIC, name)}
    unknown = unknown_partitions(broker.image.topics, [key for key in wanted if key[0] not in refused])
    try:
        require_group(broker, context, AclOperation.DELETE, request.group_id)
        errors, effects = shell.coordinator.delete_offsets(
            request.group_id, [key for key in wanted if key[0] not in refused and key not in unknown])
    except CoordinatorError as error:
        return OffsetDeleteResponse(error_code=error.error_code, topics=[])
    errors.update({key: ErrorCode.TOPIC_AUTHORIZATION_FAILED for key in wanted if key[0] in refused})
    errors.update(dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    if not await shell.wait_applied(request.group_id, effects):
        return OffsetDeleteResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, topics=[])
    topics = [
        TopicResult(name=topic.name, partitions=[
            PartitionResult(partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics
    ]
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, topics=topics)
