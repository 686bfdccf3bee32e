"""What ShareFetch (78) and ShareAcknowledge (79) share: finding the share-partitions a request names and
applying its acknowledgements, in Kafka's order (SharePartitionManager.acknowledge via KafkaApis).

Each named partition is checked as Fetch checks it (kbroker/handlers/partition_guard.py: the topic id
known, READ on the topic, this broker its leader), then its share-partition is found or loaded
(kbroker/share/manager.py). Acknowledgements of several partitions are applied together, each answered once
its write is settled.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

import trio

from kbroker.handlers.leader_hints import node_endpoints
from kbroker.handlers.partition_guard import guard_topic
from kbroker.security.acls import AclOperation
from kbroker.wire.errors import ErrorCode

_HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH)
# A partition answered without a hint: CurrentLeader as Kafka leaves it, its fields' defaults (0 and 0, not -1).
NO_LEADER_HINT = (0, 0)
# Kafka's words (SharePartition's exceptions) for what a share-partition refuses itself; the checks of a
# request's own batches (KafkaApis.validateAcknowledgementBatches) answer with none.
_REFUSAL_MESSAGES = {
    ErrorCode.INVALID_RECORD_STATE:
        "The record state is invalid. The acknowledgement of delivery could not be completed.",
    ErrorCode.INVALID_REQUEST: "Batch record not found. The first offset in request is past acquired records.",
}
PartitionKey = tuple[uuid.UUID, int]  # (topic id, partition index)


class Acknowledged(NamedTuple):
    """How one partition's acknowledgements went: the error code, and Kafka's message with it."""

    error_code: int
    error_message: str | None = None


@dataclass
class Named:
    """One partition a share request names, as found: its replica here and share-partition, or the error."""

    topic_id: uuid.UUID
    index: int
    error_code: int = ErrorCode.NONE
    replica: object = None
    share_partition: object = None
    leader: tuple[int, int] | None = None  # (leader id, epoch) to hint with NOT_LEADER_OR_FOLLOWER


@dataclass
class Found:
    """Every partition a request names, by (topic id, index), and the leaders to describe (KIP-951)."""

    partitions: dict[tuple[uuid.UUID, int], Named] = field(default_factory=dict)
    leaders: set[int] = field(default_factory=set)


async def find_share_partitions(broker, context, group_id: str, wanted) -> Found:
    """Check each (topic id, index) of ``wanted`` and load its share-partition (concurrently: a first use
    reads the state from the share coordinator)."""
    found = Found()
    guards = {}
    for topic_id, index in wanted:
        if topic_id not in guards:
            guards[topic_id] = guard_topic(broker, context, AclOperation.READ, topic_id=topic_id)
        guard = guards[topic_id]
        named = found.partitions[(topic_id, index)] = Named(topic_id, index)
        named.replica, named.error_code = guard.partition(index)
        if named.error_code in _HINTED and guard.topic is not None:
            state = guard.topic.partitions[index]
            named.leader = (state.leader, state.leader_epoch)
            if state.leader >= 0:
                found.leaders.add(state.leader)

    async def load(named: Named) -> None:
        named.share_partition, named.error_code = await broker.share_partitions.share_partition(
            group_id, named.topic_id, named.index, named.replica)

    async with trio.open_nursery() as nursery:
        for named in found.partitions.values():
            if named.replica is not None:
                nursery.start_soon(load, named)
    return found


async def acknowledge_all(broker, group_id: str, member_id: str, found: Found,
                          acknowledgements: dict[PartitionKey, list]) -> dict[PartitionKey, Acknowledged]:
    """Apply each partition's acknowledgement batches: how each went, once every write is settled. Malformed
    batches refuse the partition INVALID_REQUEST and change nothing."""
    from kbroker.share.partition import validate_acknowledgement_batches

    errors: dict[PartitionKey, Acknowledged] = {}

    async def acknowledge(key, named: Named, batches) -> None:
        error_code = await broker.share_partitions.acknowledge(
            (group_id, *key), named.share_partition, member_id, batches)
        errors[key] = Acknowledged(error_code, _REFUSAL_MESSAGES.get(error_code))

    async with trio.open_nursery() as nursery:
        for key, batches in acknowledgements.items():
            named = found.partitions[key]
            if named.share_partition is None:
                errors[key] = Acknowledged(named.error_code)
            elif (invalid := validate_acknowledgement_batches(batches)) != ErrorCode.NONE:
                errors[key] = Acknowledged(invalid)
            else:
                nursery.start_soon(acknowledge, key, named, batches)
    return errors


def share_response(broker, context, response_class, topic_class, group_id: str, by_topic: dict, found: Found):
    """ShareFetch's or ShareAcknowledge's answer: the partitions by topic, the group's acquisition lock
    duration, and the endpoints of the leaders hinted at (KIP-951)."""
    response = response_class(
        error_code=ErrorCode.NONE,
        acquisition_lock_timeout_ms=broker.share_partitions.partition_config(group_id).record_lock_duration_ms,
        responses=[topic_class(topic_id=topic_id, partitions=partitions) for topic_id, partitions in by_topic.items()])
    if found.leaders:
        response.node_endpoints = node_endpoints(broker.image, found.leaders, response_class, context.listener)
    return response


def acknowledgement_batches(partition) -> list:
    """A request partition's AcknowledgementBatches as the share-partition takes them."""
    from kbroker.share.partition import AcknowledgementBatch

    return [AcknowledgementBatch(batch.first_offset, batch.last_offset, tuple(batch.acknowledge_types))
            for batch in partition.acknowledgement_batches]
