"""ListOffsets (2): earliest, latest, max timestamp, or the first offset at a timestamp.

kbroker keeps every segment locally (no tiered storage, KIP-405), so the earliest local offset (-4) is the
log start, and the latest tiered offset (-5) and the earliest offset pending upload (-6) are none: offset
-1 without an error, as Kafka answers for a topic without remote storage. Any other negative timestamp is
not one Kafka knows: UNSUPPORTED_VERSION."""

from kbroker import handlers
from kbroker.handlers.partition_guard import guard_topic
from kbroker.security.acls import AclOperation
from kbroker.log.partition_log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ListOffsetsResponse = API_BY_NAME["ListOffsets"].response_class
TopicResult = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResult = TopicResult.ListOffsetsPartitionResponse

READ_COMMITTED = 1
# The special timestamps and the version each came with (max timestamp KIP-734, earliest local KIP-405,
# latest tiered KIP-1005, earliest pending upload KIP-1023): an older request naming one is answered
# UNSUPPORTED_VERSION, as Kafka does.
_SPECIAL_TIMESTAMP_FROM = {-1: 0, -2: 0, -3: 7, -4: 8, -5: 9, -6: 11}
EARLIEST_LOCAL_TIMESTAMP, NOTHING_REMOTE = -4, (-5, -6)


@handlers.handles("ListOffsets", 1, 11)
async def handle(broker, context, request):
    topics = []
    for wanted_topic in request.topics:
        guard = guard_topic(broker, context, AclOperation.DESCRIBE, name=wanted_topic.name)
        results = []
        for wanted in wanted_topic.partitions:
            result = PartitionResult(partition_index=wanted.partition_index)
            results.append(result)
            result.error_code = guard.find(wanted.partition_index)
            if result.error_code == ErrorCode.NONE and wanted.timestamp < 0 and context.api_version < \
                    _SPECIAL_TIMESTAMP_FROM.get(wanted.timestamp, 1 << 15):  # before the leader is looked at, as Kafka does
                result.error_code = ErrorCode.UNSUPPORTED_VERSION
            if result.error_code != ErrorCode.NONE:
                continue
            partition, result.error_code = guard.local(wanted.partition_index, wanted.current_leader_epoch)
            if partition is None:
                continue
            # Consumers must not be told about offsets they cannot read yet.
            visible = partition.last_stable_offset if request.isolation_level == READ_COMMITTED else partition.high_watermark
            if wanted.timestamp == LATEST_TIMESTAMP:
                found = (-1, visible)
            elif wanted.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                found = (-1, partition.log.log_start_offset)
            elif wanted.timestamp in NOTHING_REMOTE:
                continue  # offset -1, leader epoch -1
            else:
                found = partition.log.offset_for_timestamp(wanted.timestamp)
                if found is not None and found[1] >= visible:
                    found = None
            if found is not None:
                result.timestamp, result.offset = found
                result.leader_epoch = partition.leader_epoch
        topics.append(TopicResult(name=wanted_topic.name, partitions=results))
    return ListOffsetsResponse(topics=topics)
