"""Logs with more segments than their descriptor cache holds (kbroker/log/descriptor_cache.py): appends,
reads, flushes on another thread, retention and reopening all work with files closed and reopened; the
open descriptors stay within the cache's capacity; a region keeps its descriptor while it is sent; and an
open that finds the process out of descriptors makes room and tries again."""

from __future__ import annotations

import errno
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from kbroker.log.config import LogConfig
from kbroker.log.descriptor_cache import DescriptorCache
from kbroker.log.partition_log import Log
from kbroker.wire.records import Record, build_batch, decode_records

VALUE_BYTES = 300
SEGMENT_BYTES = 1000  # two batches a segment


def batch(index: int) -> bytearray:
    return bytearray(build_batch([Record(value=b"%06d" % index + b"x" * VALUE_BYTES)], base_timestamp=1_000))


def value_at(log: Log, offset: int) -> bytes:
    _, records = decode_records(log.read_bytes(offset, 1))
    return records[0].value[:6]


def files_open_under(directory) -> list[str]:
    """What this process has open below ``directory`` (a deleted file ends in " (deleted)")."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            found.append(target)
    return found


def filled_log(directory, cache: DescriptorCache, count: int, **config) -> Log:
    log = Log.open(str(directory), LogConfig(segment_bytes=SEGMENT_BYTES, **config), now_ms=0, descriptors=cache)
    for index in range(count):
        log.append(batch(index), now_ms=0)
    return log


def test_a_log_of_more_segments_than_the_cache_holds_appends_reads_and_reopens(tmp_path):
    cache = DescriptorCache(capacity=4)
    directory = tmp_path / "t-0"
    log = Log.open(str(directory), LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=1), now_ms=0,
                   descriptors=cache)
    for index in range(60):
        log.append(batch(index), now_ms=0)
        assert len(files_open_under(tmp_path)) <= cache.capacity
    assert len(log.segments) == 30 and cache.evictions > 0
    for offset in reversed(range(60)):  # every segment opened again, the oldest last
        assert value_at(log, offset) == b"%06d" % offset
    assert len(files_open_under(tmp_path)) == cache.open_descriptors <= cache.capacity
    log.flush()
    log.close()
    assert files_open_under(tmp_path) == [] and cache.open_descriptors == 0

    reopened = Log.open(str(directory), LogConfig(segment_bytes=SEGMENT_BYTES), recovery_point=0,
                        descriptors=cache)  # recovery checks every segment
    assert reopened.log_end_offset == 60
    assert [value_at(reopened, offset) for offset in range(60)] == [b"%06d" % offset for offset in range(60)]
    assert len(files_open_under(tmp_path)) <= cache.capacity
    reopened.append(batch(60))
    assert value_at(reopened, 60) == b"000060"
    reopened.close()


def test_a_flush_reaches_segments_whose_files_the_cache_closed(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(descriptor):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{descriptor}")))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)
    cache = DescriptorCache(capacity=1)
    log = filled_log(tmp_path / "t-0", cache, 10, index_interval_bytes=1)
    log.flush()
    synced.clear()
    for index in range(10, 16):
        log.append(batch(index), now_ms=0)  # three more segments, none flushed
    assert cache.evictions > 0
    log.flush()
    logs = {name for name in synced if name.endswith(".log")}
    assert logs == {f"{base:020d}.log" for base in (10, 12, 14)}  # from the recovery point on
    for base in (8, 10, 12):  # rolled since the last flush: their indexes too, reopened for the fsync
        assert {f"{base:020d}.index", f"{base:020d}.timeindex"} <= set(synced)
    assert log.recovery_point == 16
    log.close()


def test_the_flusher_thread_never_sees_its_descriptor_closed_or_reused(tmp_path, monkeypatch):
    """The flusher fsyncs (slowly) in its thread while the owner appends and reads across more segments than
    the cache holds: every fsync's descriptor still names the file it was opened for when the fsync ends."""
    real_fsync = os.fsync
    wrong: list[tuple[str, str]] = []

    def slow_fsync(descriptor):
        before = os.readlink(f"/proc/self/fd/{descriptor}")
        time.sleep(0.001)  # the owner's thread runs meanwhile, and evicts
        real_fsync(descriptor)
        after = os.readlink(f"/proc/self/fd/{descriptor}")
        if after != before:
            wrong.append((before, after))

    monkeypatch.setattr(os, "fsync", slow_fsync)
    cache = DescriptorCache(capacity=2)
    log = filled_log(tmp_path / "t-0", cache, 10, index_interval_bytes=1)
    jobs: queue.Queue = queue.Queue()
    done: queue.Queue = queue.Queue()

    def flusher() -> None:
        while (job := jobs.get()) is not None:
            try:
                job.run()
                done.put((job, None))
            except BaseException as error:  # noqa: BLE001 - the test reports it
                done.put((job, error))

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for index in range(10, 200):
            log.append(batch(index), now_ms=0)
            if index % 5 == 0:
                jobs.put(log.begin_flush())
            for offset in range(0, index, 17):  # reads all over the log: the cache evicts constantly
                assert value_at(log, offset) == b"%06d" % offset
            while not done.empty():
                job, error = done.get()
                assert error is None, error
                log.complete_flush(job)
    finally:
        jobs.put(None)
        thread.join()
    while not done.empty():
        job, error = done.get()
        assert error is None, error
        log.complete_flush(job)
    assert not wrong
    assert cache.evictions > 100
    log.flush()
    assert log.recovery_point == log.log_end_offset == 200
    log.close()


def test_a_region_being_sent_keeps_its_descriptor_while_its_segment_is_evicted(tmp_path):
    cache = DescriptorCache(capacity=1)
    log = filled_log(tmp_path / "t-0", cache, 10)
    region = log.read(0, 10_000)
    expected = region.read()
    assert region.segment is log.segments[0]
    with region.descriptor() as descriptor:
        for offset in range(2, 10):  # every other segment opened: each would evict the first
            value_at(log, offset)
        assert os.readlink(f"/proc/self/fd/{descriptor}") == log.segments[0].log_path
        assert os.pread(descriptor, region.length, region.position) == expected
        assert log.segments[0].descriptor_count() == 1  # pinned: still open, over the capacity
    value_at(log, 9)  # the next unpin evicts it
    assert log.segments[0].descriptor_count() == 0
    assert len(files_open_under(tmp_path)) <= cache.capacity
    assert region.read() == expected  # reopened: the segment is still the log's
    log.close()


def test_a_log_closed_while_a_region_is_sent_closes_the_file_when_the_send_ends(tmp_path):
    log = filled_log(tmp_path / "t-0", DescriptorCache(capacity=8), 4)
    region = log.read(0, 10_000)
    expected = region.read()
    with region.descriptor() as descriptor:
        log.close()  # a topic deleted meanwhile
        assert os.pread(descriptor, region.length, region.position) == expected
    assert files_open_under(tmp_path) == []
    with pytest.raises(OSError) as closed:
        region.read()  # never reopened by name: the name may be another file's by now
    assert closed.value.errno == errno.EBADF


def test_retention_of_more_segments_than_the_cache_holds_keeps_only_what_regions_need(tmp_path):
    cache = DescriptorCache(capacity=2)
    log = filled_log(tmp_path / "t-0", cache, 40, retention_bytes=4 * SEGMENT_BYTES, file_delete_delay_ms=60_000)
    region = log.read(0, 10_000)
    expected = region.read()
    for offset in (34, 36, 38):
        value_at(log, offset)  # the first segment's file is closed again
    assert log.segments[0].descriptor_count() == 0
    deleted = log.apply_retention(now_ms=1_000)
    assert len(deleted) == 14 and log.log_start_offset == 28
    # Retired: only the segment a region refers to keeps its file, opened again before it was unlinked.
    assert [path for path in files_open_under(tmp_path) if path.endswith(" (deleted)")] == [
        os.path.join(str(tmp_path / "t-0"), f"{0:020d}.log (deleted)")]
    assert region.read() == expected
    assert [value_at(log, offset) for offset in range(28, 40)] == [b"%06d" % offset for offset in range(28, 40)]
    log.close_retired(now_ms=61_000)
    assert not [path for path in files_open_under(tmp_path) if path.endswith(" (deleted)")]
    with pytest.raises(OSError):
        region.read()
    log.append(batch(40), now_ms=61_000)
    assert value_at(log, 40) == b"000040"
    log.close()


def test_out_of_descriptors_an_open_makes_room_and_tries_again(tmp_path, monkeypatch):
    cache = DescriptorCache(capacity=100)
    log = filled_log(tmp_path / "t-0", cache, 20)
    for offset in range(20):
        value_at(log, offset)  # every segment open
    open_before = cache.open_descriptors
    real_open = os.open
    refusals = []

    def open_once_refused(path, flags, mode=0o777, **kwargs):
        if not refusals:
            refusals.append(path)
            raise OSError(errno.EMFILE, "Too many open files", path)
        return real_open(path, flags, mode, **kwargs)

    log.segments[0].close_descriptors()
    cache.recount(log.segments[0])
    monkeypatch.setattr(os, "open", open_once_refused)
    assert value_at(log, 0) == b"000000"
    assert refusals == [log.segments[0].log_path]
    assert cache.open_descriptors <= open_before // 2 + 1  # half of the idle segments' files went


def test_a_process_under_a_low_descriptor_limit_holds_many_partitions(tmp_path):
    """A real RLIMIT_NOFILE of 64 in a child process: 200 partitions with data, read, flushed, reopened;
    then the descriptors left are taken up by something else and appends still go through, the cache
    making room."""
    child = textwrap.dedent(f"""
        import os, resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        from kbroker.log.config import LogConfig
        from kbroker.log.descriptor_cache import DESCRIPTORS
        from kbroker.log.partition_log import Log
        from kbroker.wire.records import Record, build_batch, decode_records
        assert DESCRIPTORS.fit_to_limit() == 32
        root = {str(tmp_path)!r}

        def batch(value):
            return bytearray(build_batch([Record(value=value)]))

        def open_all():
            return [Log.open(os.path.join(root, f"t-{{index}}"), LogConfig(segment_bytes=200)) for index in range(200)]

        logs = open_all()
        for round in range(3):
            for index, log in enumerate(logs):
                log.append(batch(b"%d-%d" % (index, round)))
        for log in logs:
            log.flush()
        for log in logs:
            log.close()
        logs = open_all()
        for index, log in enumerate(logs):
            assert log.log_end_offset == 3, log
            values = [decode_records(log.read_bytes(offset, 1))[1][0].value for offset in range(3)]
            assert values == [b"%d-%d" % (index, round) for round in range(3)], values
        assert len(os.listdir("/proc/self/fd")) <= 64
        taken = []
        try:
            while True:
                taken.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        for index, log in enumerate(logs):
            log.append(batch(b"more"))
            assert decode_records(log.read_bytes(3, 1))[1][0].value == b"more"
        print("ok", len(taken), DESCRIPTORS.evictions)
    """)
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok ")
