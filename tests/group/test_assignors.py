"""The KIP-848 assignors: complete, disjoint, only to subscribers, balanced and sticky."""

from __future__ import annotations

import uuid

from hypothesis import given, settings, strategies as st

from kbroker.group.assignors import MemberSubscription, assign

TOPICS = [uuid.UUID(int=n + 1) for n in range(3)]


def members_of(subscriptions: dict[str, set]) -> dict[str, MemberSubscription]:
    return {m: MemberSubscription(m, frozenset(topics)) for m, topics in subscriptions.items()}


def pairs(assignment) -> set:
    return {(t, p) for topics in assignment.values() for t, ps in topics.items() for p in ps}


def check_valid(members, counts, assignment) -> None:
    seen = []
    for member_id, topics in assignment.items():
        for topic_id, partitions in topics.items():
            assert topic_id in members[member_id].topic_ids, "given a topic it does not subscribe to"
            seen += [(topic_id, p) for p in partitions]
    assert len(seen) == len(set(seen)), "a partition given twice"
    subscribed = {t for m in members.values() for t in m.topic_ids}
    assert set(seen) == {(t, p) for t, c in counts.items() if t in subscribed for p in range(c)}


def test_three_members_on_six_partitions_own_two_each_with_either_assignor():
    members = members_of({"a": {TOPICS[0]}, "b": {TOPICS[0]}, "c": {TOPICS[0]}})
    for name in ("uniform", "range"):
        assignment = assign(name, members, {TOPICS[0]: 6}, {})
        check_valid(members, {TOPICS[0]: 6}, assignment)
        assert sorted(len(a[TOPICS[0]]) for a in assignment.values()) == [2, 2, 2]
    assert assign("range", members, {TOPICS[0]: 7}, {})["a"][TOPICS[0]] == frozenset({0, 1, 2})


def test_uniform_moves_only_what_a_new_member_needs():
    members = members_of({"a": {TOPICS[0]}, "b": {TOPICS[0]}})
    before = assign("uniform", members, {TOPICS[0]: 6}, {})
    members["c"] = MemberSubscription("c", frozenset({TOPICS[0]}))
    after = assign("uniform", members, {TOPICS[0]: 6}, before)
    moved = sum(len(before[m][TOPICS[0]] - after[m].get(TOPICS[0], frozenset())) for m in ("a", "b"))
    assert moved == 2 and len(after["c"][TOPICS[0]]) == 2


@settings(max_examples=200, deadline=None)
@given(
    subscriptions=st.dictionaries(st.sampled_from("abcdefg"), st.sets(st.sampled_from(TOPICS)), min_size=1, max_size=7),
    counts=st.lists(st.integers(0, 12), min_size=3, max_size=3),
    name=st.sampled_from(["uniform", "range"]),
    leaving=st.sampled_from("abcdefg"),
)
def test_assignments_are_complete_disjoint_and_sticky(subscriptions, counts, name, leaving):
    partition_counts = dict(zip(TOPICS, counts))
    members = members_of(subscriptions)
    first = assign(name, members, partition_counts, {})
    check_valid(members, partition_counts, first)
    assert assign(name, members, partition_counts, first) == assign(name, members, partition_counts, first)  # deterministic
    if name == "uniform" and all(m.topic_ids == frozenset(TOPICS) for m in members.values()):
        sizes = [len(pairs({m: a})) for m, a in first.items()]
        assert max(sizes) - min(sizes) <= 1, "unbalanced for equal subscriptions"  # (range balances per topic only)
    if name == "uniform" and leaving in members and len(members) > 1:
        rest = {m: s for m, s in members.items() if m != leaving}
        later = assign(name, rest, partition_counts, first)
        check_valid(rest, partition_counts, later)
        if all(m.topic_ids == frozenset(TOPICS) for m in members.values()):
            for member_id in rest:  # the others keep all they had
                assert pairs({member_id: first[member_id]}) <= pairs({member_id: later[member_id]})


def test_uniform_does_not_swap_partitions_because_of_a_member_with_nothing_to_take():
    # "c" subscribes only to a topic with no partitions: it must not shrink a's and b's shares.
    members = members_of({"a": {TOPICS[0]}, "b": {TOPICS[0]}, "c": {TOPICS[1]}})
    current = {"a": {TOPICS[0]: frozenset({3, 4, 5})}, "b": {TOPICS[0]: frozenset({0, 1, 2})}}
    assert assign("uniform", members, {TOPICS[0]: 6}, current) == {
        "a": {TOPICS[0]: frozenset({3, 4, 5})}, "b": {TOPICS[0]: frozenset({0, 1, 2})}, "c": {}}


@settings(max_examples=200, deadline=None)
@given(
    subscriptions=st.dictionaries(st.sampled_from("abcdefg"), st.sets(st.sampled_from(TOPICS)), min_size=1, max_size=7),
    counts=st.lists(st.integers(0, 12), min_size=3, max_size=3),
)
def test_uniform_leaves_its_own_assignment_alone(subscriptions, counts):
    partition_counts = dict(zip(TOPICS, counts))
    members = members_of(subscriptions)
    first = assign("uniform", members, partition_counts, {})
    assert assign("uniform", members, partition_counts, first) == first


@settings(max_examples=200, deadline=None)
@given(existing=st.integers(1, 6), counts=st.lists(st.integers(0, 12), min_size=3, max_size=3))
def test_uniform_a_joining_member_takes_only_its_share(existing, counts):
    partition_counts = dict(zip(TOPICS, counts))
    members = members_of({f"m{n}": set(TOPICS) for n in range(existing)})
    before = assign("uniform", members, partition_counts, {})
    members["new"] = MemberSubscription("new", frozenset(TOPICS))
    after = assign("uniform", members, partition_counts, before)
    check_valid(members, partition_counts, after)
    moved = len(pairs(before) - {pair for m in before for pair in pairs({m: after[m]})})
    assert moved == len(pairs({"new": after["new"]})) == sum(counts) // (existing + 1)
