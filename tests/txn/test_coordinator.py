"""The transaction coordinator core, driven as its shell drives it.

``Shell`` carries out effects in memory: persisted records go to a list (and
are replayed into a fresh coordinator to check that a restart rebuilds the
same state), answers are collected per waiter, and marker writes are recorded
and acknowledged when the test says so.
"""

from __future__ import annotations

import itertools

import pytest

from kbroker.effects import CoordinatorError, Persist, Respond
from kbroker.txn.coordinator import OFFSETS_TOPIC, TransactionCoordinator, TxnConfig, WriteMarkers
from kbroker.txn.metadata import EPOCH_LIMIT, TxnState
from kbroker.txn.records import TransactionLogKey, decode_value, encode_value
from kbroker.wire.errors import ErrorCode

CONFIG = TxnConfig(partition_count=4, abort_timed_out_check_ms=1000, remove_expired_check_ms=5000,
                   transactional_id_expiration_ms=60_000, offsets_partition_count=50)
TV1, TV2 = 4, 5  # EndTxn versions of a transaction version 1 and 2 client


class Shell:
    def __init__(self) -> None:
        self.producer_ids = itertools.count(1000)
        self.coordinator = self.fresh()
        self.log: list[tuple] = []
        self.answers: dict[int, object] = {}
        self.markers: list[WriteMarkers] = []
        self.waiters = itertools.count(1)
        self.now = 1_000_000
        self.failing_writes = 0  # how many of the next Persists fail

    def fresh(self) -> TransactionCoordinator:
        coordinator = TransactionCoordinator(CONFIG, lambda: next(self.producer_ids))
        for partition in range(CONFIG.partition_count):
            coordinator.begin_load(partition, coordinator_epoch=3)
            coordinator.finish_load(partition, 0)
        return coordinator

    def carry_out(self, effects: list) -> None:
        failed = False
        for effect in effects:
            if isinstance(effect, Persist):
                if self.failing_writes:
                    self.carry_out(effect.on_failure(ErrorCode.COORDINATOR_NOT_AVAILABLE, self.now)
                                   if effect.on_failure else [])
                    self.failing_writes -= 1
                    failed = True
                    continue
                for key, value in effect.records:  # as written: through the byte format
                    self.log.append((key, None if value is None else encode_value(value)))
                if effect.on_durable is not None:
                    self.carry_out(effect.on_durable(self.now))
            elif failed and isinstance(effect, Respond):  # as the runtime answers what a failed write precedes
                effect.response.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                self.answers[effect.waiter] = effect.response
            elif failed:
                continue  # nothing else after a failed write is carried out
            elif isinstance(effect, Respond):
                self.answers[effect.waiter] = effect.response
            elif isinstance(effect, WriteMarkers):
                self.markers.append(effect)
            else:
                raise AssertionError(effect)

    def ask(self, method: str, *args, api_version: int = TV1):
        waiter = next(self.waiters)
        self.carry_out(getattr(self.coordinator, method)(waiter, *args, api_version, self.now))
        return self.answers.get(waiter)

    def init(self, tid: str, timeout_ms: int = 10_000, producer_id: int = -1, producer_epoch: int = -1):
        return self.ask("init_producer_id", tid, timeout_ms, producer_id, producer_epoch, api_version=4)

    def add(self, tid: str, producer, *partitions, verify_only: bool = False) -> dict:
        errors, effects = self.coordinator.add_partitions(tid, *producer, partitions, verify_only, self.now)
        self.carry_out(effects)
        return errors

    def end(self, tid: str, producer, commit: bool, api_version: int = TV1):
        return self.ask("end_txn", tid, *producer, commit, api_version=api_version)

    def write_markers(self) -> list[WriteMarkers]:
        """The partitions took every marker asked for so far."""
        written, self.markers = self.markers, []
        for effect in written:
            self.carry_out(self.coordinator.markers_written(effect.transactional_id, effect.producer_id,
                                                          effect.producer_epoch, self.now))
        return written

    def tick(self, advance_ms: int) -> None:
        self.now += advance_ms
        self.carry_out(self.coordinator.tick(self.now))

    def state(self, tid: str) -> TxnState:
        return self.coordinator.transactions[tid].state

    def rebuilt(self) -> TransactionCoordinator:
        coordinator = TransactionCoordinator(CONFIG, lambda: next(self.producer_ids))
        for partition in range(CONFIG.partition_count):
            coordinator.begin_load(partition)
        for key, value in self.log:
            coordinator.replay(key, decode_value(key, value), self.now)
        for partition in range(CONFIG.partition_count):
            coordinator.finish_load(partition, self.now)
        return coordinator


def producer_of(answer) -> tuple[int, int]:
    assert answer.error_code == ErrorCode.NONE, ErrorCode(answer.error_code).name
    return answer.producer_id, answer.producer_epoch


@pytest.fixture
def shell() -> Shell:
    return Shell()


def test_a_committed_transaction_goes_through_every_state_and_writes_commit_markers(shell):
    producer = producer_of(shell.init("t"))
    assert producer == (1000, 0) and shell.state("t") is TxnState.EMPTY
    assert shell.add("t", producer, ("a", 0), ("b", 1)) == {("a", 0): 0, ("b", 1): 0}
    assert shell.state("t") is TxnState.ONGOING
    assert shell.end("t", producer, True).error_code == ErrorCode.NONE
    assert shell.state("t") is TxnState.PREPARE_COMMIT
    [markers] = shell.write_markers()
    assert (markers.commit, markers.partitions, markers.producer_id, markers.producer_epoch,
            markers.coordinator_epoch) == (True, frozenset({("a", 0), ("b", 1)}), 1000, 0, 3)
    assert shell.state("t") is TxnState.COMPLETE_COMMIT
    assert shell.coordinator.transactions["t"].partitions == set()


def test_the_decision_is_persisted_before_the_answer_and_the_markers_follow_it(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    effects = shell.coordinator.end_txn(99, "t", *producer, False, TV1, shell.now)
    assert [type(effect) for effect in effects] == [Persist, Respond, WriteMarkers]
    [(key, value)] = effects[0].records
    assert (key.transactional_id, TxnState(value.transaction_status)) == ("t", TxnState.PREPARE_ABORT)


def test_end_txn_retried_after_completion_succeeds_for_the_same_outcome_only(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    shell.end("t", producer, True)
    assert shell.end("t", producer, True).error_code == ErrorCode.CONCURRENT_TRANSACTIONS  # markers pending
    assert shell.end("t", producer, False).error_code == ErrorCode.INVALID_TXN_STATE
    shell.write_markers()
    assert shell.end("t", producer, True).error_code == ErrorCode.NONE
    assert shell.end("t", producer, False).error_code == ErrorCode.INVALID_TXN_STATE


def test_end_txn_without_a_transaction_is_invalid_txn_state(shell):
    producer = producer_of(shell.init("t"))
    assert shell.end("t", producer, True).error_code == ErrorCode.INVALID_TXN_STATE


def test_unknown_ids_and_wrong_producers_are_refused_with_kafkas_codes(shell):
    producer = producer_of(shell.init("t"))
    assert shell.add("u", producer, ("a", 0)) == {("a", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert shell.add("t", (producer[0] + 1, 0), ("a", 0)) == {("a", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert shell.add("t", (producer[0], 7), ("a", 0)) == {("a", 0): ErrorCode.PRODUCER_FENCED}
    assert shell.end("u", producer, True).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert shell.add("", producer, ("a", 0)) == {("a", 0): ErrorCode.INVALID_REQUEST}
    assert shell.init("").error_code == ErrorCode.INVALID_REQUEST


def test_a_timeout_above_the_maximum_is_refused(shell):
    assert shell.init("t", timeout_ms=CONFIG.max_timeout_ms + 1).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert shell.init("t", timeout_ms=0).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert "t" not in shell.coordinator.transactions


def test_a_second_producer_fences_the_first_and_its_open_transaction_is_aborted_first(shell):
    first = producer_of(shell.init("t"))
    shell.add("t", first, ("a", 0))
    retry = shell.init("t")
    assert retry.error_code == ErrorCode.CONCURRENT_TRANSACTIONS  # the abort must finish first
    assert shell.state("t") is TxnState.PREPARE_ABORT
    [markers] = shell.write_markers()
    assert not markers.commit and markers.producer_epoch == first[1] + 1  # a fencing epoch nobody holds
    second = producer_of(shell.init("t"))
    assert second == (first[0], first[1] + 2)
    assert shell.add("t", first, ("a", 0)) == {("a", 0): ErrorCode.PRODUCER_FENCED}
    assert shell.end("t", first, True).error_code == ErrorCode.PRODUCER_FENCED


def test_init_while_markers_are_pending_is_concurrent_transactions(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    shell.end("t", producer, True)
    assert shell.init("t").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    shell.write_markers()
    assert producer_of(shell.init("t")) == (producer[0], producer[1] + 1)


def test_init_with_the_current_producer_bumps_and_a_retry_of_that_bump_gets_the_same_epoch(shell):
    producer = producer_of(shell.init("t"))
    bumped = producer_of(shell.init("t", producer_id=producer[0], producer_epoch=producer[1]))
    assert bumped == (producer[0], producer[1] + 1)
    assert producer_of(shell.init("t", producer_id=producer[0], producer_epoch=producer[1])) == bumped
    stale = shell.init("t", producer_id=producer[0] + 5, producer_epoch=0)
    assert stale.error_code == ErrorCode.PRODUCER_FENCED


def test_an_exhausted_epoch_moves_the_transactional_id_to_a_new_producer_id(shell):
    producer_of(shell.init("t"))
    shell.coordinator.transactions["t"].producer_epoch = EPOCH_LIMIT
    producer = producer_of(shell.init("t"))
    assert producer == (1001, 0)
    assert shell.coordinator.transactions["t"].previous_producer_id == 1000


def test_adding_partitions_already_in_the_transaction_writes_nothing(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    written = len(shell.log)
    assert shell.add("t", producer, ("a", 0)) == {("a", 0): ErrorCode.NONE}
    assert len(shell.log) == written


def test_adding_while_the_decision_is_being_written_is_concurrent_transactions(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    shell.end("t", producer, False)
    assert shell.add("t", producer, ("b", 0)) == {("b", 0): ErrorCode.CONCURRENT_TRANSACTIONS}


def test_verification_says_which_partitions_are_in_the_transaction_and_writes_nothing(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    written = len(shell.log)
    assert shell.add("t", producer, ("a", 0), ("a", 1), verify_only=True) == {
        ("a", 0): ErrorCode.NONE, ("a", 1): ErrorCode.TRANSACTION_ABORTABLE}
    assert shell.add("t", (producer[0], 9), ("a", 0), verify_only=True) == {("a", 0): ErrorCode.PRODUCER_FENCED}
    assert len(shell.log) == written and shell.coordinator.transactions["t"].partitions == {("a", 0)}


def test_add_offsets_adds_the_groups_offsets_partition(shell):
    producer = producer_of(shell.init("t"))
    code, effects = shell.coordinator.add_offsets("t", *producer, "my-group", shell.now)
    shell.carry_out(effects)
    assert code == ErrorCode.NONE
    [(topic, partition)] = shell.coordinator.transactions["t"].partitions
    assert topic == OFFSETS_TOPIC and 0 <= partition < CONFIG.offsets_partition_count


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(shell):
    producer = producer_of(shell.init("t", timeout_ms=2000))
    shell.add("t", producer, ("a", 0))
    shell.tick(1500)
    assert shell.state("t") is TxnState.ONGOING and not shell.markers
    shell.tick(1000)
    assert shell.state("t") is TxnState.PREPARE_ABORT
    [markers] = shell.write_markers()
    assert not markers.commit and markers.producer_epoch == producer[1] + 1
    assert shell.state("t") is TxnState.COMPLETE_ABORT
    assert shell.end("t", producer, True).error_code == ErrorCode.PRODUCER_FENCED


def test_the_timeout_check_runs_at_its_interval_not_at_every_tick(shell):
    producer = producer_of(shell.init("t", timeout_ms=100))
    shell.tick(0)  # starts the clocks
    shell.add("t", producer, ("a", 0))
    shell.tick(500)
    assert shell.state("t") is TxnState.ONGOING
    assert shell.coordinator.next_deadline_ms() == shell.now + 500
    shell.tick(500)
    assert shell.state("t") is TxnState.PREPARE_ABORT


def test_idle_transactional_ids_expire_with_a_tombstone(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    shell.end("t", producer, True)
    shell.write_markers()
    shell.tick(0)
    shell.tick(CONFIG.transactional_id_expiration_ms + CONFIG.remove_expired_check_ms)
    assert "t" not in shell.coordinator.transactions
    assert shell.log[-1] == (TransactionLogKey(transactional_id="t"), None)
    assert "t" not in shell.rebuilt().transactions


def test_transaction_version_2_bumps_the_epoch_at_every_end_txn(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    answer = shell.end("t", producer, True, api_version=TV2)
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (0, producer[0], producer[1] + 1)
    [markers] = shell.markers
    assert markers.producer_epoch == producer[1] + 1
    retried = shell.end("t", producer, True, api_version=TV2)  # the answer was lost: same outcome, same epoch
    assert retried.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    shell.write_markers()
    again = shell.end("t", producer, True, api_version=TV2)
    assert (again.error_code, again.producer_epoch) == (0, producer[1] + 1)
    bumped = (producer[0], producer[1] + 1)
    shell.add("t", bumped, ("a", 0))
    assert producer_of(shell.end("t", bumped, False, api_version=TV2)) == (producer[0], producer[1] + 2)


def test_transaction_version_2_ends_a_transaction_of_nothing_with_an_abort_and_a_bump(shell):
    """As Kafka's endTransaction with TV2: after a completed transaction, an EndTxn with the current epoch
    is the next transaction's; an abort of it (its producer cannot know whether partitions were added)
    is an empty transaction aborted with the epoch bumped; a commit of it is INVALID_TXN_STATE."""
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    bumped = producer_of(shell.end("t", producer, True, api_version=TV2))
    shell.write_markers()
    assert shell.end("t", bumped, True, api_version=TV2).error_code == ErrorCode.INVALID_TXN_STATE
    aborted = producer_of(shell.end("t", bumped, False, api_version=TV2))
    assert aborted == (producer[0], producer[1] + 2)
    [markers] = shell.write_markers()
    assert (markers.partitions, markers.commit) == (frozenset(), False)
    assert shell.state("t") is TxnState.COMPLETE_ABORT
    assert producer_of(shell.end("t", bumped, False, api_version=TV2)) == aborted  # its retry: the same answer
    assert shell.end("t", (producer[0], producer[1] + 9), False, api_version=TV2).error_code == ErrorCode.PRODUCER_FENCED


def test_an_end_txn_of_version_2_is_judged_a_retry_by_its_own_version(shell):
    """Kafka's endTransaction takes the request's transaction version: a TV2 EndTxn with the epoch just before
    the current one is a retry of the completed end, even of a transaction a TV1 client ended."""
    first = producer_of(shell.init("t"))
    producer = producer_of(shell.init("t"))  # the epoch bumped
    shell.add("t", producer, ("a", 0))
    shell.end("t", producer, False)  # TV1
    shell.write_markers()
    answer = shell.end("t", first, False, api_version=TV2)
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (ErrorCode.NONE, *producer)
    assert shell.end("t", first, False).error_code == ErrorCode.PRODUCER_FENCED  # TV1: the epoch must be the current


def test_transaction_version_2_overflow_moves_to_the_next_producer_id_at_completion(shell):
    producer_of(shell.init("t"))
    meta = shell.coordinator.transactions["t"]
    meta.producer_epoch = EPOCH_LIMIT
    meta.client_version = 2
    producer = (meta.producer_id, EPOCH_LIMIT)
    shell.add("t", producer, ("a", 0))
    shell.end("t", producer, True, api_version=TV2)
    assert shell.coordinator.transactions["t"].next_producer_id == 1001
    shell.write_markers()
    meta = shell.coordinator.transactions["t"]
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (1001, 0, 1000)


def test_replaying_the_log_rebuilds_the_same_transactions_and_resends_pending_markers(shell):
    a = producer_of(shell.init("a"))
    b = producer_of(shell.init("b"))
    c = producer_of(shell.init("c"))
    shell.add("a", a, ("x", 0))
    shell.add("b", b, ("x", 1), ("y", 0))
    shell.end("b", b, True)
    shell.markers = []  # decided, but the broker stops before its markers are written
    shell.add("c", c, ("x", 0))
    shell.end("c", c, False)
    shell.write_markers()
    rebuilt = TransactionCoordinator(CONFIG, lambda: 0)
    for partition in range(CONFIG.partition_count):
        rebuilt.begin_load(partition, coordinator_epoch=4)
    for key, value in shell.log:
        rebuilt.replay(key, decode_value(key, value), shell.now)
    resent = [effect for p in range(CONFIG.partition_count) for effect in rebuilt.finish_load(p, shell.now)]
    for tid, meta in shell.coordinator.transactions.items():
        again = rebuilt.transactions[tid]
        assert (again.state, again.producer_id, again.producer_epoch, again.partitions, again.start_ms) == (
            meta.state, meta.producer_id, meta.producer_epoch, meta.partitions, meta.start_ms)
    assert [(m.transactional_id, m.commit, m.partitions, m.coordinator_epoch) for m in resent] == [
        ("b", True, frozenset({("x", 1), ("y", 0)}), 4)]


def test_requests_for_a_partition_not_loaded_are_refused(shell):
    coordinator = TransactionCoordinator(CONFIG, lambda: 1)
    with pytest.raises(CoordinatorError) as refused:
        coordinator.check("t")
    assert refused.value.error_code == ErrorCode.NOT_COORDINATOR
    coordinator.begin_load(coordinator.partition_of("t"))
    with pytest.raises(CoordinatorError) as loading:
        coordinator.check("t")
    assert loading.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_describe_and_list_show_state_producer_and_partitions(shell):
    producer = producer_of(shell.init("t", timeout_ms=5000))
    shell.add("t", producer, ("b", 2), ("a", 1), ("a", 0))
    producer_of(shell.init("idle"))
    [described, missing] = shell.coordinator.describe(["t", "nope"])
    assert (described.error_code, described.transaction_state, described.transaction_timeout_ms,
            described.producer_id, described.transaction_start_time_ms) == (0, "Ongoing", 5000, producer[0], shell.now)
    assert [(topic.topic, topic.partitions) for topic in described.topics] == [("a", [0, 1]), ("b", [2])]
    assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    listed = shell.coordinator.list_transactions([], [], -1, shell.now)
    assert sorted((t.transactional_id, t.transaction_state) for t in listed) == [("idle", "Empty"), ("t", "Ongoing")]
    ongoing = shell.coordinator.list_transactions([TxnState.ONGOING], [producer[0]], -1, shell.now)
    assert [t.transactional_id for t in ongoing] == ["t"]
    assert shell.coordinator.list_transactions([TxnState.ONGOING], [], 10, shell.now + 5) == []
    assert [t.transactional_id for t in shell.coordinator.list_transactions([TxnState.ONGOING], [], 10,
                                                                             shell.now + 50)] == ["t"]


# -- a state change counts once its record is durable (issue 26) -------------------------------


def test_a_decision_is_visible_only_once_durable_and_the_id_waits_meanwhile(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    persist, answer, markers = shell.coordinator.end_txn(1, "t", *producer, True, TV1, shell.now)
    assert isinstance(persist, Persist) and isinstance(markers, WriteMarkers)
    assert shell.state("t") is TxnState.ONGOING  # not durable yet
    [described] = shell.coordinator.describe(["t"])
    assert described.transaction_state == "Ongoing"
    assert shell.end("t", producer, True).error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert shell.init("t", producer_id=producer[0], producer_epoch=producer[1]).error_code == \
        ErrorCode.CONCURRENT_TRANSACTIONS
    assert shell.add("t", producer, ("b", 0)) == {("b", 0): ErrorCode.CONCURRENT_TRANSACTIONS}
    persist.on_durable(shell.now)
    assert shell.state("t") is TxnState.PREPARE_COMMIT


def test_an_end_txn_whose_decision_is_not_written_is_refused_and_writes_no_marker(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    written = len(shell.log)
    shell.failing_writes = 1
    assert shell.end("t", producer, True).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert shell.state("t") is TxnState.ONGOING and not shell.markers and len(shell.log) == written
    assert shell.coordinator.transactions["t"].partitions == {("a", 0)}
    assert shell.end("t", producer, False).error_code == ErrorCode.NONE  # the client's retry decides again
    [markers] = shell.write_markers()
    assert not markers.commit and shell.state("t") is TxnState.COMPLETE_ABORT


def test_an_init_producer_id_whose_bump_is_not_written_leaves_the_epoch(shell):
    producer = producer_of(shell.init("t"))
    shell.failing_writes = 1
    assert shell.init("t", producer_id=producer[0], producer_epoch=producer[1]).error_code == \
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert shell.coordinator.transactions["t"].producer_epoch == producer[1]
    assert producer_of(shell.init("t", producer_id=producer[0], producer_epoch=producer[1])) == \
        (producer[0], producer[1] + 1)
    assert shell.rebuilt().transactions["t"].producer_epoch == producer[1] + 1


def test_partitions_whose_addition_is_not_written_are_not_in_the_transaction(shell):
    producer = producer_of(shell.init("t"))
    shell.failing_writes = 1
    shell.add("t", producer, ("a", 0))
    assert shell.state("t") is TxnState.EMPTY
    assert shell.add("t", producer, ("a", 0), verify_only=True) == {("a", 0): ErrorCode.TRANSACTION_ABORTABLE}


def test_a_completion_not_written_is_written_again_and_the_transaction_stays_decided(shell):
    producer = producer_of(shell.init("t"))
    shell.add("t", producer, ("a", 0))
    shell.end("t", producer, True)
    shell.failing_writes = 1
    shell.write_markers()
    assert shell.state("t") is TxnState.PREPARE_COMMIT
    assert shell.end("t", producer, True).error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert shell.coordinator.next_deadline_ms() <= shell.now + 500
    shell.tick(500)
    assert shell.state("t") is TxnState.COMPLETE_COMMIT and not shell.markers
    assert shell.end("t", producer, True).error_code == ErrorCode.NONE


def test_a_timed_out_abort_not_written_leaves_the_transaction_open_until_the_next_check(shell):
    producer = producer_of(shell.init("t", timeout_ms=2000))
    shell.add("t", producer, ("a", 0))
    shell.tick(1500)  # the first tick starts the check's clock
    shell.failing_writes = 1
    shell.tick(1000)
    assert shell.failing_writes == 0 and shell.state("t") is TxnState.ONGOING and not shell.markers
    assert shell.coordinator.transactions["t"].producer_epoch == producer[1]  # not fenced
    shell.tick(1000)
    assert shell.state("t") is TxnState.PREPARE_ABORT and len(shell.markers) == 1


def test_an_expiry_tombstone_not_written_keeps_the_transactional_id(shell):
    producer_of(shell.init("t"))
    shell.tick(1)  # the first tick starts the check's clock
    shell.failing_writes = 1
    shell.tick(CONFIG.transactional_id_expiration_ms + CONFIG.remove_expired_check_ms)
    assert shell.failing_writes == 0 and "t" in shell.coordinator.transactions
    shell.tick(CONFIG.remove_expired_check_ms)
    assert "t" not in shell.coordinator.transactions
