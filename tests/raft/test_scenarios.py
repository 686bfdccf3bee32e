"""Raft stories, step by step: elections, replication, a crashed leader, a partitioned
leader, a node that comes back, an observer. The network here is perfect and
in order (1 ms per message) unless a story cuts it; the clock moves only when a
story says so."""

from __future__ import annotations

import ast
import random

from kbroker.raft.messages import Ready
from kbroker.raft.node import LEADER_CHANGE, Follower, Leader, RaftConfig, RaftNode
from tests.raft.simulator import Disk

CONFIG = RaftConfig(election_timeout_ms=500, fetch_timeout_ms=1000, fetch_interval_ms=50, request_timeout_ms=200)


class Cluster:
    def __init__(self, voters=3, observers=0, seed=7):
        self.voters = frozenset(range(1, voters + 1))
        self.ids = list(range(1, voters + observers + 1))
        self.random = random.Random(seed)
        self.now = 0
        self.disks = {n: Disk() for n in self.ids}
        self.nodes = {n: self._boot(n) for n in self.ids}
        self.in_flight: list[tuple[int, int, int, object]] = []  # (due, source, destination, message)
        self.cut: set[int] = set()  # nodes cut off from every other
        self.applied = {n: [] for n in self.ids}

    def _boot(self, n):
        disk = self.disks[n]
        return RaftNode(n, self.voters, CONFIG, random.Random(self.random.random()), epoch=disk.epoch,
                        voted_for=disk.voted_for, snapshot=disk.snapshot, log=list(disk.log), now_ms=self.now)

    def carry_out(self, n, ready: Ready):
        disk, node = self.disks[n], self.nodes[n]
        if ready.quorum_state:
            disk.epoch, disk.voted_for = ready.quorum_state
        if ready.snapshot:
            disk.snapshot = ready.snapshot
            self.applied[n] = ast.literal_eval(ready.snapshot.data.decode())  # this story's snapshots are lists' reprs
        if ready.log_start is not None:
            disk.log = disk.log[ready.log_start - disk.log_start:]
            disk.log_start = ready.log_start
        if ready.truncate_to is not None:
            del disk.log[ready.truncate_to - disk.log_start:]
        disk.log.extend(ready.append or ())
        for destination, message in ready.messages or ():
            self.in_flight.append((self.now + 1, n, destination, message))
        if ready.high_watermark is not None:
            applied = self.applied[n]
            applied += [e.data for e in node.entries(len(applied), ready.high_watermark)]

    def run(self, ms):
        """Advance the clock ``ms`` milliseconds, one millisecond at a time."""
        for _ in range(ms):
            self.now += 1
            due = [m for m in self.in_flight if m[0] <= self.now]
            self.in_flight = [m for m in self.in_flight if m[0] > self.now]
            for _, source, destination, message in due:
                node = self.nodes.get(destination)
                if node is not None and not ({source, destination} & self.cut):
                    self.carry_out(destination, node.receive(source, message, self.now))
            for n, node in self.nodes.items():
                if node is not None and node.next_deadline_ms() <= self.now:
                    self.carry_out(n, node.tick(self.now))

    def propose(self, data):
        leader = self.leader()
        offset, ready = self.nodes[leader].propose(data, self.now)
        self.carry_out(leader, ready)
        return offset

    def leader(self):
        leaders = [n for n, node in self.nodes.items() if node is not None and isinstance(node.role, Leader)]
        assert len(leaders) <= 1 or len({self.nodes[n].epoch for n in leaders}) == len(leaders)
        return max(leaders, key=lambda n: self.nodes[n].epoch) if leaders else None

    def crash(self, n):
        self.nodes[n] = None

    def restart(self, n):
        self.nodes[n] = self._boot(n)
        self.applied[n] = ast.literal_eval(self.disks[n].snapshot.data.decode()) if self.disks[n].snapshot else []

    def snapshot(self, n):
        node = self.nodes[n]
        self.carry_out(n, node.take_snapshot(node.high_watermark, repr(self.applied[n]).encode()))


def test_three_voters_elect_one_leader_that_every_follower_follows():
    cluster = Cluster()
    cluster.run(1100)  # past the longest election timeout (500 ms plus up to 500 at random)
    leader = cluster.leader()
    assert leader is not None
    epoch = cluster.nodes[leader].epoch
    assert epoch == 1  # pre-vote first: no epoch was spent on a lost election
    for n in cluster.voters - {leader}:
        assert isinstance(cluster.nodes[n].role, Follower) and cluster.nodes[n].role.leader == leader
    assert cluster.nodes[leader].log[0].data == LEADER_CHANGE


def test_a_proposal_commits_on_a_majority_and_reaches_every_follower():
    cluster = Cluster()
    cluster.run(1100)
    offset = cluster.propose("create topic orders")
    cluster.run(200)
    for n in cluster.ids:
        assert cluster.nodes[n].high_watermark > offset
        assert cluster.applied[n][offset] == "create topic orders"


def test_a_crashed_leader_is_replaced_within_two_election_timeouts_with_every_committed_entry():
    cluster = Cluster()
    cluster.run(1100)
    old = cluster.leader()
    committed = cluster.propose("before the crash")
    cluster.run(200)
    cluster.crash(old)
    # A follower notices within the fetch timeout (plus up to an election timeout at random, so
    # that the two do not split the vote), then pre-votes and votes.
    cluster.run(CONFIG.fetch_timeout_ms + 2 * CONFIG.election_timeout_ms)
    new = cluster.leader()
    assert new not in (None, old) and cluster.nodes[new].epoch == 2
    assert cluster.nodes[new].log[committed].data == "before the crash"
    cluster.restart(old)
    cluster.run(500)
    assert isinstance(cluster.nodes[old].role, Follower) and cluster.nodes[old].role.leader == new


def test_a_leader_cut_off_from_the_majority_resigns_and_its_uncommitted_entries_are_dropped():
    cluster = Cluster()
    cluster.run(1100)
    old = cluster.leader()
    cluster.cut = {old}
    stranded = cluster.propose("never committed")  # appended by the cut-off leader alone
    cluster.run(CONFIG.fetch_timeout_ms + 100)
    assert not isinstance(cluster.nodes[old].role, Leader)  # check-quorum: no majority fetched
    cluster.run(2 * CONFIG.election_timeout_ms)
    new = cluster.leader()
    assert new is not None and new != old
    replacement = cluster.propose("committed instead")
    cluster.cut = set()
    cluster.run(500)
    assert isinstance(cluster.nodes[old].role, Follower)
    assert [e.data for e in cluster.nodes[old].log] == [e.data for e in cluster.nodes[new].log]
    assert "never committed" not in cluster.applied[old]
    assert cluster.applied[old][replacement] == "committed instead" and stranded <= replacement


def test_a_node_coming_back_from_a_partition_does_not_disturb_the_leader():
    cluster = Cluster()
    cluster.run(1100)
    leader = cluster.leader()
    epoch = cluster.nodes[leader].epoch
    wanderer = next(iter(cluster.voters - {leader}))
    cluster.cut = {wanderer}
    cluster.run(5000)  # it campaigns again and again, but its pre-votes are refused: no epoch is spent
    assert cluster.nodes[wanderer].epoch == epoch
    cluster.cut = set()
    cluster.run(500)
    assert cluster.leader() == leader and cluster.nodes[leader].epoch == epoch
    assert isinstance(cluster.nodes[wanderer].role, Follower)


def test_an_observer_replicates_but_never_votes_nor_campaigns():
    cluster = Cluster(voters=3, observers=1)
    cluster.run(1100)
    offset = cluster.propose("seen by the observer")
    cluster.run(1500)
    observer = cluster.nodes[4]
    assert observer.high_watermark > offset and cluster.applied[4][offset] == "seen by the observer"
    cluster.crash(cluster.leader())
    cluster.run(3000)
    assert not isinstance(observer.role, Leader) and observer.voted_for is None
    assert cluster.leader() != 4 and cluster.leader() is not None


def test_a_single_voter_leads_at_once_and_commits_alone():
    cluster = Cluster(voters=1)
    cluster.run(1100)
    assert cluster.leader() == 1
    offset = cluster.propose("alone")
    assert cluster.nodes[1].high_watermark > offset


def test_a_node_that_lost_its_disk_rejoins_from_the_leaders_snapshot():
    cluster = Cluster(voters=3, observers=1)
    cluster.run(1100)
    for i in range(30):
        cluster.propose(f"record {i}")
    cluster.run(300)
    leader = cluster.leader()
    cluster.snapshot(leader)  # the leader's log now starts after record 29: those entries are gone
    snapshot = cluster.nodes[leader].snapshot
    assert snapshot.id.end_offset == 31 and cluster.nodes[leader].log == []
    cluster.crash(4)
    cluster.disks[4] = Disk()
    cluster.restart(4)  # empty: it fetches from offset 0, which the leader no longer has
    cluster.run(1500)
    observer = cluster.nodes[4]
    assert observer.snapshot == snapshot and observer.log_start == 31 and cluster.disks[4].snapshot == snapshot
    assert cluster.applied[4] == cluster.applied[leader] and cluster.applied[4][-1] == "record 29"
    offset = cluster.propose("after the snapshot")
    cluster.run(200)
    assert observer.entry(offset).data == "after the snapshot" and cluster.applied[4][offset] == "after the snapshot"


def test_a_leader_that_resigns_is_replaced_at_once_by_the_most_caught_up_voter():
    cluster = Cluster()
    cluster.run(1100)
    old = cluster.leader()
    cluster.propose("before the handover")
    cluster.run(100)
    cluster.carry_out(old, cluster.nodes[old].resign(cluster.now))  # a controlled shutdown
    assert cluster.leader() is None
    cluster.run(50)  # far below the fetch timeout (1000 ms) the followers would otherwise wait
    new = cluster.leader()
    assert new not in (None, old) and cluster.nodes[new].epoch == 2
    cluster.run(100)
    assert isinstance(cluster.nodes[old].role, Follower) and cluster.nodes[old].role.leader == new


def test_a_commit_answer_overtaken_by_the_leaders_resignation_still_counts():
    """Three voters, one dead. The leader commits an entry on the other's fetch and resigns at once (a
    controlled shutdown); its EndQuorumEpoch, on the other connection, overtakes the fetch answer that
    carries the new high watermark, and the voter leads a new epoch (with the old leader's vote) when
    the answer comes; then the old leader is gone. The last voter must still know the entry committed: alone, it can never commit an
    entry of its own epoch to learn it otherwise."""
    cluster = Cluster()
    cluster.run(1100)
    old = cluster.leader()
    follower, dead = sorted(cluster.voters - {old})
    cluster.crash(dead)
    offset = cluster.propose("the handover")
    for _ in range(500):  # until the leader has counted the follower's fetch
        if cluster.nodes[old].high_watermark > offset:
            break
        cluster.run(1)
    assert cluster.nodes[old].high_watermark > offset and cluster.nodes[follower].high_watermark <= offset
    [answer] = [m for m in cluster.in_flight if m[2] == follower and type(m[3]).__name__ == "FetchResponse"]
    cluster.in_flight.remove(answer)  # held back on its connection
    cluster.carry_out(old, cluster.nodes[old].resign(cluster.now))
    for _ in range(500):  # the resignation arrives; the follower campaigns and the old leader votes for it
        cluster.run(1)
        if isinstance(cluster.nodes[follower].role, Leader):
            break
    assert cluster.leader() == follower and cluster.nodes[follower].high_watermark <= offset
    cluster.in_flight.append((cluster.now + 1, *answer[1:]))  # the answer of the older epoch comes at last
    cluster.run(1)
    cluster.crash(old)
    cluster.run(3000)
    assert cluster.nodes[follower].high_watermark > offset
    assert "the handover" in cluster.applied[follower]
