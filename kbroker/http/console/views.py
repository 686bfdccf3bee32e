"""What the console shows of the broker's own state, read directly (no request, no copy of the image): the
cluster, its topics and partitions, and the disks. Each topic is shown only to a viewer the authorizer lets
DESCRIBE it, as a Kafka client's Metadata would list it; the cluster's settings only with DESCRIBE on it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from kbroker.config import BrokerConfig
from kbroker.http.console.access import Viewer
from kbroker.http.console.history import History
from kbroker.log.manager import LogManager
from kbroker.schemas.store import SchemaStore
from kbroker.metadata.image import BrokerEndpoint, MetadataImage, TopicImage
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import Authorization, allowed, allowed_on_cluster

MISSING = "-"


class ConsoleNode(Protocol):
    """What the console reads of a broker (kbroker/broker.py)."""

    @property
    def image(self) -> MetadataImage: ...
    @property
    def node_id(self) -> int: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def authorization(self) -> Authorization: ...
    @property
    def log_dir_offline(self) -> str | None: ...
    @property
    def settings(self):
        """kbroker.broker.BrokerSettings: its client listeners, in order."""
    @property
    def servers(self) -> list:
        """Each client listener's kbroker.server.Server (its security: the SASL mechanisms)."""
    @property
    def ports(self) -> dict[str, int]:
        """Listener name -> its bound port, once open."""
    @property
    def history(self) -> History:
        """The charts' samples, taken since the broker started."""

    def readiness(self) -> tuple[bool, str]: ...

    def schemas(self) -> SchemaStore:
        """The schema registry's state (kbroker/schemas/store.py)."""

    def partition(self, topic: str, index: int): ...


@dataclass(frozen=True)
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    size_bytes: int  # of the logs open on this broker
    configs: dict[str, str]  # the ones set on the topic


@dataclass(frozen=True)
class PartitionRow:
    index: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start: int | str  # MISSING where this broker has no replica
    high_watermark: int | str
    last_stable: int | str
    size_bytes: int | str


@dataclass(frozen=True)
class Disk:
    path: str
    total_bytes: int
    usable_bytes: int
    logs_bytes: int
    offline: bool


def may_describe(node: ConsoleNode, viewer: Viewer, topic: str) -> bool:
    return allowed(node, viewer, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)


def topics(node: ConsoleNode, viewer: Viewer, query: str = "") -> list[TopicRow]:
    """The topics whose name holds ``query``, by name."""
    image, logs, needle = node.image, node.logs.logs, query.strip().lower()
    rows = []
    for name in sorted(image.topics):
        if needle and needle not in name.lower() or not may_describe(node, viewer, name):
            continue
        topic = image.topics[name]
        size = sum(log.size_bytes for log in (logs.get((name, index)) for index in range(len(topic.partitions)))
                   if log is not None)
        rows.append(TopicRow(name, len(topic.partitions), len(topic.partitions[0].replicas) if topic.partitions else 0,
                             size, topic.configs))
    return rows


def topic(node: ConsoleNode, viewer: Viewer, name: str) -> TopicImage | None:
    """The topic, if it exists and the viewer may see it (else None: the page says it does not exist, as
    Kafka answers UNKNOWN_TOPIC_OR_PARTITION rather than tell who may not see it)."""
    found = node.image.topics.get(name)
    return found if found is not None and may_describe(node, viewer, name) else None


def partition_rows(node: ConsoleNode, found: TopicImage) -> list[PartitionRow]:
    """Each partition, with its offsets and size where this broker has a replica."""
    rows = []
    for state in found.partitions:
        offsets: tuple = (MISSING,) * 4
        if node.node_id in state.replicas and node.log_dir_offline is None:
            replica = node.partition(found.name, state.partition)
            log = replica.log
            offsets = (log.log_start_offset, replica.high_watermark, replica.last_stable_offset, log.size_bytes)
        rows.append(PartitionRow(state.partition, state.leader, state.replicas, state.isr, *offsets))
    return rows


def nodes(node: ConsoleNode) -> list[BrokerEndpoint]:
    return sorted(node.image.brokers, key=lambda broker: broker.node_id)


def counts(node: ConsoleNode, viewer: Viewer) -> dict[str, int]:
    """Topics and partitions the viewer may see, and of those the under-replicated and offline."""
    image = node.image
    live = {broker.node_id for broker in image.live_brokers}
    found = {"topics": 0, "partitions": 0, "under-replicated": 0, "offline": 0}
    for name, topic in image.topics.items():
        if not may_describe(node, viewer, name):
            continue
        found["topics"] += 1
        found["partitions"] += len(topic.partitions)
        for state in topic.partitions:
            found["under-replicated"] += len(state.isr) < len(state.replicas)
            found["offline"] += state.leader not in live
    return found


def disks(node: ConsoleNode, viewer: Viewer) -> list[Disk]:
    """Each log directory's disk and the bytes of its logs (DescribeLogDirs' figures: DESCRIBE on the cluster)."""
    if not allowed_on_cluster(node, viewer, AclOperation.DESCRIBE):
        return []
    path = os.path.abspath(node.logs.log_dir)
    logs_bytes = sum(log.size_bytes for log in node.logs.logs.values())
    try:
        disk = os.statvfs(path)
    except OSError:
        return [Disk(path, 0, 0, logs_bytes, True)]
    return [Disk(path, disk.f_blocks * disk.f_frsize, disk.f_bavail * disk.f_frsize, logs_bytes,
                 node.log_dir_offline is not None)]
