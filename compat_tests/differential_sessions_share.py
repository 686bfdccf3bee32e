"""Scripted sessions for the differential suite (compat_tests/test_differential.py): share groups (KIP-932),
at every version both brokers serve: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge,
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets, and the other groups' APIs
(ListGroups, DescribeGroups, DeleteGroups, ConsumerGroupHeartbeat...) of share groups' ids.

Kafka 4.4 finalizes share.version 2, so its share groups are on, as kbroker's are; both run on their
defaults for share groups (group.share.*: Kafka's, as kbroker's definitions have them). A member is
assigned a partition only once the share coordinator has initialized its state: Kafka makes its
__share_group_state topic (50 partitions) at the first use, and with that a first group's member waits
about 3 s for its assignment, a later group's about 1 s (group.share.assignment.interval.ms); kbroker's, a
heartbeat or two. Those heartbeats are not recorded (``wait_assigned``, ``wait_epoch``).

Each share group reads from share.auto.offset.reset=earliest (a group config, set with
IncrementalAlterConfigs), so that what a session produced first is delivered whenever the share-partition
is first fetched. A session's records are acknowledged or released well within their acquisition lock
(30 s) and its members leave before their session timeout (45 s), so no lock or session runs out on
either broker; every member leaves at the end, so that ListGroups of share groups finds the same groups
in the same states whatever session comes next.
"""

from __future__ import annotations

import time
import uuid

from compat_tests.differential_sessions import create_topics, metadata, produce, request, values, versions
from compat_tests.differential_sessions_groups import wait_coordinator, wait_serving
from kbroker.wire.schema import API_BY_NAME
from testkit.differential import Side

PREFIX = "diff-share"
READY_TIMEOUT_S = 60
POLL_INTERVAL_S = 0.2

ShareFetch = API_BY_NAME["ShareFetch"].request_class
ShareAcknowledge = API_BY_NAME["ShareAcknowledge"].request_class
DescribeOffsets = API_BY_NAME["DescribeShareGroupOffsets"].request_class
AlterOffsets = API_BY_NAME["AlterShareGroupOffsets"].request_class
DeleteOffsets = API_BY_NAME["DeleteShareGroupOffsets"].request_class
AlterConfigs = API_BY_NAME["IncrementalAlterConfigs"].request_class
GROUP_RESOURCE = 32  # IncrementalAlterConfigs' resource type of a group's configs (KIP-848)
CONSUMER_MEMBER = "diff-share-consumer-aaaaaaa"  # the member of the sessions' KIP-848 consumer group


def heartbeat(side: Side, group: str, member_id: str, epoch: int, topics=None, *, rack: str | None = None,
              record: bool = True):
    return side.call("ShareGroupHeartbeat", 1, request(
        "ShareGroupHeartbeat", group_id=group, member_id=member_id, member_epoch=epoch, rack_id=rack,
        subscribed_topic_names=topics), record=record)


def wait_assigned(side: Side, group: str, member_id: str, epoch: int, partitions: int) -> int:
    """Heartbeats, unrecorded, until the member is assigned ``partitions`` share-partitions (their state
    initialized at the share coordinator first): the member epoch it then has."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = heartbeat(side, group, member_id, epoch, record=False)
        assert answer.error_code == 0, answer
        epoch = answer.member_epoch
        if answer.assignment is not None and sum(
                len(topic.partitions) for topic in answer.assignment.topic_partitions) == partitions:
            return epoch
        time.sleep(POLL_INTERVAL_S)
    raise AssertionError(f"{side.name}: {member_id} of {group} not assigned within {READY_TIMEOUT_S} s")


def wait_epoch(side: Side, group: str, member_id: str, epoch: int) -> int:
    """Heartbeats, unrecorded, until the member's epoch is no longer ``epoch``: the one it then has."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = heartbeat(side, group, member_id, epoch, record=False)
        assert answer.error_code == 0, answer
        if answer.member_epoch != epoch:
            return answer.member_epoch
        time.sleep(POLL_INTERVAL_S)
    raise AssertionError(f"{side.name}: {member_id} of {group} still at epoch {epoch} after {READY_TIMEOUT_S} s")


def share_group_heartbeat_session(side: Side) -> None:
    """ShareGroupHeartbeat: a join naming its topics, the assignment once their state is initialized, a
    full and a plain heartbeat, wrong epochs, an unknown member and group, malformed requests, another
    subscription, a leave.

    Kafka 4.4 computes a group's new target assignment at most once a second
    (group.share.assignment.interval.ms), off the heartbeat's path (group.share.assignor.offload.enable):
    after a change of subscription the member's epoch moves on some heartbeat later, so the heartbeats until
    then are not recorded. Kafka lists an assignment's topics in a hash map's order of their random ids, so
    a member's assignment holds one topic at a time."""
    topic, missing = f"{PREFIX}-hb", f"{PREFIX}-hb-missing"  # the second does not exist
    create_topics(side, 7, (topic, 2, 1), record=False)
    wait_serving(side, topic, 2)
    group, member = f"{PREFIX}-hb-group", "diff-share-member-hb-aaaaaa"
    wait_coordinator(side, group, 0)
    joined = heartbeat(side, group, member, 0, [topic, missing])
    epoch = wait_assigned(side, group, member, joined.member_epoch, 2)
    heartbeat(side, group, member, epoch, [missing, topic])  # a full request: the assignment again
    heartbeat(side, group, member, epoch)  # nothing changed: no assignment
    heartbeat(side, group, member, epoch + 5)  # FENCED_MEMBER_EPOCH
    heartbeat(side, group, member, epoch - 1)
    heartbeat(side, group, "diff-share-member-unknown", epoch)  # UNKNOWN_MEMBER_ID
    heartbeat(side, group, "diff-share-member-unknown", -1)
    heartbeat(side, f"{PREFIX}-hb-unknown", member, epoch)  # GROUP_ID_NOT_FOUND
    heartbeat(side, f"{PREFIX}-hb-unknown", member, -1)
    heartbeat(side, group, "", 0, [topic])  # INVALID_REQUEST, each
    heartbeat(side, group, "diff-share-member-longer-than-a-uuid-is", 0, [topic])  # 39 characters
    heartbeat(side, group, " ", 0, [topic])
    heartbeat(side, "", member, 0, [topic])
    heartbeat(side, group, member, 0, [topic], rack="")
    heartbeat(side, group, "diff-share-member-new-aaaaaa", 0, [])
    heartbeat(side, group, "diff-share-member-new-aaaaaa", 0)
    heartbeat(side, group, member, -2)
    heartbeat(side, group, member, epoch, [topic], record=False)  # not the missing one: a new group epoch
    epoch = wait_epoch(side, group, member, epoch)
    heartbeat(side, group, member, epoch, [topic])
    heartbeat(side, group, member, epoch, rack="rack-1")  # a rack: no new epoch
    describe_share_group(side, group)
    heartbeat(side, group, member, -1)  # leaves
    heartbeat(side, group, member, -1)  # no longer a member
    heartbeat(side, group, member, epoch)
    joined = heartbeat(side, group, member, 0, [missing])  # subscribed to nothing that exists
    heartbeat(side, group, member, joined.member_epoch, [missing])
    describe_share_group(side, group)
    heartbeat(side, group, member, joined.member_epoch + 1)
    heartbeat(side, group, member, -1)


def share_fetch(side: Side, version: int, group: str, member_id: str, epoch: int, topic_id, partitions=(0,), *,
                acknowledgements=None, max_records: int = 3, batch_size: int | None = None, acquire_mode: int = 0,
                max_wait_ms: int = 300, max_bytes: int = 1 << 20, forgotten=None, record: bool = True):
    """``acknowledgements``: {partition: [(first, last, [types])]}; ``forgotten``: (topic id, [partitions])
    pairs to take out of the session; ``batch_size`` is ``max_records`` unless given."""
    wanted = ShareFetch.FetchTopic
    batch = wanted.FetchPartition.AcknowledgementBatch
    acknowledgements = acknowledgements or {}
    topics = [wanted(topic_id=topic_id, partitions=[wanted.FetchPartition(
        partition_index=index, acknowledgement_batches=[
            batch(first_offset=first, last_offset=last, acknowledge_types=types)
            for first, last, types in acknowledgements.get(index, ())])
        for index in partitions])] if partitions else []
    return side.call("ShareFetch", version, request(
        "ShareFetch", group_id=group, member_id=member_id, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
        min_bytes=1, max_bytes=max_bytes, max_records=max_records,
        batch_size=max_records if batch_size is None else batch_size,
        share_acquire_mode=acquire_mode, topics=topics,
        forgotten_topics_data=[ShareFetch.ForgottenTopic(topic_id=forgotten_id, partitions=list(indexes))
                               for forgotten_id, indexes in forgotten or ()]), record=record)


def share_acknowledge(side: Side, version: int, group: str, member_id: str, epoch: int, topic_id, acknowledgements):
    """``acknowledgements``: {partition: [(first, last, [types])]}."""
    wanted = ShareAcknowledge.AcknowledgeTopic
    batch = wanted.AcknowledgePartition.AcknowledgementBatch
    partitions = [wanted.AcknowledgePartition(partition_index=index, acknowledgement_batches=[
        batch(first_offset=first, last_offset=last, acknowledge_types=types) for first, last, types in batches])
        for index, batches in acknowledgements.items()]
    return side.call("ShareAcknowledge", version, request(
        "ShareAcknowledge", group_id=group, member_id=member_id, share_session_epoch=epoch,
        topics=[wanted(topic_id=topic_id, partitions=partitions)]))


def earliest(side: Side, group: str) -> None:
    """share.auto.offset.reset=earliest for ``group`` (Kafka's default, latest, would start its share-partitions
    where the log ends when they are first fetched, and what a session produced before would not be seen)."""
    resource = AlterConfigs.AlterConfigsResource
    side.call("IncrementalAlterConfigs", 1, request("IncrementalAlterConfigs", validate_only=False, resources=[
        resource(resource_type=GROUP_RESOURCE, resource_name=group, configs=[resource.AlterableConfig(
            name="share.auto.offset.reset", config_operation=0, value="earliest")])]))


ACCEPT, RELEASE, REJECT = 1, 2, 3


def share_fetch_session(side: Side) -> None:
    """ShareFetch and ShareAcknowledge at every version: a share session opened with epoch 0, records acquired
    with their delivery counts, acknowledged (accept, release, reject) in a fetch and alone, refusals of
    session epochs and of records not acquired, and the session closed.

    Kafka applies the acknowledgements a ShareFetch carries while it acquires (KafkaApis sends both at once),
    so whether a record released there is acquired again by that same fetch depends on timing: records are
    released with ShareAcknowledge only. An answer has at most one topic in error: Kafka puts a topic whose
    partitions the log refused before one it does not know, kbroker keeps the session's order (a difference
    of order alone, left out).
    """
    for version in versions("ShareFetch"):
        topic, group = f"{PREFIX}-fetch-v{version}", f"{PREFIX}-fetch-group-v{version}"
        member, stranger = f"diff-share-member-f{version}-aaaaaa", f"diff-share-member-f{version}-other"
        create_topics(side, 7, (topic, 1, 1), record=False)
        wait_serving(side, topic, 1)
        topic_id = metadata(side, 12, [topic], record=False).topics[0].topic_id
        for items in ((b"a", b"b", b"c"), (b"d", b"e", b"f"), (b"g", b"h")):  # offsets 0-2, 3-5, 6-7
            produce(side, 9, topic, 0, values(*items))
        earliest(side, group)
        wait_coordinator(side, group, 0)
        joined = heartbeat(side, group, member, 0, [topic])
        wait_assigned(side, group, member, joined.member_epoch, 1)
        acknowledge = version  # ShareAcknowledge has ShareFetch's versions
        share_fetch(side, version, group, member, 0, topic_id, max_wait_ms=5000)  # opens the session: 0-2
        share_fetch(side, version, group, member, 1, topic_id, acknowledgements={0: [(0, 1, [ACCEPT])]})  # 3-5
        share_fetch(side, version, group, member, 5, topic_id)  # INVALID_SHARE_SESSION_EPOCH
        share_acknowledge(side, acknowledge, group, member, 2, topic_id,
                          {0: [(2, 2, [RELEASE]), (3, 3, [REJECT])]})
        share_fetch(side, version, group, member, 3, topic_id)  # 2 delivered again, and 6-7
        share_fetch(side, version, group, member, 4, topic_id)  # nothing left
        share_acknowledge(side, acknowledge, group, member, 5, topic_id, {0: [(0, 0, [ACCEPT])]})  # acknowledged
        share_acknowledge(side, acknowledge, group, member, 6, topic_id, {0: [(20, 22, [ACCEPT])]})  # beyond
        share_acknowledge(side, acknowledge, group, member, 7, topic_id, {0: [(6, 6, [9])]})  # no such type
        share_acknowledge(side, acknowledge, group, member, 8, topic_id, {0: [(7, 6, [ACCEPT])]})  # backwards
        share_acknowledge(side, acknowledge, group, member, 0, topic_id, {0: [(6, 6, [ACCEPT])]})
        share_acknowledge(side, acknowledge, group, stranger, 1, topic_id, {0: [(6, 6, [ACCEPT])]})
        share_acknowledge(side, acknowledge, group, member, 9, topic_id, {0: [
            (2, 2, [ACCEPT]), (4, 5, [RELEASE]), (6, 7, [ACCEPT, REJECT])]})
        share_acknowledge(side, acknowledge, group, member, 10, topic_id, {0: [(4, 4, [ACCEPT])]})  # not acquired
        share_fetch(side, version, group, member, 11, topic_id)  # 4-5, delivered twice
        share_fetch(side, version, group, stranger, 1, topic_id)  # SHARE_SESSION_NOT_FOUND
        share_fetch(side, version, group, member, -1, topic_id, acknowledgements={0: [(4, 5, [ACCEPT])]},
                    max_records=0)  # closes the session
        share_fetch(side, version, group, member, 12, topic_id)
        share_acknowledge(side, acknowledge, group, member, 12, topic_id, {0: [(4, 4, [ACCEPT])]})
        share_fetch(side, version, group, stranger, 0, topic_id)  # a member the group does not have
        share_fetch(side, version, group, member, 0, topic_id)
        share_fetch(side, version, group, member, 0, topic_id)  # opened again
        unknown = uuid.UUID(int=7)  # a topic id no topic has, and a partition the topic lacks
        share_fetch(side, version, group, member, 1, unknown, acknowledgements={0: [(0, 0, [ACCEPT])]})
        share_fetch(side, version, group, member, 2, topic_id, partitions=(7,), forgotten=[(unknown, [0])])
        share_acknowledge(side, acknowledge, group, member, 3, topic_id, {7: [(0, 0, [ACCEPT])]})
        share_fetch(side, version, group, member, 4, topic_id, forgotten=[(topic_id, [7])])
        share_fetch(side, version, group, member, -1, None, partitions=())  # closes it, acknowledging nothing
        share_fetch(side, version, group, member, 0, topic_id)
        produce(side, 9, topic, 0, values(b"i", b"j", b"k"))  # offsets 8-10
        # Two records of the batch: exactly (record_limit, v2+), or the whole batch (batch_optimized)
        share_fetch(side, version, group, member, 1, topic_id, max_records=2, acquire_mode=version - 1)
        heartbeat(side, group, member, -1)


def share_fetch_limits_session(side: Side) -> None:
    """What one ShareFetch acquires (KIP-932, KIP-1206): batch_optimized (v1, and v2's default) stops at the
    end of the batch that reaches max_records, record_limit (v2) at max_records exactly; new records longer
    than batch_size are answered in runs cut at batch boundaries; records delivered again are taken the same
    ways, from what the log read (max_bytes) only; max_records counts over the request's partitions.

    Records delivered again here lie in runs that were acquired one log batch at a time, or are taken with
    record_limit: Kafka rounds them up to the end of the run they were first acquired in, kbroker to the end
    of their log batch (docs/kafka-differences.md)."""
    topic, group, member = f"{PREFIX}-limits", f"{PREFIX}-limits-group", "diff-share-member-l-aaaaaa"
    create_topics(side, 7, (topic, 2, 1), record=False)
    wait_serving(side, topic, 2)
    topic_id = metadata(side, 12, [topic], record=False).topics[0].topic_id
    for size in (3, 3, 2, 10):  # partition 0: offsets 0-2, 3-5, 6-7, 8-17
        produce(side, 9, topic, 0, values(*[b"r"] * size))
    for size in (5, 5):  # partition 1: 0-4, 5-9
        produce(side, 9, topic, 1, values(*[b"s"] * size))
    earliest(side, group)
    wait_coordinator(side, group, 0)
    joined = heartbeat(side, group, member, 0, [topic])
    wait_assigned(side, group, member, joined.member_epoch, 2)
    share_fetch(side, 1, group, member, 0, topic_id, max_records=4, max_wait_ms=5000)  # 0-5: two batches
    share_fetch(side, 1, group, member, 1, topic_id, max_records=10, batch_size=2)  # 6-7 and 8-17
    share_acknowledge(side, 1, group, member, 2, topic_id, {0: [(0, 17, [RELEASE])]})
    share_fetch(side, 2, group, member, 3, topic_id, max_records=2, acquire_mode=1)  # 0-1, delivered twice
    share_fetch(side, 2, group, member, 4, topic_id, max_records=4, acquire_mode=1)  # 2-5
    share_fetch(side, 2, group, member, 5, topic_id, max_records=1)  # 6-7
    share_fetch(side, 2, group, member, 6, topic_id, max_records=1, acquire_mode=0)  # 8-17
    share_acknowledge(side, 2, group, member, 7, topic_id, {0: [
        (0, 2, [RELEASE]), (3, 5, [ACCEPT]), (6, 7, [RELEASE]), (8, 17, [ACCEPT])]})
    share_fetch(side, 2, group, member, 8, topic_id, max_records=100, max_bytes=1)  # 0-2: one batch read
    share_fetch(side, 2, group, member, 9, topic_id, max_records=100)  # 6-7
    share_acknowledge(side, 2, group, member, 10, topic_id, {0: [(0, 2, [ACCEPT]), (6, 7, [ACCEPT])]})
    share_fetch(side, 2, group, member, 11, topic_id, partitions=(0, 1), max_records=4)  # partition 1: 0-4
    share_fetch(side, 2, group, member, 12, topic_id, partitions=(0, 1), max_records=4, acquire_mode=1)  # 5-8
    heartbeat(side, group, member, -1)


def consumer_groups(side: Side, topic: str) -> tuple[str, str]:
    """A KIP-848 consumer group with a member and a classic group with a simple commit, beside the share
    groups (unrecorded): their ids."""
    consumer, classic = f"{PREFIX}-consumer", f"{PREFIX}-classic"
    for group in (consumer, classic):
        wait_coordinator(side, group, 0)
    side.call("ConsumerGroupHeartbeat", 1, request(
        "ConsumerGroupHeartbeat", group_id=consumer, member_id=CONSUMER_MEMBER, member_epoch=0,
        rebalance_timeout_ms=30_000, subscribed_topic_names=[topic], topic_partitions=[]), record=False)
    side.call("OffsetCommit", 8, offset_commit(classic, -1, "", topic), record=False)
    return consumer, classic


def offset_commit(group: str, epoch: int, member_id: str, topic: str):
    committed = API_BY_NAME["OffsetCommit"].request_class.OffsetCommitRequestTopic
    return request("OffsetCommit", group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
                   topics=[committed(name=topic, partitions=[committed.OffsetCommitRequestPartition(
                       partition_index=0, committed_offset=1)])])


def describe_share_group(side: Side, *groups: str, operations: bool = False):
    return side.call("ShareGroupDescribe", 1, request("ShareGroupDescribe", group_ids=list(groups),
                                                      include_authorized_operations=operations))


def share_group_describe_session(side: Side) -> None:
    """ShareGroupDescribe of a share group with a member and once empty, of an unknown group and of a
    consumer and a classic group's ids; the other protocols' APIs (DescribeGroups, ConsumerGroupDescribe,
    ConsumerGroupHeartbeat, JoinGroup, OffsetCommit, OffsetFetch, ListGroups) of a share group's id."""
    topic = f"{PREFIX}-describe"
    create_topics(side, 7, (topic, 2, 1), record=False)
    wait_serving(side, topic, 2)
    consumer, classic = consumer_groups(side, topic)
    group, member = f"{PREFIX}-describe-group", "diff-share-member-d-aaaaaa"
    wait_coordinator(side, group, 0)
    joined = heartbeat(side, group, member, 0, [topic])
    describe_share_group(side, group)  # its partitions still initializing
    epoch = wait_assigned(side, group, member, joined.member_epoch, 2)
    describe_share_group(side, group, operations=True)
    describe_share_group(side, group, f"{PREFIX}-describe-unknown", consumer, classic)
    for version in versions("DescribeGroups"):
        side.call("DescribeGroups", version, request("DescribeGroups", groups=[group],
                                                     include_authorized_operations=version >= 3))
    side.call("ConsumerGroupDescribe", 1, request("ConsumerGroupDescribe", group_ids=[group],
                                                  include_authorized_operations=False))
    side.call("ConsumerGroupHeartbeat", 1, request(
        "ConsumerGroupHeartbeat", group_id=group, member_id="diff-share-consumer-bbbbbbb", member_epoch=0,
        rebalance_timeout_ms=30_000, subscribed_topic_names=[topic], topic_partitions=[]))
    joining = API_BY_NAME["JoinGroup"].request_class.JoinGroupRequestProtocol
    side.call("JoinGroup", 9, request("JoinGroup", group_id=group, session_timeout_ms=30_000,
                                      rebalance_timeout_ms=30_000, member_id="", protocol_type="consumer",
                                      protocols=[joining(name="range", metadata=b"")]))
    side.call("OffsetCommit", 9, offset_commit(group, epoch, member, topic))
    fetched = API_BY_NAME["OffsetFetch"].request_class.OffsetFetchRequestGroup
    side.call("OffsetFetch", 9, request("OffsetFetch", groups=[fetched(group_id=group, topics=None)]))
    heartbeat(side, consumer, member, 0, [topic])  # a share member into a consumer group
    heartbeat(side, classic, member, 0, [topic])
    list_share_groups(side)
    heartbeat(side, group, member, -1)
    describe_share_group(side, group, operations=True)  # empty
    list_share_groups(side)
    leave_consumer_group(side, consumer)


def leave_consumer_group(side: Side, consumer: str) -> None:
    side.call("ConsumerGroupHeartbeat", 1, request("ConsumerGroupHeartbeat", group_id=consumer,
                                                   member_id=CONSUMER_MEMBER, member_epoch=-1), record=False)


def list_share_groups(side: Side) -> None:
    # Only share groups: the reference Kafka is shared with other modules.
    for states in ([], ["Stable"], ["Empty"]):
        side.call("ListGroups", 5, request("ListGroups", states_filter=states, types_filter=["share"]))


def describe_offsets(side: Side, version: int, groups: dict):
    """``groups``: {group: {topic: [partitions]} or None for all its share-partitions}."""
    wanted = DescribeOffsets.DescribeShareGroupOffsetsRequestGroup
    return side.call("DescribeShareGroupOffsets", version, request("DescribeShareGroupOffsets", groups=[wanted(
        group_id=group, topics=None if topics is None else [wanted.DescribeShareGroupOffsetsRequestTopic(
            topic_name=name, partitions=partitions) for name, partitions in topics.items()])
        for group, topics in groups.items()]))


def alter_offsets(side: Side, group: str, start_offsets: dict):
    """``start_offsets``: {topic: {partition: start offset}}."""
    wanted = AlterOffsets.AlterShareGroupOffsetsRequestTopic
    partition = wanted.AlterShareGroupOffsetsRequestPartition
    return side.call("AlterShareGroupOffsets", 0, request("AlterShareGroupOffsets", group_id=group, topics=[wanted(
        topic_name=name, partitions=[partition(partition_index=index, start_offset=offset)
                                     for index, offset in partitions.items()])
        for name, partitions in start_offsets.items()]))


def delete_offsets(side: Side, group: str, *topics: str):
    wanted = DeleteOffsets.DeleteShareGroupOffsetsRequestTopic
    return side.call("DeleteShareGroupOffsets", 0, request("DeleteShareGroupOffsets", group_id=group, topics=[
        wanted(topic_name=name) for name in topics]))


def share_group_offsets_session(side: Side) -> None:
    """DescribeShareGroupOffsets (every version), AlterShareGroupOffsets and DeleteShareGroupOffsets of a share
    group with a member (refused) and empty, of unknown topics and groups and of other groups' ids;
    DeleteGroups of a share group, at every version."""
    topic = f"{PREFIX}-offsets"
    create_topics(side, 7, (topic, 2, 1), record=False)
    wait_serving(side, topic, 2)
    topic_id = metadata(side, 12, [topic], record=False).topics[0].topic_id
    produce(side, 9, topic, 0, values(b"a", b"b", b"c", b"d"))
    consumer, classic = consumer_groups(side, topic)
    group, member = f"{PREFIX}-offsets-group", "diff-share-member-o-aaaaaa"
    unknown = f"{PREFIX}-offsets-unknown"
    earliest(side, group)
    wait_coordinator(side, group, 0)
    joined = heartbeat(side, group, member, 0, [topic])
    wait_assigned(side, group, member, joined.member_epoch, 2)
    everything = {group: None, unknown: None, consumer: None, classic: None}
    # (not a partition the topic lacks: Kafka 4.4 never answers that)
    named = {group: {topic: [0, 1], f"{topic}-unknown": [0]}}
    for version in versions("DescribeShareGroupOffsets"):
        describe_offsets(side, version, everything)
        describe_offsets(side, version, named)
    share_fetch(side, 1, group, member, 0, topic_id, max_records=4, max_wait_ms=5000)
    share_acknowledge(side, 1, group, member, 1, topic_id, {0: [(0, 1, [ACCEPT]), (2, 2, [REJECT])]})
    for version in versions("DescribeShareGroupOffsets"):
        describe_offsets(side, version, everything)
    alter_offsets(side, group, {topic: {0: 1}})  # NON_EMPTY_GROUP
    delete_offsets(side, group, topic)
    for version in versions("DeleteGroups"):
        side.call("DeleteGroups", version, request("DeleteGroups", groups_names=[group]))
    heartbeat(side, group, member, -1)
    alter_offsets(side, group, {topic: {0: 1, 1: 0, 5: 0}, f"{topic}-unknown": {0: 0}})
    alter_offsets(side, group, {topic: {1: -1}})
    for version in versions("DescribeShareGroupOffsets"):
        describe_offsets(side, version, {group: None})
    delete_offsets(side, group, topic, f"{topic}-unknown")
    describe_offsets(side, 1, {group: None})
    delete_offsets(side, group, topic)  # nothing left to delete
    delete_offsets(side, unknown, topic)
    for other in (consumer, classic):
        alter_offsets(side, other, {topic: {0: 0}})
        delete_offsets(side, other, topic)
    for version in versions("DeleteGroups"):
        empty = f"{PREFIX}-offsets-empty-v{version}"
        wait_coordinator(side, empty, 0)
        alter_offsets(side, empty, {topic: {0: 2}})  # makes the group
        describe_share_group(side, empty)
        side.call("DeleteGroups", version, request("DeleteGroups", groups_names=[empty, unknown]))
        describe_offsets(side, 1, {empty: None})
        describe_share_group(side, empty)
    leave_consumer_group(side, consumer)


SESSIONS = [share_group_heartbeat_session, share_fetch_session, share_fetch_limits_session,
            share_group_describe_session, share_group_offsets_session]
