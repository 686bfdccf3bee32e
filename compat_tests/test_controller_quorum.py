"""A quorum of three controller processes on loopback, driven with Kafka requests over real sockets.

- SIGKILL the leader while topics are being created: a new leader within two election
  timeouts, and every acknowledged topic is there once, under one id.
- SIGKILL all three and start them again: the metadata is exactly what it was (snapshot
  plus log replay).
- A wiped voter comes back by fetching the leader's snapshot (FetchSnapshot).
"""

from __future__ import annotations

import time

import pytest

from testkit.quorum_process import Quorum, register_broker, until
from kbroker.controller.dump import dump
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

pytestmark = pytest.mark.timeout(300)

ELECTION_TIMEOUT_MS = 1000
LONG_SESSIONS = ("broker.session.timeout.ms=600000",)  # the brokers registered here never heartbeat again
SMALL_SNAPSHOTS = ("metadata.log.max.record.bytes.between.snapshots=3000", "metadata.log.segment.bytes=4096")

CreateTopics = API_BY_NAME["CreateTopics"].request_class


class Creator:
    """Creates topics one by one at whichever controller takes them, as an admin client would:
    NOT_CONTROLLER or a dead connection means try the next one; TOPIC_ALREADY_EXISTS after a
    retry means the earlier attempt did commit."""

    def __init__(self, quorum: Quorum) -> None:
        self.quorum = quorum
        self.acknowledged: list[str] = []
        self.target = 0

    def create(self, name: str, timeout_s: float = 30) -> None:
        body = CreateTopics(timeout_ms=5000, validate_only=False, topics=[CreateTopics.CreatableTopic(
            name=name, num_partitions=2, replication_factor=1, assignments=[], configs=[])])
        deadline = time.monotonic() + timeout_s
        retried = False
        while time.monotonic() < deadline:
            node = self.quorum.nodes[self.target % len(self.quorum.nodes)]
            try:
                if not node.running:
                    raise OSError("not running")
                [result] = node.call("CreateTopics", 7, body, timeout_s=5).topics
            except OSError:
                self.target += 1
                retried = True
                continue
            if result.error_code == ErrorCode.NONE or (retried and result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS):
                self.acknowledged.append(name)
                return
            assert result.error_code == ErrorCode.NOT_CONTROLLER, (name, node.node_id, result)
            self.target += 1
            retried = True
            time.sleep(0.02)
        raise AssertionError(f"{name} was never created")


def metadata_dir(node) -> str:
    return str(node.data_dir / "__cluster_metadata-0")


def settle(quorum: Quorum, timeout_s: float = 20) -> None:
    """Wait until every voter has fetched up to the leader's high watermark."""
    def caught_up():
        partition = quorum.describe(quorum.leader())
        ends = {voter.log_end_offset for voter in partition.current_voters}
        return len(partition.current_voters) == len(quorum.nodes) and ends == {partition.high_watermark}
    until(caught_up, timeout_s, "every voter to catch up")


def image_of(node) -> dict:
    state = dump(metadata_dir(node))
    return {"brokers": state["brokers"], "topics": state["topics"]}


@pytest.mark.slow
def test_the_leader_killed_mid_creation_loses_no_topic_and_a_restart_keeps_everything(tmp_path):
    quorum = Quorum(tmp_path, overrides=LONG_SESSIONS + SMALL_SNAPSHOTS)
    try:
        quorum.start()
        register_broker(quorum, 101)
        creator = Creator(quorum)
        for i in range(20):
            creator.create(f"before-{i:02}")
        leader = quorum.leader()
        killed_at = time.monotonic()
        leader.kill()
        rest = [node for node in quorum.nodes if node is not leader]
        new_leader = quorum.leader(among=rest)
        elapsed_ms = (time.monotonic() - killed_at) * 1000
        print(f"\nnew leader {new_leader.node_id} {elapsed_ms:.0f} ms after SIGKILL of leader {leader.node_id} "
              f"(election timeout {ELECTION_TIMEOUT_MS} ms)")
        assert elapsed_ms < 2 * ELECTION_TIMEOUT_MS
        for i in range(20):  # while the old leader is down
            creator.create(f"during-{i:02}")
        leader.start(quorum.voters)
        for i in range(20):
            creator.create(f"after-{i:02}")
        settle(quorum)
        for node in quorum.nodes:
            node.kill()
        images = [image_of(node) for node in quorum.nodes]
        assert images[0] == images[1] == images[2]
        topics = images[0]["topics"]
        assert sorted(topics) == sorted(creator.acknowledged) and len(creator.acknowledged) == 60
        assert len({t["id"] for t in topics.values()}) == 60  # one id per topic
        assert all(not dump(metadata_dir(node))["topics_created_twice"] for node in quorum.nodes)
        assert any(dump(metadata_dir(node))["snapshot_end_offset"] for node in quorum.nodes)

        quorum.start()  # all three again, from their snapshots and logs
        Creator(quorum).create("after-restart")
        settle(quorum)
        for node in quorum.nodes:
            node.stop()
        for node in quorum.nodes:
            again = image_of(node)
            assert again["topics"].pop("after-restart")
            assert again == images[0]
    finally:
        quorum.close()


@pytest.mark.slow
def test_a_wiped_voter_rejoins_by_fetching_the_snapshot(tmp_path):
    quorum = Quorum(tmp_path, overrides=LONG_SESSIONS + SMALL_SNAPSHOTS)
    try:
        quorum.start()
        register_broker(quorum, 101)
        leader = quorum.leader()
        victim = next(node for node in quorum.nodes if node is not leader)
        creator = Creator(quorum)
        victim.kill()
        for i in range(80):
            creator.create(f"topic-{i:02}")
        leader.kill()
        on_disk = dump(metadata_dir(leader))
        assert on_disk["snapshot_end_offset"] and on_disk["log_start_offset"] > 0  # snapshotted, log truncated
        for path in sorted(victim.data_dir.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        leader.start(quorum.voters)
        victim.start(quorum.voters)
        settle(quorum)
        for node in quorum.nodes:
            node.stop()
        rebuilt = dump(metadata_dir(victim))
        assert rebuilt["log_start_offset"] > 0  # it began from the fetched snapshot, not from offset 0
        assert image_of(victim) == image_of(leader)
        assert sorted(rebuilt["topics"]) == sorted(creator.acknowledged)
    finally:
        quorum.close()
