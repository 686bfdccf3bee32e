"""ListOffsets (2): earliest, latest, max timestamp, or the first offset at a timestamp."""

from kbroker import handlers
from kbroker.handlers.leader_hints import leader_epoch_error
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.log.partition_log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ListOffsetsResponse = API_BY_NAME["ListOffsets"].response_class
TopicResult = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResult = TopicResult.ListOffsetsPartitionResponse

READ_COMMITTED = 1


@handlers.handles("ListOffsets", 1, 10)
async def handle(broker, context, request):
    topics = []
    for wanted_topic in request.topics:
        topic = broker.image.topics.get(wanted_topic.name)
        described = allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TOPIC, wanted_topic.name)
        results = []
        for wanted in wanted_topic.partitions:
            result = PartitionResult(partition_index=wanted.partition_index)
            results.append(result)
            if not described:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if topic is None or not 0 <= wanted.partition_index < len(topic.partitions):
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if not broker.leads(topic, wanted.partition_index):
                result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            partition = broker.partition(topic.name, wanted.partition_index)
            result.error_code = leader_epoch_error(partition, wanted.current_leader_epoch)
            if result.error_code != ErrorCode.NONE:
                continue
            # Consumers must not be told about offsets they cannot read yet.
            visible = partition.last_stable_offset if request.isolation_level == READ_COMMITTED else partition.high_watermark
            if wanted.timestamp == LATEST_TIMESTAMP:
                found = (-1, visible)
            elif wanted.timestamp == EARLIEST_TIMESTAMP:
                found = (-1, partition.log.log_start_offset)
            else:
                found = partition.log.offset_for_timestamp(wanted.timestamp)
                if found is not None and found[1] >= visible:
                    found = None
            if found is not None:
                result.timestamp, result.offset = found
                result.leader_epoch = partition.leader_epoch
        topics.append(TopicResult(name=wanted_topic.name, partitions=results))
    return ListOffsetsResponse(topics=topics)
