"""DescribeProducers (61): the active idempotent and transactional producers of partitions."""

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeProducersResponse = API_BY_NAME["DescribeProducers"].response_class
TopicResult = DescribeProducersResponse.TopicResponse
PartitionResult = TopicResult.PartitionResponse
ProducerResult = PartitionResult.ProducerState


@handlers.handles("DescribeProducers", 0, 0)
async def handle(broker, context, request):
    topics = []
    for wanted_topic in request.topics:
        topic = broker.image.topics.get(wanted_topic.name)
        results = []
        readable = allowed(broker, context, AclOperation.READ, ResourceType.TOPIC, wanted_topic.name)
        for index in wanted_topic.partition_indexes:
            if not readable:
                results.append(PartitionResult(partition_index=index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if topic is None or not 0 <= index < len(topic.partitions):
                results.append(PartitionResult(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            state = broker.partition(topic.name, index).log.producer_state
            producers = [_producer(producer_id, entry) for producer_id, entry in sorted(state.producer_entries().items())]
            results.append(PartitionResult(partition_index=index, active_producers=producers))
        topics.append(TopicResult(name=wanted_topic.name, partitions=results))
    return DescribeProducersResponse(topics=topics)


def _producer(producer_id: int, entry) -> object:
    return ProducerResult(
        producer_id=producer_id,
        producer_epoch=entry.producer_epoch,
        last_sequence=entry.last_sequence,
        last_timestamp=entry.last_timestamp,
        coordinator_epoch=entry.coordinator_epoch,
        current_txn_start_offset=entry.current_txn_first_offset if entry.has_ongoing_txn else -1,
    )
