"""DeleteRecords (21): move partitions' log start offsets forward; the low watermark is the new start."""

from kbroker import handlers
from kbroker.handlers.partition_guard import guard_topic
from kbroker.security.acls import AclOperation
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DeleteRecordsResponse = API_BY_NAME["DeleteRecords"].response_class
TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1  # "delete everything readable", as DeleteRecordsRequest.HIGH_WATERMARK


@handlers.handles("DeleteRecords", 0, 2)
async def handle(broker, context, request):
    topics, moved = [], False
    for wanted_topic in request.topics:
        guard = guard_topic(broker, context, AclOperation.DELETE, name=wanted_topic.name)
        results = []
        for wanted in wanted_topic.partitions:
            result = PartitionResult(partition_index=wanted.partition_index, low_watermark=-1)
            results.append(result)
            partition, result.error_code = guard.partition(wanted.partition_index)
            if partition is None:
                continue
            result.error_code = _delete_below(partition, wanted.offset)
            if result.error_code == ErrorCode.NONE:
                result.low_watermark = partition.log.log_start_offset
                moved = True
        topics.append(TopicResult(name=wanted_topic.name, partitions=results))
    if moved:
        # Deleted records must stay deleted across a restart, so the new start is checkpointed now.
        await broker.checkpoint_logs()
    return DeleteRecordsResponse(topics=topics)


def _delete_below(partition, offset: int) -> int:
    """Kafka's Partition.deleteRecordsOnLeader: only below the high watermark, only where deletion is the policy."""
    if not partition.log.config.delete:
        return ErrorCode.POLICY_VIOLATION
    high_watermark = partition.high_watermark
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if not 0 <= target <= high_watermark:
        return ErrorCode.OFFSET_OUT_OF_RANGE
    partition.log.advance_log_start_offset(target)
    return ErrorCode.NONE
