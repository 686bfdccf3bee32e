"""kbroker/replication/replica.py on a real log: the leader's high watermark over the ISR, and Kafka's caught-up rule."""

import pytest
import trio

from kbroker.replication.flusher import Flusher
from kbroker.replication.replica import Partition
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from kbroker.wire.records import Record, build_batch

pytestmark = pytest.mark.trio


def leader_of_three(tmp_path, flusher) -> Partition:
    log = Log.open(str(tmp_path / "p-0"), LogConfig())
    partition = Partition("p", 0, log, flusher, 0, node_id=1, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
    partition.caught_up_ms = {}  # the test's own clock from here
    return partition


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
        await partition.wait_committed(last)
    flusher.stop()


async def test_a_follower_behind_a_busy_leader_still_counts_as_caught_up(tmp_path):
    flusher = Flusher()
    partition = leader_of_three(tmp_path, flusher)
    append(partition, 3)
    partition.follower_fetched(2, 0, now_ms=1000)  # the leader's end is 3 at this fetch
    append(partition, 3)
    partition.follower_fetched(2, 3, now_ms=2000)  # behind the end (6), but at the end of its last fetch
    assert partition.caught_up_ms[2] == 1000
    partition.follower_fetched(2, 4, now_ms=3000)  # not at the 6 of its last fetch: no progress counted
    assert partition.caught_up_ms[2] == 1000
    partition.follower_fetched(2, 6, now_ms=4000)
    assert partition.caught_up_ms[2] == 4000
    flusher.stop()
