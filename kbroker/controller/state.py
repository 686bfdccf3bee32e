"""The controller's state machine: the MetadataImage, changed only by committed metadata.

A change is one Raft entry: the metadata records applied together, each framed
as in ``__cluster_metadata`` (kbroker/metadata/records.py) and prefixed with
its length. A snapshot is a change too: the records that build the image from
nothing (brokers, topics, partitions, configs of topics, brokers and groups, the producer-id counter,
credentials, ACLs and client quotas).
"""

from __future__ import annotations

from kbroker.metadata import records
from kbroker.metadata.image import BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE, MetadataImage, apply_records
from kbroker.wire.primitives import read_uvarint, write_uvarint

_CODEC = records.MetadataRecordCodec()


def encode_change(change: list) -> bytes:
    out = bytearray()
    for record in change:
        data = _CODEC.encode(record)
        write_uvarint(out, len(data))
        out += data
    return bytes(out)


def decode_change(data: bytes) -> list:
    view = memoryview(data)
    change, position = [], 0
    while position < len(view):
        size, position = read_uvarint(view, position)
        change.append(_CODEC.decode(bytes(view[position:position + size])))
        position += size
    return change


def image_records(image: MetadataImage) -> list:
    """Records that rebuild ``image`` when applied to an empty one."""
    change: list = []
    for broker in image.brokers:
        listeners = broker.listeners or (("PLAINTEXT", broker.host, broker.port, 0),)
        endpoints = [records.RegisterBrokerRecord.BrokerEndpoint(name=name, host=host, port=port, security_protocol=code)
                     for name, host, port, code in listeners]
        change.append(records.RegisterBrokerRecord(broker_id=broker.node_id, broker_epoch=broker.epoch,
                                                   end_points=endpoints, rack=broker.rack, fenced=broker.fenced))
    for topic in sorted(image.topics.values(), key=lambda t: t.name):
        change.append(records.TopicRecord(name=topic.name, topic_id=topic.topic_id))
        for partition in topic.partitions:
            change.append(records.PartitionRecord(
                partition_id=partition.partition, topic_id=topic.topic_id, replicas=list(partition.replicas),
                isr=list(partition.isr), leader=partition.leader, leader_epoch=partition.leader_epoch,
                partition_epoch=partition.partition_epoch, adding_replicas=list(partition.adding),
                removing_replicas=list(partition.removing)))
        for name, value in sorted(topic.configs.items()):
            change.append(records.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=topic.name, name=name,
                                               value=value))
    for resource_type, resources in ((BROKER_RESOURCE, image.broker_configs), (GROUP_RESOURCE, image.group_configs)):
        for resource_name, configs in sorted(resources.items()):
            change += [records.ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=name,
                                            value=value) for name, value in sorted(configs.items())]
    if image.next_producer_id:
        change.append(records.ProducerIdsRecord(broker_id=-1, next_producer_id=image.next_producer_id))
    change += [image.scram_credentials[key] for key in sorted(image.scram_credentials)]
    change += [image.acls[key] for key in sorted(image.acls)]
    for entity, values in sorted(image.client_quotas.items(), key=lambda item: repr(item[0])):
        parts = [records.ClientQuotaRecord.EntityData(entity_type=kind, entity_name=name) for kind, name in entity]
        change += [records.ClientQuotaRecord(entity=parts, key=key, value=value) for key, value in sorted(values.items())]
    return change


class MetadataState:
    """What the Raft driver applies committed entries to (raft/driver.py's StateMachine)."""

    def __init__(self, cluster_id: str, on_change=None) -> None:
        self.cluster_id = cluster_id
        self.image = MetadataImage(cluster_id=cluster_id, controller_id=-1)
        self.applied_offset = -1
        self.on_change = on_change  # called with (before, after) images after each applied change

    def apply(self, offset: int, data: bytes) -> None:
        before = self.image
        image = apply_records(self.image, decode_change(data))
        self.image, self.applied_offset = image, offset
        if self.on_change is not None:
            self.on_change(before, image)

    def snapshot(self) -> bytes:
        return encode_change(image_records(self.image))

    def load_snapshot(self, data: bytes) -> None:
        before = self.image
        self.image = apply_records(MetadataImage(cluster_id=self.cluster_id, controller_id=-1), decode_change(data))
        if self.on_change is not None:
            self.on_change(before, self.image)
