"""AddPartitionsToTxn (24): a transactional producer adds partitions to its transaction.

Up to v3 one transaction per request, from the producer; from v4 many, and
``verify_only`` is the partition leader asking whether a partition was added
(KIP-890 part 1) before it takes a transactional batch.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.handlers.producer_fenced import for_client
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed, allowed_on_cluster
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

AddPartitionsToTxnResponse = API_BY_NAME["AddPartitionsToTxn"].response_class
TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
_BATCHED_FROM = 4


@handlers.handles("AddPartitionsToTxn", 0, 5)
async def handle(broker, context, request):
    if context.api_version < _BATCHED_FROM:
        transactional_id, topics = request.v3_and_below_transactional_id, request.v3_and_below_topics
        refused = _refused(broker, context, transactional_id, topics)
        if refused is None:
            refused = await _add(broker, transactional_id, request.v3_and_below_producer_id,
                                 request.v3_and_below_producer_epoch, topics, False, context.api_version)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=refused)
    if not allowed_on_cluster(broker, context, AclOperation.CLUSTER_ACTION):  # v4+: brokers only (KIP-890)
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
    results = [TxnResult(transactional_id=txn.transactional_id,
                         topic_results=await _add(broker, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                  txn.topics, txn.verify_only))
               for txn in request.transactions]
    return AddPartitionsToTxnResponse(results_by_transaction=results)


async def _add(broker, transactional_id: str, producer_id: int, producer_epoch: int, topics, verify_only: bool,
               api_version: int = _BATCHED_FROM) -> list:
    shell = broker.transactions
    partitions = [(topic.name, index) for topic in topics for index in topic.partitions]
    unknown = {(topic, index) for topic, index in partitions if not _exists(broker, topic, index)}
    if unknown:  # as Kafka: nothing is added, the others are not attempted
        errors = {key: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if key in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for key in partitions}
        return _results(topics, errors)
    try:
        shell.coordinator.check(transactional_id)
        errors, effects = shell.coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                                           verify_only, shell.now_ms())
        if not await shell.wait_applied(transactional_id, effects):
            errors = {key: ErrorCode.COORDINATOR_NOT_AVAILABLE for key in partitions}
    except CoordinatorError as error:
        errors = {key: error.error_code for key in partitions}
    return _results(topics, {key: for_client("AddPartitionsToTxn", api_version, code) for key, code in errors.items()})


def _refused(broker, context, transactional_id: str, topics) -> list | None:
    """The answer when the client may not write to the transactional id or to one of the topics, else None."""
    partitions = [(topic.name, index) for topic in topics for index in topic.partitions]
    if not allowed(broker, context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return _results(topics, dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    refused = {topic.name for topic in topics
               if not allowed(broker, context, AclOperation.WRITE, ResourceType.TOPIC, topic.name)}
    if not refused:
        return None
    return _results(topics, {(name, index): ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in refused
                             else ErrorCode.OPERATION_NOT_ATTEMPTED for name, index in partitions})


def _exists(broker, topic: str, index: int) -> bool:
    image = broker.image.topics.get(topic)
    return image is not None and 0 <= index < len(image.partitions)


def _results(topics, errors) -> list:
    return [TopicResult(name=topic.name, results_by_partition=[
        PartitionResult(partition_index=index, partition_error_code=errors[(topic.name, index)]) for index in topic.partitions])
        for topic in topics]
