"""The share groups' ``simple`` assignor (KIP-932; Kafka's SimpleAssignor), pure: who gets which partitions."""

from __future__ import annotations

import uuid
from typing import Mapping

from kbroker.group.reconciliation import Assignment, normalized


def assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], assignable: Mapping[uuid.UUID, frozenset[int]],
           current: Mapping[str, Assignment]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """The share groups' ``simple`` assignor (KIP-932; Kafka's SimpleAssignor): the target of every member.

    Every assignable partition of a topic someone subscribes to goes to at least one subscriber; with more
    members than partitions a partition goes to several, each shared by ``ceil(members / partitions)``.
    When every member subscribes to the same (existing) topics, their partitions make one pool shared all
    together; otherwise each topic is shared among its own subscribers, as Kafka's homogeneous and
    heterogeneous builders do. Balance comes first (the numbers a member
    holds differ by at most one), then stickiness: a member keeps what it has while balance allows, so a
    balanced assignment stays as it is. Deterministic: ties go by member id, then partition.
    """
    members = sorted(subscriptions)
    owned: dict[str, list[tuple[uuid.UUID, int]]] = {member_id: [] for member_id in members}
    topic_sets = {subscriptions[member_id] for member_id in members}
    topics = sorted({topic_id for topic_set in topic_sets for topic_id in topic_set if topic_id in assignable}, key=str)
    if len(topic_sets) == 1:
        pools = [(members, [(topic_id, partition) for topic_id in topics
                            for partition in sorted(assignable[topic_id])])]
    else:
        pools = [([member_id for member_id in members if topic_id in subscriptions[member_id]],
                  [(topic_id, partition) for partition in sorted(assignable[topic_id])]) for topic_id in topics]
    for pool_members, partitions in pools:
        for member_id, pairs in _share_out(pool_members, partitions, current).items():
            owned[member_id] += pairs
    result: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for member_id, pairs in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in pairs:
            by_topic.setdefault(topic_id, set()).add(partition)
        result[member_id] = normalized(by_topic)
    return result


def _share_out(members: list[str], partitions: list[tuple[uuid.UUID, int]],
               current: Mapping[str, Assignment]) -> dict[str, list[tuple[uuid.UUID, int]]]:
    """Share ``partitions`` among ``members`` (both sorted): each partition to ``sharing`` members, each
    member ``slots // members`` of the ``slots = sharing * partitions``, the remainder one more each."""
    owned: dict[str, list[tuple[uuid.UUID, int]]] = {member_id: [] for member_id in members}
    if not members or not partitions:
        return owned
    sharing = -(-len(members) // len(partitions))
    base, extra = divmod(sharing * len(partitions), len(members))
    pool = set(partitions)
    held = {member_id: sorted((topic_id, partition) for topic_id, numbers in current.get(member_id, {}).items()
                              for partition in numbers if (topic_id, partition) in pool)
            for member_id in members}
    # The members holding the most get the extra slots, so that a balanced assignment stays put.
    by_holding = sorted(members, key=lambda member_id: (-len(held[member_id]), member_id))
    quota = {member_id: base + (1 if rank < extra else 0) for rank, member_id in enumerate(by_holding)}
    owners: dict[tuple[uuid.UUID, int], list[str]] = {pair: [] for pair in partitions}

    # 1. Keep what each member holds, up to its quota and the partition's sharing.
    for member_id in members:
        for pair in held[member_id]:
            if len(owned[member_id]) < quota[member_id] and len(owners[pair]) < sharing:
                owned[member_id].append(pair)
                owners[pair].append(member_id)

    # 2. Fill the partitions with the fewest owners first (so every partition has one before any has two),
    #    each from the members with room, in turn.
    for level in range(sharing):
        for pair in partitions:
            if len(owners[pair]) == level:
                _add_owner(pair, members, owned, owners, quota)
    return owned


def _add_owner(pair: tuple[uuid.UUID, int], members: list[str], owned: dict, owners: dict, quota: dict) -> None:
    with_room = [member_id for member_id in members if len(owned[member_id]) < quota[member_id]]
    taker = min((member_id for member_id in with_room if member_id not in owners[pair]),
                key=lambda member_id: (len(owned[member_id]) - quota[member_id], member_id), default=None)
    if taker is not None:
        owned[taker].append(pair)
        owners[pair].append(taker)
        return
    # Every member with room holds this partition already: one of them takes a partition from another
    # member, which takes this one instead. Counts stay within quota; if no such swap exists, the
    # partition keeps the owners it has (at least one, since someone with room holds it).
    for needy in with_room:
        for giver in members:
            if giver == needy or giver in owners[pair]:
                continue
            movable = [other for other in owned[giver] if needy not in owners[other]]
            if movable:
                moved = movable[-1]
                owned[giver].remove(moved)
                owners[moved].remove(giver)
                owned[needy].append(moved)
                owners[moved].append(needy)
                owned[giver].append(pair)
                owners[pair].append(giver)
                return
