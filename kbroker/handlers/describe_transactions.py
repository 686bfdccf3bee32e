"""DescribeTransactions (65): the state, timeout, producer and partitions of transactional ids."""

from __future__ import annotations

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeTransactionsResponse = API_BY_NAME["DescribeTransactions"].response_class


@handlers.handles("DescribeTransactions", 0, 0)
async def handle(broker, context, request):
    ids = request.transactional_ids
    visible = [i for i in ids if allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, i)]
    described = {state.transactional_id: state for state in broker.transactions.coordinator.describe(visible)}
    Described = DescribeTransactionsResponse.TransactionState
    return DescribeTransactionsResponse(transaction_states=[
        described.get(i) or Described(transactional_id=i, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        for i in ids])
