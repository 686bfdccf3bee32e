"""The partitions of one log directory, with Kafka's per-directory checkpoints.

``log.dirs`` holds a directory per partition (``<topic>-<partition>``) plus
``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint``: the
offsets below which each partition needs no recovery, and where each
partition's log starts. Opening a partition passes both to :meth:`Log.open`,
so only what was written after the last checkpoint gets scanned.
"""

from __future__ import annotations

import functools
import logging
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
from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.log.config import LogConfig
from kbroker.log.offline import out_of_space
from kbroker.log.partition_log import Log
from kbroker.log.preparer import LogPreparer

logger = logging.getLogger("kbroker.log.manager")

TopicPartition = tuple[str, int]


def partition_directory_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


METADATA_TOPIC = "__cluster_metadata"  # its directory is the metadata quorum's log (raft/store.py), not kept here
DELETE_SUFFIX = "-delete"  # Kafka's: a deleted partition's directory, renamed until its files are removed


def parse_partition_directory_name(name: str) -> TopicPartition | None:
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogManager:
    def __init__(self, log_dir: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self.log_dir = log_dir
        self.clock = clock  # the time logs are opened at (their segment.ms and flush.ms count from it)
        os.makedirs(log_dir, exist_ok=True)
        self._recovery_points = OffsetCheckpointFile(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT))
        self._log_starts = OffsetCheckpointFile(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT))
        self._checkpointed: tuple[dict, dict] | None = None  # both files' contents; only this manager writes them
        self.logs: dict[TopicPartition, Log] = {}
        self._unsynced_metadata: list[str] = []
        self._found: set[str] = set()  # the partition directories there at start and not opened since
        self.preparer: LogPreparer | None = None  # set while the owner runs: new partitions' directories made ahead
        for name in os.listdir(log_dir):
            if name.endswith(DELETE_SUFFIX):  # partitions deleted before a stop or a crash
                self.remove_directory(os.path.join(log_dir, name))
            elif (parsed := parse_partition_directory_name(name)) is not None and parsed[0] != METADATA_TOPIC:
                self._found.add(name)

    def found_at_start(self, topic: str, partition: int) -> bool:
        """Whether the partition had a directory when this manager started and is not open yet. Such a log
        may wait for its first use: until it opens, checkpoints keep the recovery point and log start they
        held for it (``checkpoint_values``)."""
        return partition_directory_name(topic, partition) in self._found

    @property
    def unopened_count(self) -> int:
        """How many of the partitions found at start are not opened (or deleted) yet."""
        return len(self._found)

    def unopened(self) -> list[TopicPartition]:
        """The partitions found at start and not opened (or deleted) since."""
        return [key for key in map(parse_partition_directory_name, sorted(self._found)) if key is not None]

    def prepare(self, topic: str, partition: int, topic_id: uuid.UUID | None) -> None:
        """A new partition placed here: have its directory made ahead of its first use, in the preparer's
        threads (kbroker/log/preparer.py), if there is a preparer and the log is not open or found."""
        name = partition_directory_name(topic, partition)
        if self.preparer is not None and (topic, partition) not in self.logs and name not in self._found:
            self.preparer.submit(os.path.join(self.log_dir, name), topic_id)

    def holds(self, topic: str, partition: int) -> bool:
        """Whether the partition has a log here: open, found at start or being made ahead (a partition moved
        away from this broker has it deleted)."""
        name = partition_directory_name(topic, partition)
        return ((topic, partition) in self.logs or name in self._found
                or (self.preparer is not None and self.preparer.knows(os.path.join(self.log_dir, name))))

    def _claim(self, directory: str) -> bool:
        """Before touching a partition's directory: whether the preparer made it (see LogPreparer.claim)."""
        return self.preparer is not None and self.preparer.claim(directory)

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
             *, sync_metadata: bool = True, defer_directory: bool = False) -> Log:
        """Open or create a partition's log; a topic id is kept in ``partition.metadata``.

        With ``defer_directory`` a new partition's directory is made before its first write
        (``Log.make_directory``), and its ``partition.metadata`` by its first flush.

        With ``sync_metadata=False`` a new ``partition.metadata`` is not fsynced
        here but queued for :meth:`take_unsynced_metadata` (as Kafka flushes it
        in the background): creating thousands of partitions then costs no
        fsync each. The topic id is in the metadata log already, so a file lost
        in a crash is simply written again at the next open.
        """
        key = (topic, partition)
        if key in self.logs:
            return self.logs[key]
        name = partition_directory_name(topic, partition)
        self._found.discard(name)
        directory = os.path.join(self.log_dir, name)
        prepared = self._claim(directory)  # made ahead, with its partition.metadata
        log = Log.open(
            directory,
            config,
            recovery_point=self._checkpoint_values()[0].get(key, 0),
            log_start_offset=self._checkpoint_values()[1].get(key, 0),
            now_ms=self.clock.wall_ms(),
            defer_directory=defer_directory,
            prepared=prepared,
        )
        metadata = PartitionMetadataFile(directory + os.sep + PARTITION_METADATA)
        if not log.directory_made:
            if topic_id is not None:
                log.on_directory_made = functools.partial(_write_deferred_metadata, metadata, topic_id)
        elif topic_id is not None and not prepared and (log.created or metadata.read() != topic_id):
            metadata.write(topic_id, durable=sync_metadata)
            if not sync_metadata:
                self._unsynced_metadata.append(metadata.path)
        log.topic_id = topic_id if log.created else metadata.read()
        epochs = LeaderEpochCheckpointFile(directory + os.sep + LEADER_EPOCH_CHECKPOINT)
        log.leader_epochs = LeaderEpochCache(epochs, read=not log.created)
        log.leader_epochs.assign_recovered(log.recovered_epochs)
        log.recovered_epochs = []
        log.leader_epochs.truncate_from_end(log.log_end_offset)
        log.leader_epochs.write_later = log.defer_write  # a new epoch's write is the next flush's
        self.logs[key] = log
        return log

    def checkpoint(self) -> None:
        """Persist every open partition's recovery point and log start offset."""
        self.write_checkpoint(self.checkpoint_values())

    def checkpoint_values(self) -> tuple[dict, dict]:
        """(recovery points, log start offsets) of every open partition, now, and as last checkpointed of
        every partition found at start and not opened yet: what ``write_checkpoint`` persists, perhaps in
        another thread (the owner writes them in the order it took them)."""
        recovery_points, log_starts = {}, {}
        if self._found:
            checkpointed_recovery_points, checkpointed_log_starts = self._checkpoint_values()
            for key in self.unopened():
                if key in checkpointed_recovery_points:
                    recovery_points[key] = checkpointed_recovery_points[key]
                if key in checkpointed_log_starts:
                    log_starts[key] = checkpointed_log_starts[key]
        recovery_points.update((key, log.trusted_recovery_point) for key, log in self.logs.items())
        log_starts.update((key, log.log_start_offset) for key, log in self.logs.items())
        return recovery_points, log_starts

    def write_checkpoint(self, values: tuple[dict, dict]) -> None:
        """Persist ``checkpoint_values()`` (two fsynced files): blocks, so a worker thread's job."""
        recovery_points, log_starts = values
        try:
            self._recovery_points.write(recovery_points)
            self._log_starts.write(log_starts)
        except OSError as error:
            if not out_of_space(error):
                raise
            # A full disk: the last checkpoints stay, and a restart recovers from them (it checks more of
            # the logs, and a log start DeleteRecords moved since may come back). Tried again next time.
            logger.warning("checkpoints in %s not written: %s", self.log_dir, error)  # once per checkpoint interval
            return
        self._checkpointed = values

    def _checkpoint_values(self) -> tuple[dict, dict]:
        """(recovery points, log start offsets) as last checkpointed, read from the files once."""
        if self._checkpointed is None:
            self._checkpointed = self._recovery_points.read(), self._log_starts.read()
        return self._checkpointed

    def delete(self, topic: str, partition: int) -> None:
        self.remove_directory(self.forget(topic, partition))
        self.checkpoint()

    def forget(self, topic: str, partition: int) -> str:
        """Close a partition's log, stop keeping it and rename its directory out of the way, as Kafka
        does (``<topic>-<partition>.<unique>-delete``): a partition of that name may be made again at
        once. Returns the new path, for ``remove_directory``, which with a checkpoint finishes the
        deletion (both block: the owner may run them in a worker thread). A start removes what a
        stop left behind."""
        log = self.logs.pop((topic, partition), None)
        if log is not None:
            log.close(snapshot=False)  # as Kafka's asyncDelete: no producer snapshot (two fsyncs) for a deleted log
        self._found.discard(partition_directory_name(topic, partition))
        directory = os.path.join(self.log_dir, partition_directory_name(topic, partition))
        self._claim(directory)  # a directory being made ahead is finished first, one not begun is not made
        renamed = f"{directory}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        try:
            os.rename(directory, renamed)
        except FileNotFoundError:
            pass  # never written here
        return renamed

    @staticmethod
    def remove_directory(path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        for log in self.logs.values():
            log.flush()
        self.checkpoint()
        for log in self.logs.values():
            log.close()
        self.logs.clear()


def _write_deferred_metadata(metadata: PartitionMetadataFile, topic_id: uuid.UUID, log: Log) -> None:
    """A deferred partition's directory was just made (its first write): its partition.metadata is written
    by the log's first flush, in the flusher's thread (0.6 ms a file on a VM disk, kept off the event loop),
    and not fsynced: the topic id is in the metadata log, and a file a crash lost or emptied is written
    again at the next open (as one queued by ``take_unsynced_metadata`` before its fsync)."""
    log.defer_write(functools.partial(_write_metadata_quietly, metadata, topic_id))


def _write_metadata_quietly(metadata: PartitionMetadataFile, topic_id: uuid.UUID) -> None:
    try:
        metadata.write(topic_id, durable=False)
    except OSError as error:  # the topic id is in the metadata log: the next open writes the file again
        logger.warning("%s not written: %s", metadata.path, error)
