"""What a Raft node keeps on disk: the quorum state, the log and its latest snapshot.

One directory, Kafka's layout for the metadata partition (``__cluster_metadata-0``):

- ``quorum-state``: the epoch and the vote, as JSON (Kafka's file and field names),
  written to a temporary file, fsynced and renamed before any vote or append is
  acknowledged;
- the log, a ``log/`` partition log: each Raft entry is one record, in batches whose
  partition leader epoch is the entries' epoch. A leader's first entry of its epoch
  is a LEADER_CHANGE control record, as in KRaft. An entry's value is one whole
  change (several metadata records applied together): a deliberate difference from
  KRaft, whose changes are batches of one record per offset; here a Raft offset is
  one atomic change, so the pure core never sees half of one;
- snapshots, ``{end offset:020}-{epoch:010}.checkpoint`` (Kafka's names), written
  whole under a temporary name, fsynced and renamed; only the latest is kept.

Synchronous and blocking (``os.fsync``): the trio driver runs it in a worker thread,
one ``persist`` for all the Readies gathered meanwhile, so they share one fsync.
"""

from __future__ import annotations

import json
import os

from kbroker.log.append_origin import AppendOrigin
from kbroker.log.checkpoint import fsync_directory
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from kbroker.raft.codec import batches_to_entries, entries_to_batches
from kbroker.raft.messages import Entry, Ready, Snapshot, SnapshotId
from kbroker.wire.records import iter_batches

QUORUM_STATE = "quorum-state"


class CorruptStore(Exception):
    """What the node keeps on disk cannot be read as it was written: it cannot start on it."""

SNAPSHOT_SUFFIX = ".checkpoint"
_READ_BYTES = 4 * 1024 * 1024


class RaftStore:
    def __init__(self, directory: str, *, segment_bytes: int = 1024**3) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.log = Log.open(directory, LogConfig(segment_bytes=segment_bytes, retention_ms=-1))

    # -- loading -------------------------------------------------------------------------------------

    def load(self) -> tuple[int, int | None, Snapshot | None, list[Entry]]:
        """The quorum state (epoch, voted for), the latest snapshot and the entries after it."""
        epoch, voted_for = self._read_quorum_state()
        snapshot = self._latest_snapshot()
        start = snapshot.id.end_offset if snapshot else 0
        entries = self.read(max(start, self.log.log_start_offset), self.log.log_end_offset)
        # The log goes on from the snapshot if it starts right at its end (it was cut there), or
        # holds the snapshot's last entry.
        continues = snapshot is None or self.log.log_start_offset == start or (
            self.log.log_start_offset < start and self._epoch_before(start) == snapshot.id.epoch)
        if not continues:
            # The log is not the snapshot's continuation (a crash between keeping a fetched
            # snapshot and dropping the log it replaced): the snapshot wins, the log starts after it.
            self.log.truncate_fully_and_start_at(start)
            entries = []
        elif snapshot is None and self.log.log_start_offset > 0:
            raise RuntimeError(f"{self.directory}: the log starts at {self.log.log_start_offset} but there is no snapshot")
        return epoch, voted_for, snapshot, entries

    def read(self, start: int, stop: int) -> list[Entry]:
        """The entries at offsets ``start`` up to ``stop``, from the log."""
        entries: list[Entry] = []
        while start + len(entries) < stop:
            data = self.log.read_bytes(start + len(entries), _READ_BYTES)
            more = batches_to_entries(data, start + len(entries), stop) if data else []
            if not more:
                break
            entries += more
        return entries

    def _epoch_before(self, offset: int) -> int | None:
        """The epoch of the entry before ``offset``; None if the log does not hold it."""
        held = self.log.log_start_offset <= offset - 1 < self.log.log_end_offset
        entries = self.read(offset - 1, offset) if held else []
        return entries[0].epoch if entries else None

    def _read_quorum_state(self) -> tuple[int, int | None]:
        path = os.path.join(self.directory, QUORUM_STATE)
        if not os.path.exists(path):
            return 0, None
        try:
            with open(path) as file:
                state = json.load(file)
            voted = state.get("votedId", -1)
            return int(state["leaderEpoch"]), None if voted < 0 else int(voted)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CorruptStore(f"{path}: not a readable quorum state ({error})") from None

    def _latest_snapshot(self) -> Snapshot | None:
        ids = self.snapshot_ids()
        if not ids:
            return None
        latest = ids[-1]
        with open(self._snapshot_path(latest), "rb") as file:
            return Snapshot(latest, file.read())

    def snapshot_ids(self) -> list[SnapshotId]:
        ids = []
        for name in os.listdir(self.directory):
            if name.endswith(SNAPSHOT_SUFFIX):
                end, _, epoch = name[: -len(SNAPSHOT_SUFFIX)].partition("-")
                ids.append(SnapshotId(int(end), int(epoch)))
        return sorted(ids, key=lambda i: (i.end_offset, i.epoch))

    def _snapshot_path(self, snapshot_id: SnapshotId) -> str:
        return os.path.join(self.directory, f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}")

    # -- persisting ----------------------------------------------------------------------------------

    def persist(self, readies: list[Ready]) -> None:
        """Carry out the disk part of each Ready, in order, then fsync the log once for all."""
        for ready in readies:
            if ready.quorum_state is not None:
                self._write_quorum_state(*ready.quorum_state)
            if ready.snapshot is not None:
                self._write_snapshot(ready.snapshot)
            if ready.log_start is not None:
                self._drop_before(ready.log_start)
            if ready.truncate_to is not None:
                self._truncate(ready.truncate_to)
            if ready.append:
                self._append(ready.append)
        self.log.flush()

    def _write_quorum_state(self, epoch: int, voted_for: int | None) -> None:
        state = {"clusterId": "", "leaderId": -1, "leaderEpoch": epoch,
                 "votedId": -1 if voted_for is None else voted_for, "appliedOffset": 0, "currentVoters": None,
                 "data_version": 0}
        _write_durably(os.path.join(self.directory, QUORUM_STATE), json.dumps(state).encode())

    def _write_snapshot(self, snapshot: Snapshot) -> None:
        _write_durably(self._snapshot_path(snapshot.id), snapshot.data)
        for old in self.snapshot_ids():
            if old != snapshot.id:
                os.unlink(self._snapshot_path(old))

    def _drop_before(self, offset: int) -> None:
        if offset >= self.log.log_end_offset:
            self.log.truncate_fully_and_start_at(offset)
        else:
            self.log.advance_log_start_offset(offset)
            self.log.apply_retention()  # deletes the segments wholly below the new start

    def _truncate(self, offset: int) -> None:
        """Drop the entries from ``offset`` on. The log cuts whole batches, so the entries of the
        batch holding ``offset`` that come before it are written again."""
        if offset >= self.log.log_end_offset:
            return
        data = self.log.read_bytes(offset, 1)
        batch_start = next(iter_batches(data, allow_partial_tail=True))[1].base_offset if data else offset
        kept = self.read(batch_start, offset) if batch_start < offset else []
        self.log.truncate_to(min(batch_start, offset))
        if kept:
            self._append(kept)

    def _append(self, entries: list[Entry]) -> None:
        """The core numbered the entries, as leader or follower: the log keeps their offsets and epochs."""
        batches = entries_to_batches(entries, self.log.log_end_offset)
        self.log.append(bytearray(batches), AppendOrigin.REPLICATION)

    def close(self) -> None:
        self.log.close()


def _write_durably(path: str, data: bytes) -> None:
    temporary = path + ".tmp"
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))  # the bytes are durable already: the rename now
