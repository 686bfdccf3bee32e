"""Scripted sessions for the differential suite (compat_tests/test_differential.py): replication's APIs on
one node.

OffsetForLeaderEpoch (KIP-101, KIP-320), DescribeTopicPartitions (KIP-966's paged Metadata), ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments and DescribeQuorum, each at every version both
brokers serve (kbroker's handler's range within Kafka 4.4's, ``KAFKA_VERSIONS``: the api_versions session
compares the two ranges themselves). On one node no leader ever changes, so what needs a second replica
(an older leader epoch, FENCED_LEADER_EPOCH, a preferred election held, a replica moved) is in the
three-node sessions of compat_tests/differential_cluster_sessions.py.

The brokers live on for the sessions after these, so no session leaves a reassignment under way; and no
request here names every topic (ElectLeaders with null topics), whose answer would list every other
session's topics too.
"""

from __future__ import annotations

from compat_tests.differential_sessions import create_topics, metadata, request, values, versions, wait_led
from compat_tests.differential_sessions_topics import node_id, produce_unrecorded
from kbroker.wire.schema import API_BY_NAME
from testkit.differential import Side

# Kafka 4.4's versions of each API (its message specs' validVersions, all served on a broker's listener).
KAFKA_VERSIONS = {"OffsetForLeaderEpoch": range(2, 5), "DescribeTopicPartitions": range(0, 1),
                  "ElectLeaders": range(0, 3), "AlterPartitionReassignments": range(0, 2),
                  "ListPartitionReassignments": range(0, 1), "DescribeQuorum": range(0, 3),
                  "DescribeLogDirs": range(1, 6)}
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types
CONSUMER, DEBUGGING = -1, -2  # OffsetForLeaderEpoch's replica ids that are not a broker's
PAGES_MAX = 20  # DescribeTopicPartitions pages followed before a session gives up

OffsetForLeaderEpoch = API_BY_NAME["OffsetForLeaderEpoch"].request_class
DescribeTopicPartitions = API_BY_NAME["DescribeTopicPartitions"].request_class
ElectLeaders = API_BY_NAME["ElectLeaders"].request_class
AlterPartitionReassignments = API_BY_NAME["AlterPartitionReassignments"].request_class
ListPartitionReassignments = API_BY_NAME["ListPartitionReassignments"].request_class
DescribeQuorum = API_BY_NAME["DescribeQuorum"].request_class


def both_serve(api_name: str) -> list[int]:
    """The versions kbroker serves that Kafka 4.4 serves too."""
    return [version for version in versions(api_name) if version in KAFKA_VERSIONS[api_name]]


def offset_for_leader_epoch(side: Side, version: int, topic: str, partition: int, leader_epoch: int,
                            current_leader_epoch: int = -1, replica_id: int = CONSUMER):
    wanted = OffsetForLeaderEpoch.OffsetForLeaderTopic
    return side.call("OffsetForLeaderEpoch", version, request("OffsetForLeaderEpoch", replica_id=replica_id, topics=[
        wanted(topic=topic, partitions=[wanted.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])]))


def describe_topic_partitions(side: Side, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None,
                              record: bool = True):
    return side.call("DescribeTopicPartitions", 0, request(
        "DescribeTopicPartitions", topics=[DescribeTopicPartitions.TopicRequest(name=name) for name in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else DescribeTopicPartitions.Cursor(topic_name=cursor[0],
                                                                          partition_index=cursor[1])),
        record=record)


def every_page(side: Side, names: list[str], limit: int, cursor: tuple[str, int] | None = None) -> int:
    """DescribeTopicPartitions from ``cursor`` and then from each next cursor it answers, each page
    recorded; how many pages there were."""
    for page in range(1, PAGES_MAX + 1):
        answer = describe_topic_partitions(side, names, limit, cursor)
        if answer is None or answer.next_cursor is None:
            return page
        cursor = (answer.next_cursor.topic_name, answer.next_cursor.partition_index)
    raise AssertionError(f"{side.name}: more than {PAGES_MAX} pages of {names} at {limit} partitions")


def elect_leaders(side: Side, version: int, election_type: int, partitions: dict[str, list[int]] | None):
    wanted = None if partitions is None else [ElectLeaders.TopicPartitions(topic=topic, partitions=indexes)
                                              for topic, indexes in partitions.items()]
    return side.call("ElectLeaders", version, request("ElectLeaders", election_type=election_type,
                                                      topic_partitions=wanted, timeout_ms=30000))


def alter_reassignments(side: Side, version: int, moves: dict[str, dict[int, list[int] | None]],
                        allow_replication_factor_change: bool = True, record: bool = True):
    """``moves``: {topic: {partition: its new replicas, or None to cancel a reassignment under way}}."""
    wanted = AlterPartitionReassignments.ReassignableTopic
    return side.call("AlterPartitionReassignments", version, request(
        "AlterPartitionReassignments", timeout_ms=30000,
        allow_replication_factor_change=allow_replication_factor_change, topics=[
            wanted(name=topic, partitions=[wanted.ReassignablePartition(partition_index=partition, replicas=replicas)
                                           for partition, replicas in partitions.items()])
            for topic, partitions in moves.items()]), record=record)


def list_reassignments(side: Side, version: int, partitions: dict[str, list[int]] | None, record: bool = True):
    wanted = None if partitions is None else [
        ListPartitionReassignments.ListPartitionReassignmentsTopics(name=topic, partition_indexes=indexes)
        for topic, indexes in partitions.items()]
    return side.call("ListPartitionReassignments", version, request("ListPartitionReassignments", timeout_ms=30000,
                                                                    topics=wanted), record=record)


# -- sessions ---------------------------------------------------------------------------------------------

def offset_for_leader_epoch_session(side: Side) -> None:
    """The end of an epoch: the current one, undefined (-1) and a later one; a partition with records and
    an empty one; current_leader_epoch as the partition's (0), unset and newer (UNKNOWN_LEADER_EPOCH);
    an unknown partition and topic; a consumer's, a debugger's and a follower's replica id (v3+)."""
    name = "diff-epochs"
    create_topics(side, 7, (name, 2, 1), record=False)
    wait_led(side, name)
    produce_unrecorded(side, name, 0, values(b"a", b"b", b"c"))
    follower = int(node_id(side))
    for version in both_serve("OffsetForLeaderEpoch"):
        for partition in (0, 1):  # three records in epoch 0; none
            for leader_epoch in (0, -1, 1, 7):
                offset_for_leader_epoch(side, version, name, partition, leader_epoch)
            offset_for_leader_epoch(side, version, name, partition, 0, current_leader_epoch=0)
            offset_for_leader_epoch(side, version, name, partition, 0, current_leader_epoch=1)  # newer than ours
            offset_for_leader_epoch(side, version, name, partition, 0, current_leader_epoch=-5)
        offset_for_leader_epoch(side, version, name, 2, 0)  # no such partition
        offset_for_leader_epoch(side, version, name, -1, 0)
        offset_for_leader_epoch(side, version, name, 2, 0, current_leader_epoch=1)  # the partition before the epoch
        offset_for_leader_epoch(side, version, f"{name}-unknown", 0, 0)
        offset_for_leader_epoch(side, version, "bad/name", 0, 0)
        if version >= 3:
            for replica_id in (DEBUGGING, follower, 99):
                offset_for_leader_epoch(side, version, name, 0, 0, replica_id=replica_id)
        # several partitions of two topics, one of them unknown, in one request
        wanted = OffsetForLeaderEpoch.OffsetForLeaderTopic
        side.call("OffsetForLeaderEpoch", version, request("OffsetForLeaderEpoch", replica_id=CONSUMER, topics=[
            wanted(topic=name, partitions=[
                wanted.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0),
                wanted.OffsetForLeaderPartition(partition=1, current_leader_epoch=2, leader_epoch=0),
                wanted.OffsetForLeaderPartition(partition=5, current_leader_epoch=-1, leader_epoch=0)]),
            wanted(topic=f"{name}-unknown", partitions=[
                wanted.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])]))


def describe_topic_partitions_session(side: Side) -> None:
    """Topics by name, paged by a small partition limit and followed cursor by cursor; cursors that are
    refused (a topic not asked for, a negative partition) or past a topic's end; every topic from a cursor
    (names here sort after every other session's, so the listing is the session's own); unknown and
    invalid names."""
    first, second, third = "zzzz-diff-dtp-a", "zzzz-diff-dtp-b", "zzzz-diff-dtp-c"
    create_topics(side, 7, (first, 3, 1), (second, 2, 1), (third, 1, 1), record=False)
    wait_led(side, first, second, third)
    unknown = "zzzz-diff-dtp-unknown"
    describe_topic_partitions(side, [first, second, third])
    describe_topic_partitions(side, [third, first, first])  # out of order, one named twice
    describe_topic_partitions(side, [first, unknown, "bad/name", "__consumer_offsets-unknown"])
    create_topics(side, 7, ("__diff-dtp-user", 1, 1), record=False)  # a user's topic named as internal ones are
    wait_led(side, "__diff-dtp-user")
    describe_topic_partitions(side, ["__diff-dtp-user"])
    metadata(side, 12, ["__diff-dtp-user"])
    for limit in (1, 2, 4, 5):
        every_page(side, [first, second, third, unknown], limit)
    for limit in (0, -1):
        describe_topic_partitions(side, [first, second], limit)
    describe_topic_partitions(side, [first, second], 2000, (second, 1))
    describe_topic_partitions(side, [first, second], 2000, (first, 2))
    describe_topic_partitions(side, [first, second], 2000, (second, 5))  # past the topic's end
    describe_topic_partitions(side, [first, second], 2000, (third, 0))  # a topic not asked for
    describe_topic_partitions(side, [first, second], 2000, (first, -1))
    describe_topic_partitions(side, [first, unknown], 2000, (unknown, 0))
    for limit in (1, 3, 2000):  # every topic from a cursor: only this session's
        every_page(side, [], limit, ("zzzz-diff-dtp", 0))
    describe_topic_partitions(side, [], 2000, (second, 1))
    describe_topic_partitions(side, [], 2000, ("zzzz-diff-dtp-bb", 0))  # between two topics
    describe_topic_partitions(side, [], 2000, (first, -3))


def elect_leaders_session(side: Side) -> None:
    """On one node every partition has its preferred leader: ELECTION_NOT_NEEDED, preferred and unclean;
    an unknown partition and topic; no partitions; an election type that does not exist. Null topics (every
    topic, each with the partitions an election was held for) are asked of the three-node clusters, whose
    topics are their sessions' own: the reference Kafka here is shared with other modules' tests."""
    name = "diff-elect"
    create_topics(side, 7, (name, 2, 1), record=False)
    wait_led(side, name)
    for version in both_serve("ElectLeaders"):
        for election_type in ((PREFERRED, UNCLEAN) if version >= 1 else (PREFERRED,)):
            elect_leaders(side, version, election_type, {name: [0, 1]})
            elect_leaders(side, version, election_type, {name: [0, 2], f"{name}-unknown": [0]})
            elect_leaders(side, version, election_type, {name: []})
        if version >= 1:
            elect_leaders(side, version, 5, {name: [0], f"{name}-unknown": [1]})  # no such election type


def reassignments_session(side: Side) -> None:
    """What a single node refuses or has nothing to do for: a move to a broker that is not registered,
    to no replicas, to one broker twice; to the replicas a partition has (nothing to do); the cancel of a
    reassignment not under way (NO_REASSIGNMENT_IN_PROGRESS); unknown partitions and topics; v1's
    replication factor kept; and the lists of reassignments under way (none), of everything and of some."""
    name = "diff-reassign"
    create_topics(side, 7, (name, 2, 1), record=False)
    wait_led(side, name)
    broker = int(node_id(side))
    for version in both_serve("AlterPartitionReassignments"):
        alter_reassignments(side, version, {name: {0: [99]}})  # no such broker
        alter_reassignments(side, version, {name: {0: [broker, 99]}})
        alter_reassignments(side, version, {name: {0: []}})
        alter_reassignments(side, version, {name: {0: [broker, broker]}})
        alter_reassignments(side, version, {name: {0: [-1]}})
        alter_reassignments(side, version, {name: {0: [broker]}})  # as it is
        alter_reassignments(side, version, {name: {0: None, 1: None}})  # nothing to cancel
        alter_reassignments(side, version, {name: {2: [broker]}, f"{name}-unknown": {0: [broker]}})
        alter_reassignments(side, version, {f"{name}-unknown": {0: None}})
        alter_reassignments(side, version, {name: {}})
        alter_reassignments(side, version, {})
        if version >= 1:  # a reassignment that keeps the replication factor, or must
            for allowed in (False, True):
                alter_reassignments(side, version, {name: {0: [broker, 99]}}, allow_replication_factor_change=allowed)
                alter_reassignments(side, version, {name: {1: [broker]}}, allow_replication_factor_change=allowed)
                alter_reassignments(side, version, {name: {1: None}}, allow_replication_factor_change=allowed)
        for version_listed in both_serve("ListPartitionReassignments"):
            list_reassignments(side, version_listed, {name: [0, 1]})
    for version in both_serve("ListPartitionReassignments"):
        list_reassignments(side, version, None)
        list_reassignments(side, version, {name: [0, 1, 7], f"{name}-unknown": [0]})
        list_reassignments(side, version, {name: []})
        list_reassignments(side, version, {})


def describe_quorum_session(side: Side) -> None:
    """The metadata quorum as a client asks a broker for it; a topic or partition that is not the
    quorum's."""
    wanted = DescribeQuorum.TopicData
    for version in both_serve("DescribeQuorum"):
        for topic, partition in (("__cluster_metadata", 0), ("__cluster_metadata", 1), ("diff-not-the-quorum", 0)):
            side.call("DescribeQuorum", version, request("DescribeQuorum", topics=[
                wanted(topic_name=topic, partitions=[wanted.PartitionData(partition_index=partition)])]))
        side.call("DescribeQuorum", version, request("DescribeQuorum", topics=[]))


SESSIONS = [offset_for_leader_epoch_session, describe_topic_partitions_session, elect_leaders_session,
            reassignments_session, describe_quorum_session]
