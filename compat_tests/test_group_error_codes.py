"""Group error codes over a raw socket, each where Kafka gives it.

(GROUP_AUTHORIZATION_FAILED comes with the security issue's authorizer.)
"""

from __future__ import annotations

import threading
import time

import pytest

from compat_tests.broker_process import BrokerProcess
from compat_tests.test_errors import call
from kbroker.testing import running_broker
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

JoinGroup = API_BY_NAME["JoinGroup"].request_class
SyncGroup = API_BY_NAME["SyncGroup"].request_class
Heartbeat = API_BY_NAME["Heartbeat"].request_class
OffsetCommit = API_BY_NAME["OffsetCommit"].request_class
OffsetFetch = API_BY_NAME["OffsetFetch"].request_class
DeleteGroups = API_BY_NAME["DeleteGroups"].request_class
DescribeGroups = API_BY_NAME["DescribeGroups"].request_class
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


def stable_member(port, group, rebalance_timeout_ms=60_000):
    joined = join(port, group, rebalance_timeout_ms=rebalance_timeout_ms)
    assert joined.error_code == ErrorCode.NONE
    assignment = [SyncGroup.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"a")]
    synced = call(port, "SyncGroup", 3, SyncGroup(group_id=group, generation_id=joined.generation_id,
                                                  member_id=joined.member_id, assignments=assignment))
    assert synced.error_code == ErrorCode.NONE and synced.assignment == b"a"
    return joined.member_id, joined.generation_id


def heartbeat(port, group, member_id, generation):
    return call(port, "Heartbeat", 3, Heartbeat(group_id=group, generation_id=generation, member_id=member_id)).error_code


def test_unknown_member_id(port):
    stable_member(port, "errors-unknown")
    assert heartbeat(port, "errors-unknown", "made-up", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(port, "no-such-group", "made-up", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert join(port, "errors-unknown", member_id="made-up").error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_illegal_generation(port):
    member_id, generation = stable_member(port, "errors-generation")
    assert heartbeat(port, "errors-generation", member_id, generation + 1) == ErrorCode.ILLEGAL_GENERATION
    topic = OffsetCommit.OffsetCommitRequestTopic(name="t", partitions=[
        OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])
    body = OffsetCommit(group_id="errors-generation", generation_id_or_member_epoch=generation + 1, member_id=member_id,
                        topics=[topic])
    [result] = call(port, "OffsetCommit", 8, body).topics[0].partitions
    assert result.error_code == ErrorCode.ILLEGAL_GENERATION


def test_rebalance_in_progress(port):
    member_id, generation = stable_member(port, "errors-rebalance", rebalance_timeout_ms=2000)
    answers = []
    newcomer = threading.Thread(target=lambda: answers.append(join(port, "errors-rebalance", rebalance_timeout_ms=2000)))
    newcomer.start()
    try:
        deadline = time.monotonic() + 5
        code = ErrorCode.NONE
        while code == ErrorCode.NONE and time.monotonic() < deadline:
            code = heartbeat(port, "errors-rebalance", member_id, generation)
        assert code == ErrorCode.REBALANCE_IN_PROGRESS
    finally:
        newcomer.join(10)
    # The old member never rejoined: at the rebalance timeout the newcomer is alone in the next generation.
    assert answers and answers[0].error_code == ErrorCode.NONE and answers[0].generation_id == generation + 1


def test_non_empty_group_and_group_id_not_found(port):
    stable_member(port, "errors-active")
    results = call(port, "DeleteGroups", 2, DeleteGroups(groups_names=["errors-active", "errors-never"])).results
    assert [(r.group_id, r.error_code) for r in results] == [
        ("errors-active", ErrorCode.NON_EMPTY_GROUP), ("errors-never", ErrorCode.GROUP_ID_NOT_FOUND)]
    [described] = call(port, "DescribeGroups", 6, DescribeGroups(groups=["errors-never"])).groups
    assert described.error_code == ErrorCode.GROUP_ID_NOT_FOUND


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


def test_coordinator_load_in_progress_after_a_restart(tmp_path):
    """A broker restarted with many offset records answers COORDINATOR_LOAD_IN_PROGRESS until they are read."""
    broker = BrokerProcess(tmp_path / "data", None, "offsets.topic.num.partitions=1")
    broker.start()
    try:
        call(broker.port, "FindCoordinator", 4, FindCoordinator(key_type=0, coordinator_keys=["loaded"]))
        partitions = [OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(partition_index=p, committed_offset=p)
                      for p in range(2000)]
        body = OffsetCommit(group_id="loaded", generation_id_or_member_epoch=-1, member_id="",
                            topics=[OffsetCommit.OffsetCommitRequestTopic(name="t", partitions=partitions)])
        for _ in range(60):  # 120,000 records to read back
            assert {p.error_code for p in call(broker.port, "OffsetCommit", 8, body).topics[0].partitions} == {0}
        broker.kill()
        broker.start()
        fetch = OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id="loaded", topics=None)])
        codes = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            [group] = call(broker.port, "OffsetFetch", 8, fetch).groups
            codes.append(group.error_code)
            if group.error_code == ErrorCode.NONE:
                break
        assert codes[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and codes[-1] == ErrorCode.NONE
        assert {p.committed_offset for p in group.topics[0].partitions} == set(range(2000))
    finally:
        broker.kill()


def test_offset_delete_keeps_subscribed_topics_and_list_groups_filters(port):
    OffsetDelete = API_BY_NAME["OffsetDelete"].request_class
    ListGroups = API_BY_NAME["ListGroups"].request_class
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
