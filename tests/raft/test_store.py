"""raft/store.py on real files: what a node persisted is what it loads after a restart."""

from __future__ import annotations

import json
import os

from kbroker.raft.messages import Entry, Ready, Snapshot, SnapshotId
from kbroker.raft.node import LEADER_CHANGE
from kbroker.raft.store import RaftStore


def reopen(store: RaftStore) -> RaftStore:
    store.close()
    return RaftStore(store.directory, segment_bytes=store.log.config.segment_bytes)


def test_the_quorum_state_and_entries_of_several_epochs_survive_a_restart(tmp_path):
    store = RaftStore(str(tmp_path / "__cluster_metadata-0"))
    entries = [Entry(1, LEADER_CHANGE), Entry(1, b"topic a"), Entry(1, b"topic b"), Entry(3, LEADER_CHANGE),
               Entry(3, b"topic c")]
    store.persist([Ready(quorum_state=(3, 2)), Ready(append=entries[:3]), Ready(append=entries[3:])])
    with open(tmp_path / "__cluster_metadata-0" / "quorum-state") as file:
        assert json.load(file)["leaderEpoch"] == 3  # Kafka's field names
    store = reopen(store)
    assert store.load() == (3, 2, None, entries)
    assert store.log.log_end_offset == 5


def test_truncation_drops_the_tail_for_good(tmp_path):
    store = RaftStore(str(tmp_path))
    store.persist([Ready(append=[Entry(1, LEADER_CHANGE), Entry(1, b"a"), Entry(1, b"b")])])
    store.persist([Ready(truncate_to=2, append=[Entry(2, b"b'")])])
    store = reopen(store)
    assert [e.data for e in store.load()[3]] == [LEADER_CHANGE, b"a", b"b'"]


def test_a_snapshot_replaces_the_entries_it_covers_and_their_segments(tmp_path):
    store = RaftStore(str(tmp_path), segment_bytes=200)  # small segments, so that whole ones can go
    entries = [Entry(1, LEADER_CHANGE)] + [Entry(1, f"change {i}".encode()) for i in range(1, 30)]
    for entry in entries:
        store.persist([Ready(append=[entry])])
    segments_before = len(store.log.segments)
    snapshot = Snapshot(SnapshotId(20, 1), b"state after 20 changes")
    store.persist([Ready(snapshot=snapshot, log_start=20)])
    assert len(store.log.segments) < segments_before and store.log.log_start_offset == 20
    store = reopen(store)
    epoch, voted_for, loaded, rest = store.load()
    assert loaded == snapshot and rest == entries[20:]
    newer = Snapshot(SnapshotId(25, 1), b"state after 25 changes")
    store.persist([Ready(snapshot=newer, log_start=25)])
    assert [name for name in os.listdir(tmp_path) if name.endswith(".checkpoint")] == [
        "00000000000000000025-0000000001.checkpoint"]


def test_a_fetched_snapshot_past_the_log_leaves_an_empty_log_after_it(tmp_path):
    store = RaftStore(str(tmp_path))
    store.persist([Ready(append=[Entry(1, LEADER_CHANGE), Entry(1, b"a")])])
    snapshot = Snapshot(SnapshotId(40, 4), b"the leader's state")
    store.persist([Ready(snapshot=snapshot, log_start=40)])
    store.persist([Ready(append=[Entry(4, b"next")])])
    store = reopen(store)
    assert store.load() == (0, None, snapshot, [Entry(4, b"next")])
    assert store.log.log_end_offset == 41


def test_a_crash_between_keeping_a_snapshot_and_dropping_the_old_log_keeps_the_snapshot(tmp_path):
    store = RaftStore(str(tmp_path))
    store.persist([Ready(append=[Entry(1, LEADER_CHANGE), Entry(1, b"a"), Entry(1, b"b"), Entry(1, b"c")])])
    # A snapshot from a leader whose history differs at offset 1 (epoch 2), written just before the
    # crash: the entries after its end belong to the other history and must not follow it.
    snapshot = Snapshot(SnapshotId(2, 2), b"other history")
    store._write_snapshot(snapshot)
    store = reopen(store)
    assert store.load() == (0, None, snapshot, [])
    assert store.log.log_end_offset == 2


def test_a_snapshot_at_the_log_end_is_where_the_log_starts_after_a_restart(tmp_path):
    """A snapshot of everything leaves an empty log starting at its end; the restart must find it so (its
    segment a file at once, not at the first append), not a log at 0 that the snapshot cannot follow."""
    store = RaftStore(str(tmp_path))
    store.persist([Ready(append=[Entry(1, LEADER_CHANGE), Entry(1, b"a"), Entry(1, b"b")])])
    snapshot = Snapshot(SnapshotId(3, 1), b"state after everything")
    store.persist([Ready(snapshot=snapshot, log_start=3)])
    store = reopen(store)
    assert store.load() == (0, None, snapshot, [])
    assert (store.log.log_start_offset, store.log.log_end_offset) == (3, 3)
    store.persist([Ready(append=[Entry(1, b"c")])])
    store = reopen(store)
    assert store.load() == (0, None, snapshot, [Entry(1, b"c")])


def test_a_log_that_ends_before_its_snapshot_starts_again_after_it(tmp_path):
    """As a store written before the fix above left it: the snapshot, and no segment at all."""
    store = RaftStore(str(tmp_path))
    store.persist([Ready(append=[Entry(1, LEADER_CHANGE), Entry(1, b"a")])])
    snapshot = Snapshot(SnapshotId(2, 1), b"state after everything")
    store.persist([Ready(snapshot=snapshot, log_start=2)])
    store.close()
    for name in os.listdir(tmp_path):
        if not name.endswith(".checkpoint") and name != "quorum-state":
            os.unlink(tmp_path / name)
    store = RaftStore(str(tmp_path))
    assert store.load() == (0, None, snapshot, [])
    assert store.log.log_end_offset == 2
