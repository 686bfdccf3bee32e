"""LeaderEpochCache against the cases of Kafka's LeaderEpochFileCacheTest, plus persistence."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.log.checkpoint import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    CheckpointError,
    EpochEntry,
    LeaderEpochCache,
    LeaderEpochCheckpointFile,
)
from kbroker.log.config import LogConfig
from kbroker.log.manager import LogManager
from kbroker.wire.records import Record, build_batch

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@pytest.fixture
def checkpoint_file(tmp_path):
    return LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")


@pytest.fixture
def cache(checkpoint_file):
    return LeaderEpochCache(checkpoint_file)


def cache_with(checkpoint_file, assignments):
    cache = LeaderEpochCache(checkpoint_file)
    for epoch, start_offset in assignments:
        cache.assign(epoch, start_offset)
    return cache


# (name, assignments in order, expected entries afterwards)
ASSIGN_CASES = [
    ("first assignment", [(2, 10)], [(2, 10)]),
    ("same epoch later offset is ignored", [(2, 6), (2, 10)], [(2, 6)]),
    ("same epoch twice", [(2, 6), (2, 7)], [(2, 6)]),
    ("reassigning does not overwrite", [(2, 9), (2, 10)], [(2, 9)]),
    ("new epoch same offset replaces", [(2, 9), (3, 9)], [(3, 9)]),
    ("offset going backwards drops the conflict", [(2, 6), (3, 5)], [(3, 5)]),
    ("older epoch truncates later ones", [(1, 5), (2, 6), (1, 7)], [(1, 7)]),
    ("same epoch earlier offset truncates", [(5, 11), (6, 12), (7, 13), (7, 12)], [(5, 11), (7, 12)]),
    ("epochs not starting from zero", [(2, 6)], [(2, 6)]),
    ("follower receiving many batches", [(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (2, 6), (2, 7), (2, 8)],
     [(0, 0), (1, 3), (2, 6)]),
    ("leader changes without writes", [(0, 0), (1, 0)], [(1, 0)]),
    ("gaps in epochs", [(0, 10), (2, 13), (4, 17)], [(0, 10), (2, 13), (4, 17)]),
]


@pytest.mark.parametrize(("assignments", "expected"), [case[1:] for case in ASSIGN_CASES],
                         ids=[case[0] for case in ASSIGN_CASES])
def test_assign(checkpoint_file, assignments, expected):
    cache = cache_with(checkpoint_file, assignments)
    assert cache.entries == [EpochEntry(*entry) for entry in expected]
    assert checkpoint_file.read() == cache.entries


# (name, assignments, [(requested_epoch, log_end_offset, expected (epoch, end_offset))])
END_OFFSET_CASES = [
    ("latest epoch gives the log end offset", [(2, 10)], [(2, 11, (2, 11))]),
    ("latest epoch after repeats", [(2, 11), (2, 12)], [(2, 14, (2, 14))]),
    ("undefined epoch requested", [(2, 11), (3, 12)], [(UNDEFINED_EPOCH, 0, UNDEFINED)]),
    ("empty cache", [], [(0, 0, UNDEFINED), (7, 0, UNDEFINED), (UNDEFINED_EPOCH, 73, UNDEFINED)]),
    ("requested below the first epoch", [(5, 11), (6, 12), (7, 13)], [(4, 0, (4, 11))]),
    ("after truncating a matching epoch", [(5, 11), (6, 12), (7, 13), (7, 12)], [(5, 0, (5, 12)), (6, 0, (5, 12))]),
    ("previous epoch ends where the next starts", [(1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)],
     [(2, 17, (2, 15))]),
    ("epoch between known epochs", [(0, 10), (2, 13), (4, 17)],
     [(1, 0, (0, 13)), (2, 0, (2, 17)), (3, 0, (2, 17))]),
    ("epoch above every known epoch", [(2, 100)], [(3, 100, UNDEFINED)]),
    ("older epoch reassigned", [(1, 5), (2, 6), (1, 7)], [(1, 8, (1, 8)), (2, 8, UNDEFINED)]),
    ("leader changes many times", [(0, 0), (1, 0)], [(1, 0, (1, 0)), (0, 0, (0, 0)), (1, 5, (1, 5)), (0, 5, (0, 0))]),
    ("leader changes then writes", [(0, 0), (1, 0), (2, 5)], [(2, 10, (2, 10)), (1, 10, (1, 5)), (0, 10, (0, 0))]),
    ("follower many batches", [(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (2, 6), (2, 7), (2, 8)],
     [(2, 9, (2, 9)), (0, 9, (0, 3)), (1, 9, (1, 6))]),
]


@pytest.mark.parametrize(("assignments", "queries"), [case[1:] for case in END_OFFSET_CASES],
                         ids=[case[0] for case in END_OFFSET_CASES])
def test_end_offset_for(checkpoint_file, assignments, queries):
    cache = cache_with(checkpoint_file, assignments)
    for requested_epoch, log_end_offset, expected in queries:
        assert cache.end_offset_for(requested_epoch, log_end_offset) == expected, (requested_epoch, log_end_offset)


THREE_EPOCHS = [(2, 6), (3, 8), (4, 11)]

# (name, assignments, truncation method, offset, expected entries)
TRUNCATION_CASES = [
    ("end on an epoch boundary is inclusive", THREE_EPOCHS, "truncate_from_end", 8, [(2, 6)]),
    ("end between boundaries", THREE_EPOCHS, "truncate_from_end", 9, [(2, 6), (3, 8)]),
    ("end beyond everything", THREE_EPOCHS, "truncate_from_end", 12, THREE_EPOCHS),
    ("end at the first start removes all", THREE_EPOCHS, "truncate_from_end", 6, []),
    ("end undefined does nothing", THREE_EPOCHS, "truncate_from_end", UNDEFINED_EPOCH_OFFSET, THREE_EPOCHS),
    ("end on empty cache", [], "truncate_from_end", 7, []),
    ("start on a boundary keeps that entry", THREE_EPOCHS, "truncate_from_start", 8, [(3, 8), (4, 11)]),
    ("start between boundaries clamps", THREE_EPOCHS, "truncate_from_start", 9, [(3, 9), (4, 11)]),
    ("start before the first entry", THREE_EPOCHS, "truncate_from_start", 1, THREE_EPOCHS),
    ("start at the first offset", THREE_EPOCHS, "truncate_from_start", 6, THREE_EPOCHS),
    ("start at the last entry", THREE_EPOCHS, "truncate_from_start", 11, [(4, 11)]),
    ("start beyond the last entry", THREE_EPOCHS, "truncate_from_start", 15, [(4, 15)]),
    ("start inside the first epoch", [(0, 0), (1, 7), (2, 10)], "truncate_from_start", 5,
     [(0, 5), (1, 7), (2, 10)]),
    ("start undefined does nothing", THREE_EPOCHS, "truncate_from_start", UNDEFINED_EPOCH_OFFSET, THREE_EPOCHS),
    ("start on empty cache", [], "truncate_from_start", 7, []),
]


@pytest.mark.parametrize(("assignments", "method", "offset", "expected"), [case[1:] for case in TRUNCATION_CASES],
                         ids=[case[0] for case in TRUNCATION_CASES])
def test_truncation(checkpoint_file, assignments, method, offset, expected):
    cache = cache_with(checkpoint_file, assignments)
    getattr(cache, method)(offset)
    assert cache.entries == [EpochEntry(*entry) for entry in expected]
    assert checkpoint_file.read() == cache.entries
    assert LeaderEpochCache(checkpoint_file).entries == cache.entries


def test_truncations_are_written_to_the_checkpoint(checkpoint_file):
    cache = cache_with(checkpoint_file, THREE_EPOCHS)
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert checkpoint_file.read() == [EpochEntry(3, 8)]


def test_epoch_for_offset(checkpoint_file):
    cache = cache_with(checkpoint_file, [(0, 10), (1, 20), (5, 30)])
    assert cache.epoch_for_offset(25) == 1
    assert cache.epoch_for_offset(20) == 1
    assert cache.epoch_for_offset(30) == 5
    assert cache.epoch_for_offset(50) == 5
    assert cache.epoch_for_offset(10) == 0
    assert cache.epoch_for_offset(5) is None
    assert LeaderEpochCache(LeaderEpochCheckpointFile(checkpoint_file.path + "-other")).epoch_for_offset(0) is None


def test_latest_previous_next_and_lookup(checkpoint_file, cache):
    assert cache.latest_epoch is None and cache.latest_entry is None and cache.earliest_entry is None
    assert cache.previous_epoch() is None
    assert cache.previous_epoch(2) is None
    cache.assign(2, 10)
    assert cache.previous_epoch() is None
    assert cache.previous_epoch(2) is None
    cache.assign(4, 15)
    assert cache.previous_epoch() == 2
    assert cache.previous_epoch(4) == 2
    cache.assign(10, 20)
    assert cache.previous_epoch() == 4
    assert cache.previous_epoch(10) == 4
    assert cache.previous_epoch(7) == 4
    cache.truncate_from_end(18)
    assert cache.latest_epoch == 4
    assert cache.previous_epoch() == 2
    assert cache.latest_entry == EpochEntry(4, 15)
    assert cache.earliest_entry == EpochEntry(2, 10)
    assert cache.epoch_entry(4) == EpochEntry(4, 15)
    assert cache.epoch_entry(3) is None
    assert cache.epoch_entry(10) is None
    assert cache.next_epoch(-1) == 2
    assert cache.next_epoch(2) == 4
    assert cache.next_epoch(3) == 4
    assert cache.next_epoch(4) is None


def test_persists_between_instances(checkpoint_file, cache):
    cache.assign(2, 6)
    assert LeaderEpochCache(LeaderEpochCheckpointFile(checkpoint_file.path)).entries == [EpochEntry(2, 6)]
    with open(checkpoint_file.path, "rb") as written:
        assert written.read() == b"0\n1\n2 6\n"


def test_ignored_assignment_does_not_rewrite_the_checkpoint(checkpoint_file, cache):
    cache.assign(2, 6)
    inode_before = os.stat(checkpoint_file.path).st_ino
    cache.assign(2, 7)  # every later batch of epoch 2 does this: it must cost no fsync
    assert os.stat(checkpoint_file.path).st_ino == inode_before  # no atomic replace happened
    assert checkpoint_file.read() == [EpochEntry(2, 6)]


def test_truncation_that_changes_nothing_does_not_rewrite_the_checkpoint(checkpoint_file):
    cache = cache_with(checkpoint_file, THREE_EPOCHS)
    inode_before = os.stat(checkpoint_file.path).st_ino
    cache.truncate_from_start(6)
    cache.truncate_from_start(3)
    cache.truncate_from_end(12)
    assert os.stat(checkpoint_file.path).st_ino == inode_before


def test_assign_many_writes_once(checkpoint_file, cache, monkeypatch):
    writes = []
    real_write = checkpoint_file.write
    monkeypatch.setattr(checkpoint_file, "write", lambda entries, durable=True, version=None: (writes.append(list(entries)), real_write(entries, durable, version)))
    cache.assign_many([(0, 0), (0, 5), (1, 9), (3, 12)])
    assert writes == [[EpochEntry(0, 0), EpochEntry(1, 9), EpochEntry(3, 12)]]
    cache.assign_many([(3, 13)])  # nothing new: no write
    assert len(writes) == 1


def test_clear(checkpoint_file):
    cache = cache_with(checkpoint_file, THREE_EPOCHS)
    cache.clear()
    assert cache.entries == []
    assert checkpoint_file.read() == []


@pytest.mark.parametrize(("epoch", "start_offset"), [(-1, 0), (0, -1)])
def test_negative_entries_are_rejected(cache, epoch, start_offset):
    with pytest.raises(ValueError):
        cache.assign(epoch, start_offset)
    assert cache.entries == []


def test_loading_repairs_non_monotonic_checkpoint_without_writing(checkpoint_file):
    with open(checkpoint_file.path, "wb") as written:
        written.write(b"0\n4\n1 0\n3 10\n2 5\n4 20\n")  # epoch 2 after 3: 3 conflicts and is dropped
    cache = LeaderEpochCache(checkpoint_file)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 5), EpochEntry(4, 20)]
    with open(checkpoint_file.path, "rb") as unchanged:
        assert unchanged.read() == b"0\n4\n1 0\n3 10\n2 5\n4 20\n"


def test_loading_negative_entry_is_a_checkpoint_error(checkpoint_file):
    with open(checkpoint_file.path, "wb") as written:
        written.write(b"0\n1\n-3 0\n")
    with pytest.raises(CheckpointError, match="leader-epoch-checkpoint"):
        LeaderEpochCache(checkpoint_file)


# --- properties against a brute-force model -------------------------------------------


def brute_force_end_offset(entries, requested_epoch, log_end_offset):
    if requested_epoch == UNDEFINED_EPOCH or not entries:
        return UNDEFINED
    if requested_epoch == entries[-1].epoch:
        return requested_epoch, log_end_offset
    higher = [entry for entry in entries if entry.epoch > requested_epoch]
    lower_or_equal = [entry for entry in entries if entry.epoch <= requested_epoch]
    if not higher:
        return UNDEFINED
    if not lower_or_equal:
        return requested_epoch, higher[0].start_offset
    return lower_or_equal[-1].epoch, higher[0].start_offset


operations = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
        st.tuples(st.just("truncate_from_end"), st.integers(-1, 60)),
        st.tuples(st.just("truncate_from_start"), st.integers(-1, 60)),
    ),
    max_size=30,
)


@given(operations=operations)
@settings(max_examples=150, deadline=None)
def test_invariants_and_queries_hold_after_any_operations(tmp_path_factory, operations):
    checkpoint_file = LeaderEpochCheckpointFile(tmp_path_factory.mktemp("epochs") / "leader-epoch-checkpoint")
    cache = LeaderEpochCache(checkpoint_file)
    for name, *arguments in operations:
        getattr(cache, name)(*arguments)
        entries = cache.entries
        # Strictly increasing in both epoch and start offset, so bisecting is sound.
        assert all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in zip(entries, entries[1:]))
        assert checkpoint_file.read() == entries
    entries = cache.entries
    assert LeaderEpochCache(checkpoint_file).entries == entries
    log_end_offset = 61
    for requested_epoch in range(-1, 14):
        assert cache.end_offset_for(requested_epoch, log_end_offset) == brute_force_end_offset(
            entries, requested_epoch, log_end_offset
        )
    for offset in range(0, 62):
        starting_before = [entry.epoch for entry in entries if entry.start_offset <= offset]
        assert cache.epoch_for_offset(offset) == (starting_before[-1] if starting_before else None)


def test_a_new_epoch_while_appending_is_made_durable_by_the_next_flush(tmp_path, durability_events):
    manager = LogManager(str(tmp_path))
    log = manager.open("t", 0, LogConfig())
    durability_events.clear()
    log.append(bytearray(build_batch([Record(value=b"v")])), leader_epoch=3)
    assert [e for e in durability_events if e[0] == "fsync"] == []  # the append itself syncs nothing
    assert log.leader_epochs.unsynced_writes == 1
    job = log.begin_flush()
    assert job.epoch_checkpoint == log.leader_epochs.checkpoint_file.path
    job.run()
    log.complete_flush(job)
    assert log.leader_epochs.unsynced_writes == 0
    assert ("fsync", True) in durability_events  # the checkpoint's directory, for its rename
    assert LeaderEpochCheckpointFile(job.epoch_checkpoint).read() == [EpochEntry(3, 0)]
    manager.close()


def test_a_write_handed_to_the_flush_never_overwrites_a_newer_one(checkpoint_file, cache):
    later = []
    cache.write_later = later.append
    cache.assign(2, 0)
    cache.assign(4, 10)
    assert checkpoint_file.read() == [] and cache.unsynced_writes == 2  # nothing written yet: the flush's
    cache.truncate_from_end(10)  # a truncation is written at once, fsynced
    assert checkpoint_file.read() == [EpochEntry(2, 0)]
    for write in later:  # the flush runs the writes handed to it, older than the truncation's
        write()
    assert checkpoint_file.read() == [EpochEntry(2, 0)]
    cache.assign(5, 10)
    later[-1]()
    assert checkpoint_file.read() == [EpochEntry(2, 0), EpochEntry(5, 10)]


def test_recovery_gives_back_the_epochs_a_crash_kept_out_of_the_checkpoint(tmp_path):
    """Batches appended and never flushed (their checkpoint write was the flush's) are in the page cache
    after a process crash: the next open's recovery assigns their epochs, as Kafka's LogSegment.recover."""
    manager = LogManager(str(tmp_path))
    log = manager.open("p", 0, LogConfig())
    for epoch in (1, 1, 3, 7):
        log.append(bytearray(build_batch([Record(offset_delta=0, value=b"v")], partition_leader_epoch=epoch)),
                   leader_epoch=epoch)
    assert not os.path.exists(log.leader_epochs.checkpoint_file.path)  # the crash comes before any flush
    reopened = LogManager(str(tmp_path)).open("p", 0, LogConfig())
    assert reopened.leader_epochs.entries == [EpochEntry(1, 0), EpochEntry(3, 2), EpochEntry(7, 3)]
    assert reopened.leader_epochs.checkpoint_file.read() == reopened.leader_epochs.entries
    assert reopened.leader_epochs.unsynced_writes == 0  # written and fsynced on open
