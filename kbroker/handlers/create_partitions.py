"""CreatePartitions (37): grow topics' partition counts with Kafka's checks; one metadata batch."""

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.topics import TopicError, plan_partitions
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

CreatePartitionsResponse = API_BY_NAME["CreatePartitions"].response_class
Result = CreatePartitionsResponse.CreatePartitionsTopicResult
_STRICT_QUOTA_FROM = 3  # v3+ may be answered THROTTLING_QUOTA_EXCEEDED (KIP-599)


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    return CreatePartitionsResponse(results=[Result(name=topic.name, error_code=code)
                                             for topic in request.topics])


@handlers.handles("CreatePartitions", 0, 3)
async def handle(broker, context, request):
    """ALTER on each topic is needed, and the client's controller_mutation_rate must allow the new
    partitions (both checked here, before a forward to the controller)."""
    wanted = request.topics
    request.topics = [t for t in wanted if allowed(broker, context, AclOperation.ALTER, ResourceType.TOPIC, t.name)]
    refused = [Result(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
               for t in wanted if t not in request.topics]
    if not request.validate_only:
        request.topics, throttled = handlers.admit_mutations(
            broker, context, request.topics, lambda topic: _added(broker, topic), _STRICT_QUOTA_FROM)
        refused += [Result(name=topic.name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                           error_message=handlers.THROTTLED) for topic in throttled]
    response = await _create(broker, context, request) if request.topics else CreatePartitionsResponse(results=[])
    response.results += refused
    response.throttle_time_ms = max(response.throttle_time_ms or 0, context.throttle_ms)
    return response


def _added(broker, topic) -> int:
    existing = broker.image.topics.get(topic.name)
    return max(topic.count - len(existing.partitions), 0) if existing is not None else 0


@handlers.metadata_change(_refusal)
async def _create(broker, context, request):
    names = [topic.name for topic in request.topics]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    results = [Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.") for name in duplicates]
    plans = []
    for topic in request.topics:
        if topic.name in duplicates:
            continue
        assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        try:
            plans.extend(plan_partitions(broker.image, topic.name, topic.count, assignments))
        except TopicError as error:
            results.append(Result(name=topic.name, error_code=error.error_code, error_message=str(error) or None))
            continue
        results.append(Result(name=topic.name))
    error = await broker.submit(plans) if plans and not request.validate_only else None
    handlers.mark_not_made(results, error)
    return CreatePartitionsResponse(results=results)
