"""InitProducerId (22): a cluster-unique producer id (kbroker.producer_ids) for an idempotent
producer; for a transactional id, the transaction coordinator's id and epoch (the previous
producer of that id is fenced, and its open transaction aborted first)."""

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.handlers.producer_fenced import deferred_for_client
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed_on_any, allowed_on_cluster, require_transactional_id
from kbroker.wire.errors import ErrorCode
from kbroker.producer_ids import NoProducerIds
from kbroker.wire.schema import API_BY_NAME

InitProducerIdResponse = API_BY_NAME["InitProducerId"].response_class


@handlers.handles("InitProducerId", 0, 5)
async def handle(broker, context, request):
    if not broker.producer_ids.available(broker):  # a block is on its way from the controller
        return InitProducerIdResponse(error_code=NoProducerIds.error_code, producer_id=-1, producer_epoch=-1)
    if request.transactional_id is not None:
        shell = broker.transactions
        try:
            require_transactional_id(broker, context, AclOperation.WRITE, request.transactional_id)
            shell.coordinator.check(request.transactional_id)
        except CoordinatorError as error:
            return InitProducerIdResponse(error_code=error.error_code, producer_id=-1, producer_epoch=-1)
        waiter = shell.new_waiter()
        shell.apply(request.transactional_id, shell.coordinator.init_producer_id(
            waiter, request.transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch,
            context.api_version, shell.now_ms()))
        return deferred_for_client("InitProducerId", context.api_version, shell.deferred(waiter))
    # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
    if not (allowed_on_cluster(broker, context, AclOperation.IDEMPOTENT_WRITE)
            or allowed_on_any(broker, context, AclOperation.WRITE, ResourceType.TOPIC)):
        return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1,
                                      producer_epoch=-1)
    producer_id = broker.producer_ids.take(broker)
    return InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)
