"""CreateTopics (19): Kafka's checks and codes; one metadata batch for all new topics."""

from kbroker import handlers
from kbroker.config.admin import ConfigsError, topic_entries, validate_topic_configs
from kbroker.config.topic_definitions import TOPIC_CONFIG_NAMES
from kbroker.metadata import records
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed, allowed_on_cluster
from kbroker.topics import TopicError, TopicRequest, plan_topic
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

CreateTopicsResponse = API_BY_NAME["CreateTopics"].response_class
Result = CreateTopicsResponse.CreatableTopicResult
TopicConfig = Result.CreatableTopicConfigs
_CONFIGS_FROM = 5  # v5+ answers with the new topic's configs (KIP-525)
_STRICT_QUOTA_FROM = 6  # v6+ may be answered THROTTLING_QUOTA_EXCEEDED (KIP-599)


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    message = "This controller is not active." if code == ErrorCode.NOT_CONTROLLER else None
    return CreateTopicsResponse(topics=[Result(name=topic.name, error_code=code, error_message=message)
                                        for topic in request.topics])


@handlers.handles("CreateTopics", 2, 7)
async def handle(broker, context, request):
    """CREATE on the cluster or on the topic is needed, and the client's controller_mutation_rate
    must allow the partitions (both checked here, before a forward to the controller). A name given
    twice is answered once, INVALID_REQUEST, and not created, before anything else is checked (Kafka's
    KafkaApis)."""
    names = [topic.name for topic in request.topics]
    duplicates = list(dict.fromkeys(name for name in names if names.count(name) > 1))
    request.topics = [topic for topic in request.topics if topic.name not in duplicates]
    wanted = request.topics
    if not allowed_on_cluster(broker, context, AclOperation.CREATE):
        request.topics = [t for t in wanted
                          if allowed(broker, context, AclOperation.CREATE, ResourceType.TOPIC, t.name)]
    refused = [Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
               for name in duplicates]
    refused += [Result(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       error_message="Authorization failed.") for t in wanted if t not in request.topics]
    if not request.validate_only:
        request.topics, throttled = handlers.admit_mutations(
            broker, context, request.topics, lambda topic: _partitions(broker, topic), _STRICT_QUOTA_FROM)
        refused += [Result(name=topic.name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                           error_message=handlers.THROTTLED) for topic in throttled]
    response = await _create(broker, context, request) if request.topics else CreateTopicsResponse(topics=[])
    response.topics += refused
    response.throttle_time_ms = max(response.throttle_time_ms or 0, context.throttle_ms)
    return response


def _partitions(broker, topic) -> int:
    """The partitions a creation adds (none for a topic that exists: it will be refused)."""
    if topic.name in broker.image.topics:
        return 0
    if topic.num_partitions > 0:
        return topic.num_partitions
    return len(topic.assignments) or broker.config.num_partitions


@handlers.metadata_change(_refusal)
async def _create(broker, context, request):
    """Plan the topics against the image, commit them with the owner's ``submit`` (a lone broker's
    metadata log, or the controller quorum)."""
    known_configs = TOPIC_CONFIG_NAMES
    results, plans = [], []
    for topic in request.topics:  # no name twice: handle() answered those
        wanted = TopicRequest(
            topic.name, topic.num_partitions, topic.replication_factor,
            {a.partition_index: list(a.broker_ids) for a in topic.assignments},
            {c.name: c.value for c in topic.configs},
        )
        try:
            validate_topic_configs({name: value for name, value in wanted.configs.items() if value is not None})
        except ConfigsError as error:
            results.append(Result(name=topic.name, error_code=error.error_code, error_message=str(error)))
            continue
        try:
            plan = plan_topic(
                broker.image, wanted, default_partitions=broker.config.num_partitions,
                default_replication=broker.config.default_replication_factor, known_configs=known_configs,
            )
        except TopicError as error:
            results.append(Result(name=topic.name, error_code=error.error_code, error_message=str(error)))
            continue
        partitions = [record for record in plan if isinstance(record, records.PartitionRecord)]
        configs = None
        if context.api_version >= _CONFIGS_FROM:
            overrides = {name: value for name, value in wanted.configs.items() if value is not None}
            configs = [TopicConfig(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source, is_sensitive=e.sensitive)
                       for e in topic_entries(broker.config_layers, overrides, as_given=True)]
        results.append(Result(name=topic.name, topic_id=plan[0].topic_id, error_message=None,  # null, not ""
                              num_partitions=len(partitions), replication_factor=len(partitions[0].replicas),
                              configs=configs))
        plans.extend(plan)
    if plans and not request.validate_only:
        handlers.mark_not_made(results, await broker.submit(plans))
    return CreateTopicsResponse(topics=results)
