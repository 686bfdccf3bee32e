"""Committed offsets of every group this broker coordinates (Kafka's OffsetMetadataManager).

Pure: commits come in as values with ``now_ms`` and go out as the records to
persist; replaying those records rebuilds the same store.

Two layers, as Kafka's timeline offsets: the committed offsets (durable
records: what OffsetFetch shows) and, above them, the writes appended but not
yet durable (an ``OffsetWrite`` each, in append order). Requests that write
(a delete, the retention check) see both (``latest_of_group``); a write
becomes committed when its shell reports it durable, and is dropped when it
fails. Transactional commits (TxnOffsetCommit) wait, once durable, for their
producer's marker; a marker that arrives before they are durable is kept on
the write and applied with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.group import records


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # -1: unknown
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1  # -1: kept while the group lives (v1 records only set it)


@dataclass(eq=False)
class OffsetWrite:
    """One group's offset records (commits or tombstones), appended but not yet durable."""

    group_id: str
    records: list
    producer_id: int | None = None  # written inside this producer's transaction
    decision: bool | None = None  # transactional: the producer's marker came first (True: commit)


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # Durable transactional commits waiting for their producer's marker: producer id -> [(key, value)]
        self._pending: dict[int, list] = {}
        self._unwritten: list[OffsetWrite] = []  # not yet durable, in append order

    def groups(self) -> list[str]:
        """Groups with committed offsets."""
        return list(self._by_group)

    def groups_written(self) -> list[str]:
        """Groups with committed offsets or offsets on their way."""
        return list(dict.fromkeys([*self._by_group, *(write.group_id for write in self._unwritten)]))

    def of_group(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        """The group's committed offsets: durable, as OffsetFetch shows them."""
        return self._by_group.get(group_id, {})

    def latest_of_group(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        """The group's offsets with the writes on their way applied, as a request that writes sees them."""
        latest = dict(self._by_group.get(group_id, {}))
        for write in self._unwritten:
            if write.group_id == group_id and write.producer_id is None:
                for key, value in write.records:
                    _apply(latest, key, value)
        return latest

    def get(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._by_group.get(group_id, {}).get((topic, partition))

    def commit_records(self, group_id: str, commits: dict[tuple[str, int], CommittedOffset]) -> list:
        """The OffsetCommit records that store ``commits`` (applied by :meth:`replay`)."""
        return [
            (records.OffsetCommitKey(group=group_id, topic=topic, partition=partition), _value_of(committed))
            for (topic, partition), committed in commits.items()
        ]

    def delete_records(self, group_id: str, partitions=None) -> list:
        """Tombstones for the group's offsets: all of them, or those of ``partitions`` it has."""
        held = self.latest_of_group(group_id)
        chosen = held if partitions is None else [key for key in partitions if key in held]
        return [(records.OffsetCommitKey(group=group_id, topic=topic, partition=partition), None) for topic, partition in chosen]

    def expired_records(self, group_id: str, now_ms: int, retention_ms: int, empty_since_ms: int | None) -> list:
        """Tombstones for offsets past their retention (KIP-211): an empty group's offsets expire
        ``retention_ms`` after it became empty (or after the commit, if later); explicit expiry wins."""
        expired = []
        for key, committed in self.latest_of_group(group_id).items():
            if committed.expire_timestamp_ms >= 0:
                due = committed.expire_timestamp_ms
            elif empty_since_ms is not None:
                due = max(empty_since_ms, committed.commit_timestamp_ms) + retention_ms
            else:
                continue
            if now_ms >= due:
                expired.append(key)
        return self.delete_records(group_id, expired)

    # -- writes on their way ----------------------------------------------------------------

    def begin_write(self, group_id: str, offset_records: list, producer_id: int | None = None) -> OffsetWrite:
        """Offset records just appended: they count for later writes, not yet for OffsetFetch."""
        write = OffsetWrite(group_id, list(offset_records), producer_id)
        self._unwritten.append(write)
        return write

    def write_durable(self, write: OffsetWrite) -> None:
        """The write's records are durable: they are committed (transactional ones wait for their
        marker, unless it came first)."""
        if not self._take(write):
            return  # forgotten meanwhile: the group's partition was unloaded or the group deleted
        if write.producer_id is None or write.decision is True:
            for key, value in write.records:
                self.replay(key, value)
        elif write.decision is None:
            self._pending.setdefault(write.producer_id, []).extend(write.records)

    def write_failed(self, write: OffsetWrite) -> None:
        """The write's records were not made durable: it never happened."""
        self._take(write)

    def _take(self, write: OffsetWrite) -> bool:
        for position, candidate in enumerate(self._unwritten):
            if candidate is write:
                del self._unwritten[position]
                return True
        return False

    # -- replay and transactions ------------------------------------------------------------

    def replay(self, key, value) -> None:
        group = self._by_group.setdefault(key.group, {})
        _apply(group, key, value)
        if not group:
            del self._by_group[key.group]

    def replay_transactional(self, producer_id: int, key, value) -> None:
        """A durable TxnOffsetCommit record: it counts once the producer's transaction commits."""
        self._pending.setdefault(producer_id, []).append((key, value))

    def end_transaction(self, producer_id: int, commit: bool, owns_group) -> None:
        """The producer's marker reached the partition of the groups ``owns_group`` accepts."""
        kept = []
        for key, value in self._pending.pop(producer_id, []):
            if not owns_group(key.group):
                kept.append((key, value))
            elif commit:
                self.replay(key, value)
        if kept:
            self._pending[producer_id] = kept
        for write in self._unwritten:
            if write.producer_id == producer_id and write.decision is None and owns_group(write.group_id):
                write.decision = commit

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions with a transactional commit of the group still undecided."""
        return {(key.topic, key.partition) for pending in self._pending.values() for key, _ in pending if key.group == group_id}

    def forget_group(self, group_id: str) -> None:
        """The group is no longer coordinated here (its partition unloaded, or the group deleted)."""
        self._by_group.pop(group_id, None)
        self._unwritten = [write for write in self._unwritten if write.group_id != group_id]


def unknown_partitions(topics, keys) -> set[tuple[str, int]]:
    """The (topic, partition) ``keys`` naming no partition in ``topics`` (the metadata image's, by name).

    Kafka answers these UNKNOWN_TOPIC_OR_PARTITION and hands only the others to
    the coordinator (KafkaApis.handleOffsetCommitRequest and
    handleTxnOffsetCommitRequest), so no group holds offsets of a partition that
    does not exist.
    """
    return {(name, index) for name, index in keys
            if name not in topics or not 0 <= index < len(topics[name].partitions)}


def _value_of(committed: CommittedOffset):
    return records.OffsetCommitValue(
        offset=committed.offset,
        leader_epoch=committed.leader_epoch,
        metadata=committed.metadata,
        commit_timestamp=committed.commit_timestamp_ms,
        expire_timestamp=committed.expire_timestamp_ms,
    )


def _apply(offsets: dict, key, value) -> None:
    """One OffsetCommit record (a tombstone's value is None) applied to a group's offsets."""
    if value is None:
        offsets.pop((key.topic, key.partition), None)
        return
    offsets[(key.topic, key.partition)] = CommittedOffset(
        offset=value.offset,
        leader_epoch=getattr(value, "leader_epoch", -1),
        metadata=value.metadata,
        commit_timestamp_ms=value.commit_timestamp,
        expire_timestamp_ms=getattr(value, "expire_timestamp", -1),
    )
