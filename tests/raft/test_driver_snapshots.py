"""When a single-voter RaftDriver takes a snapshot: once the entries applied since the last one outgrow it (or
reach snapshot_bytes), never for less than SNAPSHOT_FLOOR; and a restart then loads it and replays only the rest."""

import pytest
import trio

from raft.driver import SNAPSHOT_FLOOR, RaftDriver
from raft.store import RaftStore

ENTRY = 64 * 1024
SNAPSHOT_BYTES = 20 * 1024**2


class Entries:
    """A state machine whose state is every entry applied, and whose snapshot is their concatenation
    (so a snapshot is as large as the entries it replaces, until it is shrunk by ``shrink``)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.shrink = False

    def apply(self, offset: int, data: bytes) -> None:
        self.data += data

    def snapshot(self) -> bytes:
        return bytes(self.data[-ENTRY:]) if self.shrink else bytes(self.data)

    def load_snapshot(self, data: bytes) -> None:
        self.data = bytearray(data)


def driver(directory, state: Entries) -> RaftDriver:
    return RaftDriver(1, {1: ("127.0.0.1", 1)}, RaftStore(str(directory)), state, snapshot_bytes=SNAPSHOT_BYTES)


async def led(raft: RaftDriver) -> None:
    """Wait until the sole voter has elected itself and committed its first entry."""
    with trio.fail_after(10):
        while raft.node.leader != 1 or raft.node.high_watermark < raft.node.end_offset:
            await trio.sleep(0.01)


async def propose(raft: RaftDriver, count: int, fill: bytes) -> None:
    for _ in range(count):
        with trio.fail_after(10):
            await raft.propose(fill * ENTRY)


@pytest.mark.trio
async def test_a_snapshot_comes_once_the_entries_since_the_last_outgrow_it(tmp_path):
    state = Entries()
    raft = driver(tmp_path, state)
    floor_entries = SNAPSHOT_FLOOR // ENTRY
    async with trio.open_nursery() as nursery:
        await nursery.start(raft.run)
        await led(raft)
        await propose(raft, floor_entries - 2, b"a")
        assert raft.node.snapshot is None  # under the floor: no snapshot yet
        await propose(raft, 2, b"b")
        first = raft.node.snapshot
        assert first is not None and len(first.data) >= SNAPSHOT_FLOOR - ENTRY
        state.shrink = True  # from now on a snapshot holds one entry's worth: the floor decides
        await propose(raft, floor_entries - 2, b"c")
        assert raft.node.snapshot is first  # the tail is smaller than the snapshot
        await propose(raft, 2, b"d")
        second = raft.node.snapshot
        assert second is not first and len(second.data) == ENTRY
        await propose(raft, floor_entries // 2, b"e")
        assert raft.node.snapshot is second  # a small snapshot still waits for the floor
        nursery.cancel_scope.cancel()

    restarted = Entries()
    again = driver(tmp_path, restarted)
    assert again.applied == second.id.end_offset  # loaded the snapshot ...
    async with trio.open_nursery() as nursery:
        await nursery.start(again.run)
        with trio.fail_after(10):
            while again.applied < raft.applied:  # ... and replays the entries after it
                await trio.sleep(0.01)
        assert bytes(restarted.data) == bytes(second.data) + b"e" * ENTRY * (floor_entries // 2)
        nursery.cancel_scope.cancel()
