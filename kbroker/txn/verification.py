"""KIP-890 part 1: a partition takes the first transactional write of a producer's
transaction (a Produce batch, a TxnOffsetCommit) only once the transaction
coordinator confirms that the partition was added to that transaction.

Without it, a late write of a transaction that already ended (or of a fenced
producer) would open a transaction that no marker ever ends, and the partition's
last stable offset would stop there. The coordinator is in this process: asking
it and appending happen with no pause between, so no marker can slip in between.
When the coordinator is on another broker, ``ask_remote_coordinator`` asks it over
the network first, under a guard that a marker for the producer breaks
(kbroker/txn/remote.py), and the check below decides from its answer.

With transaction version 2 (KIP-890 part 2: Produce v12+, TxnOffsetCommit
v5+) the client no longer adds partitions itself: ``add_to_transaction``
adds the partition on its behalf first, and the check above then decides as
for any write.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.effects import CoordinatorError
from kbroker.txn.remote import verify_with_coordinator
from kbroker.wire.errors import ErrorCode


async def add_to_transaction(broker, transactional_id: str | None, topic: str, index: int, producer_state,
                             producer_id: int, producer_epoch: int) -> None:
    """Add the partition to the producer's transaction unless it is in one here already.
    Whatever goes wrong is left for ``verify_in_transaction`` to answer."""
    entry = producer_state.producer_entry(producer_id)
    if not transactional_id or (entry is not None and entry.has_ongoing_txn and entry.producer_epoch == producer_epoch):
        return
    shell = broker.transactions
    try:
        shell.coordinator.check(transactional_id)
    except CoordinatorError:
        return
    _, effects = shell.coordinator.add_partitions(transactional_id, producer_id, producer_epoch, [(topic, index)],
                                                  verify_only=False, now_ms=shell.now_ms())
    await shell.wait_applied(transactional_id, effects)


@dataclass(frozen=True)
class RemoteVerdict:
    """A coordinator elsewhere answered ``error_code``, valid while ``token`` still guards the partition."""

    error_code: int
    token: object


async def ask_remote_coordinator(broker, transactional_id: str | None, topic: str, index: int, producer_state,
                                 producer_id: int, producer_epoch: int, *, add: bool) -> RemoteVerdict | None:
    """If the producer's coordinator is on another broker and this partition has not seen the
    producer's transaction yet: its answer (``add``: it adds the partition first). Else None: the
    local check decides."""
    entry = producer_state.producer_entry(producer_id)
    if not transactional_id or (entry is not None and entry.has_ongoing_txn and entry.producer_epoch == producer_epoch):
        return None
    coordinator = broker.transactions.coordinator_node(transactional_id)
    if coordinator in (-1, broker.node_id):
        return None
    token = broker.txn_guards.begin(topic, index, producer_id)
    code = await verify_with_coordinator(broker, coordinator, transactional_id, producer_id, producer_epoch, topic,
                                         index, add=add)
    return RemoteVerdict(code, token)


def verify_in_transaction(broker, transactional_id: str | None, topic: str, index: int, producer_state,
                          producer_id: int, producer_epoch: int, *, abortable_known: bool,
                          remote: RemoteVerdict | None = None) -> int:
    """The error code for the write, NONE if it may be appended. ``abortable_known``: the
    request's version knows TRANSACTION_ABORTABLE (older clients get INVALID_TXN_STATE).
    ``remote``: the answer of the producer's coordinator on another broker."""
    entry = producer_state.producer_entry(producer_id)
    if entry is not None and entry.has_ongoing_txn and entry.producer_epoch == producer_epoch:
        return ErrorCode.NONE  # verified when the transaction's first write came
    if not transactional_id:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # Kafka's answer to a transactional write without one
    if remote is not None:
        guarded = broker.txn_guards.holds(topic, index, producer_id, remote.token)
        broker.txn_guards.end(topic, index, producer_id)
        code = remote.error_code if guarded else ErrorCode.NOT_ENOUGH_REPLICAS  # a marker came meanwhile: again
    else:
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
