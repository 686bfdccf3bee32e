"""Scripted sessions for the differential suite (compat_tests/test_differential.py): consumer groups
(classic and KIP-848), transactions and producer state, at every version kbroker serves.

Both brokers run with a 3 s initial rebalance delay, so the first JoinGroup of an empty classic group
takes 3 s: the sessions make few fresh classic groups and take one group through every version (a lone
leader's rejoin rebalances at once). A request that must wait for another member (a second member's
JoinGroup) goes on a second connection whose exchanges join the same transcript, in the order they were
sent (``Background``). What a broker does in its own time (loading a coordinator's partition, serving a
new partition, writing a transaction's markers) is waited for with unrecorded requests (``wait_*``), so that
no answer depends on timing; where Kafka's order of an array follows random ids (a group's members, a
partition's producers), the sessions keep one element in it.
"""

from __future__ import annotations

import threading
import time
import uuid

from compat_tests.differential_sessions import (UNKNOWN_TOPIC_ID, create_topics, metadata, produce, request, topic_id,
                                               values, versions, wait_led)
from kbroker.wire.schema import API_BY_NAME
from testkit.differential import Side

READY_TIMEOUT_S = 30
TOPIC = "diff-groups"  # two partitions, the offsets' topic
SENT_SETTLE_S = 1.0  # time for a request sent on the second connection to reach its broker

JoinGroup = API_BY_NAME["JoinGroup"].request_class
SyncGroup = API_BY_NAME["SyncGroup"].request_class
LeaveGroup = API_BY_NAME["LeaveGroup"].request_class
OffsetCommit = API_BY_NAME["OffsetCommit"].request_class
OffsetFetch = API_BY_NAME["OffsetFetch"].request_class
OffsetDelete = API_BY_NAME["OffsetDelete"].request_class
ConsumerGroupHeartbeat = API_BY_NAME["ConsumerGroupHeartbeat"].request_class
AddPartitionsToTxn = API_BY_NAME["AddPartitionsToTxn"].request_class
TxnOffsetCommit = API_BY_NAME["TxnOffsetCommit"].request_class
DescribeProducers = API_BY_NAME["DescribeProducers"].request_class
# ConsumerProtocol subscription v0: version, [topics], user data (null)
SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + len(TOPIC).to_bytes(2, "big") + TOPIC.encode() + b"\xff\xff\xff\xff"
# ConsumerProtocol assignment v0: version, [topic, [partitions]], user data (null)
ASSIGNMENT = (b"\x00\x00" + b"\x00\x00\x00\x01" + len(TOPIC).to_bytes(2, "big") + TOPIC.encode()
              + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\xff\xff\xff\xff")


class Background:
    """One request sent on a second connection to the same broker and answered later (a JoinGroup that
    waits for the rest of its group); its exchange takes its place in the side's transcript when sent."""

    def __init__(self, side: Side, api_name: str, version: int, body) -> None:
        self.other = Side(side.name, side.host, side.port)
        self.other.transcript = side.transcript
        self.answer = None
        sent = len(side.transcript)
        self.thread = threading.Thread(target=self._call, args=(api_name, version, body), daemon=True)
        self.thread.start()
        while len(side.transcript) == sent:
            time.sleep(0.01)
        time.sleep(SENT_SETTLE_S)

    def _call(self, api_name: str, version: int, body) -> None:
        self.answer = self.other.call(api_name, version, body)

    def wait(self):
        self.thread.join(READY_TIMEOUT_S)
        self.other.close()
        return self.answer


def wait_coordinator(side: Side, key: str, key_type: int) -> None:
    """Until the coordinator of ``key`` is ready (its internal topic made and led): unrecorded."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = side.call("FindCoordinator", 4, request("FindCoordinator", key_type=key_type, coordinator_keys=[key]),
                           record=False)
        if answer.coordinators[0].error_code == 0 and _loaded(side, key, key_type):
            return
        time.sleep(0.1)
    raise AssertionError(f"{side.name}: no coordinator for {key} within {READY_TIMEOUT_S} s")


def _loaded(side: Side, key: str, key_type: int) -> bool:
    """Whether the coordinator found has loaded the key's partition (Kafka answers NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS until it has)."""
    not_yet = (14, 15, 16)
    if key_type == 0:
        answer = side.call("OffsetFetch", 8, request("OffsetFetch", groups=[
            OffsetFetch.OffsetFetchRequestGroup(group_id=key, topics=None)]), record=False)
        return answer.groups[0].error_code not in not_yet
    answer = side.call("DescribeTransactions", 0, request("DescribeTransactions", transactional_ids=[key]), record=False)
    return answer.transaction_states[0].error_code not in not_yet


def wait_producer_ids(side: Side) -> None:
    """Until the broker hands out producer ids (Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its
    first block is allocated): unrecorded."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = side.call("InitProducerId", 4, request("InitProducerId", transactional_id=None,
                                                        transaction_timeout_ms=60_000), record=False)
        if answer.error_code == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"{side.name}: no producer id within {READY_TIMEOUT_S} s")


def wait_serving(side: Side, topic: str, partitions: int) -> None:
    """Until every partition of ``topic`` is led and its leader serves it (Kafka's Metadata may name a
    leader that still answers NOT_LEADER_OR_FOLLOWER for a moment): unrecorded ListOffsets."""
    wait_led(side, topic)
    listing = API_BY_NAME["ListOffsets"].request_class.ListOffsetsTopic
    body = request("ListOffsets", replica_id=-1, isolation_level=0, topics=[listing(name=topic, partitions=[
        listing.ListOffsetsPartition(partition_index=index, timestamp=-1, current_leader_epoch=-1)
        for index in range(partitions)])])
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = side.call("ListOffsets", 7, body, record=False)
        if all(p.error_code == 0 for t in answer.topics for p in t.partitions):
            return
        time.sleep(0.05)
    raise AssertionError(f"{side.name}: {topic} not served within {READY_TIMEOUT_S} s")


def wait_settled(side: Side, txn: str) -> None:
    """Until the transaction's markers are written (no longer PrepareCommit or PrepareAbort): unrecorded.
    Both brokers answer EndTxn once the prepare is durable and finish in the background meanwhile a
    request finds CONCURRENT_TRANSACTIONS."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = side.call("DescribeTransactions", 0, request("DescribeTransactions", transactional_ids=[txn]),
                           record=False)
        if answer.transaction_states[0].transaction_state not in ("PrepareCommit", "PrepareAbort", "PrepareEpochFence"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{side.name}: {txn} not settled within {READY_TIMEOUT_S} s")


def offsets_topic(side: Side):
    """The sessions' topic (made and led, unrecorded) and its topic id (OffsetCommit and OffsetFetch v10)."""
    create_topics(side, 7, (TOPIC, 2, 1), record=False)
    wait_serving(side, TOPIC, 2)
    return metadata(side, 12, [TOPIC], record=False).topics[0].topic_id


def join(side: Side, version: int, group: str, member_id: str = "", *, instance: str | None = None,
         protocol_type: str = "consumer", rebalance_timeout_ms: int = 30_000, background: bool = False):
    body = request("JoinGroup", group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=rebalance_timeout_ms,
                   member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
                   protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)])
    if background:
        return Background(side, "JoinGroup", version, body)
    return side.call("JoinGroup", version, body)


def sync(side: Side, version: int, group: str, generation: int, member_id: str, *, leader: bool = True,
         instance: str | None = None):
    assignments = [SyncGroup.SyncGroupRequestAssignment(member_id=member_id, assignment=ASSIGNMENT)] if leader else []
    return side.call("SyncGroup", version, request(
        "SyncGroup", group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
        protocol_type="consumer", protocol_name="range", assignments=assignments))


def heartbeat(side: Side, version: int, group: str, generation: int, member_id: str, instance: str | None = None):
    return side.call("Heartbeat", version, request("Heartbeat", group_id=group, generation_id=generation,
                                                   member_id=member_id, group_instance_id=instance))


def leave(side: Side, version: int, group: str, *members: tuple[str, str | None]):
    if version < 3:
        return side.call("LeaveGroup", version, request("LeaveGroup", group_id=group, member_id=members[0][0]))
    return side.call("LeaveGroup", version, request("LeaveGroup", group_id=group, members=[
        LeaveGroup.MemberIdentity(member_id=member, group_instance_id=instance, reason="differential")
        for member, instance in members]))


def commit(side: Side, version: int, group: str, generation: int, member_id: str, topic_id, offset: int,
           partitions=(0, 1), topic: str = TOPIC):
    wanted = OffsetCommit.OffsetCommitRequestTopic
    return side.call("OffsetCommit", version, request(
        "OffsetCommit", group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        topics=[wanted(name=topic, topic_id=topic_id, partitions=[wanted.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_metadata=f"m{offset}")
            for partition in partitions])]))


def fetch_offsets(side: Side, version: int, group: str, topic_id, partitions=(0, 1, 7), *, all_topics: bool = False,
                  require_stable: bool = False):
    if version < 8:
        topics = None if all_topics else [OffsetFetch.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(partitions))]
        if version < 2 and topics is None:
            return None
        body = request("OffsetFetch", group_id=group, topics=topics, require_stable=require_stable)
    else:
        wanted = OffsetFetch.OffsetFetchRequestGroup.OffsetFetchRequestTopics
        topics = None if all_topics else [wanted(name=TOPIC, topic_id=topic_id, partition_indexes=list(partitions))]
        body = request("OffsetFetch", groups=[OffsetFetch.OffsetFetchRequestGroup(group_id=group, topics=topics)],
                       require_stable=require_stable)
    return side.call("OffsetFetch", version, body)


# -- sessions ---------------------------------------------------------------------------------------------

def find_coordinator_session(side: Side) -> None:
    """Group and transaction keys at every version; v4+ batched keys; an invalid key type."""
    wait_coordinator(side, "diff-fc-group", 0)
    wait_coordinator(side, "diff-fc-txn", 1)
    for version in versions("FindCoordinator"):
        if version < 4:
            side.call("FindCoordinator", version, request("FindCoordinator", key="diff-fc-group", key_type=0))
            if version >= 1:
                side.call("FindCoordinator", version, request("FindCoordinator", key="diff-fc-txn", key_type=1))
                side.call("FindCoordinator", version, request("FindCoordinator", key="diff-fc-group", key_type=7))
        else:
            side.call("FindCoordinator", version, request("FindCoordinator", key_type=0,
                                                          coordinator_keys=["diff-fc-group", "diff-fc-other", ""]))
            side.call("FindCoordinator", version, request("FindCoordinator", key_type=1,
                                                          coordinator_keys=["diff-fc-txn", "diff-fc-txn-2"]))
            side.call("FindCoordinator", version, request("FindCoordinator", key_type=7,
                                                          coordinator_keys=["diff-fc-group"]))


def classic_group_session(side: Side) -> None:
    """One classic group taken through every version of JoinGroup, SyncGroup, Heartbeat, OffsetCommit and
    OffsetFetch, with their refusals; then a second member's join (REBALANCE_IN_PROGRESS to the first),
    DescribeGroups, ListGroups and LeaveGroup."""
    group = "diff-classic"
    topic_id = offsets_topic(side)
    wait_coordinator(side, group, 0)
    first = join(side, 4, group)  # MEMBER_ID_REQUIRED, with the member id to use
    member = first.member_id
    joined = join(side, 4, group, member)  # waits out the initial rebalance delay
    generation = joined.generation_id
    for version in versions("SyncGroup"):
        sync(side, version, group, generation + 1, member)  # ILLEGAL_GENERATION
        sync(side, version, group, generation, "diff-unknown-member")  # UNKNOWN_MEMBER_ID
        sync(side, version, group, generation, member)  # the leader's assignment
    for version in versions("JoinGroup"):
        joined = join(side, version, group, member)  # the leader's rejoin: a new generation at once
        generation = joined.generation_id
        if version == 9:  # CompletingRebalance: waiting for the leader's assignment
            describe_groups(side, group)
            heartbeat(side, 4, group, generation, member)
            commit(side, 9, group, generation, member, topic_id, 40)
            side.call("SyncGroup", 5, request(  # a protocol the group does not have
                "SyncGroup", group_id=group, generation_id=generation, member_id=member, protocol_type="other",
                protocol_name="range", assignments=[]))
        sync(side, min(version, 5), group, generation, member)
        join(side, version, group, "diff-unknown-member")  # UNKNOWN_MEMBER_ID
        join(side, version, group, "", protocol_type="other")  # INCONSISTENT_GROUP_PROTOCOL
        if version >= 4:
            join(side, version, group, member, protocol_type="other")  # a known member, another protocol type
    body = request("JoinGroup", group_id=group, session_timeout_ms=1, rebalance_timeout_ms=30_000, member_id="",
                   protocol_type="consumer", protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"")])
    side.call("JoinGroup", 9, body)  # INVALID_SESSION_TIMEOUT
    body.group_id = ""
    side.call("JoinGroup", 9, body)  # INVALID_GROUP_ID
    for version in versions("Heartbeat"):
        heartbeat(side, version, group, generation, member)
        heartbeat(side, version, group, generation - 1, member)  # ILLEGAL_GENERATION
        heartbeat(side, version, group, generation, "diff-unknown-member")  # UNKNOWN_MEMBER_ID
    for version in versions("OffsetCommit"):
        commit(side, version, group, generation, member, topic_id, 10 + version)
        commit(side, version, group, generation - 1, member, topic_id, 100)  # a stale generation
        commit(side, version, group, generation, "diff-unknown-member", topic_id, 100)
        commit(side, version, group, -1, "", topic_id, 100)  # a simple commit to a group with members
        commit(side, version, group, generation, member, topic_id, 5, partitions=(9,))  # no such partition
    for version in versions("OffsetFetch"):
        fetch_offsets(side, version, group, topic_id)
        fetch_offsets(side, version, group, topic_id, all_topics=True, require_stable=version >= 7)
        fetch_offsets(side, version, "diff-classic-unknown", topic_id)

    # A second member joins (and waits): the first is told of the rebalance, then leaves.
    second = join(side, 5, group).member_id  # MEMBER_ID_REQUIRED
    waiting = join(side, 5, group, second, background=True)
    for version in versions("Heartbeat"):
        heartbeat(side, version, group, generation, member)  # REBALANCE_IN_PROGRESS
    commit(side, 9, group, generation, member, topic_id, 50)  # REBALANCE_IN_PROGRESS
    sync(side, 5, group, generation, member)  # REBALANCE_IN_PROGRESS
    # (not DescribeGroups now: Kafka lists two members in its HashMap's order, which follows their random ids)
    list_groups(side, 4)
    leave(side, 0, group, (member, None))
    generation = waiting.wait().generation_id
    sync(side, 5, group, generation, second)
    describe_groups(side, group)
    for version in versions("ListGroups"):
        list_groups(side, version)
    leave(side, 0, group, ("diff-unknown-member", None))  # UNKNOWN_MEMBER_ID
    leave(side, 3, group, ("diff-unknown-member", None), ("", "diff-unknown-instance"))
    leave(side, 5, group, (second, None))
    describe_groups(side, group)  # Empty, its offsets kept


def describe_groups(side: Side, group: str) -> None:
    for version in versions("DescribeGroups"):
        side.call("DescribeGroups", version, request("DescribeGroups", groups=[group, "diff-describe-unknown"],
                                                     include_authorized_operations=version >= 3))


def list_groups(side: Side, version: int) -> None:
    # Only filters that name this family's groups: the reference Kafka is shared with other modules.
    if version >= 5:
        side.call("ListGroups", version, request("ListGroups", states_filter=["PreparingRebalance", "CompletingRebalance"], types_filter=[]))
        side.call("ListGroups", version, request("ListGroups", states_filter=[], types_filter=["share"]))
    elif version == 4:
        side.call("ListGroups", version, request("ListGroups", states_filter=["PreparingRebalance", "CompletingRebalance"]))
        side.call("ListGroups", version, request("ListGroups", states_filter=["NoSuchState"]))
    else:
        side.call("ListGroups", version, request("ListGroups"))


def static_member_session(side: Side) -> None:
    """A static member (group_instance_id): its rejoin under a new member id fences the old one."""
    group = "diff-static"
    instance = "diff-instance-1"
    offsets_topic(side)
    wait_coordinator(side, group, 0)
    joined = join(side, 5, group, instance=instance)  # no MEMBER_ID_REQUIRED for a static member
    old, generation = joined.member_id, joined.generation_id
    sync(side, 5, group, generation, old, instance=instance)
    for version in range(5, API_BY_NAME["JoinGroup"].max_version + 1):
        joined = join(side, version, group, instance=instance)  # replaces the member, keeps the generation
        heartbeat(side, 4, group, joined.generation_id, old, instance)  # FENCED_INSTANCE_ID
        sync(side, 5, group, joined.generation_id, old, instance=instance)  # FENCED_INSTANCE_ID
        old = joined.member_id
        heartbeat(side, 4, group, joined.generation_id, old, instance)
    for version in range(3, API_BY_NAME["Heartbeat"].max_version + 1):
        heartbeat(side, version, group, joined.generation_id, "diff-other-member", instance)  # FENCED_INSTANCE_ID
    for version in range(3, API_BY_NAME["LeaveGroup"].max_version + 1):
        leave(side, version, group, ("diff-other-member", instance), ("", "diff-unknown-instance"))
    describe_groups(side, group)
    leave(side, 4, group, ("", instance))  # a static member leaves by its instance id


def delete_groups_session(side: Side) -> None:
    """DeleteGroups: an empty group (simple commits only) deleted, a group with a member refused, an
    unknown one; OffsetDelete on an empty group, a subscribed one, an unknown one."""
    topic_id = offsets_topic(side)
    group = "diff-delete-member"
    wait_coordinator(side, group, 0)
    member = join(side, 4, group).member_id
    generation = join(side, 4, group, member).generation_id
    sync(side, 4, group, generation, member)
    commit(side, 8, group, generation, member, topic_id, 3)
    for version in versions("DeleteGroups"):
        empty = f"diff-delete-empty-v{version}"
        wait_coordinator(side, empty, 0)
        commit(side, 8, empty, -1, "", topic_id, 7)
        side.call("DeleteGroups", version, request("DeleteGroups", groups_names=[
            empty, group, f"diff-delete-unknown-v{version}"]))
        fetch_offsets(side, 8, empty, topic_id)
    partitions = OffsetDelete.OffsetDeleteRequestTopic
    wanted = [partitions(name=TOPIC, partitions=[partitions.OffsetDeleteRequestPartition(partition_index=index)
                                                 for index in (0, 7)]),
              partitions(name="diff-groups-unknown", partitions=[partitions.OffsetDeleteRequestPartition(partition_index=0)])]
    side.call("OffsetDelete", 0, request("OffsetDelete", group_id=group, topics=wanted))  # subscribed
    simple = "diff-offset-delete"
    wait_coordinator(side, simple, 0)
    commit(side, 8, simple, -1, "", topic_id, 4)
    side.call("OffsetDelete", 0, request("OffsetDelete", group_id=simple, topics=wanted))
    fetch_offsets(side, 8, simple, topic_id)
    side.call("OffsetDelete", 0, request("OffsetDelete", group_id="diff-offset-delete-unknown", topics=wanted))
    leave(side, 3, group, (member, None))
    side.call("DeleteGroups", 2, request("DeleteGroups", groups_names=[group]))  # empty now
    simple = "diff-simple"  # a group that only ever has simple commits (generation -1, no member)
    wait_coordinator(side, simple, 0)
    for version in versions("OffsetCommit"):
        commit(side, version, simple, -1, "", topic_id, 20 + version)
        commit(side, version, simple, 3, "diff-unknown-member", topic_id, 1)  # a member of an empty group
    for version in versions("OffsetFetch"):
        fetch_offsets(side, version, simple, topic_id, all_topics=version >= 2)
    # A group nobody made, named with a member and a generation
    never = "diff-never-made"
    wait_coordinator(side, never, 0)
    for version in versions("OffsetCommit"):
        commit(side, version, never, 3, "diff-unknown-member", topic_id, 1)
    for version in versions("Heartbeat"):
        heartbeat(side, version, never, 3, "diff-unknown-member")
    for version in versions("SyncGroup"):
        sync(side, version, never, 3, "diff-unknown-member")
    for version in versions("LeaveGroup"):
        leave(side, version, never, ("diff-unknown-member", None))
    side.call("DescribeGroups", 5, request("DescribeGroups", groups=[""], include_authorized_operations=False))
    side.call("DeleteGroups", 2, request("DeleteGroups", groups_names=[""]))


def consumer_group_session(side: Side) -> None:
    """KIP-848: ConsumerGroupHeartbeat (join with epoch 0, unknown member, fenced epoch, leave with -1)
    and ConsumerGroupDescribe, at every version."""
    offsets_topic(side)
    for version in versions("ConsumerGroupHeartbeat"):
        group = f"diff-consumer-v{version}"
        wait_coordinator(side, group, 0)
        member_id = "" if version == 0 else f"diff-member-v{version}-aaaaaaaaaaaa"
        joined = side.call("ConsumerGroupHeartbeat", version, request(
            "ConsumerGroupHeartbeat", group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[TOPIC], server_assignor="uniform", topic_partitions=[]))
        member, epoch = joined.member_id, joined.member_epoch
        side.call("ConsumerGroupHeartbeat", version, request(
            "ConsumerGroupHeartbeat", group_id=group, member_id=member, member_epoch=epoch,
            topic_partitions=joined.assignment.topic_partitions if joined.assignment else None))
        side.call("ConsumerGroupHeartbeat", version, request(
            "ConsumerGroupHeartbeat", group_id=group, member_id=member, member_epoch=epoch + 5))  # FENCED_MEMBER_EPOCH
        side.call("ConsumerGroupHeartbeat", version, request(
            "ConsumerGroupHeartbeat", group_id=group, member_id="diff-unknown-member", member_epoch=3))  # UNKNOWN_MEMBER_ID
        side.call("ConsumerGroupHeartbeat", version, request(
            "ConsumerGroupHeartbeat", group_id="diff-consumer-other", member_id=member, member_epoch=0,
            rebalance_timeout_ms=30_000, subscribed_topic_names=None))  # a join without a subscription
        for describe in versions("ConsumerGroupDescribe"):
            side.call("ConsumerGroupDescribe", describe, request(
                "ConsumerGroupDescribe", group_ids=[group, "diff-consumer-unknown"],
                include_authorized_operations=True))
        side.call("ConsumerGroupHeartbeat", version, request(
            "ConsumerGroupHeartbeat", group_id=group, member_id=member, member_epoch=-1))  # leaves
        side.call("ConsumerGroupDescribe", version, request("ConsumerGroupDescribe", group_ids=[group],
                                                            include_authorized_operations=False))
    side.call("ConsumerGroupDescribe", 1, request("ConsumerGroupDescribe", group_ids=["diff-static"],
                                                  include_authorized_operations=False))  # a classic group
    # The classic APIs on a consumer group with a member
    group = "diff-consumer-classic"
    wait_coordinator(side, group, 0)
    joined = side.call("ConsumerGroupHeartbeat", 1, request(
        "ConsumerGroupHeartbeat", group_id=group, member_id="diff-member-classic-aaaaaa", member_epoch=0,
        rebalance_timeout_ms=30_000, subscribed_topic_names=[TOPIC], topic_partitions=[]))
    side.call("DescribeGroups", 5, request("DescribeGroups", groups=[group], include_authorized_operations=False))
    side.call("DescribeGroups", 6, request("DescribeGroups", groups=[group], include_authorized_operations=False))
    heartbeat(side, 4, group, joined.member_epoch, joined.member_id)
    topic_id = metadata(side, 12, [TOPIC], record=False).topics[0].topic_id
    for version in (8, 9, 10):  # a member's commits: v9+ carry its epoch (KIP-848)
        commit(side, version, group, joined.member_epoch, joined.member_id, topic_id, 60 + version)
        commit(side, version, group, joined.member_epoch - 1, joined.member_id, topic_id, 1)  # STALE_MEMBER_EPOCH
        commit(side, version, group, joined.member_epoch + 1, joined.member_id, topic_id, 1)
        commit(side, version, group, joined.member_epoch, "diff-unknown-member", topic_id, 1)
    for epoch in (joined.member_epoch, joined.member_epoch - 1, joined.member_epoch + 1):
        side.call("OffsetFetch", 9, request("OffsetFetch", groups=[OffsetFetch.OffsetFetchRequestGroup(
            group_id=group, member_id=joined.member_id, member_epoch=epoch, topics=None)]))
    side.call("OffsetFetch", 9, request("OffsetFetch", groups=[OffsetFetch.OffsetFetchRequestGroup(
        group_id=group, member_id="diff-unknown-member", member_epoch=1, topics=None)]))
    side.call("DeleteGroups", 2, request("DeleteGroups", groups_names=[group]))  # NON_EMPTY_GROUP
    deleted = OffsetDelete.OffsetDeleteRequestTopic
    side.call("OffsetDelete", 0, request("OffsetDelete", group_id=group, topics=[deleted(  # GROUP_SUBSCRIBED_TO_TOPIC
        name=TOPIC, partitions=[deleted.OffsetDeleteRequestPartition(partition_index=0)])]))
    side.call("ConsumerGroupHeartbeat", 1, request(  # UNSUPPORTED_ASSIGNOR
        "ConsumerGroupHeartbeat", group_id=group, member_id="diff-member-other-aaaaaaa", member_epoch=0,
        rebalance_timeout_ms=30_000, subscribed_topic_names=[TOPIC], server_assignor="sticky", topic_partitions=[]))
    # A static member (instance id): another member id for the same instance is refused; -2 leaves for now
    static = dict(group_id="diff-consumer-static", instance_id="diff-instance", rebalance_timeout_ms=30_000,
                  subscribed_topic_names=[TOPIC], topic_partitions=[])
    wait_coordinator(side, "diff-consumer-static", 0)
    first = side.call("ConsumerGroupHeartbeat", 1, request("ConsumerGroupHeartbeat", member_id="diff-static-one-aaaaaa",
                                                           member_epoch=0, **static))
    side.call("ConsumerGroupHeartbeat", 1, request("ConsumerGroupHeartbeat", member_id="diff-static-two-aaaaaa",
                                                   member_epoch=0, **static))  # UNRELEASED_INSTANCE_ID
    side.call("ConsumerGroupHeartbeat", 1, request("ConsumerGroupHeartbeat", group_id="diff-consumer-static",
                                                   member_id=first.member_id, member_epoch=-2, instance_id="diff-instance"))
    side.call("ConsumerGroupHeartbeat", 1, request("ConsumerGroupHeartbeat", member_id="diff-static-two-aaaaaa",
                                                   member_epoch=0, **static))  # takes the instance's place
    side.call("ConsumerGroupDescribe", 1, request("ConsumerGroupDescribe", group_ids=["diff-consumer-static"],
                                                  include_authorized_operations=False))
    for version in (4, 5):
        side.call("ListGroups", version, request("ListGroups", states_filter=["Stable", "Empty"],
                                                 types_filter=["consumer"] if version >= 5 else []))
    join(side, 9, group, "diff-unknown-member")  # a classic member: Kafka takes it in (KIP-848 interop)
    side.call("ConsumerGroupHeartbeat", 1, request(
        "ConsumerGroupHeartbeat", group_id=group, member_id=joined.member_id, member_epoch=-1))


def idempotent_produce_session(side: Side) -> None:
    """Idempotent Produce: a retried batch answers its first offset, a gap in sequence is refused, an
    unknown producer id; DescribeProducers of the partition."""
    topic = "diff-idempotent"
    create_topics(side, 7, (topic, 3, 1), record=False)
    wait_serving(side, topic, 3)
    wait_coordinator(side, "diff-idempotent-txn", 1)
    wait_producer_ids(side)
    producer = side.call("InitProducerId", 4, request("InitProducerId", transactional_id=None,
                                                      transaction_timeout_ms=60_000))
    pid, epoch = producer.producer_id, producer.producer_epoch
    first = values(b"a", b"b", producer_id=pid, producer_epoch=epoch, base_sequence=0)
    produce(side, 9, topic, 0, first)
    produce(side, 9, topic, 0, first)  # the same batch again: its first answer
    produce(side, 9, topic, 0, values(b"c", producer_id=pid, producer_epoch=epoch, base_sequence=2))
    produce(side, 9, topic, 0, first)  # not the last batch: still a duplicate of a kept one
    produce(side, 9, topic, 0, values(b"gap", producer_id=pid, producer_epoch=epoch, base_sequence=9))
    produce(side, 9, topic, 0, values(b"old", producer_id=pid, producer_epoch=epoch + 1, base_sequence=3))
    produce(side, 9, topic, 0, values(b"new epoch", producer_id=pid, producer_epoch=epoch + 1, base_sequence=0))
    produce(side, 9, topic, 0, values(b"old epoch", producer_id=pid, producer_epoch=epoch, base_sequence=3))
    # Producer ids the broker never gave, each alone in its partition: the order of a partition's
    # producers in Kafka's answer is a Java HashMap's.
    produce(side, 9, topic, 1, values(b"unknown", producer_id=987_654_321, producer_epoch=0, base_sequence=5))
    produce(side, 9, topic, 2, values(b"unknown 0", producer_id=987_654_322, producer_epoch=0, base_sequence=0))
    side.call("DescribeProducers", 0, request("DescribeProducers", topics=[
        DescribeProducers.TopicRequest(name=topic, partition_indexes=[0, 1, 2, 3]),
        DescribeProducers.TopicRequest(name="diff-idempotent-unknown", partition_indexes=[0])]))


def transactions_session(side: Side) -> None:
    """InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn at every version,
    with their refusals; DescribeTransactions, ListTransactions and DescribeProducers of what they made."""
    topic = "diff-txn"
    create_topics(side, 7, (topic, 2, 1), record=False)
    wait_serving(side, topic, 2)
    txn = "diff-txn-1"
    wait_coordinator(side, txn, 1)
    wait_coordinator(side, "diff-txn-group", 0)
    wait_producer_ids(side)
    for version in versions("InitProducerId"):
        side.call("InitProducerId", version, request("InitProducerId", transactional_id=None,
                                                     transaction_timeout_ms=60_000))
        side.call("InitProducerId", version, request("InitProducerId", transactional_id=f"diff-txn-bad-v{version}",
                                                     transaction_timeout_ms=3_600_000))  # INVALID_TRANSACTION_TIMEOUT
        answer = side.call("InitProducerId", version, request("InitProducerId", transactional_id=txn,
                                                              transaction_timeout_ms=60_000))
    pid, epoch = answer.producer_id, answer.producer_epoch
    for version in versions("AddPartitionsToTxn"):
        if version >= 4:  # the brokers' form: batched, verify only
            side.call("AddPartitionsToTxn", version, request("AddPartitionsToTxn", transactions=[
                AddPartitionsToTxn.AddPartitionsToTxnTransaction(
                    transactional_id=txn, producer_id=pid, producer_epoch=epoch, verify_only=True,
                    topics=[AddPartitionsToTxn.AddPartitionsToTxnTopic(name=topic, partitions=[0])]),
                AddPartitionsToTxn.AddPartitionsToTxnTransaction(
                    transactional_id="diff-txn-unknown", producer_id=pid, producer_epoch=epoch, verify_only=True,
                    topics=[AddPartitionsToTxn.AddPartitionsToTxnTopic(name=topic, partitions=[0])])]))
            continue
        add_partitions(side, version, txn, pid, epoch, [(topic, [0, 1]), ("diff-txn-unknown", [0])])
        add_partitions(side, version, txn, pid, epoch, [(topic, [0, 9])])
        add_partitions(side, version, txn, pid, epoch - 1 if epoch else epoch + 1, [(topic, [0])])  # a wrong epoch
        add_partitions(side, version, txn, pid, epoch, [(topic, [0])])
        produce(side, 9, topic, 0, values(b"t", producer_id=pid, producer_epoch=epoch, base_sequence=version,
                                          transactional=True), transactional_id=txn)
        side.call("AddOffsetsToTxn", version, request("AddOffsetsToTxn", transactional_id=txn, producer_id=pid,
                                                      producer_epoch=epoch, group_id="diff-txn-group"))
        side.call("TxnOffsetCommit", version, txn_offset_commit(txn, pid, epoch, "diff-txn-group", topic, 5 + version))
        side.call("TxnOffsetCommit", version, txn_offset_commit(txn, pid, epoch, "diff-txn-other-group", topic, 1))
        side.call("DescribeTransactions", 0, request("DescribeTransactions", transactional_ids=[txn, "diff-txn-none"]))
        for list_version in versions("ListTransactions"):
            list_transactions(side, list_version, pid)
        side.call("EndTxn", version, request("EndTxn", transactional_id=txn, producer_id=pid,
                                                 producer_epoch=epoch, committed=version % 2 == 0))
        wait_settled(side, txn)
        side.call("EndTxn", version, request("EndTxn", transactional_id=txn, producer_id=pid,
                                                 producer_epoch=epoch, committed=version % 2 == 1))  # the other way
        wait_settled(side, txn)
        side.call("DescribeTransactions", 0, request("DescribeTransactions", transactional_ids=[txn]))
    for version in versions("EndTxn"):
        side.call("EndTxn", version, request("EndTxn", transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                             committed=True))  # no transaction going on
        side.call("EndTxn", version, request("EndTxn", transactional_id=txn, producer_id=pid, producer_epoch=epoch - 1,
                                             committed=False))  # fenced
        side.call("EndTxn", version, request("EndTxn", transactional_id="diff-txn-none", producer_id=pid,
                                             producer_epoch=epoch, committed=True))
    for version in versions("AddOffsetsToTxn"):
        side.call("AddOffsetsToTxn", version, request("AddOffsetsToTxn", transactional_id=txn, producer_id=pid,
                                                      producer_epoch=epoch - 1, group_id="diff-txn-group"))
    for version in versions("TxnOffsetCommit"):
        named = {"topic_id": topic_id(side, topic)} if version >= 6 else {}
        side.call("TxnOffsetCommit", version, txn_offset_commit(txn, pid, epoch, "diff-txn-group", topic, 1, **named))
    side.call("OffsetFetch", 8, request("OffsetFetch", groups=[OffsetFetch.OffsetFetchRequestGroup(
        group_id="diff-txn-group", topics=None)], require_stable=True))
    side.call("DescribeProducers", 0, request("DescribeProducers", topics=[
        DescribeProducers.TopicRequest(name=topic, partition_indexes=[0, 1])]))
    # the same transactional id, initialized again: the producer's epoch is bumped
    side.call("InitProducerId", 5, request("InitProducerId", transactional_id=txn, transaction_timeout_ms=60_000))
    wait_settled(side, txn)
    side.call("AddPartitionsToTxn", 3, request(
        "AddPartitionsToTxn", v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
            AddPartitionsToTxn.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))  # fenced


def transactions_v2_session(side: Side) -> None:
    """A transaction of KIP-890's second part (transaction version 2: EndTxn v5 bumps the epoch; Produce
    adds its partition): offsets in it (AddOffsetsToTxn v4, TxnOffsetCommit v4 and v5), its end, a retried
    end with the epoch before, and an abort with no transaction."""
    topic = "diff-txn-v2"
    create_topics(side, 7, (topic, 1, 1), record=False)
    wait_serving(side, topic, 1)
    txn, group = "diff-txn-v2", "diff-txn-v2-group"
    wait_coordinator(side, txn, 1)
    wait_coordinator(side, group, 0)
    wait_producer_ids(side)
    answer = side.call("InitProducerId", 5, request("InitProducerId", transactional_id=txn, transaction_timeout_ms=60_000))
    pid, epoch = answer.producer_id, answer.producer_epoch
    for round_ in range(2):
        produce(side, 12, topic, 0, values(b"v2", producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                           transactional=True), transactional_id=txn)
        side.call("AddOffsetsToTxn", 4, request("AddOffsetsToTxn", transactional_id=txn, producer_id=pid,
                                                producer_epoch=epoch, group_id=group))
        for version in (4, 5):
            side.call("TxnOffsetCommit", version, txn_offset_commit(txn, pid, epoch, group, topic, 10 * round_ + version))
        for named in (topic_id(side, topic), UNKNOWN_TOPIC_ID):  # v6 names it by its id (KIP-1319)
            side.call("TxnOffsetCommit", 6, txn_offset_commit(txn, pid, epoch, group, topic, 10 * round_ + 6,
                                                              topic_id=named))
        side.call("DescribeTransactions", 0, request("DescribeTransactions", transactional_ids=[txn]))
        ended = side.call("EndTxn", 5, request("EndTxn", transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                               committed=round_ == 0))
        wait_settled(side, txn)
        side.call("EndTxn", 5, request("EndTxn", transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                       committed=round_ == 0))  # a retry: the epoch before the bump
        side.call("EndTxn", 5, request("EndTxn", transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                       committed=round_ != 0))  # the other way, with the epoch before
        side.call("DescribeTransactions", 0, request("DescribeTransactions", transactional_ids=[txn]))
        fetch_offsets(side, 8, group, None, all_topics=True, require_stable=True)
        epoch = ended.producer_epoch
    # TxnOffsetCommit v3+ names the group member: checked against a group with one (diff-static's)
    wanted = TxnOffsetCommit.TxnOffsetCommitRequestTopic
    for member, generation in (("diff-unknown-member", 1), ("", -1)):
        side.call("TxnOffsetCommit", 5, request(
            "TxnOffsetCommit", transactional_id=txn, group_id="diff-static", producer_id=pid, producer_epoch=epoch,
            generation_id=generation, member_id=member, topics=[wanted(name=topic, partitions=[
                wanted.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=3)])]))
    side.call("EndTxn", 5, request("EndTxn", transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                   committed=False))  # no transaction going on
    wait_settled(side, txn)
    side.call("DescribeTransactions", 0, request("DescribeTransactions", transactional_ids=[txn]))
    for version in versions("ListTransactions"):
        side.call("ListTransactions", version, request("ListTransactions", state_filters=[], producer_id_filters=[pid],
                                                       duration_filter=3_600_000))  # none is that old
    # KIP-360: a producer names itself to InitProducerId (v3+) to have its epoch bumped
    current = side.call("DescribeTransactions", 0, request("DescribeTransactions", transactional_ids=[txn]),
                        record=False).transaction_states[0].producer_epoch
    for version in (3, 4, 5):
        side.call("InitProducerId", version, request("InitProducerId", transactional_id=txn, transaction_timeout_ms=60_000,
                                                     producer_id=pid, producer_epoch=current + version - 3))
        side.call("InitProducerId", version, request("InitProducerId", transactional_id=txn, transaction_timeout_ms=60_000,
                                                     producer_id=pid, producer_epoch=0))  # an old epoch
        side.call("InitProducerId", version, request("InitProducerId", transactional_id=txn, transaction_timeout_ms=60_000,
                                                     producer_id=pid + 1000, producer_epoch=0))  # another producer
        side.call("InitProducerId", version, request("InitProducerId", transactional_id=None, transaction_timeout_ms=60_000,
                                                     producer_id=pid, producer_epoch=0))  # idempotent
    add_partitions(side, 3, "diff-txn-v2-unknown", pid, 0, [(topic, [0])])


def add_partitions(side: Side, version: int, txn: str, pid: int, epoch: int, topics):
    return side.call("AddPartitionsToTxn", version, request(
        "AddPartitionsToTxn", v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
            AddPartitionsToTxn.AddPartitionsToTxnTopic(name=name, partitions=partitions) for name, partitions in topics]))


def txn_offset_commit(txn: str, pid: int, epoch: int, group: str, topic: str, offset: int,
                      topic_id: uuid.UUID | None = None):
    """Names ``topic``, or (TxnOffsetCommit v6+) gives its ``topic_id``."""
    wanted = TxnOffsetCommit.TxnOffsetCommitRequestTopic
    named = {"name": topic} if topic_id is None else {"topic_id": topic_id}
    return request("TxnOffsetCommit", transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch,
                   topics=[wanted(**named, partitions=[wanted.TxnOffsetCommitRequestPartition(
                       partition_index=0, committed_offset=offset, committed_metadata=None)])])


def list_transactions(side: Side, version: int, pid: int) -> None:
    # Filtered to this session's producer: the reference Kafka is shared with other modules.
    side.call("ListTransactions", version, request("ListTransactions", state_filters=["Ongoing", "NoSuchState"],
                                                   producer_id_filters=[pid]))
    side.call("ListTransactions", version, request("ListTransactions", state_filters=[], producer_id_filters=[pid],
                                                   transactional_id_pattern="diff-txn-.*" if version >= 2 else None))
    side.call("ListTransactions", version, request("ListTransactions", state_filters=["CompleteCommit"],
                                                   producer_id_filters=[pid, 1]))


SESSIONS = [find_coordinator_session, classic_group_session, static_member_session, delete_groups_session,
            consumer_group_session, idempotent_produce_session, transactions_session, transactions_v2_session]
