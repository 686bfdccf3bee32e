"""DescribeTransactions (65): the state, timeout, producer and partitions of transactional ids."""

from __future__ import annotations

from kbroker import handlers
from wire.schema import API_BY_NAME

DescribeTransactionsResponse = API_BY_NAME["DescribeTransactions"].response_class


@handlers.handles("DescribeTransactions", 0, 0)
async def handle(broker, context, request):
    return DescribeTransactionsResponse(transaction_states=broker.transactions.coordinator.describe(request.transactional_ids))
