"""The trio driver of a Raft node: its clock, its disk and its network.

One task owns the node. It takes every input waiting (messages from peers,
requests handed in by the server, proposals), lets the node handle them and
tick, then carries out the Readies in the order the core asks: write them all
to the store and fsync once in a worker thread (group commit), then send,
answer and apply. A vote or an append is therefore never acknowledged before it
is on disk.

Requests to other voters go out as Kafka requests (raft/codec.py) on two
connections per peer, one for fetches (which the leader may hold for up to
``FETCH_MAX_WAIT_MS`` when there is nothing new) and one for the rest. A
request that fails or times out is dropped: the node's own timers ask again.

The state machine (the controller's metadata) is given committed entries in
order, and a snapshot when the node installs one::

    class StateMachine(Protocol):
        def load_snapshot(self, data: bytes) -> None: ...
        def apply(self, offset: int, data: bytes) -> None: ...
        def snapshot(self) -> bytes: ...  # the state after every applied entry
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass

import trio

from kbroker.raft import codec
from kbroker.raft.messages import (FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, Ready,
                           VoteRequest, VoteResponse)
from kbroker.raft.node import LEADER_CHANGE, Leader, RaftConfig, RaftNode
from kbroker.raft.store import RaftStore
from kbroker.wire import DecodeError
from kbroker.wire.frame import decode_response, encode_request, read_frame

logger = logging.getLogger("kbroker.raft")

_ANSWERS = {VoteRequest: VoteResponse, FetchRequest: FetchResponse, FetchSnapshotRequest: FetchSnapshotResponse}
SNAPSHOT_FLOOR = 1024**2  # entries' bytes below which a start replays them rather than a snapshot being taken
_PEER_QUEUE = 64  # messages waiting for one connection to a peer; more are dropped (the core asks again)


class NotLeader(Exception):
    """A proposal made, or lost, while this node does not lead: the caller retries at the leader."""

    def __init__(self, leader: int | None) -> None:
        super().__init__(f"not the quorum leader (the leader is {leader})")
        self.leader = leader


@dataclass
class _Slot:
    """Where the loop leaves the answer to one input once its Ready is durable."""

    done: trio.Event
    value: object = None


class RaftDriver:
    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]], store: RaftStore, state_machine, *,
                 cluster_id: str = "", config: RaftConfig | None = None, snapshot_bytes: int = 20 * 1024**2,
                 rng: random.Random | None = None, connect=trio.open_tcp_stream) -> None:
        self.node_id = node_id
        self.connect = connect  # (host, port) -> a stream to a voter's listener, secured as it wants
        self.voters = dict(voters)
        self.store = store
        self.state_machine = state_machine
        self.cluster_id = cluster_id
        self.snapshot_bytes = snapshot_bytes  # applied entries' bytes after which a snapshot is taken
        epoch, voted_for, snapshot, entries = store.load()
        self.node = RaftNode(node_id, frozenset(voters), config or RaftConfig(), rng or random.Random(), epoch=epoch,
                             voted_for=voted_for, snapshot=snapshot, log=entries, now_ms=self.now_ms())
        self.applied = 0  # entries below this offset are in the state machine
        self.bytes_since_snapshot = 0
        if snapshot is not None:
            state_machine.load_snapshot(snapshot.data)
            self.applied = snapshot.id.end_offset
        self._inbox_send, self._inbox = trio.open_memory_channel(math.inf)
        self._peers: dict[tuple[int, str], trio.MemorySendChannel] = {}
        self.changed = trio.Event()  # set (and replaced) whenever the log or the high watermark moves
        self._waiters: dict[int, list[tuple[int, _Slot]]] = {}  # offset -> (epoch, slot) of proposals
        self._told_high_watermark: dict[int, int] = {}  # leader: the one each voter's last fetch was answered with

    @staticmethod
    def now_ms() -> int:
        return int(time.monotonic() * 1000)

    # -- what the server and the controller call ----------------------------------------------------

    async def request(self, source: int, message) -> object | None:
        """A peer's request: the node's answer once its effects are durable (None: acknowledged)."""
        answer = await self._submit(("receive", source, message))
        if nothing_new(answer, self._told_high_watermark.get(source)) and isinstance(self.node.role, Leader):
            # Nothing new: hold the fetch until something is (long polling), then answer afresh.
            with trio.move_on_after(codec.FETCH_MAX_WAIT_MS / 1000):
                await self.changed.wait()
                answer = await self._submit(("receive", source, message))
        if isinstance(answer, FetchResponse) and not answer.not_leader:
            self._told_high_watermark[source] = answer.high_watermark
        return answer

    async def propose(self, data: bytes) -> int:
        """Append ``data`` (one change) and wait until it is committed: its offset. NotLeader if this node
        does not lead, or stopped leading before the change was committed."""
        offset, slot = await self._submit(("propose", data))
        if offset is None:
            raise NotLeader(self.node.leader)
        await slot.done.wait()
        if slot.value is not True:
            raise NotLeader(self.node.leader)
        return offset

    async def resign(self) -> None:
        await self._submit(("resign",))

    def describe(self) -> dict:
        """The quorum as DescribeQuorum shows it."""
        node = self.node
        role = node.role
        to_wall_clock = int(time.time() * 1000) - self.now_ms()
        voters = []
        for voter in sorted(node.voters):
            if voter == self.node_id:
                end, fetched = node.end_offset, int(time.time() * 1000)
            elif isinstance(role, Leader):
                end, fetched = role.end_offsets.get(voter, -1), role.last_fetch.get(voter, -1) + to_wall_clock
            else:
                end, fetched = -1, -1
            voters.append((voter, end, fetched))
        observers = [(observer, end, role.last_fetch.get(observer, -1) + to_wall_clock)
                     for observer, end in sorted(role.observer_end_offsets.items())] if isinstance(role, Leader) else []
        return {"leader": node.leader, "epoch": node.epoch, "high_watermark": node.high_watermark, "voters": voters,
                "observers": observers}

    # -- the loop ---------------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for voter in sorted(self.voters):
                if voter != self.node_id:
                    for lane in ("fetch", "control"):
                        send, receive = trio.open_memory_channel(_PEER_QUEUE)
                        self._peers[(voter, lane)] = send
                        nursery.start_soon(self._peer, voter, receive)
            task_status.started()
            await self._loop()

    async def _submit(self, item: tuple):
        slot = _Slot(trio.Event())
        self._inbox_send.send_nowait((*item, slot))
        await slot.done.wait()
        return slot.value

    async def _loop(self) -> None:
        while True:
            wait_ms = self.node.next_deadline_ms() - self.now_ms()
            work = []
            with trio.move_on_after(max(wait_ms, 0) / 1000):
                work.append(await self._inbox.receive())
            while True:
                try:
                    work.append(self._inbox.receive_nowait())
                except trio.WouldBlock:
                    break
            await self._step(work)

    async def _step(self, work: list[tuple]) -> None:
        node = self.node
        readies: list[Ready] = []
        answers: list[tuple[_Slot, object]] = []
        for item in work:
            now = self.now_ms()
            kind, slot = item[0], item[-1]
            if kind == "receive":
                source, message = item[1], item[2]
                ready = node.receive(source, message, now)
                answers.append((slot, _take_answer(ready, source, message)))
            elif kind == "propose":
                offset, ready = node.propose(item[1], now)
                committed = _Slot(trio.Event())  # waited on before this step applies: a quorum of one commits now
                if offset is not None:
                    self._waiters.setdefault(offset, []).append((node.epoch, committed))
                answers.append((slot, (offset, committed)))
            elif kind == "resign":
                ready = node.resign(now)
                answers.append((slot, None))
            else:
                raise ValueError(kind)
            readies.append(ready)
        readies.append(node.tick(self.now_ms()))
        await self._carry_out(readies)
        for slot, value in answers:
            slot.value = value
            slot.done.set()

    async def _carry_out(self, readies: list[Ready]) -> None:
        if any(r.quorum_state is not None or r.snapshot is not None or r.log_start is not None
               or r.truncate_to is not None or r.append for r in readies):
            await trio.to_thread.run_sync(self.store.persist, readies)
        for ready in readies:
            for destination, message in ready.messages or ():
                self._send(destination, message)
        self._apply()
        self.changed.set()
        self.changed = trio.Event()
        snapshot = self._maybe_snapshot()
        if snapshot:
            await trio.to_thread.run_sync(self.store.persist, [snapshot])

    def _apply(self) -> None:
        node = self.node
        if self.applied < node.log_start:  # a snapshot fetched from the leader replaces the state
            self.state_machine.load_snapshot(node.snapshot.data)
            self.applied = node.log_start
            self.bytes_since_snapshot = 0
            for offset in [o for o in self._waiters if o < node.log_start]:
                for _, slot in self._waiters.pop(offset):
                    _finish(slot, None)  # cannot tell which change the snapshot holds: the caller retries
        for offset, entry in enumerate(node.entries(self.applied, node.high_watermark), self.applied):
            if entry.data is not LEADER_CHANGE:
                self.state_machine.apply(offset, entry.data)
                self.bytes_since_snapshot += len(entry.data)
            for epoch, slot in self._waiters.pop(offset, ()):
                _finish(slot, epoch == entry.epoch)
        self.applied = max(self.applied, node.high_watermark)
        if self._waiters and not isinstance(node.role, Leader):
            # Proposals this node made as leader may yet commit under another; if another entry
            # takes their offset, they fail then (above). Those past the log's end failed now.
            for offset in [o for o in self._waiters if o >= node.end_offset]:
                for _, slot in self._waiters.pop(offset):
                    _finish(slot, None)

    def _maybe_snapshot(self) -> Ready | None:
        """A snapshot once the entries applied since the last one outgrow it (they would take longer to
        replay at a start than it takes to load), or reach ``snapshot_bytes``, whichever comes first;
        never for less than SNAPSHOT_FLOOR bytes. A node that led 100,000 partitions writes 100,000
        leadership changes as it stops and again as it returns: a few MB a restart, each replayed."""
        node = self.node
        latest = len(node.snapshot.data) if node.snapshot is not None else 0
        due = min(self.snapshot_bytes, max(SNAPSHOT_FLOOR, latest))
        if self.bytes_since_snapshot < due or self.applied <= node.log_start:
            return None
        self.bytes_since_snapshot = 0
        return node.take_snapshot(self.applied, self.state_machine.snapshot())

    # -- the network ------------------------------------------------------------------------------------------

    def _send(self, destination: int, message) -> None:
        lane = "fetch" if isinstance(message, (FetchRequest, FetchSnapshotRequest)) else "control"
        channel = self._peers.get((destination, lane))
        if channel is None:
            return  # an answer to a request that came with no way back (cannot happen), or an unknown node
        try:
            channel.send_nowait(message)
        except trio.WouldBlock:
            pass

    async def _peer(self, destination: int, messages: trio.MemoryReceiveChannel) -> None:
        """Send requests to one voter, one at a time on one connection, and hand the answers in."""
        host, port = self.voters[destination]
        stream = None
        correlation_id = 0
        timeout = (self.node.config.request_timeout_ms + codec.FETCH_MAX_WAIT_MS) / 1000
        async for message in messages:
            correlation_id += 1
            key, version = codec.api_of(message)
            frame = encode_request(key, version, correlation_id, f"raft-{self.node_id}",
                                   codec.encode_request(message, self.cluster_id, destination))
            try:
                with trio.fail_after(timeout):
                    if stream is None:
                        stream = await self.connect(host, port)
                    await stream.send_all(frame)
                    body = await read_frame(stream)
                _, response = decode_response(key, version, body)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, DecodeError,
                    EOFError) as error:
                logger.debug("raft request to %d failed: %r", destination, error)
                if stream is not None:
                    await stream.aclose()
                    stream = None
                continue
            answer = codec.decode_response(message, response)
            if answer is not None:
                self._inbox_send.send_nowait(("receive", destination, answer, _Slot(trio.Event())))


def nothing_new(answer, told_high_watermark: int | None) -> bool:
    """A fetch answer worth holding back (long polling): no entries, no error, nothing to cut or fetch
    instead, and no high watermark the fetcher was not told already. An answer that says entries are now
    committed goes at once: this fetch may be what committed them, and a leader that stops right after
    (a clean shutdown) would never send it, leaving the voter unaware of what committed."""
    return (isinstance(answer, FetchResponse) and not answer.entries and not answer.not_leader
            and answer.diverging_end_offset < 0 and answer.snapshot_id is None
            and answer.high_watermark == told_high_watermark)


def _take_answer(ready: Ready, source: int, message):
    """Take the node's answer to ``message`` out of ``ready``'s messages: it goes back on the request's
    connection, not as a request of its own."""
    answer_type = _ANSWERS.get(type(message))
    if answer_type is None or not ready.messages:
        return None
    for index, (destination, outgoing) in enumerate(ready.messages):
        if destination == source and isinstance(outgoing, answer_type):
            del ready.messages[index]
            return outgoing
    return None


def _finish(slot: _Slot, value) -> None:
    slot.value = value
    slot.done.set()

