"""What Raft nodes say to each other, as plain values (KIP-595's RPCs, without the wire).

The trio driver maps them to Kafka's Vote, BeginQuorumEpoch, EndQuorumEpoch
and Fetch requests; the simulator passes them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    epoch: int
    data: object


@dataclass(frozen=True)
class SnapshotId:
    """A snapshot holds the state after every entry below ``end_offset``; the last of them is of ``epoch``."""

    end_offset: int
    epoch: int


@dataclass(frozen=True)
class Snapshot:
    id: SnapshotId
    data: bytes


@dataclass(frozen=True)
class VoteRequest:
    epoch: int  # the candidate's epoch; for a pre-vote, the epoch it would campaign in
    candidate: int
    last_epoch: int  # of the candidate's last entry
    end_offset: int  # the candidate's log end offset
    pre_vote: bool = False


@dataclass(frozen=True)
class VoteResponse:
    epoch: int
    granted: bool
    pre_vote: bool = False
    leader: int | None = None  # the leader the voter follows, when it knows one


@dataclass(frozen=True)
class BeginQuorumEpoch:
    epoch: int
    leader: int


@dataclass(frozen=True)
class EndQuorumEpoch:
    """A leader steps down (shutting down): its voters should elect another now, the most
    caught-up first, rather than wait for their fetch timeout."""

    epoch: int
    leader: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True)
class FetchRequest:
    epoch: int
    replica: int
    fetch_offset: int  # the fetcher's log end offset
    last_fetched_epoch: int  # the epoch of the fetcher's entry at fetch_offset - 1 (0: none)


@dataclass(frozen=True)
class FetchResponse:
    epoch: int
    leader: int | None
    fetch_offset: int  # echoed with the epoch below, so that a stale answer is recognised
    last_fetched_epoch: int = 0
    high_watermark: int = 0
    entries: tuple[Entry, ...] = ()
    diverging_end_offset: int = -1  # >= 0: truncate to this offset, then fetch again
    not_leader: bool = False  # asked a node that is not the leader of ``epoch``
    snapshot_id: SnapshotId | None = None  # the entries asked for are gone: fetch this snapshot instead


@dataclass(frozen=True)
class FetchSnapshotRequest:
    epoch: int
    replica: int
    snapshot_id: SnapshotId
    position: int  # the byte to send from


@dataclass(frozen=True)
class FetchSnapshotResponse:
    epoch: int
    leader: int | None
    snapshot_id: SnapshotId
    position: int
    size: int = 0  # of the whole snapshot
    chunk: bytes = b""
    not_leader: bool = False
    not_found: bool = False  # the leader no longer has (or never had) this snapshot


@dataclass
class Ready:
    """What a call into the node asks its driver to do, in this order: persist the quorum
    state and the log change (fsynced), then send the messages, then apply what was committed."""

    quorum_state: tuple[int, int | None] | None = None  # (epoch, voted for), when it changed
    snapshot: Snapshot | None = None  # a snapshot to write (taken here, or fetched whole from the leader)
    log_start: int | None = None  # then drop the entries below this offset (the log may be left empty from here)
    truncate_to: int | None = None  # drop entries from this offset before appending
    append: list[Entry] | None = None
    messages: list[tuple[int, object]] | None = None  # (destination node, message)
    high_watermark: int | None = None  # the new commit offset: entries below it are committed

    def send(self, destination: int, message: object) -> None:
        if self.messages is None:
            self.messages = []
        self.messages.append((destination, message))

    def __bool__(self) -> bool:
        return any(value is not None for value in (self.quorum_state, self.snapshot, self.log_start,
                                                     self.truncate_to, self.append, self.messages,
                                                     self.high_watermark))
