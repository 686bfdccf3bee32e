"""TxnOffsetCommit (28): a transactional producer commits a group's offsets inside its transaction.

The offsets are written to ``__consumer_offsets`` as part of the producer's
transaction and become visible (OffsetFetch) only when its COMMIT marker
reaches that partition; an ABORT drops them (kbroker/txn/markers.py).

As Kafka's KafkaApis.handleTxnOffsetCommitRequest, a topic the metadata does
not have, or a partition past its count, is answered UNKNOWN_TOPIC_OR_PARTITION
and kept out of the transaction; with nothing else to commit the transaction is
not consulted at all. From v6 topics are named by their ids (KIP-1319): an id no topic has is
UNKNOWN_TOPIC_ID, and the rest are committed as by name.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.group.shell import OFFSETS_TOPIC
from kbroker.txn.verification import add_to_transaction, ask_remote_coordinator, verify_in_transaction
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

TxnOffsetCommitResponse = API_BY_NAME["TxnOffsetCommit"].response_class
_TRANSACTION_VERSION_2_FROM = 5
_TOPIC_IDS_FROM = 6
TopicResult = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResult = TopicResult.TxnOffsetCommitResponsePartition


@handlers.handles("TxnOffsetCommit", 0, 6)
async def handle(broker, context, request):
    if context.api_version < _TOPIC_IDS_FROM:
        return await _handle_named(broker, context, request)
    names, asked = broker.image.topic_names, request.topics
    request.topics = [topic for topic in asked if topic.topic_id in names]
    for topic in request.topics:
        topic.name = names[topic.topic_id]
    answered = await _handle_named(broker, context, request) if request.topics else TxnOffsetCommitResponse()
    results = dict(zip(map(id, request.topics), answered.topics))
    answered.topics = [results.get(id(topic)) or TopicResult(topic_id=topic.topic_id, partitions=[
        PartitionResult(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in topic.partitions])
        for topic in asked]
    return answered


async def _handle_named(broker, context, request):
    # The group cores load at the first group request.
    from kbroker.group.offsets import CommittedOffset, unknown_partitions

    shell, now = broker.groups, broker.groups.now_ms()
    commits = {
        (topic.name, partition.partition_index): CommittedOffset(
            offset=partition.committed_offset, leader_epoch=partition.committed_leader_epoch,
            metadata=partition.committed_metadata or "", commit_timestamp_ms=now)
        for topic in request.topics for partition in topic.partitions
    }
    refused = _refused(broker, context, request)
    if refused:
        return _answer(request, refused)
    unknown = dict.fromkeys(unknown_partitions(broker.image.topics, commits), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    commits = {key: committed for key, committed in commits.items() if key not in unknown}
    if not commits:
        return _answer(request, unknown)
    if context.api_version >= _TRANSACTION_VERSION_2_FROM:
        await _add_to_transaction(broker, request)
    remote = await _ask_remote_coordinator(broker, request, add=context.api_version >= _TRANSACTION_VERSION_2_FROM)
    refused = _verify(broker, request, context.api_version, remote)
    if refused != ErrorCode.NONE:
        errors = dict.fromkeys(commits, refused)
    else:
        errors = await _commit(shell, request, commits)
    return _answer(request, errors | unknown)


def _refused(broker, context, request) -> dict:
    """Each partition's authorization error: WRITE on the transactional id, READ on the group and topics."""
    partitions = [(topic.name, p.partition_index) for topic in request.topics for p in topic.partitions]
    if not allowed(broker, context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(broker, context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return dict.fromkeys(partitions, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = {name for name, _ in partitions if not allowed(broker, context, AclOperation.READ, ResourceType.TOPIC, name)}
    if not refused:
        return {}
    return {(name, index): ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in refused else ErrorCode.OPERATION_NOT_ATTEMPTED
            for name, index in partitions}


def _answer(request, errors: dict):
    return TxnOffsetCommitResponse(topics=[
        TopicResult(name=topic.name, topic_id=topic.topic_id, partitions=[
            PartitionResult(partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])


async def _add_to_transaction(broker, request) -> None:
    """Transaction version 2: the group's offsets partition joins the transaction here, as the
    client no longer sends AddOffsetsToTxn."""
    try:
        broker.groups.coordinator.check(request.group_id)
    except CoordinatorError:
        return
    index = broker.groups.partition_of(request.group_id)
    await add_to_transaction(broker, request.transactional_id, OFFSETS_TOPIC, index,
                             broker.partition(OFFSETS_TOPIC, index).log.producer_state, request.producer_id,
                             request.producer_epoch)


async def _ask_remote_coordinator(broker, request, *, add: bool):
    """The producer's coordinator's answer, when it is on another broker (kbroker/txn/verification.py)."""
    try:
        broker.groups.coordinator.check(request.group_id)
    except CoordinatorError:
        return None
    index = broker.groups.partition_of(request.group_id)
    return await ask_remote_coordinator(broker, request.transactional_id, OFFSETS_TOPIC, index,
                                        broker.partition(OFFSETS_TOPIC, index).log.producer_state,
                                        request.producer_id, request.producer_epoch, add=add)


def _verify(broker, request, version: int, remote=None) -> int:
    """The group's offsets partition must be in the producer's transaction (KIP-890 part 1)."""
    try:
        broker.groups.coordinator.check(request.group_id)
    except CoordinatorError as error:
        return error.error_code
    index = broker.groups.partition_of(request.group_id)
    state = broker.partition(OFFSETS_TOPIC, index).log.producer_state
    return verify_in_transaction(broker, request.transactional_id, OFFSETS_TOPIC, index, state, request.producer_id,
                                 request.producer_epoch, abortable_known=version >= 4, remote=remote)


async def _commit(shell, request, commits) -> dict:
    try:
        errors, effects = shell.coordinator.commit_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch, request.member_id, request.group_instance_id,
            request.generation_id, commits)
        if not await shell.wait_applied(request.group_id, effects):
            errors = {key: ErrorCode.COORDINATOR_NOT_AVAILABLE for key in errors}
    except CoordinatorError as error:
        errors = {key: error.error_code for key in commits}
    return errors
