"""DescribeProducers (61): the active idempotent and transactional producers of partitions."""

from kbroker import handlers
from kbroker.handlers.partition_guard import guard_topic
from kbroker.security.acls import AclOperation
from kbroker.wire.schema import API_BY_NAME

DescribeProducersResponse = API_BY_NAME["DescribeProducers"].response_class
TopicResult = DescribeProducersResponse.TopicResponse
PartitionResult = TopicResult.PartitionResponse
ProducerResult = PartitionResult.ProducerState


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
