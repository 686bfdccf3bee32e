"""``kbroker groups list|describe|reset-offsets``: kafka-groups, kafka-consumer-groups and kafka-share-groups
for people without them.

``list`` is kafka-groups --list: each group with its type (classic, consumer, share) and protocol. A
group is described as Kafka's admin client describes it: ConsumerGroupDescribe (KIP-848 groups) where
the broker speaks it, else ShareGroupDescribe (share groups, kbroker/tools/share_groups.py), else, or
for a classic group, DescribeGroups with each member's assignment decoded from the consumer protocol.
The tables have kafka-consumer-groups' (kafka-share-groups') columns.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass

from kbroker.tools import share_groups
from kbroker.tools.client import EARLIEST, LATEST, Client, CommandFailed, check_error_code
from kbroker.tools.share_groups import MISSING
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import DecodeError, read_string
from kbroker.wire.schema import API_BY_NAME

OffsetCommitTopic = API_BY_NAME["OffsetCommit"].request_class.OffsetCommitRequestTopic
DEAD = "Dead"  # the state a coordinator gives a group it does not know


@dataclass(frozen=True)
class Member:
    member_id: str
    host: str
    client_id: str
    partitions: list[tuple[str, int]]  # (topic, partition) assigned to it


@dataclass(frozen=True)
class Group:
    state: str
    members: list[Member]
    share: object = None  # a share group's ShareGroupDescribe answer; None for a consumer (or classic) group
    kind: str = "classic"  # the group's protocol: classic, consumer (KIP-848) or share (KIP-932)


def kafka_columns(rows: list[list], widths: list[int]) -> None:
    """Rows as Kafka's tools print them: a blank line, then each cell left-aligned in its width ("%-15s")
    and a space, the last cell as it is."""
    print()
    for row in rows:
        print(" ".join(str(cell).ljust(width) for cell, width in zip(row[:-1], widths)), row[-1])


def list_groups(client: Client, args) -> None:
    """As kafka-groups --list: GROUP, TYPE and PROTOCOL (the type is blank where a broker does not give it,
    before ListGroups v5), columns as wide as the widest cell and at least 20."""
    rows = [["GROUP", "TYPE", "PROTOCOL"], *(row[:3] for row in listed_groups(client))]
    width = max(20, *(len(cell) for row in rows for cell in row))
    for row in rows:
        print(" ".join(cell.ljust(width) for cell in row[:-1]), row[-1])


def listed_groups(client: Client) -> list[list[str]]:
    """[group, type, protocol, state] of every group on every broker, by group."""
    listed = {}
    for node_id in {b.node_id for b in client.metadata([]).brokers}:
        answer = client.broker(node_id).call("ListGroups")
        check_error_code(answer.error_code, f"broker {node_id}")
        listed.update({group.group_id: [group.group_id, group.group_type, group.protocol_type, group.group_state]
                       for group in answer.groups})
    return [listed[name] for name in sorted(listed)]


def committed_offsets(client: Client, group: str) -> dict[tuple[str, int], int]:
    answer = client.coordinator(group).call("OffsetFetch", group_id=group, topics=None)
    check_error_code(answer.error_code, f"group {group}")
    return {(topic.name, p.partition_index): p.committed_offset
            for topic in answer.topics for p in topic.partitions if p.committed_offset >= 0}


def described_group(client: Client, group: str) -> Group:
    """The group as its coordinator describes it (DEAD: it does not know it)."""
    coordinator = client.coordinator(group)
    described = _consumer_group(coordinator, group) if "ConsumerGroupDescribe" in coordinator.versions else None
    if described is None and "ShareGroupDescribe" in coordinator.versions:
        share = share_groups.described(coordinator, group)
        if share is not None:
            described = Group(share.group_state, [Member(
                member.member_id, member.client_host, member.client_id,
                [(topic.topic_name, p) for topic in member.assignment.topic_partitions for p in topic.partitions])
                for member in share.members], share, "share")
    return described if described is not None else _classic_group(coordinator, group)


def _consumer_group(coordinator, group: str) -> Group | None:
    """A KIP-848 group; None where the coordinator knows no such group (a classic group is not one)."""
    [described] = coordinator.call("ConsumerGroupDescribe", group_ids=[group],
                                   include_authorized_operations=False).groups
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check_error_code(described.error_code, f"group {group}", described.error_message)
    return Group(described.group_state, [Member(
        member.member_id, member.client_host, member.client_id,
        [(topic.topic_name, p) for topic in member.assignment.topic_partitions for p in topic.partitions])
        for member in described.members], kind="consumer")


def _classic_group(coordinator, group: str) -> Group:
    [described] = coordinator.call("DescribeGroups", groups=[group]).groups
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return Group(DEAD, [])
    check_error_code(described.error_code, f"group {group}", described.error_message)
    return Group(described.group_state, [Member(
        member.member_id, member.client_host, member.client_id, assigned_partitions(member.member_assignment))
        for member in described.members])


def assigned_partitions(assignment: bytes | None) -> list[tuple[str, int]]:
    """(topic, partition) of a consumer's ConsumerProtocolAssignment (int16 version, [topic [partition]],
    user data), as a classic group's member carries it; [] for another protocol's or torn bytes."""
    data = memoryview(assignment or b"")
    try:
        (count,), position = struct.unpack_from(">i", data, 2), 6
        found = []
        for _ in range(count):
            topic, position = read_string(data, position)
            (partitions,) = struct.unpack_from(">i", data, position)
            found.extend((topic, p) for p in struct.unpack_from(f">{partitions}i", data, position + 4))
            position += 4 + 4 * partitions
        return found
    except (struct.error, DecodeError, ValueError):
        return []


def describe(client: Client, args) -> None:
    """As kafka-consumer-groups --describe: a row per partition the group has an offset on or a member
    is assigned, with its lag and its member (or "-"); the group's state on stderr when it is not stable."""
    described = described_group(client, args.group)
    if described.state == DEAD:
        raise CommandFailed(f"Consumer group '{args.group}' does not exist.")
    if described.share is not None:
        _describe_share_group(client, args.group, described.share)
        return
    rows = offset_rows(client, args.group, described.members)
    if described.state == "Empty":
        print(f"\nConsumer group '{args.group}' has no active members.", file=sys.stderr)
    elif described.state != "Stable":
        print(f"\nWarning: Consumer group '{args.group}' is rebalancing.", file=sys.stderr)
    if not rows:
        return
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID"]
    widths = [max(15, *(len(str(row[column])) for row in rows)) if column in (0, 1, 6, 7) else width
              for column, width in enumerate([0, 0, 10, 15, 15, 15, 0, 0])]
    kafka_columns([header, *rows], widths)


def _describe_share_group(client: Client, group: str, description) -> None:
    """As kafka-share-groups --describe, then --describe --members (left out without members); the state
    on stderr when the group has no members."""
    offsets = share_groups.offsets_table(client.coordinator(group), group)
    if description.group_state == "Empty":
        print(f"\nShare group '{group}' has no active members.", file=sys.stderr)
    kafka_columns(*offsets)
    members = share_groups.members_table(group, description)
    if members is not None:
        kafka_columns(*members)


def offset_rows(client: Client, group: str, members: list[Member]) -> list[list]:
    """Assigned partitions first, by member (the most partitions first), then partitions with only an offset."""
    committed = committed_offsets(client, group)
    owners = {}
    for member in sorted(members, key=lambda m: -len(m.partitions)):
        for topic_partition in sorted(member.partitions):
            owners[topic_partition] = [member.member_id, member.host, member.client_id]
    ends = {topic: client.list_offsets(topic, LATEST) for topic in {topic for topic, _ in [*owners, *committed]}}
    rows = []
    for topic, partition in [*owners, *sorted(set(committed) - set(owners))]:
        offset, end = committed.get((topic, partition)), ends[topic].get(partition)
        lag = end - offset if offset is not None and end is not None else MISSING
        rows.append([group, topic, partition, MISSING if offset is None else offset, MISSING if end is None else end,
                     lag, *owners.get((topic, partition), [MISSING] * 3)])
    return rows


def reset_offsets(client: Client, args) -> None:
    """As kafka-consumer-groups --reset-offsets: only for a group without members (one that does not exist
    yet gets the offsets). A share group's start offsets are set as kafka-share-groups --reset-offsets sets
    them; ``--share`` makes a group that does not exist yet a share group."""
    to = args.to_offset if args.to_offset is not None else EARLIEST if args.to_earliest else LATEST
    plan = planned_reset(client, args.group, args.topic, to, args.share)
    kafka_columns([["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] +
                  [[args.group, args.topic, p, o] for p, o in sorted(plan.targets.items())], [30, 30, 10])
    if not args.execute:
        print("\nDry run: add --execute to reset.")
        return
    plan.execute(client)
    print(f"\nReset offsets of group {args.group} on {args.topic}.")


@dataclass(frozen=True)
class PlannedReset:
    """A reset of a group's offsets on a topic, checked and computed, not done yet (the dry run's table)."""
    group: str
    topic: str
    targets: dict[int, int]  # partition -> its new offset
    share: bool

    def execute(self, client: Client) -> None:
        if self.share:
            share_groups.reset_offsets(client.coordinator(self.group), self.group, self.topic, self.targets)
        else:
            _commit_offsets(client, self.group, self.topic, self.targets)


def planned_reset(client: Client, group: str, topic: str, to: int, as_share: bool = False) -> PlannedReset:
    """The new offsets of ``group`` on ``topic``: ``to`` an offset, or EARLIEST or LATEST (the console's and
    the command's). Refused, as Kafka refuses it, for a group with members; ``as_share``: the group must be a
    share group, or become one if it does not exist yet."""
    described = described_group(client, group)
    share = described.share is not None or (as_share and described.state == DEAD)
    if as_share and not share:
        raise CommandFailed(f"Group '{group}' is not a share group.")
    if share:
        share_groups.refuse_reset(group, described.state)
    elif described.members:
        raise CommandFailed(f"Assignments can only be reset if the group '{group}' is inactive, but the "
                            f"current state is {described.state}.")
    targets = {p: to for p in client.leaders(topic)} if to >= 0 else client.list_offsets(topic, to)
    return PlannedReset(group, topic, targets, share)


def _commit_offsets(client: Client, group: str, topic: str, targets: dict[int, int]) -> None:
    answer = client.coordinator(group).call(
        "OffsetCommit", group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[OffsetCommitTopic(name=topic, partitions=[OffsetCommitTopic.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_metadata="") for p, o in sorted(targets.items())])])
    for result in answer.topics[0].partitions:
        check_error_code(result.error_code, f"{topic}-{result.partition_index}")
