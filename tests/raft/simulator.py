"""A deterministic simulator for raft/node.py: voters and observers on a faulty network.

Everything comes from one seeded ``random.Random`` and a virtual clock, so a
failing seed replays exactly (``Simulation(seed).run()``). Events are message
deliveries, node ticks at their deadlines, client proposals and the nemesis:

- the network delays (reordering), drops and duplicates messages, and cuts
  links (one node isolated, or the nodes split in two);
- nodes crash, losing what they had not persisted: the crash may come before
  the driver carried out a Ready, which is then lost whole; they restart from
  their "disk" (quorum state, snapshot and log) after a while; an observer may
  lose its disk altogether (a voter may not: it would forget its vote);
- a leader resigns (EndQuorumEpoch, as before a shutdown);
- nodes take snapshots of the committed state every few dozen entries and drop
  the entries they cover, so that a lagging or wiped node fetches a snapshot.

After every step the invariants are checked; a broken one raises
``InvariantBroken`` naming the seed:

- at most one leader per epoch;
- committed entries never change or disappear (a node's log below its high
  watermark is the committed sequence; no truncation removes a committed entry);
- a leader's log holds every committed entry when it takes office;
- every node's applied sequence is a prefix of the committed sequence;
- a node's high watermark never moves backwards (within one life).

Then the network heals, crashed nodes restart, and liveness is checked: within a
bounded virtual time a leader exists and a new proposal commits on every voter.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from dataclasses import dataclass, field

from kbroker.raft.messages import Ready, Snapshot
from kbroker.raft.node import Leader, RaftConfig, RaftNode

CONFIG = RaftConfig(election_timeout_ms=500, fetch_timeout_ms=1000, fetch_interval_ms=50, request_timeout_ms=200,
                    max_fetch_entries=20, max_snapshot_chunk_bytes=200)
SNAPSHOT_EVERY = (10, 60)  # a node snapshots when this many committed entries (drawn at random) are in its log


def snapshot_of(entries: list) -> bytes:
    """The simulated state machine's state: every committed value, in order."""
    return repr([entry.data for entry in entries]).encode()


class InvariantBroken(AssertionError):
    pass


@dataclass
class Disk:
    epoch: int = 0
    voted_for: int | None = None
    snapshot: Snapshot | None = None
    log_start: int = 0
    log: list = field(default_factory=list)  # the entries from log_start on


@dataclass
class Faults:
    drop: float = 0.05
    duplicate: float = 0.03
    max_delay_ms: int = 40
    crash_before_persist: float = 0.002  # per Ready: the node dies before carrying it out
    nemesis_every_ms: tuple[int, int] = (300, 1500)


class Simulation:
    def __init__(self, seed: int, *, voters: int = 3, observers: int = 1, faults: Faults | None = Faults(),
                 fault_ms: int = 8000, liveness_ms: int = 15000) -> None:
        self.seed = seed
        self.random = random.Random(seed)
        self.voter_ids = frozenset(range(1, voters + 1))
        self.node_ids = list(range(1, voters + observers + 1))
        self.faults = faults
        self.fault_ms, self.liveness_ms = fault_ms, liveness_ms
        self.now = 0
        self.disks = {n: Disk() for n in self.node_ids}
        self.applied = {n: 0 for n in self.node_ids}  # how many committed entries each node has applied
        self.last_high_watermark = {n: 0 for n in self.node_ids}
        self.snapshot_after = {n: self.random.randint(*SNAPSHOT_EVERY) for n in self.node_ids}
        self.nodes: dict[int, RaftNode | None] = {n: self._start(n) for n in self.node_ids}
        self.events: list = []
        self.sequence = 0
        self.tick_at: dict[int, int] = {}
        self.cut: set[frozenset[int]] = set()
        self.committed: list = []
        self.leaders_by_epoch: dict[int, int] = {}
        self.leaders_checked: set[tuple[int, int]] = set()
        self.proposed = 0
        self.counts = Counter()
        self.healed = False
        for n in self.node_ids:
            self._schedule_tick(n)
        self._push(self.random.randint(50, 200), "propose")
        if faults is not None:
            self._push(self.random.randint(*faults.nemesis_every_ms), "nemesis")

    # -- running --------------------------------------------------------------------------------

    def run(self) -> Counter:
        """Faults for ``fault_ms``, then heal and prove liveness; the counts of what happened."""
        self._run_until(self.fault_ms)
        self.heal()
        deadline = self.now + self.liveness_ms
        probe = None
        while self.now < deadline:
            leader = self.leader()
            if leader is not None and probe is None:
                offset, ready = self.nodes[leader].propose(("probe", self.seed), self.now)
                if offset is not None:
                    probe = (leader, self.nodes[leader].epoch, offset)
                    self._carry_out(leader, ready)
            if probe is not None and all(self.nodes[v] is not None and self.nodes[v].high_watermark > probe[2]
                                         and len(self.committed) > probe[2]
                                         and self.committed[probe[2]].data == ("probe", self.seed)
                                         for v in self.voter_ids):
                self.counts["liveness ms"] = self.now - self.fault_ms
                return self.counts
            if probe is not None and (self.nodes[probe[0]] is None or self.nodes[probe[0]].epoch != probe[1]):
                probe = None  # that leader lost office before committing: propose again
            if not self._step():
                break
        raise InvariantBroken(f"seed {self.seed}: no progress {self.liveness_ms} ms after healing "
                              f"(leader {self.leader()}, committed {len(self.committed)})")

    def _run_until(self, until_ms: int) -> None:
        while self.events and self.events[0][0] <= until_ms:
            self._step()

    def _step(self) -> bool:
        if not self.events:
            return False
        when, _, kind, payload = heapq.heappop(self.events)
        self.now = max(self.now, when)
        getattr(self, f"_on_{kind}")(*payload)
        return True

    def _push(self, delay_ms: int, kind: str, *payload) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (self.now + delay_ms, self.sequence, kind, payload))

    # -- events ---------------------------------------------------------------------------------------

    def _on_tick(self, node_id: int, due: int) -> None:
        node = self.nodes[node_id]
        if node is None or self.tick_at.get(node_id) != due:
            return  # crashed, or re-armed since
        self._carry_out(node_id, node.tick(self.now))

    def _on_deliver(self, destination: int, source: int, message) -> None:
        node = self.nodes[destination]
        if node is None or frozenset((source, destination)) in self.cut:
            self.counts["messages lost"] += 1
            return
        ready = node.receive(source, message, self.now)
        if ready.snapshot is not None:
            self.counts["snapshots fetched"] += 1
        self._carry_out(destination, ready)

    def _on_propose(self) -> None:
        leader = self.leader()
        if leader is not None:
            self.proposed += 1
            offset, ready = self.nodes[leader].propose(("value", self.seed, self.proposed), self.now)
            self._carry_out(leader, ready)
        if not self.healed:
            self._push(self.random.randint(20, 150), "propose")

    def _on_nemesis(self) -> None:
        if self.healed:
            return
        choice = self.random.random()
        alive = [n for n in self.node_ids if self.nodes[n] is not None]
        if choice < 0.3 and len(alive) > 1:
            victim = self.random.choice(alive)
            self._crash(victim)
            if victim not in self.voter_ids and self.random.random() < 0.5:
                self.disks[victim] = Disk()  # an observer may lose its disk; it starts again from nothing
                self.counts["observer disks wiped"] += 1
        elif choice < 0.35 and self.leader() is not None:
            leader = self.leader()
            self._carry_out(leader, self.nodes[leader].resign(self.now))
            self.counts["leaders resigned"] += 1
        elif choice < 0.5:
            isolated = self.random.choice(self.node_ids)
            self.cut = {frozenset((isolated, other)) for other in self.node_ids if other != isolated}
            self.counts["partitions"] += 1
        elif choice < 0.65:
            shuffled = self.node_ids[:]
            self.random.shuffle(shuffled)
            half = len(shuffled) // 2
            self.cut = {frozenset((a, b)) for a in shuffled[:half] for b in shuffled[half:]}
            self.counts["partitions"] += 1
        else:
            self.cut = set()
        self._push(self.random.randint(*self.faults.nemesis_every_ms), "nemesis")

    def _on_restart(self, node_id: int) -> None:
        if self.nodes[node_id] is None:
            self.nodes[node_id] = self._start(node_id)
            self.counts["restarts"] += 1
            self._schedule_tick(node_id)

    def heal(self) -> None:
        self.healed = True
        self.cut = set()
        self.faults = None
        for node_id in self.node_ids:
            self._on_restart(node_id)

    # -- nodes and their drivers ------------------------------------------------------------------------

    def _start(self, node_id: int) -> RaftNode:
        disk = self.disks[node_id]
        self.applied[node_id] = 0  # the state machine is rebuilt from the start
        self.last_high_watermark[node_id] = 0
        assert disk.log_start == (disk.snapshot.id.end_offset if disk.snapshot else 0)
        return RaftNode(node_id, self.voter_ids, CONFIG, random.Random(self.random.random()), epoch=disk.epoch,
                        voted_for=disk.voted_for, snapshot=disk.snapshot, log=disk.log, now_ms=self.now)

    def _crash(self, node_id: int) -> None:
        self.nodes[node_id] = None
        self.counts["crashes"] += 1
        self._push(self.random.randint(100, 2000), "restart", node_id)

    def _carry_out(self, node_id: int, ready: Ready) -> None:
        """The driver: persist, then send, then apply; or a crash that loses the Ready whole."""
        if self.faults is not None and ready and self.random.random() < self.faults.crash_before_persist:
            self.counts["crashes before persisting"] += 1
            self._crash(node_id)
            return
        node = self.nodes[node_id]
        disk = self.disks[node_id]
        if ready.quorum_state is not None:
            disk.epoch, disk.voted_for = ready.quorum_state
        if ready.snapshot is not None:
            end = ready.snapshot.id.end_offset
            if len(self.committed) < end or ready.snapshot.data != snapshot_of(self.committed[:end]):
                self._broken(f"node {node_id} keeps a snapshot to {end} that is not the committed state")
            disk.snapshot = ready.snapshot
            self.counts["snapshots"] += 1
        if ready.log_start is not None:
            disk.log = disk.log[ready.log_start - disk.log_start:]
            disk.log_start = ready.log_start
        if ready.truncate_to is not None:
            for offset in range(ready.truncate_to, min(disk.log_start + len(disk.log), len(self.committed))):
                if disk.log[offset - disk.log_start] == self.committed[offset]:
                    self._broken(f"node {node_id} truncated committed offset {offset}")
            del disk.log[ready.truncate_to - disk.log_start:]
        if ready.append:
            disk.log.extend(ready.append)
        if (disk.log_start, disk.log, disk.snapshot) != (node.log_start, node.log, node.snapshot):
            self._broken(f"node {node_id}: the Ready does not bring its disk to its log")
        for destination, message in ready.messages or ():
            self._send(node_id, destination, message)
        self._check(node_id, node)
        self._schedule_tick(node_id)
        if node.high_watermark - node.log_start >= self.snapshot_after[node_id]:
            self.snapshot_after[node_id] = self.random.randint(*SNAPSHOT_EVERY)
            end = node.high_watermark
            self._carry_out(node_id, node.take_snapshot(end, snapshot_of(self.committed[:end])))

    def _send(self, source: int, destination: int, message) -> None:
        self.counts["messages"] += 1
        faults = self.faults
        if faults is not None and self.random.random() < faults.drop:
            self.counts["messages dropped"] += 1
            return
        copies = 2 if faults is not None and self.random.random() < faults.duplicate else 1
        self.counts["messages duplicated"] += copies - 1
        for _ in range(copies):
            delay = self.random.randint(1, faults.max_delay_ms if faults is not None else 5)
            self._push(delay, "deliver", destination, source, message)

    def _schedule_tick(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node is None:
            return
        due = max(node.next_deadline_ms(), self.now)
        if self.tick_at.get(node_id) != due:
            self.tick_at[node_id] = due
            self._push(due - self.now, "tick", node_id, due)

    # -- invariants ----------------------------------------------------------------------------------------

    def _check(self, node_id: int, node: RaftNode) -> None:
        if isinstance(node.role, Leader):
            holder = self.leaders_by_epoch.setdefault(node.epoch, node_id)
            if holder != node_id:
                self._broken(f"two leaders in epoch {node.epoch}: {holder} and {node_id}")
            if (node.epoch, node_id) not in self.leaders_checked:
                self.leaders_checked.add((node.epoch, node_id))
                start = node.log_start  # below it, the snapshot, checked when it was kept
                if node.entries(start, len(self.committed)) != self.committed[start:]:
                    self._broken(f"leader {node_id} of epoch {node.epoch} lacks committed entries")
        high_watermark = node.high_watermark
        if high_watermark < self.last_high_watermark[node_id]:
            self._broken(f"node {node_id}'s high watermark went back from "
                         f"{self.last_high_watermark[node_id]} to {high_watermark}")
        for offset in range(max(self.last_high_watermark[node_id], node.log_start), high_watermark):
            if offset < len(self.committed):
                if node.entry(offset) != self.committed[offset]:
                    self._broken(f"node {node_id} committed {node.entry(offset)} at {offset}, "
                                 f"another committed {self.committed[offset]}")
            else:
                self.committed.append(node.entry(offset))
        self.last_high_watermark[node_id] = high_watermark
        # The driver applies what is committed; each entry was just checked against the committed
        # sequence, so every node's applied sequence is a prefix of it.
        self.applied[node_id] = high_watermark

    def _broken(self, what: str) -> None:
        raise InvariantBroken(f"seed {self.seed} at {self.now} ms: {what}")

    def leader(self) -> int | None:
        """The alive leader of the highest epoch, if any."""
        leaders = [(node.epoch, n) for n, node in self.nodes.items() if node is not None and isinstance(node.role, Leader)]
        return max(leaders)[1] if leaders else None
