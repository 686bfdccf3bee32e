"""ListTransactions (66): transactional ids filtered by state, producer id, (v1+) how long
they have been open and (v2+) a regular expression on the id."""

from __future__ import annotations

import re

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.effects import CoordinatorError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ListTransactionsResponse = API_BY_NAME["ListTransactions"].response_class


@handlers.handles("ListTransactions", 0, 2)
async def handle(broker, context, request):
    from kbroker.txn.metadata import TxnState

    states = {name: TxnState.from_kafka_name(name) for name in request.state_filters}
    unknown = [name for name, state in states.items() if state is None]
    matches = lambda _: True  # noqa: E731
    if request.transactional_id_pattern:
        try:
            pattern = re.compile(request.transactional_id_pattern)
        except re.error:
            return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION)
        matches = pattern.fullmatch
    known = [state for state in states.values() if state is not None]
    if states and not known:  # only unknown states asked for: nothing matches
        return ListTransactionsResponse(unknown_state_filters=unknown)
    try:
        listed = broker.transactions.coordinator.list_transactions(
            known, request.producer_id_filters,
            request.duration_filter, broker.transactions.now_ms(), matches)
    except CoordinatorError as error:
        return ListTransactionsResponse(error_code=error.error_code)
    listed = [t for t in listed
              if allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)]
    return ListTransactionsResponse(unknown_state_filters=unknown, transaction_states=listed)
