"""KIP-848 reconciliation: how one member's assignment converges on its target, revoking first.

The facts are Kafka's ``CurrentAssignmentBuilder`` and ``MemberState``. A
member moves to a new epoch only once it owns nothing it must give up:

``STABLE``                 at its epoch, owning what the target says (or waiting for a newer target);
``UNREVOKED_PARTITIONS``   still at the old epoch, asked to revoke ``partitions_pending_revocation``;
                           it advances once a heartbeat's owned partitions no longer list them;
``UNRELEASED_PARTITIONS``  at the target epoch, but some target partitions still belong to a
                           previous owner (their current epoch is set); they are added when freed.

Pure functions over immutable members; the group (:mod:`kbroker.group.consumer`)
persists every change as a ConsumerGroupCurrentMemberAssignment record.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping

# topic id -> partition numbers; topics with no partition are left out, so equal assignments compare equal
Assignment = Mapping[uuid.UUID, frozenset[int]]

NO_EPOCH = -1  # the current epoch of a partition nobody owns


class MemberState(enum.IntEnum):
    """Kafka's MemberState; the value is what ConsumerGroupCurrentMemberAssignmentValue.state stores."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        # A state written by a newer broker is unknown here: such a member is fenced on its next heartbeat.
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member as its two records describe it: metadata (who and what it subscribes to) and
    current assignment (epochs, state, partitions). Defaults are Kafka's for a member not yet known."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, member_epoch: int, **changes) -> ConsumerGroupMember:
        """Kafka's ``updateMemberEpoch``: the epoch it had becomes the previous one (a member whose
        answer was lost may come back once with it)."""
        return replace(self, member_epoch=member_epoch, previous_member_epoch=self.member_epoch, **changes)


def normalized(assignment: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {topic_id: frozenset(partitions) for topic_id, partitions in assignment.items() if partitions}


def owned_from_request(topic_partitions) -> dict[uuid.UUID, frozenset[int]] | None:
    """The heartbeat's ``topic_partitions`` (None when the member left them out as unchanged)."""
    if topic_partitions is None:
        return None
    owned: dict[uuid.UUID, set[int]] = {}
    for topic in topic_partitions:
        owned.setdefault(topic.topic_id, set()).update(topic.partitions)
    return normalized(owned)


def is_subset(owned: Assignment | None, assignment: Assignment) -> bool:
    """Whether the member owns only partitions of ``assignment`` (an unknown ownership is not)."""
    if owned is None:
        return False
    return all(partitions <= assignment.get(topic_id, frozenset()) for topic_id, partitions in owned.items())


def owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member still owns one of ``partitions``; when it did not say, assume it does."""
    if owned is None:
        return True
    return any(owned_partitions & partitions.get(topic_id, frozenset()) for topic_id, owned_partitions in owned.items())


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              current_epoch_of: Callable[[uuid.UUID, int], int], owned: Assignment | None) -> ConsumerGroupMember:
    """The member's next state towards ``target`` at ``target_epoch`` (the same member if it cannot move).

    ``current_epoch_of(topic_id, partition)`` is the epoch of the partition's current owner,
    ``NO_EPOCH`` when free; ``owned`` is what the member's heartbeat says it owns.
    """
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, current_epoch_of, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.partitions_pending_revocation):
            return member
        # Revoked: the member may leave its epoch (Kafka passes epoch + 1 here).
        return _next_assignment(member, member.member_epoch + 1, target_epoch, target, current_epoch_of, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, current_epoch_of, owned)
    # UNKNOWN: only a member that dropped everything may start over.
    if owned is None or owned:
        raise FencedMember("The consumer group member is in an unknown state. "
                           "The member must abandon all its partitions and rejoin.")
    return _next_assignment(member, target_epoch, target_epoch, target, current_epoch_of, owned)


class FencedMember(Exception):
    """The member must drop its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def _next_assignment(member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: Assignment,
                     current_epoch_of: Callable[[uuid.UUID, int], int],
                     owned: Assignment | None) -> ConsumerGroupMember:
    kept: dict[uuid.UUID, frozenset[int]] = {}
    to_revoke: dict[uuid.UUID, frozenset[int]] = {}
    to_assign: dict[uuid.UUID, frozenset[int]] = {}
    has_unreleased = False
    for topic_id in set(target) | set(member.assigned_partitions):
        wanted = target.get(topic_id, frozenset())
        assigned = member.assigned_partitions.get(topic_id, frozenset())
        kept[topic_id] = assigned & wanted
        to_revoke[topic_id] = assigned - wanted
        # A partition another member still holds (at any epoch) is not handed out before it is released.
        free = frozenset(p for p in wanted - assigned if current_epoch_of(topic_id, p) == NO_EPOCH)
        has_unreleased = has_unreleased or len(free) < len(wanted - assigned)
        to_assign[topic_id] = free
    kept, to_revoke, to_assign = normalized(kept), normalized(to_revoke), normalized(to_assign)

    if to_revoke and owns_any(owned, to_revoke):
        # Revoke before assign: stay at this epoch until the member confirms the revocation.
        return member.with_epoch(member_epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions=kept,
                                 partitions_pending_revocation=to_revoke)
    for topic_id, partitions in to_assign.items():
        kept[topic_id] = kept.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    return member.with_epoch(target_epoch, state=state, assigned_partitions=kept, partitions_pending_revocation={})
