"""kbroker/replication/replica.py on a real log: the leader's high watermark over the ISR, Kafka's caught-up
rule, and what the partition reads from its clock (a FakeClock here: no sleeps, no patched state)."""

import pytest
import trio
import trio.testing

from kbroker.log.clock import FakeClock
from kbroker.replication.flusher import Flusher
from kbroker.replication.replica import Partition
from kbroker.log.config import LogConfig
from kbroker.log.deposed import NotLeaderForEpoch
from kbroker.log.partition_log import Log
from kbroker.wire.records import LOG_APPEND_TIME, Record, build_batch, iter_batches

pytestmark = pytest.mark.trio


def leader_of_three(tmp_path, flusher, clock: FakeClock | None = None, **config) -> Partition:
    clock = clock or FakeClock()
    log = Log.open(str(tmp_path / "p-0"), LogConfig(**config), now_ms=clock.wall_ms())
    return Partition("p", 0, log, flusher, 0, node_id=1, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, clock=clock)


def append(partition: Partition, count: int) -> int:
    last = None
    for _ in range(count):
        last = partition.append(bytearray(build_batch([Record(value=b"v")]))).last_offset
    return last


async def test_the_high_watermark_waits_for_every_in_sync_follower(tmp_path):
    flusher = Flusher()
    partition = leader_of_three(tmp_path, flusher)
    last = append(partition, 5)
    with trio.fail_after(10):
        await partition.wait_durable(last)
    assert partition.high_watermark == 0  # durable here, but no follower has it
    partition.follower_fetched(2, 5)
    assert partition.high_watermark == 0  # follower 3 is in the ISR too
    partition.follower_fetched(3, 3)
    assert partition.high_watermark == 3
    partition.update(1, 0, (1, 2, 3), (1, 2))  # 3 left the ISR
    assert partition.high_watermark == 5
    with trio.fail_after(10):
        await partition.wait_committed(last, 0)
    flusher.stop()


async def test_a_follower_behind_a_busy_leader_still_counts_as_caught_up(tmp_path):
    flusher = Flusher()
    clock = FakeClock(monotonic_ms=1000)
    partition = leader_of_three(tmp_path, flusher, clock)
    append(partition, 3)
    clock.advance(500)
    partition.follower_fetched(2, 0)  # the leader's end is 3 at this fetch, at 1500
    append(partition, 3)
    clock.advance(500)
    partition.follower_fetched(2, 3)  # behind the end (6), but at the end of its last fetch
    assert partition.caught_up_ms[2] == 1500
    clock.advance(1000)
    partition.follower_fetched(2, 4)  # not at the 6 of its last fetch: no progress counted
    assert partition.caught_up_ms[2] == 1500
    clock.advance(1000)
    partition.follower_fetched(2, 6)
    assert partition.caught_up_ms[2] == 4000
    flusher.stop()


async def test_each_leadership_gives_every_follower_a_fresh_start_on_the_partitions_clock(tmp_path):
    """replica.lag.time.max.ms counts from when this replica became leader, on its own clock."""
    flusher = Flusher()
    clock = FakeClock(monotonic_ms=7000)
    partition = leader_of_three(tmp_path, flusher, clock)
    assert partition.caught_up_ms == {2: 7000, 3: 7000}
    clock.advance(30_000)
    partition.follower_fetched(2, 0)  # at the end: caught up now
    assert partition.caught_up_ms == {2: 37_000, 3: 7000}
    clock.advance(1000)
    partition.update(1, 1, (1, 2, 3), (1, 2, 3))  # a new epoch: a new leadership
    assert partition.caught_up_ms == {2: 38_000, 3: 38_000}
    clock.set_wall_ms(0)  # the host's clock set back: lag is measured on the monotonic reading
    partition.follower_fetched(3, 0)
    assert partition.caught_up_ms[3] == 38_000
    flusher.stop()


async def test_log_append_time_is_the_partitions_wall_clock(tmp_path):
    flusher = Flusher()
    clock = FakeClock(wall_ms=1_800_000_000_000)
    partition = leader_of_three(tmp_path, flusher, clock, message_timestamp_type="LogAppendTime")
    first = partition.append(bytearray(build_batch([Record(value=b"v")], base_timestamp=5)))
    clock.advance(2500)
    second = partition.append(bytearray(build_batch([Record(value=b"v")], base_timestamp=5)))
    assert (first.log_append_time, second.log_append_time) == (1_800_000_000_000, 1_800_000_002_500)
    stored = partition.log.read_bytes(0, 10_000)
    assert [(header.timestamp_type, header.max_timestamp) for _, header in iter_batches(stored)] == [
        (LOG_APPEND_TIME, 1_800_000_000_000), (LOG_APPEND_TIME, 1_800_000_002_500)]
    flusher.stop()


async def test_segment_ms_rolls_the_log_by_the_partitions_wall_clock(tmp_path):
    """Leader and follower appends alike: a segment older than segment.ms rolls at the next append."""
    flusher = Flusher()
    clock = FakeClock()
    partition = leader_of_three(tmp_path, flusher, clock, segment_ms=60_000)
    append(partition, 1)
    clock.advance(59_999)
    append(partition, 1)
    assert [segment.base_offset for segment in partition.log.segments] == [0]
    clock.advance(1)
    append(partition, 1)
    assert [segment.base_offset for segment in partition.log.segments] == [0, 2]
    clock.advance(60_000)
    partition.append_replicated(bytearray(build_batch([Record(value=b"v")], base_offset=3)))
    assert [segment.base_offset for segment in partition.log.segments] == [0, 2, 3]
    flusher.stop()


async def test_a_deposed_leaders_waiting_writes_fail_at_once_and_never_succeed_later(tmp_path):
    """Issue 44: the leader is cut off, another replica leads, and this one truncates to it and follows its
    high watermark past the offsets it threw away: the writes that waited are answered NOT_LEADER, never OK."""
    flusher = Flusher()
    partition = leader_of_three(tmp_path, flusher)
    with trio.fail_after(10):
        await partition.wait_durable(append(partition, 2))
    partition.follower_fetched(2, 2)
    partition.follower_fetched(3, 2)
    assert partition.high_watermark == 2
    appended = partition.append(bytearray(build_batch([Record(value=b"lost")])))
    assert (appended.last_offset, appended.leader_epoch) == (2, 0)
    outcome = []

    async def produce():
        try:
            await partition.wait_committed(appended.last_offset, appended.leader_epoch)
            outcome.append("committed")
        except NotLeaderForEpoch as error:
            outcome.append(error)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            await partition.wait_durable(appended.last_offset)
            await trio.testing.wait_all_tasks_blocked()
            assert outcome == []  # durable here, not on the ISR
            partition.update(2, 1, (1, 2, 3), (2, 3))  # replica 2 leads in epoch 1
        assert len(outcome) == 1 and isinstance(outcome[0], NotLeaderForEpoch)
    partition.log.truncate_to(2)  # the new leader's log, which took other writes at 2 and on
    partition.truncated()
    partition.append_replicated(bytearray(build_batch([Record(value=b"other")], base_offset=2, partition_leader_epoch=1)))
    partition.follow_high_watermark(3)
    assert partition.high_watermark == 3
    with pytest.raises(NotLeaderForEpoch):
        partition.committed_under(appended.last_offset, appended.leader_epoch)
    with pytest.raises(NotLeaderForEpoch):  # a wait that starts late fails too
        await partition.wait_committed(appended.last_offset, appended.leader_epoch)
    flusher.stop()


async def test_a_new_epoch_on_the_same_leader_ends_the_waits_of_the_old_one(tmp_path):
    flusher = Flusher()
    partition = leader_of_three(tmp_path, flusher)
    appended = partition.append(bytearray(build_batch([Record(value=b"v")])))
    partition.update(1, 1, (1, 2, 3), (1, 2, 3))  # led again, in a new epoch: the log may have been cut meanwhile
    with trio.fail_after(10), pytest.raises(NotLeaderForEpoch):
        await partition.wait_committed(appended.last_offset, appended.leader_epoch)
    later = partition.append(bytearray(build_batch([Record(value=b"w")])))
    assert later.leader_epoch == 1
    with trio.fail_after(10):
        await partition.wait_durable(later.last_offset)
    partition.follower_fetched(2, 2)
    partition.follower_fetched(3, 2)
    with trio.fail_after(10):
        await partition.wait_committed(later.last_offset, later.leader_epoch)
    flusher.stop()


async def test_a_write_committed_before_the_leader_moved_is_still_a_success(tmp_path):
    """The high watermark passed the write while this replica led; its waiter runs after the change."""
    flusher = Flusher()
    partition = leader_of_three(tmp_path, flusher)
    appended = partition.append(bytearray(build_batch([Record(value=b"v")])))
    with trio.fail_after(10):
        await partition.wait_durable(appended.last_offset)
    partition.follower_fetched(2, 1)
    partition.follower_fetched(3, 1)
    partition.update(2, 1, (1, 2, 3), (1, 2, 3))
    assert partition.committed_under(appended.last_offset, appended.leader_epoch)
    with trio.fail_after(10):
        await partition.wait_committed(appended.last_offset, appended.leader_epoch)
    flusher.stop()
