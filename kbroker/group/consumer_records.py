"""The ConsumerGroup* records of ``__consumer_offsets`` built from, and read into, a consumer group's state.

Field names are Kafka's (:mod:`kbroker.group.records`); assignments are written
sorted, so equal states give equal records.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Mapping

from kbroker.group import records
from kbroker.group.reconciliation import Assignment, ConsumerGroupMember, MemberState, normalized


def assignment_of(topic_partitions) -> dict[uuid.UUID, frozenset[int]]:
    assignment: dict[uuid.UUID, set[int]] = {}
    for topic in topic_partitions:
        assignment.setdefault(topic.topic_id, set()).update(topic.partitions)
    return normalized(assignment)


def topic_partitions(element_class, assignment: Assignment) -> list:
    return [element_class(topic_id=topic_id, partitions=sorted(assignment[topic_id]))
            for topic_id in sorted(assignment, key=str)]


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> tuple:
    return (records.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id),
            records.ConsumerGroupMemberMetadataValue(
                instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
                client_host=member.client_host, subscribed_topic_names=sorted(member.subscribed_topic_names),
                subscribed_topic_regex=member.subscribed_topic_regex, rebalance_timeout_ms=member.rebalance_timeout_ms,
                server_assignor=member.server_assignor))


def partition_metadata_record(group_id: str, metadata: Mapping[str, tuple[uuid.UUID, int]]) -> tuple:
    value_class = records.ConsumerGroupPartitionMetadataValue
    return (records.ConsumerGroupPartitionMetadataKey(group_id=group_id),
            value_class(topics=[value_class.TopicMetadata(topic_id=topic_id, topic_name=name, num_partitions=count,
                                                          partition_metadata=[])
                                for name, (topic_id, count) in sorted(metadata.items())]))


def target_assignment_record(group_id: str, member_id: str, assignment: Assignment) -> tuple:
    value_class = records.ConsumerGroupTargetAssignmentMemberValue
    return (records.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
            value_class(topic_partitions=topic_partitions(value_class.TopicPartition, assignment)))


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> tuple:
    value_class = records.ConsumerGroupCurrentMemberAssignmentValue
    return (records.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member.member_id),
            value_class(member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
                        state=int(member.state),
                        assigned_partitions=topic_partitions(value_class.TopicPartitions, member.assigned_partitions),
                        partitions_pending_revocation=topic_partitions(value_class.TopicPartitions,
                                                                        member.partitions_pending_revocation)))


def with_metadata(member: ConsumerGroupMember, value) -> ConsumerGroupMember:
    """The member as a ConsumerGroupMemberMetadataValue describes it (its assignment unchanged)."""
    return replace(member, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                   client_host=value.client_host, subscribed_topic_names=frozenset(value.subscribed_topic_names),
                   subscribed_topic_regex=value.subscribed_topic_regex or None,
                   rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor)


def with_current_assignment(member: ConsumerGroupMember, value) -> ConsumerGroupMember:
    """The member as a ConsumerGroupCurrentMemberAssignmentValue describes it (its metadata unchanged)."""
    return replace(member, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                   state=MemberState.from_value(value.state),
                   assigned_partitions=assignment_of(value.assigned_partitions),
                   partitions_pending_revocation=assignment_of(value.partitions_pending_revocation))
