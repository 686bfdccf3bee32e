"""The transaction coordinator, without I/O (Kafka's TransactionCoordinator and
TransactionStateManager).

It keeps the state of every transactional id whose ``__transaction_state``
partition this broker leads, and answers the producer-facing APIs with
effects (kbroker/effects.py, and ``WriteMarkers`` here) that its shell
(kbroker/txn/shell.py) carries out in order:

- ``Persist`` the transaction's new state; the ``Respond`` after it is sent
  only once that record is durable, so a producer never hears of a decision
  the coordinator could forget;
- ``WriteMarkers``: write COMMIT or ABORT markers to the transaction's
  partitions, then call ``markers_written``, which completes the transaction.

A move is made on a copy of the transaction's state, which replaces it once
its record is durable (Kafka's pendingState and completeTransitionTo): while
it is written, and while markers are, the id's other requests are answered
CONCURRENT_TRANSACTIONS; a write that fails drops the copy, so the producer's
retry meets the state the log holds, and no marker is written for a decision
that is not durable. Error codes and epoch rules are Kafka's, including
transaction version 2 (KIP-890 part 2, an epoch bump per EndTxn from v5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kbroker.effects import CoordinatorError, Persist, Respond
from kbroker.coordinator_records import coordinator_partition
from kbroker.txn.metadata import (COMPLETE, EPOCH_MAX, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, PREPARING,
                                  TRANSACTION_VERSION_2, TxnMetadata, TxnState, epoch_exhausted)
from kbroker.txn.records import TransactionLogKey
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

InitProducerIdResponse = API_BY_NAME["InitProducerId"].response_class
EndTxnResponse = API_BY_NAME["EndTxn"].response_class
DescribedTransaction = API_BY_NAME["DescribeTransactions"].response_class.TransactionState
DescribedTopic = DescribedTransaction.TopicData
ListedTransaction = API_BY_NAME["ListTransactions"].response_class.TransactionState

OFFSETS_TOPIC = "__consumer_offsets"
_END_TXN_TV2_FROM = 5  # EndTxn v5+ is sent only by clients of transaction version 2
_COMPLETED = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
_COMPLETE_RETRY_MS = 500  # a completion whose write failed is written again after this


@dataclass(frozen=True)
class TxnConfig:
    partition_count: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    abort_timed_out_check_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    remove_expired_check_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    offsets_partition_count: int = 50  # offsets.topic.num.partitions, to find a group's offsets partition


@dataclass(frozen=True)
class WriteMarkers:
    """Write the producer's COMMIT (or ABORT) marker to each partition, then call ``markers_written``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]
    coordinator_epoch: int


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, allocate_producer_id: Callable[[], int]) -> None:
        self.config = config
        self._allocate_producer_id = allocate_producer_id
        self.transactions: dict[str, TxnMetadata] = {}
        self.loaded: set[int] = set()
        self.loading: set[int] = set()
        self._coordinator_epochs: dict[int, int] = {}
        self._next_abort_check_ms: int | None = None
        self._next_expiry_check_ms: int | None = None
        self._complete_again: dict[str, int] = {}  # transactional id: when to write its completion again

    # -- ownership and loading -------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int:
        return coordinator_partition(transactional_id, self.config.partition_count)

    def check(self, transactional_id: str) -> None:
        """Raise unless this coordinator serves ``transactional_id`` now."""
        partition = self.partition_of(transactional_id)
        if partition in self.loading:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if partition not in self.loaded:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)

    def begin_load(self, partition: int, coordinator_epoch: int = 0) -> None:
        self.loading.add(partition)
        self._coordinator_epochs[partition] = coordinator_epoch

    def replay(self, key, value, now_ms: int) -> None:
        """A record read back from ``__transaction_state``; the last one per id wins."""
        if value is None:
            self.transactions.pop(key.transactional_id, None)
        else:
            self.transactions[key.transactional_id] = TxnMetadata.from_value(key.transactional_id, value)

    def finish_load(self, partition: int, now_ms: int) -> list:
        """Serve the partition; decided transactions whose markers may be missing get them (again)."""
        self.loading.discard(partition)
        self.loaded.add(partition)
        effects = []
        for meta in self._in_partition(partition):
            if meta.state in PREPARING:
                effects.append(self._markers(meta))
        return effects

    def unload(self, partition: int) -> None:
        self.loaded.discard(partition)
        self.loading.discard(partition)
        for meta in list(self._in_partition(partition)):
            del self.transactions[meta.transactional_id]

    def _in_partition(self, partition: int) -> Iterable[TxnMetadata]:
        return [meta for tid, meta in self.transactions.items() if self.partition_of(tid) == partition]

    # -- InitProducerId --------------------------------------------------------------------

    def init_producer_id(self, waiter: int, transactional_id: str, timeout_ms: int, producer_id: int,
                         producer_epoch: int, api_version: int, now_ms: int) -> list:
        def refuse(code):
            return [Respond(waiter, InitProducerIdResponse(error_code=code, producer_id=NO_PRODUCER_ID,
                                                           producer_epoch=NO_PRODUCER_EPOCH))]

        if not transactional_id:
            return refuse(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return refuse(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        expected = (producer_id, producer_epoch) if producer_id != NO_PRODUCER_ID else None
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(transactional_id, self._allocate_producer_id(), timeout_ms=timeout_ms,
                               last_update_ms=now_ms)
            self.transactions[transactional_id] = meta
        if meta.pending is not None or meta.state in PREPARING:
            return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not _may_reinitialise(meta, *expected):
            return refuse(ErrorCode.PRODUCER_FENCED)
        if meta.state is TxnState.ONGOING:
            # Abort the open transaction under a fenced epoch first; the client retries and gets
            # the epoch after that (Kafka never hands out the fencing epoch).
            _, effects = self._prepare(meta, commit=False, client_version=meta.client_version, bump_epoch=False,
                                       now_ms=now_ms, fence=True)
            effects.insert(1, Respond(waiter, InitProducerIdResponse(
                error_code=ErrorCode.CONCURRENT_TRANSACTIONS, producer_id=NO_PRODUCER_ID,
                producer_epoch=NO_PRODUCER_EPOCH)))
            return effects
        if epoch_exhausted(meta.producer_epoch) and (expected is None or expected[1] == meta.producer_epoch):
            new_producer_id = self._allocate_producer_id()

            def initialise(target: TxnMetadata) -> None:
                target.new_producer_id(new_producer_id, timeout_ms, now_ms, keep_last_epoch=expected is not None)
        elif expected is None or meta.producer_epoch in (NO_PRODUCER_EPOCH, expected[1]):
            def initialise(target: TxnMetadata) -> None:
                target.new_producer_epoch(timeout_ms, now_ms)
                if expected is None:
                    target.last_producer_epoch = NO_PRODUCER_EPOCH
        elif expected[1] != meta.last_producer_epoch:
            return refuse(ErrorCode.PRODUCER_FENCED)
        else:
            def initialise(target: TxnMetadata) -> None:
                pass  # a retry of a bump that succeeded; answer with the same epoch again
        target, persist = self._move(meta, initialise)
        return [persist, Respond(waiter, InitProducerIdResponse(
            error_code=ErrorCode.NONE, producer_id=target.producer_id, producer_epoch=target.producer_epoch))]

    # -- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]], verify_only: bool,
                       now_ms: int) -> tuple[dict[tuple[str, int], int], list]:
        """Per-partition error codes and the effects to carry out before answering.
        ``verify_only`` (v4+, from a partition leader, KIP-890 part 1) only checks that the
        partitions are in the transaction."""
        partitions = list(partitions)
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST), []
        meta = self.transactions.get(transactional_id)
        code = _producer_check(meta, producer_id, producer_epoch)
        if code == ErrorCode.NONE and meta.state in PREPARING:
            code = ErrorCode.CONCURRENT_TRANSACTIONS
        if code != ErrorCode.NONE:
            return dict.fromkeys(partitions, code), []
        if verify_only:
            return {key: ErrorCode.NONE if key in meta.partitions and meta.state is TxnState.ONGOING
                    else ErrorCode.TRANSACTION_ABORTABLE for key in partitions}, []
        if meta.pending is not None:
            return dict.fromkeys(partitions, ErrorCode.CONCURRENT_TRANSACTIONS), []
        errors = dict.fromkeys(partitions, ErrorCode.NONE)
        if meta.state is TxnState.ONGOING and meta.partitions.issuperset(partitions):
            return errors, []
        _, persist = self._move(meta, lambda target: target.add_partitions(partitions, now_ms))
        return errors, [persist]

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                    now_ms: int) -> tuple[int, list]:
        """The group's ``__consumer_offsets`` partition joins the transaction (its TxnOffsetCommit follows)."""
        partition = (OFFSETS_TOPIC, coordinator_partition(group_id, self.config.offsets_partition_count))
        errors, effects = self.add_partitions(transactional_id, producer_id, producer_epoch, [partition], False,
                                              now_ms)
        return errors[partition], effects

    # -- EndTxn and the markers ------------------------------------------------------------------

    def end_txn(self, waiter: int, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                api_version: int, now_ms: int) -> list:
        def answer(code, meta=None):
            return [Respond(waiter, EndTxnResponse(
                error_code=code, producer_id=meta.producer_id if meta else NO_PRODUCER_ID,
                producer_epoch=meta.producer_epoch if meta else NO_PRODUCER_EPOCH))]

        if not transactional_id:
            return answer(ErrorCode.INVALID_REQUEST)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        client_version = TRANSACTION_VERSION_2 if api_version >= _END_TXN_TV2_FROM else 0
        v2 = client_version >= TRANSACTION_VERSION_2  # the request's, as Kafka's endTransaction judges a retry
        # With TV2 the coordinator bumped the epoch when it prepared, so a retry carries the epoch before.
        retried_bump = v2 and meta.producer_epoch == producer_epoch + 1
        retried_overflow = (v2 and meta.previous_producer_id == producer_id and producer_epoch == EPOCH_MAX - 1
                            and meta.producer_epoch == 0)
        if meta.producer_id != producer_id and not retried_overflow:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not v2 or meta.state in (TxnState.ONGOING, TxnState.EMPTY):
            valid_epoch = producer_epoch == meta.producer_epoch
        elif meta.state in PREPARING:
            valid_epoch = retried_bump
        else:  # completed: a retry of its end, or (the current epoch) the next transaction's end
            valid_epoch = retried_bump or retried_overflow or producer_epoch == meta.producer_epoch
        if not valid_epoch:
            return answer(ErrorCode.PRODUCER_FENCED)
        if meta.pending is not None:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        wanted = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        deciding = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        # TV2: an abort with the current epoch after a completed transaction is not a retry but a new
        # (empty) transaction's end, aborted with the epoch bumped, as Kafka's endTransaction does (the
        # producer cannot know whether its partitions were added).
        empty_abort = (v2 and not commit and meta.state in _COMPLETED
                       and producer_epoch == meta.producer_epoch and not (retried_bump or retried_overflow))
        if meta.state is TxnState.ONGOING or empty_abort:
            bump = client_version >= TRANSACTION_VERSION_2
            next_producer_id = (self._allocate_producer_id() if bump and epoch_exhausted(meta.producer_epoch)
                                else NO_PRODUCER_ID)
            target, effects = self._prepare(meta, commit, client_version, bump_epoch=bump, now_ms=now_ms,
                                            next_producer_id=next_producer_id)
            effects.insert(1, answer(ErrorCode.NONE, target)[0])
            return effects
        if meta.state is wanted and (retried_bump or retried_overflow or not v2):
            return answer(ErrorCode.NONE, meta)  # a retry of the EndTxn that completed it
        if meta.state is deciding:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        return answer(ErrorCode.INVALID_TXN_STATE)

    def markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int, now_ms: int) -> list:
        """Every partition has the markers of the transaction ``WriteMarkers`` named: it is complete."""
        meta = self.transactions.get(transactional_id)
        if (meta is None or meta.pending is not None or meta.state not in PREPARING
                or meta.producer_id != producer_id or meta.producer_epoch != producer_epoch):
            return []  # unloaded, or completed (or being completed) by an earlier write of the same markers
        return [self._complete(meta, now_ms)]

    def _complete(self, meta: TxnMetadata, now_ms: int) -> Persist:
        """Every marker is written; if the completion's record is not, it is written again later (the
        transaction stays decided meanwhile, as Kafka's marker channel retries its append)."""
        def again(_: TxnMetadata, failed_ms: int) -> list:
            self._complete_again[meta.transactional_id] = failed_ms + _COMPLETE_RETRY_MS
            return []

        return self._move(meta, lambda target: target.complete(now_ms), on_failure=again)[1]

    def _prepare(self, meta: TxnMetadata, commit: bool, client_version: int, *, bump_epoch: bool, now_ms: int,
                 next_producer_id: int = NO_PRODUCER_ID, fence: bool = False) -> tuple[TxnMetadata, list]:
        """The decision (after fencing the producer, if ``fence``): persisted, then (the caller's
        answer goes second) the markers, which are written only once the decision is durable."""
        def decide(target: TxnMetadata) -> None:
            if fence:
                target.fence()
            target.prepare(commit, client_version, next_producer_id, now_ms, bump_epoch=bump_epoch)

        target, persist = self._move(meta, decide)
        return target, [persist, self._markers(target)]

    def _move(self, meta: TxnMetadata, change: Callable[[TxnMetadata], None],
              on_failure: Callable[[TxnMetadata, int], list] | None = None) -> tuple[TxnMetadata, Persist]:
        """``change`` made to a copy of ``meta``, pending until its record is durable, then the
        transaction's state; dropped if the write fails (then ``on_failure(meta, now_ms)``)."""
        target = meta.copy()
        change(target)
        meta.pending = target
        transactional_id = meta.transactional_id

        def durable(now_ms: int) -> list:
            if self.transactions.get(transactional_id) is meta and meta.pending is target:
                meta.pending = None
                self.transactions[transactional_id] = target
            return []

        def failed(error_code: int, now_ms: int) -> list:
            if self.transactions.get(transactional_id) is not meta or meta.pending is not target:
                return []  # unloaded meanwhile
            meta.pending = None
            return on_failure(meta, now_ms) if on_failure is not None else []

        return target, Persist(((TransactionLogKey(transactional_id=transactional_id), target.to_value()),),
                               on_durable=durable, on_failure=failed)

    def _markers(self, meta: TxnMetadata) -> WriteMarkers:
        return WriteMarkers(meta.transactional_id, meta.producer_id, meta.producer_epoch,
                            meta.state is TxnState.PREPARE_COMMIT, frozenset(meta.partitions),
                            self._coordinator_epochs.get(self.partition_of(meta.transactional_id), 0))

    def fence_producer(self, transactional_id: str, now_ms: int) -> tuple[int, list]:
        """Fence the producer of ``transactional_id`` as a new producer's InitProducerId would (a test's fault,
        kbroker/faults.py): an epoch no producer holds, its open transaction aborted under it. The new epoch and
        the effects. CoordinatorError CONCURRENT_TRANSACTIONS while a transaction is being ended."""
        self.check(transactional_id)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            raise LookupError(f"no transactional id {transactional_id!r}")
        if meta.pending is not None or meta.state in PREPARING:
            raise CoordinatorError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING:
            target, effects = self._prepare(meta, commit=False, client_version=meta.client_version, bump_epoch=False,
                                            now_ms=now_ms, fence=True)
        else:
            target, persist = self._move(meta, TxnMetadata.fence)
            effects = [persist]
        return target.producer_epoch, effects

    # -- timers -------------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        due = [when for when in (self._next_abort_check_ms, self._next_expiry_check_ms,
                                 min(self._complete_again.values(), default=None)) if when is not None]
        return min(due) if due else None

    def make_checks_due(self) -> None:
        """Have the next tick look for timed-out transactions and expired transactional ids whatever their
        intervals (a test moved the clock ahead: kbroker/testing/time_travel.py)."""
        self._next_abort_check_ms = self._next_expiry_check_ms = 0

    def tick(self, now_ms: int) -> list:
        """Abort transactions open longer than their timeout (fencing their producer), and forget
        transactional ids idle longer than ``transactional.id.expiration.ms``, each at its interval."""
        effects = self._write_completions_again(now_ms)
        if self._next_abort_check_ms is None:  # the first tick starts both clocks
            self._next_abort_check_ms = now_ms + self.config.abort_timed_out_check_ms
            self._next_expiry_check_ms = now_ms + self.config.remove_expired_check_ms
        if now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = now_ms + self.config.abort_timed_out_check_ms
            for meta in self._served():
                if meta.state is TxnState.ONGOING and meta.pending is None and meta.start_ms + meta.timeout_ms < now_ms:
                    effects += self._prepare(meta, commit=False, client_version=meta.client_version,
                                             bump_epoch=False, now_ms=now_ms, fence=True)[1]
        if now_ms >= self._next_expiry_check_ms:
            self._next_expiry_check_ms = now_ms + self.config.remove_expired_check_ms
            for meta in self._served():
                if (meta.state in COMPLETE and meta.pending is None
                        and meta.last_update_ms + self.config.transactional_id_expiration_ms <= now_ms):
                    effects.append(self._expire(meta))
        return effects

    def _write_completions_again(self, now_ms: int) -> list:
        effects = []
        for transactional_id, when in list(self._complete_again.items()):
            if when <= now_ms:
                del self._complete_again[transactional_id]
                meta = self.transactions.get(transactional_id)
                if meta is not None and meta.pending is None and meta.state in PREPARING:
                    effects.append(self._complete(meta, now_ms))
        return effects

    def _expire(self, meta: TxnMetadata) -> Persist:
        """Forget an idle transactional id: its tombstone; if that is not written, it is kept."""
        transactional_id = meta.transactional_id
        del self.transactions[transactional_id]

        def failed(error_code: int, now_ms: int) -> list:
            if self.partition_of(transactional_id) in self.loaded:
                self.transactions.setdefault(transactional_id, meta)
            return []

        return Persist(((TransactionLogKey(transactional_id=transactional_id), None),), on_failure=failed)

    def _served(self) -> list[TxnMetadata]:
        return [meta for tid, meta in self.transactions.items() if self.partition_of(tid) in self.loaded]

    # -- DescribeTransactions, ListTransactions -------------------------------------------------------

    def describe(self, transactional_ids: Iterable[str]) -> list:
        return [self._describe(transactional_id) for transactional_id in transactional_ids]

    def _describe(self, transactional_id: str):
        described = DescribedTransaction(transactional_id=transactional_id)
        if not transactional_id:
            described.error_code = ErrorCode.INVALID_REQUEST
            return described
        try:
            self.check(transactional_id)
        except CoordinatorError as error:
            described.error_code = error.error_code
            return described
        meta = self.transactions.get(transactional_id)
        if meta is None:
            described.error_code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            return described
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        described.transaction_state = meta.state.kafka_name
        described.transaction_timeout_ms = meta.timeout_ms
        described.transaction_start_time_ms = meta.start_ms
        described.producer_id = meta.producer_id
        described.producer_epoch = meta.producer_epoch
        described.topics = [DescribedTopic(topic=topic, partitions=ids) for topic, ids in by_topic.items()]
        return described

    def list_transactions(self, states: Iterable[TxnState], producer_ids: Iterable[int], duration_ms: int,
                          now_ms: int, matches: Callable[[str], bool] = lambda _: True) -> list:
        """Transactions in one of ``states`` (all if empty), of one of ``producer_ids`` (all if
        empty), open longer than ``duration_ms`` (if not negative), whose id ``matches``."""
        if self.loading:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        states, producer_ids = set(states), set(producer_ids)
        return [ListedTransaction(transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                                  transaction_state=meta.state.kafka_name)
                for meta in self._served()
                if (not states or meta.state in states) and (not producer_ids or meta.producer_id in producer_ids)
                and (duration_ms < 0 or now_ms - meta.start_ms > duration_ms) and matches(meta.transactional_id)]


def _may_reinitialise(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
    """InitProducerId from a producer that names its current id and epoch (after an error):
    allowed if the id is fresh, the same, or the previous one left behind by an exhausted epoch."""
    return (meta.producer_epoch == NO_PRODUCER_EPOCH or producer_id == meta.producer_id
            or (producer_id == meta.previous_producer_id and epoch_exhausted(producer_epoch)))


def _producer_check(meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> int:
    if meta is None or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE
