"""DeleteTopics (20): by name (v1-5) or by name or id (v6+)."""

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.topics import removal_records
from wire.errors import ErrorCode
from wire.primitives import ZERO_UUID
from wire.schema import API_BY_NAME

DeleteTopicsResponse = API_BY_NAME["DeleteTopics"].response_class
Result = DeleteTopicsResponse.DeletableTopicResult


def _refusal(request):
    return DeleteTopicsResponse(responses=[
        Result(name=name, topic_id=topic_id, error_code=ErrorCode.NOT_CONTROLLER) for name, topic_id in _wanted(request)])


def _wanted(request) -> list[tuple]:
    return [(name, ZERO_UUID) for name in request.topic_names] + [(t.name, t.topic_id) for t in request.topics]


@handlers.handles("DeleteTopics", 1, 6)
async def handle(broker, context, request):
    """DELETE on each topic is needed (checked here, before a forward to the controller); a topic id the
    principal may not delete is answered as unknown, as Kafka does, so ids reveal nothing."""
    def may_delete(name, topic_id) -> bool:
        topic = broker.image.topics.get(name) if name is not None else broker.image.topic_by_id(topic_id)
        return allowed(broker, context, AclOperation.DELETE, ResourceType.TOPIC, topic.name if topic else name or "")
    refused = [(name, topic_id) for name, topic_id in _wanted(request) if not may_delete(name, topic_id)]
    if not refused:
        return await _delete(broker, context, request)
    request.topic_names = [name for name in request.topic_names if (name, ZERO_UUID) not in refused]
    request.topics = [t for t in request.topics if (t.name, t.topic_id) not in refused]
    response = await _delete(broker, context, request) if _wanted(request) else DeleteTopicsResponse(responses=[])
    response.responses += [Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                                  if name is not None else ErrorCode.UNKNOWN_TOPIC_ID) for name, topic_id in refused]
    return response


@handlers.metadata_change(_refusal)
async def _delete(broker, context, request):
    wanted = _wanted(request)
    results, removals, removed = [], [], set()
    for name, topic_id in wanted:
        topic = broker.image.topics.get(name) if name is not None else broker.image.topic_by_id(topic_id)
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID
            results.append(Result(name=name, topic_id=topic_id, error_code=code))
            continue
        results.append(Result(name=topic.name, topic_id=topic.topic_id))
        if topic.name not in removed:
            removed.add(topic.name)
            removals.extend(removal_records(topic))
    error = await broker.submit(removals) if removals else None
    handlers.mark_not_made(results, error)
    return DeleteTopicsResponse(responses=results)
