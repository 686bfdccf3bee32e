"""The share groups' simple assignor (kbroker/group/share_assignor.py): Kafka's SimpleAssignor table,
stickiness, determinism, and random subscriptions checked for coverage and balance."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from kbroker.group.share_assignor import assign

T1, T2, T3 = (uuid.UUID(int=n) for n in (1, 2, 3))


def owners_of(assignment) -> dict[tuple[uuid.UUID, int], int]:
    owners: dict = {}
    for topics in assignment.values():
        for topic, partitions in topics.items():
            for partition in partitions:
                owners[(topic, partition)] = owners.get((topic, partition), 0) + 1
    return owners


@pytest.mark.parametrize("subscriptions, assignable, expected", [
    # one member takes everything
    ({"a": {T1}}, {T1: 3}, {"a": {T1: {0, 1, 2}}}),
    # more members than partitions: the partition goes to each
    ({"a": {T1}, "b": {T1}, "c": {T1}}, {T1: 1}, {"a": {T1: {0}}, "b": {T1: {0}}, "c": {T1: {0}}}),
    # balanced, dealt in member and partition order
    ({"a": {T1}, "b": {T1}}, {T1: 4}, {"a": {T1: {0, 2}}, "b": {T1: {1, 3}}}),
    ({"a": {T1}, "b": {T1}}, {T1: 3}, {"a": {T1: {0, 1}}, "b": {T1: {2}}}),
    # homogeneous over two topics: one pool
    ({"a": {T1, T2}, "b": {T1, T2}}, {T1: 1, T2: 1}, {"a": {T1: {0}}, "b": {T2: {0}}}),
    # heterogeneous: each topic among its own subscribers
    ({"a": {T1}, "b": {T1, T2}}, {T1: 2, T2: 2}, {"a": {T1: {0}}, "b": {T1: {1}, T2: {0, 1}}}),
    # nothing assignable (not initialized), or no subscription
    ({"a": {T1}}, {}, {"a": {}}),
    ({"a": set(), "b": {T1}}, {T1: 2}, {"a": {}, "b": {T1: {0, 1}}}),
])
def test_the_assignor_table(subscriptions, assignable, expected):
    result = assign({m: frozenset(t) for m, t in subscriptions.items()},
                    {t: frozenset(range(n)) for t, n in assignable.items()}, {})
    assert result == {m: {t: frozenset(p) for t, p in topics.items()} for m, topics in expected.items()}


def test_the_assignor_is_sticky_where_balance_allows():
    subscriptions = {m: frozenset({T1}) for m in "abc"}
    assignable = {T1: frozenset(range(6))}
    current = {"a": {T1: frozenset({4, 5})}, "b": {T1: frozenset({0, 1})}, "c": {T1: frozenset({2, 3})}}
    assert assign(subscriptions, assignable, current) == current  # balanced: nothing moves
    # A fourth member: six partitions go 2, 2, 1, 1, so it takes one from one of the others; the rest stays.
    grown = assign({**subscriptions, "d": frozenset({T1})}, assignable, current)
    moved = sum(len(current[m][T1] - grown[m].get(T1, frozenset())) for m in "abc")
    assert moved == 1 and len(grown["d"][T1]) == 1
    # A member leaving: the others keep theirs and split its partitions.
    shrunk = assign({"a": frozenset({T1}), "b": frozenset({T1})}, assignable, current)
    assert current["a"][T1] <= shrunk["a"][T1] and current["b"][T1] <= shrunk["b"][T1]


def test_the_assignor_swaps_when_the_only_member_with_room_has_the_partition_already():
    # Two partitions among three members: each partition twice, a (first by id) holds two. a keeps 1, b and
    # c keep 0: 1 needs a second owner and only a has room, so a takes 0 from b, which takes 1 instead.
    subscriptions = {m: frozenset({T1}) for m in "abc"}
    current = {"a": {T1: frozenset({1})}, "b": {T1: frozenset({0})}, "c": {T1: frozenset({0})}}
    result = assign(subscriptions, {T1: frozenset({0, 1})}, current)
    assert result == {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({1})}, "c": {T1: frozenset({0})}}


def test_the_assignor_is_deterministic_whatever_the_order_of_its_inputs():
    subscriptions = {m: frozenset({T1, T2}) for m in "dcba"}
    assignable = {T2: frozenset(range(3)), T1: frozenset(range(2))}
    reordered = {m: subscriptions[m] for m in sorted(subscriptions)}
    assert assign(subscriptions, assignable, {}) == assign(reordered, dict(sorted(assignable.items())), {})


@settings(max_examples=300, deadline=None)
@given(subscriptions=st.dictionaries(st.sampled_from("abcdefgh"), st.frozensets(st.sampled_from([T1, T2, T3])),
                                     min_size=1),
       counts=st.fixed_dictionaries({T1: st.integers(0, 7), T2: st.integers(0, 3), T3: st.integers(0, 2)}),
       seed=st.randoms(use_true_random=False))
def test_every_subscribed_partition_is_assigned_balanced_to_subscribers_only(subscriptions, counts, seed):
    assignable = {t: frozenset(range(n)) for t, n in counts.items() if n}
    # a random previous assignment, possibly stale (partitions and members that are gone)
    current = {m: {t: frozenset(p for p in range(9) if seed.random() < 0.3) for t in (T1, T2, T3)}
               for m in "abcdefghij" if seed.random() < 0.6}
    result = assign(subscriptions, assignable, current)
    assert result.keys() == subscriptions.keys()
    subscribed = {t for topics in subscriptions.values() for t in topics}
    owners = owners_of(result)
    assert owners.keys() == {(t, p) for t, ps in assignable.items() if t in subscribed for p in ps}
    for member_id, topics in result.items():
        assert topics.keys() <= subscriptions[member_id] and all(topics.values())
    if len(set(subscriptions.values())) == 1:  # homogeneous: one balanced pool
        sizes = [sum(len(p) for p in topics.values()) for topics in result.values()]
        assert max(sizes) - min(sizes) <= 1
        members, partitions = len(subscriptions), len(owners)
        if partitions:
            assert set(owners.values()) == {-(-members // partitions)}
    else:  # each topic balanced among its subscribers
        for topic in subscribed & assignable.keys():
            sizes = [len(result[m].get(topic, ())) for m in subscriptions if topic in subscriptions[m]]
            assert max(sizes) - min(sizes) <= 1
    assert assign(subscriptions, assignable, result) == result  # its own output is stable
