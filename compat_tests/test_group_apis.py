"""Group APIs over a raw socket beyond the error cases of test_group_errors.py: KIP-848 member
epochs, OffsetDelete, ListGroups filters."""

from __future__ import annotations

import pytest

from compat_tests.test_errors import call
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

JoinGroup = API_BY_NAME["JoinGroup"].request_class
SyncGroup = API_BY_NAME["SyncGroup"].request_class
OffsetCommit = API_BY_NAME["OffsetCommit"].request_class
OffsetFetch = API_BY_NAME["OffsetFetch"].request_class
FindCoordinator = API_BY_NAME["FindCoordinator"].request_class
ConsumerGroupHeartbeat = API_BY_NAME["ConsumerGroupHeartbeat"].request_class


@pytest.fixture(scope="module")
def port():
    with running_broker() as broker:
        call(broker.port, "FindCoordinator", 4, FindCoordinator(key_type=0, coordinator_keys=["g"]))  # creates the offsets topic
        yield broker.port


def join(port, group, member_id="", rebalance_timeout_ms=60_000):
    body = JoinGroup(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
                     protocol_type="consumer", protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"")])
    return call(port, "JoinGroup", 3, body)  # v3: no member id handshake


def test_kip_848_epochs_are_checked(port):
    body = ConsumerGroupHeartbeat(group_id="errors-848", member_id="m-1", member_epoch=0, rebalance_timeout_ms=5000,
                                  subscribed_topic_names=["t"], topic_partitions=[])
    joined = call(port, "ConsumerGroupHeartbeat", 1, body)
    assert joined.error_code == ErrorCode.NONE and joined.member_epoch >= 1
    stale = ConsumerGroupHeartbeat(group_id="errors-848", member_id="m-1", member_epoch=joined.member_epoch + 5)
    assert call(port, "ConsumerGroupHeartbeat", 1, stale).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    CreateTopics = API_BY_NAME["CreateTopics"].request_class
    call(port, "CreateTopics", 7, CreateTopics(timeout_ms=5000, topics=[
        CreateTopics.CreatableTopic(name="t", num_partitions=1, replication_factor=1)]))
    topic = OffsetCommit.OffsetCommitRequestTopic
    commit = OffsetCommit(group_id="errors-848", generation_id_or_member_epoch=joined.member_epoch, member_id="m-1",
                          topics=[topic(name="t", partitions=[topic.OffsetCommitRequestPartition(partition_index=0,
                                                                                                committed_offset=1)])])
    # Kafka: a KIP-848 member commits with v9+ (its epoch); before, UNSUPPORTED_VERSION per partition;
    # an epoch ahead of the member's is STALE_MEMBER_EPOCH as one behind is.
    assert call(port, "OffsetCommit", 8, commit).topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    assert call(port, "OffsetCommit", 9, commit).topics[0].partitions[0].error_code == ErrorCode.NONE
    commit.generation_id_or_member_epoch += 1
    assert call(port, "OffsetCommit", 9, commit).topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    unknown = ConsumerGroupHeartbeat(group_id="errors-848", member_id="m-2", member_epoch=3)
    assert call(port, "ConsumerGroupHeartbeat", 1, unknown).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # A classic join for a group that has KIP-848 members is refused.
    assert join(port, "errors-848").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_offset_delete_keeps_subscribed_topics_and_list_groups_filters(port):
    OffsetDelete = API_BY_NAME["OffsetDelete"].request_class
    ListGroups = API_BY_NAME["ListGroups"].request_class
    CreateTopics = API_BY_NAME["CreateTopics"].request_class
    call(port, "CreateTopics", 7, CreateTopics(timeout_ms=5000, topics=[  # offsets are only kept for topics that exist
        CreateTopics.CreatableTopic(name=name, num_partitions=1, replication_factor=1) for name in ("gone", "kept")]))
    partition = OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(partition_index=0, committed_offset=3)
    simple = OffsetCommit(group_id="errors-simple", generation_id_or_member_epoch=-1, member_id="",
                          topics=[OffsetCommit.OffsetCommitRequestTopic(name="gone", partitions=[partition])])
    assert call(port, "OffsetCommit", 8, simple).topics[0].partitions[0].error_code == ErrorCode.NONE
    wanted = [OffsetDelete.OffsetDeleteRequestTopic(name="gone", partitions=[
        OffsetDelete.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])]
    deleted = call(port, "OffsetDelete", 0, OffsetDelete(group_id="errors-simple", topics=wanted))
    assert deleted.error_code == ErrorCode.NONE and deleted.topics[0].partitions[0].error_code == ErrorCode.NONE
    fetch = OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id="errors-simple", topics=None)])
    assert call(port, "OffsetFetch", 8, fetch).groups[0].topics == []

    # A member's classic subscription (ConsumerProtocol v0: version, [topics], user data) protects its topic.
    subscription = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x04kept" + b"\xff\xff\xff\xff"
    body = JoinGroup(group_id="errors-subscribed", session_timeout_ms=10_000, rebalance_timeout_ms=60_000, member_id="",
                     protocol_type="consumer", protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=subscription)])
    joined = call(port, "JoinGroup", 3, body)
    call(port, "SyncGroup", 3, SyncGroup(group_id="errors-subscribed", generation_id=joined.generation_id,
                                         member_id=joined.member_id, assignments=[]))
    wanted[0].name = "kept"
    refused = call(port, "OffsetDelete", 0, OffsetDelete(group_id="errors-subscribed", topics=wanted))
    assert refused.topics[0].partitions[0].error_code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC

    listed = call(port, "ListGroups", 5, ListGroups(states_filter=["stable"], types_filter=["classic"])).groups
    assert "errors-subscribed" in {g.group_id for g in listed} and {g.group_state for g in listed} == {"Stable"}
    assert {g.group_type for g in listed} == {"classic"}
    consumers = call(port, "ListGroups", 5, ListGroups(states_filter=[], types_filter=["consumer"])).groups
    assert {g.group_type for g in consumers} <= {"consumer"} and "errors-subscribed" not in {g.group_id for g in consumers}


@pytest.mark.parametrize("version", [4, 6, 7, 9])
def test_a_join_group_error_names_no_protocol_as_kafka_does(port, version):
    """Kafka's JoinGroupResponse: without a protocol, the name is "" before v7 and null from v7 (KIP-559),
    whether the group answered (MEMBER_ID_REQUIRED) or the request was refused before it (UNKNOWN_MEMBER_ID)."""
    expected = None if version >= 7 else ""

    def body(group: str, member_id: str):
        return JoinGroup(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=60_000, member_id=member_id,
                         protocol_type="consumer", protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"")])

    handshake = call(port, "JoinGroup", version, body(f"no-protocol-{version}", ""))
    assert handshake.error_code == ErrorCode.MEMBER_ID_REQUIRED and handshake.protocol_name == expected
    refused = call(port, "JoinGroup", version, body(f"no-such-group-{version}", "made-up"))
    assert refused.error_code == ErrorCode.UNKNOWN_MEMBER_ID and refused.protocol_name == expected


# -- as the reference Kafka 4.4 answers (compat_tests/differential_sessions_groups.py) --------------------------

GROUP_OPERATIONS = sum(1 << operation for operation in (3, 6, 8, 10, 11))  # READ, DELETE, DESCRIBE, DESCRIBE_/ALTER_CONFIGS


def test_find_coordinator_places_any_key_and_names_no_error_as_none_before_v4(port):
    old = call(port, "FindCoordinator", 3, FindCoordinator(key="any-group", key_type=0))
    assert (old.error_code, old.error_message) == (ErrorCode.NONE, "NONE")  # Kafka: Errors.NONE.message()
    [empty] = call(port, "FindCoordinator", 4, FindCoordinator(key_type=0, coordinator_keys=[""])).coordinators
    assert (empty.error_code, empty.error_message) == (ErrorCode.NONE, "") and empty.node_id >= 0


def test_described_members_and_groups_read_as_kafkas(port):
    DescribeGroups = API_BY_NAME["DescribeGroups"].request_class
    joined = join(port, "described-classic")
    refused = call(port, "SyncGroup", 5, SyncGroup(group_id="described-classic", generation_id=joined.generation_id + 1,
                                                   member_id=joined.member_id, assignments=[]))
    assert (refused.error_code, refused.protocol_type, refused.protocol_name) == (ErrorCode.ILLEGAL_GENERATION, None, None)
    [group] = call(port, "DescribeGroups", 5, DescribeGroups(groups=["described-classic"],
                                                             include_authorized_operations=True)).groups
    assert group.authorized_operations == GROUP_OPERATIONS  # Kafka 4's group ACLs have configs too (KIP-848)
    assert [member.client_host for member in group.members] == ["/127.0.0.1"]  # Java's InetAddress.toString()

    ConsumerGroupDescribe = API_BY_NAME["ConsumerGroupDescribe"].request_class
    body = ConsumerGroupHeartbeat(group_id="described-848", member_id="m-1", member_epoch=0, rebalance_timeout_ms=5000,
                                  subscribed_topic_names=["t"], topic_partitions=[])
    assert call(port, "ConsumerGroupHeartbeat", 1, body).member_epoch == 2  # a new group is at 1 (Kafka 4.4)
    fenced = call(port, "ConsumerGroupHeartbeat", 1, ConsumerGroupHeartbeat(group_id="described-848", member_id="m-1",
                                                                           member_epoch=9))
    assert (fenced.error_code, fenced.member_epoch, fenced.heartbeat_interval_ms) == (ErrorCode.FENCED_MEMBER_EPOCH, 0, 0)
    described, unknown = call(port, "ConsumerGroupDescribe", 1, ConsumerGroupDescribe(
        group_ids=["described-848", "described-nothing"], include_authorized_operations=True)).groups
    assert described.authorized_operations == GROUP_OPERATIONS
    [member] = described.members
    assert (member.client_host, member.subscribed_topic_regex) == ("/127.0.0.1", "")
    assert (unknown.error_code, unknown.group_state, unknown.group_epoch, unknown.assignment_epoch) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "", 0, 0)  # Kafka's error entry: every other field at its default
    left = call(port, "ConsumerGroupHeartbeat", 1, ConsumerGroupHeartbeat(group_id="described-848", member_id="m-1",
                                                                         member_epoch=-1))
    assert (left.member_epoch, left.heartbeat_interval_ms) == (-1, 0)


def test_offset_delete_of_partitions_that_do_not_exist_is_unknown_topic_or_partition(port):
    OffsetDelete = API_BY_NAME["OffsetDelete"].request_class
    CreateTopics = API_BY_NAME["CreateTopics"].request_class
    call(port, "CreateTopics", 7, CreateTopics(timeout_ms=5000, topics=[
        CreateTopics.CreatableTopic(name="deleted-offsets", num_partitions=1, replication_factor=1)]))
    partition = OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(partition_index=0, committed_offset=3)
    call(port, "OffsetCommit", 8, OffsetCommit(group_id="offset-delete-unknown", generation_id_or_member_epoch=-1,
                                               member_id="", topics=[OffsetCommit.OffsetCommitRequestTopic(
                                                   name="deleted-offsets", partitions=[partition])]))
    topic = OffsetDelete.OffsetDeleteRequestTopic
    wanted = [topic(name="deleted-offsets", partitions=[topic.OffsetDeleteRequestPartition(partition_index=i) for i in (0, 5)]),
              topic(name="never-made", partitions=[topic.OffsetDeleteRequestPartition(partition_index=0)])]
    answer = call(port, "OffsetDelete", 0, OffsetDelete(group_id="offset-delete-unknown", topics=wanted))
    assert answer.error_code == ErrorCode.NONE
    assert [[(p.partition_index, p.error_code) for p in t.partitions] for t in answer.topics] == [
        [(0, ErrorCode.NONE), (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)], [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]]


def test_a_refused_join_leaves_no_consumer_group(port):
    """Kafka validates a ConsumerGroupHeartbeat before the group exists for it (and drops what a failed
    request made): a refused first join leaves nothing to list or describe."""
    ConsumerGroupDescribe = API_BY_NAME["ConsumerGroupDescribe"].request_class
    ListGroups = API_BY_NAME["ListGroups"].request_class
    body = ConsumerGroupHeartbeat(group_id="refused-848", member_id="m-1", member_epoch=0, rebalance_timeout_ms=5000,
                                  subscribed_topic_names=None, topic_partitions=[])
    assert call(port, "ConsumerGroupHeartbeat", 1, body).error_code == ErrorCode.INVALID_REQUEST
    body.subscribed_topic_names, body.server_assignor = ["t"], "sticky"
    assert call(port, "ConsumerGroupHeartbeat", 1, body).error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    listed = call(port, "ListGroups", 5, ListGroups(states_filter=[], types_filter=[])).groups
    assert "refused-848" not in {group.group_id for group in listed}
    [described] = call(port, "ConsumerGroupDescribe", 1, ConsumerGroupDescribe(group_ids=["refused-848"])).groups
    assert described.error_code == ErrorCode.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("version", [0, 3, 5])
def test_leaving_a_group_that_does_not_exist(port, version):
    """Kafka: before v3 the answer is UNKNOWN_MEMBER_ID; from v3 (a batch) the request is answered NONE and
    each member named UNKNOWN_MEMBER_ID."""
    LeaveGroup = API_BY_NAME["LeaveGroup"].request_class
    if version < 3:
        answer = call(port, "LeaveGroup", version, LeaveGroup(group_id="never-left", member_id="m-1"))
        assert (answer.error_code, answer.members) == (ErrorCode.UNKNOWN_MEMBER_ID, [])
        return
    answer = call(port, "LeaveGroup", version, LeaveGroup(group_id="never-left", members=[
        LeaveGroup.MemberIdentity(member_id="m-1"), LeaveGroup.MemberIdentity(member_id="", group_instance_id="i-1")]))
    assert answer.error_code == ErrorCode.NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in answer.members] == [
        ("m-1", None, ErrorCode.UNKNOWN_MEMBER_ID), ("", "i-1", ErrorCode.UNKNOWN_MEMBER_ID)]
