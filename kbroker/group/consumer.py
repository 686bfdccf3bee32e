"""One KIP-848 consumer group: ConsumerGroupHeartbeat as a state machine.

The behaviour is Kafka's ``ConsumerGroup`` with the consumer-group parts of its
``GroupMetadataManager``; the reconciliation of one member is
:mod:`kbroker.group.reconciliation`. Pure: inputs carry ``now_ms``, outputs are
a response value and effects (:mod:`kbroker.effects`).

Three epochs drive it. A change of membership or subscriptions bumps the
*group epoch*; a target assignment is then computed by the server-side
assignor for that epoch (the *assignment epoch*); each member walks towards its
target at its own *member epoch*, revoking before anything is assigned.

Every change is a ConsumerGroup* record, and the group changes only by applying
its own records (as Kafka's coordinator replays what it writes), so
:meth:`ConsumerGroup.replay` of the records rebuilds the same group. Timers
(session, rebalance) are not persisted: a loaded group restarts them.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

from kbroker.group import assignors, records
from kbroker.group import consumer_records as stored
from kbroker.effects import Persist
from kbroker.group.reconciliation import (
    NO_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
    is_subset,
    normalized,
    owned_from_request,
    reconcile,
)
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

HeartbeatResponse = API_BY_NAME["ConsumerGroupHeartbeat"].response_class
_OFFSET_COMMIT_EPOCH_FROM = 9  # OffsetCommit v9+ carries a member epoch (KIP-848)
DescribedGroup = API_BY_NAME["ConsumerGroupDescribe"].response_class.DescribedGroup

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2  # a static member going away for now: its partitions wait for it
_CLIENT_MEMBER_ID_FROM = 1  # ConsumerGroupHeartbeat v1+: the client generates its member id (KIP-1082)
_CONSUMER_MEMBER_TYPE = 1  # ConsumerGroupDescribe v1 member_type: uses the consumer protocol


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default


@dataclass(frozen=True)
class TopicsView:
    """The broker's topics as a group sees them: name -> (topic id, partition count)."""

    by_name: Mapping[str, tuple[uuid.UUID, int]]
    names_by_id: Mapping[uuid.UUID, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names_by_id", {topic_id: name for name, (topic_id, _) in self.by_name.items()})


class _Refused(Exception):
    def __init__(self, error_code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(error_code).name)
        self.error_code = error_code


class ConsumerGroup:
    kind = "consumer"

    def __init__(self, group_id: str, config: ConsumerGroupConfig, now_ms: int,
                 member_id_factory: Callable[[], str]) -> None:
        self.group_id = group_id
        self.config = config
        self.group_epoch = 1  # Kafka 4.4's ModernGroup starts at 1: a new group's first bump makes epoch 2
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}  # subscribed topic -> (id, partitions)
        self.last_change_ms = now_ms
        self._new_member_id = member_id_factory
        self._now_ms = now_ms  # the latest time seen: members met in replay get their session from it
        self._dead = False
        self._static_members: dict[str, str] = {}  # instance id -> member id
        self._partition_epochs: dict[tuple[uuid.UUID, int], int] = {}  # owned partition -> its owner's epoch
        self._session_deadline_ms: dict[str, int] = {}
        self._rebalance_deadline: dict[str, tuple[int, int]] = {}  # member -> (due ms, epoch it must have left)
        self._topics: TopicsView | None = None  # what subscription_metadata was last computed from
        self._regex_matches: dict[str, frozenset[str]] = {}  # per regex, for self._topics
        # The coordinator's ConsumerGroupWrites (kbroker/group/consumer_writes.py), which undoes a write that
        # fails; None: records are persisted as they are (a group on its own, in tests).
        self.writes = None

    @property
    def new_member_id(self) -> Callable[[], str]:
        return self._new_member_id

    @property
    def state(self) -> ConsumerGroupState:
        if self._dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not member.is_reconciled_to(self.assignment_epoch) for member in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return self.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD)

    # -- ConsumerGroupHeartbeat -------------------------------------------------------

    def heartbeat(self, request, api_version: int, client_id: str, client_host: str, topics: TopicsView,
                  now_ms: int) -> tuple[object, list]:
        """Join (member epoch 0), heartbeat, or leave (-1; -2 for a static member): (response, effects)."""
        self._now_ms = now_ms
        written: list = []
        try:
            self._validate(request, api_version)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response = self._leave(request, topics, written)  # no heartbeat interval: 0, as Kafka's
            else:
                response = self._heartbeat(request, client_id, client_host, topics, now_ms, written)
                response.heartbeat_interval_ms = self.config.heartbeat_interval_ms
        except _Refused as refused:
            # Refusals happen before anything is written, so the group is unchanged. Kafka's refusal sets
            # only the error: member epoch and heartbeat interval are left 0.
            response = refusal(refused.error_code, str(refused))
        return response, self._persist(written, now_ms)

    def _validate(self, request, api_version: int) -> None:
        epoch = request.member_epoch
        if (api_version >= _CLIENT_MEMBER_ID_FROM or epoch != 0) and not request.member_id.strip():
            raise _Refused(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if request.instance_id is not None and not request.instance_id.strip():
            raise _Refused(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
        if request.rack_id is not None and not request.rack_id.strip():
            raise _Refused(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise _Refused(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise _Refused(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise _Refused(ErrorCode.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex "
                                                          "must be non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise _Refused(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _Refused(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self.config.assignors:
            raise _Refused(ErrorCode.UNSUPPORTED_ASSIGNOR,
                           f"ServerAssignor {request.server_assignor} is not supported. "
                           f"Supported assignors: {', '.join(self.config.assignors)}.")
        if request.subscribed_topic_regex:
            try:
                re.compile(request.subscribed_topic_regex)
            except (re.error, RecursionError, OverflowError) as error:
                raise _Refused(ErrorCode.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex `{request.subscribed_topic_regex}` is not a valid regular "
                               f"expression: {error}.") from None

    def _heartbeat(self, request, client_id: str, client_host: str, topics: TopicsView, now_ms: int,
                   written: list):
        joining = request.member_epoch == 0
        if self._dead and not joining:
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} not found.")
        if len(self.members) >= self.config.max_size and request.member_id not in self.members:
            raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED,
                           f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        member_id = request.member_id or self._new_member_id()  # v0: the broker names a member that joins without
        owned = owned_from_request(request.topic_partitions)
        if request.instance_id is None:
            member = self._dynamic_member(member_id, request.member_epoch, owned, joining)
        else:
            member = self._static_member(member_id, request.member_epoch, request.instance_id, owned, joining, written)
        self._dead = False

        # 1. The member's metadata; a changed subscription (or topic metadata) bumps the group epoch.
        updated = _with_request(member, request, client_id, client_host)
        subscription_changed = False
        if updated != member or member_id not in self.members:
            self._write(written, *stored.member_metadata_record(self.group_id, updated))
            subscription_changed = (updated.subscribed_topic_names != member.subscribed_topic_names
                                    or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        self._refresh_subscriptions(topics, written, bump=subscription_changed)

        # 2. A new target assignment for a newer group epoch.
        if self.group_epoch > self.assignment_epoch:
            self._update_target_assignment(written)

        # 3. The member walks towards its target.
        reconciled = self._reconcile(self.members[member_id], owned, now_ms, written)
        self._session_deadline_ms[member_id] = now_ms + self.config.session_timeout_ms

        response = HeartbeatResponse(member_id=member_id, member_epoch=reconciled.member_epoch)
        # The assignment goes out when the member sent everything (it joined, or resent after an error)
        # or when it changed; otherwise null means "unchanged", as KIP-848.
        full_request = joining or (request.rebalance_timeout_ms != -1 and request.topic_partitions is not None and (
            request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None))
        if full_request or reconciled.assigned_partitions != member.assigned_partitions:
            response.assignment = HeartbeatResponse.Assignment(
                topic_partitions=stored.topic_partitions(HeartbeatResponse.Assignment.TopicPartitions,
                                                         reconciled.assigned_partitions))
        return response

    def _dynamic_member(self, member_id: str, epoch: int, owned: Assignment | None, joining: bool):
        member = self.members.get(member_id)
        if member is None:
            if not joining:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Member {member_id} is not a member of group {self.group_id}.")
            return ConsumerGroupMember(member_id)
        self._check_epoch(member, epoch, owned)
        return member

    def _static_member(self, member_id: str, epoch: int, instance_id: str, owned: Assignment | None, joining: bool,
                       written: list):
        existing = self.members.get(self._static_members.get(instance_id, ""))
        if joining:
            if existing is None:
                return ConsumerGroupMember(member_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise _Refused(ErrorCode.UNRELEASED_INSTANCE_ID,
                               f"Static member {member_id} with instance id {instance_id} cannot join the group "
                               f"because the instance id is owned by {existing.member_id} member.")
            # The instance is back under a new member id: it takes over the partitions kept for it.
            replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            target = self.target_assignment.get(existing.member_id, {})
            self._remove_member_records(existing.member_id, written)
            self._write(written, *stored.member_metadata_record(self.group_id, replacement))
            self._write(written, *stored.target_assignment_record(self.group_id, member_id, target))
            self._write(written, *stored.current_assignment_record(self.group_id, replacement))
            return replacement
        if existing is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise _Refused(ErrorCode.FENCED_INSTANCE_ID,
                           f"Static member {member_id} with instance id {instance_id} was fenced by member "
                           f"{existing.member_id}.")
        self._check_epoch(existing, epoch, owned)
        return existing

    def _check_epoch(self, member: ConsumerGroupMember, epoch: int, owned: Assignment | None) -> None:
        if epoch > member.member_epoch:
            raise _Refused(ErrorCode.FENCED_MEMBER_EPOCH,
                           f"The consumer group member has a greater member epoch ({epoch}) than the one known by the "
                           f"group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                           "and rejoin.")
        # The previous epoch is accepted with a subset of the assignment: the answer that moved it on may be lost.
        if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                            or not is_subset(owned, member.assigned_partitions)):
            raise _Refused(ErrorCode.FENCED_MEMBER_EPOCH,
                           f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the "
                           f"group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                           "and rejoin.")
        if member.state is MemberState.UNKNOWN and owned != {}:
            raise _Refused(ErrorCode.FENCED_MEMBER_EPOCH, "The consumer group member is in an unknown state. "
                                                          "The member must abandon all its partitions and rejoin.")

    def _reconcile(self, member: ConsumerGroupMember, owned: Assignment | None, now_ms: int, written: list):
        if member.is_reconciled_to(self.assignment_epoch):
            return member
        target = self.target_assignment.get(member.member_id, {})
        updated = reconcile(member, self.assignment_epoch, target, self._current_epoch_of, owned)
        if updated != member:
            self._write(written, *stored.current_assignment_record(self.group_id, updated))
            if updated.state is MemberState.UNREVOKED_PARTITIONS:
                # It must revoke within its rebalance timeout, or be fenced; a new request restarts the clock.
                self._rebalance_deadline[member.member_id] = (now_ms + max(updated.rebalance_timeout_ms, 0),
                                                              updated.member_epoch)
        return updated

    def _leave(self, request, topics: TopicsView, written: list):
        if request.instance_id is None:
            member = self.members.get(request.member_id)
            if member is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                               f"Member {request.member_id} is not a member of group {self.group_id}.")
        else:
            member = self.members.get(self._static_members.get(request.instance_id, ""))
            if member is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
            if member.member_id != request.member_id:
                raise _Refused(ErrorCode.FENCED_INSTANCE_ID,
                               f"Static member {request.member_id} with instance id {request.instance_id} was fenced "
                               f"by member {member.member_id}.")
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Gone for now: its partitions stay with the instance until its session runs out.
            leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
            self._write(written, *stored.current_assignment_record(self.group_id, leaving))
        else:
            self._fence(member.member_id, topics, written)
        return HeartbeatResponse(member_id=member.member_id, member_epoch=request.member_epoch)

    # -- membership and assignment ------------------------------------------------------

    def _fence(self, member_id: str, topics: TopicsView, written: list) -> None:
        """Remove a member that left or was fenced; the others get a new target at once."""
        self._remove_member_records(member_id, written)
        self._refresh_subscriptions(topics, written, bump=True)
        if self.members:
            self._update_target_assignment(written)
        else:  # as Kafka's consumerGroupFenceMembers: the last one gone, the (empty) target is at the new epoch
            self._write(written, records.ConsumerGroupTargetAssignmentMetadataKey(group_id=self.group_id),
                        records.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=self.group_epoch))

    def _remove_member_records(self, member_id: str, written: list) -> None:
        # Kafka's order: the assignment (releasing its partitions), the target, then the member itself.
        for key_class in (records.ConsumerGroupCurrentMemberAssignmentKey,
                          records.ConsumerGroupTargetAssignmentMemberKey, records.ConsumerGroupMemberMetadataKey):
            self._write(written, key_class(group_id=self.group_id, member_id=member_id), None)

    def _refresh_subscriptions(self, topics: TopicsView, written: list, *, bump: bool) -> bool:
        """Recompute the subscribed topics' metadata when the subscriptions or the topics changed;
        bump the group epoch when either did. Whether it was bumped."""
        if bump or topics is not self._topics:
            if topics is not self._topics:
                self._topics, self._regex_matches = topics, {}
            metadata = {name: topics.by_name[name] for name in self.subscribed_topic_names() if name in topics.by_name}
            if metadata != self.subscription_metadata:
                self._write(written, *stored.partition_metadata_record(self.group_id, metadata))
                bump = True
        if bump:
            self._write(written, records.ConsumerGroupMetadataKey(group_id=self.group_id),
                        records.ConsumerGroupMetadataValue(epoch=self.group_epoch + 1))
        return bump

    def _update_target_assignment(self, written: list) -> None:
        topic_ids = {name: topic_id for name, (topic_id, _) in self.subscription_metadata.items()}
        subscriptions = {
            member_id: assignors.MemberSubscription(
                member_id,
                frozenset(topic_ids[name] for name in self._subscribed_names(member) if name in topic_ids),
                member.rack_id)
            for member_id, member in self.members.items()}
        partition_counts = dict(self.subscription_metadata.values())
        assigned = assignors.assign(self.assignor_name(), subscriptions, partition_counts, self.target_assignment)
        for member_id in self.members:
            new = normalized(assigned.get(member_id, {}))
            if new != self.target_assignment.get(member_id):
                self._write(written, *stored.target_assignment_record(self.group_id, member_id, new))
        self._write(written, records.ConsumerGroupTargetAssignmentMetadataKey(group_id=self.group_id),
                    records.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=self.group_epoch))

    def assignor_name(self) -> str:
        """The assignor most members asked for (ties: the configured order), else the default."""
        votes = Counter(member.server_assignor for member in self.members.values()
                        if member.server_assignor in self.config.assignors)
        if not votes:
            return self.config.assignors[0]
        return max(self.config.assignors, key=lambda name: (votes[name], -self.config.assignors.index(name)))

    def subscribed_topic_names(self) -> set[str]:
        """Every topic a member subscribes to, by name or by a regex (resolved against the last topics seen)."""
        names: set[str] = set()
        for member in self.members.values():
            names |= self._subscribed_names(member)
        return names

    def _subscribed_names(self, member: ConsumerGroupMember) -> frozenset[str]:
        if not member.subscribed_topic_regex:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | self._matching(member.subscribed_topic_regex)

    def _matching(self, regex: str) -> frozenset[str]:
        pattern = re.compile(regex)  # validated when the member sent it; Kafka's regexes match whole names
        if self._topics is None:  # loaded, not yet refreshed: the topics the persisted metadata knows
            return frozenset(name for name in self.subscription_metadata if pattern.fullmatch(name))
        matches = self._regex_matches.get(regex)
        if matches is None:
            matches = self._regex_matches[regex] = frozenset(
                name for name in self._topics.by_name if pattern.fullmatch(name))
        return matches

    def _current_epoch_of(self, topic_id: uuid.UUID, partition: int) -> int:
        return self._partition_epochs.get((topic_id, partition), NO_EPOCH)

    # -- timers and metadata ----------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = list(self._session_deadline_ms.values())
        deadlines += [due for due, _ in self._rebalance_deadline.values()]
        return min(deadlines, default=None)

    def tick(self, now_ms: int, topics: TopicsView) -> list:
        """Fence members whose session expired, or who did not revoke within their rebalance timeout."""
        self._now_ms = now_ms
        written: list = []
        for member_id, due in list(self._session_deadline_ms.items()):
            if due <= now_ms and member_id in self.members:
                self._fence(member_id, topics, written)
        for member_id, (due, epoch) in list(self._rebalance_deadline.items()):
            if due <= now_ms:
                del self._rebalance_deadline[member_id]
                member = self.members.get(member_id)
                if member is not None and member.member_epoch == epoch:
                    self._fence(member_id, topics, written)
        return self._persist(written, now_ms)

    def topics_changed(self, topics: TopicsView, now_ms: int) -> list:
        """The broker's topics changed: a new target when what the group subscribes to changed."""
        self._now_ms = now_ms
        written: list = []
        if self.members and self._refresh_subscriptions(topics, written, bump=False):
            self._update_target_assignment(written)
        elif not self.members:
            self._topics, self._regex_matches = topics, {}
        return self._persist(written, now_ms)

    def force_rebalance(self, topics: TopicsView, now_ms: int) -> list | None:
        """A new group epoch and target assignment now, as a changed subscription would bring (a test's fault,
        kbroker/faults.py): every member moves to the new epoch; partitions move only if the assignor moves
        them. None when the group has no members."""
        if not self.members:
            return None
        self._now_ms = now_ms
        written: list = []
        self._refresh_subscriptions(topics, written, bump=True)
        self._update_target_assignment(written)
        return self._persist(written, now_ms)

    # -- offsets and admin ------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, member_epoch: int, api_version: int | None = None) -> int:
        """Whether this member may commit (or fetch) the group's offsets, as Kafka's ConsumerGroup
        validateOffsetCommit: ``api_version`` an OffsetCommit's (None: a fetch or a transactional commit)."""
        # Epoch -1 comes from admin clients and consumers outside the group: allowed while it is empty.
        if member_epoch < 0 and not self.members:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if api_version is not None and api_version < _OFFSET_COMMIT_EPOCH_FROM:
            return ErrorCode.UNSUPPORTED_VERSION  # a KIP-848 member commits with its epoch (v9+)
        if member_epoch != member.member_epoch:  # ahead or behind: STALE_MEMBER_EPOCH, as Kafka's commit check
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def describe(self, topics: TopicsView):
        def assignment(partitions: Assignment):
            # Topics the broker no longer knows are left out, as Kafka does.
            return Member.Assignment(topic_partitions=[
                Member.Assignment.TopicPartitions(topic_id=topic_id, topic_name=topics.names_by_id[topic_id],
                                                  partitions=sorted(partitions[topic_id]))
                for topic_id in sorted(partitions, key=str) if topic_id in topics.names_by_id])

        Member = DescribedGroup.Member
        members = [
            Member(member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
                   member_epoch=member.member_epoch, client_id=member.client_id, client_host=member.client_host,
                   subscribed_topic_names=sorted(member.subscribed_topic_names),
                   subscribed_topic_regex=member.subscribed_topic_regex or "",  # Kafka's member keeps "" for none
                   assignment=assignment(member.assigned_partitions),
                   target_assignment=assignment(self.target_assignment.get(member.member_id, {})),
                   member_type=_CONSUMER_MEMBER_TYPE)
            for member in self.members.values()]
        return DescribedGroup(error_code=ErrorCode.NONE, group_id=self.group_id, group_state=self.state.value,
                              group_epoch=self.group_epoch, assignment_epoch=self.assignment_epoch,
                              assignor_name=self.assignor_name(), members=members)

    # -- records --------------------------------------------------------------------------------

    def _write(self, written: list, key, value) -> None:
        """Change the group by one record, as a replay of it would."""
        written.append((key, value))
        self.replay(key, value)

    def _persist(self, written: list, now_ms: int) -> list:
        if not written:
            return []
        self.last_change_ms = now_ms
        if self.writes is not None:
            return [self.writes.persist(self, tuple(written))]
        return [Persist(tuple(written))]

    def restore(self, rebuilt: ConsumerGroup, now_ms: int) -> None:
        """Take what ``rebuilt`` (this group as its log would rebuild it) holds, after a write that failed.
        Members still here keep their timers; a member that is back gets a whole session, and a rebalance
        timeout if it has partitions to revoke. The subscriptions are computed again at the next change."""
        sessions, rebalances = self._session_deadline_ms, self._rebalance_deadline
        (self.group_epoch, self.assignment_epoch, self.members, self.target_assignment, self.subscription_metadata,
         self._dead, self._static_members, self._partition_epochs) = (
            rebuilt.group_epoch, rebuilt.assignment_epoch, rebuilt.members, rebuilt.target_assignment,
            rebuilt.subscription_metadata, rebuilt._dead, rebuilt._static_members, rebuilt._partition_epochs)
        self._session_deadline_ms = {member_id: sessions.get(member_id, now_ms + self.config.session_timeout_ms)
                                     for member_id in self.members}
        self._rebalance_deadline = {}
        for member_id, (_, epoch) in rebuilt._rebalance_deadline.items():
            kept = rebalances.get(member_id)
            self._rebalance_deadline[member_id] = kept if kept is not None and kept[1] == epoch else (
                now_ms + max(self.members[member_id].rebalance_timeout_ms, 0), epoch)
        self._topics, self._regex_matches = None, {}

    def replay(self, key, value) -> None:
        """Apply one ConsumerGroup* record of this group (``value`` None: a tombstone)."""
        if isinstance(key, records.ConsumerGroupMetadataKey):
            self._dead = value is None
            if value is not None:
                self.group_epoch = value.epoch
        elif isinstance(key, records.ConsumerGroupPartitionMetadataKey):
            self.subscription_metadata = {} if value is None else {
                topic.topic_name: (topic.topic_id, topic.num_partitions) for topic in value.topics}
        elif isinstance(key, records.ConsumerGroupMemberMetadataKey):
            if value is None:
                self._remove_member(key.member_id)
            else:
                old = self.members.get(key.member_id)
                self._put_member(old, stored.with_metadata(old or ConsumerGroupMember(key.member_id), value))
        elif isinstance(key, records.ConsumerGroupTargetAssignmentMemberKey):
            if value is None:
                self.target_assignment.pop(key.member_id, None)
            else:
                self.target_assignment[key.member_id] = stored.assignment_of(value.topic_partitions)
        elif isinstance(key, records.ConsumerGroupTargetAssignmentMetadataKey):
            self.assignment_epoch = -1 if value is None else value.assignment_epoch
        elif isinstance(key, records.ConsumerGroupCurrentMemberAssignmentKey):
            self._replay_current_assignment(key.member_id, value)

    def _replay_current_assignment(self, member_id: str, value) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:  # its partitions are released; the metadata tombstone removes it
                self._put_member(old, replace(old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                              previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                              assigned_partitions={}, partitions_pending_revocation={}))
            return
        self._put_member(old, stored.with_current_assignment(old or ConsumerGroupMember(member_id), value))

    def _put_member(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> None:
        if old is not None:
            self._release_partitions(old)
        for partitions in (new.assigned_partitions, new.partitions_pending_revocation):
            for topic_id, numbers in partitions.items():
                for partition in numbers:
                    self._partition_epochs[(topic_id, partition)] = new.member_epoch
        if new.instance_id is not None:
            self._static_members[new.instance_id] = new.member_id
        self.members[new.member_id] = new
        # A member met in a load gets a whole session to come back, as Kafka schedules it on load.
        self._session_deadline_ms.setdefault(new.member_id, self._now_ms + self.config.session_timeout_ms)
        # Likewise its rebalance timeout, while it has partitions to revoke (a live change restarts it).
        if new.state is not MemberState.UNREVOKED_PARTITIONS or new.member_epoch < 0:
            self._rebalance_deadline.pop(new.member_id, None)
        elif self._rebalance_deadline.get(new.member_id, (0, None))[1] != new.member_epoch:
            self._rebalance_deadline[new.member_id] = (self._now_ms + max(new.rebalance_timeout_ms, 0),
                                                       new.member_epoch)

    def _remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._release_partitions(member)
        if member.instance_id is not None and self._static_members.get(member.instance_id) == member_id:
            del self._static_members[member.instance_id]
        self._session_deadline_ms.pop(member_id, None)
        self._rebalance_deadline.pop(member_id, None)

    def _release_partitions(self, member: ConsumerGroupMember) -> None:
        for partitions in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, numbers in partitions.items():
                for partition in numbers:
                    if self._partition_epochs.get((topic_id, partition)) == member.member_epoch:
                        del self._partition_epochs[(topic_id, partition)]

    def records(self) -> list:
        """Every record that rebuilds this group from nothing, in Kafka's order."""
        snapshot = [stored.member_metadata_record(self.group_id, member) for member in self.members.values()]
        snapshot.append((records.ConsumerGroupMetadataKey(group_id=self.group_id),
                         records.ConsumerGroupMetadataValue(epoch=self.group_epoch)))
        snapshot.append(stored.partition_metadata_record(self.group_id, self.subscription_metadata))
        snapshot += [stored.target_assignment_record(self.group_id, member_id, assignment)
                     for member_id, assignment in self.target_assignment.items()]
        snapshot.append((records.ConsumerGroupTargetAssignmentMetadataKey(group_id=self.group_id),
                         records.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=self.assignment_epoch)))
        snapshot += [stored.current_assignment_record(self.group_id, member) for member in self.members.values()]
        return snapshot

    def persisted_state(self) -> tuple:
        """What the records determine (timers left out): equal for a group and its replay."""
        return (self.group_id, self.state, self.group_epoch, self.assignment_epoch, self.members,
                self.target_assignment, self.subscription_metadata, self._static_members, self._partition_epochs)


# -- the request and the records --------------------------------------------------------------------


def _with_request(member: ConsumerGroupMember, request, client_id: str, client_host: str) -> ConsumerGroupMember:
    """The member with what the heartbeat carries; a field left null keeps its value (KIP-848)."""
    def given(value, current):
        return current if value is None else value

    regex = request.subscribed_topic_regex
    names = request.subscribed_topic_names
    timeout_ms = request.rebalance_timeout_ms
    return replace(
        member, instance_id=given(request.instance_id, member.instance_id),
        rack_id=given(request.rack_id, member.rack_id),
        rebalance_timeout_ms=member.rebalance_timeout_ms if timeout_ms == -1 else timeout_ms,
        server_assignor=given(request.server_assignor, member.server_assignor),
        subscribed_topic_names=member.subscribed_topic_names if names is None else frozenset(names),
        subscribed_topic_regex=member.subscribed_topic_regex if regex is None else (regex or None),
        client_id=client_id, client_host=client_host)


def refusal(error_code: int, message: str | None) -> HeartbeatResponse:
    """A refused ConsumerGroupHeartbeat as Kafka answers it: the error and its message, every other
    field at its default (member epoch 0, heartbeat interval 0)."""
    return HeartbeatResponse(error_code=error_code, error_message=message, member_epoch=0, heartbeat_interval_ms=0)
