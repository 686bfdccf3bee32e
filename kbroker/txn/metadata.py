"""One transactional id's state, and the moves it may make (Kafka's TransactionMetadata).

A transaction goes Empty → Ongoing (partitions added) → PrepareCommit or
PrepareAbort (the decision, durable before the producer hears of it) →
CompleteCommit or CompleteAbort (once every partition has its marker), and
starts again from there. Each move is checked against the states it may come
from, so a bug surfaces as an exception rather than as a torn transaction.

The producer's epoch fences older producers of the same transactional id.
It is bumped by InitProducerId, by the coordinator when it aborts a
transaction it must take away from its producer (another producer's
InitProducerId, a timeout), and with transaction version 2 (KIP-890 part 2)
by every EndTxn. When it would reach ``EPOCH_LIMIT`` the transactional id
moves to a new producer id instead.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kbroker.txn.records import PartitionsSchema, TransactionLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
EPOCH_MAX = 0x7FFF
# Clients never get the last epoch, so that the coordinator can always fence with one more.
EPOCH_LIMIT = EPOCH_MAX - 1
TRANSACTION_VERSION_2 = 2  # KIP-890 part 2: the epoch is bumped at every EndTxn


class TxnState(enum.Enum):
    """Kafka's states; the value is the id written in TransactionLogValue.transaction_status."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7  # in memory only, never written

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
          TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
          TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
          TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {name: state for state, name in _NAMES.items()}

COMPLETE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})

_PREVIOUS = {
    TxnState.EMPTY: COMPLETE,
    TxnState.ONGOING: COMPLETE | {TxnState.ONGOING},
    TxnState.PREPARE_COMMIT: {TxnState.ONGOING},
    TxnState.PREPARE_ABORT: {TxnState.ONGOING, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},  # TV2: an empty abort
    TxnState.COMPLETE_COMMIT: {TxnState.PREPARE_COMMIT},
    TxnState.COMPLETE_ABORT: {TxnState.PREPARE_ABORT},
    TxnState.DEAD: COMPLETE,
}


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= EPOCH_LIMIT


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump, to recognise a retried bump
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID  # chosen when a TV2 EndTxn exhausts the epoch; taken at completion
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    client_version: int = 0  # the transaction version the client speaks (2: an epoch bump per transaction)
    # The state a move is writing (Kafka's pendingState): it replaces this one once its record is durable.
    pending: TxnMetadata | None = field(default=None, compare=False, repr=False)

    # -- moves -------------------------------------------------------------------------

    def copy(self) -> TxnMetadata:
        """A copy to make a move on (it has no pending move of its own)."""
        return replace(self, partitions=set(self.partitions), pending=None)

    def move(self, state: TxnState, now_ms: int) -> None:
        if self.state not in _PREVIOUS[state]:
            raise AssertionError(f"{self.transactional_id!r}: no move from {self.state.kafka_name} "
                                 f"to {state.kafka_name}")
        self.state = state
        self.last_update_ms = now_ms

    def new_producer_epoch(self, timeout_ms: int, now_ms: int) -> None:
        """A new (or the same, re-initialised) producer: the next epoch, an empty transaction."""
        self.last_producer_epoch = self.producer_epoch
        self.producer_epoch += 1
        self._reset(timeout_ms, now_ms)

    def new_producer_id(self, producer_id: int, timeout_ms: int, now_ms: int, *, keep_last_epoch: bool) -> None:
        self.last_producer_epoch = self.producer_epoch if keep_last_epoch else NO_PRODUCER_EPOCH
        self.previous_producer_id, self.producer_id, self.producer_epoch = self.producer_id, producer_id, 0
        self._reset(timeout_ms, now_ms)

    def _reset(self, timeout_ms: int, now_ms: int) -> None:
        self.move(TxnState.EMPTY, now_ms)
        self.timeout_ms = timeout_ms
        self.partitions = set()
        self.start_ms = -1

    def add_partitions(self, partitions, now_ms: int) -> None:
        if self.state in COMPLETE:
            self.start_ms = now_ms
        self.move(TxnState.ONGOING, now_ms)
        self.partitions |= set(partitions)

    def fence(self) -> None:
        """Take the transaction away from its producer: a new epoch that no producer holds."""
        self.producer_epoch += 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH

    def prepare(self, commit: bool, client_version: int, next_producer_id: int, now_ms: int, *,
                bump_epoch: bool) -> None:
        """The decision. ``bump_epoch``: a TV2 EndTxn (not a fence, which bumped already)."""
        if bump_epoch:
            self.last_producer_epoch, self.producer_epoch = self.producer_epoch, self.producer_epoch + 1
        self.client_version = client_version
        self.next_producer_id = next_producer_id
        self.move(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, now_ms)

    def complete(self, now_ms: int) -> None:
        committed = self.state is TxnState.PREPARE_COMMIT
        if self.client_version >= TRANSACTION_VERSION_2 and self.next_producer_id != NO_PRODUCER_ID:
            self.previous_producer_id, self.producer_id = self.producer_id, self.next_producer_id
            self.last_producer_epoch, self.producer_epoch = self.producer_epoch, 0
        self.next_producer_id = NO_PRODUCER_ID
        self.partitions = set()
        self.move(TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT, now_ms)

    # -- the log record ----------------------------------------------------------------------

    def to_value(self):
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return TransactionLogValue(
            producer_id=self.producer_id, previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id, producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms, transaction_status=self.state.value,
            transaction_partitions=None if self.state is TxnState.EMPTY else [
                PartitionsSchema(topic=topic, partition_ids=ids) for topic, ids in by_topic.items()],
            transaction_last_update_timestamp_ms=self.last_update_ms, transaction_start_timestamp_ms=self.start_ms,
            client_transaction_version=self.client_version)

    @classmethod
    def from_value(cls, transactional_id: str, value) -> TxnMetadata:
        """As Kafka reads it back: the last epoch is not in the record."""
        state = TxnState(value.transaction_status)
        partitions = set() if state is TxnState.EMPTY else {
            (entry.topic, index) for entry in value.transaction_partitions or () for index in entry.partition_ids}
        return cls(transactional_id, value.producer_id, value.producer_epoch, NO_PRODUCER_EPOCH,
                   value.previous_producer_id, value.next_producer_id, value.transaction_timeout_ms, state,
                   partitions, value.transaction_start_timestamp_ms, value.transaction_last_update_timestamp_ms,
                   value.client_transaction_version)
