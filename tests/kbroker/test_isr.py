"""kbroker/replication/isr.py's choice of ISR changes, on a real partition log with a stand-in broker; the
partition and the manager share a FakeClock, moved by the test."""

from types import SimpleNamespace

import pytest
import trio

from kbroker.log.clock import FakeClock
from kbroker.replication.flusher import Flusher
from kbroker.replication.isr import IsrManager
from kbroker.replication.replica import Partition
from kbroker.log.checkpoint import LeaderEpochCache, LeaderEpochCheckpointFile
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from kbroker.wire.records import Record, build_batch

pytestmark = pytest.mark.trio

LAG_MAX_MS = 2000


def leader_of_three(tmp_path, flusher, clock: FakeClock) -> tuple[IsrManager, Partition, SimpleNamespace]:
    log = Log.open(str(tmp_path / "p-0"), LogConfig(), now_ms=clock.wall_ms())
    log.leader_epochs = LeaderEpochCache(LeaderEpochCheckpointFile(str(tmp_path / "p-0" / "leader-epoch-checkpoint")))
    partition = Partition("p", 0, log, flusher, 0, node_id=1, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1,
                          clock=clock)
    state = SimpleNamespace(leader=1, leader_epoch=0, replicas=(1, 2, 3), isr=(1, 2, 3))
    broker = SimpleNamespace(
        node_id=1, replicas=lambda: [partition], config=SimpleNamespace(get=lambda name: LAG_MAX_MS),
        image=SimpleNamespace(live_brokers=[SimpleNamespace(node_id=n) for n in (1, 2, 3)],
                              topics={"p": SimpleNamespace(partitions=[state])}))
    return IsrManager(broker, clock), partition, state


async def append_durably(partition: Partition, count: int) -> int:
    for _ in range(count):
        last = partition.append(bytearray(build_batch([Record(value=b"v")]))).last_offset
    with trio.fail_after(10):
        await partition.wait_durable(last)
    return last


async def test_followers_that_stop_fetching_leave_the_isr_though_the_high_watermark_waits_for_them(tmp_path):
    """They sit at the high watermark only because it waits for them: that must not keep them in."""
    flusher, clock = Flusher(), FakeClock()
    manager, partition, _ = leader_of_three(tmp_path, flusher, clock)
    await append_durably(partition, 3)
    clock.advance(1000)
    partition.follower_fetched(2, 3)
    partition.follower_fetched(3, 3)
    assert partition.high_watermark == 3
    await append_durably(partition, 1)  # offset 3 waits for both followers, which fetch no more
    clock.advance(LAG_MAX_MS)
    assert manager.changes(clock.monotonic_ms()) == []
    clock.advance(1)
    [(_, _, isr)] = manager.changes(clock.monotonic_ms())
    assert isr == (1,)
    flusher.stop()


async def test_a_follower_that_never_fetches_has_the_lag_time_from_the_leaderships_start(tmp_path):
    flusher, clock = Flusher(), FakeClock()
    manager, partition, _ = leader_of_three(tmp_path, flusher, clock)
    await append_durably(partition, 1)
    clock.advance(LAG_MAX_MS - 1)
    partition.follower_fetched(2, 1)  # 2 keeps up; 3 never shows up
    clock.advance(1)
    assert manager.changes(clock.monotonic_ms()) == []
    clock.advance(1)
    [(_, _, isr)] = manager.changes(clock.monotonic_ms())
    assert isr == (1, 2)
    flusher.stop()


async def test_a_follower_out_of_the_isr_rejoins_once_its_fetches_reach_the_high_watermark(tmp_path):
    flusher, clock = Flusher(), FakeClock()
    manager, partition, state = leader_of_three(tmp_path, flusher, clock)
    state.isr = (1, 2)
    partition.update(1, 0, (1, 2, 3), (1, 2))
    await append_durably(partition, 4)
    clock.advance(5000)
    partition.follower_fetched(2, 4)
    partition.follower_fetched(3, 2)
    assert partition.high_watermark == 4 and manager.changes(clock.monotonic_ms()) == []  # 3 is behind
    clock.advance(100)
    partition.follower_fetched(3, 4)
    [(_, _, isr)] = manager.changes(clock.monotonic_ms())
    assert isr == (1, 2, 3)
    flusher.stop()


async def test_two_stalled_followers_are_not_swapped_in_and_out_of_the_isr(tmp_path):
    """Both followers stop fetching at the high watermark, one found lagging a little before the other.
    The first out sits at the high watermark the second holds there: it must not be taken back in
    for it (the leader asked for [1, 2], then [1, 3], then [1, 2]... and an acks=all produce waited
    for good). It rejoins once it fetches again."""
    flusher, clock = Flusher(), FakeClock()
    manager, partition, state = leader_of_three(tmp_path, flusher, clock)
    await append_durably(partition, 3)
    clock.advance(1000)
    partition.follower_fetched(3, 3)
    clock.advance(500)
    partition.follower_fetched(2, 3)
    await append_durably(partition, 1)  # offset 3 waits for both followers, which fetch no more
    clock.advance(LAG_MAX_MS + 1 - 500)
    [(_, _, isr)] = manager.changes(clock.monotonic_ms())
    assert isr == (1, 2)  # 3 is found first
    state.isr = isr
    partition.update(1, 0, (1, 2, 3), isr)
    assert partition.high_watermark == 3  # 2 still holds it, and 3 sits there
    clock.advance(1000)
    [(_, _, isr)] = manager.changes(clock.monotonic_ms())
    assert isr == (1,)  # 2 leaves; 3, which fetches no more, is not taken back
    state.isr = isr
    partition.update(1, 0, (1, 2, 3), isr)
    assert partition.high_watermark == 4
    clock.advance(100)
    partition.follower_fetched(3, 4)  # healed: 3 fetches from the high watermark
    [(_, _, isr)] = manager.changes(clock.monotonic_ms())
    assert isr == (1, 3)
    flusher.stop()
