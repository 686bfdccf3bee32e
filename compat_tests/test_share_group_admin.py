"""Share groups' offsets admin APIs (KIP-932) against a broker process: DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups of a share group, sent as raw requests
(confluent-kafka 2.16's AdminClient has no share-group calls), with confluent-kafka's ShareConsumer
feeling what they do; their authorization under the ACL authorizer; and ``kbroker groups`` on share
groups. Kafka 4.2 is the reference (KafkaApis, GroupCoordinatorService, GroupMetadataManager,
ShareGroupCommand).
"""

from __future__ import annotations

import contextlib
import uuid

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.test_admin_cli import kbroker, run
from compat_tests.test_share_consumer import (  # noqa: F401  (broker: the module's broker, with short timings)
    BROKER_OVERRIDES, TIMEOUT_S, broker, poll_until, prepare, share_consumer)
from testkit.broker_process import BrokerProcess
from testkit.quorum_process import until
from testkit.raw_client import call, request
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

DescribeGroup = API_BY_NAME["DescribeShareGroupOffsets"].request_class.DescribeShareGroupOffsetsRequestGroup
AlterTopic = API_BY_NAME["AlterShareGroupOffsets"].request_class.AlterShareGroupOffsetsRequestTopic
DeleteTopic = API_BY_NAME["DeleteShareGroupOffsets"].request_class.DeleteShareGroupOffsetsRequestTopic
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
NOT_HOSTED = "This server does not host this topic-partition."


# -- requests ------------------------------------------------------------------------------------------------


def describe(port: int, group: str, topics: dict[str, list[int]] | None = None, version: int = 1):
    """DescribeShareGroupOffsets of one group (every share-partition it has when ``topics`` is None)."""
    wanted = None if topics is None else [DescribeGroup.DescribeShareGroupOffsetsRequestTopic(
        topic_name=name, partitions=partitions) for name, partitions in topics.items()]
    [found] = call(port, "DescribeShareGroupOffsets", version, request(
        "DescribeShareGroupOffsets", groups=[DescribeGroup(group_id=group, topics=wanted)])).groups
    return found


def offsets(port: int, group: str, topics: dict[str, list[int]] | None = None) -> dict:
    """(topic, partition) -> (start offset, leader epoch, lag, error code)."""
    found = describe(port, group, topics)
    assert found.error_code == ErrorCode.NONE, found
    return {(topic.topic_name, p.partition_index): (p.start_offset, p.leader_epoch, p.lag, p.error_code)
            for topic in found.topics for p in topic.partitions}


def alter(port: int, group: str, start_offsets: dict[str, dict[int, int]]):
    return call(port, "AlterShareGroupOffsets", 0, request("AlterShareGroupOffsets", group_id=group,
                                                           topics=alter_topics(start_offsets)))


def alter_topics(start_offsets: dict[str, dict[int, int]]) -> list:
    return [AlterTopic(topic_name=name, partitions=[AlterTopic.AlterShareGroupOffsetsRequestPartition(
        partition_index=p, start_offset=offset) for p, offset in partitions.items()])
        for name, partitions in start_offsets.items()]


def altered(answer) -> list:
    """(topic, its id known, partition, error code, error message) of an AlterShareGroupOffsets answer."""
    return [(topic.topic_name, topic.topic_id != ZERO_UUID, p.partition_index, p.error_code, p.error_message)
            for topic in answer.responses for p in topic.partitions]


def delete_offsets(port: int, group: str, *topics: str):
    return call(port, "DeleteShareGroupOffsets", 0, request("DeleteShareGroupOffsets", group_id=group, topics=[
        DeleteTopic(topic_name=name) for name in topics]))


def delete_groups(port: int, *groups: str) -> list[int]:
    answer = call(port, "DeleteGroups", 2, request("DeleteGroups", groups_names=list(groups)))
    return [result.error_code for result in answer.results]


def share_group_state(port: int, group: str) -> str:
    [found] = call(port, "ShareGroupDescribe", 1, request("ShareGroupDescribe", group_ids=[group])).groups
    return "Dead" if found.error_code == ErrorCode.GROUP_ID_NOT_FOUND else found.group_state


def listed(port: int) -> dict[str, tuple[str, str]]:
    answer = call(port, "ListGroups", 5, request("ListGroups"))
    return {group.group_id: (group.group_type, group.group_state) for group in answer.groups}


def consume_and_leave(bootstrap: str, port: int, group: str, count: int) -> list[int]:
    """A share consumer takes ``count`` records, accepts them and leaves: the offsets, once the group is empty."""
    consumer = share_consumer(bootstrap, group)
    try:
        got = [message.offset() for message in poll_until(consumer, count)]
        consumer.commit_sync(TIMEOUT_S)
    finally:
        consumer.close()
    until(lambda: share_group_state(port, group) == "Empty", TIMEOUT_S, f"{group} empty")
    return got


@contextlib.contextmanager
def member_of(broker, group: str):
    """A share consumer of ``group`` holding a record while the block runs; then it accepts it and leaves,
    and the block is over once the group is empty."""
    consumer = share_consumer(broker.bootstrap, group)
    try:
        poll_until(consumer, 1)
        yield
        consumer.commit_sync(TIMEOUT_S)
    finally:
        consumer.close()
    until(lambda: share_group_state(broker.port, group) == "Empty", TIMEOUT_S, f"{group} empty")


def consumer_of(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    """A share consumer of ``group`` (explicit acknowledgement) reading ``topic``."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    return consumer


def simple_group(bootstrap: str, group: str, topic: str) -> None:
    """A classic group of committed offsets only (a "simple" one): an offset committed on ``topic``-0."""
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    committer.close()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept while its future is pending
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT_S)


# -- DescribeShareGroupOffsets -------------------------------------------------------------------------------


def test_describe_gives_each_share_partition_its_start_offset_or_minus_one(broker):
    prepare(broker.bootstrap, "described", 10)
    assert consume_and_leave(broker.bootstrap, broker.port, "described", 10) == list(range(10))
    [(key, (start_offset, leader_epoch, lag, error_code))] = offsets(broker.port, "described").items()
    assert key == ("described", 0) and 0 <= start_offset <= 10 and (leader_epoch, error_code) == (0, ErrorCode.NONE)
    # Named topics: a partition without state, or of a topic the metadata does not have, answers -1 (no error)
    found = describe(broker.port, "described", {"described": [0, 1], "missing": [0]})
    assert [(t.topic_name, t.topic_id == ZERO_UUID, p.partition_index, p.start_offset, p.lag, p.error_code)
            for t in found.topics for p in t.partitions] == [
        ("described", False, 0, start_offset, lag, ErrorCode.NONE), ("described", False, 1, -1, -1, ErrorCode.NONE),
        ("missing", True, 0, -1, -1, ErrorCode.NONE)]
    assert describe(broker.port, "described", {}).topics == []
    # v0 has no lag; a group that does not exist has nothing, or -1 for what is named
    assert describe(broker.port, "described", {"described": [0]}, version=0).topics[0].partitions[0].lag == -1
    assert describe(broker.port, "nobody").topics == []
    assert offsets(broker.port, "nobody", {"described": [0]}) == {("described", 0): (-1, 0, -1, ErrorCode.NONE)}


# -- AlterShareGroupOffsets ----------------------------------------------------------------------------------


def test_alter_sets_the_start_offsets_of_an_empty_group_only(broker):
    prepare(broker.bootstrap, "altered", 10)
    with member_of(broker, "altered"):
        answer = alter(broker.port, "altered", {"altered": {0: 3}})
        assert (answer.error_code, answer.error_message, answer.responses) == (
            ErrorCode.NON_EMPTY_GROUP, "The group is not empty.", [])
    answer = alter(broker.port, "altered", {"altered": {0: 3, 7: 1}, "missing": {0: 1}})
    assert answer.error_code == ErrorCode.NONE
    # KafkaApis' refusals first, then the coordinator's answers
    assert altered(answer) == [("missing", False, 0, UNKNOWN, NOT_HOSTED), ("altered", True, 0, ErrorCode.NONE, None),
                               ("altered", True, 7, UNKNOWN, NOT_HOSTED)]
    # Started afresh at 3: nothing delivered yet, so the lag is the 7 records after it
    assert offsets(broker.port, "altered") == {("altered", 0): (3, 0, 7, ErrorCode.NONE)}


def test_alter_makes_a_share_group_whose_first_consumer_starts_there(broker):
    prepare(broker.bootstrap, "early", 10)
    assert altered(alter(broker.port, "early-group", {"early": {0: 6}})) == [("early", True, 0, ErrorCode.NONE, None)]
    assert listed(broker.port)["early-group"] == ("share", "Empty")
    consumer = consumer_of(broker.bootstrap, "early-group", "early")
    try:
        assert [(m.offset(), m.value()) for m in poll_until(consumer, 4)] == [(n, b"v%d" % n) for n in range(6, 10)]
        consumer.commit_sync(TIMEOUT_S)
    finally:
        consumer.close()


def test_alter_refuses_other_kinds_of_groups_and_an_empty_group_id(broker):
    prepare(broker.bootstrap, "kinds", 1)
    simple_group(broker.bootstrap, "classic-kind", "kinds")
    answer = alter(broker.port, "classic-kind", {"kinds": {0: 0}})
    assert (answer.error_code, answer.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                         "Group classic-kind is not a share group.")
    answer = alter(broker.port, "", {"kinds": {0: 0}})
    assert (answer.error_code, answer.error_message) == (ErrorCode.INVALID_GROUP_ID,
                                                         "The configured groupId is invalid.")


# -- DeleteShareGroupOffsets ---------------------------------------------------------------------------------


def test_delete_offsets_forgets_the_topics_of_an_empty_group(broker):
    prepare(broker.bootstrap, "forgotten", 4)
    create_topic(broker.bootstrap, "untouched", 1)
    answer = delete_offsets(broker.port, "forgotten", "forgotten")
    assert (answer.error_code, answer.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group forgotten not found.")
    with member_of(broker, "forgotten"):
        assert delete_offsets(broker.port, "forgotten", "forgotten").error_code == ErrorCode.NON_EMPTY_GROUP
    answer = delete_offsets(broker.port, "forgotten", "forgotten", "missing", "untouched")
    assert answer.error_code == ErrorCode.NONE
    assert [(t.topic_name, t.topic_id != ZERO_UUID, t.error_code, t.error_message) for t in answer.responses] == [
        ("forgotten", True, ErrorCode.NONE, None), ("missing", False, UNKNOWN, NOT_HOSTED),
        ("untouched", False, UNKNOWN, "There is no offset information to delete.")]
    assert describe(broker.port, "forgotten").topics == []
    assert offsets(broker.port, "forgotten", {"forgotten": [0]}) == {("forgotten", 0): (-1, 0, -1, ErrorCode.NONE)}


# -- DeleteGroups --------------------------------------------------------------------------------------------


def test_delete_groups_deletes_a_share_groups_state_first(broker):
    prepare(broker.bootstrap, "deleted", 5)
    with member_of(broker, "deleted"):
        assert delete_groups(broker.port, "deleted") == [ErrorCode.NON_EMPTY_GROUP]
    assert offsets(broker.port, "deleted")  # the share coordinator has its share-partition
    assert delete_groups(broker.port, "deleted", "never-was") == [ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND]
    assert "deleted" not in listed(broker.port) and share_group_state(broker.port, "deleted") == "Dead"
    assert offsets(broker.port, "deleted", {"deleted": [0]}) == {("deleted", 0): (-1, 0, -1, ErrorCode.NONE)}
    # The id starts afresh: a new group from epoch 1 (Kafka 4.4's), its partition initialized again
    heartbeat = call(broker.port, "ShareGroupHeartbeat", 1, request(
        "ShareGroupHeartbeat", group_id="deleted", member_id=uuid.uuid4().hex, member_epoch=0,
        subscribed_topic_names=["deleted"]))
    assert (heartbeat.error_code, heartbeat.member_epoch) == (ErrorCode.NONE, 2)


# -- the share-partition leader reads the new state ------------------------------------------------------------


def test_after_a_reset_or_a_deletion_consumers_read_from_the_new_state(tmp_path):
    """Once the partition's leader loads the share-partition again (here: after a restart), a reset group
    resumes at its new start offset and a deleted group's id starts as share.auto.offset.reset says."""
    broker = BrokerProcess(tmp_path / "data", None, *BROKER_OVERRIDES)
    broker.start()
    try:
        prepare(broker.bootstrap, "again", 10)
        prepare(broker.bootstrap, "reset", 3)
        assert consume_and_leave(broker.bootstrap, broker.port, "again", 10) == list(range(10))
        assert consume_and_leave(broker.bootstrap, broker.port, "reset", 3) == [0, 1, 2]
        assert delete_groups(broker.port, "again") == [ErrorCode.NONE]
        assert altered(alter(broker.port, "reset", {"reset": {0: 1}}))[0][3] == ErrorCode.NONE
        broker.kill()
        broker.start()
        assert consume_and_leave(broker.bootstrap, broker.port, "again", 10) == list(range(10))  # afresh
        assert consume_and_leave(broker.bootstrap, broker.port, "reset", 2) == [1, 2]
    finally:
        broker.kill()


def test_a_reset_takes_effect_for_the_next_consumer_without_a_restart(broker):
    prepare(broker.bootstrap, "at-once", 6)
    assert consume_and_leave(broker.bootstrap, broker.port, "at-once", 6) == list(range(6))
    assert altered(alter(broker.port, "at-once", {"at-once": {0: 2}}))[0][3] == ErrorCode.NONE
    consumer = share_consumer(broker.bootstrap, "at-once")
    try:
        assert [m.offset() for m in poll_until(consumer, 4, timeout_s=10)] == [2, 3, 4, 5]
    finally:
        consumer.close()


def test_the_lag_of_a_partition_led_by_another_broker_is_asked_of_its_leader(tmp_path):
    """Two brokers, the topic's partitions led one on each, every share-partition's state kept by the
    broker asked (one __share_group_state partition): the lag of the partition led elsewhere comes from
    ListOffsets to its leader, as Kafka's PartitionMetadataClient asks."""
    from kbroker.testing.process_cluster import running_cluster
    from kbroker.tools.client import Client

    with running_cluster(2, settings={"share.coordinator.state.topic.num.partitions": 1},
                         directory=tmp_path) as cluster:
        cluster.create_topic("spread", 2)
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for n in range(10):
            producer.produce("spread", b"%d" % n, partition=n % 2)
        assert producer.flush(TIMEOUT_S) == 0
        client = Client(cluster.bootstrap)
        try:
            def altered_there():
                answer = client.coordinator("spread-group").call(
                    "AlterShareGroupOffsets", group_id="spread-group", topics=alter_topics({"spread": {0: 1, 1: 2}}))
                return answer if answer.error_code == ErrorCode.NONE else None

            assert altered(until(altered_there, TIMEOUT_S, "the group coordinator")) == [
                ("spread", True, 0, ErrorCode.NONE, None), ("spread", True, 1, ErrorCode.NONE, None)]
            [spread] = client.metadata(["spread"]).topics
            assert {p.leader_id for p in spread.partitions} == {1, 2}
            [state] = client.metadata(["__share_group_state"]).topics
            state_leader = state.partitions[0].leader_id
            port = next(node.port for node in cluster.nodes if node.node_id == state_leader)
            assert offsets(port, "spread-group", {"spread": [0, 1]}) == {
                ("spread", 0): (1, 0, 4, ErrorCode.NONE), ("spread", 1): (2, 0, 3, ErrorCode.NONE)}
        finally:
            client.close()


# -- kbroker groups ------------------------------------------------------------------------------------------


def test_groups_list_describe_and_reset_offsets_of_a_share_group(broker):
    prepare(broker.bootstrap, "cli-share", 10)
    dry_run = kbroker(broker.bootstrap, "groups", "reset-offsets", "cli-queue", "--share", "--topic", "cli-share",
                      "--to-offset", "3")
    assert ["cli-queue", "cli-share", "0", "3"] in [line.split() for line in dry_run.splitlines()]
    assert "Dry run" in dry_run and "cli-queue" not in listed(broker.port)
    kbroker(broker.bootstrap, "groups", "reset-offsets", "cli-queue", "--share", "--topic", "cli-share", "--to-offset",
            "3", "--execute")
    assert ["cli-queue", "share", "share"] in [line.split() for line in kbroker(broker.bootstrap, "groups",
                                                                                  "list").splitlines()]
    described = run("groups", "describe", "cli-queue", "--bootstrap-server", broker.bootstrap)
    # kafka-share-groups --describe's columns; no members: the state on stderr, no members' table
    assert described.stdout.splitlines() == [
        "", "GROUP           TOPIC           PARTITION  START-OFFSET  LAG",
        "cli-queue       cli-share       0          3             7"]
    assert described.stderr.strip() == "Share group 'cli-queue' has no active members."
    consumer = consumer_of(broker.bootstrap, "cli-queue", "cli-share")
    try:
        assert [m.offset() for m in poll_until(consumer, 7)] == list(range(3, 10))
        lines = kbroker(broker.bootstrap, "groups", "describe", "cli-queue").splitlines()
        member = lines[-1].split()
        assert lines[-2].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert (member[0], member[3:]) == ("cli-queue", ["rdkafka", "1", "cli-share:0"])
        refused = kbroker(broker.bootstrap, "groups", "reset-offsets", "cli-queue", "--topic", "cli-share",
                          "--to-earliest", "--execute", expect=1)
        assert "Share group 'cli-queue' is not empty." in refused
    finally:
        consumer.close()


def test_groups_reset_offsets_share_refuses_a_consumer_group(broker):
    prepare(broker.bootstrap, "cli-kinds", 1)
    simple_group(broker.bootstrap, "cli-consumers", "cli-kinds")
    refused = kbroker(broker.bootstrap, "groups", "reset-offsets", "cli-consumers", "--share", "--topic", "cli-kinds",
                      "--to-earliest", expect=1)
    assert "Group 'cli-consumers' is not a share group." in refused
    # a group of committed offsets only: classic, with no protocol (kafka-groups leaves the cell blank)
    assert ["cli-consumers", "classic"] in [
        line.split() for line in kbroker(broker.bootstrap, "groups", "list").splitlines()]


# -- authorization -----------------------------------------------------------------------------------------------


def test_the_admin_apis_ask_kafkas_acls(tmp_path):
    from compat_tests.test_acls import USERS, AclBroker, _acl, _grant
    from confluent_kafka.admin import AclOperation, ResourceType
    from kbroker.config.client import ClientSecurity
    from kbroker.tools.client import Connection

    broker = AclBroker(tmp_path)
    broker.start()
    try:
        admin = AdminClient(broker.config("admin"))
        for name in ("secret", "open"):
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT_S)
        connections = {user: Connection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], 10, ClientSecurity(
            "SASL_PLAINTEXT", None, "PLAIN", user, USERS[user])) for user in USERS}
        try:
            def described(user: str, topics):
                wanted = None if topics is None else [DescribeGroup.DescribeShareGroupOffsetsRequestTopic(
                    topic_name=name, partitions=[0]) for name in topics]
                [found] = connections[user].call("DescribeShareGroupOffsets", groups=[
                    DescribeGroup(group_id="guarded", topics=wanted)]).groups
                return found

            until(lambda: connections["admin"].call("FindCoordinator", key="guarded", key_type=0).error_code
                  == ErrorCode.NONE, TIMEOUT_S, "the group coordinator")  # as a client asks first
            def altered():  # a coordinator still loading its partition is asked again, as a client does
                answer = connections["admin"].call("AlterShareGroupOffsets", group_id="guarded", topics=[
                    AlterTopic(topic_name=name, partitions=[AlterTopic.AlterShareGroupOffsetsRequestPartition(
                        partition_index=0, start_offset=0)]) for name in ("secret", "open")])
                return None if answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else answer

            answer = until(altered, TIMEOUT_S, "the group coordinator loaded")
            assert [p.error_code for t in answer.responses for p in t.partitions] == [ErrorCode.NONE] * 2, answer
            assert described("alice", None).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            _grant(broker, _acl(ResourceType.GROUP, "guarded", "User:alice", AclOperation.DESCRIBE),
                   _acl(ResourceType.TOPIC, "open", "User:alice", AclOperation.DESCRIBE))
            assert [t.topic_name for t in described("alice", None).topics] == ["open"]  # the others left out
            found = described("alice", ["secret", "open"])
            assert [(t.topic_name, p.start_offset, p.error_code, p.error_message) for t in found.topics
                    for p in t.partitions] == [("open", 0, ErrorCode.NONE, None),
                                               ("secret", -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                "Topic authorization failed.")]
            # Altering needs READ on the group and the topics, deleting DELETE on the group and READ on them
            answer = connections["alice"].call("AlterShareGroupOffsets", group_id="guarded", topics=[
                AlterTopic(topic_name="open", partitions=[AlterTopic.AlterShareGroupOffsetsRequestPartition(
                    partition_index=0, start_offset=0)])])
            assert answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            answer = connections["alice"].call("DeleteShareGroupOffsets", group_id="guarded",
                                               topics=[DeleteTopic(topic_name="open")])
            assert answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
            _grant(broker, _acl(ResourceType.GROUP, "guarded", "User:alice", AclOperation.READ),
                   _acl(ResourceType.GROUP, "guarded", "User:alice", AclOperation.DELETE))
            answer = connections["alice"].call("AlterShareGroupOffsets", group_id="guarded", topics=[
                AlterTopic(topic_name="secret", partitions=[AlterTopic.AlterShareGroupOffsetsRequestPartition(
                    partition_index=0, start_offset=0)])])
            assert [(t.topic_name, p.error_code) for t in answer.responses for p in t.partitions] == [
                ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
            answer = connections["alice"].call("DeleteShareGroupOffsets", group_id="guarded",
                                               topics=[DeleteTopic(topic_name="secret")])
            assert [(t.topic_name, t.error_code) for t in answer.responses] == [
                ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
        finally:
            for connection in connections.values():
                connection.close()
    finally:
        broker.kill()
