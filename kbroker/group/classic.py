"""One classic consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup as a state machine.

The behaviour is Kafka's ``ClassicGroup`` with the classic parts of its
``GroupMetadataManager``: the KIP-394 member id handshake, KIP-345 static
members, the initial rebalance delay, rebalance and session timeouts. Pure:
inputs carry ``now_ms``; outputs are effects (:mod:`kbroker.effects`).

A generation's life: members join (PreparingRebalance) until all known ones
have, or the rebalance timeout drops the silent; the generation is bumped and
the leader receives every member's metadata (CompletingRebalance); the
leader's SyncGroup brings the assignments, which are persisted before any
member receives its own: the group becomes Stable, and the members learn
their assignments, only once that record is durable. If it cannot be written
the members waiting hear the error and the group rebalances (Kafka's
GroupMetadataManager does so when the append's future fails); a static
member's new id that cannot be written is undone, the old id is the member
again. (An empty generation whose record fails is only logged by the shell,
as Kafka only warns: nobody waits on it.)

A static member (KIP-345) is known by its group.instance.id (JoinGroup v5+).
When another process joins with that instance id, it takes the member's place
(a new member id, the same assignment) and the old member id is fenced: every
request naming the instance id with the old member id is answered
FENCED_INSTANCE_ID, which is fatal for the client. The instance id is checked
before membership, as Kafka's ``ClassicGroup.validateMember``; answering
UNKNOWN_MEMBER_ID instead makes the old member rejoin and replace the new one,
in turn, for ever.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from kbroker.group import records
from kbroker.effects import Persist, Respond
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

JoinGroupResponse = API_BY_NAME["JoinGroup"].response_class
JoinedMember = JoinGroupResponse.JoinGroupResponseMember
SyncGroupResponse = API_BY_NAME["SyncGroup"].response_class
LeaveGroupResponse = API_BY_NAME["LeaveGroup"].response_class
LeftMember = LeaveGroupResponse.MemberResponse
DescribedGroup = API_BY_NAME["DescribeGroups"].response_class.DescribedGroup
DescribedMember = DescribedGroup.DescribedGroupMember

_MEMBER_ID_REQUIRED_FROM = 4  # JoinGroup v4+: a new member first gets its id (KIP-394)
_GROUP_INSTANCE_ID_FROM = 5  # JoinGroup v5+: group.instance.id (KIP-345)
_SKIP_ASSIGNMENT_FROM = 9  # JoinGroup v9+: a returning static leader is told not to reassign (KIP-814)
_SYNC_PROTOCOL_CHECK_FROM = 5
_BATCH_LEAVE_FROM = 3


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ClassicGroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    session_deadline_ms: int = 0
    join_waiter: int | None = None  # its JoinGroup, while the rebalance is under way
    sync_waiter: int | None = None  # its SyncGroup, while the leader's assignment is awaited
    is_new: bool = False  # joined during this rebalance (the initial delay waits for such)

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((metadata for name, metadata in self.protocols if name == protocol), b"")


class ClassicGroup:
    kind = "classic"

    def __init__(self, group_id: str, config: ClassicGroupConfig, now_ms: int,
                 member_id_factory: Callable[[str], str]) -> None:
        self.group_id = group_id
        self.config = config
        self.state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.last_change_ms = now_ms
        self._new_member_id = member_id_factory
        self._pending: dict[str, int] = {}  # member ids handed out (KIP-394) -> expiry
        self._static: dict[str, str] = {}  # group instance id -> member id
        self._join_deadline_ms: int | None = None  # PreparingRebalance: when the join completes anyway
        self._initial_delay = False  # the join deadline is the initial rebalance delay (a new group)
        self._initial_remaining_ms = 0
        self._sync_deadline_ms: int | None = None  # CompletingRebalance: when silent members are dropped

    # -- JoinGroup ------------------------------------------------------------------

    def join(self, waiter: int, request, api_version: int, client_id: str, client_host: str, now_ms: int) -> list:
        def refuse(code: int) -> list:
            return [Respond(waiter, _join_error(code, request.member_id))]

        if not self.config.min_session_timeout_ms <= request.session_timeout_ms <= self.config.max_session_timeout_ms:
            return refuse(ErrorCode.INVALID_SESSION_TIMEOUT)
        if self.state is GroupState.DEAD:
            return refuse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        protocols = [(protocol.name, bytes(protocol.metadata)) for protocol in request.protocols]
        if not self._supports(request.protocol_type, protocols):
            return refuse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        rebalance_timeout_ms = request.rebalance_timeout_ms if request.rebalance_timeout_ms > 0 else request.session_timeout_ms
        instance_id = request.group_instance_id if api_version >= _GROUP_INSTANCE_ID_FROM else None
        if not request.member_id:
            return self._join_unknown(waiter, request, api_version, instance_id, protocols, rebalance_timeout_ms,
                                      client_id, client_host, now_ms)
        return self._join_known(waiter, request, instance_id, protocols, rebalance_timeout_ms, client_id, client_host, now_ms)

    def _join_unknown(self, waiter, request, api_version, instance_id, protocols, rebalance_timeout_ms,
                      client_id, client_host, now_ms) -> list:
        if len(self.members) + len(self._pending) >= self.config.max_size and instance_id not in self._static:
            return [Respond(waiter, _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, ""))]
        member_id = self._new_member_id(instance_id if instance_id is not None else client_id)  # Kafka's naming
        if instance_id is not None and instance_id in self._static:
            return self._rejoin_static(waiter, member_id, instance_id, request, api_version, protocols,
                                       rebalance_timeout_ms, now_ms)
        if instance_id is None and api_version >= _MEMBER_ID_REQUIRED_FROM:
            self._pending[member_id] = now_ms + request.session_timeout_ms
            return [Respond(waiter, _join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id))]
        member = Member(member_id, instance_id, client_id, client_host, request.session_timeout_ms, rebalance_timeout_ms,
                        request.protocol_type, protocols)
        return self._add_and_rebalance(member, waiter, now_ms)

    def _join_known(self, waiter, request, instance_id, protocols, rebalance_timeout_ms, client_id, client_host,
                    now_ms) -> list:
        member_id = request.member_id
        if member_id in self._pending:
            del self._pending[member_id]
            member = Member(member_id, instance_id, client_id, client_host, request.session_timeout_ms,
                            rebalance_timeout_ms, request.protocol_type, protocols)
            return self._add_and_rebalance(member, waiter, now_ms)
        code = self._validate_member(member_id, instance_id)
        if code:
            return [Respond(waiter, _join_error(code, member_id))]
        member = self.members[member_id]
        effects = self._answer_join(member, ErrorCode.REBALANCE_IN_PROGRESS) if member.join_waiter is not None else []
        same = member.protocols == protocols
        member.protocols, member.session_timeout_ms = protocols, request.session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            member.join_waiter = waiter
            return effects + self._maybe_complete_join(now_ms)
        if self.state is GroupState.COMPLETING_REBALANCE and same or (
                self.state is GroupState.STABLE and same and member_id != self.leader_id):
            # Nothing changed: the member learns the current generation again.
            return effects + [Respond(waiter, self._join_response(member, include_members=member_id == self.leader_id))]
        member.join_waiter = waiter
        return effects + self._prepare_rebalance(now_ms)

    def _rejoin_static(self, waiter, member_id, instance_id, request, api_version, protocols, rebalance_timeout_ms,
                       now_ms) -> list:
        """A known group instance back with a new member id: the new id takes the old one's place
        and assignment, the old id is fenced (Kafka's updateStaticMemberThenRebalanceOrCompleteJoin)."""
        leader_before = self.leader_id
        old = self.members.pop(self._static[instance_id])
        effects = []  # what the old id still waits for is answered at once (Kafka's replaceStaticMember)
        if old.join_waiter is not None:
            effects.append(Respond(old.join_waiter, _join_error(ErrorCode.FENCED_INSTANCE_ID, old.member_id)))
        if old.sync_waiter is not None:
            effects.append(Respond(old.sync_waiter, SyncGroupResponse(error_code=ErrorCode.FENCED_INSTANCE_ID, assignment=b"")))
        member = Member(member_id, instance_id, old.client_id, old.client_host, request.session_timeout_ms,
                        rebalance_timeout_ms, request.protocol_type, protocols, assignment=old.assignment,
                        session_deadline_ms=now_ms + request.session_timeout_ms)
        self.members[member_id] = member
        self._static[instance_id] = member_id
        if self.leader_id == old.member_id:
            self.leader_id = member_id
        if self.state is GroupState.STABLE and self._select_protocol() == self.protocol_name:
            # No rebalance: the member gets the current generation back and syncs for its old assignment.
            if api_version >= _SKIP_ASSIGNMENT_FROM:
                response = self._join_response(member, include_members=member_id == self.leader_id)
                response.skip_assignment = member_id == self.leader_id
            else:  # a leader that does not know skip_assignment is not told it leads: the old id does
                response = self._join_response(member, include_members=False)
                response.leader = leader_before or ""

            def failed(error_code: int, at_ms: int) -> list:
                return self._unreplace_static(old, member, leader_before, waiter, error_code, at_ms)

            return effects + [Persist((self.record(now_ms),), on_durable=lambda at_ms: [Respond(waiter, response)],
                                      on_failure=failed)]
        member.join_waiter = waiter
        if self.state is GroupState.PREPARING_REBALANCE:
            return effects + self._maybe_complete_join(now_ms)
        # CompletingRebalance: the leader may be assigning to the old id, so the group rebalances again.
        return effects + self._prepare_rebalance(now_ms)

    def _unreplace_static(self, old: Member, new: Member, leader_before: str | None, waiter: int, error_code: int,
                          now_ms: int) -> list:
        """The new member id of a static member was not stored: the old id is the member again (its
        requests were answered FENCED_INSTANCE_ID meanwhile, as in Kafka), the new one hears the error."""
        answer = [Respond(waiter, _join_error(error_code, ""))]
        if self.members.get(new.member_id) is not new or self._static.get(new.group_instance_id) != new.member_id:
            return answer  # the group moved on meanwhile
        del self.members[new.member_id]
        old.join_waiter = old.sync_waiter = None
        old.session_deadline_ms = now_ms + old.session_timeout_ms
        self.members[old.member_id] = old
        self._static[old.group_instance_id] = old.member_id
        if self.leader_id == new.member_id:
            self.leader_id = leader_before
        return answer

    def _add_and_rebalance(self, member: Member, waiter: int, now_ms: int) -> list:
        if len(self.members) >= self.config.max_size:
            return [Respond(waiter, _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member.member_id))]
        member.join_waiter = waiter
        member.is_new = True
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self._static[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        if self.protocol_type is None or not self.protocol_type:
            self.protocol_type = member.protocol_type
        if self.state is GroupState.PREPARING_REBALANCE:
            return self._maybe_complete_join(now_ms)
        return self._prepare_rebalance(now_ms)

    def _supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(self._candidate_protocols() & {name for name, _ in protocols})

    def _candidate_protocols(self) -> set[str]:
        members = iter(self.members.values())
        candidates = {name for name, _ in next(members).protocols}
        for member in members:
            candidates &= {name for name, _ in member.protocols}
        return candidates

    def _select_protocol(self) -> str:
        """The candidate most members prefer (each votes for its first candidate); ties go to
        the leader's order of preference."""
        candidates = self._candidate_protocols()
        votes = Counter(next(name for name, _ in member.protocols if name in candidates) for member in self.members.values())
        leader = self.members.get(self.leader_id) or next(iter(self.members.values()))
        order = [name for name, _ in leader.protocols if name in candidates]
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    # -- rebalancing ----------------------------------------------------------------------

    def _prepare_rebalance(self, now_ms: int) -> list:
        effects = []
        if self.state is GroupState.COMPLETING_REBALANCE:  # assignments not yet given are void
            for member in self.members.values():
                member.assignment = b""
                if member.sync_waiter is not None:
                    effects.append(Respond(member.sync_waiter, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS,
                                                                                 assignment=b"")))
                    member.sync_waiter = None
        self._sync_deadline_ms = None
        if self.state is GroupState.EMPTY and self.config.initial_rebalance_delay_ms > 0:
            delay = min(self.config.initial_rebalance_delay_ms, self._max_rebalance_timeout_ms())
            self._initial_delay = True
            self._initial_remaining_ms = max(self._max_rebalance_timeout_ms() - delay, 0)
            self._join_deadline_ms = now_ms + delay
            for member in self.members.values():
                member.is_new = False
        else:
            self._initial_delay = False
            self._join_deadline_ms = now_ms + self._max_rebalance_timeout_ms()
        self.state = GroupState.PREPARING_REBALANCE
        self.last_change_ms = now_ms
        return effects + self._maybe_complete_join(now_ms)

    def force_rebalance(self, now_ms: int) -> list | None:
        """Begin a rebalance now, as a member's changed metadata would (a test's fault, kbroker/faults.py): the
        members hear REBALANCE_IN_PROGRESS at their next heartbeat and join again. None when the group is not
        Stable or CompletingRebalance (empty, or rebalancing already)."""
        if self.state not in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return None
        return self._prepare_rebalance(now_ms)

    def _max_rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    def _maybe_complete_join(self, now_ms: int) -> list:
        if self.state is not GroupState.PREPARING_REBALANCE or self._initial_delay:
            return []
        if self._pending or any(member.join_waiter is None for member in self.members.values()):
            return []
        return self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> list:
        """End the join phase: members that did not rejoin leave; the next generation begins."""
        effects = []
        for member in [m for m in self.members.values() if m.join_waiter is None]:
            self._remove(member)
        self._join_deadline_ms = None
        self._initial_delay = False
        self.generation_id += 1
        self.last_change_ms = now_ms
        if not self.members:
            self.state = GroupState.EMPTY
            self.protocol_name = None
            self.leader_id = None
            return effects + [Persist((self.record(now_ms),))]
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.protocol_name = self._select_protocol()
        self.state = GroupState.COMPLETING_REBALANCE
        self._sync_deadline_ms = now_ms + self._max_rebalance_timeout_ms()
        for member in self.members.values():
            member.is_new = False
            member.session_deadline_ms = now_ms + member.session_timeout_ms
            effects += self._answer_join(member, ErrorCode.NONE)
        return effects

    def _answer_join(self, member: Member, error_code: int) -> list:
        waiter, member.join_waiter = member.join_waiter, None
        if error_code:
            return [Respond(waiter, _join_error(error_code, member.member_id))]
        return [Respond(waiter, self._join_response(member, include_members=member.member_id == self.leader_id))]

    def _join_response(self, member: Member, *, include_members: bool):
        members = []
        if include_members:
            members = [JoinedMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                    metadata=m.metadata_for(self.protocol_name)) for m in self.members.values()]
        return JoinGroupResponse(error_code=ErrorCode.NONE, generation_id=self.generation_id,
                                 protocol_type=self.protocol_type, protocol_name=self.protocol_name,
                                 leader=self.leader_id or "", member_id=member.member_id, members=members)

    def _remove(self, member: Member) -> list:
        """Take ``member`` out, answering what it still waits for."""
        effects = []
        if member.join_waiter is not None:
            effects += self._answer_join(member, ErrorCode.UNKNOWN_MEMBER_ID)
        if member.sync_waiter is not None:
            effects.append(Respond(member.sync_waiter, SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID, assignment=b"")))
            member.sync_waiter = None
        del self.members[member.member_id]
        if member.group_instance_id is not None and self._static.get(member.group_instance_id) == member.member_id:
            del self._static[member.group_instance_id]
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)
        return effects

    def _member_gone(self, member: Member, now_ms: int) -> list:
        """A member left or expired: the others rebalance (or the join completes without it)."""
        effects = self._remove(member)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return effects + self._prepare_rebalance(now_ms)
        if self.state is GroupState.PREPARING_REBALANCE:
            return effects + self._maybe_complete_join(now_ms)
        return effects

    # -- SyncGroup ------------------------------------------------------------------------

    def sync(self, waiter: int, request, api_version: int, now_ms: int) -> list:
        def answer(code: int, assignment: bytes = b"") -> list:
            if code:  # Kafka names the protocol only in an assignment
                return [Respond(waiter, SyncGroupResponse(error_code=code, assignment=b""))]
            return [Respond(waiter, SyncGroupResponse(error_code=code, protocol_type=self.protocol_type,
                                                      protocol_name=self.protocol_name, assignment=assignment))]

        if self.state is GroupState.EMPTY:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if self.state is GroupState.DEAD:
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        code = self._validate_member(request.member_id, request.group_instance_id)
        if code:
            return answer(code)
        member = self.members[request.member_id]
        if request.generation_id != self.generation_id:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        if api_version >= _SYNC_PROTOCOL_CHECK_FROM and (
                (request.protocol_type is not None and request.protocol_type != self.protocol_type)
                or (request.protocol_name is not None and request.protocol_name != self.protocol_name)):
            return answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if self.state is GroupState.PREPARING_REBALANCE:
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.STABLE:
            return answer(ErrorCode.NONE, member.assignment)
        # CompletingRebalance: the leader brings every assignment; the others wait for it.
        if member.sync_waiter is not None:
            previous = member.sync_waiter
            member.sync_waiter = waiter
            effects = [Respond(previous, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS, assignment=b""))]
        else:
            member.sync_waiter = waiter
            effects = []
        if request.member_id != self.leader_id:
            return effects
        given = {item.member_id: bytes(item.assignment) for item in request.assignments}
        generation = self.generation_id

        def durable(at_ms: int) -> list:
            if self.state is GroupState.COMPLETING_REBALANCE and self.generation_id == generation:
                return self._assignment_stored(given, now_ms)
            return []  # the group moved on meanwhile (a member joined or left): nothing to do

        def failed(error_code: int, at_ms: int) -> list:
            if self.state is GroupState.COMPLETING_REBALANCE and self.generation_id == generation:
                return self._assignment_lost(error_code, at_ms)
            return []

        # Durable before anyone learns its assignment; the group stays CompletingRebalance until then.
        effects.append(Persist((self.record(now_ms, assignments=given),), on_durable=durable, on_failure=failed))
        return effects

    def _assignment_stored(self, given: dict[str, bytes], now_ms: int) -> list:
        """The leader's assignment is durable: the generation is Stable and every member waiting learns its part."""
        for member in self.members.values():
            member.assignment = given.get(member.member_id, b"")
        self.state = GroupState.STABLE
        self._sync_deadline_ms = None
        self.last_change_ms = now_ms
        effects = []
        for member in self.members.values():
            if member.sync_waiter is not None:
                effects.append(Respond(member.sync_waiter, SyncGroupResponse(
                    error_code=ErrorCode.NONE, protocol_type=self.protocol_type, protocol_name=self.protocol_name,
                    assignment=member.assignment)))
                member.sync_waiter = None
        return effects

    def _assignment_lost(self, error_code: int, now_ms: int) -> list:
        """The leader's assignment was not stored: the members waiting hear ``error_code`` and the group
        rebalances, as Kafka's resetAndPropagateAssignmentWithError and maybePrepareRebalanceOrCompleteJoin."""
        effects = []
        for member in self.members.values():
            member.assignment = b""
            if member.sync_waiter is not None:
                effects.append(Respond(member.sync_waiter, SyncGroupResponse(error_code=error_code, assignment=b"")))
                member.sync_waiter = None
        return effects + self._prepare_rebalance(now_ms)

    # -- Heartbeat and LeaveGroup ---------------------------------------------------------------

    def heartbeat(self, request, api_version: int, now_ms: int) -> int:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        code = self._validate_member(request.member_id, request.group_instance_id)
        if code:
            return code
        if request.generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = self.members[request.member_id]
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, request, api_version: int, now_ms: int) -> tuple[object, list]:
        if self.state is GroupState.DEAD:
            return LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, members=[]), []
        if api_version < _BATCH_LEAVE_FROM:
            leaving = [(request.member_id, None)]
        else:
            leaving = [(member.member_id, member.group_instance_id) for member in request.members]
        results, effects = [], []
        for member_id, instance_id in leaving:
            code, member_effects = self._leave_one(member_id, instance_id, now_ms)
            results.append(LeftMember(member_id=member_id, group_instance_id=instance_id, error_code=code))
            effects += member_effects
        if api_version < _BATCH_LEAVE_FROM:
            return LeaveGroupResponse(error_code=results[0].error_code, members=[]), effects
        return LeaveGroupResponse(error_code=ErrorCode.NONE, members=results), effects

    def _leave_one(self, member_id: str, instance_id: str | None, now_ms: int) -> tuple[int, list]:
        """Kafka's classicGroupLeaveToClassicGroup for one member: an admin names a static member by
        its instance id alone; a member id with someone else's instance id is fenced."""
        if not member_id:
            member_id = self._static.get(instance_id) if instance_id is not None else None
            if member_id is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, []
        elif member_id in self._pending:
            del self._pending[member_id]
            return ErrorCode.NONE, self._maybe_complete_join(now_ms)
        else:
            code = self._validate_member(member_id, instance_id)
            if code:
                return code, []
        return ErrorCode.NONE, self._member_gone(self.members[member_id], now_ms)

    def _validate_member(self, member_id: str, instance_id: str | None) -> int:
        """Kafka's ClassicGroup.validateMember: the instance id first (an id now held by another
        member id is fenced, KIP-345), then membership."""
        if instance_id is not None:
            holder = self._static.get(instance_id)
            if holder is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if holder != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    # -- offsets, admin ---------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        """Kafka's ClassicGroup.validateOffsetCommit."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return ErrorCode.NONE  # a "simple" commit, from an admin client or a consumer without group management
        if generation_id >= 0 or member_id or group_instance_id is not None:
            code = self._validate_member(member_id, group_instance_id)
            if code:
                return code
            if generation_id != self.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        else:
            return ErrorCode.UNKNOWN_MEMBER_ID  # no member identity: only while the group is empty
        if self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS  # no assignment yet to commit for
        return ErrorCode.NONE

    def describe(self):
        stable = self.state is GroupState.STABLE
        members = [
            DescribedMember(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata_for(self.protocol_name) if stable else b"",
                            member_assignment=m.assignment)  # Kafka's describeNoMetadata keeps it too
            for m in self.members.values()
        ]
        return DescribedGroup(error_code=ErrorCode.NONE, group_id=self.group_id, group_state=self.state.value,
                              protocol_type=self.protocol_type or "", protocol_data=(self.protocol_name or "") if stable else "",
                              members=members)

    # -- timers ------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = list(self._pending.values())
        deadlines += [m.session_deadline_ms for m in self.members.values() if m.join_waiter is None]
        for deadline in (self._join_deadline_ms, self._sync_deadline_ms):
            if deadline is not None:
                deadlines.append(deadline)
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> list:
        effects = []
        for member_id, expiry in list(self._pending.items()):
            if expiry <= now_ms:
                del self._pending[member_id]
                effects += self._maybe_complete_join(now_ms)
        if self._join_deadline_ms is not None and self._join_deadline_ms <= now_ms:
            effects += self._join_deadline_passed(now_ms)
        if self._sync_deadline_ms is not None and self._sync_deadline_ms <= now_ms:
            effects += self._sync_deadline_passed(now_ms)
        for member in list(self.members.values()):
            if member.member_id in self.members and member.join_waiter is None and member.session_deadline_ms <= now_ms:
                effects += self._member_gone(member, now_ms)
        return effects

    def _join_deadline_passed(self, now_ms: int) -> list:
        if self._initial_delay:
            joined_meanwhile = any(member.is_new for member in self.members.values())
            if joined_meanwhile and self._initial_remaining_ms > 0:
                delay = min(self.config.initial_rebalance_delay_ms, self._initial_remaining_ms)
                self._initial_remaining_ms -= delay
                self._join_deadline_ms = now_ms + delay
                for member in self.members.values():
                    member.is_new = False
                return []
            self._initial_delay = False
            if self._pending or any(member.join_waiter is None for member in self.members.values()):
                self._join_deadline_ms = now_ms + self._max_rebalance_timeout_ms()
                return []
        self._pending.clear()
        return self._complete_join(now_ms)

    def _sync_deadline_passed(self, now_ms: int) -> list:
        """Members that did not sync within the rebalance timeout are dropped; the rest rebalance."""
        self._sync_deadline_ms = None
        effects = []
        for member in [m for m in self.members.values() if m.sync_waiter is None]:
            effects += self._remove(member)
        return effects + self._prepare_rebalance(now_ms)

    def unload(self) -> list:
        effects = []
        for member in self.members.values():
            if member.join_waiter is not None:
                effects += self._answer_join(member, ErrorCode.NOT_COORDINATOR)
            if member.sync_waiter is not None:
                effects.append(Respond(member.sync_waiter, SyncGroupResponse(error_code=ErrorCode.NOT_COORDINATOR, assignment=b"")))
                member.sync_waiter = None
        return effects

    # -- records ---------------------------------------------------------------------------

    def record(self, now_ms: int | None = None, assignments: dict[str, bytes] | None = None) -> tuple:
        """The group's GroupMetadata record (key, value); the value is None once the group is Dead.
        ``assignments``: the members' assignments to store, when not yet theirs (a SyncGroup's)."""
        key = records.GroupMetadataKey(group=self.group_id)
        if self.state is GroupState.DEAD:
            return key, None
        members = [
            records.GroupMetadataValue.MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.metadata_for(self.protocol_name),
                assignment=m.assignment if assignments is None else assignments.get(m.member_id, b""))
            for m in self.members.values()
        ]
        value = records.GroupMetadataValue(
            protocol_type=self.protocol_type or "", generation=self.generation_id, protocol=self.protocol_name,
            leader=self.leader_id, current_state_timestamp=self.last_change_ms if now_ms is None else now_ms, members=members)
        return key, value

    @classmethod
    def from_record(cls, group_id: str, value, config: ClassicGroupConfig, now_ms: int,
                    member_id_factory: Callable[[str], str]) -> ClassicGroup:
        """The group as its last GroupMetadata record left it; members get fresh sessions."""
        group = cls(group_id, config, now_ms, member_id_factory)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        for m in value.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout,
                            m.rebalance_timeout, value.protocol_type, [(value.protocol or "", bytes(m.subscription))],
                            assignment=bytes(m.assignment), session_deadline_ms=now_ms + m.session_timeout)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group._static[m.group_instance_id] = m.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        return group


def _join_error(code: int, member_id: str):
    return JoinGroupResponse(error_code=code, generation_id=-1, protocol_name="", leader="", member_id=member_id or "",
                             members=[])
