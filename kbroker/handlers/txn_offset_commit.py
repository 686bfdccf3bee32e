"""TxnOffsetCommit (28): a transactional producer commits a group's offsets inside its transaction.

The offsets are written to ``__consumer_offsets`` as part of the producer's
transaction and become visible (OffsetFetch) only when its COMMIT marker
reaches that partition; an ABORT drops them (kbroker/txn/markers.py).
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.group.shell import now_ms
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

TxnOffsetCommitResponse = API_BY_NAME["TxnOffsetCommit"].response_class
TopicResult = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResult = TopicResult.TxnOffsetCommitResponsePartition


@handlers.handles("TxnOffsetCommit", 0, 5)
async def handle(broker, context, request):
    from kbroker.group.offsets import CommittedOffset  # the group cores load at the first group request

    shell, now = broker.groups, now_ms()
    commits = {
        (topic.name, partition.partition_index): CommittedOffset(
            offset=partition.committed_offset, leader_epoch=partition.committed_leader_epoch,
            metadata=partition.committed_metadata or "", commit_timestamp_ms=now)
        for topic in request.topics for partition in topic.partitions
    }
    try:
        errors, effects = shell.coordinator.commit_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch, request.member_id, request.group_instance_id,
            request.generation_id, commits)
        if not await shell.wait_applied(request.group_id, effects):
            errors = {key: ErrorCode.COORDINATOR_NOT_AVAILABLE for key in errors}
    except CoordinatorError as error:
        errors = {key: error.error_code for key in commits}
    return TxnOffsetCommitResponse(topics=[
        TopicResult(name=topic.name, partitions=[
            PartitionResult(partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])
