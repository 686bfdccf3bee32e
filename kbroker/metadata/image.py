"""The immutable view of the cluster that handlers read.

Built by applying committed metadata records (DESIGN.md, rule 3); nothing
mutates an image: a change makes a new one, so a handler that took an image
sees one consistent cluster for the whole request.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionState, ...]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True)
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerEndpoint, ...] = ()
    topics: dict[str, TopicImage] = field(default_factory=dict)
    version: int = 0  # bumps with every applied change; caches key on it

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None
