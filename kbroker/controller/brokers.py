"""Broker membership at the controller: registration, leases, fencing and the leader moves they cause.

Kafka's KRaft rules (KIP-631):

- A broker registers (BrokerRegistration) and gets a broker epoch: the offset of its
  RegisterBrokerRecord in the metadata log. It starts fenced.
- It heartbeats (BrokerHeartbeat) with the metadata offset it has applied. Once that
  reaches its registration, it has caught up and is unfenced: it may lead partitions.
- A broker whose heartbeats stop for ``broker.session.timeout.ms`` is fenced, and so is
  one that asks to shut down (controlled shutdown). A fenced broker leaves every ISR it
  can leave (never the last member) and every leadership passes to a live ISR member;
  with none, the partition has no leader until one comes back (no unclean election).

The functions here are pure: an image in, the records of the change out. The leases
are the active controller's memory only; a new active controller starts them afresh.
"""

from __future__ import annotations

from kbroker.metadata import records
from kbroker.metadata.image import BrokerEndpoint, MetadataImage

NO_LEADER = -1


def registration_records(broker_id: int, broker_epoch: int, listeners: list, rack: str | None,
                         incarnation_id, image: MetadataImage) -> list:
    """A (re-)registration: the broker starts fenced, so it gives up what its earlier incarnation led.
    ``listeners`` are its BrokerRegistration listeners, the inter-broker one first."""
    endpoints = [records.RegisterBrokerRecord.BrokerEndpoint(name=listener.name, host=listener.host, port=listener.port,
                                                             security_protocol=listener.security_protocol)
                 for listener in listeners]
    register = records.RegisterBrokerRecord(broker_id=broker_id, incarnation_id=incarnation_id,
                                            broker_epoch=broker_epoch, end_points=endpoints, rack=rack, fenced=True)
    return [register, *leadership_moves(image, fenced=broker_id)]


def fence_records(image: MetadataImage, broker: BrokerEndpoint) -> list:
    return [records.FenceBrokerRecord(id=broker.node_id, epoch=broker.epoch),
            *leadership_moves(image, fenced=broker.node_id)]


def unfence_records(image: MetadataImage, broker: BrokerEndpoint) -> list:
    """Unfence ``broker`` and give it the partitions left leaderless whose ISR it is in."""
    back = records.UnfenceBrokerRecord(id=broker.node_id, epoch=broker.epoch)
    changes = []
    for topic in image.topics.values():
        for partition in topic.partitions:
            if partition.leader == NO_LEADER and broker.node_id in partition.isr:
                changes.append(records.PartitionChangeRecord(partition_id=partition.partition, topic_id=topic.topic_id,
                                                             leader=broker.node_id))
    return [back, *changes]


def leadership_moves(image: MetadataImage, *, fenced: int) -> list:
    """PartitionChangeRecords taking broker ``fenced`` out of ISRs and leaderships."""
    live = {broker.node_id for broker in image.live_brokers} - {fenced}
    changes = []
    for topic in image.topics.values():
        for partition in topic.partitions:
            if fenced not in partition.isr and partition.leader != fenced:
                continue
            isr = [replica for replica in partition.isr if replica != fenced] or list(partition.isr)
            leader = partition.leader
            if leader == fenced or leader not in live:
                leader = next((replica for replica in isr if replica in live), NO_LEADER)
            change = records.PartitionChangeRecord(partition_id=partition.partition, topic_id=topic.topic_id)
            if isr != list(partition.isr):
                change.isr = isr
            if leader != partition.leader:
                change.leader = leader
            if change.isr is not None or change.leader != -2:
                changes.append(change)
    return changes


class BrokerLeases:
    """When each broker last heartbeated, on the active controller (monotonic milliseconds)."""

    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.epoch = -1  # the quorum epoch these leases were started in
        self.last_heartbeat: dict[int, int] = {}

    def start(self, epoch: int, image: MetadataImage, now_ms: int) -> None:
        """A newly active controller gives every registered broker a whole session from now."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.last_heartbeat = {broker.node_id: now_ms for broker in image.brokers}

    def renew(self, broker_id: int, now_ms: int) -> None:
        self.last_heartbeat[broker_id] = now_ms

    def expired(self, image: MetadataImage, now_ms: int) -> list[BrokerEndpoint]:
        """Unfenced brokers whose session ran out."""
        return [broker for broker in image.live_brokers
                if now_ms - self.last_heartbeat.get(broker.node_id, now_ms) > self.session_timeout_ms]


def broker_by_id(image: MetadataImage, broker_id: int) -> BrokerEndpoint | None:
    return next((broker for broker in image.brokers if broker.node_id == broker_id), None)


__all__ = ["BrokerLeases", "broker_by_id", "fence_records", "leadership_moves", "registration_records",
           "unfence_records"]
