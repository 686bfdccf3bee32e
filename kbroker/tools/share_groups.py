"""Share groups (KIP-932) in ``kbroker groups describe|reset-offsets``: kafka-share-groups for people without it.

A share group is described as Kafka's admin client describes it: ShareGroupDescribe for its state and
members, DescribeShareGroupOffsets (v1: every share-partition the group has, with its lag) for its
offsets, in the tables of kafka-share-groups --describe and --describe --members. ``reset-offsets`` sets
the start offsets with AlterShareGroupOffsets, as kafka-share-groups --reset-offsets --execute does, on an
empty group only (one that does not exist yet is made a share group by it).
"""

from __future__ import annotations

from kbroker.tools.client import CommandFailed, Connection, check_error_code
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

MISSING = "-"  # Kafka's tools' cell for what is not known
UNKNOWN = -1  # DescribeShareGroupOffsets' start offset or lag that is not known
DescribeRequest = API_BY_NAME["DescribeShareGroupOffsets"].request_class
AlterTopic = API_BY_NAME["AlterShareGroupOffsets"].request_class.AlterShareGroupOffsetsRequestTopic


def described(coordinator: Connection, group: str):
    """The group as ShareGroupDescribe gives it; None where the coordinator knows no share group of that id."""
    [found] = coordinator.call("ShareGroupDescribe", group_ids=[group], include_authorized_operations=False).groups
    if found.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    check_error_code(found.error_code, f"group {group}", found.error_message)
    return found


def start_offsets(coordinator: Connection, group: str) -> list[tuple[str, int, int, int]]:
    """(topic, partition, start offset, lag) of every share-partition the group has, by topic and partition."""
    [found] = coordinator.call("DescribeShareGroupOffsets", groups=[
        DescribeRequest.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]).groups
    check_error_code(found.error_code, f"group {group}", found.error_message)
    rows = []
    for topic in found.topics:
        for partition in topic.partitions:
            check_error_code(partition.error_code, f"{topic.topic_name}-{partition.partition_index}",
                             partition.error_message)
            rows.append((topic.topic_name, partition.partition_index, partition.start_offset, partition.lag))
    return sorted(rows)


def offsets_table(coordinator: Connection, group: str) -> tuple[list[list], list[int]]:
    """kafka-share-groups --describe's table (rows with their header, and the column widths)."""
    rows = [[group, topic, partition, _cell(start_offset), _cell(lag)]
            for topic, partition, start_offset, lag in start_offsets(coordinator, group)]
    return ([["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], *rows],
            [_width(group), max(15, *(len(row[1]) for row in rows)) if rows else 15, 10, 13])


def members_table(group: str, description) -> tuple[list[list], list[int]] | None:
    """kafka-share-groups --describe --members' table, members by id; None without members."""
    members = sorted(description.members, key=lambda member: member.member_id)
    if not members:
        return None
    rows = [[group, member.member_id, member.client_host, member.client_id,
             sum(len(topic.partitions) for topic in member.assignment.topic_partitions), _assignment(member)]
            for member in members]
    return ([["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"], *rows],
            [_width(group), *(max(15, *(len(row[column]) for row in rows)) for column in (1, 2, 3)), 12])


def reset_offsets(coordinator: Connection, group: str, topic: str, targets: dict[int, int]) -> None:
    """AlterShareGroupOffsets: each partition of ``topic`` to its target start offset."""
    answer = coordinator.call("AlterShareGroupOffsets", group_id=group, topics=[AlterTopic(
        topic_name=topic, partitions=[AlterTopic.AlterShareGroupOffsetsRequestPartition(
            partition_index=partition, start_offset=offset) for partition, offset in sorted(targets.items())])])
    check_error_code(answer.error_code, f"group {group}", answer.error_message)
    for altered in answer.responses:
        for result in altered.partitions:
            check_error_code(result.error_code, f"{altered.topic_name}-{result.partition_index}", result.error_message)


def refuse_reset(group: str, state: str) -> None:
    """kafka-share-groups' refusal to reset the offsets of a group that has members."""
    if state not in ("Empty", "Dead"):
        raise CommandFailed(f"Share group '{group}' is not empty.")


def _assignment(member) -> str:
    """kafka-share-groups' ASSIGNMENT cell: ``topic:0,1;other:2``, topics in order."""
    return ";".join(sorted(f"{topic.topic_name}:{','.join(str(p) for p in sorted(topic.partitions))}"
                           for topic in member.assignment.topic_partitions))


def _cell(value: int):
    return MISSING if value == UNKNOWN else value


def _width(group: str) -> int:
    return max(15, len(group))
