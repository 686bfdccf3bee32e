"""GroupCommit: threads share fsyncs, and nobody is acknowledged before its fsync returned."""

import threading
import time

import pytest

from kbroker.log.group_commit import GroupCommit
from kbroker.log.partition_log import FlushJob, Log
from kbroker.wire.records import Record, build_batch, iter_batches

WRITERS = 8
APPENDS_PER_WRITER = 25


def batch(writer: int, number: int, count: int = 2) -> bytearray:
    return bytearray(build_batch([Record(offset_delta=i, value=b"w%d-n%d-r%d" % (writer, number, i)) for i in range(count)]))


class FsyncRecorder:
    """Wraps FlushJob.run: counts fsyncs and remembers which targets were durable when."""

    def __init__(self, monkeypatch, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.guard = threading.Lock()
        self.runs = 0
        self.running = 0
        self.max_running = 0
        self.durable_target = 0  # largest target_offset whose run() has returned
        self.covered_segments: dict[int, set[int]] = {}  # target -> base offsets fsynced for it
        self.fail_next = 0
        original = FlushJob.run
        recorder = self

        def run(job: FlushJob) -> None:
            with recorder.guard:
                recorder.runs += 1
                recorder.running += 1
                recorder.max_running = max(recorder.max_running, recorder.running)
                fail = recorder.fail_next > 0
                recorder.fail_next -= fail
            try:
                if recorder.delay_s:
                    time.sleep(recorder.delay_s)
                if fail:
                    raise OSError(5, "injected fsync failure")
                original(job)
            finally:
                with recorder.guard:
                    recorder.running -= 1
            with recorder.guard:
                recorder.durable_target = max(recorder.durable_target, job.target_offset)
                recorder.covered_segments[job.target_offset] = {segment.base_offset for segment in job.segments}

        monkeypatch.setattr(FlushJob, "run", run)


def run_writers(function, writers: int = WRITERS) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(writers)

    def body(writer: int) -> None:
        try:
            start.wait()
            function(writer)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    threads = [threading.Thread(target=body, args=(writer,)) for writer in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a writer hung"
    return errors


def test_eight_writers_are_acknowledged_only_after_their_fsync_and_share_fsyncs(tmp_path, monkeypatch):
    recorder = FsyncRecorder(monkeypatch, delay_s=0.002)
    log = Log.open(str(tmp_path / "t-0"))
    lock = threading.Lock()
    commit = GroupCommit(log, lock)
    acknowledged: list[tuple[int, int, bytes]] = []  # (first offset, last offset, batch bytes)
    violations: list[str] = []

    def write(writer: int) -> None:
        for number in range(APPENDS_PER_WRITER):
            data = batch(writer, number)
            result = commit.append_durably(data)
            # At acknowledgement the fsync covering the batch has returned.
            recovery_point = log.recovery_point
            durable = recorder.durable_target
            if not (result.last_offset < recovery_point and result.last_offset < durable):
                violations.append(f"offset {result.last_offset} acked at recovery point {recovery_point}, fsynced {durable}")
            with recorder.guard:
                acknowledged.append((result.first_offset, result.last_offset, bytes(data)))

    assert run_writers(write) == []
    assert violations == []
    appends = WRITERS * APPENDS_PER_WRITER
    assert len(acknowledged) == appends
    assert recorder.runs == commit.fsync_count
    # Writers released by one fsync are gathered into the next rather than split into two cohorts.
    assert 1 <= recorder.runs <= appends // 2
    assert recorder.max_running == 1  # one fsync at a time
    # Offsets are contiguous and every acknowledged batch is in the log as appended.
    acknowledged.sort()
    assert [first for first, _, _ in acknowledged] == list(range(0, 2 * appends, 2))
    assert log.read_bytes(0, 10**9) == b"".join(data for _, _, data in acknowledged)
    assert log.recovery_point == log.log_end_offset == 2 * appends
    log.close()


def test_writers_released_by_an_fsync_are_gathered_into_the_next(tmp_path, monkeypatch):
    from kbroker.log import group_commit

    monkeypatch.setattr(group_commit, "GATHER_S_MAX", 0.05)  # ample, so a loaded machine cannot split groups
    recorder = FsyncRecorder(monkeypatch, delay_s=0.005)
    partition = Log.open(str(tmp_path / "t-0"))
    commit = GroupCommit(partition, threading.Lock())
    rounds = 10

    def write(writer: int) -> None:
        for number in range(rounds):
            commit.append_durably(batch(writer, number))

    assert run_writers(write, writers=4) == []
    # Without gathering the writers alternate in two cohorts of two; with it, one of four.
    assert recorder.runs <= rounds + 2
    partition.close()


def test_a_flusher_waits_only_briefly_for_writers_that_do_not_come_back(tmp_path):
    from kbroker.log import group_commit

    partition = Log.open(str(tmp_path / "t-0"))
    lock = threading.Lock()
    commit = GroupCommit(partition, lock)
    assert run_writers(lambda writer: commit.append_durably(batch(writer, 0)), writers=4) == []
    with lock:
        result = partition.append(batch(9, 0))
    started = time.monotonic()
    commit.wait_durable(result.last_offset)
    assert time.monotonic() - started < group_commit.GATHER_S_MAX + 0.2
    assert partition.recovery_point == partition.log_end_offset
    partition.close()


def test_fsyncs_cover_the_segment_of_every_acknowledged_batch_across_rolls(tmp_path, monkeypatch):
    from kbroker.log.config import LogConfig

    recorder = FsyncRecorder(monkeypatch, delay_s=0.001)
    log = Log.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=600))
    commit = GroupCommit(log, threading.Lock())
    missing: list[int] = []

    def write(writer: int) -> None:
        for number in range(10):
            result = commit.append_durably(batch(writer, number, count=3))
            base = max(b for b in (s.base_offset for s in list(log.segments)) if b <= result.last_offset)
            with recorder.guard:
                if not any(target > result.last_offset and base in bases for target, bases in recorder.covered_segments.items()):
                    missing.append(result.last_offset)

    assert run_writers(write, writers=4) == []
    assert len(log.segments) > 5
    assert missing == []
    assert log.recovery_point == log.log_end_offset == 4 * 10 * 3
    log.close()


def test_appends_go_on_while_an_fsync_runs_and_the_next_fsync_covers_them(tmp_path, monkeypatch):
    log = Log.open(str(tmp_path / "t-0"))
    lock = threading.Lock()
    commit = GroupCommit(log, lock)
    in_fsync, release = threading.Event(), threading.Event()
    original = FlushJob.run
    targets = []

    def slow_run(job):
        targets.append(job.target_offset)
        if len(targets) == 1:
            in_fsync.set()
            assert release.wait(10)
        original(job)

    monkeypatch.setattr(FlushJob, "run", slow_run)
    results = {}
    first = threading.Thread(target=lambda: results.setdefault("first", commit.append_durably(batch(0, 0))))
    first.start()
    assert in_fsync.wait(10)
    # The lock is free while the fsync runs: a second writer appends now and waits.
    second = threading.Thread(target=lambda: results.setdefault("second", commit.append_durably(batch(1, 0))))
    second.start()
    deadline = time.monotonic() + 10
    while log.log_end_offset < 4 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert log.log_end_offset == 4
    assert log.recovery_point == 0 and "second" not in results
    release.set()
    first.join(10)
    second.join(10)
    assert results["first"].last_offset == 1 and results["second"].last_offset == 3
    # The first job was taken before the second append; a second fsync covered it.
    assert targets == [2, 4]
    assert log.recovery_point == 4
    log.close()


def test_a_failed_fsync_reaches_its_flusher_and_a_waiter_retries(tmp_path, monkeypatch):
    recorder = FsyncRecorder(monkeypatch, delay_s=0.005)
    recorder.fail_next = 1
    log = Log.open(str(tmp_path / "t-0"))
    commit = GroupCommit(log, threading.Lock())
    acked = []

    def write(writer: int) -> None:
        result = commit.append_durably(batch(writer, 0))
        acked.append(result.last_offset)
        assert result.last_offset < log.recovery_point

    errors = run_writers(write, writers=4)
    assert len(errors) == 1 and isinstance(errors[0], OSError)
    # The failed job did not advance the recovery point; a later one covered everyone else.
    assert len(acked) == 3
    assert log.recovery_point == log.log_end_offset == 8
    assert commit.fsync_count == recorder.runs - 1
    log.close()


def test_single_writer_fsyncs_once_per_append(tmp_path, monkeypatch):
    recorder = FsyncRecorder(monkeypatch)
    log = Log.open(str(tmp_path / "t-0"))
    commit = GroupCommit(log, threading.Lock())
    for number in range(5):
        result = commit.append_durably(batch(0, number))
        assert log.recovery_point == result.last_offset + 1
    assert recorder.runs == commit.fsync_count == 5
    log.close()


def test_wait_durable_after_an_append_made_under_the_callers_lock(tmp_path, monkeypatch):
    recorder = FsyncRecorder(monkeypatch)
    log = Log.open(str(tmp_path / "t-0"))
    lock = threading.Lock()
    commit = GroupCommit(log, lock)
    with lock:
        first = log.append(batch(0, 0))
        second = log.append(batch(0, 1))
    assert log.recovery_point == 0
    commit.wait_durable(first.last_offset)
    assert log.recovery_point == 4  # one fsync covered both
    commit.wait_durable(second.last_offset)
    assert recorder.runs == 1
    log.close()


def test_an_already_durable_duplicate_needs_no_fsync(tmp_path, monkeypatch):
    recorder = FsyncRecorder(monkeypatch)
    log = Log.open(str(tmp_path / "t-0"))
    commit = GroupCommit(log, threading.Lock())

    def idempotent():
        return bytearray(build_batch([Record(value=b"x")], producer_id=5, producer_epoch=0, base_sequence=0))

    first = commit.append_durably(idempotent())
    retry = commit.append_durably(idempotent())
    assert retry.duplicate and retry.last_offset == first.last_offset == 0
    assert recorder.runs == 1
    log.close()


def test_group_commit_data_survives_reopen(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log.open(directory)
    commit = GroupCommit(log, threading.Lock())
    written = {}

    def write(writer: int) -> None:
        for number in range(5):
            data = batch(writer, number)
            result = commit.append_durably(data)
            written[result.first_offset] = bytes(data)

    assert run_writers(write, writers=4) == []
    recovery_point = log.recovery_point
    log.close()
    reopened = Log.open(directory, recovery_point=recovery_point)
    data = reopened.read_bytes(0, 10**9)
    assert data == b"".join(written[offset] for offset in sorted(written))
    assert [header.base_offset for _, header in iter_batches(data)] == sorted(written)
    reopened.close()


@pytest.fixture(autouse=True)
def _no_stray_threads():
    """No thread a test started outlives it (threads of earlier tests may end meanwhile)."""
    before = set(threading.enumerate())
    yield
    assert set(threading.enumerate()) - before == set()
