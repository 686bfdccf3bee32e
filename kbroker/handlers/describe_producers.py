"""DescribeProducers (61): the active idempotent and transactional producers of partitions."""

from kbroker import handlers
from kbroker.handlers.partition_guard import guard_topic
from kbroker.security.acls import AclOperation
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeProducersResponse = API_BY_NAME["DescribeProducers"].response_class
TopicResult = DescribeProducersResponse.TopicResponse
PartitionResult = TopicResult.PartitionResponse
ProducerResult = PartitionResult.ProducerState
# Kafka's KafkaApis refuses a topic it may not show or does not know with ApiError(error), which carries the
# error's own message; a partition the topic lacks is the replica manager's answer, with none.
_REFUSED_TOPIC = {ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition."}


@handlers.handles("DescribeProducers", 0, 0)
async def handle(broker, context, request):
    topics = []
    for wanted_topic in request.topics:
        guard = guard_topic(broker, context, AclOperation.READ, name=wanted_topic.name)
        results = []
        for index in wanted_topic.partition_indexes:
            result = PartitionResult(partition_index=index)
            results.append(result)
            # A follower answers too (Kafka's ReplicaManager.activeProducerState), from its own copy.
            partition, result.error_code = guard.partition(index, require_leader=False)
            if guard.error_code != ErrorCode.NONE or guard.topic is None:
                result.error_message = _REFUSED_TOPIC.get(result.error_code)
            if partition is not None:
                state = partition.log.producer_state
                result.active_producers = [_producer(producer_id, entry)
                                           for producer_id, entry in sorted(state.producer_entries().items())]
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
