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
from kbroker.wire.errors import ErrorCode


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


PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types


def elect(image: MetadataImage, topic_name: str, partition: int, election_type: int) -> tuple[int, object]:
    """ElectLeaders for one partition: (error code, the PartitionChangeRecord or None).

    Preferred: the first replica leads again if it is live and in the ISR. Unclean: a partition
    with no leader takes any live replica, ISR or not, at the price of what only the lost ones held.
    """
    topic = image.topics.get(topic_name)
    if topic is None or not 0 <= partition < len(topic.partitions):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    state = topic.partitions[partition]
    live = {broker.node_id for broker in image.live_brokers}
    if election_type == PREFERRED:
        preferred = state.replicas[0]
        if state.leader == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        if preferred not in live or preferred not in state.isr:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
        return ErrorCode.NONE, records.PartitionChangeRecord(partition_id=partition, topic_id=topic.topic_id,
                                                             leader=preferred)
    if election_type == UNCLEAN:
        if state.leader in live:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        chosen = next((replica for replica in state.replicas if replica in live), None)
        if chosen is None:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
        return ErrorCode.NONE, records.PartitionChangeRecord(partition_id=partition, topic_id=topic.topic_id,
                                                             leader=chosen, isr=[chosen])
    return ErrorCode.INVALID_REQUEST, None


def imbalanced(image: MetadataImage, percentage: int) -> list[tuple[str, int]]:
    """Partitions to give back to their preferred leaders (auto.leader.rebalance.enable): those of each
    broker whose share of preferred leaderships held elsewhere passes ``percentage``."""
    preferred_of: dict[int, list] = {}
    for topic in image.topics.values():
        for state in topic.partitions:
            preferred_of.setdefault(state.replicas[0], []).append((topic.name, state))
    chosen = []
    for broker, owned in preferred_of.items():
        elsewhere = [(name, state) for name, state in owned if state.leader != broker]
        if owned and len(elsewhere) * 100 > percentage * len(owned):
            chosen += [(name, state.partition) for name, state in elsewhere
                       if elect(image, name, state.partition, PREFERRED)[0] == ErrorCode.NONE]
    return chosen


def reassign(image: MetadataImage, topic_name: str, partition: int, target: list[int] | None) -> tuple[int, object]:
    """AlterPartitionReassignments for one partition: (error code, the PartitionChangeRecord or None).

    The partition first takes the union of old and new replicas (the new ones ``adding``, the
    dropped ones ``removing``); the new ones fetch and join the ISR; then
    :func:`completed_reassignments` shrinks it to the target. ``target`` None cancels one under way.
    """
    topic = image.topics.get(topic_name)
    if topic is None or not 0 <= partition < len(topic.partitions):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    state = topic.partitions[partition]
    if target is None:
        if not state.adding and not state.removing:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
        original = [r for r in state.replicas if r not in state.adding]
        return ErrorCode.NONE, _settle(topic.topic_id, state, original, image)
    registered = {broker.node_id for broker in image.brokers}
    if not target or len(set(target)) != len(target) or not set(target) <= registered:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, None
    current = [r for r in state.replicas if r not in state.adding]  # a new target replaces one under way
    adding = [r for r in target if r not in current]
    removing = [r for r in current if r not in target]
    if not adding and not removing:
        if state.adding or state.removing:
            return ErrorCode.NONE, _settle(topic.topic_id, state, target, image)
        if list(state.replicas) != target:  # only reordered: done at once, its leader kept, as in Kafka
            return ErrorCode.NONE, records.PartitionChangeRecord(partition_id=partition, topic_id=topic.topic_id,
                                                                 replicas=target)
        return ErrorCode.NONE, None
    replicas = list(dict.fromkeys(target + current))
    return ErrorCode.NONE, records.PartitionChangeRecord(partition_id=partition, topic_id=topic.topic_id,
                                                         replicas=replicas, adding_replicas=adding,
                                                         removing_replicas=removing)


def completed_reassignments(image: MetadataImage) -> list:
    """Reassignments whose new replicas are all in the ISR: the partition shrinks to its target."""
    change = []
    for topic in image.topics.values():
        for state in topic.partitions:
            if not state.adding and not state.removing:
                continue
            target = [r for r in state.replicas if r not in state.removing]
            if all(r in state.isr for r in target):
                change.append(_settle(topic.topic_id, state, target, image))
    return change


def _settle(topic_id, state: PartitionState, replicas: list[int], image: MetadataImage):
    """The partition on exactly ``replicas``: the ISR within them, the leader one of them."""
    live = {broker.node_id for broker in image.live_brokers}
    isr = [r for r in state.isr if r in replicas] or [r for r in replicas if r in live][:1]
    leader = state.leader if state.leader in isr else next((r for r in isr if r in live), -1)
    change = records.PartitionChangeRecord(partition_id=state.partition, topic_id=topic_id, replicas=list(replicas),
                                           isr=isr, adding_replicas=[], removing_replicas=[])
    if leader != state.leader:
        change.leader = leader
    return change
