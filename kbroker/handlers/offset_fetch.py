"""OffsetFetch (9): a group's committed offsets (one group before v8, several from v8).

Partitions without a commit answer offset -1. The offsets shown are those
whose records are durable: a commit whose fsync is under way is not seen yet
(Kafka reads its committed timeline state). With ``require_stable`` (v7+,
KIP-447) the answer waits until the writes to the group's offsets partition
under way are durable or have failed, as Kafka's fetch then waits behind them,
and a partition whose transactional commit is not yet decided answers
UNSTABLE_OFFSET_COMMIT, so that the consumer retries instead of reading a
position that may be rolled back.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.handlers.interfaces import HandlerNode
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed, require_group
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

OffsetFetchResponse = API_BY_NAME["OffsetFetch"].response_class
OldTopic = OffsetFetchResponse.OffsetFetchResponseTopic
OldPartition = OldTopic.OffsetFetchResponsePartition
Group = OffsetFetchResponse.OffsetFetchResponseGroup
GroupTopic = Group.OffsetFetchResponseTopics
GroupPartition = GroupTopic.OffsetFetchResponsePartitions
_GROUPS_FROM = 8
_TOPIC_IDS_FROM = 10


@handlers.handles("OffsetFetch", 1, 10)
async def handle(broker: HandlerNode, context, request):
    version = context.api_version
    if request.require_stable:
        for group_id in [request.group_id] if version < _GROUPS_FROM else [group.group_id for group in request.groups]:
            await broker.groups.wait_settled(group_id)
    if version < _GROUPS_FROM:
        wanted = None if request.topics is None else [(t.name, None, t.partition_indexes) for t in request.topics]
        error, found = _fetch(broker, context, request.group_id, wanted, None, -1, version, request.require_stable)
        topics = [OldTopic(name=name, partitions=[OldPartition(**fields) for fields in partitions]) for name, _, partitions in found]
        return OffsetFetchResponse(topics=topics, error_code=error)
    names = {topic.topic_id: name for name, topic in broker.image.topics.items()}
    ids = {name: topic.topic_id for name, topic in broker.image.topics.items()}
    groups = []
    for group in request.groups:
        wanted = None
        if group.topics is not None:
            wanted = [(names.get(t.topic_id) if version >= _TOPIC_IDS_FROM else t.name, t.topic_id, t.partition_indexes) for t in group.topics]
        error, found = _fetch(broker, context, group.group_id, wanted, group.member_id, group.member_epoch, version,
                              request.require_stable)
        topics = [GroupTopic(name=name or "", topic_id=topic_id if topic_id is not None else ids.get(name),
                             partitions=[GroupPartition(**fields) for fields in partitions]) for name, topic_id, partitions in found]
        groups.append(Group(group_id=group.group_id, topics=topics, error_code=error))
    return OffsetFetchResponse(groups=groups)


def _fetch(broker: HandlerNode, context, group_id: str, wanted, member_id, member_epoch: int, version: int,
           require_stable: bool = False):
    """(group error, [(topic name, topic id, [partition fields])]) for ``wanted`` (None: every committed one
    the principal may describe; a topic asked for that it may not: TOPIC_AUTHORIZATION_FAILED)."""
    coordinator = broker.groups.coordinator
    try:
        require_group(broker, context, AclOperation.DESCRIBE, group_id)
        coordinator.check(group_id)
        group = coordinator.groups.get(group_id)
        # A KIP-848 member (v9+) is checked as for a commit; classic groups check no member here.
        if group is not None and group.kind == "consumer" and member_id is not None:
            code = group.validate_offset_commit(member_id, member_epoch)
            if code:
                raise CoordinatorError(code)
    except CoordinatorError as error:
        if version < 2 and wanted:  # no group error field: each asked-for partition carries it
            return error.error_code, [(n, i, [_partition(None, p, error.error_code) for p in ps]) for n, i, ps in wanted]
        return error.error_code, []
    committed = coordinator.offsets.of_group(group_id)
    if wanted is None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(committed):
            if allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                by_topic.setdefault(topic, []).append(partition)
        wanted = [(topic, None, partitions) for topic, partitions in by_topic.items()]
    # With require_stable (KIP-447), a partition whose transactional commit is undecided says so.
    unstable = coordinator.offsets.pending_partitions(group_id) if require_stable else set()
    found = []
    for name, topic_id, partitions in wanted:
        code = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.NONE
        if name is not None and not allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            found.append((name, topic_id, [_partition(None, p, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in partitions]))
            continue
        # An unstable partition's offset is not told (Kafka answers INVALID_OFFSET with the error).
        found.append((name, topic_id, [
            _partition(None, p, ErrorCode.UNSTABLE_OFFSET_COMMIT) if (name, p) in unstable
            else _partition(committed.get((name, p)), p, code)
            for p in partitions]))
    return ErrorCode.NONE, found


def _partition(committed, index: int, error_code: int) -> dict:
    if committed is None:
        return dict(partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=error_code)
    return dict(partition_index=index, committed_offset=committed.offset, committed_leader_epoch=committed.leader_epoch,
                metadata=committed.metadata, error_code=error_code)
