"""The log directory: partitions, Kafka's checkpoint files, topic ids and leader epochs."""

import os
import uuid

from kbroker.log.append_origin import AppendOrigin
from kbroker.log.checkpoint import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from kbroker.log.config import LogConfig
from kbroker.log.manager import LogManager, parse_partition_directory_name
from kbroker.log.partition_log import Log
from kbroker.wire.records import Record, build_batch


def batch(values, epoch=-1):
    return bytearray(build_batch([Record(offset_delta=i, value=v) for i, v in enumerate(values)], partition_leader_epoch=epoch))


def test_partition_directory_names_parse_like_kafka():
    assert parse_partition_directory_name("orders-3") == ("orders", 3)
    assert parse_partition_directory_name("my-topic-with-dashes-12") == ("my-topic-with-dashes", 12)
    assert parse_partition_directory_name("recovery-point-offset-checkpoint") is None
    assert parse_partition_directory_name("nodash") is None


def test_checkpoints_survive_reopen_and_bound_recovery(tmp_path):
    manager = LogManager(str(tmp_path))
    topic_id = uuid.uuid4()
    log = manager.open("orders", 0, LogConfig(segment_bytes=300), topic_id=topic_id)
    for i in range(20):
        log.append(batch([b"value-%d" % i] * 3), leader_epoch=2 if i < 10 else 5)
    log.advance_log_start_offset(4)
    manager.close()

    assert OffsetCheckpointFile(os.path.join(tmp_path, RECOVERY_POINT_CHECKPOINT)).read() == {("orders", 0): 60}
    assert OffsetCheckpointFile(os.path.join(tmp_path, LOG_START_OFFSET_CHECKPOINT)).read() == {("orders", 0): 4}
    assert (tmp_path / "orders-0" / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")

    reopened = LogManager(str(tmp_path))
    assert reopened.existing_partitions() == [("orders", 0)]
    log = reopened.open("orders", 0, LogConfig(segment_bytes=300))
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (4, 60, 60)
    assert log.topic_id == topic_id
    assert [tuple(entry) for entry in log.leader_epochs.entries] == [(2, 4), (5, 30)]
    assert log.leader_epochs.end_offset_for(2, log.log_end_offset) == (2, 30)
    reopened.close()


def test_a_partition_not_opened_since_the_start_keeps_its_checkpointed_offsets(tmp_path):
    """Logs found at start open on first use: checkpoints written meanwhile keep what the last ones held
    for the others (a log start moved by DeleteRecords must not come back), and a deleted one is dropped."""
    manager = LogManager(str(tmp_path))
    for partition in range(3):
        log = manager.open("lazy", partition, LogConfig())
        for value in range(6):
            log.append(batch([b"v%d" % value]))
        log.advance_log_start_offset(2 + partition)
    manager.close()

    restarted = LogManager(str(tmp_path))
    assert restarted.unopened() == [("lazy", 0), ("lazy", 1), ("lazy", 2)]
    restarted.open("lazy", 0, LogConfig()).append(batch([b"more"]))
    restarted.forget("lazy", 2)
    assert restarted.unopened() == [("lazy", 1)] and restarted.holds("lazy", 1)
    restarted.close()  # checkpoints: lazy-0 from its log, lazy-1 as found, lazy-2 gone
    assert OffsetCheckpointFile(os.path.join(tmp_path, LOG_START_OFFSET_CHECKPOINT)).read() == {
        ("lazy", 0): 2, ("lazy", 1): 3}
    assert OffsetCheckpointFile(os.path.join(tmp_path, RECOVERY_POINT_CHECKPOINT)).read() == {
        ("lazy", 0): 7, ("lazy", 1): 6}

    again = LogManager(str(tmp_path))
    log = again.open("lazy", 1, LogConfig())
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (3, 6, 6)
    assert again.unopened() == [("lazy", 0)]
    again.close()


def test_truncation_rewinds_the_leader_epoch_cache(tmp_path):
    manager = LogManager(str(tmp_path))
    log = manager.open("t", 0)
    log.append(batch([b"a"]), leader_epoch=1)
    log.append(batch([b"b"]), leader_epoch=3)
    log.truncate_to(1)
    assert [tuple(entry) for entry in log.leader_epochs.entries] == [(1, 0)]
    follower_batch = batch([b"c"], epoch=4)
    follower_batch[0:8] = (1).to_bytes(8, "big")
    log.append(follower_batch, AppendOrigin.REPLICATION)
    assert [tuple(entry) for entry in log.leader_epochs.entries] == [(1, 0), (4, 1)]
    manager.delete("t", 0)
    assert not (tmp_path / "t-0").exists()


def test_unsynced_partition_metadata_is_queued_and_rewritten_when_lost(tmp_path, durability_events):
    manager = LogManager(str(tmp_path))
    topic_id = uuid.uuid4()
    for partition in range(3):
        manager.open("many", partition, LogConfig(), topic_id=topic_id, sync_metadata=False)
    paths = manager.take_unsynced_metadata()
    assert sorted(paths) == sorted(str(tmp_path / f"many-{p}" / "partition.metadata") for p in range(3))
    assert manager.take_unsynced_metadata() == []
    assert [event for event in durability_events if event[0] == "fsync"] == []  # new empty logs need none
    manager.close()
    # A crash after the rename but before the bytes reached the disk leaves an empty file: it is written again.
    with open(paths[0], "wb"):
        pass
    reopened = LogManager(str(tmp_path))
    assert reopened.open("many", 0, LogConfig(), topic_id=topic_id).topic_id == topic_id
    with open(paths[0], "rb") as metadata:
        assert metadata.read().startswith(b"version: 0\ntopic_id: ")
    reopened.close()


def test_a_new_partition_is_one_directory_and_its_metadata_until_data_comes(tmp_path):
    manager = LogManager(str(tmp_path))
    topic_id = uuid.uuid4()
    log = manager.open("fresh", 0, LogConfig(), topic_id=topic_id, sync_metadata=False)
    assert log.created and log.topic_id == topic_id
    assert sorted(os.listdir(tmp_path / "fresh-0")) == ["partition.metadata"]
    assert (log.log_start_offset, log.log_end_offset, log.read(0, 1 << 20)) == (0, 0, None)
    manager.close()

    # Reopened before any data: still an empty log, still nothing to recover.
    reopened = LogManager(str(tmp_path))
    log = reopened.open("fresh", 0, LogConfig(), topic_id=topic_id)
    assert not log.created and (log.log_end_offset, log.topic_id) == (0, topic_id)
    log.append(batch([b"first"]), leader_epoch=0)
    assert "00000000000000000000.log" in os.listdir(tmp_path / "fresh-0")
    reopened.close()
    assert LogManager(str(tmp_path)).open("fresh", 0).log_end_offset == 1


def test_a_deferred_partition_touches_no_file_until_its_first_write(tmp_path, durability_events):
    manager = LogManager(str(tmp_path))
    topic_id = uuid.uuid4()
    log = manager.open("lazy", 0, LogConfig(), topic_id=topic_id, defer_directory=True)
    assert log.created and not log.directory_made and log.topic_id == topic_id
    assert not (tmp_path / "lazy-0").exists()
    assert (log.log_start_offset, log.log_end_offset, log.read(0, 1 << 20)) == (0, 0, None)
    assert log.leader_epochs.latest_epoch is None
    log.flush()  # nothing to make durable: no directory to sync either
    assert durability_events == []

    log.append(batch([b"first"]), leader_epoch=3)
    assert sorted(os.listdir(tmp_path / "lazy-0")) == ["00000000000000000000.log"]
    assert log.leader_epochs.latest_epoch == 3  # its checkpoint is the first flush's to write
    del durability_events[:]
    log.flush()  # the first flush writes the metadata file and the epoch's, in the flusher's thread
    assert sorted(os.listdir(tmp_path / "lazy-0")) == ["00000000000000000000.log", "leader-epoch-checkpoint",
                                                      "partition.metadata"]
    assert ("fsync", True) in durability_events and durability_events.count(("fsync", False)) == 2
    manager.close()
    reopened = LogManager(str(tmp_path))
    again = reopened.open("lazy", 0, LogConfig(), topic_id=topic_id, defer_directory=True)
    assert again.directory_made and (again.log_end_offset, again.topic_id) == (1, topic_id)
    reopened.close()


def test_a_deferred_partition_never_written_is_gone_after_close_and_deletes_cleanly(tmp_path):
    manager = LogManager(str(tmp_path))
    manager.open("never", 0, LogConfig(), topic_id=uuid.uuid4(), defer_directory=True)
    manager.open("never", 1, LogConfig(), topic_id=uuid.uuid4(), defer_directory=True)
    manager.delete("never", 1)
    manager.close()
    assert not any(name.startswith("never-") for name in os.listdir(tmp_path))
    reopened = LogManager(str(tmp_path))
    assert reopened.open("never", 0, LogConfig(), defer_directory=True).log_end_offset == 0
    reopened.close()


def test_a_follower_starting_a_deferred_log_elsewhere_makes_its_directory(tmp_path):
    manager = LogManager(str(tmp_path))
    log = manager.open("follow", 0, LogConfig(), topic_id=uuid.uuid4(), defer_directory=True)
    log.truncate_fully_and_start_at(40)  # the leader's log starts at 40
    assert (tmp_path / "follow-0").is_dir() and (log.log_start_offset, log.log_end_offset) == (40, 40)
    manager.close()


def test_a_log_started_afresh_at_an_offset_starts_there_after_a_restart(tmp_path):
    """Its empty segment is a file at once, fsynced by the next flush, so the directory alone tells where the
    log starts (the Raft store's log after a snapshot of everything has only that to go on)."""
    log = Log.open(str(tmp_path / "fresh-0"), LogConfig())
    log.append(batch([b"a", b"b"]), leader_epoch=0, now_ms=0)
    log.truncate_fully_and_start_at(40)
    log.flush()
    log.close()
    assert os.listdir(tmp_path / "fresh-0") and (tmp_path / "fresh-0" / "00000000000000000040.log").exists()
    reopened = Log.open(str(tmp_path / "fresh-0"), LogConfig())
    assert (reopened.log_start_offset, reopened.log_end_offset) == (40, 40)
    reopened.close()


def test_a_moved_log_start_is_told_to_the_log_s_owner(tmp_path):
    """Retention and DeleteRecords move no high watermark: the log tells its partition, whose fetch sessions
    answer the new log start (kbroker/handlers/fetch_watch.py)."""
    manager = LogManager(str(tmp_path))
    log = manager.open("starts", 0, LogConfig(segment_bytes=100, retention_ms=0), topic_id=uuid.uuid4())
    told = []
    log.on_start_moved = lambda: told.append(log.log_start_offset)
    for value in (b"a" * 80, b"b" * 80, b"c" * 80):
        log.append(batch([value]), leader_epoch=0, now_ms=0)
    log.advance_log_start_offset(1)
    log.advance_log_start_offset(1)  # no move: nothing told
    assert told == [1]
    assert log.apply_retention(now_ms=10_000) and told == [1, 2]
    assert log.apply_retention(now_ms=10_000) == [] and told == [1, 2]
    manager.close()
