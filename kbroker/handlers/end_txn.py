"""EndTxn (26): commit or abort the producer's transaction.

Answered once the PrepareCommit/PrepareAbort record is durable, as Kafka
does; the markers and the completion follow in the background. From v5
(transaction protocol 2, KIP-890 part 2) the answer carries the producer's
bumped epoch.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.handlers.producer_fenced import deferred_for_client
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_transactional_id
from kbroker.wire.schema import API_BY_NAME

EndTxnResponse = API_BY_NAME["EndTxn"].response_class


@handlers.handles("EndTxn", 0, 5)
async def handle(broker, context, request):
    shell = broker.transactions
    try:
        require_transactional_id(broker, context, AclOperation.WRITE, request.transactional_id)
        shell.coordinator.check(request.transactional_id)
    except CoordinatorError as error:
        return EndTxnResponse(error_code=error.error_code)
    waiter = shell.new_waiter()
    shell.apply(request.transactional_id, shell.coordinator.end_txn(
        waiter, request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
        context.api_version, shell.now_ms()))
    return deferred_for_client("EndTxn", context.api_version, shell.deferred(waiter))
