"""One Raft node as a pure state machine: KRaft's design (KIP-595 pull replication,
KIP-996 pre-vote, check-quorum), with no I/O, no clock and no trio.

Inputs are ``receive(source, message, now_ms)``, ``tick(now_ms)`` and
``propose(data, now_ms)``; each returns a ``Ready`` (raft/messages.py) that the
driver carries out in order: persist the quorum state and the log change,
then send, then apply the entries below the new high watermark. Time comes in
as ``now_ms`` and randomness from the ``random.Random`` passed in, so a run
replays exactly from its seed.

Roles, each a small state of its own:

- ``Unattached``: knows an epoch, no leader; campaigns when its election timer fires.
- ``Prospective`` (pre-vote): asks whether it could win before it bumps the epoch,
  so that a node cut off from the quorum does not disturb it when it comes back.
- ``Candidate``: voted for itself in a new epoch and asks the others.
- ``Leader``: appends a first entry of its epoch (entries of earlier epochs commit
  only behind one of its own), answers fetches, advances the high watermark to
  what a majority of voters has; resigns when a majority stops fetching (check-quorum).
- ``Follower``: fetches from the leader; truncates where its log diverges; campaigns
  when the leader falls silent.
- ``Resigned``: a leader that stepped down (``resign``, before a shutdown) and told
  its voters so (EndQuorumEpoch), so that they elect another without waiting.

Observers (nodes outside ``voters``) replicate as followers do but never vote nor campaign.
"""

from __future__ import annotations

import random as random_module
from dataclasses import dataclass, field

from kbroker.raft.messages import (BeginQuorumEpoch, EndQuorumEpoch, Entry, FetchRequest, FetchResponse, FetchSnapshotRequest,
                           FetchSnapshotResponse, Ready, Snapshot, SnapshotId, VoteRequest, VoteResponse)

LEADER_CHANGE = "leader-change"  # the data of a leader's first entry in its epoch


@dataclass(frozen=True)
class RaftConfig:
    election_timeout_ms: int = 1000  # plus up to as much again at random
    fetch_timeout_ms: int = 2000  # a follower without an answer this long campaigns; a leader without a majority resigns
    fetch_interval_ms: int = 50  # how often a follower with nothing new asks again
    request_timeout_ms: int = 300  # a fetch unanswered this long is sent again
    max_fetch_entries: int = 100
    max_snapshot_chunk_bytes: int = 1 << 20
    election_backoff_ms: int = 100  # after a leader resigns, each successor waits this much more than the one before


@dataclass
class Unattached:
    election_deadline: int


@dataclass
class Resigned:
    election_deadline: int


@dataclass
class Election:
    """A round of (pre-)votes: who granted, who answered at all, and when to ask the silent again."""

    election_deadline: int  # lost by then: start another round
    next_request: int  # ask the voters that have not answered again
    granted: set[int] = field(default_factory=set)
    answered: set[int] = field(default_factory=set)


@dataclass
class Prospective(Election):
    lost_leader: int | None = None  # the leader it stopped hearing from: hearsay of it is not believed


@dataclass
class Candidate(Election):
    pass


@dataclass
class Follower:
    leader: int
    fetch_deadline: int  # no answer from the leader by then: campaign
    next_fetch: int = 0  # when to fetch (again): after the interval, or when an answer is overdue
    snapshot: SnapshotId | None = None  # being fetched from the leader, instead of entries
    snapshot_data: bytearray = field(default_factory=bytearray)  # its bytes so far


@dataclass
class Leader:
    end_offsets: dict[int, int]  # voters' log end offsets, as their fetches say
    last_fetch: dict[int, int]  # when each replica last fetched
    epoch_start: int  # the offset of this leader's first entry
    next_begin_quorum: int = 0  # when to tell silent voters of this leader again
    observer_end_offsets: dict[int, int] = field(default_factory=dict)  # for DescribeQuorum only


class RaftNode:
    def __init__(self, node_id: int, voters: frozenset[int], config: RaftConfig, rng: random_module.Random, *,
                 epoch: int = 0, voted_for: int | None = None, log: list[Entry] | None = None,
                 snapshot: Snapshot | None = None, now_ms: int = 0) -> None:
        """A node started from what it persisted: the quorum state, its latest snapshot and the
        log's entries from the snapshot's end on."""
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.config = config
        self.random = rng
        self.epoch = epoch
        self.voted_for = voted_for
        self.snapshot = snapshot
        self.log: list[Entry] = list(log or [])  # the entries from ``log_start`` on
        self.high_watermark = self.log_start  # not persisted: relearned from the leader, as KRaft does
        # A sole voter has no one to wait for: it campaigns at once (as KRaft's QuorumState does).
        self.role = Unattached(now_ms if self.voters == {node_id} else self._election_deadline(now_ms))

    # -- what the driver and tests read -----------------------------------------------------------

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def leader(self) -> int | None:
        if isinstance(self.role, Leader):
            return self.node_id
        if isinstance(self.role, Follower):
            return self.role.leader
        return None

    @property
    def log_start(self) -> int:
        return self.snapshot.id.end_offset if self.snapshot else 0

    @property
    def end_offset(self) -> int:
        return self.log_start + len(self.log)

    @property
    def last_epoch(self) -> int:
        if self.log:
            return self.log[-1].epoch
        return self.snapshot.id.epoch if self.snapshot else 0

    def entry(self, offset: int) -> Entry:
        return self.log[offset - self.log_start]

    def entries(self, start: int, stop: int) -> list[Entry]:
        """The entries at offsets ``start`` (at least ``log_start``) up to ``stop``."""
        return self.log[start - self.log_start:max(0, stop - self.log_start)]

    def take_snapshot(self, end_offset: int, data: bytes) -> Ready:
        """The state machine's state after the entries below ``end_offset`` (committed ones): keep it
        as the latest snapshot and drop those entries from the log."""
        ready = Ready()
        if not self.log_start < end_offset <= self.high_watermark:
            raise ValueError(f"a snapshot must end past the log start {self.log_start} and at most at the "
                             f"high watermark {self.high_watermark}, not at {end_offset}")
        self._keep_snapshot(Snapshot(SnapshotId(end_offset, self.entry(end_offset - 1).epoch), data), ready)
        return ready

    def next_deadline_ms(self) -> int:
        role = self.role
        if isinstance(role, Follower):
            return min(role.fetch_deadline, role.next_fetch)
        if isinstance(role, Leader):
            return min(self._quorum_deadline(), role.next_begin_quorum)
        if isinstance(role, Election):
            return min(role.election_deadline, role.next_request)
        return role.election_deadline

    # -- inputs ---------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> Ready:
        ready = Ready()
        role = self.role
        if isinstance(role, Leader):
            if now_ms >= self._quorum_deadline():  # check-quorum: a majority stopped fetching
                self._become_unattached(self.epoch, now_ms, ready)
            elif now_ms >= role.next_begin_quorum:
                self._begin_quorum_epoch(now_ms, ready)
        elif isinstance(role, Follower):
            if now_ms >= role.fetch_deadline:
                self._campaign_or_wait(now_ms, ready)
            elif now_ms >= role.next_fetch:
                self._send_fetch(role.leader, now_ms, ready)
        elif now_ms >= role.election_deadline:
            if isinstance(role, Unattached) and not self.is_voter and self.voters:
                # An observer looks for the leader by fetching from a voter; it never campaigns.
                self._send_fetch(self.random.choice(sorted(self.voters)), now_ms, ready)
                role.election_deadline = self._election_deadline(now_ms)
            else:
                self._campaign_or_wait(now_ms, ready)
        elif isinstance(role, Election) and now_ms >= role.next_request:
            self._request_votes(now_ms, ready)
        return ready

    def resign(self, now_ms: int) -> Ready:
        """Step down (the node is shutting down): the voters most caught up are asked to campaign first."""
        ready = Ready()
        role = self.role
        if isinstance(role, Leader):
            successors = tuple(sorted(role.end_offsets.keys() & self.voters, key=lambda v: -role.end_offsets[v]))
            for voter in sorted(self.voters - {self.node_id}):
                ready.send(voter, EndQuorumEpoch(self.epoch, self.node_id, successors))
            self.role = Resigned(self._election_deadline(now_ms))
        return ready

    def propose(self, data: object, now_ms: int) -> tuple[int | None, Ready]:
        """Append ``data`` if this node leads: its offset (committed once below the high watermark)."""
        ready = Ready()
        if not isinstance(self.role, Leader):
            return None, ready
        offset = self._append_own(data, ready)
        self._advance_high_watermark(ready)
        return offset, ready

    def receive(self, source: int, message: object, now_ms: int) -> Ready:
        ready = Ready()
        handler = _HANDLERS[type(message)]
        handler(self, source, message, now_ms, ready)
        return ready

    # -- elections --------------------------------------------------------------------------------------

    def _campaign_or_wait(self, now_ms: int, ready: Ready) -> None:
        if not self.is_voter:
            self._become_unattached(self.epoch, now_ms, ready)
            return
        if self.voters == {self.node_id}:
            self._become_candidate(now_ms, ready)
            return
        lost_leader = self.role.leader if isinstance(self.role, Follower) else getattr(self.role, "lost_leader", None)
        self.role = Prospective(self._election_deadline(now_ms), now_ms, {self.node_id}, {self.node_id},
                                lost_leader=lost_leader)
        self._request_votes(now_ms, ready)

    def _become_candidate(self, now_ms: int, ready: Ready) -> None:
        self._set_quorum_state(self.epoch + 1, self.node_id, ready)
        self.role = Candidate(self._election_deadline(now_ms), now_ms, {self.node_id}, {self.node_id})
        if self._is_majority(self.role.granted):
            self._become_leader(now_ms, ready)
            return
        self._request_votes(now_ms, ready)

    def _request_votes(self, now_ms: int, ready: Ready) -> None:
        """Ask every voter that has not answered this round yet (again, after the request timeout)."""
        role = self.role
        pre_vote = isinstance(role, Prospective)
        request = VoteRequest(self.epoch + 1 if pre_vote else self.epoch, self.node_id, self.last_epoch,
                              self.end_offset, pre_vote=pre_vote)
        for voter in sorted(self.voters - role.answered):
            ready.send(voter, request)
        role.next_request = now_ms + self.config.request_timeout_ms

    def _become_leader(self, now_ms: int, ready: Ready) -> None:
        others = sorted(self.voters - {self.node_id})
        self.role = Leader({voter: 0 for voter in others}, {voter: now_ms for voter in others},
                           epoch_start=self.end_offset)
        self._append_own(LEADER_CHANGE, ready)
        self._begin_quorum_epoch(now_ms, ready, everyone=True)
        self._advance_high_watermark(ready)

    def _begin_quorum_epoch(self, now_ms: int, ready: Ready, everyone: bool = False) -> None:
        """Tell voters that this node leads: all of them when it takes office, and then again, every
        request timeout, those that have not fetched lately (a restarted voter learns it at once)."""
        role = self.role
        recent = now_ms - self.config.request_timeout_ms
        for voter in sorted(self.voters - {self.node_id}):
            if everyone or role.last_fetch[voter] < recent:
                ready.send(voter, BeginQuorumEpoch(self.epoch, self.node_id))
        role.next_begin_quorum = now_ms + self.config.request_timeout_ms

    def _become_follower(self, epoch: int, leader: int, now_ms: int, ready: Ready) -> None:
        if epoch > self.epoch:
            self._set_quorum_state(epoch, None, ready)
        self.role = Follower(leader, self._fetch_deadline(now_ms))
        self._send_fetch(leader, now_ms, ready)

    def _become_unattached(self, epoch: int, now_ms: int, ready: Ready) -> None:
        """No leader known; a vote already given in this epoch stands."""
        if epoch > self.epoch:
            self._set_quorum_state(epoch, None, ready)
        self.role = Unattached(self._election_deadline(now_ms))

    def _observe_epoch(self, epoch: int, leader: int | None, now_ms: int, ready: Ready, source: int = -1) -> bool:
        """A message from a newer epoch: follow its leader, or wait unattached. False if stale.

        In the same epoch a node without a leader follows the one named, except that a prospective
        believes only the leader it lost itself about being alive: followers that have not yet noticed
        the leader's death would otherwise draw it back to a dead leader again and again."""
        if epoch < self.epoch:
            return False
        if epoch > self.epoch:
            if leader is not None and leader != self.node_id:
                self._become_follower(epoch, leader, now_ms, ready)
            else:
                self._become_unattached(epoch, now_ms, ready)
        elif leader is not None and leader != self.node_id and not isinstance(self.role, (Follower, Leader)):
            if not (isinstance(self.role, Prospective) and self.role.lost_leader == leader != source):
                self._become_follower(epoch, leader, now_ms, ready)
        return True

    def _on_vote_request(self, source: int, request: VoteRequest, now_ms: int, ready: Ready) -> None:
        up_to_date = (request.last_epoch, request.end_offset) >= (self.last_epoch, self.end_offset)
        if request.pre_vote:
            # Granted without any change here: no leader heard from lately, and a log no shorter.
            heard_from_leader = isinstance(self.role, Leader) or (
                isinstance(self.role, Follower) and now_ms < self.role.fetch_deadline)
            granted = request.epoch > self.epoch and up_to_date and not heard_from_leader and self.is_voter
            ready.send(source, VoteResponse(self.epoch, granted, pre_vote=True, leader=self.leader))
            return
        if request.epoch > self.epoch:
            self._become_unattached(request.epoch, now_ms, ready)
        granted = (request.epoch == self.epoch and self.is_voter and self.leader is None
                   and self.voted_for in (None, request.candidate) and up_to_date)
        if granted and self.voted_for is None:
            self._set_quorum_state(self.epoch, request.candidate, ready)
            if isinstance(self.role, Unattached):
                self.role.election_deadline = self._election_deadline(now_ms)
        ready.send(source, VoteResponse(self.epoch, granted, leader=self.leader))

    def _on_vote_response(self, source: int, response: VoteResponse, now_ms: int, ready: Ready) -> None:
        role = self.role
        if response.pre_vote:
            if isinstance(role, Prospective) and response.epoch <= self.epoch and not response.granted:
                # A pre-vote changes nothing at the voter, so a refusal is asked again soon: the voter
                # may only have heard from the lost leader a little more recently than this node.
                role.next_request = min(role.next_request, now_ms + self.config.election_timeout_ms // 10)
            if isinstance(role, Prospective) and response.epoch <= self.epoch and response.granted:
                role.answered.add(source)
                role.granted.add(source)
                if self._is_majority(role.granted):
                    self._become_candidate(now_ms, ready)
            elif response.epoch >= self.epoch and response.leader is not None:
                self._observe_epoch(response.epoch, response.leader, now_ms, ready, source)  # there is a leader
            elif response.epoch > self.epoch:
                self._observe_epoch(response.epoch, None, now_ms, ready)
            return
        if not self._observe_epoch(response.epoch, response.leader, now_ms, ready):
            return
        role = self.role
        if isinstance(role, Candidate) and response.epoch == self.epoch:
            role.answered.add(source)
        if isinstance(role, Candidate) and response.epoch == self.epoch and response.granted:
            role.granted.add(source)
            if self._is_majority(role.granted):
                self._become_leader(now_ms, ready)

    def _on_end_quorum_epoch(self, source: int, message: EndQuorumEpoch, now_ms: int, ready: Ready) -> None:
        if not self._observe_epoch(message.epoch, None, now_ms, ready):
            return
        if isinstance(self.role, Follower) and self.role.leader == message.leader:
            successors = message.preferred_successors
            rank = successors.index(self.node_id) if self.node_id in successors else len(successors)
            self.role = Unattached(now_ms + rank * self.config.election_backoff_ms)

    def _on_begin_quorum_epoch(self, source: int, message: BeginQuorumEpoch, now_ms: int, ready: Ready) -> None:
        if message.epoch < self.epoch or (message.epoch == self.epoch and isinstance(self.role, (Follower, Leader))):
            return
        self._become_follower(message.epoch, message.leader, now_ms, ready)

    # -- replication ----------------------------------------------------------------------------------------

    def _send_fetch(self, destination: int, now_ms: int, ready: Ready) -> None:
        role = self.role
        if isinstance(role, Follower):
            role.next_fetch = now_ms + self.config.request_timeout_ms  # sent again if unanswered
            if role.snapshot is not None:
                ready.send(destination, FetchSnapshotRequest(self.epoch, self.node_id, role.snapshot,
                                                             len(role.snapshot_data)))
                return
        ready.send(destination, FetchRequest(self.epoch, self.node_id, self.end_offset, self.last_epoch))

    # -- snapshots (KIP-630) ------------------------------------------------------------------------------

    def _on_fetch_snapshot_request(self, source: int, request: FetchSnapshotRequest, now_ms: int,
                                   ready: Ready) -> None:
        if request.epoch > self.epoch:
            self._observe_epoch(request.epoch, None, now_ms, ready)
        role = self.role
        if not isinstance(role, Leader) or request.epoch != self.epoch:
            ready.send(source, FetchSnapshotResponse(self.epoch, self.leader, request.snapshot_id, request.position,
                                                     not_leader=True))
            return
        role.last_fetch[source] = now_ms  # a replica fetching a snapshot is alive, for check-quorum
        snapshot = self.snapshot
        if snapshot is None or snapshot.id != request.snapshot_id or request.position > len(snapshot.data):
            ready.send(source, FetchSnapshotResponse(self.epoch, self.node_id, request.snapshot_id, request.position,
                                                     not_found=True))
            return
        chunk = snapshot.data[request.position:request.position + self.config.max_snapshot_chunk_bytes]
        ready.send(source, FetchSnapshotResponse(self.epoch, self.node_id, snapshot.id, request.position,
                                                 len(snapshot.data), chunk))

    def _on_fetch_snapshot_response(self, source: int, response: FetchSnapshotResponse, now_ms: int,
                                    ready: Ready) -> None:
        if not self._observe_epoch(response.epoch, response.leader, now_ms, ready):
            return
        role = self.role
        if (not isinstance(role, Follower) or source != role.leader or response.not_leader
                or role.snapshot != response.snapshot_id or response.position != len(role.snapshot_data)):
            return  # not for what this node is fetching now (stale, duplicated, or from another leader)
        role.fetch_deadline = self._fetch_deadline(now_ms)
        if response.not_found:  # the leader took a newer one: fetch again, and be told which
            role.snapshot, role.snapshot_data = None, bytearray()
        else:
            role.snapshot_data += response.chunk
            if len(role.snapshot_data) >= response.size:
                snapshot = Snapshot(role.snapshot, bytes(role.snapshot_data))
                role.snapshot, role.snapshot_data = None, bytearray()
                self._keep_snapshot(snapshot, ready)
        self._send_fetch(role.leader, now_ms, ready)

    def _keep_snapshot(self, snapshot: Snapshot, ready: Ready) -> None:
        """Make ``snapshot`` the latest: drop the entries it covers, or the whole log if it does not
        continue the snapshot (a fetched snapshot past this node's end, or from another history)."""
        end, epoch = snapshot.id.end_offset, snapshot.id.epoch
        if self.log_start < end <= self.end_offset and self.entry(end - 1).epoch == epoch:
            del self.log[:end - self.log_start]
        else:
            if self.end_offset > end:
                ready.truncate_to = end
            self.log = []
        self.snapshot = snapshot
        ready.snapshot, ready.log_start = snapshot, end
        if end > self.high_watermark:  # a snapshot holds committed entries only
            self.high_watermark = end
            ready.high_watermark = end

    def _on_fetch_request(self, source: int, request: FetchRequest, now_ms: int, ready: Ready) -> None:
        role = self.role
        if request.epoch > self.epoch:
            self._observe_epoch(request.epoch, None, now_ms, ready)
            role = self.role
        if not isinstance(role, Leader) or request.epoch != self.epoch:
            ready.send(source, FetchResponse(self.epoch, self.leader, request.fetch_offset, request.last_fetched_epoch,
                                             not_leader=True))
            return
        if self._needs_snapshot(request.fetch_offset, request.last_fetched_epoch):
            ready.send(source, FetchResponse(self.epoch, self.node_id, request.fetch_offset,
                                             request.last_fetched_epoch, self.high_watermark,
                                             snapshot_id=self.snapshot.id))
            return
        diverging = self._diverging_end_offset(request.fetch_offset, request.last_fetched_epoch)
        if diverging is not None:
            ready.send(source, FetchResponse(self.epoch, self.node_id, request.fetch_offset,
                                             request.last_fetched_epoch, self.high_watermark,
                                             diverging_end_offset=diverging))
            return
        role.last_fetch[source] = now_ms
        if source in role.end_offsets:
            role.end_offsets[source] = request.fetch_offset
            self._advance_high_watermark(ready)
        else:
            role.observer_end_offsets[source] = request.fetch_offset
        entries = tuple(self.entries(request.fetch_offset, request.fetch_offset + self.config.max_fetch_entries))
        ready.send(source, FetchResponse(self.epoch, self.node_id, request.fetch_offset, request.last_fetched_epoch,
                                         self.high_watermark, entries))

    def _needs_snapshot(self, fetch_offset: int, last_fetched_epoch: int) -> bool:
        """The entries the fetcher needs, or those to check its log against, are in the snapshot only
        (KIP-630: the fetch offset is below the log start, or its epoch is older than the snapshot's)."""
        if self.snapshot is None:
            return False
        snapshot = self.snapshot.id
        return (fetch_offset < snapshot.end_offset or last_fetched_epoch < snapshot.epoch
                or (fetch_offset == snapshot.end_offset and last_fetched_epoch != snapshot.epoch))

    def _diverging_end_offset(self, fetch_offset: int, last_fetched_epoch: int) -> int | None:
        """Where the fetcher's log must be cut, if its last entry is not ours (KIP-595's DivergingEpoch)."""
        if fetch_offset == self.log_start:
            return None  # at 0; or at the snapshot's end, whose epoch was checked by _needs_snapshot
        if fetch_offset <= self.end_offset and self.entry(fetch_offset - 1).epoch == last_fetched_epoch:
            return None
        # The end of the fetcher's last epoch in our log: the first offset of a later epoch.
        end = next((offset for offset, entry in enumerate(self.log, self.log_start) if entry.epoch > last_fetched_epoch),
                   self.end_offset)
        return max(min(end, fetch_offset - 1), self.log_start)

    def _on_fetch_response(self, source: int, response: FetchResponse, now_ms: int, ready: Ready) -> None:
        if (response.leader == source and not response.not_leader and response.snapshot_id is None
                and response.diverging_end_offset < 0 and self._holds(response.fetch_offset, response.last_fetched_epoch)):
            # Whatever this node's role and epoch by now: a leader's answer to a fetch says which entries
            # below the fetch offset are committed (the leader found this log agreeing up to there), and
            # committed they stay. A leader stopping cleanly commits its last entries and resigns at once;
            # its EndQuorumEpoch, on the other connection, can overtake this answer, and the voter may
            # lead a new epoch before it comes. Were it ignored, a voter left with no majority (the second
            # of three stopping, the third dead) could never count those entries as committed: under a new
            # leader, that takes an entry of the new epoch committing.
            self._learn_high_watermark(min(response.high_watermark, response.fetch_offset), ready)
        if not self._observe_epoch(response.epoch, response.leader, now_ms, ready):
            return
        role = self.role
        if isinstance(role, Follower) and source == role.leader and response.not_leader and response.leader is None:
            self._become_unattached(self.epoch, now_ms, ready)  # the leader resigned: elect another at once
            return
        if not isinstance(role, Follower) or source != role.leader or response.not_leader or role.snapshot:
            if isinstance(role, Unattached) and response.leader is not None and response.leader != self.node_id:
                self._become_follower(response.epoch, response.leader, now_ms, ready)
            return
        if (response.fetch_offset, response.last_fetched_epoch) != (self.end_offset, self.last_epoch):
            return  # an answer to a fetch from another state of this log (a duplicate or a reordered one)
        role.fetch_deadline = self._fetch_deadline(now_ms)
        if response.snapshot_id is not None:
            role.snapshot, role.snapshot_data = response.snapshot_id, bytearray()
            self._send_fetch(role.leader, now_ms, ready)
            return
        if response.diverging_end_offset >= 0:
            cut = max(response.diverging_end_offset, self.high_watermark)  # committed entries are never cut
            if cut < self.end_offset:
                del self.log[cut - self.log_start:]
                ready.truncate_to = cut
            self._send_fetch(role.leader, now_ms, ready)
            return
        if response.entries:
            self.log.extend(response.entries)
            ready.append = (ready.append or []) + list(response.entries)
            self._send_fetch(role.leader, now_ms, ready)  # more may be waiting
        else:
            role.next_fetch = now_ms + self.config.fetch_interval_ms
        self._learn_high_watermark(response.high_watermark, ready)

    def _holds(self, end_offset: int, last_epoch: int) -> bool:
        """This log still has the entries below ``end_offset`` it had when the last of them was of
        ``last_epoch`` (Raft's log matching: the same epoch at the same offset, the same entries before)."""
        if not self.log_start <= end_offset <= self.end_offset:
            return False
        if end_offset == self.log_start:
            return last_epoch == (self.snapshot.id.epoch if self.snapshot else 0)
        return self.entry(end_offset - 1).epoch == last_epoch

    def _learn_high_watermark(self, leader_high_watermark: int, ready: Ready) -> None:
        """A leader's high watermark, as far as this log reaches."""
        new_high_watermark = min(leader_high_watermark, self.end_offset)
        if new_high_watermark > self.high_watermark:
            self.high_watermark = new_high_watermark
            ready.high_watermark = new_high_watermark

    # -- the leader's log and high watermark -------------------------------------------------------------

    def _append_own(self, data: object, ready: Ready) -> int:
        entry = Entry(self.epoch, data)
        self.log.append(entry)
        ready.append = (ready.append or []) + [entry]
        return self.end_offset - 1

    def _advance_high_watermark(self, ready: Ready) -> None:
        role = self.role
        offsets = sorted([self.end_offset, *(role.end_offsets[v] for v in self.voters - {self.node_id})],
                         reverse=True)
        majority_offset = offsets[len(self.voters) // 2]
        # Only behind an entry of this leader's own epoch (Raft's commitment rule).
        if majority_offset > role.epoch_start and majority_offset > self.high_watermark:
            self.high_watermark = majority_offset
            ready.high_watermark = majority_offset

    def _quorum_deadline(self) -> int:
        """When check-quorum resigns this leader: a majority (itself included) must have fetched lately."""
        role = self.role
        others = sorted((role.last_fetch[v] for v in self.voters - {self.node_id}), reverse=True)
        needed = len(self.voters) // 2  # other voters needed besides the leader
        if needed == 0:
            return 1 << 62
        return others[needed - 1] + self.config.fetch_timeout_ms

    # -- helpers ------------------------------------------------------------------------------------------------

    def _set_quorum_state(self, epoch: int, voted_for: int | None, ready: Ready) -> None:
        self.epoch, self.voted_for = epoch, voted_for
        ready.quorum_state = (epoch, voted_for)

    def _is_majority(self, granted: set[int]) -> bool:
        return len(granted & self.voters) * 2 > len(self.voters)

    def _fetch_deadline(self, now_ms: int) -> int:
        """When a silent leader is given up; at random within half an election timeout past the fetch
        timeout, so that the followers of a dead leader do not all campaign at once and split the vote."""
        return now_ms + self.config.fetch_timeout_ms + self.random.randrange(self.config.election_timeout_ms // 2 + 1)

    def _election_deadline(self, now_ms: int) -> int:
        timeout = self.config.election_timeout_ms
        return now_ms + timeout + self.random.randrange(timeout)


_HANDLERS = {
    VoteRequest: RaftNode._on_vote_request,
    VoteResponse: RaftNode._on_vote_response,
    BeginQuorumEpoch: RaftNode._on_begin_quorum_epoch,
    EndQuorumEpoch: RaftNode._on_end_quorum_epoch,
    FetchRequest: RaftNode._on_fetch_request,
    FetchResponse: RaftNode._on_fetch_response,
    FetchSnapshotRequest: RaftNode._on_fetch_snapshot_request,
    FetchSnapshotResponse: RaftNode._on_fetch_snapshot_response,
}
