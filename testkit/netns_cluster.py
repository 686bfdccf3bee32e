"""A kbroker cluster on a network-namespace test bed (testkit/netns.py): one combined broker+controller node
per host, each listening on its host's own address, the clients in the tests' namespace.

Faults are the bed's (isolate, split, cut_one_way, loss, delay); this adds what a test of the cluster asks:
which node leads the quorum or a partition, and whether the cluster is whole again (every partition led,
every ISR full, every node telling the same).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from testkit.broker_process import TEST_SETTINGS
from testkit.netns import NetnsBed
from testkit.quorum_process import QUICK_QUORUM, Quorum, QuorumNode

CLIENT_PORT, CONTROLLER_PORT = 9092, 9093  # every host has its own address, so every node the same ports
METADATA_TIMEOUT_S = 3


class BedCluster(Quorum):
    """``Quorum``'s tools (leader, describe, close) over nodes that live on the bed's hosts."""

    def __init__(self, bed: NetnsBed, root: Path, overrides: tuple[str, ...] = ()) -> None:
        overrides = QUICK_QUORUM + TEST_SETTINGS + tuple(overrides)
        self.bed = bed
        self.nodes = [QuorumNode(number, root / f"node{number}", CONTROLLER_PORT, CLIENT_PORT, overrides,
                                 host=bed.address(host), spawn=functools.partial(bed.popen, host))
                      for number, host in enumerate(bed.hosts, 1)]
        self.brokers = []
        self.voters = ",".join(f"{node.node_id}@{node.host}:{CONTROLLER_PORT}" for node in self.nodes)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def host_of(self, node: QuorumNode) -> str:
        return self.bed.hosts[node.node_id - 1]

    def partitions_seen_by(self, node: QuorumNode, topics: list[str]) -> dict | None:
        """{(topic, partition): (leader, sorted replicas, sorted ISR)} as ``node`` answers Metadata, or None
        when it does not answer in time."""
        try:
            metadata = AdminClient({"bootstrap.servers": node.bootstrap, "socket.timeout.ms": 2000}).list_topics(
                timeout=METADATA_TIMEOUT_S)
        except Exception:
            return None
        seen = {}
        for name in topics:
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None:
                return None
            for index, partition in topic.partitions.items():
                seen[(name, index)] = (partition.leader, tuple(sorted(partition.replicas)), tuple(sorted(partition.isrs)))
        return seen

    def whole(self, topics: list[str]) -> bool:
        """Every partition led, its ISR all its replicas, and every node says the same."""
        views = [self.partitions_seen_by(node, topics) for node in self.nodes]
        if any(view is None for view in views) or any(view != views[0] for view in views):
            return False
        return all(leader >= 0 and isr == replicas for leader, replicas, isr in views[0].values())

    def wait_whole(self, topics: list[str], timeout_s: float) -> float | None:
        """Seconds until the cluster is whole (see ``whole``), or None if it is not within ``timeout_s``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if self.whole(topics):
                return time.monotonic() - started
            time.sleep(0.1)
        return None

    def leader_of(self, topic: str, partition: int) -> QuorumNode | None:
        """The partition's leader as the first node that answers says."""
        for node in self.nodes:
            view = self.partitions_seen_by(node, [topic])
            if view is not None and view[(topic, partition)][0] > 0:
                return self.node(view[(topic, partition)][0])
        return None
