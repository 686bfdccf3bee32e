"""Compaction: the latest record per key at its original offset, tombstones, transactions, crash-safe swaps."""

import errno
import os
import random
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.log.cleaner import clean
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from kbroker.wire.compression import GZIP
from kbroker.wire.records import (
    ControlRecordType,
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batches,
)

RETENTION_MS = 1000


def compacted(**overrides):
    settings_ = dict(segment_bytes=600, index_interval_bytes=100, cleanup_policy="compact", delete_retention_ms=RETENTION_MS)
    return LogConfig(**{**settings_, **overrides})


def append(log, pairs, timestamp=0, **batch_fields):
    """One batch of (key, value) records, all at ``timestamp``."""
    records = [Record(offset_delta=i, key=key, value=value) for i, (key, value) in enumerate(pairs)]
    return log.append(bytearray(build_batch(records, base_timestamp=timestamp, **batch_fields)), now_ms=timestamp)


def read_batches(log):
    """(header, records) of every batch from the log start, through the read path."""
    batches = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read_bytes(offset, 1 << 20)
        if not data:
            break
        for position, header in iter_batches(data):
            batches.append(decode_records(data, position))
            offset = header.next_offset
    return batches


def read_records(log):
    """(offset, key, value, timestamp) of every data record in the log."""
    return [
        (header.base_offset + record.offset_delta, record.key, record.value, header.base_timestamp + record.timestamp_delta)
        for header, records in read_batches(log)
        if not header.is_control
        for record in records
    ]


def latest_per_key(records):
    latest = {}
    for record in records:
        latest[record[1]] = record
    return latest


def file_bytes(path):
    with open(path, "rb") as file:
        return file.read()


def write_keyed_data(log, count, keys, seed, tombstone_every=0, timestamp=0):
    rng = random.Random(seed)
    for index in range(count):
        key = b"k%d" % rng.randrange(keys)
        value = None if tombstone_every and index % tombstone_every == tombstone_every - 1 else b"v%d" % index
        append(log, [(key, value)], timestamp)


# -- what a clean keeps -------------------------------------------------------------


def test_keeps_the_latest_value_per_key_at_its_original_offset(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(), now_ms=0)
    rng = random.Random(1)
    for index in range(60):
        pairs = [(b"k%d" % rng.randrange(15), b"v%d-%d" % (index, i)) for i in range(3)]
        append(log, pairs, timestamp=index)
    before = read_records(log)
    active = log.active_segment
    active_bytes = file_bytes(active.log_path)
    assert len(log.segments) > 4

    result = clean(log, now_ms=10_000)

    cleaned_part = [record for record in before if record[0] < active.base_offset]
    expected = sorted(latest_per_key(cleaned_part).values()) + [record for record in before if record[0] >= active.base_offset]
    assert read_records(log) == expected
    assert result.next_dirty_offset == result.first_uncleanable_offset == active.base_offset
    assert log.active_segment is active and file_bytes(active.log_path) == active_bytes
    assert log.log_end_offset == before[-1][0] + 1
    assert sum(len(old) for old, _ in result.replaced) == len(log.segments) - 1 + sum(len(old) - 1 for old, _ in result.replaced)
    # Every remaining offset is still found through the indexes, also after reopening.
    log.close()
    for recovery_point in (0, log.log_end_offset):
        reopened = Log.open(log.directory, compacted(), recovery_point=recovery_point, now_ms=10_000)
        assert read_records(reopened) == expected
        for offset, key, value, _ in expected:
            header, records = decode_records(reopened.read_bytes(offset, 1))
            assert any(header.base_offset + record.offset_delta == offset and record.value == value for record in records)
        reopened.close()


def test_reading_a_compacted_away_offset_returns_the_next_batch(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=200), now_ms=0)
    for index in range(10):
        append(log, [(b"same", b"v%d" % index)])
    append(log, [(b"other", b"x")])
    log.roll()
    clean(log, now_ms=0)
    assert [record[:3] for record in read_records(log)] == [(9, b"same", b"v9"), (10, b"other", b"x")]
    header, _ = decode_records(log.read_bytes(3, 1))
    assert header.last_offset >= 3 and header.base_offset <= 9


def test_a_region_read_before_a_clean_outlives_it_until_the_delete_delay_on_the_cleaners_clock(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=200, file_delete_delay_ms=60_000), now_ms=0)
    for index in range(10):
        append(log, [(b"same", b"v%d" % index)])
    append(log, [(b"other", b"x")])
    log.roll(now_ms=0)
    region = log.read(0, 10_000)
    expected = region.read()
    assert clean(log, now_ms=1_000).replaced
    log.close_retired(now_ms=60_999)
    assert region.read() == expected  # handed out before the swap: still readable
    log.close_retired(now_ms=61_000)
    with pytest.raises(OSError) as closed:
        region.read()  # closed for good: its file is not reopened by a name that is gone
    assert closed.value.errno == errno.EBADF
    log.close()


def test_tombstones_stay_for_delete_retention_after_the_first_clean_then_go(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=10_000), now_ms=0)
    append(log, [(b"gone", b"old"), (b"kept", b"value")], timestamp=5)
    append(log, [(b"gone", None), (b"filler", b"f")], timestamp=7)
    log.roll()
    append(log, [(b"later", None)], timestamp=9)  # in the active segment: never touched

    first = clean(log, now_ms=10_000)
    records = read_records(log)
    assert [record[:3] for record in records] == [
        (1, b"kept", b"value"), (2, b"gone", None), (3, b"filler", b"f"), (4, b"later", None)
    ]
    assert records[1][3] == 7  # the record timestamp survives the delete horizon in baseTimestamp
    stamped = next(header for header, records in read_batches(log) if header.base_offset == 2)
    assert stamped.has_delete_horizon and stamped.base_timestamp == 10_000 + RETENTION_MS

    append(log, [(b"new", b"n")], timestamp=10)
    log.roll()
    second = clean(log, now_ms=10_000 + RETENTION_MS - 1, first_dirty_offset=first.next_dirty_offset)
    assert (2, b"gone", None) in [record[:3] for record in read_records(log)]
    assert (4, b"later", None) in [record[:3] for record in read_records(log)]  # first cleaned now: horizon starts

    append(log, [(b"newer", b"n")], timestamp=11)
    log.roll()
    clean(log, now_ms=10_000 + RETENTION_MS, first_dirty_offset=second.next_dirty_offset)
    assert [record[:3] for record in read_records(log)] == [
        (1, b"kept", b"value"), (3, b"filler", b"f"), (4, b"later", None), (5, b"new", b"n"), (6, b"newer", b"n")
    ]


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=10_000, min_compaction_lag_ms=1000), now_ms=0)
    append(log, [(b"a", b"a0"), (b"a", b"a1"), (b"b", b"b0")], timestamp=100)
    log.roll()
    recent = log.active_segment.base_offset
    append(log, [(b"a", b"a2"), (b"b", b"b1"), (b"b", b"b2")], timestamp=5000)
    log.roll()
    append(log, [(b"a", b"a3")], timestamp=5000)

    result = clean(log, now_ms=5500)
    assert result.first_uncleanable_offset == recent
    assert [record[2] for record in read_records(log)] == [b"a1", b"b0", b"a2", b"b1", b"b2", b"a3"]

    result = clean(log, now_ms=6000, first_dirty_offset=result.next_dirty_offset)
    assert result.first_uncleanable_offset == log.active_segment.base_offset
    assert [record[2] for record in read_records(log)] == [b"a2", b"b2", b"a3"]  # a3 is in the active segment


def test_cleaning_twice_changes_nothing(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(), now_ms=0)
    write_keyed_data(log, 80, keys=12, seed=2, tombstone_every=7)
    first = clean(log, now_ms=50)
    after_first = read_records(log)
    headers = [header for header, records in read_batches(log) if records]

    assert clean(log, now_ms=50, first_dirty_offset=first.next_dirty_offset).replaced == []
    again = clean(log, now_ms=50)  # the whole log dirty once more: same records, same batches
    assert again.replaced
    assert read_records(log) == after_first
    # Segments merge now that they are small, so only the empty batches ending the old groups may go.
    assert [header for header, records in read_batches(log) if records] == headers


def test_records_without_a_key_are_dropped_from_the_cleaned_range(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=10_000), now_ms=0)
    append(log, [(None, b"keyless"), (b"k", b"v")])
    log.roll()
    append(log, [(None, b"active")])
    result = clean(log, now_ms=0)
    assert [record[1:3] for record in read_records(log)] == [(b"k", b"v"), (None, b"active")]
    assert result.keyless_records_dropped == 1


def test_compressed_batches_keep_their_codec_and_offsets(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=10_000), now_ms=0)
    append(log, [(b"a", b"1" * 100), (b"b", b"2" * 100), (b"c", b"3" * 100)], compression=GZIP)
    append(log, [(b"b", b"new")])
    log.roll()
    clean(log, now_ms=0)
    [(first, records), (second, _)] = read_batches(log)
    assert first.compression == GZIP and (first.base_offset, first.last_offset) == (0, 2)
    assert [(first.base_offset + record.offset_delta, record.key) for record in records] == [(0, b"a"), (2, b"c")]
    assert second.base_offset == 3


def test_the_offset_map_limit_spreads_a_clean_over_rounds(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log.open(directory, compacted(), now_ms=0)
    write_keyed_data(log, 120, keys=20, seed=3)
    shutil.copytree(directory, str(tmp_path / "copy"))
    reference = Log.open(str(tmp_path / "copy"), compacted(), now_ms=0)
    clean(reference, now_ms=0)

    first_dirty, rounds = None, 0
    while True:
        result = clean(log, now_ms=0, first_dirty_offset=first_dirty, max_offset_map_entries=5)
        if not result.replaced:
            break
        assert result.keys_mapped <= 5
        first_dirty, rounds = result.next_dirty_offset, rounds + 1
    assert rounds > 3
    assert read_records(log) == read_records(reference)


def test_a_log_that_does_not_compact_is_refused(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), LogConfig(cleanup_policy="delete"))
    with pytest.raises(ValueError):
        clean(log, now_ms=0)


# -- producers and transactions ---------------------------------------------------------


def test_an_active_producers_last_batch_stays_as_an_empty_batch(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log.open(directory, compacted(segment_bytes=10_000), now_ms=0)
    append(log, [(b"x", b"x0")], producer_id=7, producer_epoch=0, base_sequence=0)
    producer_batch = append(log, [(b"a", b"a0"), (b"b", b"b0")], producer_id=7, producer_epoch=0, base_sequence=1)
    append(log, [(b"a", b"a1"), (b"b", b"b1"), (b"x", b"x1")])
    append(log, [(b"c", b"c0")])
    log.roll()

    clean(log, now_ms=0)
    headers = [header for header, _ in read_batches(log)]
    empty = [header for header in headers if header.record_count == 0]
    assert [(h.base_offset, h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence) for h in empty] == [
        (producer_batch.first_offset, producer_batch.last_offset, 7, 0, 1)
    ]
    assert headers[0].base_offset == producer_batch.first_offset  # the producer's first batch is gone entirely

    log.close()
    reopened = Log.open(directory, compacted(segment_bytes=10_000), now_ms=0)
    retry = append(reopened, [(b"a", b"a0"), (b"b", b"b0")], producer_id=7, producer_epoch=0, base_sequence=1)
    assert retry.duplicate and retry.first_offset == producer_batch.first_offset
    assert not append(reopened, [(b"d", b"d0")], producer_id=7, producer_epoch=0, base_sequence=3).duplicate
    reopened.close()


def test_without_active_producers_superseded_producer_batches_go(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=10_000), now_ms=0)
    append(log, [(b"a", b"a0")], producer_id=7, producer_epoch=0, base_sequence=0)
    append(log, [(b"a", b"a1")])
    append(log, [(b"c", b"c0")])
    log.roll()
    clean(log, now_ms=0, active_producers={})
    assert [(header.base_offset, header.record_count) for header, _ in read_batches(log)] == [(1, 1), (2, 1)]


def transactional(log, pairs, sequence, producer_id=9):
    return append(log, pairs, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, transactional=True)


def marker(log, kind, producer_id=9):
    return log.append(bytearray(build_control_batch(kind, producer_id, 0, coordinator_epoch=1, timestamp_ms=0)), now_ms=0)


@pytest.mark.parametrize("aborted_from", ["txn index", "caller"])
def test_aborted_records_go_then_their_marker_after_the_delete_horizon(tmp_path, aborted_from):
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=10_000), now_ms=0)
    append(log, [(b"a", b"committed-before")])
    first = transactional(log, [(b"a", b"aborted")], 0)
    transactional(log, [(b"b", b"aborted")], 1)
    abort = marker(log, ControlRecordType.ABORT)
    transactional(log, [(b"c", b"committed")], 2)
    commit = marker(log, ControlRecordType.COMMIT)
    append(log, [(b"d", b"plain")])
    log.roll()
    aborted = None if aborted_from == "txn index" else [(9, first.first_offset, abort.last_offset)]

    def control_offsets():
        return [header.base_offset for header, _ in read_batches(log) if header.is_control]

    first_round = clean(log, now_ms=0, aborted_transactions=aborted)
    assert [record[1:3] for record in read_records(log)] == [
        (b"a", b"committed-before"), (b"c", b"committed"), (b"d", b"plain")
    ]
    assert first_round.aborted_batches_dropped == 2
    assert control_offsets() == [abort.first_offset, commit.first_offset]  # its batches were seen this round
    # The cleaned segment's .txnindex lists the transaction whose marker it keeps.
    [indexed] = log.collect_aborted_transactions(0, log.log_end_offset)
    assert indexed[:3] == (9, first.first_offset, abort.last_offset)

    clean(log, now_ms=0, aborted_transactions=aborted)  # no batch of the aborted one left: horizon stamped
    abort_header = next(header for header, _ in read_batches(log) if header.base_offset == abort.first_offset)
    assert abort_header.has_delete_horizon and abort_header.base_timestamp == RETENTION_MS
    clean(log, now_ms=RETENTION_MS - 1, aborted_transactions=aborted)
    assert control_offsets() == [abort.first_offset, commit.first_offset]

    clean(log, now_ms=RETENTION_MS, aborted_transactions=aborted)
    assert control_offsets() == [commit.first_offset]  # the COMMIT stays while its data does
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []
    # The caller's list may still name the transaction: a later one of the same producer is not taken for it.
    for _ in range(2):
        clean(log, now_ms=RETENTION_MS, aborted_transactions=aborted)
        assert [record[1:3] for record in read_records(log)] == [
            (b"a", b"committed-before"), (b"c", b"committed"), (b"d", b"plain")
        ]


def test_aborted_transactions_are_collected_from_markers_segments_past_the_range(tmp_path):
    # As Kafka, the search goes on through later segments until an entry proves it complete.
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=100), now_ms=0)
    first = transactional(log, [(b"a", b"aborted")], 0)
    for index in range(3):
        append(log, [(b"b", b"%d" % index)], producer_id=11, producer_epoch=0, base_sequence=index)
    abort = marker(log, ControlRecordType.ABORT)
    assert log.segments[-1].base_offset > log.segments[1].base_offset > first.last_offset
    [found] = log.collect_aborted_transactions(0, first.last_offset + 1)
    assert found[:3] == (9, first.first_offset, abort.last_offset)
    clean(log, now_ms=0, last_stable_offset=first.last_offset + 1)
    assert (b"a", b"aborted") not in [record[1:3] for record in read_records(log)]


def test_an_open_transaction_bounds_the_clean_at_the_last_stable_offset(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), compacted(segment_bytes=100), now_ms=0)
    append(log, [(b"a", b"a0")])
    append(log, [(b"a", b"a1")])
    begun = transactional(log, [(b"a", b"open")], 0, producer_id=5)
    append(log, [(b"a", b"a2")], producer_id=6, producer_epoch=0, base_sequence=0)
    append(log, [(b"a", b"a3")])
    append(log, [(b"z", b"z")])
    assert len(log.segments) > 3 and log.last_stable_offset == begun.first_offset
    result = clean(log, now_ms=0)
    assert result.first_uncleanable_offset == begun.first_offset
    assert [record[2] for record in read_records(log)] == [b"a1", b"open", b"a2", b"a3", b"z"]


# -- against a model ------------------------------------------------------------------

_append = st.tuples(st.just("append"), st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=3))
_clean = st.tuples(
    st.just("clean"), st.tuples(st.sampled_from([0, 1, RETENTION_MS - 1, RETENTION_MS, 2 * RETENTION_MS]), st.booleans())
)
_steps = st.lists(
    st.one_of(_append, _append, _clean, st.tuples(st.just("roll"), st.just(0)), st.tuples(st.just("reopen"), st.just(0))),
    min_size=4,
    max_size=40,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_steps, checkpointed=st.booleans())
def test_cleaning_matches_a_latest_value_model(steps, checkpointed):
    config = compacted(segment_bytes=250)
    with tempfile.TemporaryDirectory() as root:
        directory = os.path.join(root, "t-0")
        log = Log.open(directory, config, now_ms=0)
        now, first_dirty = 0, None
        written = []  # (offset, key, value, timestamp), everything ever appended
        removed = set()
        first_covered = {}  # tombstone offset -> time of the first clean that reached it
        try:
            for kind, argument in steps:
                if kind == "append":
                    pairs = [(b"k%d" % key, None if tombstone else b"v%d" % len(written)) for key, tombstone in argument]
                    result = append(log, pairs, timestamp=now)
                    written += [(result.first_offset + i, key, value, now) for i, (key, value) in enumerate(pairs)]
                elif kind == "roll":
                    log.roll(now)
                elif kind == "reopen":
                    log.close()
                    log = Log.open(directory, config, now_ms=now)
                else:
                    advance_ms, roll_first = argument
                    now += advance_ms
                    if roll_first:
                        log.roll(now)
                    end = log.active_segment.base_offset
                    result = clean(log, now_ms=now, first_dirty_offset=first_dirty if checkpointed else None)
                    if result.first_uncleanable_offset > result.first_dirty_offset:
                        assert result.next_dirty_offset == end
                        _apply_clean_to_model(written, removed, first_covered, end, now)
                    first_dirty = result.next_dirty_offset
                assert read_records(log) == [record for record in written if record[0] not in removed]
        finally:
            log.close()


def _apply_clean_to_model(written, removed, first_covered, end, now):
    latest = latest_per_key(record for record in written if record[0] < end)
    for offset, key, value, _ in written:
        if offset >= end or offset in removed:
            continue
        if latest[key][0] != offset:
            removed.add(offset)
        elif value is None:
            if offset not in first_covered:
                first_covered[offset] = now
            elif now >= first_covered[offset] + RETENTION_MS:
                removed.add(offset)


# -- crashes during the swap -------------------------------------------------------------


class SimulatedCrash(BaseException):
    """Not an Exception: nothing in the cleaner may catch it, as nothing survives a real crash."""


class FileSystemSteps:
    """Counts renames and unlinks; raises SimulatedCrash at step ``crash_at``."""

    def __init__(self, monkeypatch, crash_at=None, error=SimulatedCrash):
        self.count = 0
        self.crash_at = crash_at
        self.error = error
        for name in ("replace", "rename", "unlink"):
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name)))

    def _wrap(self, function):
        def step(*args, **kwargs):
            if self.count == self.crash_at:
                self.count += 1
                raise self.error(f"step {self.crash_at}")
            self.count += 1
            return function(*args, **kwargs)

        return step


WRITE_CONFIG = compacted(segment_bytes=300)
CLEAN_CONFIG = compacted(segment_bytes=1200)  # so groups of several small segments merge


def build_crash_fixture(directory):
    log = Log.open(directory, WRITE_CONFIG, now_ms=0)
    write_keyed_data(log, 60, keys=9, seed=4, tombstone_every=8)
    written = read_records(log)
    log.flush()
    log.close()
    return written


def abandon(log):
    """Drop the descriptors of a log whose process 'crashed', writing nothing."""
    for segment in log.segments:
        segment.close()
    log.close_retired(everything=True)


def interrupted_state(directory, groups):
    """Which step of which swap a crash interrupted, judged from the files left behind."""
    names = set(os.listdir(directory))
    if any(name.endswith(".cleaned") for name in names):
        return "renaming to .swap" if any(name.endswith(".swap") for name in names) else "writing .cleaned"
    swapped = [int(name.partition(".")[0]) for name in names if name.endswith(".log.swap")]
    if not swapped:
        return "renaming to final names" if any(name.endswith(".swap") for name in names) else "between swaps"
    base_offset = swapped[0]
    others = [old for old in groups[base_offset] if old != base_offset]
    if "%020d.log" % base_offset in names:
        return "renamed to .swap"
    if any("%020d%s" % (old, suffix) in names for old in others for suffix in (".log", ".index", ".timeindex")):
        return "some originals deleted"
    return "all originals deleted"


def assert_consistent_after_crash(log, written, cleaned_end):
    records = read_records(log)
    offsets = [record[0] for record in records]
    assert offsets == sorted(set(offsets))
    assert set(records) <= set(written)
    assert log.log_end_offset == written[-1][0] + 1
    # Every key's latest record (value or tombstone) is there, and nothing older shows through after it.
    assert latest_per_key(records) == latest_per_key(written)
    assert [record for record in records if record[0] >= cleaned_end] == [record for record in written if record[0] >= cleaned_end]
    assert not [name for name in os.listdir(log.directory) if name.endswith((".cleaned", ".swap"))]


def test_a_crash_at_any_step_of_the_swap_leaves_a_complete_log(tmp_path, monkeypatch):
    pristine = str(tmp_path / "pristine")
    written = build_crash_fixture(pristine)

    reference_directory = str(tmp_path / "reference")
    shutil.copytree(pristine, reference_directory)
    reference = Log.open(reference_directory, CLEAN_CONFIG, now_ms=0)
    with monkeypatch.context() as patch:
        steps = FileSystemSteps(patch)
        result = clean(reference, now_ms=0)
    total_steps = steps.count
    groups = {new: old for old, new in result.replaced}
    assert len(groups) >= 3 and max(len(old) for old in groups.values()) >= 3
    expected = read_records(reference)
    reference.close()

    states = set()
    for crash_at in range(total_steps):
        directory = str(tmp_path / f"crash-{crash_at}")
        shutil.copytree(pristine, directory)
        log = Log.open(directory, CLEAN_CONFIG, now_ms=0)
        with monkeypatch.context() as patch:
            FileSystemSteps(patch, crash_at)
            with pytest.raises(SimulatedCrash):
                clean(log, now_ms=0)
        abandon(log)
        states.add(interrupted_state(directory, groups))

        reopened = Log.open(directory, CLEAN_CONFIG, now_ms=0)
        assert_consistent_after_crash(reopened, written, result.next_dirty_offset)
        clean(reopened, now_ms=0)
        assert read_records(reopened) == expected, f"crash at step {crash_at}"
        reopened.close()
        shutil.rmtree(directory)
    assert states >= {
        "writing .cleaned", "renaming to .swap", "renamed to .swap", "some originals deleted",
        "all originals deleted", "renaming to final names", "between swaps",
    }


def test_a_failed_rename_abandons_the_clean_and_leaves_the_log_as_it_was(tmp_path, monkeypatch):
    directory = str(tmp_path / "t-0")
    written = build_crash_fixture(directory)
    log = Log.open(directory, CLEAN_CONFIG, now_ms=0)
    files = sorted(os.listdir(directory))
    segments = list(log.segments)
    replace = os.replace

    def full_disk(source, target):
        if source.endswith(".index.cleaned"):
            raise OSError(28, "No space left on device")
        return replace(source, target)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", full_disk)
        with pytest.raises(OSError):
            clean(log, now_ms=0)
    assert sorted(os.listdir(directory)) == files
    assert log.segments == segments and read_records(log) == written

    clean(log, now_ms=0)
    assert latest_per_key(read_records(log)) == latest_per_key(written)
    log.close()


def test_a_replaced_segment_wholly_compacted_away_cannot_survive_a_crash(tmp_path, monkeypatch):
    directory = str(tmp_path / "t-0")
    log = Log.open(directory, compacted(segment_bytes=150), now_ms=0)
    for pairs in ([(b"a", b"1")], [(b"b", b"1")], [(b"c", b"1")], [(b"d", b"1")], [(b"c", b"2")], [(b"d", b"2")], [(b"e", b"1")]):
        append(log, pairs)
    assert [segment.base_offset for segment in log.segments] == [0, 2, 4, 6]
    log.close()
    # Groups [0, 2] and [4]: everything in segment 2 is superseded by segment 4.
    log = Log.open(directory, compacted(segment_bytes=300), now_ms=0)
    unlink = os.unlink

    def crash_on_first_original(path):
        if path.endswith("%020d.log" % 0):
            raise SimulatedCrash(path)
        return unlink(path)

    with monkeypatch.context() as patch:
        patch.setattr(os, "unlink", crash_on_first_original)
        with pytest.raises(SimulatedCrash):
            clean(log, now_ms=0)
    assert os.path.exists(os.path.join(directory, "%020d.log.swap" % 0))
    abandon(log)

    reopened = Log.open(directory, compacted(segment_bytes=300), now_ms=0)
    assert [record[1:3] for record in read_records(reopened)] == [(b"a", b"1"), (b"b", b"1"), (b"c", b"2"), (b"d", b"2"), (b"e", b"1")]
    reopened.close()
