"""ISR changes a partition leader asks for (AlterPartition, KIP-497), checked as Kafka's controller does.

The leader shrinks the ISR when a follower falls behind and expands it when one
catches up; the controller commits the change only if it comes from the
partition's current leader, at the leader and partition epochs the controller
has (anything else is a stale request), and names only live replicas (a fenced
broker may not join the ISR). Leaders are elected from the ISR only: unclean
election is off, as Kafka's default.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.metadata import records
from kbroker.metadata.image import MetadataImage, PartitionState
from wire.errors import ErrorCode


@dataclass(frozen=True)
class IsrRequest:
    topic_id: object
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    isr_broker_epochs: dict[int, int] | None = None  # v3+: each member's broker epoch, -1 unknown


def alter_isr(image: MetadataImage, leader: int, wanted: IsrRequest) -> tuple[int, PartitionState | None, object]:
    """(error code, the partition as it stands, the PartitionChangeRecord to commit or None)."""
    topic = image.topic_by_id(wanted.topic_id)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_ID, None, None
    if not 0 <= wanted.partition < len(topic.partitions):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
    partition = topic.partitions[wanted.partition]
    if partition.leader != leader:
        return ErrorCode.INVALID_REQUEST, partition, None  # only the leader changes its ISR
    if wanted.leader_epoch != partition.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH, partition, None
    if wanted.partition_epoch != partition.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION, partition, None
    isr = wanted.new_isr
    if not isr or len(set(isr)) != len(isr) or not set(isr) <= set(partition.replicas) or leader not in isr:
        return ErrorCode.INVALID_REQUEST, partition, None
    live = {broker.node_id: broker.epoch for broker in image.live_brokers}
    for member in set(isr) - set(partition.isr):  # joining members must be live (and this incarnation)
        epoch = (wanted.isr_broker_epochs or {}).get(member, -1)
        if member not in live or epoch not in (-1, live[member]):
            return ErrorCode.INELIGIBLE_REPLICA, partition, None
    if tuple(isr) == partition.isr:
        return ErrorCode.NONE, partition, None
    return ErrorCode.NONE, partition, records.PartitionChangeRecord(partition_id=partition.partition,
                                                                    topic_id=topic.topic_id, isr=list(isr))
