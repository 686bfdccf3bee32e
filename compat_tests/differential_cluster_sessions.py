"""Scripted sessions for the three-node differential suite (compat_tests/test_differential_cluster.py):
replication's APIs where there is more than one replica.

Each session is a function of one ``testkit.differential.Side`` talking to node 1 of a three-node cluster
(kbroker's, Kafka's), as the one-node sessions are; where a request must reach another node (the leader
after a leader change) the session opens a second connection to it whose exchanges join the same
transcript (``node_side``). Both clusters number their nodes 1, 2 and 3, and each session's first recorded
answer lists the brokers in that order, so that the ``node`` rule's tokens name the same node on both sides
(``<node#2>`` is node 2): replicas, ISRs and leaders are compared as nodes, not only as "the same one".

What is not deterministic in Kafka itself is kept out of the comparison, each in one place:
- where Kafka places the replicas of a topic created without assignments (its StripedReplicaPlacer starts
  from a random broker): those topics' answers are made placement-blind (``placement_blind``), each replica
  named by its place in its partition's replica list, in a session of their own;
- the controller_id of Metadata and DescribeCluster, a random live broker in Kafka's KRaft mode
  (``KafkaApis``: ``getRandomAliveBrokerId``), where kbroker names the active controller: only whether
  there is one is compared (``steady_controller``); so for the metadata quorum's leader, which the
  election made (``steady_leader``);
- how long a follower takes to fetch and join the ISR: reassignments are waited for with unrecorded
  ListPartitionReassignments and Metadata requests (bounded), and only their settled state is recorded.
"""

from __future__ import annotations

import contextlib
import time

from compat_tests.differential_sessions import READY_TIMEOUT_S, metadata, request, values, versions
from compat_tests.differential_sessions_replication import (PREFERRED, UNCLEAN, alter_reassignments, both_serve,
                                                            describe_topic_partitions, elect_leaders,
                                                            list_reassignments, offset_for_leader_epoch)
from compat_tests.differential_sessions_topics import produce_unrecorded
from kbroker.wire.schema import API_BY_NAME
from testkit.differential import Side

POLL_S = 0.1
CreateTopics = API_BY_NAME["CreateTopics"].request_class
DescribeLogDirs = API_BY_NAME["DescribeLogDirs"].request_class


# -- requests and waits ------------------------------------------------------------------------------------

def create_topics(side: Side, version: int, *topics, validate_only: bool = False, record: bool = True):
    """``topics``: (name, partitions, replication factor[, assignments: one list of broker ids a partition])."""
    creatable = CreateTopics.CreatableTopic
    wanted = [creatable(name=name, num_partitions=partitions, replication_factor=replication, configs=[],
                        assignments=[creatable.CreatableReplicaAssignment(partition_index=index, broker_ids=ids)
                                     for index, ids in enumerate(assignments[0] if assignments else [])])
              for name, partitions, replication, *assignments in topics]
    return side.call("CreateTopics", version, request("CreateTopics", topics=wanted, timeout_ms=30000,
                                                      validate_only=validate_only), record=record)


def nodes(side: Side) -> list[int]:
    """The cluster's broker ids in order (an unrecorded Metadata request)."""
    return sorted(broker.node_id for broker in metadata(side, 12, [], record=False).brokers)


def brokers_in_order(side: Side) -> None:
    """The session's first recorded answer: Metadata's brokers, by id on both brokers, so that the node
    rule's tokens follow the node ids."""
    answer = metadata(side, 12, [])
    assert [broker.node_id for broker in answer.brokers] == sorted(b.node_id for b in answer.brokers), answer
    steady_controller(answer)


def described(side: Side, version: int, topics: list[str]):
    """Metadata for ``topics``, recorded with its controller_id steadied."""
    return steady_controller(metadata(side, version, topics))


def steady_controller(answer):
    """The answer with its controller_id reduced to whether there is one (0, or -1 as it was): Kafka's
    brokers in KRaft mode name a random live broker there, kbroker the active controller."""
    if answer is not None and answer.controller_id >= 0:
        answer.controller_id = 0
    return answer


@contextlib.contextmanager
def node_side(side: Side, node_id: int):
    """A second connection, to node ``node_id`` of the side's cluster, whose exchanges join the side's
    transcript in the order they are made."""
    broker = next(b for b in metadata(side, 12, [], record=False).brokers if b.node_id == node_id)
    other = Side(side.name, broker.host, broker.port)
    other.transcript = side.transcript
    try:
        yield other
    finally:
        other.close()


def until(side: Side, what: str, check) -> None:
    """Until ``check()`` holds, polling every POLL_S for READY_TIMEOUT_S (its requests unrecorded)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{side.name}: {what} not within {READY_TIMEOUT_S} s")
        time.sleep(POLL_S)


def settled(side: Side, topic: str, replicas: list[list[int]] | None = None, leaders: list[int] | None = None) -> None:
    """Until node 1 shows every partition of ``topic`` led, with every replica in its ISR and no
    reassignment under way (and, where given, these replicas and leaders)."""
    def check() -> bool:
        found = metadata(side, 12, [topic], record=False).topics[0]
        if found.error_code or not found.partitions:
            return False
        moving = list_reassignments(side, 0, {topic: [p.partition_index for p in found.partitions]}, record=False)
        if moving.topics:
            return False
        ordered = sorted(found.partitions, key=lambda p: p.partition_index)
        return (all(p.leader_id >= 0 and sorted(p.isr_nodes) == sorted(p.replica_nodes) for p in ordered)
                and (replicas is None or [list(p.replica_nodes) for p in ordered] == replicas)
                and (leaders is None or [p.leader_id for p in ordered] == leaders))
    until(side, f"{topic} settled on {replicas} led by {leaders}", check)


def placement_blind(answer, topics: set[str]):
    """The Metadata (or DescribeTopicPartitions) answer with the partitions of ``topics`` described by place,
    not node: each replica, ISR member and leader becomes its place (1, 2, ...) in its partition's replica
    list, and the ISR is sorted; so that where Kafka's placer put them at random is not compared, but the
    replication factor, whether the first replica leads and whether every replica is in the ISR are."""
    for topic in answer.topics:
        if topic.name not in topics:
            continue
        for partition in topic.partitions:
            place = {node: index for index, node in enumerate(partition.replica_nodes, 1)}
            partition.leader_id = place.get(partition.leader_id, -1)
            partition.isr_nodes = sorted(place.get(node, -1) for node in partition.isr_nodes)
            partition.offline_replicas = sorted(place.get(node, -1) for node in partition.offline_replicas)
            partition.replica_nodes = list(place.values())
    return answer


def describe_log_dirs(side: Side, version: int, wanted: dict[str, list[int]] | None):
    topics = None if wanted is None else [DescribeLogDirs.DescribableLogDirTopic(topic=topic, partitions=partitions)
                                          for topic, partitions in wanted.items()]
    return side.call("DescribeLogDirs", version, request("DescribeLogDirs", topics=topics))


# -- sessions ------------------------------------------------------------------------------------------------

def cluster_replication_factor_session(side: Side) -> None:
    """CreateTopics at every version with replication factors 3, 2, 4 (INVALID_REPLICATION_FACTOR: three
    brokers), -1 (the broker's default) and 0, validate_only; then where the replicas went, placement-blind."""
    made = set()
    for version in versions("CreateTopics"):
        name = f"diff-cluster-rf-v{version}"
        create_topics(side, version, (f"{name}-3", 3, 3))
        create_topics(side, version, (f"{name}-2", 2, 2))
        create_topics(side, version, (f"{name}-4", 1, 4))
        create_topics(side, version, (f"{name}-default", 1, -1))
        create_topics(side, version, (f"{name}-0", 1, 0))
        create_topics(side, version, (f"{name}-validate", 2, 3), validate_only=True)
        create_topics(side, version, (f"{name}-validate-4", 2, 4), validate_only=True)
        made |= {f"{name}-3", f"{name}-2", f"{name}-default"}
    for name in sorted(made):
        settled(side, name)
    for name in sorted(made):  # one at a time first: the topic ids' tokens follow the names' order
        placement_blind(described(side, 12, [name]), made)
    for version in (1, 9, versions("Metadata")[-1]):  # is_internal's first, the first flexible, the newest
        placement_blind(described(side, version, sorted(made)), made)
    placement_blind(describe_topic_partitions(side, sorted(made)), made)


def cluster_assignments_session(side: Side) -> None:
    """CreateTopics with explicit replica assignments, and the refused ones: a broker that is not
    registered, one named twice, partitions of unequal replication, a partition left out or numbered
    wrong, assignments beside a partition count or replication factor; then Metadata and
    DescribeTopicPartitions for the assigned topics (the leader is the first replica; the ISR every one)."""
    brokers_in_order(side)
    one, two, three = nodes(side)
    assigned = {"diff-cluster-assigned-a": [[one, two, three], [two, three, one], [three, one, two]],
                "diff-cluster-assigned-b": [[two, three], [three, one]],
                "diff-cluster-assigned-c": [[three]]}
    for version in versions("CreateTopics"):
        name = f"diff-cluster-assign-v{version}"
        create_topics(side, version, (f"{name}-99", -1, -1, [[one, 99]]))
        create_topics(side, version, (f"{name}-twice", -1, -1, [[one, one]]))
        create_topics(side, version, (f"{name}-unequal", -1, -1, [[one, two], [three]]))
        create_topics(side, version, (f"{name}-empty", -1, -1, [[]]))
        create_topics(side, version, (f"{name}-count", 2, -1, [[one]]))  # a count beside assignments
        create_topics(side, version, (f"{name}-factor", -1, 1, [[one]]))  # a factor beside assignments
        create_topics(side, version, (f"{name}-validate", -1, -1, [[one, two], [two, three]]), validate_only=True)
        wanted = CreateTopics.CreatableTopic  # partition 1 where partition 0 should be
        side.call("CreateTopics", version, request("CreateTopics", timeout_ms=30000, validate_only=False, topics=[
            wanted(name=f"{name}-gap", num_partitions=-1, replication_factor=-1, configs=[], assignments=[
                wanted.CreatableReplicaAssignment(partition_index=1, broker_ids=[one])])]))
    for name, replicas in assigned.items():
        create_topics(side, 7, (name, -1, -1, replicas))
    for name, replicas in assigned.items():
        settled(side, name, replicas)
    for version in versions("Metadata"):
        described(side, version, sorted(assigned))
    describe_topic_partitions(side, sorted(assigned))
    describe_topic_partitions(side, sorted(assigned), 2, ("diff-cluster-assigned-a", 1))


def cluster_describe_cluster_session(side: Side) -> None:
    """DescribeCluster at every version both serve: three brokers, their endpoints; whether there is a
    controller (which one is not compared)."""
    brokers_in_order(side)
    for version in versions("DescribeCluster"):
        for operations in (False, True):
            steady_controller(side.call("DescribeCluster", version, request(
                "DescribeCluster", include_cluster_authorized_operations=operations, endpoint_type=1)))
        if version >= 1:
            steady_controller(side.call("DescribeCluster", version, request(
                "DescribeCluster", include_cluster_authorized_operations=False, endpoint_type=2)))


def cluster_leader_change_session(side: Side) -> None:
    """A leader change and what follows: a partition on nodes 1 and 2 takes node 3 as well, its preferred
    replica first ([2, 1, 3]), while node 1 keeps leading; ElectLeaders gives it to node 2 (then
    ELECTION_NOT_NEEDED, preferred and unclean, and for every topic); OffsetForLeaderEpoch on the new leader
    for the old epoch, the new one and beyond, with the old current epoch (FENCED_LEADER_EPOCH) and a newer
    one (UNKNOWN_LEADER_EPOCH), and on a follower. A partition whose replicas are only reordered is asked
    for the same."""
    brokers_in_order(side)
    one, two, three = nodes(side)
    name, reordered = "diff-cluster-leader", "diff-cluster-reordered"
    create_topics(side, 7, (name, -1, -1, [[one, two]]), (reordered, -1, -1, [[one, two, three]]), record=False)
    settled(side, name, [[one, two]])
    settled(side, reordered, [[one, two, three]])
    produce_unrecorded(side, name, 0, values(b"a", b"b", b"c"))  # three records in the first epoch
    described(side, 12, [name, reordered])
    for version in both_serve("OffsetForLeaderEpoch"):
        offset_for_leader_epoch(side, version, name, 0, 0, current_leader_epoch=0)
    alter_reassignments(side, 0, {name: {0: [two, one, three]}, reordered: {0: [two, three, one]}})
    settled(side, name, [[two, one, three]])  # by then the reorder, in the same metadata batch, is applied too
    list_reassignments(side, 0, None)
    described(side, 12, [name, reordered])  # node 1 leads still, no longer the preferred replica
    elect_leaders(side, 1, UNCLEAN, {name: [0]})  # it has a leader
    elect_leaders(side, 2, PREFERRED, {name: [0], reordered: [0]})
    settled(side, name, [[two, one, three]], [two])
    settled(side, reordered, [[two, three, one]], [two])
    described(side, 12, [name, reordered])
    for version in both_serve("ElectLeaders"):
        for election_type in ((PREFERRED, UNCLEAN) if version >= 1 else (PREFERRED,)):
            elect_leaders(side, version, election_type, {name: [0]})
            elect_leaders(side, version, election_type, None)  # every topic: these sessions' own
    epoch = metadata(side, 12, [name], record=False).topics[0].partitions[0].leader_epoch
    with node_side(side, two) as leader:
        produce_unrecorded(leader, name, 0, values(b"d", b"e"))  # two records in the new epoch
        for version in both_serve("OffsetForLeaderEpoch"):
            for leader_epoch in (0, epoch - 1, epoch, epoch + 1, -1):
                offset_for_leader_epoch(leader, version, name, 0, leader_epoch)
            offset_for_leader_epoch(leader, version, name, 0, 0, current_leader_epoch=0)  # fenced
            offset_for_leader_epoch(leader, version, name, 0, 0, current_leader_epoch=epoch)
            offset_for_leader_epoch(leader, version, name, 0, 0, current_leader_epoch=epoch + 1)
            if version >= 3:
                offset_for_leader_epoch(leader, version, name, 0, 0, replica_id=one)  # a follower's
    for version in both_serve("OffsetForLeaderEpoch"):  # node 1 follows now
        offset_for_leader_epoch(side, version, name, 0, 0, current_leader_epoch=epoch)
        offset_for_leader_epoch(side, version, name, 0, 0)
        if version >= 3:
            offset_for_leader_epoch(side, version, name, 0, 0, replica_id=-2)  # a debugger's may ask a follower


def cluster_reassignment_session(side: Side) -> None:
    """AlterPartitionReassignments moving a replica (node 1's to node 3: the leader leaves), growing and
    shrinking the replication factor, each waited for and then listed (nothing under way) and described;
    the refusals: a broker that is not registered, v1's replication factor kept, the cancel of a
    reassignment already done."""
    brokers_in_order(side)
    one, two, three = nodes(side)
    name = "diff-cluster-move"
    create_topics(side, 7, (name, -1, -1, [[one, two], [two, three]]), record=False)
    settled(side, name, [[one, two], [two, three]])
    produce_unrecorded(side, name, 0, values(b"a", b"b"))
    for version in both_serve("AlterPartitionReassignments"):
        alter_reassignments(side, version, {name: {0: [one, 99]}})
        alter_reassignments(side, version, {name: {1: None}})  # nothing to cancel
    alter_reassignments(side, 1, {name: {0: [one, two, three]}}, allow_replication_factor_change=False)
    alter_reassignments(side, 1, {name: {0: [one]}}, allow_replication_factor_change=False)
    alter_reassignments(side, 1, {name: {0: [one, 99, three]}}, allow_replication_factor_change=False)
    alter_reassignments(side, 0, {name: {0: [two, three]}})  # node 1 leaves, node 3 joins: the leader moves
    settled(side, name, [[two, three], [two, three]])
    list_reassignments(side, 0, None)
    list_reassignments(side, 0, {name: [0, 1]})
    described(side, 12, [name])
    alter_reassignments(side, 0, {name: {0: None}})  # done: nothing to cancel
    alter_reassignments(side, 1, {name: {1: [two, three, one]}})  # grown to three
    settled(side, name, [[two, three], [two, three, one]])
    described(side, 12, [name])
    alter_reassignments(side, 1, {name: {1: [three]}})  # shrunk to one, the leader gone
    settled(side, name, [[two, three], [three]])
    described(side, 12, [name])
    list_reassignments(side, 0, None)
    leader = metadata(side, 12, [name], record=False).topics[0].partitions[0].leader_id
    with node_side(side, leader) as led:
        for version in both_serve("OffsetForLeaderEpoch"):  # two records, then node 1 left
            for leader_epoch in (0, 1, 2):
                offset_for_leader_epoch(led, version, name, 0, leader_epoch)


def cluster_describe_log_dirs_session(side: Side) -> None:
    """DescribeLogDirs of node 1: the partitions it holds, not those of other nodes, an unknown topic's,
    every partition (null topics) and none."""
    one, two, three = nodes(side)
    name = "diff-cluster-dirs"
    create_topics(side, 7, (name, -1, -1, [[one, two], [two, three], [three, one]]), record=False)
    settled(side, name)
    wanted = {name: [0, 1, 2, 3], f"{name}-unknown": [0]}

    def made() -> bool:  # Kafka makes a partition's log a moment after the broker learns of it
        answer = side.call("DescribeLogDirs", 4, request("DescribeLogDirs", topics=[
            DescribeLogDirs.DescribableLogDirTopic(topic=name, partitions=[0, 2])]), record=False)
        return sum(len(topic.partitions) for result in answer.results for topic in result.topics) == 2
    until(side, f"{name}'s logs on node {one}", made)
    for version in both_serve("DescribeLogDirs"):
        describe_log_dirs(side, version, wanted)
        describe_log_dirs(side, version, {})


def cluster_describe_quorum_session(side: Side) -> None:
    """DescribeQuorum of a three-voter quorum asked of node 1 (which asks the active controller): its
    voters, observers and, from v2, their controller endpoints. Which voter won the election is each
    quorum's own: the leader's id is compared as whether there is one (``steady_leader``), its epoch as the
    rule quorum_progress says."""
    brokers_in_order(side)
    wanted = API_BY_NAME["DescribeQuorum"].request_class.TopicData
    for version in both_serve("DescribeQuorum"):
        steady_leader(side.call("DescribeQuorum", version, request("DescribeQuorum", topics=[
            wanted(topic_name="__cluster_metadata", partitions=[wanted.PartitionData(partition_index=0)])])))


def steady_leader(answer):
    """DescribeQuorum's answer told apart from which voter leads: its leader_id reduced to whether there is
    one (0, or -1 as it was), its voters listed leader first and then the followers, each voter's id 0 (the
    voters' ids are v2's nodes, listed by id)."""
    for topic in answer.topics if answer is not None else ():
        for partition in topic.partitions:
            partition.current_voters.sort(key=lambda voter: (voter.replica_id != partition.leader_id, voter.replica_id))
            for voter in partition.current_voters:
                voter.replica_id = 0
            if partition.leader_id >= 0:
                partition.leader_id = 0
    return answer


SESSIONS = [cluster_replication_factor_session, cluster_assignments_session, cluster_describe_cluster_session,
            cluster_leader_change_session, cluster_reassignment_session, cluster_describe_log_dirs_session,
            cluster_describe_quorum_session]
