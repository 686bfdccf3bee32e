"""DescribeTopicPartitions (75): topics' partitions in name order, paged by a cursor as Kafka pages them."""

from kbroker import handlers
from kbroker.metadata.image import INTERNAL_TOPIC_NAMES
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed, authorized_operations
from kbroker.topics import TopicError, validate_topic_name
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

Response = API_BY_NAME["DescribeTopicPartitions"].response_class
Topic = Response.DescribeTopicPartitionsResponseTopic
Partition = Topic.DescribeTopicPartitionsResponsePartition
Cursor = Response.Cursor

MAX_PARTITIONS_PER_RESPONSE = 2000  # Kafka's max.request.partition.size.limit default
# With no authorizer Kafka grants every operation a topic supports: READ(3), WRITE(4), CREATE(5), DELETE(6),
# ALTER(7), DESCRIBE(8), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11), as a bit field.
TOPIC_OPERATIONS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))


@handlers.handles("DescribeTopicPartitions", 0, 0)
async def handle(broker, context, request):
    image, cursor = broker.image, request.cursor
    first_name = cursor.topic_name if cursor is not None else ""
    everything = not request.topics
    names = sorted(n for n in (image.topics if everything else {t.name for t in request.topics}) if n >= first_name)
    if cursor is not None and (cursor.partition_index < 0 or (not everything and cursor.topic_name not in names)):
        return Response(topics=[Topic(name=t.name, error_code=ErrorCode.INVALID_REQUEST, topic_id=ZERO_UUID, partitions=[]) for t in request.topics])
    live = {b.node_id for b in image.live_brokers}
    remaining = max(min(MAX_PARTITIONS_PER_RESPONSE, request.response_partition_limit), 1)
    response = Response(topics=[], next_cursor=None)
    for name in names:
        if remaining == 0:
            response.next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        topic = image.topics.get(name)
        if not allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if not everything:  # asked for by name: refused; when listing all, left out (as Metadata)
                response.topics.append(Topic(name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                             topic_id=ZERO_UUID, partitions=[]))
            continue
        if topic is None:
            if not everything:
                response.topics.append(_missing(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        end = min(len(topic.partitions), start + remaining)
        partitions = [_partition(p, live) for p in topic.partitions[start:end]]
        response.topics.append(Topic(name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
                                     partitions=partitions, topic_authorized_operations=authorized_operations(
                                         broker, context, ResourceType.TOPIC, name)))
        if end < len(topic.partitions):
            response.next_cursor = Cursor(topic_name=name, partition_index=end)
            break
        remaining -= len(partitions)
    return response


def _partition(state, live: set[int]) -> object:
    return Partition(
        partition_index=state.partition,
        leader_id=state.leader if state.leader in live else -1,
        leader_epoch=state.leader_epoch,
        replica_nodes=list(state.replicas),
        isr_nodes=list(state.isr),
        eligible_leader_replicas=[],  # no ELR (KIP-966) without unclean-recovery support
        last_known_elr=[],
        offline_replicas=[r for r in state.replicas if r not in live],
    )


def _missing(name: str) -> object:
    try:
        validate_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except TopicError:
        code = ErrorCode.INVALID_TOPIC_EXCEPTION
    return Topic(name=name, error_code=code, topic_id=ZERO_UUID, is_internal=name in INTERNAL_TOPIC_NAMES,
                 partitions=[], topic_authorized_operations=TOPIC_OPERATIONS)
