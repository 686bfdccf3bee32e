"""OffsetForLeaderEpoch (23): where a leader epoch ends in this leader's log (KIP-101, KIP-320).

A consumer whose partition changed leaders asks for the end of the epoch of the last record it
consumed: an end below its position means the log it read from was truncated, and it must
reset. The answer comes from the leader-epoch checkpoint: the largest epoch at or below the one
asked for, and the start of the next epoch, or the log end offset for the latest one. Replica ids
of brokers (v3+) need CLUSTER_ACTION; anyone else needs DESCRIBE on the topic, as in Kafka.
"""

from kbroker import handlers
from kbroker.handlers.partition_guard import guard_topic
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster
from kbroker.wire.schema import API_BY_NAME

OffsetForLeaderEpochResponse = API_BY_NAME["OffsetForLeaderEpoch"].response_class
TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset


@handlers.handles("OffsetForLeaderEpoch", 2, 4)
async def handle(broker, context, request):
    cluster_action = allowed_on_cluster(broker, context, AclOperation.CLUSTER_ACTION)
    topics = []
    for wanted_topic in request.topics:
        guard = guard_topic(broker, context, AclOperation.DESCRIBE, name=wanted_topic.topic,
                            authorized=True if cluster_action else None)
        results = [_end_of_epoch(guard, wanted) for wanted in wanted_topic.partitions]
        topics.append(TopicResult(topic=wanted_topic.topic, partitions=results))
    return OffsetForLeaderEpochResponse(topics=topics)


def _end_of_epoch(guard, wanted) -> EpochEndOffset:
    result = EpochEndOffset(partition=wanted.partition)
    partition, result.error_code = guard.partition(wanted.partition, wanted.current_leader_epoch)
    epochs = partition.log.leader_epochs if partition is not None else None
    if epochs is not None:
        result.leader_epoch, result.end_offset = epochs.end_offset_for(wanted.leader_epoch, partition.log.log_end_offset)
    return result
