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
    unknown = ConsumerGroupHeartbeat(group_id="errors-848", member_id="m-2", member_epoch=3)
    assert call(port, "ConsumerGroupHeartbeat", 1, unknown).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # A classic join for a group that has KIP-848 members is refused.
    assert join(port, "errors-848").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_offset_delete_keeps_subscribed_topics_and_list_groups_filters(port):
    OffsetDelete = API_BY_NAME["OffsetDelete"].request_class
    ListGroups = API_BY_NAME["ListGroups"].request_class
    CreateTopics = API_BY_NAME["CreateTopics"].request_class
    call(port, "CreateTopics", 7, CreateTopics(timeout_ms=5000, topics=[  # offsets are only kept for topics that exist
        CreateTopics.CreatableTopic(name="gone", num_partitions=1, replication_factor=1)]))
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
