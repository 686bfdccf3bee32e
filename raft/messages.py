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


@dataclass
class Ready:
    """What a call into the node asks its driver to do, in this order: persist the quorum
    state and the log change (fsynced), then send the messages, then apply what was committed."""

    quorum_state: tuple[int, int | None] | None = None  # (epoch, voted for), when it changed
    truncate_to: int | None = None  # drop entries from this offset before appending
    append: list[Entry] | None = None
    messages: list[tuple[int, object]] | None = None  # (destination node, message)
    high_watermark: int | None = None  # the new commit offset: entries below it are committed

    def send(self, destination: int, message: object) -> None:
        if self.messages is None:
            self.messages = []
        self.messages.append((destination, message))

    def __bool__(self) -> bool:
        return any(value is not None for value in (self.quorum_state, self.truncate_to, self.append,
                                                     self.messages, self.high_watermark))
