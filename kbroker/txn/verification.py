"""KIP-890 part 1: a partition takes the first transactional write of a producer's
transaction (a Produce batch, a TxnOffsetCommit) only once the transaction
coordinator confirms that the partition was added to that transaction.

Without it, a late write of a transaction that already ended (or of a fenced
producer) would open a transaction that no marker ever ends, and the partition's
last stable offset would stop there. The coordinator is in this process: asking
it and appending happen with no pause between, so no marker can slip in between
(what Kafka's verification guard is for).
"""

from __future__ import annotations

from kbroker.effects import CoordinatorError
from wire.errors import ErrorCode


def verify_in_transaction(broker, transactional_id: str | None, topic: str, index: int, producer_state,
                          producer_id: int, producer_epoch: int, *, abortable_known: bool) -> int:
    """The error code for the write, NONE if it may be appended. ``abortable_known``: the
    request's version knows TRANSACTION_ABORTABLE (older clients get INVALID_TXN_STATE)."""
    entry = producer_state.producer_entry(producer_id)
    if entry is not None and entry.has_ongoing_txn and entry.producer_epoch == producer_epoch:
        return ErrorCode.NONE  # verified when the transaction's first write came
    if not transactional_id:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # Kafka's answer to a transactional write without one
    coordinator = broker.transactions.coordinator
    try:
        coordinator.check(transactional_id)
    except CoordinatorError:
        return ErrorCode.NOT_ENOUGH_REPLICAS  # the coordinator is loading or absent: retriable for every client
    errors, _ = coordinator.add_partitions(transactional_id, producer_id, producer_epoch, [(topic, index)],
                                           verify_only=True, now_ms=0)
    code = errors[(topic, index)]
    if code == ErrorCode.TRANSACTION_ABORTABLE and not abortable_known:
        return ErrorCode.INVALID_TXN_STATE
    return _AS_WRITE_ERROR.get(code, code)


# Coordinator answers as a writer expects them (Kafka's mapping in its partition leaders).
_AS_WRITE_ERROR = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
}
