"""raft/node.py under the deterministic simulator (tests/raft/simulator.py): many seeds, faults on.

500 seeds run by default (a few seconds); ``KBTEST_RAFT_SEEDS=20000`` runs more,
``KBTEST_RAFT_SEED=N`` replays one. Each seed: 3 voters and an observer (5 voters
for a fifth of the seeds), 8 s of dropped, duplicated, delayed and reordered
messages, partitions and crashes, then healing and a liveness bound.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from kbroker.raft.messages import VoteResponse
from kbroker.raft.node import RaftNode
from tests.raft.simulator import InvariantBroken, Simulation

SEEDS = int(os.environ.get("KBTEST_RAFT_SEEDS", "500"))


def simulate(seed: int) -> Counter:
    voters = 5 if seed % 5 == 4 else 3
    return Simulation(seed, voters=voters, observers=1).run()


def test_no_invariant_breaks_and_the_quorum_recovers_on_every_seed():
    if "KBTEST_RAFT_SEED" in os.environ:
        seeds = [int(os.environ["KBTEST_RAFT_SEED"])]
    else:
        seeds = range(SEEDS)
    totals = Counter()
    longest_recovery = 0
    for seed in seeds:
        counts = simulate(seed)  # raises InvariantBroken naming the seed
        longest_recovery = max(longest_recovery, counts.pop("liveness ms"))
        totals.update(counts)
    print(f"\n{len(seeds)} seeds; faults: " + ", ".join(f"{name} {count}" for name, count in sorted(totals.items()))
          + f"; longest time to commit after healing {longest_recovery} ms")
    assert totals["crashes"] > 0 and totals["partitions"] > 0 and totals["messages dropped"] > 0


def test_a_failing_seed_replays_the_same_way():
    first, second = Simulation(12345), Simulation(12345)
    assert first.run() == second.run()
    assert first.committed == second.committed


def test_the_checker_catches_a_node_that_votes_twice(monkeypatch):
    """A broken vote rule (any request granted) must be caught as two leaders in one epoch."""
    original = RaftNode._on_vote_request

    def careless(self, source, request, now_ms, ready):
        original(self, source, request, now_ms, ready)
        if not request.pre_vote and ready.messages and isinstance(ready.messages[-1][1], VoteResponse):
            destination, response = ready.messages.pop()
            ready.send(destination, VoteResponse(response.epoch, True))

    monkeypatch.setattr(RaftNode, "_on_vote_request", careless)
    import kbroker.raft.node
    monkeypatch.setitem(kbroker.raft.node._HANDLERS, kbroker.raft.node.VoteRequest, careless)
    with pytest.raises(InvariantBroken, match="two leaders|lacks committed|committed"):
        for seed in range(200):
            simulate(seed)


def test_the_checker_catches_a_leader_that_commits_without_a_majority(monkeypatch):
    import kbroker.raft.node

    def eager(self, ready):
        if self.end_offset > self.high_watermark:
            self.high_watermark = self.end_offset
            ready.high_watermark = self.end_offset

    monkeypatch.setattr(kbroker.raft.node.RaftNode, "_advance_high_watermark", eager)
    with pytest.raises(InvariantBroken):
        for seed in range(200):
            simulate(seed)


def test_the_checker_catches_a_leader_that_serves_entries_its_snapshot_replaced(monkeypatch):
    """Without KIP-630's rule (fetch below the log start: send the snapshot), a lagging follower is
    served whatever lies at the wrong place in the leader's shortened log, or the leader reads
    before the start of its own log."""
    import kbroker.raft.node

    monkeypatch.setattr(kbroker.raft.node.RaftNode, "_needs_snapshot", lambda self, offset, epoch: False)
    with pytest.raises((InvariantBroken, IndexError)):
        for seed in range(200):
            simulate(seed)
