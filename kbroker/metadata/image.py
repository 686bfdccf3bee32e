"""The immutable view of the cluster that handlers read.

Built by applying committed metadata records (DESIGN.md, rule 3); nothing
mutates an image: a change makes a new one, so a handler that took an image
sees one consistent cluster for the whole request.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from kbroker.metadata import records

# Kafka's internal topics (``Topic.INTERNAL_TOPICS``): Metadata's is_internal, and what consumers leave out.
# A user's topic may be named with two underscores too, and is not one of them.
INTERNAL_TOPIC_NAMES = frozenset(("__consumer_offsets", "__transaction_state", "__share_group_state"))


@dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = 0  # the broker epoch its registration got
    fenced: bool = False  # registered but not (or no longer) serving: no leadership, not in Metadata
    # Every listener it registered, as (name, host, port, security protocol id); host and port above are the
    # first: the inter-broker listener. Clients are told the address of the listener they came in on.
    listeners: tuple[tuple[str, str, int, int], ...] = ()

    def address(self, listener_name: str) -> tuple[str, int] | None:
        """Where this broker serves the listener ``listener_name``; None if it has no such listener."""
        if not self.listeners:
            return self.host, self.port
        for name, host, port, _protocol in self.listeners:
            if name == listener_name:
                return host, port
        return None


@dataclass(frozen=True)
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = 0  # bumps with every change of the partition's leader, ISR or replicas
    adding: tuple[int, ...] = ()  # a reassignment under way: replicas joining ...
    removing: tuple[int, ...] = ()  # ... and replicas leaving once the joiners are in the ISR


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionState, ...]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPIC_NAMES


@dataclass(frozen=True)
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerEndpoint, ...] = ()
    topics: dict[str, TopicImage] = field(default_factory=dict)
    version: int = 0  # bumps with every applied change; caches key on it
    next_producer_id: int = 0  # the first id of the next producer-id block to hand out
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)  # topic id -> name, kept with ``topics``
    # Security state, as its records say it (kbroker.security turns it into an authorizer, credentials, quotas):
    scram_credentials: dict[tuple[str, int], records.UserScramCredentialRecord] = field(default_factory=dict)
    acls: dict[uuid.UUID, records.AccessControlEntryRecord] = field(default_factory=dict)
    client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = field(default_factory=dict)
    # Dynamic broker configs (KIP-226): "" the cluster-wide default, else a node id -> its own; name -> text.
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # Per-group configs (KIP-848, KIP-932): group id -> name -> text, as set (kbroker/config/group_configs.py).
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def live_brokers(self) -> tuple[BrokerEndpoint, ...]:
        """The brokers that serve: registered and not fenced."""
        return tuple(broker for broker in self.brokers if not broker.fenced)

    def peer_address(self, node_id: int) -> tuple[str, int] | None:
        """Where another node reaches the serving broker ``node_id`` (its inter-broker listener); None when it
        does not serve."""
        found = next((broker for broker in self.live_brokers if broker.node_id == node_id), None)
        return None if found is None else (found.host, found.port)

    def live_addresses(self, listener: str) -> list[tuple[BrokerEndpoint, str, int]]:
        """The serving brokers with their host and port on ``listener``; as in Kafka's Metadata, a broker
        without that listener is left out."""
        return self.addresses(listener)

    def addresses(self, listener: str, fenced: bool = False) -> list[tuple[BrokerEndpoint, str, int]]:
        """As :meth:`live_addresses`, with the fenced brokers too if ``fenced`` (DescribeCluster v2, KIP-1073)."""
        found = []
        for broker in self.brokers if fenced else self.live_brokers:
            address = broker.address(listener)
            if address is not None:
                found.append((broker, *address))
        return found

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        name = self.topic_names.get(topic_id)
        return None if name is None else self.topics[name]


TOPIC_RESOURCE = 2  # ConfigResource types, as in DescribeConfigs: a topic ...
BROKER_RESOURCE = 4  # ... a broker (a node id, or "" for the cluster-wide default) ...
GROUP_RESOURCE = 32  # ... and a group (its id)


def apply_record(image: MetadataImage, record) -> MetadataImage:
    """The image after one committed metadata record; the old image is untouched."""
    topics = image.topics
    if isinstance(record, records.TopicRecord):
        topics = {**topics, record.name: TopicImage(record.name, record.topic_id, ())}
        names = {**image.topic_names, record.topic_id: record.name}
        return replace(image, topics=topics, topic_names=names, version=image.version + 1)
    elif isinstance(record, records.PartitionRecord):
        topic = _topic_by_id(image, record.topic_id)
        partition = _partition_state(record)
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
    elif isinstance(record, records.ConfigRecord) and record.resource_type == BROKER_RESOURCE:
        return _apply_broker_config(image, record)
    elif isinstance(record, records.ConfigRecord) and record.resource_type == GROUP_RESOURCE:
        return replace(image, group_configs=_with_value(image.group_configs, record), version=image.version + 1)
    elif isinstance(record, records.PartitionChangeRecord):
        topic = _topic_by_id(image, record.topic_id)
        partition = _changed_partition(topic.partitions[record.partition_id], record)
        index = record.partition_id  # partitions are kept in order, by their index
        partitions = topic.partitions[:index] + (partition,) + topic.partitions[index + 1:]
        topics = {**topics, topic.name: replace(topic, partitions=partitions)}
    elif isinstance(record, records.RegisterBrokerRecord):
        endpoint = record.end_points[0]
        listeners = tuple((e.name, e.host, e.port, e.security_protocol) for e in record.end_points)
        broker = BrokerEndpoint(record.broker_id, endpoint.host, endpoint.port, record.rack, record.broker_epoch,
                                record.fenced, listeners)
        brokers = tuple(sorted((*(b for b in image.brokers if b.node_id != record.broker_id), broker),
                               key=lambda b: b.node_id))
        return replace(image, brokers=brokers, version=image.version + 1)
    elif isinstance(record, (records.FenceBrokerRecord, records.UnfenceBrokerRecord)):
        fenced = isinstance(record, records.FenceBrokerRecord)
        brokers = tuple(replace(b, fenced=fenced) if b.node_id == record.id and b.epoch == record.epoch else b
                        for b in image.brokers)
        return replace(image, brokers=brokers, version=image.version + 1)
    elif isinstance(record, records.ProducerIdsRecord):
        return replace(image, next_producer_id=record.next_producer_id, version=image.version + 1)
    elif isinstance(record, _SECURITY_RECORDS):
        return _apply_security_record(image, record)
    elif isinstance(record, records.RemoveTopicRecord):
        topic = _topic_by_id(image, record.topic_id)
        topics = {name: value for name, value in topics.items() if name != topic.name}
        names = {topic_id: name for topic_id, name in image.topic_names.items() if topic_id != record.topic_id}
        return replace(image, topics=topics, topic_names=names, version=image.version + 1)
    else:
        return replace(image, version=image.version + 1)
    return replace(image, topics=topics, version=image.version + 1)


_SECURITY_RECORDS = (records.UserScramCredentialRecord, records.RemoveUserScramCredentialRecord,
                     records.AccessControlEntryRecord, records.RemoveAccessControlEntryRecord, records.ClientQuotaRecord)


def _apply_security_record(image: MetadataImage, record) -> MetadataImage:
    version = image.version + 1
    if isinstance(record, records.UserScramCredentialRecord):
        credentials = {**image.scram_credentials, (record.name, record.mechanism): record}
        return replace(image, scram_credentials=credentials, version=version)
    if isinstance(record, records.RemoveUserScramCredentialRecord):
        key = (record.name, record.mechanism)
        credentials = {k: v for k, v in image.scram_credentials.items() if k != key}
        return replace(image, scram_credentials=credentials, version=version)
    if isinstance(record, records.AccessControlEntryRecord):
        return replace(image, acls={**image.acls, record.id: record}, version=version)
    if isinstance(record, records.RemoveAccessControlEntryRecord):
        return replace(image, acls={k: v for k, v in image.acls.items() if k != record.id}, version=version)
    entity = tuple(sorted(((part.entity_type, part.entity_name) for part in record.entity), key=lambda p: p[0]))
    values = dict(image.client_quotas.get(entity, {}))
    if record.remove:
        values.pop(record.key, None)
    else:
        values[record.key] = record.value
    quotas = {k: v for k, v in image.client_quotas.items() if k != entity}
    if values:
        quotas[entity] = values
    return replace(image, client_quotas=quotas, version=version)


def _apply_broker_config(image: MetadataImage, record) -> MetadataImage:
    """A new dict for the resource even when the value is the same: a broker sees the change and reloads
    what the setting names, a key store replaced in place (as Kafka's KAFKA-14136)."""
    return replace(image, broker_configs=_with_value(image.broker_configs, record), version=image.version + 1)


def _with_value(resources: dict[str, dict[str, str]], record) -> dict[str, dict[str, str]]:
    """``resources`` (resource name -> config name -> text) with the ConfigRecord's value set, or removed
    when it has none; a new dict for the resource, and none kept for a resource left without values."""
    configs = dict(resources.get(record.resource_name, {}))
    if record.value is None:
        configs.pop(record.name, None)
    else:
        configs[record.name] = record.value
    changed = {name: values for name, values in resources.items() if name != record.resource_name}
    if configs:
        changed[record.resource_name] = configs
    return changed


def apply_records(image: MetadataImage, change) -> MetadataImage:
    """``apply_record`` over a change's records in turn, except that a run of one topic's partition records
    (its next partitions, as a topic is created or grown, and changes to existing ones, as when a broker
    stops or comes back and leads again) is applied to one list, copied once: one by one, 100,000
    partitions in 10 topics copied a 10,000-partition tuple 100,000 times, minutes at a restart."""
    topic: TopicImage | None = None
    partitions: list[PartitionState] = []
    applied = 0
    for record in change:
        if isinstance(record, (records.PartitionRecord, records.PartitionChangeRecord)):
            if topic is None or record.topic_id != topic.topic_id:
                image = _with_partitions(image, topic, partitions, applied)
                topic, applied = image.topic_by_id(record.topic_id), 0
                partitions = list(topic.partitions) if topic is not None else []
            if topic is not None and _apply_in_place(partitions, record):
                applied += 1
                continue
        image = _with_partitions(image, topic, partitions, applied)
        topic, partitions, applied = None, [], 0
        image = apply_record(image, record)
    return _with_partitions(image, topic, partitions, applied)


def _apply_in_place(partitions: list[PartitionState], record) -> bool:
    """Apply a topic's next partition or a change to one it has; False for anything else (a partition
    record out of order, a change to a partition it lacks), which ``apply_record`` then handles."""
    index = record.partition_id
    if isinstance(record, records.PartitionRecord):
        if index != len(partitions):
            return False
        partitions.append(_partition_state(record))
    else:
        if not 0 <= index < len(partitions):
            return False
        partitions[index] = _changed_partition(partitions[index], record)
    return True


def _with_partitions(image: MetadataImage, topic: TopicImage | None, partitions: list[PartitionState],
                     applied: int) -> MetadataImage:
    """The image with ``topic``'s partitions replaced, counting ``applied`` records in its version."""
    if topic is None or not applied:
        return image
    topic = replace(topic, partitions=tuple(partitions))
    return replace(image, topics={**image.topics, topic.name: topic}, version=image.version + applied)


def _changed_partition(old: PartitionState, record) -> PartitionState:
    """A partition after a PartitionChangeRecord: a leader of -2 keeps the leader, a missing list keeps
    the list, a new leader bumps the leader epoch, and every change bumps the partition epoch."""
    leader = old.leader if record.leader == -2 else record.leader
    return replace(
        old, leader=leader, leader_epoch=old.leader_epoch + (leader != old.leader),
        isr=old.isr if record.isr is None else tuple(record.isr),
        replicas=old.replicas if record.replicas is None else tuple(record.replicas),
        adding=old.adding if record.adding_replicas is None else tuple(record.adding_replicas),
        removing=old.removing if record.removing_replicas is None else tuple(record.removing_replicas),
        partition_epoch=old.partition_epoch + 1)


def _partition_state(record) -> PartitionState:
    return PartitionState(
        record.partition_id, record.leader, record.leader_epoch, tuple(record.replicas), tuple(record.isr),
        max(record.partition_epoch, 0), tuple(record.adding_replicas or ()), tuple(record.removing_replicas or ()),
    )


def _topic_by_id(image: MetadataImage, topic_id: uuid.UUID) -> TopicImage:
    topic = image.topic_by_id(topic_id)
    if topic is None:
        raise KeyError(f"no topic with id {topic_id}")
    return topic
