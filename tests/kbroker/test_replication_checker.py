"""compat_tests/replication_checker.py finds each anomaly it claims to (and none in a clean history)."""

from compat_tests.replication_checker import check

ACKED = [(0, 0, "0:0"), (0, 1, "0:1"), (1, 0, "1:0")]
READ = [(0, 0, "0:0"), (0, 1, "0:1"), (1, 0, "1:0"), (1, 1, "1:1")]  # 1:1 unacknowledged but written: fine


def test_a_clean_history_has_no_anomaly():
    assert check(ACKED, READ, {0: {1: b"ab", 2: b"ab"}}).anomalies == 0


def test_an_acknowledged_write_missing_or_moved_is_lost():
    assert check(ACKED, READ[1:]).lost == [(0, 0, "0:0")]
    moved = [(0, 5, "0:0")] + READ[1:]
    assert check(ACKED, moved).lost == [(0, 0, "0:0")]


def test_a_value_twice_is_a_duplicate_and_two_values_at_one_offset_conflict():
    assert check(ACKED, READ + [(0, 2, "0:1")]).duplicated == [("0:1", [(0, 1), (0, 2)])]
    assert check(ACKED, READ + [(0, 1, "0:9")]).conflicting == [((0, 1), ["0:1", "0:9"])]


def test_sequences_out_of_offset_order_and_diverged_replicas_are_reported():
    swapped = [(0, 0, "0:1"), (0, 1, "0:0")]
    assert check([], swapped).reordered == [(0, 1, 0)]
    assert check([], [], {0: {1: b"ab", 2: b"ax"}}).diverged == [(0, {1: 2, 2: 2})]


def test_a_write_acknowledged_without_an_offset_counts_wherever_it_is_in_its_partition():
    """librdkafka's idempotent producer reports some deliveries with no offset (persisted, offset unknown)."""
    read = [(0, 0, "0:0"), (0, 1, "0:1")]
    assert check([(0, None, "0:1")], read).anomalies == 0
    verdict = check([(0, None, "0:2"), (1, None, "0:0")], read)
    assert verdict.lost == [(0, None, "0:2"), (1, None, "0:0")]
