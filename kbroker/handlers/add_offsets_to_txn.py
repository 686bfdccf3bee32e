"""AddOffsetsToTxn (25): the transaction will commit a group's offsets (its __consumer_offsets partition joins it)."""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.handlers.producer_fenced import for_client
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_group, require_transactional_id
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

AddOffsetsToTxnResponse = API_BY_NAME["AddOffsetsToTxn"].response_class


@handlers.handles("AddOffsetsToTxn", 0, 4)
async def handle(broker, context, request):
    shell = broker.transactions
    try:
        require_transactional_id(broker, context, AclOperation.WRITE, request.transactional_id)
        require_group(broker, context, AclOperation.READ, request.group_id)
        shell.coordinator.check(request.transactional_id)
        await broker.groups.ensure_topic()  # the group's offsets partition must exist to take the markers
        error_code, effects = shell.coordinator.add_offsets(request.transactional_id, request.producer_id,
                                                            request.producer_epoch, request.group_id, shell.now_ms())
    except CoordinatorError as error:
        return AddOffsetsToTxnResponse(error_code=error.error_code)
    if not await shell.wait_applied(request.transactional_id, effects):
        error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return AddOffsetsToTxnResponse(error_code=for_client("AddOffsetsToTxn", context.api_version, error_code))
