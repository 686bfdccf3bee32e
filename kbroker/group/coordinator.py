"""Every group of the ``__consumer_offsets`` partitions this broker leads, and their offsets.

Pure, like the group cores it routes to: each call takes ``now_ms`` and
returns effects (:mod:`kbroker.effects`) for the shell to carry out.
A group id belongs to one partition (:func:`records.coordinator_partition`)
and to one kind of group: classic, consumer (KIP-848) or share (KIP-932). A
classic and a consumer group turn into each other while empty, as in Kafka;
a share group never changes kind, and the others' APIs answer it as Kafka's
do (not_a_share_group in kbroker/group/share.py says which).

What a request changes counts once its record is durable (DESIGN.md rule
11): every ``Persist`` carries what to do when the shell reports it durable
or failed (kbroker/effects.py). Offsets wait in the store's layer of writes
on their way (kbroker/group/offsets.py): OffsetFetch shows the durable ones,
later writes see them all, a failed write is dropped. A classic group moves
to a Stable generation once the leader's assignment is durable, and
rebalances if it is not (kbroker/group/classic.py). A consumer group (KIP-848)
whose write fails is put back as its log would rebuild it
(kbroker/group/consumer_writes.py). A deleted group is gone for requests at
once and comes back if its tombstones are not written.
"""

from __future__ import annotations

import heapq
import uuid
from dataclasses import dataclass, field

from kbroker.group import records
from kbroker.group.classic import ClassicGroup, ClassicGroupConfig, GroupState
from kbroker.group.consumer import ConsumerGroup, ConsumerGroupConfig, TopicsView
from kbroker.group.consumer_writes import ConsumerGroupWrites
from kbroker.effects import CoordinatorError, Persist
from kbroker.group.offsets import CommittedOffset, OffsetStore
from kbroker.group.share import (InitializeShareGroupState, ShareGroup, ShareGroupConfig, group_not_found,
                                 not_a_share_group)
from kbroker.group.share_records import StoredShareGroup
from kbroker.wire.errors import ErrorCode

CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"


@dataclass(frozen=True)
class CoordinatorConfig:
    partition_count: int = 50
    classic: ClassicGroupConfig = field(default_factory=ClassicGroupConfig)
    consumer: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)
    share: ShareGroupConfig = field(default_factory=ShareGroupConfig)
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096


def _classic_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


def _consumer_member_id() -> str:
    return str(uuid.uuid4())


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig, *, classic_member_id=_classic_member_id,
                 consumer_member_id=_consumer_member_id) -> None:
        self.config = config
        self.groups: dict[str, ClassicGroup | ConsumerGroup | ShareGroup] = {}
        self.offsets = OffsetStore()
        self.consumer_writes = ConsumerGroupWrites()
        self.loaded: set[int] = set()
        self.loading: set[int] = set()
        self._classic_member_id = classic_member_id
        self._consumer_member_id = consumer_member_id
        self._empty_since_ms: dict[str, int] = {}  # when each memberless group was first seen so, for retention
        self._deadlines: list[tuple[int, str]] = []  # (due ms, group id), possibly stale: checked when due

    # -- ownership and loading ------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return records.coordinator_partition(group_id, self.config.partition_count)

    def check(self, group_id: str) -> None:
        """Raise unless this coordinator serves ``group_id`` now."""
        partition = self.partition_of(group_id)
        if partition in self.loading:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if partition not in self.loaded:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)

    def begin_load(self, partition: int) -> None:
        self.loading.add(partition)

    def replay(self, key, value, now_ms: int) -> None:
        """Apply one record read back from ``__consumer_offsets`` (a tombstone's value is None)."""
        group_id = records.group_id_of(key)
        if isinstance(key, records.OffsetCommitKey):
            self.offsets.replay(key, value)
            if value is not None and group_id not in self.groups:  # a "simple" group: offsets only
                self.groups[group_id] = ClassicGroup(group_id, self.config.classic, now_ms, self._classic_member_id)
        elif isinstance(key, records.GroupMetadataKey):
            if value is None:
                if isinstance(self.groups.get(group_id), ClassicGroup):
                    del self.groups[group_id]
            else:
                self.groups[group_id] = ClassicGroup.from_record(group_id, value, self.config.classic, now_ms,
                                                                 self._classic_member_id)
        elif isinstance(key, records.SHARE_GROUP_KEYS):
            group = self.groups.get(group_id)
            if not isinstance(group, ShareGroup):
                if value is None:
                    return
                group = self.groups[group_id] = ShareGroup(group_id, self.config.share, now_ms)
            group.replay(key, value)
            if not group.persisted_state().exists:
                del self.groups[group_id]
        else:
            group = self.groups.get(group_id)
            if not isinstance(group, ConsumerGroup):
                if value is None:
                    return
                group = self.groups[group_id] = self._new_consumer_group(group_id, now_ms)
            group.replay(key, value)
            if isinstance(key, records.ConsumerGroupMetadataKey) and value is None:
                del self.groups[group_id]

    def finish_load(self, partition: int, now_ms: int) -> None:
        self.loading.discard(partition)
        self.loaded.add(partition)
        for group_id, group in self.groups.items():
            if self.partition_of(group_id) == partition:
                self._schedule(group_id)
                if isinstance(group, ConsumerGroup):
                    self.consumer_writes.loaded(group, now_ms)

    def unload(self, partition: int) -> list:
        """This broker no longer leads ``partition``: forget its groups, answering their waiters."""
        effects = []
        for group_id in [g for g in self.groups if self.partition_of(g) == partition]:
            group = self.groups.pop(group_id)
            if isinstance(group, ClassicGroup):
                effects += group.unload()
            self.offsets.forget_group(group_id)
            self.consumer_writes.forget(group_id)
        self.loaded.discard(partition)
        self.loading.discard(partition)
        return effects

    # -- the classic protocol ---------------------------------------------------

    def classic_group(self, group_id: str, now_ms: int, *, create: bool) -> ClassicGroup:
        """The classic group ``group_id``: an empty consumer group turns classic, as Kafka converts it."""
        self.check(group_id)
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            raise CoordinatorError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL if create else ErrorCode.GROUP_ID_NOT_FOUND,
                                   f"Group {group_id} is not a classic group.")
        if isinstance(group, ConsumerGroup):
            if not (create and group.is_empty()):
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND if not create else ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                 f"Group {group_id} is not a classic group.")
            self.consumer_writes.forget(group_id)
            group = None
        if group is None:
            if not create:
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = self.groups[group_id] = ClassicGroup(group_id, self.config.classic, now_ms, self._classic_member_id)
        return group

    def member_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        """The classic group a member's SyncGroup, Heartbeat or LeaveGroup names: Kafka answers
        UNKNOWN_MEMBER_ID when there is no such group."""
        try:
            return self.classic_group(group_id, now_ms, create=False)
        except CoordinatorError as error:
            if error.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, str(error)) from None
            raise

    def after(self, group_id: str, effects: list) -> list:
        """Bookkeeping after a group changed: its timers, and when it became empty."""
        group = self.groups.get(group_id)
        if group is not None:
            self._schedule(group_id)
            if _is_empty(group):
                self._empty_since_ms.setdefault(group_id, _now_hint(group))
            else:
                self._empty_since_ms.pop(group_id, None)
        return effects

    # -- the consumer protocol (KIP-848) -----------------------------------------

    def consumer_group(self, group_id: str, now_ms: int, *, create: bool) -> tuple[ConsumerGroup, list]:
        """The consumer group ``group_id``, and the records of turning an empty classic group into it."""
        self.check(group_id)
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        classic = group if isinstance(group, ClassicGroup) else None
        if classic is not None:
            if not (create and _is_empty(classic)):
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            group = None
        if group is None:
            if not create:
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = self.groups[group_id] = self._new_consumer_group(group_id, now_ms)
        if classic is None or not (classic.generation_id > 0 or classic.protocol_type):
            return group, []

        # A stored classic group: gone for good once its tombstone is durable, and back if that is not written.
        def failed(error_code: int, at_ms: int) -> list:
            if self.groups.get(group_id) is group:
                self.groups[group_id] = classic
                self.consumer_writes.forget(group_id)
            return []

        return group, [Persist(((records.GroupMetadataKey(group=group_id), None),), on_failure=failed)]

    def restore_group(self, group_id: str, previous) -> None:
        """Put back what ``group_id`` was (None: no group) before a request that made it a new consumer
        group was refused, before anything of it was written."""
        if previous is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = previous
        self.consumer_writes.forget(group_id)

    # -- share groups (KIP-932) ---------------------------------------------------------

    def share_group(self, group_id: str, member_epoch: int, now_ms: int) -> ShareGroup:
        """The share group a ShareGroupHeartbeat names; a join (member epoch 0) creates it. A classic or
        consumer group of that id, empty or not, refuses it: groups do not turn into share groups."""
        self.check(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                raise CoordinatorError(*group_not_found(group_id, member_epoch))
            group = self.groups[group_id] = ShareGroup(group_id, self.config.share, now_ms)
        elif not isinstance(group, ShareGroup):
            raise CoordinatorError(*not_a_share_group(group_id))
        return group

    def described_share_group(self, group_id: str) -> ShareGroup:
        """The share group ShareGroupDescribe or DeleteShareGroupOffsets names, or the error Kafka answers for it."""
        self.check(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, ShareGroup):
            raise CoordinatorError(*not_a_share_group(group_id))
        return group

    def initialized_share_partitions(self, group_id: str) -> dict[uuid.UUID, frozenset[int]]:
        """The share-partitions whose state the group has initialized, for DescribeShareGroupOffsets of all
        of them: none for a group that does not exist or is not a share group, as Kafka answers."""
        self.check(group_id)
        group = self.groups.get(group_id)
        return group.initialized_partitions if isinstance(group, ShareGroup) else {}

    def alter_share_group_offsets(self, group_id: str, start_offsets: dict[uuid.UUID, dict[int, int]],
                                  topic_names: dict[uuid.UUID, str],
                                  now_ms: int) -> tuple[InitializeShareGroupState | None, list]:
        """AlterShareGroupOffsets: (the InitializeShareGroupState to carry out once the effects are done, or
        None; effects). A share group that does not exist is made by it (Kafka 4.2, KAFKA-19662), and kept
        once its record is written; a group of another kind is refused."""
        self.check(group_id)
        group = self.groups.get(group_id)
        made = group is None
        if made:
            group = ShareGroup(group_id, self.config.share, now_ms)
        elif not isinstance(group, ShareGroup):
            raise CoordinatorError(*not_a_share_group(group_id))
        initialize, effects = group.alter_offsets(start_offsets, topic_names, now_ms)
        if not (made and effects):
            return initialize, effects
        self.groups[group_id] = group

        def failed(error_code: int, at_ms: int) -> list:
            if self.groups.get(group_id) is group and group.persisted_state() == StoredShareGroup():
                del self.groups[group_id]  # nothing of it was ever written
            return []

        return initialize, effects + [Persist((), on_failure=failed)]

    def share_group_offsets_deletion(
            self, group_id: str, topic_names: list[str], topics: TopicsView,
            now_ms: int) -> tuple[dict[uuid.UUID, frozenset[int]], list[tuple[str, str]], list]:
        """DeleteShareGroupOffsets, first step: see ShareGroup.begin_offsets_deletion."""
        return self.described_share_group(group_id).begin_offsets_deletion(topic_names, topics, now_ms)

    def share_group_offsets_deleted(self, group_id: str, topic_ids: list[uuid.UUID], topics: TopicsView,
                                    now_ms: int) -> list:
        """DeleteShareGroupOffsets, second step: those topics' state is gone at the share coordinator."""
        self.check(group_id)
        group = self.groups.get(group_id)
        return group.offsets_deleted(topic_ids, topics, now_ms) if isinstance(group, ShareGroup) else []

    def share_group_state_deletion(self, group_id: str, topics: TopicsView,
                                   now_ms: int) -> tuple[dict[uuid.UUID, frozenset[int]], list] | None:
        """DeleteGroups, first step for a share group (Kafka's sharePartitionDeleteRequests): the
        share-partitions whose state to delete before :meth:`delete_group`, and effects; None for a group of
        another kind or none, which :meth:`delete_group` answers alone."""
        self.check(group_id)
        group = self.groups.get(group_id)
        return group.begin_deletion(topics, now_ms) if isinstance(group, ShareGroup) else None

    def _new_consumer_group(self, group_id: str, now_ms: int) -> ConsumerGroup:
        group = ConsumerGroup(group_id, self.config.consumer, now_ms, self._consumer_member_id)
        group.writes = self.consumer_writes  # a write of it that fails is undone
        return group

    # -- offsets -----------------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                       api_version: int, commits: dict[tuple[str, int], CommittedOffset]) -> tuple[dict, list]:
        """Validate and store ``commits``: (error code per partition, effects)."""
        self._check_committer(group_id, member_id, group_instance_id, generation_or_epoch,
                              # v9+ says GROUP_ID_NOT_FOUND; older versions keep ILLEGAL_GENERATION, as Kafka.
                              ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION,
                              api_version=api_version)
        errors, accepted = self._accepted(commits)
        return errors, self._store_offsets(group_id, self.offsets.commit_records(group_id, accepted))

    def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                     group_instance_id: str | None, generation_id: int,
                                     commits: dict[tuple[str, int], CommittedOffset]) -> tuple[dict, list]:
        """TxnOffsetCommit: offsets written in the producer's transaction, visible only once it commits."""
        self._check_committer(group_id, member_id, group_instance_id, generation_id, ErrorCode.ILLEGAL_GENERATION,
                              transactional=True)
        errors, accepted = self._accepted(commits)
        return errors, self._store_offsets(group_id, self.offsets.commit_records(group_id, accepted),
                                           producer=(producer_id, producer_epoch))

    def _check_committer(self, group_id: str, member_id: str, group_instance_id: str | None, generation_or_epoch: int,
                         no_group_error: int, *, transactional: bool = False, api_version: int | None = None) -> None:
        """Raise unless this member (or a memberless "simple" committer) may commit the group's offsets.
        A transactional commit without any member identity (TxnOffsetCommit before v3) is not checked, as Kafka."""
        self.check(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation_or_epoch >= 0:
                raise CoordinatorError(no_group_error)
            group = self.groups[group_id] = ClassicGroup(group_id, self.config.classic, 0, self._classic_member_id)
        if transactional and generation_or_epoch < 0 and not member_id and group_instance_id is None:
            return
        if isinstance(group, ClassicGroup):
            error = group.validate_offset_commit(member_id, group_instance_id, generation_or_epoch)
        elif group.kind == "consumer":
            error = group.validate_offset_commit(member_id, generation_or_epoch, api_version)
        else:
            error = group.validate_offset_commit(member_id, generation_or_epoch)
        if error:
            raise CoordinatorError(error)

    def _accepted(self, commits: dict[tuple[str, int], CommittedOffset]) -> tuple[dict, dict]:
        """(error per partition, the commits whose metadata fits offset.metadata.max.bytes)."""
        errors, accepted = {}, {}
        for key, committed in commits.items():
            if len(committed.metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                errors[key] = ErrorCode.NONE
                accepted[key] = committed
        return errors, accepted

    def transaction_ended(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker for ``producer_id`` reached offsets partition ``partition``."""
        self.offsets.end_transaction(producer_id, commit, lambda group_id: self.partition_of(group_id) == partition)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[dict, list]:
        """OffsetDelete: an error per partition, and the tombstones of those deleted."""
        self.check(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
        if isinstance(group, ClassicGroup) and group.protocol_type not in ("", "consumer", None) and not _is_empty(group):
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP)
        subscribed = _subscribed_topics(group)
        errors, deleted = {}, []
        for topic, partition in partitions:
            if subscribed is None or topic in subscribed:
                errors[(topic, partition)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                errors[(topic, partition)] = ErrorCode.NONE
                deleted.append((topic, partition))
        return errors, self._store_offsets(group_id, self.offsets.delete_records(group_id, deleted))

    # -- admin ---------------------------------------------------------------------

    def delete_group(self, group_id: str) -> list:
        """DeleteGroups for one group: the tombstones that remove it and its offsets."""
        self.check(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
        if not _is_empty(group):
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP)
        if isinstance(group, ShareGroup):
            return self._delete_share_group(group_id, group)
        tombstones = self.offsets.delete_records(group_id)
        if isinstance(group, ClassicGroup):
            tombstones.append((records.GroupMetadataKey(group=group_id), None))
        else:
            tombstones += [
                (records.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), None),
                (records.ConsumerGroupPartitionMetadataKey(group_id=group_id), None),
                (records.ConsumerGroupMetadataKey(group_id=group_id), None),
            ]
        # Gone for requests at once; back if the tombstones are not written (Kafka reverts its timeline).
        del self.groups[group_id]
        offsets = self.offsets.begin_write(group_id, [pair for pair in tombstones
                                                      if isinstance(pair[0], records.OffsetCommitKey)])

        def durable(now_ms: int) -> list:
            self.offsets.write_durable(offsets)
            self._empty_since_ms.pop(group_id, None)
            if group_id not in self.groups:  # not made again meanwhile
                self.consumer_writes.forget(group_id)
            return []

        def failed(error_code: int, now_ms: int) -> list:
            self.offsets.write_failed(offsets)
            self.groups.setdefault(group_id, group)
            return []

        return [Persist(tuple(tombstones), on_durable=durable, on_failure=failed)]

    def _delete_share_group(self, group_id: str, group: ShareGroup) -> list:
        """A share group's tombstones (it has no committed offsets): gone for requests at once, back if they
        are not written. Its share-partitions' state went first (share_group_state_deletion, carried out by
        GroupShell.delete_share_group_state)."""
        del self.groups[group_id]
        effects = group.delete(_now_hint(group))

        def durable(now_ms: int) -> list:
            self._empty_since_ms.pop(group_id, None)
            return []

        def failed(error_code: int, now_ms: int) -> list:
            self.groups.setdefault(group_id, group)
            return []

        return effects + [Persist((), on_durable=durable, on_failure=failed)]

    def listed(self) -> list[tuple[str, ClassicGroup | ConsumerGroup | ShareGroup]]:
        return [(group_id, group) for group_id, group in self.groups.items() if self.partition_of(group_id) in self.loaded]

    def rebalance(self, group_id: str, topics: TopicsView, now_ms: int) -> list | None:
        """A rebalance of ``group_id`` begun now (kbroker/faults.py); None when there is nothing to rebalance."""
        self.check(group_id)
        group = self.groups.get(group_id)
        if isinstance(group, ClassicGroup):
            return group.force_rebalance(now_ms)
        if isinstance(group, ConsumerGroup):
            return group.force_rebalance(topics, now_ms)
        return None

    # -- timers ----------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        while self._deadlines:
            due, group_id = self._deadlines[0]
            group = self.groups.get(group_id)
            if group is not None and group.next_deadline_ms() == due:
                return due
            heapq.heappop(self._deadlines)  # stale: the group moved its timer or is gone
        return None

    def tick(self, now_ms: int, topics: TopicsView) -> list[tuple[str, list]]:
        """Fire every group timer due by ``now_ms``: ``(group id, effects)`` pairs."""
        fired = []
        while (due := self.next_deadline_ms()) is not None and due <= now_ms:
            _, group_id = heapq.heappop(self._deadlines)
            group = self.groups[group_id]
            effects = group.tick(now_ms) if isinstance(group, ClassicGroup) else group.tick(now_ms, topics)
            fired.append((group_id, self.after(group_id, effects)))
        return fired

    def topics_changed(self, topics: TopicsView, now_ms: int) -> list[tuple[str, list]]:
        """The metadata image changed: consumer groups recompute what their subscriptions match."""
        changed = []
        for group_id, group in self.listed():
            if isinstance(group, ConsumerGroup):
                changed.append((group_id, self.after(group_id, group.topics_changed(topics, now_ms))))
        return changed

    def expire_offsets(self, now_ms: int) -> list[tuple[str, list]]:
        """Offsets past ``offsets.retention.minutes`` (run every ``offsets.retention.check.interval.ms``)."""
        expired = []
        for group_id in self.offsets.groups_written():
            if self.partition_of(group_id) not in self.loaded:
                continue
            group = self.groups.get(group_id)
            empty_since = self._empty_since_ms.get(group_id) if group is None or _is_empty(group) else None
            tombstones = self.offsets.expired_records(group_id, now_ms, self.config.offsets_retention_ms, empty_since)
            if tombstones:
                expired.append((group_id, self._store_offsets(group_id, tombstones)))
        return expired

    def _store_offsets(self, group_id: str, offset_records: list, producer: tuple[int, int] | None = None) -> list:
        """Have offset records persisted: later writes see them at once, OffsetFetch once they are
        durable; if they fail, they never were (kbroker/group/offsets.py)."""
        if not offset_records:
            return []
        write = self.offsets.begin_write(group_id, offset_records, None if producer is None else producer[0])

        def durable(now_ms: int) -> list:
            self.offsets.write_durable(write)
            return []

        def failed(error_code: int, now_ms: int) -> list:
            self.offsets.write_failed(write)
            return []

        return [Persist(tuple(offset_records), producer=producer, on_durable=durable, on_failure=failed)]

    def _schedule(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        due = group.next_deadline_ms() if group is not None else None
        if due is not None:
            heapq.heappush(self._deadlines, (due, group_id))


def _is_empty(group) -> bool:
    if isinstance(group, ClassicGroup):
        return group.state in (GroupState.EMPTY, GroupState.DEAD)
    return group.is_empty()


def _now_hint(group) -> int:
    return getattr(group, "last_change_ms", 0)


def _subscribed_topics(group) -> set[str] | None:
    """Topics the group's members subscribe to; None when that cannot be known (assume all)."""
    if _is_empty(group):
        return set()
    if isinstance(group, ConsumerGroup):
        return group.subscribed_topic_names() if hasattr(group, "subscribed_topic_names") else None
    if group.protocol_type != "consumer":
        return None
    topics = set()
    for member in group.members.values():
        decoded = decode_subscription_topics(member.metadata_for(group.protocol_name) if hasattr(member, "metadata_for") else b"")
        if decoded is None:
            return None
        topics |= decoded
    return topics


def decode_subscription_topics(data: bytes) -> set[str] | None:
    """The topic names of a ConsumerProtocol Subscription (int16 version, then [string]); None if torn."""
    try:
        view = memoryview(data)
        position = 2
        count = int.from_bytes(view[position : position + 4], "big", signed=True)
        position += 4
        if not 0 <= count <= len(view):
            return None
        topics = set()
        for _ in range(count):
            length = int.from_bytes(view[position : position + 2], "big", signed=True)
            position += 2
            if length < 0 or position + length > len(view):
                return None
            topics.add(bytes(view[position : position + length]).decode())
            position += length
        return topics
    except (ValueError, UnicodeDecodeError):
        return None
