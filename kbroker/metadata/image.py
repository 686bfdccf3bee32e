"""The immutable view of the cluster that handlers read.

Built by applying committed metadata records (DESIGN.md, rule 3); nothing
mutates an image: a change makes a new one, so a handler that took an image
sees one consistent cluster for the whole request.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from kbroker.metadata import records


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
    next_producer_id: int = 0  # the first id of the next producer-id block to hand out

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None


TOPIC_RESOURCE = 2  # ConfigResource type of a topic, as in DescribeConfigs


def apply_record(image: MetadataImage, record) -> MetadataImage:
    """The image after one committed metadata record; the old image is untouched."""
    topics = image.topics
    if isinstance(record, records.TopicRecord):
        topics = {**topics, record.name: TopicImage(record.name, record.topic_id, ())}
    elif isinstance(record, records.PartitionRecord):
        topic = _topic_by_id(topics, record.topic_id)
        partition = PartitionState(
            record.partition_id, record.leader, record.leader_epoch, tuple(record.replicas), tuple(record.isr)
        )
        if record.partition_id == len(topic.partitions):  # the next one, as topics are created and grown
            partitions = topic.partitions + (partition,)
        else:
            kept = tuple(p for p in topic.partitions if p.partition != record.partition_id)
            partitions = tuple(sorted(kept + (partition,), key=lambda p: p.partition))
        topics = {**topics, topic.name: replace(topic, partitions=partitions)}
    elif isinstance(record, records.ConfigRecord) and record.resource_type == TOPIC_RESOURCE:
        topic = topics[record.resource_name]
        configs = dict(topic.configs)
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        topics = {**topics, topic.name: replace(topic, configs=configs)}
    elif isinstance(record, records.ProducerIdsRecord):
        return replace(image, next_producer_id=record.next_producer_id, version=image.version + 1)
    elif isinstance(record, records.RemoveTopicRecord):
        topic = _topic_by_id(topics, record.topic_id)
        topics = {name: value for name, value in topics.items() if name != topic.name}
    else:
        return replace(image, version=image.version + 1)
    return replace(image, topics=topics, version=image.version + 1)


def _topic_by_id(topics: dict[str, TopicImage], topic_id: uuid.UUID) -> TopicImage:
    for topic in topics.values():
        if topic.topic_id == topic_id:
            return topic
    raise KeyError(f"no topic with id {topic_id}")
