"""A KIP-932 share group as its ShareGroup* records of ``__consumer_offsets`` leave it, and those records.

Kafka 4.2's records (group-coordinator/src/main/resources/common/message/ShareGroup*.json), named by
their key version: 10 ShareGroupMemberMetadata (who a member is, what it subscribes to), 11
ShareGroupMetadata (the group epoch and the metadata hash of the subscribed topics), 12
ShareGroupTargetAssignmentMetadata (the assignment epoch), 13 ShareGroupTargetAssignmentMember (a
member's target), 14 ShareGroupCurrentMemberAssignment (a member's epochs and partitions), 15
ShareGroupStatePartitionMetadata (which share-partitions have their state initialized at the share
coordinator, which are on their way, which are being deleted). Field names are Kafka's
(:mod:`kbroker.group.records`); assignments and topics are written sorted, so equal states give
equal records.

:class:`StoredShareGroup` is what the records determine; :meth:`StoredShareGroup.apply` is the one way
it changes, for a group replaying its log and for a group changing itself alike
(kbroker/group/share.py).
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from dataclasses import dataclass, field, fields, replace
from typing import Iterable, Mapping

from kbroker.group import records
from kbroker.group.consumer import TopicsView
from kbroker.group.consumer_records import assignment_of, topic_partitions
from kbroker.group.reconciliation import Assignment, MemberState

LEAVE_GROUP_MEMBER_EPOCH = -1
NO_ASSIGNMENT_EPOCH = -1  # the assignment epoch once its record is a tombstone (a group being deleted)
UNKNOWN_TOPIC_NAME = "<UNKNOWN>"  # Kafka's name for a topic the metadata no longer has


@dataclass(frozen=True)
class ShareGroupMember:
    """One member as its records describe it. Defaults are Kafka's for a member not yet known
    (ShareGroupMember.Builder); a share member has no revocation, so its state stays STABLE."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned_partitions: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch


@dataclass(frozen=True)
class TopicPartitionsInfo:
    """A topic of ShareGroupStatePartitionMetadata: its name as written, and partitions."""

    topic_name: str
    partitions: frozenset[int]


@dataclass
class StoredShareGroup:
    """What a share group's records determine, as Kafka's ShareGroup and the coordinator's
    shareGroupStatePartitionMetadata map hold it."""

    exists: bool = True  # False once its ShareGroupMetadata tombstone is applied: the group is deleted
    # Kafka 4.4's ModernGroup starts at group epoch 1 and assignment epoch 1 (TargetAssignmentMetadata.INITIAL):
    # a new group's first bump makes epoch 2.
    group_epoch: int = 1
    metadata_hash: int = 0
    assignment_epoch: int = 1
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    initializing: dict[uuid.UUID, TopicPartitionsInfo] = field(default_factory=dict)
    initialized: dict[uuid.UUID, TopicPartitionsInfo] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)
    # Whether a ShareGroupStatePartitionMetadata record stands, empty or not: Kafka acts on its presence
    # (DeleteShareGroupOffsets answers nothing for a group that never had one, refuses a topic it lacks after).
    state_partitions_recorded: bool = False
    # When the last ShareGroupStatePartitionMetadata was applied: Kafka stamps the topics initializing with
    # the time it replays their record, and asks for them again once group.share.initialize.retry.interval.ms
    # has passed. Not a record field, so left out of comparisons.
    initializing_since_ms: int = field(default=0, compare=False)

    def copy(self) -> StoredShareGroup:
        """An independent copy (members and assignments are immutable values, so shallow dicts do)."""
        return replace(self, members=dict(self.members), target_assignment=dict(self.target_assignment),
                       initializing=dict(self.initializing), initialized=dict(self.initialized),
                       deleting=dict(self.deleting))

    def apply(self, key, value, now_ms: int) -> None:
        """Apply one ShareGroup* record of this group (``value`` None: a tombstone), as Kafka's replay
        does; other records are no business of a share group and are ignored."""
        if value is not None:
            self.exists = True
        if isinstance(key, records.ShareGroupMetadataKey):
            if value is None:
                self._delete()
            else:
                self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif isinstance(key, records.ShareGroupMemberMetadataKey):
            if value is None:
                self.members.pop(key.member_id, None)
            else:
                member = self.members.get(key.member_id) or ShareGroupMember(key.member_id)
                self.members[key.member_id] = replace(
                    member, rack_id=value.rack_id, client_id=value.client_id, client_host=value.client_host,
                    subscribed_topic_names=frozenset(value.subscribed_topic_names))
        elif isinstance(key, records.ShareGroupCurrentMemberAssignmentKey):
            self._apply_current_assignment(key.member_id, value)
        elif isinstance(key, records.ShareGroupTargetAssignmentMemberKey):
            if value is None:
                self.target_assignment.pop(key.member_id, None)
            else:
                self.target_assignment[key.member_id] = assignment_of(value.topic_partitions)
        elif isinstance(key, records.ShareGroupTargetAssignmentMetadataKey):
            self.assignment_epoch = NO_ASSIGNMENT_EPOCH if value is None else value.assignment_epoch
        elif isinstance(key, records.ShareGroupStatePartitionMetadataKey):
            self._apply_state_partition_metadata(value, now_ms)

    def _apply_current_assignment(self, member_id: str, value) -> None:
        member = self.members.get(member_id)
        if value is None:
            if member is not None:  # its partitions are released; the metadata tombstone removes it
                self.members[member_id] = replace(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                                  previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                                  assigned_partitions={})
            return
        self.members[member_id] = replace(
            member or ShareGroupMember(member_id), member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch, state=MemberState.from_value(value.state),
            assigned_partitions=assignment_of(value.assigned_partitions))

    def _apply_state_partition_metadata(self, value, now_ms: int) -> None:
        self.state_partitions_recorded = value is not None
        if value is None:
            self.initializing, self.initialized, self.deleting = {}, {}, {}
            return

        def topics(infos) -> dict[uuid.UUID, TopicPartitionsInfo]:
            return {info.topic_id: TopicPartitionsInfo(info.topic_name, frozenset(info.partitions)) for info in infos}

        self.initializing = topics(value.initializing_topics)
        self.initialized = topics(value.initialized_topics)
        self.deleting = {info.topic_id: info.topic_name for info in value.deleting_topics}
        self.initializing_since_ms = now_ms

    def _delete(self) -> None:
        deleted = StoredShareGroup(exists=False)
        for stored in fields(self):
            setattr(self, stored.name, getattr(deleted, stored.name))


# -- the records -----------------------------------------------------------------------------------------


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> tuple:
    return (records.ShareGroupMetadataKey(group_id=group_id),
            records.ShareGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash))


def member_metadata_record(group_id: str, member: ShareGroupMember) -> tuple:
    return (records.ShareGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id),
            records.ShareGroupMemberMetadataValue(rack_id=member.rack_id, client_id=member.client_id,
                                                  client_host=member.client_host,
                                                  subscribed_topic_names=sorted(member.subscribed_topic_names)))


def target_assignment_record(group_id: str, member_id: str, assignment: Assignment) -> tuple:
    value_class = records.ShareGroupTargetAssignmentMemberValue
    return (records.ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
            value_class(topic_partitions=topic_partitions(value_class.TopicPartition, assignment)))


def assignment_epoch_record(group_id: str, assignment_epoch: int) -> tuple:
    return (records.ShareGroupTargetAssignmentMetadataKey(group_id=group_id),
            records.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=assignment_epoch))


def current_assignment_record(group_id: str, member: ShareGroupMember) -> tuple:
    value_class = records.ShareGroupCurrentMemberAssignmentValue
    return (records.ShareGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member.member_id),
            value_class(member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
                        state=int(member.state),
                        assigned_partitions=topic_partitions(value_class.TopicPartitions,
                                                             member.assigned_partitions)))


def state_partition_metadata_record(group_id: str, initializing: Mapping[uuid.UUID, TopicPartitionsInfo],
                                    initialized: Mapping[uuid.UUID, TopicPartitionsInfo],
                                    deleting: Mapping[uuid.UUID, str]) -> tuple:
    value_class = records.ShareGroupStatePartitionMetadataValue

    def infos(topics: Mapping[uuid.UUID, TopicPartitionsInfo]) -> list:
        return [value_class.TopicPartitionsInfo(topic_id=topic_id, topic_name=topics[topic_id].topic_name,
                                                partitions=sorted(topics[topic_id].partitions))
                for topic_id in sorted(topics, key=str)]

    return (records.ShareGroupStatePartitionMetadataKey(group_id=group_id),
            value_class(initializing_topics=infos(initializing), initialized_topics=infos(initialized),
                        deleting_topics=[value_class.TopicInfo(topic_id=topic_id, topic_name=deleting[topic_id])
                                         for topic_id in sorted(deleting, key=str)]))


def member_tombstones(group_id: str, member_id: str) -> list[tuple]:
    """A member leaving, in Kafka's order: its assignment (releasing its partitions), its target, itself."""
    return [(key_class(group_id=group_id, member_id=member_id), None)
            for key_class in (records.ShareGroupCurrentMemberAssignmentKey,
                              records.ShareGroupTargetAssignmentMemberKey, records.ShareGroupMemberMetadataKey)]


def snapshot_records(group_id: str, group: StoredShareGroup) -> list[tuple]:
    """Every record that rebuilds ``group`` from nothing (what compaction leaves of its log)."""
    if not group.exists:
        return []
    snapshot = [member_metadata_record(group_id, member) for member in group.members.values()]
    snapshot.append(group_epoch_record(group_id, group.group_epoch, group.metadata_hash))
    snapshot += [target_assignment_record(group_id, member_id, assignment)
                 for member_id, assignment in group.target_assignment.items()]
    snapshot.append(assignment_epoch_record(group_id, group.assignment_epoch))
    snapshot += [current_assignment_record(group_id, member) for member in group.members.values()]
    if group.state_partitions_recorded:
        snapshot.append(state_partition_metadata_record(group_id, group.initializing, group.initialized,
                                                        group.deleting))
    return snapshot


def deletion_records(group_id: str, group: StoredShareGroup) -> list[tuple]:
    """The tombstones that delete the group, in Kafka's order (ShareGroup.createGroupTombstoneRecords)."""
    tombstones = [(records.ShareGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None)
                  for member_id in group.members]
    tombstones += [(records.ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None)
                   for member_id in group.members]
    tombstones.append((records.ShareGroupTargetAssignmentMetadataKey(group_id=group_id), None))
    tombstones += [(records.ShareGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None)
                   for member_id in group.members]
    tombstones.append((records.ShareGroupStatePartitionMetadataKey(group_id=group_id), None))
    tombstones.append((records.ShareGroupMetadataKey(group_id=group_id), None))
    return tombstones


# -- the metadata hash (KIP-1101) ---------------------------------------------------------------------------

_TOPIC_HASH_MAGIC = b"\x00"


def metadata_hash(topic_names: Iterable[str], topics: TopicsView) -> int:
    """The hash of the subscribed topics that exist, 0 when none does (Kafka's computeMetadataHash).

    Kafka streams the same fields through XXH3-64 (Utils.computeTopicHash, computeGroupHash): a magic
    byte, the topic id, name and partition count per topic, then the topics' hashes in name order. We
    hash them with BLAKE2b-64 (the standard library has no XXH3), so the value differs from Kafka's:
    a group whose log Kafka wrote gets one more group epoch on its first heartbeat here, nothing else.
    Racks are left out, as no assignor here uses them.
    """
    topic_hashes = sorted((name, _topic_hash(name, *topics.by_name[name])) for name in set(topic_names)
                          if name in topics.by_name)
    if not topic_hashes:
        return 0
    return _int64(b"".join(hashed.to_bytes(8, "little", signed=True) for _, hashed in topic_hashes))


def _topic_hash(name: str, topic_id: uuid.UUID, partition_count: int) -> int:
    return _int64(_TOPIC_HASH_MAGIC + topic_id.bytes + name.encode() + struct.pack("<i", partition_count))


def _int64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)
