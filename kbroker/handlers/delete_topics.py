"""DeleteTopics (20): by name (v1-5) or by name or id (v6+)."""

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import REFUSAL_MESSAGES, allowed
from kbroker.topics import removal_records
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

DeleteTopicsResponse = API_BY_NAME["DeleteTopics"].response_class
Result = DeleteTopicsResponse.DeletableTopicResult
_STRICT_QUOTA_FROM = 5  # v5+ may be answered THROTTLING_QUOTA_EXCEEDED (KIP-599)
_UNKNOWN = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
            ErrorCode.UNKNOWN_TOPIC_ID: "This server does not host this topic ID."}


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    return DeleteTopicsResponse(responses=[
        Result(name=name, topic_id=topic_id, error_code=code) for name, topic_id in _wanted(request)])


def _wanted(request) -> list[tuple]:
    return [(name, ZERO_UUID) for name in request.topic_names] + [(t.name, t.topic_id) for t in request.topics]


@handlers.handles("DeleteTopics", 1, 6)
async def handle(broker, context, request):
    """DELETE on each topic is needed, and the client's controller_mutation_rate must allow removing
    its partitions (both checked here, before a forward to the controller); a topic id the principal
    may not delete is answered as unknown, as Kafka does, so ids reveal nothing."""
    def may_delete(name, topic_id) -> bool:
        topic = broker.image.topics.get(name) if name is not None else broker.image.topic_by_id(topic_id)
        return allowed(broker, context, AclOperation.DELETE, ResourceType.TOPIC, topic.name if topic else name or "")
    refused = [(name, topic_id) for name, topic_id in _wanted(request) if not may_delete(name, topic_id)]
    answers = [Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      error_message=REFUSAL_MESSAGES[ErrorCode.TOPIC_AUTHORIZATION_FAILED])
               if name is not None else Result(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
               for name, topic_id in refused]
    _, throttled = handlers.admit_mutations(broker, context, [w for w in _wanted(request) if w not in refused],
                                            lambda wanted: _partitions(broker, *wanted), _STRICT_QUOTA_FROM)
    answers += [Result(name=name, topic_id=topic_id, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                       error_message=handlers.THROTTLED) for name, topic_id in throttled]
    if answers:
        left_out = set(refused) | set(throttled)
        request.topic_names = [name for name in request.topic_names if (name, ZERO_UUID) not in left_out]
        request.topics = [t for t in request.topics if (t.name, t.topic_id) not in left_out]
    response = await _delete(broker, context, request) if _wanted(request) else DeleteTopicsResponse(responses=[])
    response.responses += answers
    response.throttle_time_ms = max(response.throttle_time_ms or 0, context.throttle_ms)
    return response


def _partitions(broker, name, topic_id) -> int:
    """The partitions deleting this topic removes (none for an unknown one)."""
    topic = broker.image.topics.get(name) if name is not None else broker.image.topic_by_id(topic_id)
    return len(topic.partitions) if topic is not None else 0


@handlers.metadata_change(_refusal)
async def _delete(broker, context, request):
    wanted = _wanted(request)
    results, removals, removed = [], [], set()
    for name, topic_id in wanted:
        topic = broker.image.topics.get(name) if name is not None else broker.image.topic_by_id(topic_id)
        if topic is None:  # with the error's own message, as Kafka's controller answers (v5+ carry it)
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID
            results.append(Result(name=name, topic_id=topic_id, error_code=code, error_message=_UNKNOWN[code]))
            continue
        results.append(Result(name=topic.name, topic_id=topic.topic_id))
        if topic.name not in removed:
            removed.add(topic.name)
            removals.extend(removal_records(topic))
    error = await broker.submit(removals) if removals else None
    handlers.mark_not_made(results, error)
    return DeleteTopicsResponse(responses=results)
