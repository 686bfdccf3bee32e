"""Replica placement (kbroker/topics.py assign_replicas): even leaderships, racks before repeats."""

from collections import Counter

from hypothesis import given, strategies as st

from kbroker.metadata.image import BrokerEndpoint
from kbroker.topics import assign_replicas


def brokers(*racks):
    return [BrokerEndpoint(i + 1, "127.0.0.1", 9092 + i, rack) for i, rack in enumerate(racks)]


def test_without_racks_replicas_follow_the_leader_in_id_order():
    assert assign_replicas(brokers(None, None, None), 0, 4, 2) == [[1, 2], [2, 3], [3, 1], [1, 2]]


def test_every_rack_holds_a_replica_and_leaderships_are_spread():
    cluster = brokers("a", "a", "b", "b", "c", "c")
    rack = {b.node_id: b.rack for b in cluster}
    placed = assign_replicas(cluster, 0, 12, 3)
    assert all({rack[r] for r in replicas} == {"a", "b", "c"} for replicas in placed)
    assert Counter(replicas[0] for replicas in placed) == {broker.node_id: 2 for broker in cluster}


def test_a_lopsided_rack_layout_still_spreads_each_partition_over_both_racks():
    cluster = brokers("a", "a", "a", "b")
    rack = {b.node_id: b.rack for b in cluster}
    assert all({rack[r] for r in replicas} == {"a", "b"} for replicas in assign_replicas(cluster, 0, 8, 2))


def test_growing_a_topic_continues_the_rotation():
    cluster = brokers("a", "b", "c")
    assert assign_replicas(cluster, 0, 5, 2)[3:] == assign_replicas(cluster, 3, 2, 2)


@given(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=9), st.integers(1, 9), st.integers(1, 30))
def test_replicas_are_distinct_live_brokers_and_use_as_many_racks_as_they_can(racks, replication, partitions):
    cluster = brokers(*racks)
    replication = min(replication, len(cluster))
    rack = {b.node_id: b.rack for b in cluster}
    for replicas in assign_replicas(cluster, 0, partitions, replication):
        assert len(replicas) == len(set(replicas)) == replication
        assert len({rack[r] for r in replicas}) == min(replication, len(set(racks)))
