"""What one ShareFetch may acquire from one share-partition: ``max_records`` exactly (ShareAcquireMode
record_limit, KIP-1206), or rounded up to the end of the batch that reaches it (batch_optimized, Kafka's
default and all that ShareFetch v1 knows), new records answered in runs of about ``batch_size``.

The expected answers are Kafka 4.4's, measured over the wire on batches of 3, 3, 2 and 10 records (offsets
0-2, 3-5, 6-7, 8-17): compat_tests/differential_sessions_share.py compares the same exchanges.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kbroker.log.clock import FakeClock
from kbroker.share.partition import SharePartition, SharePartitionConfig
from tests.share.partition_calls import CONFIG, RELEASE, acknowledged, acquired, states

BATCHES = [(0, 2), (3, 5), (6, 7), (8, 17)]


def test_batch_optimized_acquisition_takes_the_batch_that_reaches_max_records_whole(partition, clock):
    assert acquired(partition, "a", 4, BATCHES, clock, whole_batches=True, batch_size=4) == [(0, 5, 1)]
    assert partition.end_offset == 6


def test_record_limit_acquisition_takes_exactly_max_records(partition, clock):
    assert acquired(partition, "a", 4, BATCHES, clock, whole_batches=False, batch_size=4) == [(0, 3, 1)]
    assert acquired(partition, "a", 2, BATCHES, clock) == [(4, 5, 1)]  # record_limit is the core's default


def test_a_limit_met_at_a_batch_end_takes_nothing_more(partition, clock):
    assert acquired(partition, "a", 3, BATCHES, clock, whole_batches=True) == [(0, 2, 1)]
    assert acquired(partition, "a", 5, BATCHES, clock, whole_batches=True) == [(3, 7, 1)]


def test_new_records_are_answered_in_runs_of_batch_size_cut_at_batch_boundaries(partition, clock):
    acquired(partition, "a", 4, BATCHES, clock, whole_batches=True, batch_size=4)
    # 12 records, more than a batch_size of 2: a run ends before each batch that starts 2 or more past its start
    assert acquired(partition, "a", 10, BATCHES, clock, whole_batches=True, batch_size=2) == [(6, 7, 1), (8, 17, 1)]
    assert states(partition) == [(0, 17, "ACQUIRED", 1, "a")]  # one run for the share-partition all the same


def test_runs_no_longer_than_batch_size_are_not_cut(partition, clock):
    assert acquired(partition, "a", 100, BATCHES, clock, whole_batches=True, batch_size=18) == [(0, 17, 1)]
    assert acquired(partition, "b", 100, [(18, 20), (21, 23)], clock, batch_size=0) == [(18, 23, 1)]


def test_records_delivered_again_round_up_to_the_end_of_their_batch(partition, clock):
    acquired(partition, "a", 100, BATCHES, clock)
    acknowledged(partition, "a", clock, (0, 17, RELEASE))
    assert acquired(partition, "b", 1, BATCHES, clock, whole_batches=True) == [(0, 2, 2)]
    assert acquired(partition, "b", 3, BATCHES, clock, whole_batches=False) == [(3, 5, 2)]
    assert acquired(partition, "b", 2, BATCHES, clock, whole_batches=False) == [(6, 7, 2)]
    assert acquired(partition, "b", 3, BATCHES, clock, whole_batches=False) == [(8, 10, 2)]
    assert acquired(partition, "b", 3, BATCHES, clock, whole_batches=True) == [(11, 17, 2)]  # the rest of 8-17


def test_rounding_up_takes_the_batchs_released_and_new_records_alike(partition, clock):
    acquired(partition, "a", 5, [(0, 9)], clock)
    acknowledged(partition, "a", clock, (0, 4, RELEASE))
    assert acquired(partition, "b", 2, [(0, 9)], clock, whole_batches=True) == [(0, 4, 2), (5, 9, 1)]
    assert partition.end_offset == 10


def test_rounding_up_stops_at_the_record_lock_limit(clock):
    partition = SharePartition(SharePartitionConfig(max_record_locks=5), 0)
    assert acquired(partition, "a", 2, [(0, 9)], clock, whole_batches=True) == [(0, 4, 1)]


def test_aborted_records_in_the_rounded_up_batch_are_archived_not_delivered(partition, clock):
    assert acquired(partition, "a", 1, [(0, 5), (6, 9)], clock, whole_batches=True,
                    aborted=[(2, 3)]) == [(0, 1, 1), (4, 5, 1)]
    assert [state for _, _, state, _, _ in states(partition)] == ["ACQUIRED", "ARCHIVED", "ACQUIRED"]
    assert partition.end_offset == 6


@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=8), max_records=st.integers(1, 50))
def test_new_records_come_in_the_fewest_whole_batches_that_reach_max_records(sizes, max_records):
    batches, first_offset = [], 0
    for size in sizes:
        batches.append((first_offset, first_offset + size - 1))
        first_offset += size
    reaching = next((last for _, last in batches if last + 1 >= max_records), batches[-1][1])
    clock = FakeClock()
    assert acquired(SharePartition(CONFIG, 0), "a", max_records, batches, clock, whole_batches=True) == [
        (0, reaching, 1)]
    assert acquired(SharePartition(CONFIG, 0), "a", max_records, batches, clock) == [
        (0, min(max_records, first_offset) - 1, 1)]


def test_records_available_again_past_the_fetched_batches_wait_for_a_fetch_that_reads_them(partition, clock):
    """A ShareFetch whose max_bytes let the log read one batch answers that batch's records only: Kafka
    acquires from what was read, and records acquired without their bytes would only wait for their lock."""
    acquired(partition, "a", 100, BATCHES, clock)
    acknowledged(partition, "a", clock, (0, 2, RELEASE), (6, 7, RELEASE))
    assert acquired(partition, "b", 100, [(0, 2)], clock) == [(0, 2, 2)]
    assert acquired(partition, "b", 100, [(6, 7)], clock) == [(6, 7, 2)]
