"""Opening a damaged partition: torn or corrupt batches, broken indexes, lazy trusted segments.

Each test writes a log, damages its files the way a crash or a bad disk
would, and reopens it. Opening never raises; the log keeps exactly the
batches before the first damaged one (byte for byte, and by every offset),
indexes are rebuilt, what was cut is reported naming the file, and appends
continue at the right offset.
"""

from __future__ import annotations

import builtins
import logging
import os
import random
import struct
from dataclasses import dataclass

import pytest

from kbroker.log.config import LogConfig
from kbroker.log.partition_log import MAX_TIMESTAMP, Log
from kbroker.wire.records import HEADER_SIZE, Record, build_batch, iter_batches

CONFIG = LogConfig(segment_bytes=1_000, index_interval_bytes=150)
BATCHES_PER_LOG = 40

# Byte offsets inside a batch header (Kafka's v2 layout).
BATCH_LENGTH_AT = 8
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
MAX_TIMESTAMP_AT = 35
RECORD_COUNT_AT = 57


@dataclass
class Written:
    base_offset: int
    last_offset: int
    timestamps: list[tuple[int, int]]  # (offset, timestamp) per record
    data: bytes


@dataclass
class Placed:
    """Where a written batch sits on disk."""

    batch: Written
    path: str
    position: int


def write_log(directory: str, config: LogConfig = CONFIG, count: int = BATCHES_PER_LOG, seed: int = 1) -> list[Written]:
    """``count`` batches of 1-3 records (timestamps mostly rising), flushed and closed cleanly."""
    rng = random.Random(seed)
    log = Log.open(directory, config, now_ms=0)
    written = []
    for number in range(count):
        base_timestamp = 10_000 + 100 * number + rng.randint(-250, 50)
        records = [
            Record(offset_delta=i, timestamp_delta=rng.randint(0, 30), value=b"batch %d record %d " % (number, i) + bytes(rng.randrange(60)))
            for i in range(rng.randint(1, 3))
        ]
        payload = bytearray(build_batch(records, base_timestamp=base_timestamp))
        result = log.append(payload, now_ms=0)
        timestamps = [(result.first_offset + r.offset_delta, base_timestamp + r.timestamp_delta) for r in records]
        written.append(Written(result.first_offset, result.last_offset, timestamps, bytes(payload)))
    log.flush()
    log.close()
    return written


def segment_paths(directory: str, suffix: str = ".log") -> list[str]:
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(suffix))


def placements(directory: str, written: list[Written]) -> list[Placed]:
    by_offset = {batch.base_offset: batch for batch in written}
    placed = []
    for path in segment_paths(directory):
        with open(path, "rb") as file:
            data = file.read()
        for position, header in iter_batches(data, verify_crc=True):
            placed.append(Placed(by_offset[header.base_offset], path, position))
    assert [p.batch for p in placed] == written
    return placed


def damage(path: str, position: int, new_bytes: bytes) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        file.write(new_bytes)


def flip(path: str, position: int) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        byte = file.read(1)[0]
        file.seek(position)
        file.write(bytes([byte ^ 0xFF]))


def cut(path: str, size: int) -> None:
    os.truncate(path, size)


def assert_holds_exactly(log: Log, batches: list[Written]) -> None:
    """The log is these batches: the end offset, each batch by each of its offsets, a full scan, timestamps."""
    end = batches[-1].last_offset + 1 if batches else log.segments[0].base_offset
    assert log.log_end_offset == end
    for batch in batches:
        for offset in range(batch.base_offset, batch.last_offset + 1):
            assert log.read_bytes(offset, 1) == batch.data
    scanned = bytearray()
    start = log.log_start_offset
    while start < log.log_end_offset:
        chunk = log.read_bytes(start, 10_000)
        assert chunk, f"nothing read at {start} below the end {log.log_end_offset}"
        headers = [header for _, header in iter_batches(chunk, verify_crc=True)]
        scanned += chunk
        start = headers[-1].next_offset
    assert bytes(scanned) == b"".join(batch.data for batch in batches)
    records = [(timestamp, offset) for batch in batches for offset, timestamp in batch.timestamps]
    for timestamp, _ in records[:: max(1, len(records) // 10)]:
        assert log.offset_for_timestamp(timestamp) == next((t, o) for t, o in records if t >= timestamp)
    if records:
        largest = max(t for t, _ in records)
        assert log.offset_for_timestamp(MAX_TIMESTAMP) == next((t, o) for t, o in records if t == largest)


def assert_appends_continue(directory: str, log: Log, batches: list[Written]) -> None:
    """A new batch lands at the end, reads back, and survives a clean reopen with nothing to repair."""
    end = log.log_end_offset
    payload = bytearray(build_batch([Record(value=b"after recovery")], base_timestamp=99_999))
    result = log.append(payload, now_ms=0)
    assert result.first_offset == end
    assert log.read_bytes(end, 1) == bytes(payload)
    log.close()
    reopened = Log.open(directory, CONFIG, recovery_point=0, now_ms=0)
    try:
        assert_holds_exactly(reopened, batches + [Written(end, end, [(end, 99_999)], bytes(payload))])
    finally:
        reopened.close()


def reopen_and_check(directory, caplog, batches, kept, recovery_point=0, reported=None):
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        log = Log.open(directory, CONFIG, recovery_point=recovery_point, now_ms=0)
    assert_holds_exactly(log, batches[:kept])
    if reported is not None:
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert any(os.path.basename(reported) in message for message in warnings), warnings
    assert_appends_continue(directory, log, batches[:kept])


# -- damaged batches -----------------------------------------------------------


@pytest.fixture
def directory(tmp_path):
    return str(tmp_path / "topic-0")


@pytest.mark.parametrize(
    "where",
    [
        MAGIC_AT,
        CRC_AT,
        CRC_AT + 3,
        ATTRIBUTES_AT,
        LAST_OFFSET_DELTA_AT + 3,
        MAX_TIMESTAMP_AT + 7,
        RECORD_COUNT_AT + 3,
        HEADER_SIZE,  # the first record
        "last byte",
    ],
)
@pytest.mark.parametrize("victim", [0, 1, 17, BATCHES_PER_LOG - 1])
def test_a_flipped_byte_cuts_the_log_before_that_batch(directory, caplog, where, victim):
    batches = write_log(directory)
    placed = placements(directory, batches)[victim]
    offset_in_batch = len(placed.batch.data) - 1 if where == "last byte" else where
    flip(placed.path, placed.position + offset_in_batch)
    reopen_and_check(directory, caplog, batches, kept=victim, reported=placed.path)


@pytest.mark.parametrize(
    "length", [0, -1, 48, "one more", "one less", 2**31 - 1], ids=["zero", "negative", "too-small", "longer", "shorter", "huge"]
)
def test_a_bad_batch_length_cuts_the_log_there(directory, caplog, length):
    batches = write_log(directory)
    victim = 9
    placed = placements(directory, batches)[victim]
    actual = len(placed.batch.data) - 12
    value = {"one more": actual + 1, "one less": actual - 1}.get(length, length)
    damage(placed.path, placed.position + BATCH_LENGTH_AT, struct.pack(">i", value))
    reopen_and_check(directory, caplog, batches, kept=victim, reported=placed.path)


@pytest.mark.parametrize("victim", [1, 12, BATCHES_PER_LOG - 1])
def test_a_base_offset_going_backwards_cuts_the_log_there(directory, caplog, victim):
    batches = write_log(directory)
    placed = placements(directory, batches)[victim]
    damage(placed.path, placed.position, struct.pack(">q", batches[victim - 1].base_offset))
    reopen_and_check(directory, caplog, batches, kept=victim, reported=placed.path)


@pytest.mark.parametrize("victim", [3, BATCHES_PER_LOG - 1])
def test_a_base_offset_beyond_what_the_segment_can_index_cuts_the_log_there(directory, caplog, victim):
    """A flipped high bit in the (CRC-less) base offset: relative offsets must fit in 32 bits."""
    batches = write_log(directory)
    placed = placements(directory, batches)[victim]
    damage(placed.path, placed.position, struct.pack(">q", batches[victim].base_offset + 2**40))
    reopen_and_check(directory, caplog, batches, kept=victim, reported=placed.path)


@pytest.mark.parametrize("inside", [1, 11, 12, 30, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 5, "last byte"])
@pytest.mark.parametrize("victim", [0, 21, BATCHES_PER_LOG - 1])
def test_a_file_cut_inside_a_batch_keeps_the_whole_batches_before(directory, caplog, inside, victim):
    batches = write_log(directory)
    placed = placements(directory, batches)[victim]
    keep = len(placed.batch.data) - 1 if inside == "last byte" else inside
    cut(placed.path, placed.position + keep)
    for later in segment_paths(directory):
        if later > placed.path:
            os.unlink(later)  # the crash happened while this segment was being written
    reopen_and_check(directory, caplog, batches, kept=victim, reported=placed.path)


@pytest.mark.parametrize(
    "garbage",
    [b"\x00" * 4096, b"\xff" * 7, bytes(range(256)) * 3, b"\x00" * 11 + b"\x50", "a header with nothing after it", "a copy of the last batch, torn"],
    ids=["zeros", "ones", "pattern", "length-only", "bare-header", "torn-copy"],
)
def test_garbage_after_the_last_batch_is_cut_and_nothing_else(directory, caplog, garbage):
    batches = write_log(directory)
    last = placements(directory, batches)[-1]
    if garbage == "a header with nothing after it":
        garbage = last.batch.data[:HEADER_SIZE]
    elif garbage == "a copy of the last batch, torn":
        garbage = last.batch.data[:-3]
    with open(last.path, "ab") as file:
        file.write(garbage)
    reopen_and_check(directory, caplog, batches, kept=len(batches), reported=last.path)


def test_random_garbage_after_the_end_never_breaks_opening(directory, caplog):
    batches = write_log(directory, count=8)
    path = placements(directory, batches)[-1].path
    with open(path, "rb") as file:
        clean = file.read()
    rng = random.Random(7)
    for _ in range(60):
        with open(path, "wb") as file:
            file.write(clean + rng.randbytes(rng.randint(1, 300)))
        log = Log.open(directory, CONFIG, recovery_point=0, now_ms=0)
        assert_holds_exactly(log, batches)
        log.close()


def test_a_corrupt_middle_segment_drops_everything_after_it(directory, caplog):
    batches = write_log(directory)
    placed = placements(directory, batches)
    segments = segment_paths(directory)
    assert len(segments) >= 4
    victim = next(i for i, p in enumerate(placed) if p.path == segments[1] and p.position > 0)
    flip(placed[victim].path, placed[victim].position + HEADER_SIZE + 2)
    reopen_and_check(directory, caplog, batches, kept=victim, reported=placed[victim].path)
    survivors = {os.path.basename(path) for path in segment_paths(directory)}
    assert not survivors & {os.path.basename(path) for path in segments[2:]}


def test_a_corrupt_first_batch_of_a_later_segment_leaves_it_empty_at_its_base(directory, caplog):
    batches = write_log(directory)
    placed = placements(directory, batches)
    segments = segment_paths(directory)
    victim = next(i for i, p in enumerate(placed) if p.path == segments[2])
    flip(placed[victim].path, placed[victim].position + CRC_AT)
    caplog.clear()
    log = Log.open(directory, CONFIG, recovery_point=0, now_ms=0)
    assert [segment.base_offset for segment in log.segments][-1] == batches[victim].base_offset
    assert_holds_exactly(log, batches[:victim])
    assert_appends_continue(directory, log, batches[:victim])


def test_damage_reached_from_the_recovery_point_is_repaired(directory, caplog):
    """Only segments from the one holding the recovery point are checked: there, damage is found."""
    batches = write_log(directory)
    placed = placements(directory, batches)
    last_segment = segment_paths(directory)[-1]
    in_last = [i for i, p in enumerate(placed) if p.path == last_segment]
    victim = in_last[-1]
    flip(placed[victim].path, placed[victim].position + HEADER_SIZE)
    reopen_and_check(directory, caplog, batches, kept=victim, recovery_point=batches[in_last[0]].base_offset, reported=last_segment)


# -- damaged indexes -----------------------------------------------------------


def _garble(path: str, how: str, rng: random.Random) -> None:
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if how == "deleted":
        if os.path.exists(path):
            os.unlink(path)
    elif how == "odd size":
        with open(path, "ab") as file:
            file.write(b"\x01\x02\x03")
    elif how == "cut":
        if size:
            os.truncate(path, max(0, size - 5))
    elif how == "garbage":
        with open(path, "wb") as file:
            file.write(rng.randbytes(max(size, 48)))
    elif how == "zeros":
        with open(path, "wb") as file:
            file.write(bytes(max(size, 48)))
    elif how == "empty":
        open(path, "wb").close()
    else:
        raise AssertionError(how)


INDEX_DAMAGE = ["deleted", "odd size", "cut", "garbage", "zeros", "empty"]


@pytest.mark.parametrize("suffix", [".index", ".timeindex", "both"])
@pytest.mark.parametrize("how", INDEX_DAMAGE)
def test_every_index_damaged_is_rebuilt_by_full_recovery(directory, caplog, suffix, how):
    batches = write_log(directory)
    rng = random.Random(3)
    suffixes = [".index", ".timeindex"] if suffix == "both" else [suffix]
    for path in segment_paths(directory):
        for each in suffixes:
            _garble(path[: -len(".log")] + each, how, rng)
    reopen_and_check(directory, caplog, batches, kept=len(batches))


@pytest.mark.parametrize("how", INDEX_DAMAGE)
def test_damaged_indexes_of_the_active_segment_are_rebuilt_from_the_recovery_point(directory, caplog, how):
    batches = write_log(directory, count=60)
    active = segment_paths(directory)[-1]
    rng = random.Random(5)
    for suffix in (".index", ".timeindex"):
        _garble(active[: -len(".log")] + suffix, how, rng)
    reopen_and_check(directory, caplog, batches, kept=len(batches), recovery_point=batches[-1].last_offset + 1)


@pytest.mark.parametrize("suffix", [".index", ".timeindex", "both"])
@pytest.mark.parametrize("how", ["deleted", "odd size", "cut", "empty", "zeros", "garbage"])
def test_damaged_indexes_of_trusted_segments_are_rebuilt_or_bypassed_on_first_use(directory, caplog, suffix, how):
    """Segments below the recovery point are not checked at open; their indexes are
    loaded on first use. An index that is missing, short, torn or garbled (caught by
    the order and range checks) must neither break reads nor understate the
    segment's largest timestamp, which time retention goes by."""
    batches = write_log(directory, count=60)
    rng = random.Random(11)
    suffixes = [".index", ".timeindex"] if suffix == "both" else [suffix]
    for path in segment_paths(directory)[:-1]:
        for each in suffixes:
            _garble(path[: -len(".log")] + each, how, rng)
    caplog.clear()
    log = Log.open(directory, CONFIG, recovery_point=batches[-1].last_offset + 1, now_ms=0)
    assert_holds_exactly(log, batches)
    for segment in log.segments[:-1]:
        in_segment = [t for b in batches if segment.base_offset <= b.base_offset < segment.next_offset for _, t in b.timestamps]
        if segment.max_timestamp == -1:
            segment.load_tail()
        assert segment.max_timestamp == max(in_segment)
    log.close()


def test_index_entries_out_of_order_in_a_trusted_segment_are_rebuilt_on_first_use(directory, caplog):
    batches = write_log(directory, count=60)
    first = segment_paths(directory)[0][: -len(".log")] + ".index"
    with open(first, "rb") as file:
        data = file.read()
    assert len(data) >= 16
    with open(first, "wb") as file:
        file.write(data[8:16] + data[:8] + data[16:])  # two entries swapped
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        log = Log.open(directory, CONFIG, recovery_point=batches[-1].last_offset + 1, now_ms=0)
        assert_holds_exactly(log, batches)
    assert any(os.path.basename(first) in r.getMessage() for r in caplog.records)
    log.close()


# -- what is and is not scanned --------------------------------------------------


def test_opening_touches_only_the_segment_holding_the_recovery_point(directory, monkeypatch):
    config = LogConfig(segment_bytes=100, index_interval_bytes=10)
    log = Log.open(directory, config, now_ms=0)
    for number in range(1_000):
        log.append(bytearray(build_batch([Record(value=b"v%d" % number)], base_timestamp=number)), now_ms=0)
    assert len(log.segments) == 1_000
    log.flush()
    recovery_point = log.recovery_point
    last_base = log.active_segment.base_offset
    log.close()

    opened: list[str] = []
    real_os_open, real_open = os.open, builtins.open

    def counting_os_open(path, *args, **kwargs):
        opened.append(os.path.basename(os.fspath(path)))
        return real_os_open(path, *args, **kwargs)

    def counting_open(path, *args, **kwargs):
        if isinstance(path, (str, bytes, os.PathLike)):
            opened.append(os.path.basename(os.fspath(path)))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_os_open)
    monkeypatch.setattr(builtins, "open", counting_open)
    log = Log.open(directory, config, recovery_point=recovery_point, now_ms=0)
    monkeypatch.undo()
    try:
        segment_files = [name for name in opened if name.split(".")[0].isdigit()]
        assert segment_files, "recovery opened nothing at all"
        assert {int(name.split(".")[0]) for name in segment_files} == {last_base}, sorted(set(segment_files))
        assert log.log_end_offset == 1_000 and len(log.segments) == 1_000
        assert log.read_bytes(3, 1) == bytes(build_batch([Record(value=b"v3")], base_offset=3, base_timestamp=3))
    finally:
        log.close()


def test_segments_below_the_recovery_point_are_trusted_not_rescanned(directory, caplog):
    """The proof that a segment was not scanned: damage in it goes unnoticed until a full recovery."""
    batches = write_log(directory)
    placed = placements(directory, batches)
    flip(placed[2].path, placed[2].position + HEADER_SIZE)  # in the first segment
    end = batches[-1].last_offset + 1
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        log = Log.open(directory, CONFIG, recovery_point=end, now_ms=0)
    assert log.log_end_offset == end
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    log.close()
    reopen_and_check(directory, caplog, batches, kept=2, recovery_point=0, reported=placed[2].path)


def test_recovering_a_segment_too_small_for_index_entries_makes_no_index_files(tmp_path):
    """A restart recovers the active segment of every partition; one holding a batch or two has no index
    entry, and no index file is made for it (no file is an empty index)."""

    directory = str(tmp_path / "small-0")
    log = Log.open(directory, LogConfig())
    log.append(bytearray(build_batch([Record(value=b"one")])))
    log.flush()
    log.close()
    for name in ("00000000000000000000.index", "00000000000000000000.timeindex"):
        (tmp_path / "small-0" / name).write_bytes(b"")  # left by an earlier start
    reopened = Log.open(directory, LogConfig(), recovery_point=0)
    assert sorted(os.listdir(directory)) == ["00000000000000000000.log"]
    assert reopened.log_end_offset == 1 and reopened.read(0, 1 << 20) is not None
    reopened.append(bytearray(build_batch([Record(value=b"two")])))
    assert reopened.log_end_offset == 2
    reopened.close()
