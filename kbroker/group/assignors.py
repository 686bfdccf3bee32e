"""KIP-848 server-side assignors, ``uniform`` and ``range``, as pure functions.

Both give every partition of a subscribed topic to exactly one member
subscribed to it, and are deterministic for the same inputs.

``uniform`` (Kafka's default) balances the number of partitions per member
and is sticky: a partition stays with its current owner unless balance needs
it elsewhere. ``range`` gives each topic's subscribers, sorted by member id,
contiguous ranges of its partitions, the first ones one more when they do not
divide evenly (Kafka's range assignor).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Mapping

ASSIGNORS = ("uniform", "range")  # the first is the default, as in Kafka's group.consumer.assignors

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class MemberSubscription:
    member_id: str
    topic_ids: frozenset[uuid.UUID]
    rack_id: str | None = None


def assign(assignor_name: str, members: Mapping[str, MemberSubscription], partition_counts: Mapping[uuid.UUID, int],
           current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]]) -> dict[str, Assignment]:
    if assignor_name == "range":
        owned = _range(members, partition_counts)
    elif assignor_name == "uniform":
        owned = _uniform(members, partition_counts, current)
    else:
        raise ValueError(f"unknown assignor {assignor_name!r}")
    return {member_id: _by_topic(owned.get(member_id, ())) for member_id in members}


def _range(members, partition_counts) -> dict[str, list[tuple[uuid.UUID, int]]]:
    owned: dict[str, list[tuple[uuid.UUID, int]]] = {member_id: [] for member_id in members}
    for topic_id, count in partition_counts.items():
        subscribers = sorted(member_id for member_id, member in members.items() if topic_id in member.topic_ids)
        if not subscribers:
            continue
        share, extra = divmod(count, len(subscribers))
        start = 0
        for index, member_id in enumerate(subscribers):
            length = share + (1 if index < extra else 0)
            owned[member_id] += [(topic_id, partition) for partition in range(start, start + length)]
            start += length
    return owned


def _uniform(members, partition_counts, current) -> dict[str, list[tuple[uuid.UUID, int]]]:
    order = sorted(members)
    wanted = sorted(
        ((topic_id, partition) for topic_id, count in partition_counts.items()
         if any(topic_id in members[m].topic_ids for m in order) for partition in range(count)),
        key=lambda tp: (str(tp[0]), tp[1]),
    )
    if not wanted:
        return {member_id: [] for member_id in order}
    valid = set(wanted)
    previous_owner: dict[tuple[uuid.UUID, int], str] = {}
    for member_id in order:
        for topic_id, partitions in current.get(member_id, {}).items():
            for partition in partitions:
                previous_owner.setdefault((topic_id, partition), member_id)
    owned: dict[str, list[tuple[uuid.UUID, int]]] = {}
    taken: set[tuple[uuid.UUID, int]] = set()
    # 1. Keep everything each member already owns and may still own; step 3 takes away only
    #    what balance needs, so an assignment that is already balanced stays exactly as it is.
    for member_id in order:
        kept = []
        for topic_id, partitions in sorted(current.get(member_id, {}).items(), key=lambda item: str(item[0])):
            if topic_id not in members[member_id].topic_ids:
                continue
            for partition in sorted(partitions):
                if (topic_id, partition) in valid and (topic_id, partition) not in taken:
                    kept.append((topic_id, partition))
        owned[member_id] = kept
        taken.update(kept)
    # 2. Hand out the rest, each to the eligible member holding the fewest; among equals its previous owner.
    for topic_pair in wanted:
        if topic_pair in taken:
            continue
        eligible = [m for m in order if topic_pair[0] in members[m].topic_ids]
        chosen = min(eligible, key=lambda m: (len(owned[m]), m != previous_owner.get(topic_pair), order.index(m)))
        owned[chosen].append(topic_pair)
    # 3. Move partitions from the most to the least loaded until no member holds two more than
    #    another that could take one; each move narrows the gap, so len(wanted) moves are plenty.
    for _ in range(len(wanted)):
        if not _move_one(order, members, owned, previous_owner):
            break
    return owned


def _move_one(order, members, owned, previous_owner) -> bool:
    for giver in sorted(order, key=lambda m: -len(owned[m])):
        for taker in sorted(order, key=lambda m: len(owned[m])):
            if len(owned[giver]) - len(owned[taker]) <= 1:
                break
            movable = [tp for tp in owned[giver] if tp[0] in members[taker].topic_ids]
            if movable:
                # Rather one the taker owned before (a move back), else the giver's newest.
                returning = [tp for tp in movable if previous_owner.get(tp) == taker]
                moved = returning[0] if returning else movable[-1]
                owned[giver].remove(moved)
                owned[taker].append(moved)
                return True
    return False


def _by_topic(pairs) -> Assignment:
    grouped: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in pairs:
        grouped.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(partitions) for topic_id, partitions in grouped.items()}
