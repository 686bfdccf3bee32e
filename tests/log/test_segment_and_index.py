"""Unit tests of the sparse indexes, one segment, and the log's append rules.

Indexes: Kafka's lookup semantics, truncation, rewrite, lazy loading, and
damaged files refused with CorruptIndexError. Segments: read bounds,
translate, timestamp search. The log: rolls by size, age and full index,
LogAppendTime and leader epoch stamping, follower appends, reads out of
range, and regions that outlive the segment retention deleted.
"""

from __future__ import annotations

import builtins
import errno
import os
import random
import struct

import pytest

from kbroker.log.append_origin import AppendOrigin
from kbroker.log.config import LogConfig
from kbroker.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from kbroker.log.partition_log import MAX_TIMESTAMP, Log, OffsetOutOfRange, OffsetsOutOfOrder
from kbroker.log.segment import FileRegion, LogSegment, SegmentSettings
from kbroker.wire.records import LOG_APPEND_TIME, BatchHeader, Record, build_batch, iter_batches, validate_batch


def batch(base_offset=0, count=1, base_timestamp=1_000, timestamp_deltas=None, value=b"v", leader_epoch=-1) -> bytes:
    deltas = timestamp_deltas or [0] * count
    records = [Record(offset_delta=i, timestamp_delta=deltas[i], value=value + b"%d" % i) for i in range(count)]
    return build_batch(records, base_offset=base_offset, base_timestamp=base_timestamp, partition_leader_epoch=leader_epoch)


def headers(data: bytes) -> list[BatchHeader]:
    return [header for _, header in iter_batches(data, verify_crc=True)]


# -- OffsetIndex -----------------------------------------------------------------


def offset_index(tmp_path, base_offset=100, max_index_bytes=1024) -> OffsetIndex:
    return OffsetIndex(str(tmp_path / f"{base_offset:020d}.index"), base_offset, max_index_bytes)


def test_offset_index_lookup_is_the_largest_entry_at_or_below(tmp_path):
    index = offset_index(tmp_path)
    for offset, position in [(105, 0), (110, 50), (120, 90)]:
        index.append(offset, position)
    assert index.lookup(0) == (100, 0)  # below every entry: the segment's start
    assert index.lookup(104) == (100, 0)
    assert index.lookup(105) == (105, 0)
    assert index.lookup(109) == (105, 0)
    assert index.lookup(110) == (110, 50)
    assert index.lookup(119) == (110, 50)
    assert index.lookup(10**12) == (120, 90)
    assert index.last_entry() == (120, 90)
    assert offset_index(tmp_path, base_offset=7).last_entry() == (7, 0)  # no file: no entries


def test_offset_index_ignores_entries_that_do_not_move_forward(tmp_path):
    index = offset_index(tmp_path)
    index.append(110, 50)
    index.append(110, 70)
    index.append(108, 80)
    assert index.entries == 1 and index.lookup(200) == (110, 50)


def test_offset_index_is_kafkas_layout_and_survives_reopening(tmp_path):
    index = offset_index(tmp_path)
    index.append(105, 0)
    index.append(130, 4_000)
    index.close()
    with open(index.path, "rb") as file:
        assert file.read() == struct.pack(">iiii", 5, 0, 30, 4_000)
    again = offset_index(tmp_path)
    assert again.entries == 2 and again.lookup(129) == (105, 0) and again.lookup(130) == (130, 4_000)


def test_offset_index_is_read_on_first_use_only(tmp_path, monkeypatch):
    path = str(tmp_path / "00000000000000000100.index")
    opened = []
    real_open, real_os_open = builtins.open, os.open
    monkeypatch.setattr(builtins, "open", lambda file, *a, **k: (opened.append(file), real_open(file, *a, **k))[1])
    monkeypatch.setattr(os, "open", lambda file, *a, **k: (opened.append(file), real_os_open(file, *a, **k))[1])
    index = OffsetIndex(path, 100, 1024)
    assert index.max_entries == 128
    monkeypatch.undo()
    assert opened == []
    with open(path, "wb") as file:  # written after construction: seen only because nothing was read yet
        file.write(struct.pack(">ii", 3, 77))
    assert index.lookup(103) == (103, 77)



def test_offset_index_truncate_and_rewrite_change_the_file(tmp_path):
    index = offset_index(tmp_path)
    for offset in range(101, 111):
        index.append(offset, (offset - 100) * 10)
    index.truncate_to(106)
    assert index.entries == 5 and index.last_entry() == (105, 50)
    index.close()
    assert offset_index(tmp_path).last_entry() == (105, 50)
    index.truncate_to(10**9)  # nothing at or above: unchanged
    assert index.entries == 5
    index.rewrite([(100, 0), (150, 999)])
    index.close()
    reloaded = offset_index(tmp_path)
    assert reloaded.entries == 2 and reloaded.lookup(149) == (100, 0) and reloaded.lookup(150) == (150, 999)
    index.truncate_to(0)
    assert offset_index(tmp_path).entries == 0


def test_offset_index_is_full_at_its_size_limit(tmp_path):
    index = offset_index(tmp_path, max_index_bytes=24)
    assert index.max_entries == 3
    for offset in (101, 102):
        index.append(offset, offset)
        assert not index.is_full
    index.append(103, 103)
    assert index.is_full


@pytest.mark.parametrize(
    "content, problem",
    [
        (struct.pack(">ii", 1, 0) + b"\x00\x00\x00", "trailing bytes"),
        (struct.pack(">iiii", 5, 10, 3, 20), "out of order"),
        (struct.pack(">ii", -1, 0), "below the base offset"),
        (struct.pack(">iiii", 1, 90, 5, 40), "positions out of order"),
        (struct.pack(">ii", 1, -8), "negative position"),
    ],
)
def test_a_torn_or_disordered_offset_index_is_refused_on_first_use(tmp_path, content, problem):
    index = offset_index(tmp_path)
    with open(index.path, "wb") as file:
        file.write(content)
    with pytest.raises(CorruptIndexError) as refused:
        index.lookup(101)
    assert index.path in str(refused.value)


# -- TimeIndex ---------------------------------------------------------------------


def time_index(tmp_path, base_offset=100, max_index_bytes=1024) -> TimeIndex:
    return TimeIndex(str(tmp_path / f"{base_offset:020d}.timeindex"), base_offset, max_index_bytes)


def test_time_index_lookup_is_the_largest_timestamp_at_or_below(tmp_path):
    index = time_index(tmp_path)
    for timestamp, offset in [(1_000, 102), (2_000, 110), (3_000, 111)]:
        index.append(timestamp, offset)
    assert index.lookup(999) == (-1, 100)
    assert index.lookup(1_000) == (1_000, 102)
    assert index.lookup(2_999) == (2_000, 110)
    assert index.lookup(10**15) == (3_000, 111)
    assert index.last_entry() == (3_000, 111)
    assert time_index(tmp_path, base_offset=5).last_entry() == (-1, 5)


def test_time_index_keeps_only_rising_timestamps_and_truncates_by_offset(tmp_path):
    index = time_index(tmp_path)
    index.append(1_000, 101)
    index.append(1_000, 105)  # not a new maximum
    index.append(900, 106)
    index.append(1_500, 107)
    index.append(2_500, 120)
    assert index.entries == 3
    index.truncate_to(107)
    assert index.entries == 1 and index.last_entry() == (1_000, 101)
    index.close()
    with open(index.path, "rb") as file:
        assert file.read() == struct.pack(">qi", 1_000, 1)
    assert time_index(tmp_path).lookup(5_000) == (1_000, 101)


def test_time_index_is_full_at_its_size_limit(tmp_path):
    index = time_index(tmp_path, max_index_bytes=24)
    assert index.max_entries == 2
    index.append(1, 101)
    index.append(2, 102)
    assert index.is_full


@pytest.mark.parametrize(
    "content",
    [
        struct.pack(">qi", 5, 1) + b"\x01",
        struct.pack(">qiqi", 5, 1, 4, 2),  # timestamps going back
        struct.pack(">qiqi", 5, 3, 6, 1),  # offsets going back
        struct.pack(">qi", 5, -2),  # below the base offset
    ],
    ids=["torn", "timestamps", "offsets", "below-base"],
)
def test_a_torn_or_disordered_time_index_is_refused_on_first_use(tmp_path, content):
    index = time_index(tmp_path)
    with open(index.path, "wb") as file:
        file.write(content)
    with pytest.raises(CorruptIndexError):
        index.lookup(10)


# -- one segment -------------------------------------------------------------------


@pytest.fixture
def segment(tmp_path):
    """Batches at 50 (2 records), 52 (3), 55 (1), 56 (4) in a segment based at 50, an index entry per batch."""
    segment = LogSegment(str(tmp_path), 50, SegmentSettings(index_interval_bytes=1, max_index_bytes=1024))
    data = []
    for base_offset, count, timestamps in [(50, 2, [10, 30]), (52, 3, [20, 25, 5]), (55, 1, [40]), (56, 4, [1, 40, 40, 2])]:
        data.append(batch(base_offset, count, base_timestamp=1_000, timestamp_deltas=timestamps, value=b"x" * 30))
        header = headers(data[-1])[0]
        offset_of_max = header.last_offset
        segment.append(data[-1], header.last_offset, header.max_timestamp, offset_of_max, header.max_timestamp)
    segment.data = data
    segment.positions = [sum(len(d) for d in data[:i]) for i in range(len(data))]
    yield segment
    segment.close()


def region_bytes(region):
    return b"" if region is None else region.read()


def test_translate_finds_the_batch_holding_each_offset(segment):
    assert segment.offset_index.entries >= 2  # lookups go through the index, not only a scan
    holders = {50: 0, 51: 0, 52: 1, 53: 1, 54: 1, 55: 2, 56: 3, 59: 3}
    for offset, which in holders.items():
        position, header = segment.translate(offset)
        assert position == segment.positions[which]
        assert header.base_offset == headers(segment.data[which])[0].base_offset
    assert segment.translate(60) is None
    assert segment.translate(0)[0] == 0


def test_segment_read_starts_at_the_batch_holding_the_offset(segment):
    whole = b"".join(segment.data)
    region = segment.read(53, 10_000, None, True)
    assert (region.position, region.length) == (segment.positions[1], len(whole) - segment.positions[1])
    assert region.read() == whole[segment.positions[1] :]
    assert segment.read(60, 10_000, None, True) is None


def test_segment_read_is_bounded_by_max_bytes_unless_the_first_batch_is_bigger(segment):
    first, second = segment.data[0], segment.data[1]
    assert region_bytes(segment.read(50, len(first) - 1, None, True)) == first  # whole first batch
    assert region_bytes(segment.read(50, len(first) - 1, None, False)) == first[:-1]  # or just what was asked
    assert region_bytes(segment.read(50, len(first) + 10, None, True)) == (first + second)[: len(first) + 10]
    assert region_bytes(segment.read(50, 0, None, False)) == b""


def test_segment_read_never_reaches_the_batch_holding_the_upper_bound(segment):
    data = segment.data
    assert region_bytes(segment.read(50, 10_000, 55, True)) == data[0] + data[1]  # bound at a batch start
    assert region_bytes(segment.read(50, 10_000, 57, True)) == data[0] + data[1] + data[2]  # bound inside a batch
    assert region_bytes(segment.read(50, 10_000, 53, True)) == data[0]
    assert region_bytes(segment.read(53, 10_000, 53, True)) == b""  # the first batch holds the bound
    assert region_bytes(segment.read(55, 10_000, 55, True)) == b""
    assert region_bytes(segment.read(50, 1, 52, True)) == data[0]
    assert region_bytes(segment.read(50, 10_000, 60, True)) == b"".join(data)


def test_a_regions_record_count_is_of_its_whole_batches(segment):
    assert segment.read(50, 10_000, None, True).record_count() == 10
    assert segment.read(53, 10_000, None, True).record_count() == 8  # from the batch holding 53
    assert segment.read(50, 10_000, 55, True).record_count() == 5
    cut = segment.read(50, len(segment.data[0]) + 70, None, True)  # ends inside the second batch's records
    assert cut.record_count() == 2
    assert segment.read(50, len(segment.data[0]) + 20, None, True).record_count() == 2  # inside its header


def test_a_region_of_what_is_not_a_batch_counts_nothing_and_stops(tmp_path):
    segment = LogSegment(str(tmp_path), 0, SegmentSettings())
    with open(segment.log_path, "wb") as garbage:
        garbage.write(struct.pack(">qi", 0, -12) + bytes(200))  # a batch length that would not move on
    try:
        assert FileRegion(segment, 0, 212).record_count() == 0
    finally:
        segment.close()


def test_find_offset_by_timestamp_is_the_first_record_at_or_after(segment):
    # Record timestamps by offset: 50:1010 51:1030 52:1020 53:1025 54:1005 55:1040 56:1001 57:1040 58:1040 59:1002
    assert segment.find_offset_by_timestamp(0, 50) == (1_010, 50)
    assert segment.find_offset_by_timestamp(1_011, 50) == (1_030, 51)
    assert segment.find_offset_by_timestamp(1_026, 52) == (1_040, 55)
    assert segment.find_offset_by_timestamp(1_021, 52) == (1_025, 53)
    assert segment.find_offset_by_timestamp(1_040, 56) == (1_040, 57)
    assert segment.find_offset_by_timestamp(1_041, 50) is None
    assert segment.find_offset_by_timestamp(1_000, 59) == (1_002, 59)


def test_find_max_timestamp_is_the_first_record_holding_it(segment):
    assert segment.find_max_timestamp(50) == (1_040, 55)
    assert segment.find_max_timestamp(56) == (1_040, 57)
    assert segment.find_max_timestamp(58) == (1_040, 58)
    assert segment.find_max_timestamp(59) == (1_002, 59)


def test_truncate_to_cuts_at_the_batch_holding_the_offset(segment):
    removed = segment.truncate_to(53)
    assert removed == sum(len(d) for d in segment.data[1:])
    assert segment.size == len(segment.data[0]) and segment.next_offset == 52
    assert segment.max_timestamp == 1_030
    assert segment.translate(52) is None and segment.offset_index.lookup(10**9)[1] < segment.size


# -- the log: rolls --------------------------------------------------------------------


def leader_append(log: Log, count=1, now_ms=0, base_timestamp=1_000, value=b"v"):
    return log.append(bytearray(batch(0, count, base_timestamp=base_timestamp, value=value)), now_ms=now_ms)


def test_segments_roll_by_size_and_never_split_an_append(tmp_path):
    size = len(batch(value=b"x" * 50))
    log = Log.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=3 * size), now_ms=0)
    for _ in range(7):
        leader_append(log, value=b"x" * 50)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    both = bytearray(batch(value=b"x" * 50) * 2)  # two batches in one append, into a segment with room for one
    log.append(both, now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert log.segments[-1].size == 3 * size
    log.append(bytearray(batch(value=b"x" * 50) * 4), now_ms=0)  # bigger than a segment: alone in a new one
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert log.segments[-1].size == 4 * size
    log.close()


def test_segments_roll_by_age_but_an_empty_one_never_does(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), LogConfig(segment_ms=1_000), now_ms=0)
    leader_append(log, now_ms=5_000)  # the segment was created at 0 but is empty: no roll
    assert len(log.segments) == 1
    log.roll(now_ms=5_000)
    leader_append(log, now_ms=5_999)
    assert [s.base_offset for s in log.segments] == [0, 1]
    leader_append(log, now_ms=6_000)
    assert [s.base_offset for s in log.segments] == [0, 1, 2]
    log.close()


def test_segment_jitter_rolls_each_segment_earlier_by_its_own_random_share(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), LogConfig(segment_ms=1_000, segment_jitter_ms=400), now_ms=0)
    log.random = random.Random(7)
    expected = random.Random(7)
    created_ms = 0
    leader_append(log, now_ms=created_ms)
    log.roll(now_ms=created_ms)  # from here each new segment draws from the seeded source
    for rolled in range(2, 5):
        jitter_ms = expected.randrange(400)
        leader_append(log, now_ms=created_ms)
        leader_append(log, now_ms=created_ms + 999 - jitter_ms)
        assert len(log.segments) == rolled
        created_ms += 1_000 - jitter_ms
        leader_append(log, now_ms=created_ms)  # Kafka: rolls once segment.ms less the jitter has passed
        assert len(log.segments) == rolled + 1
    log.close()


def test_segments_roll_when_an_index_is_full(tmp_path):
    # 36 bytes: 4 offset entries, 3 time entries; an entry after every batch past the first.
    config = LogConfig(segment_index_bytes=36, index_interval_bytes=1)
    log = Log.open(str(tmp_path / "t-0"), config, now_ms=0)
    for number in range(12):
        leader_append(log, base_timestamp=1_000 + number)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 1
    for segment in log.segments:
        assert segment.offset_index.entries <= segment.offset_index.max_entries
        assert segment.time_index.entries <= segment.time_index.max_entries
    for segment in log.segments[:-1]:
        assert segment.indexes_full
    assert log.read_bytes(11, 1) == bytes(batch(11, base_timestamp=1_011))
    log.close()


def test_an_explicit_roll_of_an_empty_segment_does_nothing(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), now_ms=0)
    assert log.roll(now_ms=0) is log.active_segment and len(log.segments) == 1
    leader_append(log)
    log.roll(now_ms=0)
    log.roll(now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 1]
    log.close()


# -- the log: stamping and follower appends ----------------------------------------------


def test_log_append_time_is_stamped_when_the_topic_asks(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), LogConfig(message_timestamp_type="LogAppendTime"), now_ms=0)
    payload = bytearray(batch(0, 3, base_timestamp=1_000, timestamp_deltas=[0, 5, 9]) + batch(0, 2, base_timestamp=50))
    result = log.append(payload, now_ms=777_000)
    assert result.log_append_time == 777_000 and result.max_timestamp == 777_000
    stored = log.read_bytes(0, 10_000)
    assert stored == bytes(payload)
    for position, header in iter_batches(stored):
        validate_batch(stored, position)  # the CRC was recomputed
        assert header.timestamp_type == LOG_APPEND_TIME and header.max_timestamp == 777_000
    assert log.offset_for_timestamp(777_000) == (777_000, 0)
    assert log.offset_for_timestamp(777_001) is None
    assert log.offset_for_timestamp(1_005) == (777_000, 0)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (777_000, 0)
    later = log.append(bytearray(batch(0, 2, base_timestamp=5)), now_ms=778_000)
    assert log.offset_for_timestamp(777_500) == (778_000, later.first_offset)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (778_000, later.first_offset)
    log.close()


def test_create_time_keeps_the_producers_timestamps(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), now_ms=0)
    payload = bytearray(batch(0, 3, base_timestamp=1_000, timestamp_deltas=[0, 9, 5]))
    original = bytes(payload)
    result = log.append(payload, now_ms=777_000)
    assert result.log_append_time == -1 and result.max_timestamp == 1_009
    assert log.read_bytes(0, 1) == original  # offset 0 already: nothing changed
    assert log.offset_for_timestamp(1_006) == (1_009, 1)
    log.close()


def test_the_leader_epoch_is_stamped_on_every_batch(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), now_ms=0)
    log.append(bytearray(batch(0, 2) + batch(0, 1)), leader_epoch=7, now_ms=0)
    log.append(bytearray(batch(0, 1)), now_ms=0)  # no epoch given: the batch's own (-1) stays
    stored = log.read_bytes(0, 10_000)
    assert [h.partition_leader_epoch for h in headers(stored)] == [7, 7, -1]
    assert [h.base_offset for h in headers(stored)] == [0, 2, 3]
    log.close()


def test_follower_appends_keep_offsets_epochs_and_gaps(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), now_ms=0)
    first = batch(10, 2, leader_epoch=3)
    second = batch(15, 1, leader_epoch=4)
    result = log.append(bytearray(first + second), AppendOrigin.REPLICATION, now_ms=0)
    assert (result.first_offset, result.last_offset) == (10, 15)
    assert log.log_end_offset == 16
    assert log.read_bytes(0, 1) == first  # below the first batch: the first batch
    assert log.read_bytes(12, 1) == second  # in the gap: the next batch
    assert [h.partition_leader_epoch for h in headers(log.read_bytes(10, 10_000))] == [3, 4]
    log.close()


@pytest.mark.parametrize(
    "payload",
    [batch(4, 1), batch(5, 1), batch(0, 2), batch(6, 1) + batch(6, 1), batch(6, 2) + batch(7, 1)],
    ids=["overlapping", "last-offset", "far-back", "second-repeats", "second-overlaps"],
)
def test_follower_appends_going_backwards_are_refused_whole(tmp_path, payload):
    log = Log.open(str(tmp_path / "t-0"), now_ms=0)
    log.append(bytearray(batch(0, 3) + batch(3, 3)), AppendOrigin.REPLICATION, now_ms=0)
    size = log.size_bytes
    with pytest.raises(OffsetsOutOfOrder):
        log.append(bytearray(payload), AppendOrigin.REPLICATION, now_ms=0)
    assert (log.log_end_offset, log.size_bytes) == (6, size)
    assert log.append(bytearray(batch(6, 1)), AppendOrigin.REPLICATION, now_ms=0).first_offset == 6
    log.close()


def test_a_follower_batch_beyond_the_segments_offset_range_starts_a_new_segment(tmp_path):
    """Index entries hold 32-bit relative offsets: such a batch cannot go in the segment at 0."""
    directory = str(tmp_path / "t-0")
    config = LogConfig(index_interval_bytes=1)
    log = Log.open(directory, config, now_ms=0)
    far = 2**31 + 10
    data = [batch(far, 1), batch(far + 1, 2), batch(far + 5, 1)]
    log.append(bytearray(data[0] + data[1]), AppendOrigin.REPLICATION, now_ms=0)
    log.append(bytearray(data[2]), AppendOrigin.REPLICATION, now_ms=0)
    assert log.active_segment.base_offset == far
    log.close()
    log = Log.open(directory, config, recovery_point=0, now_ms=0)
    assert log.log_end_offset == far + 6
    assert [log.read_bytes(offset, 1) for offset in (far, far + 2, far + 5)] == data
    log.close()


# -- the log: reads out of range and regions after deletion -------------------------------


def test_reads_outside_the_log_raise_offset_out_of_range(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), now_ms=0)
    for _ in range(5):
        leader_append(log)
    log.advance_log_start_offset(2)
    for offset in (0, 1, 6, 100):
        with pytest.raises(OffsetOutOfRange) as out:
            log.read(offset, 100)
        assert (out.value.offset, out.value.log_start_offset, out.value.log_end_offset) == (offset, 2, 5)
    assert log.read(5, 100) is None  # the end itself: nothing yet
    assert log.read_bytes(2, 1) == bytes(batch(2))
    with pytest.raises(OffsetOutOfRange):
        log.advance_log_start_offset(6)
    log.close()


def test_a_region_outlives_retention_until_the_delete_delay(tmp_path):
    directory = str(tmp_path / "t-0")
    size = len(batch())
    config = LogConfig(segment_bytes=2 * size, retention_bytes=2 * size, file_delete_delay_ms=60_000)
    log = Log.open(directory, config, now_ms=0)
    for _ in range(6):
        leader_append(log)
    region = log.read(0, 10_000)
    expected = region.read()
    assert expected == bytes(batch(0)) + bytes(batch(1))
    assert log.apply_retention(now_ms=1_000) == [0, 2]
    assert not os.path.exists(os.path.join(directory, f"{0:020d}.log"))
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 10_000)
    log.close_retired(now_ms=60_999)
    assert region.read() == expected  # handed out before the deletion: still readable
    log.close_retired(now_ms=61_000)
    with pytest.raises(OSError) as closed:
        region.read()  # closed for good: its file is not reopened by a name that is gone
    assert closed.value.errno == errno.EBADF
    log.close()


def test_a_region_outlives_truncation_of_its_segment(tmp_path):
    size = len(batch())
    log = Log.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=2 * size), now_ms=0)
    for _ in range(6):
        leader_append(log)
    region = log.read(4, 10_000)
    log.truncate_to(3)
    assert log.log_end_offset == 3 and [s.base_offset for s in log.segments] == [0, 2]
    assert region.read() == bytes(batch(4)) + bytes(batch(5))
    log.close()
