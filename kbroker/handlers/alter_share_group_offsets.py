"""AlterShareGroupOffsets (91): set the start offset of a share group's share-partitions (KIP-932), as
``kafka-share-groups --reset-offsets --execute`` does.

As Kafka 4.2's KafkaApis and GroupCoordinatorService.alterShareGroupOffsets: READ on the group, then on
each topic (TOPIC_AUTHORIZATION_FAILED for its partitions), a topic the metadata does not have or a
partition beyond its count answering UNKNOWN_TOPIC_OR_PARTITION. The group must be empty (NON_EMPTY_GROUP);
one that does not exist yet is made a share group by it, so that its offsets are set before it is first
used. The partitions are recorded as initializing, the share coordinator starts their state at the group
epoch and the offsets given (InitializeShareGroupState), and they are recorded as initialized before the
answer. A share-partition the share coordinator did not initialize answers its error and stays
initializing; unlike Kafka, which then records none of them, those it did initialize are recorded so.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.handlers.share_admin import MESSAGES, refusal_message
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

Response = API_BY_NAME["AlterShareGroupOffsets"].response_class
Topic = Response.AlterShareGroupOffsetsResponseTopic
Partition = Topic.AlterShareGroupOffsetsResponsePartition

@handlers.handles("AlterShareGroupOffsets", 0, 0)
async def handle(broker, context, request):
    group_id, shell = request.group_id, broker.groups
    if not allowed(broker, context, AclOperation.READ, ResourceType.GROUP, group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = shell.topics_view()
    refused, accepted = [], []  # (name, (topic id, partition count) or None, [(partition, error code)])
    start_offsets: dict = {}  # topic id -> {partition: start offset}
    for topic in request.topics:  # KafkaApis' checks, then the coordinator's
        name = topic.topic_name
        known = topics.by_name.get(name)
        if not allowed(broker, context, AclOperation.READ, ResourceType.TOPIC, name):
            refused.append((name, known, [(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                          for p in topic.partitions]))
        elif known is None:
            refused.append((name, known, [(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                                          for p in topic.partitions]))
        else:
            offsets = start_offsets.setdefault(known[0], {})
            offsets.update({p.partition_index: p.start_offset for p in topic.partitions
                            if 0 <= p.partition_index < known[1]})
            accepted.append((name, known, [(p.partition_index, ErrorCode.NONE if 0 <= p.partition_index < known[1]
                                            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in topic.partitions]))
    answered: dict[str, Topic] = {}  # by name: KafkaApis' refusals first, then the coordinator's answers
    for name, known, partitions in refused + accepted:
        topic = answered.setdefault(name, Topic(topic_name=name, topic_id=ZERO_UUID if known is None else known[0]))
        topic.partitions += [Partition(partition_index=index, error_code=error_code,
                                       error_message=MESSAGES.get(error_code)) for index, error_code in partitions]
    if not group_id:
        return _refused(ErrorCode.INVALID_GROUP_ID)
    try:
        initialize, effects = shell.coordinator.alter_share_group_offsets(group_id, start_offsets, topics.names_by_id,
                                                                          shell.now_ms())
    except CoordinatorError as error:
        return _refused(error.error_code, refusal_message(error))
    if not await shell.wait_applied(group_id, effects):
        return _refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    results = await shell.initialize_share_state(initialize) if initialize is not None else {}
    for topic in answered.values():
        for partition in topic.partitions:
            error_code, message = results.get((topic.topic_id, partition.partition_index), (ErrorCode.NONE, None))
            if partition.error_code == ErrorCode.NONE and error_code != ErrorCode.NONE:
                partition.error_code, partition.error_message = error_code, message
    return Response(responses=list(answered.values()))


def _refused(error_code: int, message: str | None = None):
    return Response(error_code=error_code, error_message=message or MESSAGES.get(error_code))
