"""Committed offsets of every group this broker coordinates (Kafka's OffsetMetadataManager).

Pure: commits come in as values with ``now_ms`` and go out as the records to
persist; replaying those records rebuilds the same store.
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


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # Transactional commits waiting for their producer's marker: producer id -> [(key, value)]
        self._pending: dict[int, list] = {}

    def groups(self) -> list[str]:
        return list(self._by_group)

    def of_group(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        return self._by_group.get(group_id, {})

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
        held = self._by_group.get(group_id, {})
        chosen = held if partitions is None else [key for key in partitions if key in held]
        return [(records.OffsetCommitKey(group=group_id, topic=topic, partition=partition), None) for topic, partition in chosen]

    def expired_records(self, group_id: str, now_ms: int, retention_ms: int, empty_since_ms: int | None) -> list:
        """Tombstones for offsets past their retention (KIP-211): an empty group's offsets expire
        ``retention_ms`` after it became empty (or after the commit, if later); explicit expiry wins."""
        expired = []
        for key, committed in self._by_group.get(group_id, {}).items():
            if committed.expire_timestamp_ms >= 0:
                due = committed.expire_timestamp_ms
            elif empty_since_ms is not None:
                due = max(empty_since_ms, committed.commit_timestamp_ms) + retention_ms
            else:
                continue
            if now_ms >= due:
                expired.append(key)
        return self.delete_records(group_id, expired)

    def replay(self, key, value) -> None:
        group = self._by_group.setdefault(key.group, {})
        if value is None:
            group.pop((key.topic, key.partition), None)
            if not group:
                del self._by_group[key.group]
            return
        group[(key.topic, key.partition)] = CommittedOffset(
            offset=value.offset,
            leader_epoch=getattr(value, "leader_epoch", -1),
            metadata=value.metadata,
            commit_timestamp_ms=value.commit_timestamp,
            expire_timestamp_ms=getattr(value, "expire_timestamp", -1),
        )

    def replay_transactional(self, producer_id: int, key, value) -> None:
        """A TxnOffsetCommit record: it counts once the producer's transaction commits."""
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

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions with a transactional commit of the group still undecided."""
        return {(key.topic, key.partition) for pending in self._pending.values() for key, _ in pending if key.group == group_id}

    def forget_group(self, group_id: str) -> None:
        self._by_group.pop(group_id, None)


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
