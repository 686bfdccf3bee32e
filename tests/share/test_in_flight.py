"""The in-flight ranges: contiguous, split only where records diverge, merged again once they agree."""

from __future__ import annotations

import pytest

from kbroker.share.in_flight import InFlightRecords, RecordState

AVAILABLE, ACQUIRED, ARCHIVED = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ARCHIVED


def spans(records: InFlightRecords) -> list[tuple[int, int, str, int]]:
    return [(r.first_offset, r.last_offset, r.state.name, r.delivery_count) for r in records]


def test_extending_with_the_same_state_keeps_one_range():
    records = InFlightRecords(10)
    records.extend(14, ACQUIRED, 1, "a", 100)
    records.extend(19, ACQUIRED, 1, "a", 100)
    records.extend(21, ACQUIRED, 1, "b", 100)
    assert spans(records) == [(10, 19, "ACQUIRED", 1), (20, 21, "ACQUIRED", 1)]
    assert (records.start_offset, records.end_offset, records.record_count) == (10, 22, 12)


def test_a_range_is_split_where_its_records_diverge_and_merged_once_they_agree_again():
    records = InFlightRecords(0)
    records.extend(9, AVAILABLE, 1)
    middle = records.isolate(3, 5)
    assert [(r.first_offset, r.last_offset) for r in middle] == [(3, 5)]
    middle[0].state = ARCHIVED
    records.coalesce(3, 5)
    assert spans(records) == [(0, 2, "AVAILABLE", 1), (3, 5, "ARCHIVED", 1), (6, 9, "AVAILABLE", 1)]
    for in_flight in records.isolate(3, 5):
        in_flight.state = AVAILABLE
    records.coalesce(3, 5)
    assert spans(records) == [(0, 9, "AVAILABLE", 1)]


def test_isolating_across_ranges_returns_each_piece():
    records = InFlightRecords(0)
    records.extend(4, AVAILABLE, 1)
    records.extend(9, AVAILABLE, 2)
    assert [(r.first_offset, r.last_offset) for r in records.isolate(3, 6)] == [(3, 4), (5, 6)]
    assert len(records) == 4
    assert [(r.first_offset, r.last_offset) for r in records.overlapping(4, 5)] == [(3, 4), (5, 6)]
    assert records.overlapping(20, 30) == []


def test_dropping_below_an_offset_trims_the_range_holding_it():
    records = InFlightRecords(0)
    records.extend(9, ACQUIRED, 1, "a", 5)
    dropped = records.drop_below(4)
    assert [(r.first_offset, r.last_offset) for r in dropped] == [(0, 3)]
    assert spans(records) == [(4, 9, "ACQUIRED", 1)] and records.start_offset == 4
    assert records.drop_below(2) == []


def test_dropping_past_the_end_empties_the_window_there():
    records = InFlightRecords(0)
    records.extend(9, ARCHIVED, 0)
    assert len(records.drop_below(15)) == 1
    assert (records.start_offset, records.end_offset, len(records)) == (15, 15, 0)
    records.clear(3)
    assert (records.start_offset, records.end_offset) == (3, 3)


def test_offsets_outside_the_window_are_refused():
    records = InFlightRecords(5)
    records.extend(9, AVAILABLE, 0)
    with pytest.raises(ValueError):
        records.isolate(4, 6)
    with pytest.raises(ValueError):
        records.isolate(8, 10)
    with pytest.raises(ValueError):
        records.extend(8, AVAILABLE, 0)
