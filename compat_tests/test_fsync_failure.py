"""fsync failure on a three-node cluster (issue 26): a follower's and then the leader's log directory start
failing every fsync under an acks=all idempotent producer. Each failing broker takes its directory offline,
asks to be fenced, and the controller moves its leaderships to other in-sync replicas; the producer goes on.
The failing brokers are then SIGKILLed and restarted with working disks (recovery from what is on disk),
and every acknowledged record is read back: compat_tests/replication_checker.py finds nothing lost.

The failure is injected (no device-mapper here): ``KBTEST_FSYNC_FAILS_IF`` names a file in each node's data
directory whose existence fails that broker's log fsyncs with EIO (kbroker/replication/flusher.py).
"""

from __future__ import annotations

import time

import pytest

from compat_tests.test_replication import FAST_FAILOVER, leader_of, start_writing, stop_and_check
from kbroker.replication.flusher import FAIL_FSYNC_ENV
from testkit.quorum_process import Quorum, until

pytestmark = pytest.mark.timeout(600)

FAILING = "fsync-fails"  # the file, in a node's data directory, whose existence fails its fsyncs


def assert_fetches_back_off(log: str) -> None:
    """The directory went offline, and followers answered KAFKA_STORAGE_ERROR asked again only after
    replica.fetch.backoff.ms (1 s), not in a tight loop."""
    lines = log.splitlines()
    offline = next(index for index, line in enumerate(lines) if "is offline" in line)
    refused = [line for line in lines[offline:] if "client_id=replica-" in line and "KAFKA_STORAGE_ERROR" in line]
    if refused:
        seconds = (stamp(lines[-1]) - stamp(lines[offline]))
        assert len(refused) <= 4 * (seconds + 1), (len(refused), seconds, refused[:5])


def stamp(line: str) -> float:
    """Seconds of a log line's time of day (``2026-11-25 19:01:24,297 INFO ...``)."""
    clock = line.split()[1]
    hours, minutes, seconds = clock.replace(",", ".").split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


@pytest.mark.slow
def test_failing_fsyncs_move_leadership_and_lose_no_acknowledged_write(tmp_path, monkeypatch):
    monkeypatch.setenv(FAIL_FSYNC_ENV, FAILING)
    cluster = Quorum(tmp_path, combined=True, overrides=FAST_FAILOVER)
    try:
        writer = start_writing(cluster)
        time.sleep(2)
        leader = cluster.node(leader_of(cluster, 0))
        follower = next(node for node in cluster.nodes if node is not leader)
        (follower.data_dir / FAILING).touch()
        time.sleep(3)  # fenced: out of every ISR, its leaderships elsewhere
        acknowledged_before = len(writer.acknowledged)
        until(lambda: len(writer.acknowledged) > acknowledged_before + 100, 30, "writes acknowledged without it")
        leader = cluster.node(leader_of(cluster, 0))
        assert leader is not follower
        (leader.data_dir / FAILING).touch()
        until(lambda: leader_of(cluster, 0) not in (-1, leader.node_id, follower.node_id), 30,
              "leadership of partition 0 moved to the healthy node")
        time.sleep(2)  # the healthy node's fetches to the failed leader, if any, back off meanwhile
        assert_fetches_back_off(leader.log_path.read_text())
        for node in (follower, leader):  # back with working disks: recovery from what is on disk
            (node.data_dir / FAILING).unlink()
            node.kill()
            node.start(cluster.voters)
        acknowledged_before = len(writer.acknowledged)
        until(lambda: len(writer.acknowledged) > acknowledged_before + 100, 60, "writes acknowledged again")
        writer.stop.set()
        writer.thread.join(180)
        time.sleep(4)  # followers catch up and rejoin the ISR
        verdict = stop_and_check(cluster, writer)
        print(f"\nfsync failures on brokers {follower.node_id} then {leader.node_id}: {verdict}; "
              f"{writer.failed} writes not acknowledged")
        assert verdict.acknowledged > 300
        assert verdict.anomalies == 0, (verdict.lost[:5], verdict.duplicated[:5], verdict.conflicting[:5],
                                        verdict.reordered[:5], verdict.diverged)
    finally:
        cluster.close()

