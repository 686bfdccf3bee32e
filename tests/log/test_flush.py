"""What a flush fsyncs: the active segment's log only, a rolled segment's indexes and producer snapshot, a new
segment's directory; and that a roll fsyncs nothing itself (it runs on the appending thread)."""

import os

import pytest

from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from kbroker.wire.records import Record, build_batch


def batch(value_bytes: int = 5000, count: int = 1) -> bytearray:
    return bytearray(build_batch([Record(offset_delta=i, timestamp_delta=i, value=b"x" * value_bytes) for i in range(count)], base_timestamp=1000))


@pytest.fixture
def fsyncs(monkeypatch):
    """Paths fsynced, in order (descriptors resolved through /proc)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)  # the one os module every log module uses
    return synced


def test_flushing_the_active_segment_fsyncs_its_log_alone(tmp_path, fsyncs):
    partition = Log.open(str(tmp_path / "t-0"))
    partition.append(batch())
    partition.flush()  # the first: the segment is new, so its directory goes too
    fsyncs.clear()
    for _ in range(3):
        partition.append(batch())  # 5 KB > index.interval.bytes: an index entry each time
        partition.flush()
    assert fsyncs == ["00000000000000000000.log"] * 3
    assert partition.recovery_point == partition.log_end_offset == 4
    partition.close()


def test_a_new_segment_makes_the_flush_fsync_the_directory(tmp_path, fsyncs):
    partition = Log.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=12000))
    fsyncs.clear()
    partition.append(batch())
    partition.flush()
    assert fsyncs == ["00000000000000000000.log", "t-0"]
    fsyncs.clear()
    partition.append(batch())
    partition.flush()
    assert fsyncs == ["00000000000000000000.log"]
    fsyncs.clear()
    partition.append(batch())  # rolls: nothing is fsynced on the appending thread
    assert fsyncs == []
    assert partition.trusted_recovery_point == 0  # the rolled segment's indexes are not durable yet
    partition.flush()  # the new segment's log, the rolled one's indexes, the roll's producer snapshot, the names
    assert fsyncs == ["00000000000000000002.log", "00000000000000000000.index", "00000000000000000000.timeindex",
                      "00000000000000000002.snapshot", "t-0"]
    assert partition.trusted_recovery_point == partition.recovery_point == 3
    partition.close()


def test_a_flush_across_a_roll_syncs_the_rolled_segment_fully(tmp_path, fsyncs):
    partition = Log.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=12000))
    partition.append(batch())
    partition.flush()
    partition.append(batch())  # not flushed
    partition.append(batch())  # rolls
    fsyncs.clear()
    job = partition.begin_flush()
    assert [segment.base_offset for segment in job.segments] == [0, 2]
    job.run()
    partition.complete_flush(job)
    # The rolled segment's log (its unflushed tail) and indexes, then the active one's log, the roll's producer
    # snapshot, then the new names.
    assert fsyncs == ["00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
                      "00000000000000000002.log", "00000000000000000002.snapshot", "t-0"]
    assert partition.recovery_point == 3
    partition.close()


def test_index_entries_reach_the_file_in_runs_and_on_close(tmp_path):
    directory = str(tmp_path / "t-0")
    partition = Log.open(directory, LogConfig(index_interval_bytes=100))
    for _ in range(20):
        partition.append(batch(value_bytes=200))
    index_path = os.path.join(directory, "00000000000000000000.index")
    entries = partition.active_segment.offset_index.entries
    assert entries == 19
    assert os.path.getsize(index_path) < entries * 8  # still buffered
    partition.close()
    assert os.path.getsize(index_path) == entries * 8
    reopened = Log.open(directory, LogConfig(index_interval_bytes=100), recovery_point=20)
    assert reopened.active_segment.offset_index.entries == entries
    for offset in range(20):
        assert reopened.read(offset, 1).position == reopened.active_segment.translate(offset)[0]
    reopened.close()


def test_a_rolled_segment_has_all_its_index_entries_on_disk(tmp_path):
    directory = str(tmp_path / "t-0")
    partition = Log.open(directory, LogConfig(index_interval_bytes=100, segment_bytes=3000))
    while len(partition.segments) < 3:
        partition.append(batch(value_bytes=200))
    for segment in partition.segments[:-1]:
        on_disk = os.path.getsize(segment.offset_index.path) // 8
        assert on_disk == segment.offset_index.entries > 0
        assert os.path.getsize(segment.time_index.path) // 12 == segment.time_index.entries > 0
    partition.close()


def test_flushing_after_recovery_and_truncation_keeps_index_and_log_consistent(tmp_path):
    directory = str(tmp_path / "t-0")
    config = LogConfig(index_interval_bytes=100)
    partition = Log.open(directory, config)
    for _ in range(30):
        partition.append(batch(value_bytes=200))
    partition.truncate_to(17)  # rewrites the indexes; buffered entries past 17 must not come back
    for _ in range(5):
        partition.append(batch(value_bytes=200))
    partition.flush()
    partition.close()
    reopened = Log.open(directory, config, recovery_point=22)
    assert reopened.log_end_offset == 22
    offsets = reopened.active_segment.offset_index
    keys = [offsets.lookup(offset)[0] for offset in range(22)]
    assert keys == sorted(keys) and max(keys) <= 21
    for offset in range(22):
        region = reopened.read(offset, 1)
        assert region is not None
    reopened.close()


def test_a_flush_that_ran_across_a_truncation_does_not_move_the_recovery_point(tmp_path):
    from kbroker.log.partition_log import Log
    from kbroker.wire.records import Record, build_batch

    log = Log.open(str(tmp_path / "t-0"))
    log.append(bytearray(build_batch([Record(offset_delta=0, value=b"a")])))
    log.flush()
    log.append(bytearray(build_batch([Record(offset_delta=0, value=b"b")])))
    log.append(bytearray(build_batch([Record(offset_delta=0, value=b"c")])))
    job = log.begin_flush()
    log.truncate_to(1)
    log.append(bytearray(build_batch([Record(offset_delta=0, value=b"d")])))
    job.run()
    log.complete_flush(job)
    assert log.recovery_point == 1


def test_opening_a_log_fsyncs_only_what_lies_past_its_checkpointed_recovery_point(tmp_path, fsyncs):
    """A restart after a clean stop (recovery point at the log end) fsyncs nothing: 20,000 partitions cost
    20,000 fsyncs at every start before. What recovery finds past the recovery point (a process crash
    leaves it in the page cache) is fsynced, as before."""
    directory = str(tmp_path / "t-0")
    partition = Log.open(directory, LogConfig(segment_bytes=12000))
    for _ in range(5):
        partition.append(batch())
    partition.flush()
    end = partition.log_end_offset
    partition.close()
    fsyncs.clear()
    reopened = Log.open(directory, LogConfig(segment_bytes=12000), recovery_point=end)
    assert reopened.log_end_offset == end and reopened.recovery_point == end
    assert fsyncs == []
    reopened.close()
    reopened = Log.open(directory, LogConfig(segment_bytes=12000), recovery_point=end - 1)
    assert reopened.log_end_offset == end and reopened.recovery_point == end
    assert fsyncs == ["00000000000000000004.log"]
    reopened.close()
