"""The partitions of one log directory, with Kafka's per-directory checkpoints.

``log.dirs`` holds a directory per partition (``<topic>-<partition>``) plus
``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint``: the
offsets below which each partition needs no recovery, and where each
partition's log starts. Opening a partition passes both to :meth:`Log.open`,
so only what was written after the last checkpoint gets scanned.
"""

from __future__ import annotations

import os
import shutil
import uuid

from kbroker.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    LeaderEpochCache,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
)
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log

TopicPartition = tuple[str, int]


def partition_directory_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_directory_name(name: str) -> TopicPartition | None:
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogManager:
    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        os.makedirs(log_dir, exist_ok=True)
        self._recovery_points = OffsetCheckpointFile(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT))
        self._log_starts = OffsetCheckpointFile(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT))
        self._checkpointed: tuple[dict, dict] | None = None  # both files' contents; only this manager writes them
        self.logs: dict[TopicPartition, Log] = {}
        self._unsynced_metadata: list[str] = []

    def take_unsynced_metadata(self) -> list[str]:
        """The ``partition.metadata`` paths written without fsync since the last call (see :meth:`open`)."""
        paths, self._unsynced_metadata = self._unsynced_metadata, []
        return paths

    def existing_partitions(self) -> list[TopicPartition]:
        found = []
        for name in sorted(os.listdir(self.log_dir)):
            parsed = parse_partition_directory_name(name)
            if parsed is not None and os.path.isdir(os.path.join(self.log_dir, name)):
                found.append(parsed)
        return found

    def open(self, topic: str, partition: int, config: LogConfig | None = None, topic_id: uuid.UUID | None = None,
             *, sync_metadata: bool = True) -> Log:
        """Open or create a partition's log; a topic id is kept in ``partition.metadata``.

        With ``sync_metadata=False`` a new ``partition.metadata`` is not fsynced
        here but queued for :meth:`take_unsynced_metadata` (as Kafka flushes it
        in the background): creating thousands of partitions then costs no
        fsync each. The topic id is in the metadata log already, so a file lost
        in a crash is simply written again at the next open.
        """
        key = (topic, partition)
        if key in self.logs:
            return self.logs[key]
        directory = os.path.join(self.log_dir, partition_directory_name(topic, partition))
        log = Log.open(
            directory,
            config,
            recovery_point=self._checkpoint_values()[0].get(key, 0),
            log_start_offset=self._checkpoint_values()[1].get(key, 0),
        )
        metadata = PartitionMetadataFile(os.path.join(directory, PARTITION_METADATA))
        if topic_id is not None and (log.created or metadata.read() != topic_id):
            metadata.write(topic_id, durable=sync_metadata)
            if not sync_metadata:
                self._unsynced_metadata.append(metadata.path)
        log.topic_id = topic_id if log.created else metadata.read()
        epochs = LeaderEpochCheckpointFile(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
        log.leader_epochs = LeaderEpochCache(epochs, read=not log.created)
        log.leader_epochs.truncate_from_end(log.log_end_offset)
        self.logs[key] = log
        return log

    def checkpoint(self) -> None:
        """Persist every open partition's recovery point and log start offset."""
        recovery_points = {key: log.recovery_point for key, log in self.logs.items()}
        log_starts = {key: log.log_start_offset for key, log in self.logs.items()}
        self._recovery_points.write(recovery_points)
        self._log_starts.write(log_starts)
        self._checkpointed = recovery_points, log_starts

    def _checkpoint_values(self) -> tuple[dict, dict]:
        """(recovery points, log start offsets) as last checkpointed, read from the files once."""
        if self._checkpointed is None:
            self._checkpointed = self._recovery_points.read(), self._log_starts.read()
        return self._checkpointed

    def delete(self, topic: str, partition: int) -> None:
        key = (topic, partition)
        log = self.logs.pop(key, None)
        if log is not None:
            log.close()
        shutil.rmtree(os.path.join(self.log_dir, partition_directory_name(topic, partition)), ignore_errors=True)
        self.checkpoint()

    def close(self) -> None:
        for log in self.logs.values():
            log.flush()
        self.checkpoint()
        for log in self.logs.values():
            log.close()
        self.logs.clear()
