"""Produce (0): validate each partition's batch, append, answer by acks.

Batches stay opaque: records are never decoded here. Each partition's batch
headers are parsed once (kbroker/log/validator.py, ``read_produced``), used for
the transaction's checks, validated (``validate_produce``: CRC, size, codec, and
the records only where the topic's settings need them) and handed to the log,
which stamps the offsets. acks=0 gets no response, acks=1 is answered once the
batch is in the log and visible: on a lone in-sync replica, whose high watermark is
its fsynced end, once fsynced (as when it reached the topic's flush.messages, as in
Kafka); acks=all once the whole ISR has it fsynced.
"""

from __future__ import annotations

import logging

import trio

from kbroker import handlers
from kbroker.event_log import RepeatedWarning
from kbroker.handlers.interfaces import HandlerNode
from kbroker.handlers.leader_hints import hint_leader, node_endpoints
from kbroker.handlers.partition_guard import TopicGuard, guard_topic
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.security.quotas import PRODUCER_BYTE_RATE
from kbroker.txn.verification import add_to_transaction, ask_remote_coordinator, verify_in_transaction
from kbroker.log.append_origin import AppendOrigin
from kbroker.log.descriptor_cache import out_of_descriptors
from kbroker.log.offline import LogDirOffline, out_of_space
from kbroker.log.partition_log import AppendResult, ProducerStateError, WriteBeforeFsyncFailed
from kbroker.log.deposed import NotLeaderForEpoch
from kbroker.log.validator import BatchRefused, ProducedBatches, read_produced, validate_produce
from kbroker.schemas.validation import check_batch, validates
from kbroker.wire import DecodeError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

logger = logging.getLogger("kbroker.handlers.produce")
_storage_refusals = RepeatedWarning(logger, "%s: produce answered KAFKA_STORAGE_ERROR: %s")

ProduceResponse = API_BY_NAME["Produce"].response_class
TopicResult = ProduceResponse.TopicProduceResponse
PartitionResult = TopicResult.PartitionProduceResponse
RecordErrorResult = PartitionResult.BatchIndexAndErrorMessage

_TRANSACTION_VERSION_2_FROM = 12  # the partition adds itself to the producer's transaction (KIP-890 part 2)


@handlers.handles("Produce", 0, 13)
async def handle(broker: HandlerNode, context, request):
    version = context.api_version
    topics = []
    durable_waits = []
    leaders: set[int] = set()  # of partitions this broker does not lead (KIP-951)
    transaction_allowed = not request.transactional_id or allowed(
        broker, context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    for topic_data in request.topic_data:
        # v13 names a topic by its id (KIP-516): an id no topic has is UNKNOWN_TOPIC_ID
        guard = guard_topic(broker, context, AclOperation.WRITE, name=topic_data.name) if version < 13 else \
            guard_topic(broker, context, AclOperation.WRITE, topic_id=topic_data.topic_id)
        partitions = []
        for data in topic_data.partition_data:
            # Kafka's answer to a refused partition: no offsets, no times (its PartitionResponse(error))
            result = PartitionResult(index=data.index, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
            partitions.append(result)
            if not transaction_allowed:
                result.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                continue
            partition = _partition_to_append(broker, request, guard, data.index, result, leaders)
            if partition is None:
                continue
            produced = read_produced(data.records)  # the batch headers, parsed once for this partition
            if validates(partition.log.config):  # the schemas registered so far, to check the records against
                await broker.schemas().catch_up_if_held()
            remote = await _join_transaction(broker, request.transactional_id, partition, produced, version)
            appended = _append(broker, request.transactional_id, partition, produced, result, version, remote)
            if appended is not None:
                partition.start_flush(appended.last_offset)  # acks=0 never waits for it; acks=1 only on a lone replica
                durable_waits.append((guard.topic, partition, appended, result))
        topics.append(TopicResult(name=topic_data.name, topic_id=topic_data.topic_id, partition_responses=partitions))

    produced = sum(len(data.records or b"") for topic_data in request.topic_data for data in topic_data.partition_data)
    response = ProduceResponse(responses=topics, throttle_time_ms=context.throttle(PRODUCER_BYTE_RATE, produced))
    if leaders:
        response.node_endpoints = node_endpoints(broker.image, leaders, ProduceResponse, context.listener)
    if request.acks == -1 and durable_waits:
        timeout_s = max(request.timeout_ms, 0) / 1000  # the wait keeps no reference to the request's records

        async def committed():
            with trio.move_on_after(timeout_s):
                for _, partition, appended, result in durable_waits:  # their fsyncs are all under way already
                    try:
                        await partition.wait_committed(appended.last_offset, appended.leader_epoch)
                    except NotLeaderForEpoch:
                        pass  # answered below
                    except OSError as error:
                        if not (out_of_descriptors(error)
                                or isinstance(error, (LogDirOffline, WriteBeforeFsyncFailed))):
                            raise
                        # the fsync could not open its files, or write what comes first (a full disk: tried
                        # again by the next flush), or failed: the log directory is offline
                        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            moved = []  # the writes whose leader was deposed before they were committed
            for topic, partition, appended, result in durable_waits:
                if result.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                    continue
                try:
                    done = partition.committed_under(appended.last_offset, appended.leader_epoch)
                except NotLeaderForEpoch:  # the new leader may not have it: as Kafka's DelayedProduce answers
                    result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    moved.append((partition.topic, partition.index, result))
                    continue
                if not done:
                    result.error_code = ErrorCode.REQUEST_TIMED_OUT  # written here, not (yet) on the whole ISR
                elif len(partition.isr) < broker.min_insync_replicas(topic):
                    result.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            if moved:  # where the partitions went (KIP-951), as the image says now
                _hint_new_leaders(broker, context, response, moved, leaders)

        return handlers.Deferred(response, committed)
    if request.acks == 0:
        return None
    flushing = [(partition, appended.last_offset, result) for _, partition, appended, result in durable_waits
                if partition.flush_policy_waits(appended.last_offset)
                or partition.visible_once_durable(appended.last_offset)]
    if flushing:
        return handlers.Deferred(response, lambda: _wait_flushed(flushing))
    return response


def _hint_new_leaders(broker: HandlerNode, context, response, moved: list, leaders: set[int]) -> None:
    for topic_name, index, result in moved:
        topic = broker.image.topics.get(topic_name)
        if topic is not None and index < len(topic.partitions):
            hint_leader(topic, index, result, leaders)
    if leaders:
        response.node_endpoints = node_endpoints(broker.image, leaders, ProduceResponse, context.listener)


async def _wait_flushed(flushing) -> None:
    """acks=1, answered after the fsync already started: where flush.messages was reached (Kafka's append
    fsyncs before it returns), and on a lone in-sync replica, whose records are visible once fsynced."""
    for partition, last_offset, result in flushing:
        try:
            await partition.wait_durable(last_offset)
        except OSError:
            result.error_code = ErrorCode.KAFKA_STORAGE_ERROR


def _partition_to_append(broker: HandlerNode, request, guard: TopicGuard, index: int, result, leaders: set[int]):
    """The partition to append to, or None with ``result.error_code`` set. Kafka's order: the topic's
    authorization and existence (KafkaApis.handleProduceRequest), the acks (ReplicaManager.appendRecords),
    then leadership and the ISR's size (Partition.appendRecordsToLeader)."""
    result.error_code = guard.find(index)
    if result.error_code == ErrorCode.NONE and request.acks not in (-1, 0, 1):
        result.error_code = ErrorCode.INVALID_REQUIRED_ACKS
    if result.error_code != ErrorCode.NONE:
        return None
    partition, result.error_code = guard.local(index)
    if result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        hint_leader(guard.topic, index, result, leaders)
    if partition is None:
        return None
    if request.acks == -1 and len(guard.topic.partitions[index].isr) < broker.min_insync_replicas(guard.topic):
        result.error_code = ErrorCode.NOT_ENOUGH_REPLICAS  # refused before anything is written
        return None
    return partition


async def _join_transaction(broker: HandlerNode, transactional_id: str | None, partition,
                            produced: ProducedBatches, version: int):
    """For a transactional batch, before it is validated (Kafka's order): a transaction version 2 client's
    partition joins its transaction (KIP-890 part 2), and what a remote coordinator knows is asked.
    None for any other batch, a batch whose header does not parse included."""
    header = produced.transactional_header
    if header is None:
        return None
    add = version >= _TRANSACTION_VERSION_2_FROM
    if add and transactional_id:
        await add_to_transaction(broker, transactional_id, partition.topic, partition.index,
                                 partition.log.producer_state, header.producer_id, header.producer_epoch)
    return await ask_remote_coordinator(broker, transactional_id, partition.topic, partition.index,
                                        partition.log.producer_state, header.producer_id, header.producer_epoch,
                                        add=add)


def _append(broker: HandlerNode, transactional_id: str | None, partition, produced: ProducedBatches, result,
            version: int, remote=None) -> AppendResult | None:
    """Append one partition's batch; what was written, or None with the error set in ``result``."""
    log = partition.log
    try:
        validated = validate_produce(produced, log.config, partition.topic, partition.index, version,
                                     partition.clock.wall_ms())
        if validates(log.config):
            check_batch(validated.buffer, log.config, partition.topic, partition.index, broker.schemas().registry)
    except BatchRefused as refusal:
        _refuse(result, refusal)
        return None
    except DecodeError as error:
        _refuse(result, BatchRefused.undecodable(error))
        return None
    header = validated.batches[0][1]
    if header.is_transactional:
        error_code = verify_in_transaction(broker, transactional_id, partition.topic, partition.index,
                                           partition.log.producer_state, header.producer_id, header.producer_epoch,
                                           abortable_known=version >= 11, remote=remote)
        if error_code != ErrorCode.NONE:
            result.error_code = error_code
            return None
    try:
        appended = partition.append(validated, origin=AppendOrigin.CLIENT)
    except ProducerStateError as error:  # refused by the log, as Kafka's: its log start, no message
        result.error_code = error.error_code
        result.log_start_offset = log.log_start_offset
        return None
    except LogDirOffline as error:
        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        result.error_message = str(error)
        return None
    except OSError as error:
        if not (out_of_descriptors(error) or out_of_space(error)):
            raise
        # As Kafka answers an I/O error appending (ReplicaManager.appendToLocalLog): KAFKA_STORAGE_ERROR, which
        # producers retry, so that they go on once space or descriptors are found again. Unlike Kafka the log
        # directory stays online: nothing written before is in doubt, and an operator frees space without a
        # restart. Nothing of the refused batch stays in the log (kbroker/log/partition_log.py).
        _storage_refusals.warn(f"{partition.topic}-{partition.index}", error)
        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        result.error_message = "no space left on the log directory" if out_of_space(error) else "out of file descriptors"
        return None
    result.base_offset = appended.first_offset
    result.log_append_time_ms = appended.log_append_time
    result.log_start_offset = log.log_start_offset
    if broker.metrics is not None:
        broker.metrics.produced(partition.topic, len(validated.buffer), header.record_count)
    return appended


def _refuse(result, refusal: BatchRefused) -> None:
    """The partition's answer to a refused batch; record errors as Kafka answers a RecordValidationException."""
    result.error_code = refusal.error_code
    if refusal.message is not None:
        result.error_message = refusal.message
    if refusal.record_errors:
        result.record_errors = [RecordErrorResult(batch_index=e.batch_index, batch_index_error_message=e.message)
                                for e in refusal.record_errors]
