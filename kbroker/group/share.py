"""One KIP-932 share group: ShareGroupHeartbeat as a state machine, and its assignor.

The behaviour is Kafka 4.2's ``GroupMetadataManager.shareGroupHeartbeat`` with its ``ShareGroup``,
``ShareGroupMember``, ``ShareGroupAssignmentBuilder`` and the share groups' ``SimpleAssignor``. Pure:
inputs carry ``now_ms``, outputs are a response value and effects (:mod:`kbroker.effects`).

Members of a share group consume the same partitions together (the share-partitions hand out records
one by one, kbroker/share/), so there is nothing to revoke. A change of membership, subscriptions or of
the subscribed topics bumps the *group epoch*; the next heartbeat computes a target assignment for it
(the *assignment epoch*), and each member, when it heartbeats, takes its target at once: its member
epoch becomes the assignment epoch. A member that leaves (epoch -1) or whose session runs out is removed
and the group epoch bumped; the others get a new target on their next heartbeat, as in Kafka.

A partition is assigned only once its share-group state is initialized at the share coordinator (Kafka
4.1+). A heartbeat whose group subscribes to partitions not yet initialized records them as initializing
and returns an :class:`InitializeShareGroupState` effect after its records; whoever carries it out reports
with :meth:`ShareGroup.state_initialized` (or :meth:`ShareGroup.state_initialization_failed`), and the
next heartbeat assigns them. Partitions still initializing after ``initialize_retry_interval_ms`` are
asked for again.

The admin APIs change that record too, on an empty group only (NON_EMPTY_GROUP): AlterShareGroupOffsets
records the partitions it names as initializing and returns the InitializeShareGroupState that sets their
start offsets; DeleteShareGroupOffsets and DeleteGroups record them as deleting while the share coordinator
deletes their state, then as gone (Kafka 4.2's GroupMetadataManager.alterShareGroupOffsets,
sharePartitionsEligibleForOffsetDeletion, completeDeleteShareGroupOffsets, shareGroupBuildPartitionDeleteRequest).

Every change is a ShareGroup* record (kbroker/group/share_records.py), and the group changes only by
applying its own records, so :meth:`ShareGroup.replay` of them rebuilds the same group. What requests
see is every write applied (Kafka's latest timeline state); what :meth:`ShareGroup.describe`, ``state``
and :meth:`ShareGroup.listed` show is only what is durable (Kafka reads those at the committed offset,
DESIGN.md rule 11). A write that fails is undone: the group becomes its durable records with the writes
still on their way applied on top. Session timers are not records: a loaded member gets a whole session.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, NamedTuple

from kbroker.effects import CoordinatorError, Persist
from kbroker.group.consumer import TopicsView
from kbroker.group.consumer_records import topic_partitions
from kbroker.group.reconciliation import Assignment, MemberState, normalized
from kbroker.group.share_assignor import assign
from kbroker.group.share_records import (
    LEAVE_GROUP_MEMBER_EPOCH,
    UNKNOWN_TOPIC_NAME,
    ShareGroupMember,
    StoredShareGroup,
    TopicPartitionsInfo,
    assignment_epoch_record,
    current_assignment_record,
    deletion_records,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    metadata_hash,
    snapshot_records,
    state_partition_metadata_record,
    target_assignment_record,
)
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

HeartbeatResponse = API_BY_NAME["ShareGroupHeartbeat"].response_class
DescribedGroup = API_BY_NAME["ShareGroupDescribe"].response_class.DescribedGroup

GROUP_TYPE = "share"  # ListGroups' group_type, and the protocol type Kafka lists for a share group
ASSIGNOR_NAME = "simple"  # group.share.assignors: Kafka's only share-group assignor
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."  # Kafka's, of UNKNOWN_TOPIC_OR_PARTITION
NO_OFFSETS_MESSAGE = "There is no offset information to delete."  # DeleteShareGroupOffsets' of a topic without any
_JAVA_WHITESPACE = "".join(chr(code) for code in range(0x21))  # what Java's String.trim() strips


class ShareGroupState(enum.Enum):
    """Kafka's ShareGroupState as ListGroups and ShareGroupDescribe name it (a share group is never
    rebalancing: Stable whenever it has members)."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    initialize_retry_interval_ms: int = 30000  # group.share.initialize.retry.interval.ms


@dataclass(frozen=True)
class InitializeShareGroupState:
    """An effect: have the share coordinator initialize these share-partitions' state
    (InitializeShareGroupState, state epoch ``state_epoch``), once the records before it are durable. Their
    start offset is -1 (share.auto.offset.reset decides it) after a heartbeat, whose outcome is reported with
    :meth:`ShareGroup.state_initialized` and :meth:`ShareGroup.state_initialization_failed`; it is
    ``start_offsets``' after AlterShareGroupOffsets, whose failures stay initializing (Kafka's
    persisterInitialize for an alter does not uninitialize them), so only the successes are reported."""

    group_id: str
    state_epoch: int
    partitions: Mapping[uuid.UUID, frozenset[int]]
    start_offsets: Mapping[uuid.UUID, Mapping[int, int]] | None = None


class ListedGroup(NamedTuple):
    """What ListGroups says of the group."""

    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


class _Refused(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def request_error(request) -> tuple[int, str] | None:
    """INVALID_REQUEST and its message for a malformed ShareGroupHeartbeat, else None
    (GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid)."""
    if _blank(request.member_id):
        return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
    if _blank(request.group_id):
        return ErrorCode.INVALID_REQUEST, "GroupId can't be empty."
    if request.rack_id is not None and _blank(request.rack_id):
        return ErrorCode.INVALID_REQUEST, "RackId can't be empty."
    if request.member_epoch == 0:
        if not request.subscribed_topic_names:
            return ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
    elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."
    return None


def group_not_found(group_id: str, member_epoch: int) -> tuple[int, str]:
    """What Kafka answers a ShareGroupHeartbeat for a group that does not exist (a join, epoch 0, creates
    it instead): a heartbeat's and a leave's messages differ, as in GroupMetadataManager."""
    if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
    return ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found."


def not_a_share_group(group_id: str) -> tuple[int, str]:
    """What Kafka answers ShareGroupHeartbeat and ShareGroupDescribe for a group id that a classic or
    consumer group holds, joining or not: groups do not change type between share and the others.
    (The other way round, Kafka's ConsumerGroupHeartbeat and OffsetCommit/OffsetFetch answer
    GROUP_ID_NOT_FOUND "... is not a consumer group.", a classic JoinGroup INCONSISTENT_GROUP_PROTOCOL and
    DescribeGroups GROUP_ID_NOT_FOUND "... is not a classic group." from v6.)"""
    return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."


def _blank(value: str) -> bool:
    return not value.strip(_JAVA_WHITESPACE)


class ShareGroup:
    """A share group. ``members``, the epochs and the target are the group as its writes leave it, what
    the next request sees; ``state``, :meth:`describe` and :meth:`listed` are what is durable."""

    kind = GROUP_TYPE
    protocol_type = GROUP_TYPE

    def __init__(self, group_id: str, config: ShareGroupConfig, now_ms: int) -> None:
        self.group_id = group_id
        self.config = config
        self.last_change_ms = now_ms
        self._now_ms = now_ms  # the latest time seen: members met in replay get their session from it
        self._working = StoredShareGroup()  # every write applied
        self._durable = StoredShareGroup()  # the records known durable
        self._unwritten: list[tuple] = []  # the records of each write on its way, in append order
        self._session_deadline_ms: dict[str, int] = {}
        self._topics: TopicsView | None = None  # what the metadata hash was last checked against

    # -- what the group holds ------------------------------------------------------------------------

    @property
    def group_epoch(self) -> int:
        return self._working.group_epoch

    @property
    def assignment_epoch(self) -> int:
        return self._working.assignment_epoch

    @property
    def members(self) -> Mapping[str, ShareGroupMember]:
        return self._working.members

    @property
    def target_assignment(self) -> Mapping[str, Assignment]:
        return self._working.target_assignment

    @property
    def initialized_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        """The share-partitions whose state the share coordinator has initialized."""
        return {topic_id: info.partitions for topic_id, info in self._working.initialized.items()}

    @property
    def state(self) -> ShareGroupState:
        return _state_of(self._durable)

    def is_empty(self) -> bool:
        """No member, as the next request sees it (what deleting or converting the group asks)."""
        return _state_of(self._working) is not ShareGroupState.STABLE

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for member in self._working.members.values():
            names |= member.subscribed_topic_names
        return names

    # -- ShareGroupHeartbeat ---------------------------------------------------------------------------

    def heartbeat(self, request, client_id: str, client_host: str, topics: TopicsView,
                  now_ms: int) -> tuple[object, list]:
        """Join (member epoch 0), heartbeat, or leave (-1): (response, effects). A refusal changes nothing
        and answers the error alone, as Kafka does."""
        self._now_ms = now_ms
        written: list = []
        initialize = None
        try:
            refusal = request_error(request)
            if refusal is not None:
                raise _Refused(*refusal)
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                response = self._leave(request.member_id, topics, written)
            else:
                response = self._heartbeat(request, client_id, client_host, topics, now_ms, written)
                initialize = self._partitions_to_initialize(topics, now_ms, written)
        except _Refused as refused:
            response = HeartbeatResponse(error_code=refused.error_code, error_message=str(refused))
        effects = self._persist(written)
        if initialize is not None:
            effects.append(initialize)
        return response, effects

    def _heartbeat(self, request, client_id: str, client_host: str, topics: TopicsView, now_ms: int,
                   written: list):
        group, member_id, joining = self._working, request.member_id, request.member_epoch == 0
        if not group.exists and not joining:
            raise _Refused(*group_not_found(self.group_id, request.member_epoch))
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED,
                           f"The share group has reached its maximum capacity of {self.config.max_size} members.")
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Member {member_id} is not a member of group {self.group_id}.")
            member = ShareGroupMember(member_id)
        elif not joining:  # epoch 0 from a known member: it rejoins and gets its assignment again
            _check_epoch(member, request.member_epoch)

        # 1. The member's metadata; a changed subscription, or subscribed topics that changed, bump the group epoch.
        names = request.subscribed_topic_names
        updated = replace(member, rack_id=member.rack_id if request.rack_id is None else request.rack_id,
                          subscribed_topic_names=member.subscribed_topic_names if names is None else frozenset(names),
                          client_id=client_id, client_host=client_host)
        subscription_changed = False
        if updated != member or member_id not in group.members:
            self._write(written, *member_metadata_record(self.group_id, updated))
            subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        # Newly initialized partitions bump the epoch only when no new target is pending anyway (Kafka's
        # shareGroupHeartbeat): that target will cover them.
        bump = subscription_changed or (group.assignment_epoch >= group.group_epoch
                                        and self._initialized_assignment_pending(topics))
        if bump or topics is not self._topics:
            self._topics = topics
            hashed = metadata_hash(self.subscribed_topic_names(), topics)
            bump = bump or hashed != group.metadata_hash
            if bump:
                self._write(written, *group_epoch_record(self.group_id, group.group_epoch + 1, hashed))

        # 2. A new target assignment for a newer group epoch.
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(topics, written)

        # 3. The member takes its target at once: nothing to revoke in a share group.
        reconciled = self._reconcile(group.members[member_id], topics, bump, written)
        self._session_deadline_ms[member_id] = now_ms + self.config.session_timeout_ms

        response = HeartbeatResponse(member_id=member_id, member_epoch=reconciled.member_epoch,
                                     heartbeat_interval_ms=self.config.heartbeat_interval_ms)
        # The assignment goes out on a join, on a full request (it names its subscriptions), or when it changed.
        if joining or names is not None or reconciled.assigned_partitions != member.assigned_partitions:
            response.assignment = HeartbeatResponse.Assignment(topic_partitions=topic_partitions(
                HeartbeatResponse.Assignment.TopicPartitions, reconciled.assigned_partitions))
        return response

    def _leave(self, member_id: str, topics: TopicsView, written: list):
        if not self._working.exists:
            raise _Refused(*group_not_found(self.group_id, LEAVE_GROUP_MEMBER_EPOCH))
        if member_id not in self._working.members:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}.")
        self._fence(member_id, topics, written)
        return HeartbeatResponse(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def _reconcile(self, member: ShareGroupMember, topics: TopicsView, subscription_changed: bool,
                   written: list) -> ShareGroupMember:
        """Kafka's ShareGroupAssignmentBuilder: the target of the assignment epoch, kept to the topics the
        member subscribes to."""
        epoch = self._working.assignment_epoch
        if not subscription_changed and member.is_reconciled_to(epoch):
            return member
        target = _subscribed_only(self._working.target_assignment.get(member.member_id, {}), member, topics)
        if epoch != member.member_epoch:
            updated = replace(member, state=MemberState.STABLE, assigned_partitions=target, member_epoch=epoch,
                              previous_member_epoch=member.member_epoch)
        elif subscription_changed:
            updated = replace(member, assigned_partitions=target)
        else:
            updated = member
        if updated != member:
            self._write(written, *current_assignment_record(self.group_id, updated))
        return updated

    # -- membership and assignment --------------------------------------------------------------------

    def _fence(self, member_id: str, topics: TopicsView, written: list) -> None:
        """Remove a member that left or whose session expired and bump the group epoch; the target is
        computed again at the next heartbeat. The last member's going leaves nothing to assign: the
        assignment epoch moves to the new group epoch (Kafka's shareGroupFenceMember)."""
        for key, value in member_tombstones(self.group_id, member_id):
            self._write(written, key, value)
        self._topics = topics
        hashed = metadata_hash(self.subscribed_topic_names(), topics)
        self._write(written, *group_epoch_record(self.group_id, self._working.group_epoch + 1, hashed))
        if not self._working.members:
            self._write(written, *assignment_epoch_record(self.group_id, self._working.group_epoch))

    def _update_target_assignment(self, topics: TopicsView, written: list) -> None:
        group = self._working
        subscriptions = {member_id: frozenset(topics.by_name[name][0] for name in member.subscribed_topic_names
                                              if name in topics.by_name)
                         for member_id, member in group.members.items()}
        assigned = assign(subscriptions, self._assignable_partitions(topics), group.target_assignment)
        for member_id in group.members:
            new = assigned.get(member_id, {})
            if group.target_assignment.get(member_id) != new:
                self._write(written, *target_assignment_record(self.group_id, member_id, new))
        self._write(written, *assignment_epoch_record(self.group_id, group.group_epoch))

    def _assignable_partitions(self, topics: TopicsView) -> dict[uuid.UUID, frozenset[int]]:
        """The initialized share-partitions of topics that exist (Kafka's topicAssignablePartitionsMap)."""
        assignable = {}
        for topic_id, info in self._working.initialized.items():
            name = topics.names_by_id.get(topic_id)
            if name is not None:
                count = topics.by_name[name][1]
                partitions = frozenset(partition for partition in info.partitions if partition < count)
                if partitions:
                    assignable[topic_id] = partitions
        return assignable

    def _initialized_assignment_pending(self, topics: TopicsView) -> bool:
        """Whether a subscribed topic has initialized partitions that the target does not cover, as after
        an initialization (Kafka's initializedAssignmentPending)."""
        group = self._working
        if not group.members or not group.initialized:
            return False
        subscribed = self.subscribed_topic_names()
        targeted: dict[uuid.UUID, set[int]] = {}
        for assignment in group.target_assignment.values():
            for topic_id, partitions in assignment.items():
                targeted.setdefault(topic_id, set()).update(partitions)
        return any(topics.names_by_id[topic_id] in subscribed and targeted.get(topic_id, set()) != partitions
                   for topic_id, partitions in self._assignable_partitions(topics).items())

    # -- share-group state initialization ----------------------------------------------------------------

    def _partitions_to_initialize(self, topics: TopicsView, now_ms: int,
                                  written: list) -> InitializeShareGroupState | None:
        """Record the subscribed partitions neither initialized nor recently asked for as initializing, and
        the effect that asks for them (Kafka's maybeCreateInitializeShareGroupStateRequest)."""
        group = self._working
        known = {topic_id: info.partitions for topic_id, info in group.initialized.items()}
        if now_ms - group.initializing_since_ms < self.config.initialize_retry_interval_ms:
            for topic_id, info in group.initializing.items():
                known[topic_id] = known.get(topic_id, frozenset()) | info.partitions
        wanted: dict[uuid.UUID, TopicPartitionsInfo] = {}
        for name in sorted(self.subscribed_topic_names()):
            if name in topics.by_name:
                topic_id, count = topics.by_name[name]
                missing = frozenset(range(count)) - known.get(topic_id, frozenset())
                if missing:
                    wanted[topic_id] = TopicPartitionsInfo(name, missing)
        if not wanted:
            return None
        self._record_initializing(wanted, written)
        return InitializeShareGroupState(self.group_id, group.group_epoch,
                                         {topic_id: info.partitions for topic_id, info in wanted.items()})

    def _record_initializing(self, wanted: Mapping[uuid.UUID, TopicPartitionsInfo], written: list) -> None:
        """Record ``wanted`` as initializing beside those that already are (Kafka's
        addInitializingTopicsRecords): a topic initializing is no longer being deleted."""
        group = self._working
        initializing = dict(group.initializing)
        for topic_id, info in wanted.items():
            before = initializing.get(topic_id)
            initializing[topic_id] = info if before is None else TopicPartitionsInfo(
                info.topic_name, before.partitions | info.partitions)
        deleting = {topic_id: name for topic_id, name in group.deleting.items() if topic_id not in initializing}
        self._write(written, *state_partition_metadata_record(self.group_id, initializing, group.initialized,
                                                              deleting))

    def state_initialized(self, partitions: Mapping[uuid.UUID, Iterable[int]], topics: TopicsView,
                          now_ms: int) -> list:
        """The share coordinator initialized these share-partitions (Kafka's initializeShareGroupState):
        they may be assigned from the next heartbeat on."""
        self._now_ms = now_ms
        group, done = self._working, normalized(partitions)
        if not group.exists or not done:
            return []
        initialized = dict(group.initialized)
        for topic_id, numbers in done.items():
            before = initialized.get(topic_id)
            name = topics.names_by_id.get(topic_id) or (before.topic_name if before else UNKNOWN_TOPIC_NAME)
            initialized[topic_id] = TopicPartitionsInfo(name, numbers | (before.partitions if before else frozenset()))
        written: list = []
        self._write(written, *state_partition_metadata_record(
            self.group_id, _without(group.initializing, done), initialized, group.deleting))
        return self._persist(written)

    def state_initialization_failed(self, partitions: Mapping[uuid.UUID, Iterable[int]], now_ms: int) -> list:
        """The share coordinator did not initialize them: no longer initializing, so the next heartbeat
        asks again (Kafka's uninitializeShareGroupState)."""
        self._now_ms = now_ms
        group, failed = self._working, normalized(partitions)
        if not group.exists or not group.initializing or not failed:
            return []
        written: list = []
        self._write(written, *state_partition_metadata_record(
            self.group_id, _without(group.initializing, failed), group.initialized, group.deleting))
        return self._persist(written)

    # -- the admin APIs: AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups -------------------

    def alter_offsets(self, start_offsets: Mapping[uuid.UUID, Mapping[int, int]], topic_names: Mapping[uuid.UUID, str],
                      now_ms: int) -> tuple[InitializeShareGroupState | None, list]:
        """AlterShareGroupOffsets (Kafka's GroupMetadataManager.alterShareGroupOffsets), for share-partitions
        the caller found in the metadata: recorded as initializing, and the InitializeShareGroupState that
        starts them at ``start_offsets`` and at the group epoch, to carry out once that record is durable.
        An empty group only."""
        self._check_empty()
        self._now_ms = now_ms
        wanted = {topic_id: TopicPartitionsInfo(topic_names[topic_id], frozenset(offsets))
                  for topic_id, offsets in start_offsets.items() if offsets}
        if not wanted:
            return None, []
        written: list = []
        self._record_initializing(wanted, written)
        return (InitializeShareGroupState(self.group_id, self._working.group_epoch,
                                          {topic_id: info.partitions for topic_id, info in wanted.items()},
                                          {topic_id: dict(start_offsets[topic_id]) for topic_id in wanted}),
                self._persist(written))

    def begin_offsets_deletion(self, topic_names: Iterable[str], topics: TopicsView,
                               now_ms: int) -> tuple[dict[uuid.UUID, frozenset[int]], list[tuple[str, str]], list]:
        """DeleteShareGroupOffsets, first step (Kafka's sharePartitionsEligibleForOffsetDeletion): (the
        share-partitions whose state to delete, the topics answered UNKNOWN_TOPIC_OR_PARTITION with Kafka's
        message, effects). An initialized topic's partitions are deleted and the topic recorded as deleting;
        a topic deleting already (an earlier deletion did not finish) has all its partitions deleted again;
        a topic the metadata does not have, or with no share-partitions here, is refused. An empty group
        only; a group that never recorded share-partitions answers nothing at all, as Kafka's does."""
        self._check_empty()
        self._now_ms = now_ms
        group = self._working
        if not _has_share_partitions(group):
            return {}, [], []
        initialized, deleting = dict(group.initialized), set(group.deleting)
        deleted: dict[uuid.UUID, frozenset[int]] = {}
        refused: list[tuple[str, str]] = []
        for name in topic_names:
            topic_id, partition_count = topics.by_name.get(name, (None, 0))
            if topic_id is None:
                refused.append((name, UNKNOWN_TOPIC_MESSAGE))
            elif topic_id in initialized:
                deleted[topic_id] = initialized.pop(topic_id).partitions
                deleting.add(topic_id)
            elif topic_id in deleting:
                deleted[topic_id] = frozenset(range(partition_count))
            else:
                refused.append((name, NO_OFFSETS_MESSAGE))
        written: list = []
        self._write(written, *state_partition_metadata_record(self.group_id, group.initializing, initialized,
                                                              _named(deleting, topics)))
        return deleted, refused, self._persist(written)

    def offsets_deleted(self, topic_ids: Iterable[uuid.UUID], topics: TopicsView, now_ms: int) -> list:
        """DeleteShareGroupOffsets, second step (Kafka's completeDeleteShareGroupOffsets): the share
        coordinator deleted these topics' state, so they are no longer deleting."""
        self._now_ms = now_ms
        group, done = self._working, set(topic_ids)
        if not group.exists or not _has_share_partitions(group):
            return []
        written: list = []
        self._write(written, *state_partition_metadata_record(
            self.group_id, group.initializing, group.initialized, _named(set(group.deleting) - done, topics)))
        return self._persist(written)

    def begin_deletion(self, topics: TopicsView, now_ms: int) -> tuple[dict[uuid.UUID, frozenset[int]], list]:
        """DeleteGroups, first step (Kafka 4.1+'s shareGroupBuildPartitionDeleteRequest): every share-partition
        initialized or initializing, and every partition of a topic still deleting (one the metadata still
        has), is recorded as deleting: (those share-partitions, whose state the share coordinator is to
        delete before the group's tombstones are written, effects). An empty group only."""
        self._check_empty()
        self._now_ms = now_ms
        group = self._working
        if not _has_share_partitions(group):
            return {}, []
        doomed: dict[uuid.UUID, TopicPartitionsInfo] = {}
        for source in (group.initialized, group.initializing):
            for topic_id, info in source.items():
                before = doomed.get(topic_id)
                doomed[topic_id] = info if before is None else TopicPartitionsInfo(
                    before.topic_name, before.partitions | info.partitions)
        for topic_id in group.deleting:
            name = topics.names_by_id.get(topic_id)
            if name is not None:  # a topic gone since is left out, as Kafka leaves it
                before = doomed.get(topic_id, TopicPartitionsInfo(name, frozenset()))
                doomed[topic_id] = TopicPartitionsInfo(before.topic_name,
                                                       before.partitions | frozenset(range(topics.by_name[name][1])))
        written: list = []
        self._write(written, *state_partition_metadata_record(
            self.group_id, {}, {}, {topic_id: info.topic_name for topic_id, info in doomed.items()}))
        return {topic_id: info.partitions for topic_id, info in doomed.items()}, self._persist(written)

    def _check_empty(self) -> None:
        if not self.is_empty():
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")

    # -- timers -----------------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        return min(self._session_deadline_ms.values(), default=None)

    def tick(self, now_ms: int, topics: TopicsView) -> list:
        """Remove the members whose session expired."""
        self._now_ms = now_ms
        written: list = []
        for member_id, due in sorted(self._session_deadline_ms.items(), key=lambda item: (item[1], item[0])):
            if due <= now_ms and member_id in self._working.members:
                self._fence(member_id, topics, written)
        return self._persist(written)

    # -- what others see: describe, list, offsets, deletion ----------------------------------------------

    def describe(self, topics: TopicsView):
        """ShareGroupDescribe's answer for this group, from what is durable."""
        group = self._durable
        if not group.exists:
            error_code, message = group_not_found(self.group_id, LEAVE_GROUP_MEMBER_EPOCH)  # "Group ... not found."
            return DescribedGroup(error_code=error_code, error_message=message, group_id=self.group_id)
        Member = DescribedGroup.Member

        def assignment(partitions: Assignment):
            # Topics the broker no longer knows are left out, as Kafka does.
            return Member.Assignment(topic_partitions=[
                Member.Assignment.TopicPartitions(topic_id=topic_id, topic_name=topics.names_by_id[topic_id],
                                                  partitions=sorted(partitions[topic_id]))
                for topic_id in sorted(partitions, key=str) if topic_id in topics.names_by_id])

        members = [Member(member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.member_epoch,
                          client_id=member.client_id, client_host=member.client_host,
                          subscribed_topic_names=sorted(member.subscribed_topic_names),
                          assignment=assignment(member.assigned_partitions))
                   for _, member in sorted(group.members.items())]
        return DescribedGroup(error_code=ErrorCode.NONE, group_id=self.group_id, group_state=_state_of(group).value,
                              group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                              assignor_name=ASSIGNOR_NAME, members=members)

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, GROUP_TYPE, self.state.value, GROUP_TYPE)

    def validate_offset_commit(self, member_id: str, member_epoch: int) -> int:
        """OffsetCommit, OffsetFetch and OffsetDelete do not apply to a share group: Kafka answers
        GROUP_ID_NOT_FOUND ("Group ... is not a consumer group."); its offsets are the share coordinator's."""
        return ErrorCode.GROUP_ID_NOT_FOUND

    def delete(self, now_ms: int) -> list:
        """DeleteGroups, second step: the tombstones of every record of the group; an empty group only
        (NON_EMPTY_GROUP). :meth:`begin_deletion` comes first, for the share coordinator's state."""
        self._check_empty()
        self._now_ms = now_ms
        written: list = []
        for key, value in deletion_records(self.group_id, self._working):
            self._write(written, key, value)
        return self._persist(written)

    # -- records ----------------------------------------------------------------------------------------

    def _write(self, written: list, key, value) -> None:
        """Change the group by one record, as a replay of it would."""
        written.append((key, value))
        self._apply(self._working, key, value)

    def _apply(self, group: StoredShareGroup, key, value) -> None:
        group.apply(key, value, self._now_ms)
        if group is not self._working:
            return
        member_id = getattr(key, "member_id", None)
        if member_id is None:
            self._session_deadline_ms = {member: due for member, due in self._session_deadline_ms.items()
                                         if member in group.members}
        elif member_id not in group.members:
            self._session_deadline_ms.pop(member_id, None)
        else:
            # A member met in a load gets a whole session to come back, as Kafka schedules it on load.
            self._session_deadline_ms.setdefault(member_id, self._now_ms + self.config.session_timeout_ms)

    def _persist(self, written: list) -> list:
        """The Persist of records the group has just applied: kept once durable, undone if they fail."""
        if not written:
            return []
        self.last_change_ms = self._now_ms
        write = tuple(written)
        self._unwritten.append(write)

        def durable(now_ms: int) -> list:
            if self._take(write):
                for key, value in write:
                    self._durable.apply(key, value, now_ms)
            return []

        def failed(error_code: int, now_ms: int) -> list:
            if self._take(write):
                self._restore(now_ms)
            return []

        return [Persist(write, on_durable=durable, on_failure=failed)]

    def _take(self, write: tuple) -> bool:
        for position, candidate in enumerate(self._unwritten):
            if candidate is write:
                del self._unwritten[position]
                return True
        return False

    def _restore(self, now_ms: int) -> None:
        """After a write that failed: the group as its log would rebuild it, with the writes still on their
        way applied on top (Kafka reverts its timeline to the snapshot before the failed batch). Members
        still here keep their sessions; a member that is back gets a whole one."""
        self._now_ms = now_ms
        rebuilt = self._durable.copy()
        for write in self._unwritten:
            for key, value in write:
                rebuilt.apply(key, value, now_ms)
        sessions = self._session_deadline_ms
        self._working = rebuilt
        self._session_deadline_ms = {member_id: sessions.get(member_id, now_ms + self.config.session_timeout_ms)
                                     for member_id in rebuilt.members}
        self._topics = None  # the metadata hash is checked again at the next heartbeat

    def replay(self, key, value) -> None:
        """Apply one ShareGroup* record of this group read back from the log (``value`` None: a
        tombstone): durable by definition."""
        self._apply(self._working, key, value)
        self._durable.apply(key, value, self._now_ms)

    def records(self) -> list:
        """Every record that rebuilds this group from nothing, in Kafka's order."""
        return snapshot_records(self.group_id, self._working)

    def persisted_state(self) -> StoredShareGroup:
        """What the records determine (timers left out): equal for a group and its replay."""
        return self._working.copy()

    def durable_state(self) -> StoredShareGroup:
        """What the durable records determine: what describe and list show."""
        return self._durable.copy()


def _state_of(group: StoredShareGroup) -> ShareGroupState:
    if not group.exists:
        return ShareGroupState.DEAD
    return ShareGroupState.STABLE if group.members else ShareGroupState.EMPTY


def _check_epoch(member: ShareGroupMember, epoch: int) -> None:
    if epoch > member.member_epoch:
        raise _Refused(ErrorCode.FENCED_MEMBER_EPOCH,
                       f"The share group member has a greater member epoch ({epoch}) than the one known by the "
                       f"group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                       "and rejoin.")
    # The previous epoch is accepted: the answer that moved the member on may have been lost.
    if epoch < member.member_epoch and epoch != member.previous_member_epoch:
        raise _Refused(ErrorCode.FENCED_MEMBER_EPOCH,
                       f"The share group member has a smaller member epoch ({epoch}) than the one known by the "
                       f"group coordinator ({member.member_epoch}), and it does not match the previous member "
                       f"epoch ({member.previous_member_epoch}). The member must abandon all its partitions and "
                       "rejoin.")


def _subscribed_only(assignment: Assignment, member: ShareGroupMember, topics: TopicsView) -> Assignment:
    return {topic_id: partitions for topic_id, partitions in assignment.items()
            if topics.names_by_id.get(topic_id) in member.subscribed_topic_names}


def _has_share_partitions(group: StoredShareGroup) -> bool:
    """Whether the group has a ShareGroupStatePartitionMetadata record: Kafka acts on that record's presence
    (one emptied by deletions still stands)."""
    return group.state_partitions_recorded


def _named(topic_ids: Iterable[uuid.UUID], topics: TopicsView) -> dict[uuid.UUID, str]:
    """Deleting topics with the names the metadata gives them now (Kafka's attachTopicName)."""
    return {topic_id: topics.names_by_id.get(topic_id, UNKNOWN_TOPIC_NAME) for topic_id in topic_ids}


def _without(topics: Mapping[uuid.UUID, TopicPartitionsInfo],
             removed: Mapping[uuid.UUID, frozenset[int]]) -> dict[uuid.UUID, TopicPartitionsInfo]:
    left = {}
    for topic_id, info in topics.items():
        partitions = info.partitions - removed.get(topic_id, frozenset())
        if partitions:
            left[topic_id] = TopicPartitionsInfo(info.topic_name, partitions)
    return left
