"""DeleteShareGroupOffsets (92): forget a share group's share-partitions of some topics (KIP-932), as
``kafka-share-groups --delete-offsets`` does; the next member to subscribe starts them afresh.

As Kafka 4.2's KafkaApis and GroupCoordinatorService.deleteShareGroupOffsets: DELETE on the group, READ on
each topic (TOPIC_AUTHORIZATION_FAILED), an existing empty share group (GROUP_ID_NOT_FOUND,
NON_EMPTY_GROUP). A topic the metadata does not have, or one the group has no share-partitions of, answers
UNKNOWN_TOPIC_OR_PARTITION. The others are recorded as deleting, their state is deleted at the share
coordinator (DeleteShareGroupState), and those deleted are recorded as gone; a topic whose state could not
be deleted answers the error and stays deleting (the next deletion of it, or of the group, tries again).
Topics answer in Kafka's order: unauthorized, deleted, then the others.
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

Response = API_BY_NAME["DeleteShareGroupOffsets"].response_class
Topic = Response.DeleteShareGroupOffsetsResponseTopic


@handlers.handles("DeleteShareGroupOffsets", 0, 0)
async def handle(broker, context, request):
    group_id, shell = request.group_id, broker.groups
    if not allowed(broker, context, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED, MESSAGES[ErrorCode.GROUP_AUTHORIZATION_FAILED])
    refused, names = [], []
    for topic in request.topics:
        if allowed(broker, context, AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
            names.append(topic.topic_name)
        else:
            refused.append(_failed(topic.topic_name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    if not group_id:
        return _refused(ErrorCode.INVALID_GROUP_ID, MESSAGES[ErrorCode.INVALID_GROUP_ID])
    topics = shell.topics_view()
    try:
        deleted, unknown, effects = shell.coordinator.share_group_offsets_deletion(group_id, names, topics,
                                                                                   shell.now_ms())
        if not await shell.wait_applied(group_id, effects):
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        failed = [_failed(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message) for name, message in unknown]
        errors = await shell.delete_share_state(group_id, deleted) if deleted else {}
        done = []
        for topic_id in deleted:
            error_code = next((code for (tid, _), code in errors.items() if tid == topic_id and code), ErrorCode.NONE)
            if error_code == ErrorCode.NONE:
                done.append(topic_id)
            else:
                failed.append(Topic(topic_name=topics.names_by_id.get(topic_id), topic_id=topic_id,
                                    error_code=error_code, error_message=MESSAGES.get(error_code)))
        if done and not await shell.wait_applied(group_id, shell.coordinator.share_group_offsets_deleted(
                group_id, done, topics, shell.now_ms())):
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    except CoordinatorError as error:
        return _refused(error.error_code, refusal_message(error))
    return Response(responses=refused + [Topic(topic_name=topics.names_by_id.get(topic_id), topic_id=topic_id)
                                         for topic_id in done] + failed)


def _failed(name: str, error_code: int, message: str | None = None):
    return Topic(topic_name=name, topic_id=ZERO_UUID, error_code=error_code,
                 error_message=message or MESSAGES[error_code])


def _refused(error_code: int, message: str | None):
    return Response(error_code=error_code, error_message=message)
