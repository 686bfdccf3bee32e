"""One share-partition's transitions and refusals, driven by a FakeClock (Kafka's SharePartition is the reference)."""

from __future__ import annotations

import pytest

from kbroker.share.partition import SharePartition, SharePartitionConfig, validate_acknowledgement_batches
from kbroker.share.partition import AcknowledgementBatch as Batch
from kbroker.wire.errors import ErrorCode
from tests.share.partition_calls import (ACCEPT, CONFIG, GAP, LOCK_MS, REJECT, RELEASE, acknowledge, acknowledged,
                                         acquired, durable, states)

NONE, INVALID_RECORD_STATE, INVALID_REQUEST = ErrorCode.NONE, ErrorCode.INVALID_RECORD_STATE, ErrorCode.INVALID_REQUEST


# -- acquisition --------------------------------------------------------------------------------


def test_new_records_are_acquired_once_with_a_lock(partition, clock):
    assert acquired(partition, "a", 10, [(0, 4), (5, 9)], clock) == [(0, 9, 1)]
    assert states(partition) == [(0, 9, "ACQUIRED", 1, "a")]
    assert (partition.start_offset, partition.end_offset) == (0, 10)
    assert partition.next_deadline_ms() == clock.monotonic_ms() + LOCK_MS
    assert partition.next_fetch_offset() == 10
    counters = partition.counters()
    assert (counters.in_flight_records, counters.acquired_records, counters.acquired_records_total) == (10, 10, 10)


def test_acquisition_takes_exactly_max_records(partition, clock):
    assert acquired(partition, "a", 3, [(0, 9)], clock) == [(0, 2, 1)]
    assert partition.end_offset == 3
    assert acquired(partition, "b", 3, [(0, 9)], clock) == [(3, 5, 1)]  # what lies below the end is in flight
    assert acquired(partition, "c", 0, [(6, 9)], clock) == []
    assert partition.end_offset == 6


def test_new_records_stop_at_the_record_lock_limit(clock):
    partition = SharePartition(SharePartitionConfig(max_record_locks=5), 0)
    assert acquired(partition, "a", 100, [(0, 9)], clock) == [(0, 4, 1)]
    assert acquired(partition, "b", 100, [(5, 9)], clock) == []
    acknowledged(partition, "a", clock, (0, 1, ACCEPT))
    assert acquired(partition, "b", 100, [(5, 9)], clock) == [(5, 6, 1)]
    assert partition.counters().in_flight_records == 5


def test_released_records_are_acquired_before_new_ones(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    acknowledged(partition, "a", clock, (2, 4, RELEASE), (5, 9, ACCEPT))
    assert partition.next_fetch_offset() == 2
    assert acquired(partition, "b", 5, [(10, 19)], clock) == [(2, 4, 2), (10, 11, 1)]
    assert partition.counters().redelivered_records_total == 3


def test_offsets_without_a_record_are_archived_and_never_handed_out(partition, clock):
    assert acquired(partition, "a", 10, [(3, 4), (8, 9)], clock) == [(3, 4, 1), (8, 9, 1)]
    assert partition.start_offset == 3  # 0-2 hold nothing: finished at once
    assert states(partition) == [(3, 4, "ACQUIRED", 1, "a"), (5, 7, "ARCHIVED", 0, None), (8, 9, "ACQUIRED", 1, "a")]


def test_an_empty_fetch_acquires_nothing(partition, clock):
    assert acquired(partition, "a", 10, [], clock) == []
    assert (partition.start_offset, partition.end_offset) == (0, 0)


def test_fetched_batches_must_be_ascending_and_disjoint(partition, clock):
    for batches in ([(5, 4)], [(0, 4), (4, 6)], [(5, 6), (0, 1)]):
        with pytest.raises(ValueError):
            partition.acquire("a", 10, batches, clock.monotonic_ms())


def test_read_committed_archives_aborted_records_instead_of_delivering_them(partition, clock):
    assert acquired(partition, "a", 4, [(0, 9)], clock, aborted=[(2, 4)]) == [(0, 1, 1), (5, 6, 1)]
    assert states(partition) == [(0, 1, "ACQUIRED", 1, "a"), (2, 4, "ARCHIVED", 0, None), (5, 6, "ACQUIRED", 1, "a")]
    assert partition.counters().archived_records_total == 3


def test_aborted_records_available_again_are_archived_not_redelivered(partition, clock):
    acquired(partition, "a", 6, [(0, 5)], clock)
    acknowledged(partition, "a", clock, (0, 5, RELEASE))
    assert acquired(partition, "b", 10, [], clock, aborted=[(1, 2)]) == [(0, 0, 2), (3, 5, 2)]
    assert ("ARCHIVED", 1) in {(state, count) for _, _, state, count, _ in states(partition)}


# -- acknowledgement ----------------------------------------------------------------------------


def test_accepting_records_finishes_them_once_durable(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    result = acknowledge(partition, "a", clock, (0, 9, ACCEPT))
    assert result.error_code == NONE and result.write is not None
    assert states(partition) == [(0, 9, "ACQUIRED", 1, "a")]  # nothing shows before the write is durable
    outcome = partition.write_durable(result.write)
    assert (outcome.error_code, outcome.records_released) == (NONE, False)
    assert (partition.start_offset, partition.end_offset, states(partition)) == (10, 10, [])
    assert partition.counters().acknowledged_records_total == 10


def test_releasing_records_makes_them_available_with_their_delivery_count(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    result = acknowledge(partition, "a", clock, (0, 4, RELEASE))
    assert partition.write_durable(result.write).records_released
    assert states(partition) == [(0, 4, "AVAILABLE", 1, None)]
    assert partition.next_deadline_ms() is None
    assert acquired(partition, "b", 5, [], clock) == [(0, 4, 2)]


@pytest.mark.parametrize("kind", [REJECT, GAP])
def test_rejected_records_and_gaps_are_archived(partition, clock, kind):
    acquired(partition, "a", 5, [(0, 4)], clock)
    acknowledged(partition, "a", clock, (1, 3, kind))
    assert states(partition) == [(0, 0, "ACQUIRED", 1, "a"), (1, 3, "ARCHIVED", 1, None), (4, 4, "ACQUIRED", 1, "a")]
    assert partition.counters().archived_records_total == 3


def test_one_type_per_record_splits_the_range(partition, clock):
    acquired(partition, "a", 6, [(0, 5)], clock)
    acknowledged(partition, "a", clock, (0, 5, ACCEPT, ACCEPT, RELEASE, REJECT, GAP, ACCEPT))
    assert partition.start_offset == 2
    assert states(partition) == [(2, 2, "AVAILABLE", 1, None), (3, 4, "ARCHIVED", 1, None),
                                 (5, 5, "ACKNOWLEDGED", 1, None)]


def test_a_release_at_the_delivery_count_limit_archives(partition, clock):
    acquired(partition, "a", 2, [(0, 1)], clock)
    for member in ("b", "c"):
        acknowledged(partition, "a" if member == "b" else "b", clock, (0, 1, RELEASE))
        assert acquired(partition, member, 2, [], clock)[0][2] == (2 if member == "b" else 3)
    acknowledged(partition, "c", clock, (0, 1, RELEASE))  # third delivery: the limit
    assert states(partition) == [] and partition.start_offset == 2
    assert partition.counters().archived_records_total == 2


def test_records_not_acquired_by_the_member_are_refused(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    acquired(partition, "b", 5, [(5, 9)], clock)
    acknowledged(partition, "b", clock, (7, 7, ACCEPT))
    acknowledged(partition, "a", clock, (2, 2, RELEASE))
    for member, batch in [("b", (0, 4, ACCEPT)),  # another member's
                          ("a", (4, 5, ACCEPT)),  # straddling two members
                          ("b", (7, 7, ACCEPT)),  # already acknowledged
                          ("a", (2, 2, ACCEPT)),  # released: available, acquired by no one
                          ("c", (5, 5, ACCEPT))]:
        assert acknowledge(partition, member, clock, batch).error_code == INVALID_RECORD_STATE, (member, batch)


def test_records_whose_lock_ran_out_are_refused_even_before_they_are_expired(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    clock.advance(LOCK_MS)
    assert acknowledge(partition, "a", clock, (0, 4, ACCEPT)).error_code == INVALID_RECORD_STATE


def test_records_under_a_write_on_its_way_are_refused(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    assert acknowledge(partition, "a", clock, (0, 1, ACCEPT)).write is not None
    assert acknowledge(partition, "a", clock, (1, 1, REJECT)).error_code == INVALID_RECORD_STATE
    assert acknowledge(partition, "a", clock, (2, 2, REJECT)).write is not None


def test_offsets_past_the_end_are_an_invalid_request(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    assert acknowledge(partition, "a", clock, (3, 5, ACCEPT)).error_code == INVALID_REQUEST
    assert acknowledge(partition, "a", clock, (6, 8, ACCEPT)).error_code == INVALID_REQUEST


def test_nothing_in_flight_is_an_invalid_record_state(partition, clock):
    assert acknowledge(partition, "a", clock, (0, 4, ACCEPT)).error_code == INVALID_RECORD_STATE


def test_batches_below_the_start_offset_are_skipped_and_those_straddling_it_cut(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    acknowledged(partition, "a", clock, (0, 4, ACCEPT))
    result = acknowledge(partition, "a", clock, (0, 3, REJECT))
    assert (result.error_code, result.write) == (NONE, None)
    result = acknowledge(partition, "a", clock, (2, 6, ACCEPT, ACCEPT, ACCEPT, REJECT, REJECT))
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in result.write.state.state_batches] == [(5, 6, 4)]


def test_one_refused_batch_refuses_the_whole_call(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    before = states(partition)
    result = acknowledge(partition, "a", clock, (0, 4, ACCEPT), (5, 12, ACCEPT))
    assert (result.error_code, result.write) == (INVALID_REQUEST, None)
    assert states(partition) == before and partition.counters().pending_writes == 0
    assert acknowledge(partition, "a", clock, (0, 4, ACCEPT), (4, 5, ACCEPT)).error_code == INVALID_RECORD_STATE
    assert states(partition) == before


@pytest.mark.parametrize("batches", [
    [Batch(5, 4, (1,))],  # first past last
    [Batch(5, 6, (1,)), Batch(0, 1, (1,))],  # out of order
    [Batch(0, 4, ())],  # no type
    [Batch(0, 4, (1, 1))],  # neither one type nor one per record
    [Batch(0, 0, (4,))],  # unknown type
    [Batch(0, 0, (-1,))],
])
def test_malformed_batches_are_an_invalid_request(partition, clock, batches):
    acquired(partition, "a", 10, [(0, 9)], clock)
    assert validate_acknowledgement_batches(batches) == INVALID_REQUEST
    assert partition.acknowledge("a", batches, clock.monotonic_ms()).error_code == INVALID_REQUEST


def test_kafka_lets_a_batch_start_on_the_last_offset_of_the_one_before():
    assert validate_acknowledgement_batches([Batch(0, 4, (1,)), Batch(4, 5, (1,))]) == NONE


# -- acquisition locks ----------------------------------------------------------------------------


def test_an_expired_lock_makes_the_records_available_for_redelivery(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    clock.advance(LOCK_MS - 1)
    assert partition.expire_locks(clock.monotonic_ms()) is None
    clock.advance(1)
    assert partition.next_deadline_ms() == clock.monotonic_ms()
    write = partition.expire_locks(clock.monotonic_ms())
    assert states(partition) == [(0, 4, "ACQUIRED", 1, "a")]
    assert partition.next_deadline_ms() is None  # waiting for its write, it does not expire again
    assert partition.write_durable(write).records_released
    assert states(partition) == [(0, 4, "AVAILABLE", 1, None)]
    assert acquired(partition, "b", 10, [], clock) == [(0, 4, 2)]


def test_a_lock_expiring_at_the_delivery_count_limit_archives(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    for _ in range(2):
        clock.advance(LOCK_MS)
        durable(partition, partition.expire_locks(clock.monotonic_ms()))
        acquired(partition, "a", 5, [], clock)
    assert states(partition) == [(0, 4, "ACQUIRED", 3, "a")]
    clock.advance(LOCK_MS)
    durable(partition, partition.expire_locks(clock.monotonic_ms()))
    assert states(partition) == [] and partition.start_offset == 5


def test_only_the_expired_locks_go(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    clock.advance(1000)
    acquired(partition, "b", 5, [(5, 9)], clock)
    clock.advance(LOCK_MS - 1000)
    durable(partition, partition.expire_locks(clock.monotonic_ms()))
    assert states(partition) == [(0, 4, "AVAILABLE", 1, None), (5, 9, "ACQUIRED", 1, "b")]
    assert partition.next_deadline_ms() == clock.monotonic_ms() + 1000


# -- members leaving ------------------------------------------------------------------------------


def test_a_member_leaving_releases_its_records_with_their_delivery_counts(partition, clock):
    acquired(partition, "a", 5, [(0, 4)], clock)
    acquired(partition, "b", 5, [(5, 9)], clock)
    assert partition.release_member("c") is None
    write = partition.release_member("a")
    assert states(partition)[0] == (0, 4, "ACQUIRED", 1, "a")
    assert partition.write_durable(write).records_released
    assert states(partition) == [(0, 4, "AVAILABLE", 1, None), (5, 9, "ACQUIRED", 1, "b")]


def test_a_member_leaving_at_the_delivery_count_limit_archives(clock):
    partition = SharePartition(SharePartitionConfig(delivery_count_limit=1), 0)
    acquired(partition, "a", 5, [(0, 4)], clock)
    durable(partition, partition.release_member("a"))
    assert states(partition) == [] and partition.start_offset == 5


# -- the start offset ------------------------------------------------------------------------------


def test_the_start_offset_moves_past_finished_records_only_up_to_the_first_unfinished(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    acknowledged(partition, "a", clock, (3, 5, ACCEPT))
    assert partition.start_offset == 0
    acknowledged(partition, "a", clock, (0, 1, REJECT))
    assert partition.start_offset == 2
    acknowledged(partition, "a", clock, (2, 2, ACCEPT))
    assert partition.start_offset == 6
    assert states(partition) == [(6, 9, "ACQUIRED", 1, "a")]


def test_the_log_start_moving_forward_forgets_the_records_below(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    partition.move_start_offset(4)
    assert states(partition) == [(4, 9, "ACQUIRED", 1, "a")]
    assert partition.counters().archived_records_total == 4
    result = acknowledge(partition, "a", clock, (0, 3, ACCEPT))
    assert (result.error_code, result.write) == (NONE, None)
    acknowledged(partition, "a", clock, (2, 5, ACCEPT))
    assert partition.start_offset == 6


def test_the_log_start_moving_past_the_end_starts_the_window_there(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    partition.move_start_offset(15)
    assert (partition.start_offset, partition.end_offset, states(partition)) == (15, 15, [])
    assert acquired(partition, "a", 10, [(12, 20)], clock) == [(15, 20, 1)]


def test_a_write_on_its_way_for_records_the_start_offset_passed_changes_only_what_is_left(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    write = acknowledge(partition, "a", clock, (0, 9, RELEASE)).write
    partition.move_start_offset(5)
    partition.write_durable(write)
    assert states(partition) == [(5, 9, "AVAILABLE", 1, None)]


def test_moving_the_start_offset_back_starts_over_there(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    acknowledged(partition, "a", clock, (0, 4, ACCEPT))
    write = acknowledge(partition, "a", clock, (5, 9, ACCEPT)).write
    partition.move_start_offset(2)  # AlterShareGroupOffsets on an empty group
    assert (partition.start_offset, partition.end_offset, states(partition)) == (2, 2, [])
    assert partition.write_durable(write).error_code == NONE
    assert states(partition) == []
    assert acquired(partition, "b", 3, [(0, 9)], clock) == [(2, 4, 1)]
    with pytest.raises(ValueError):
        partition.move_start_offset(-1)


def test_counters_follow_the_records(partition, clock):
    acquired(partition, "a", 10, [(0, 9)], clock)
    acknowledged(partition, "a", clock, (0, 2, RELEASE), (3, 4, ACCEPT), (5, 5, REJECT))
    acquired(partition, "b", 1, [], clock)
    pending = acknowledge(partition, "b", clock, (0, 0, ACCEPT)).write
    counters = partition.counters()
    assert counters.in_flight_records == 10
    assert (counters.acquired_records, counters.available_records, counters.pending_writes) == (5, 2, 1)
    assert (counters.acquired_records_total, counters.redelivered_records_total) == (11, 1)
    assert (counters.acknowledged_records_total, counters.archived_records_total) == (2, 1)
    assert pending is not None


def test_settings_are_checked():
    with pytest.raises(ValueError):
        SharePartitionConfig(auto_offset_reset="none")
    with pytest.raises(ValueError):
        SharePartitionConfig(delivery_count_limit=0)
    with pytest.raises(ValueError):
        SharePartition(CONFIG, -1)
