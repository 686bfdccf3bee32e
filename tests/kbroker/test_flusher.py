"""The flusher thread: jobs run off the event loop, in batches, results back in trio; fsync errors reach the waiters."""

import threading

import pytest
import trio

from kbroker.replication.flusher import Flusher
from kbroker.log.offline import LogDirOffline
from kbroker.replication.replica import Partition
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from kbroker.wire.records import Record, build_batch

pytestmark = pytest.mark.trio


class Job:
    def __init__(self, gate: threading.Event | None = None, error: Exception | None = None):
        self.gate, self.error, self.thread = gate, error, None
        self.started = threading.Event()

    def run(self):
        self.thread = threading.current_thread().name
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.error is not None:
            raise self.error


async def test_jobs_run_on_the_flusher_thread_and_report_in_trio():
    flusher = Flusher()
    gate = threading.Event()
    reports = []
    done = trio.Event()

    def report(job, error):
        reports.append((job, error, threading.current_thread() is threading.main_thread()))
        if len(reports) == 4:
            done.set()

    first = Job(gate)
    flusher.submit(first, report)
    queued = [Job() for _ in range(3)]  # submitted while the first blocks: run as one batch after it
    for job in queued:
        flusher.submit(job, report)
    gate.set()
    with trio.fail_after(10):
        await done.wait()
    flusher.stop()
    assert [job for job, _, _ in reports] == [first, *queued]
    assert all(error is None and in_trio for _, error, in_trio in reports)
    assert {job.thread for job in [first, *queued]} == {"kbroker-flusher"}


async def test_an_fsync_error_reaches_every_waiter_and_is_never_retried(tmp_path):
    """fsyncgate: after a failed fsync the kernel may have dropped the dirty pages, so a second fsync
    could succeed over data that is gone. The partition goes offline instead: no fsync runs again,
    every waiter (now and later) gets LogDirOffline, nothing is appended, the broker is told once."""
    flusher = Flusher()
    failures = []
    log = Log.open(str(tmp_path / "p-0"), LogConfig())
    partition = Partition("p", 0, log, flusher, on_storage_failure=failures.append)
    log.append(bytearray(build_batch([Record(value=b"v")])))
    failing = OSError(5, "Input/output error")
    real_begin = log.begin_flush
    runs = []

    def fail():
        runs.append(1)
        raise failing

    def broken_job():
        job = real_begin()
        job.run = fail
        return job

    log.begin_flush = broken_job
    async with trio.open_nursery() as nursery:
        raised = []

        async def wait():
            with pytest.raises(LogDirOffline) as caught:
                await partition.wait_durable(0)
            raised.append(caught.value)

        with trio.fail_after(10):
            for _ in range(3):
                nursery.start_soon(wait)
    assert len(raised) == 3 and all(error.cause is failing for error in raised)
    assert partition.high_watermark == 0  # nothing acknowledged
    log.begin_flush = real_begin  # the disk "works" again: still no fsync, the pages may be gone
    with trio.fail_after(10), pytest.raises(LogDirOffline):
        await partition.wait_durable(0)
    partition.start_flush(0)
    with pytest.raises(LogDirOffline):
        partition.append(bytearray(build_batch([Record(value=b"w")])))
    assert runs == [1] and len(failures) == 1 and isinstance(failures[0], LogDirOffline)
    assert partition.high_watermark == 0 and log.recovery_point == 0
    flusher.stop()
    log.close()


async def test_many_waiting_partitions_share_one_syncfs(tmp_path, monkeypatch):
    import kbroker.replication.flusher as flusher_module

    calls = []
    real = flusher_module._syncfs
    monkeypatch.setattr(flusher_module, "_syncfs", lambda fd: calls.append(fd) or real(fd))
    flusher = Flusher()
    logs = [Log.open(str(tmp_path / f"many-{i}"), LogConfig()) for i in range(40)]
    partitions = [Partition("many", i, log, flusher) for i, log in enumerate(logs)]
    await _first_records_flushed_together(flusher, logs, partitions)
    assert len(calls) == 1
    assert all(partition.high_watermark == 1 for partition in partitions)
    flusher.stop()
    for log in logs:
        log.close()


async def test_a_flush_asked_for_during_one_under_way_follows_it_unasked(tmp_path):
    """acks=0/1 produces only ask for a flush; one appended while an fsync runs is still made durable (consumers see it)."""
    flusher = Flusher()
    log = Log.open(str(tmp_path / "p-0"), LogConfig())
    partition = Partition("p", 0, log, flusher)
    gate = threading.Event()
    holder = Job(gate)
    flusher.submit(holder, lambda job, error: None)  # hold the flusher thread
    assert holder.started.wait(10)
    log.append(bytearray(build_batch([Record(value=b"first")])))
    partition.start_flush(0)
    log.append(bytearray(build_batch([Record(value=b"second")])))
    partition.start_flush(1)  # the flush for offset 0 is queued already: this one must follow it
    gate.set()
    with trio.fail_after(10):
        while partition.high_watermark < 2:
            await partition.advanced().wait()
    flusher.stop()
    log.close()


async def test_a_job_that_breaks_the_batch_path_still_reports_to_its_waiters():
    """Whatever goes wrong on the flusher thread, every waiter hears back (an error or success), none hangs."""
    import kbroker.replication.flusher as flusher_module

    flusher = Flusher()
    gate = threading.Event()
    holder = Job(gate)
    reports = []
    done = trio.Event()

    def report(job, error):
        reports.append((job, error))
        if len(reports) == flusher_module.SYNCFS_MIN_JOBS + 1:
            done.set()

    flusher.submit(holder, report)
    assert holder.started.wait(10)
    odd = [Job() for _ in range(flusher_module.SYNCFS_MIN_JOBS)]  # no segments: the syncfs path cannot take them
    for job in odd:
        flusher.submit(job, report)
    gate.set()
    with trio.fail_after(10):
        await done.wait()
    flusher.stop()
    assert [job for job, _ in reports] == [holder, *odd] and all(error is None for _, error in reports)


async def test_the_injected_failure_fails_every_fsync_while_its_file_exists(tmp_path):
    """KBTEST_FSYNC_FAILS_IF's file (kbroker/replication/flusher.py): present, jobs report EIO unrun."""
    failing = tmp_path / "fsync-fails"
    flusher = Flusher(fails_if=str(failing))
    reports = []
    done = trio.Event()

    def report(job, error):
        reports.append((job, error))
        if len(reports) == 2:
            done.set()

    unrun, run = Job(), Job()
    failing.touch()
    flusher.submit(unrun, report)
    with trio.fail_after(10):
        while not reports:
            await trio.sleep(0.01)
    failing.unlink()
    flusher.submit(run, report)
    with trio.fail_after(10):
        await done.wait()
    flusher.stop()
    assert reports[0][0] is unrun and reports[0][1].errno == 5 and unrun.thread is None
    assert reports[1] == (run, None) and run.thread == "kbroker-flusher"


async def test_files_a_flush_writes_first_are_written_on_the_syncfs_path_too(tmp_path):
    """A new partition's partition.metadata is written by its first flush (Log.defer_write); with many
    partitions flushed together by one syncfs (2,000 partitions' first records) each is still written."""
    import uuid

    from kbroker.log.manager import LogManager

    flusher = Flusher()
    manager = LogManager(str(tmp_path))
    topic_id = uuid.uuid4()
    logs = [manager.open("first", i, LogConfig(), topic_id, defer_directory=True) for i in range(40)]
    partitions = [Partition("first", i, log, flusher) for i, log in enumerate(logs)]
    await _first_records_flushed_together(flusher, logs, partitions)
    assert all((tmp_path / f"first-{i}" / "partition.metadata").exists() for i in range(40))
    flusher.stop()
    manager.close()
    assert LogManager(str(tmp_path)).open("first", 7, LogConfig()).topic_id == topic_id


async def _first_records_flushed_together(flusher, logs, partitions, leader_epoch: int | None = None) -> None:
    """Each log gets a record while the flusher's thread is held, so that all their flushes queue up and
    go in one batch (the syncfs path); returns once every partition's record is durable."""
    gate = threading.Event()
    holder = Job(gate)
    flusher.submit(holder, lambda job, error: None)  # holds the thread while the flushes queue up
    assert holder.started.wait(10)
    for log in logs:
        log.append(bytearray(build_batch([Record(value=b"v")])), leader_epoch=leader_epoch)
    async with trio.open_nursery() as nursery:
        for partition in partitions:
            nursery.start_soon(partition.wait_durable, 0)
        await trio.sleep(0.05)
        gate.set()


async def test_every_first_write_comes_before_the_one_syncfs_that_covers_it(tmp_path, monkeypatch):
    """New partitions' leader-epoch checkpoints are their first flush's to write (LeaderEpochCache.write_later),
    in a few threads at once: on the syncfs path all of them are on disk before the syncfs."""
    import kbroker.replication.flusher as flusher_module
    from kbroker.log.manager import LogManager

    checkpoints_at_syncfs = []
    real = flusher_module._syncfs
    monkeypatch.setattr(flusher_module, "_syncfs", lambda fd: checkpoints_at_syncfs.append(
        sum((tmp_path / f"epochs-{i}" / "leader-epoch-checkpoint").exists() for i in range(40))) or real(fd))
    flusher = Flusher()
    manager = LogManager(str(tmp_path))
    logs = [manager.open("epochs", i, LogConfig(), defer_directory=True) for i in range(40)]
    partitions = [Partition("epochs", i, log, flusher, leader_epoch=6) for i, log in enumerate(logs)]
    await _first_records_flushed_together(flusher, logs, partitions, leader_epoch=6)
    assert checkpoints_at_syncfs == [40]
    assert all(log.leader_epochs.checkpoint_file.read() == log.leader_epochs.entries != [] for log in logs)
    flusher.stop()
    manager.close()


async def test_a_first_write_failing_for_space_is_no_fsync_failure(tmp_path):
    """A checkpoint the flush could not write (a full disk): its waiters hear the error, the partition stays
    online, and the next flush writes the checkpoint and makes the record durable."""
    import errno

    from kbroker.log.manager import LogManager
    from kbroker.log.partition_log import WriteBeforeFsyncFailed

    flusher = Flusher()
    manager = LogManager(str(tmp_path))
    log = manager.open("full", 0, LogConfig())
    partition = Partition("full", 0, log, flusher, leader_epoch=2)
    full = [True]
    real_write = log.leader_epochs.checkpoint_file.write

    def write(*arguments):
        if full[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(*arguments)

    log.leader_epochs.checkpoint_file.write = write
    partition.append(bytearray(build_batch([Record(value=b"v")])))
    with trio.fail_after(10), pytest.raises(WriteBeforeFsyncFailed):
        await partition.wait_durable(0)
    assert partition.offline is None and log.recovery_point == 0
    full[0] = False
    with trio.fail_after(10):
        await partition.wait_durable(0)
    assert log.recovery_point == 1 and [entry.epoch for entry in log.leader_epochs.checkpoint_file.read()] == [2]
    flusher.stop()
    manager.close()
