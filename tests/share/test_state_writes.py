"""The share-partition's durable state: what each change writes (WriteShareGroupState), how a change waits for
its write and is undone when it fails (DESIGN.md rule 11), and how a new leader resumes from what was
written (ReadShareGroupState)."""

from __future__ import annotations

import pytest

from kbroker.log.clock import FakeClock
from kbroker.share.partition import SharePartition, SharePartitionConfig
from kbroker.share.persisted import UNINITIALIZED_START_OFFSET, PersistedState, StateBatch, answer_for_write_error
from kbroker.wire.errors import ErrorCode
from tests.share.partition_calls import (ACCEPT, CONFIG, LOCK_MS, REJECT, RELEASE, acknowledge, acknowledged, acquired,
                                         states)

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def partition() -> SharePartition:
    return SharePartition(CONFIG, 0, state_epoch=3, leader_epoch=7)


def batches_of(state: PersistedState) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches]


def resumed(state: PersistedState, *, log_start_offset: int = 0, log_end_offset: int = 1000,
            config: SharePartitionConfig = CONFIG) -> SharePartition:
    return SharePartition.from_state(state, config, leader_epoch=8, log_start_offset=log_start_offset,
                                     log_end_offset=log_end_offset)


# -- what a write holds ---------------------------------------------------------------------------


def test_a_write_holds_the_changed_batches_with_the_start_offset_as_it_stands(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    write = acknowledge(partition, "a", clock, (0, 5, ACCEPT, ACCEPT, RELEASE, RELEASE, REJECT, ACCEPT)).write
    assert (write.state.state_epoch, write.state.leader_epoch, write.state.start_offset) == (3, 7, 0)
    assert batches_of(write.state) == [(0, 1, ACKNOWLEDGED, 1), (2, 3, AVAILABLE, 1), (4, 4, ARCHIVED, 1),
                                       (5, 5, ACKNOWLEDGED, 1)]
    partition.write_durable(write)
    assert partition.start_offset == 2
    next_write = acknowledge(partition, "a", clock, (6, 9, ACCEPT)).write
    assert next_write.state.start_offset == 2  # the move a write causes is carried by the next one
    assert next_write.write_id != write.write_id


def test_a_member_leaving_and_an_expired_lock_write_their_releases(partition, clock):
    acquired(partition, "a", 4, [(0, 3)], clock)
    acquired(partition, "b", 4, [(4, 7)], clock)
    leaving = partition.release_member("a")
    assert batches_of(leaving.state) == [(0, 3, AVAILABLE, 1)]
    clock.advance(LOCK_MS)
    expiring = partition.expire_locks(clock.monotonic_ms())
    assert batches_of(expiring.state) == [(4, 7, AVAILABLE, 1)]  # a's records wait for their own write


# -- a write's fate --------------------------------------------------------------------------------


def test_a_failed_write_leaves_the_records_acquired_as_before(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    before = states(partition)
    write = acknowledge(partition, "a", clock, (0, 4, ACCEPT)).write
    outcome = partition.write_failed(write, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert (outcome.error_code, outcome.records_released) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, False)
    assert states(partition) == before and partition.counters().pending_writes == 0
    acknowledged(partition, "a", clock, (0, 4, ACCEPT))  # the member may try again
    assert partition.start_offset == 5


def test_a_failed_release_leaves_the_member_holding_its_records_until_their_lock_runs_out(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    partition.write_failed(partition.release_member("a"), ErrorCode.REQUEST_TIMED_OUT)
    assert states(partition) == [(0, 4, "ACQUIRED", 1, "a")]
    clock.advance(LOCK_MS)
    partition.write_durable(partition.expire_locks(clock.monotonic_ms()))
    assert states(partition) == [(0, 4, "AVAILABLE", 1, None)]


def test_a_lock_that_ran_out_while_its_write_failed_expires_at_the_next_call(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    write = acknowledge(partition, "a", clock, (0, 4, ACCEPT)).write
    clock.advance(LOCK_MS)
    assert partition.expire_locks(clock.monotonic_ms()) is None  # waiting for its write
    partition.write_failed(write, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert partition.next_deadline_ms() <= clock.monotonic_ms()
    expiring = partition.expire_locks(clock.monotonic_ms())
    partition.write_failed(expiring, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert states(partition) == [(0, 4, "ACQUIRED", 1, "a")]  # an expiry waits for its write too
    partition.write_durable(partition.expire_locks(clock.monotonic_ms()))
    assert states(partition) == [(0, 4, "AVAILABLE", 1, None)]


def test_records_waiting_for_their_write_are_not_acquired_released_or_expired_meanwhile(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    write = acknowledge(partition, "a", clock, (0, 4, RELEASE)).write
    assert acquired(partition, "b", 5, [], clock) == []
    assert partition.release_member("a") is None
    clock.advance(LOCK_MS)
    assert partition.expire_locks(clock.monotonic_ms()) is None
    partition.write_durable(write)
    assert acquired(partition, "b", 5, [], clock) == [(0, 4, 2)]


def test_writes_on_their_way_meet_their_fates_independently(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    first = acknowledge(partition, "a", clock, (0, 4, ACCEPT)).write
    second = acknowledge(partition, "a", clock, (5, 9, REJECT)).write
    assert partition.counters().pending_writes == 2
    partition.write_durable(second)
    assert states(partition) == [(0, 4, "ACQUIRED", 1, "a"), (5, 9, "ARCHIVED", 1, None)]
    partition.write_failed(first, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert states(partition) == [(0, 4, "ACQUIRED", 1, "a"), (5, 9, "ARCHIVED", 1, None)]
    assert partition.write_durable(first).error_code == ErrorCode.NONE  # told twice: the second is a no-op
    assert states(partition)[0] == (0, 4, "ACQUIRED", 1, "a")


@pytest.mark.parametrize("fencing", [ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH])
def test_a_fenced_write_fences_the_partition(partition, clock, fencing):
    acquired(partition, "a", 5, [(0, 4)], clock)
    write = acknowledge(partition, "a", clock, (0, 0, ACCEPT)).write
    assert partition.write_failed(write, fencing).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.fenced
    assert acknowledge(partition, "a", clock, (1, 1, ACCEPT)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert acquired(partition, "a", 5, [(5, 9)], clock) == []
    assert partition.release_member("a") is None
    clock.advance(LOCK_MS)
    assert partition.expire_locks(clock.monotonic_ms()) is None


@pytest.mark.parametrize("written, answered", [
    (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_ID_NOT_FOUND),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_SERVER_ERROR),
])
def test_a_write_error_is_answered_as_kafka_answers_it(written, answered):
    assert answer_for_write_error(written) == answered


# -- resuming from the written state -------------------------------------------------------------


def test_the_persisted_form_is_the_durable_view(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    acknowledged(partition, "a", clock, (0, 1, RELEASE), (3, 3, ACCEPT))
    acquired(partition, "b", 1, [], clock)
    acknowledge(partition, "a", clock, (4, 4, REJECT))  # on its way: not in the durable view
    state = partition.persisted_state()
    assert (state.state_epoch, state.leader_epoch, state.start_offset) == (3, 7, 0)
    assert batches_of(state) == [(0, 0, AVAILABLE, 2), (1, 2, AVAILABLE, 1), (3, 3, ACKNOWLEDGED, 1),
                                 (4, 9, AVAILABLE, 1)]


def test_a_new_leader_resumes_with_acquired_records_available_and_their_delivery_counts(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    acknowledged(partition, "a", clock, (0, 1, RELEASE), (3, 3, ACCEPT), (5, 5, REJECT))
    acquired(partition, "b", 2, [], clock)
    successor = resumed(partition.persisted_state())
    assert (successor.start_offset, successor.end_offset) == (0, 10)
    assert (successor.state_epoch, successor.leader_epoch) == (3, 8)
    assert states(successor) == [(0, 1, "AVAILABLE", 2, None), (2, 2, "AVAILABLE", 1, None),
                                 (3, 3, "ACKNOWLEDGED", 1, None), (4, 4, "AVAILABLE", 1, None),
                                 (5, 5, "ARCHIVED", 1, None), (6, 9, "AVAILABLE", 1, None)]
    assert successor.persisted_state() == PersistedState(3, 0, partition.persisted_state().state_batches, 8)
    assert acquired(successor, "c", 3, [], clock) == [(0, 1, 3), (2, 2, 2)]


def test_a_new_leader_reads_offsets_the_state_does_not_mention_as_never_delivered():
    state = PersistedState(1, 10, (StateBatch(12, 13, ACKNOWLEDGED, 1), StateBatch(15, 16, 1, 2)))
    successor = resumed(state)
    assert states(successor) == [(10, 11, "AVAILABLE", 0, None), (12, 13, "ACKNOWLEDGED", 1, None),
                                 (14, 14, "AVAILABLE", 0, None), (15, 16, "AVAILABLE", 2, None)]
    assert successor.end_offset == 17


def test_a_new_leader_moves_past_a_finished_prefix_and_the_log_start():
    state = PersistedState(1, 10, (StateBatch(10, 13, ACKNOWLEDGED, 1), StateBatch(14, 20, AVAILABLE, 1)))
    assert resumed(state).start_offset == 14
    assert resumed(state, log_start_offset=18).start_offset == 18
    assert resumed(PersistedState(1, 10), log_start_offset=30).start_offset == 30


@pytest.mark.parametrize("reset, start", [("earliest", 5), ("latest", 42)])
def test_a_share_partition_without_state_starts_where_share_auto_offset_reset_says(reset, start):
    config = SharePartitionConfig(auto_offset_reset=reset)
    fresh = resumed(PersistedState(0, UNINITIALIZED_START_OFFSET), log_start_offset=5, log_end_offset=42, config=config)
    assert (fresh.start_offset, fresh.end_offset, states(fresh)) == (start, start, [])


@pytest.mark.parametrize("batches", [
    (StateBatch(5, 6, AVAILABLE, 1),),  # below the start offset
    (StateBatch(12, 14, AVAILABLE, 1), StateBatch(14, 15, AVAILABLE, 1)),  # overlapping
    (StateBatch(14, 15, AVAILABLE, 1), StateBatch(12, 13, AVAILABLE, 1)),  # out of order
    (StateBatch(13, 12, AVAILABLE, 1),),
    (StateBatch(12, 13, 3, 1),),  # no such delivery state
    (StateBatch(12, 13, AVAILABLE, -1),),
])
def test_a_malformed_state_is_refused(batches):
    with pytest.raises(ValueError):
        resumed(PersistedState(1, 10, batches))
