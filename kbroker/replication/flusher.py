"""One thread that runs the broker's fsyncs, many at a time, and reports back to trio.

Handing each fsync to a fresh ``trio.to_thread`` call costs a thread wake-up
and a GIL hand-over per partition per flush; under a steady load of small
acks=all produces that was a third of the event loop's time. Here every
flush job queued while the thread was busy is run in one go, and one call
back into trio delivers all their results.

When many partitions wait at once (a producer writing to hundreds of them),
one ``syncfs`` of their filesystem replaces their fsyncs: it makes every
file, index and directory entry on it durable in a single journal commit,
where separate fsyncs would each pay for one.

The broker starts a flush after every append (the high watermark waits for
it), so Kafka's flush policy rarely finds anything left to do; it still holds
where it is stricter: ``flush.messages`` unflushed messages start an fsync as
they are appended (kbroker/replication/replica.py), and :func:`flush_dirty_logs`
flushes data older than ``flush.ms``, looking every
``log.flush.scheduler.interval.ms`` (Kafka's LogManager.flushDirtyLogs).

A job that fails is reported, never run again here: whether a failed fsync may be followed by another
is the partition's to decide, and it decides no (kbroker/replication/replica.py, fsyncgate).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import trio

from kbroker.log.partition_log import WriteBeforeFsyncFailed

logger = logging.getLogger("kbroker.replication.flusher")

Done = Callable[[object, BaseException | None], None]  # (job, error), called in the trio thread
SYNCFS_MIN_JOBS = 16  # from this many waiting flush jobs, one syncfs instead of their fsyncs

# Test-only: names a file (relative to the data directory) whose existence fails every fsync with EIO.
FAIL_FSYNC_ENV = "KBTEST_FSYNC_FAILS_IF"

_WRITERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kbroker-flush-writes")  # threads made on demand
_libc = ctypes.CDLL(None, use_errno=True)
_syncfs = getattr(_libc, "syncfs", None)  # Linux only; elsewhere every job runs its own fsyncs


def injected_failure(data_dir: str) -> str | None:
    """The file whose existence makes the flusher's fsyncs fail, where the environment names one
    (``KBTEST_FSYNC_FAILS_IF``, for the tests: compat_tests/test_fsync_failure.py), else None."""
    name = os.environ.get(FAIL_FSYNC_ENV)
    return os.path.join(data_dir, name) if name else None


class Flusher:
    def __init__(self, observe_seconds: Callable[[float], None] | None = None, *,
                 fails_if: str | None = None) -> None:
        """``observe_seconds`` (thread-safe) is told how long each round of fsyncs took (metrics).
        ``fails_if`` (tests only, :func:`injected_failure`): while that file exists, every fsync fails."""
        self._observe_seconds = observe_seconds
        self._fails_if = fails_if
        self._token = trio.lowlevel.current_trio_token()
        # (job, done) pairs, and None to stop: a C-level queue, so a submit costs no Python lock and a wake-up
        # of a waiting thread, and the thread takes every pair queued while it was busy in one round.
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="kbroker-flusher", daemon=True)
        self._thread.start()

    def submit(self, job, done: Done) -> None:
        """Run ``job.run()`` on the flusher thread; ``done(job, error)`` follows in the trio thread."""
        self._queue.put((job, done))

    def stop(self) -> None:
        """Finish what was submitted, then end the thread (its results are dropped once trio has gone)."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            if None in batch:  # what came before the stop is still run
                stopping = True
                batch = [item for item in batch if item is not None]
                if not batch:
                    return
            started = time.perf_counter()
            try:
                if self._fails_if is not None and os.path.exists(self._fails_if):
                    logger.error("fsync failed: injected (%s exists)", self._fails_if)
                    results = [(job, done, OSError(errno.EIO, "Input/output error (injected)")) for job, done in batch]
                elif len(batch) >= SYNCFS_MIN_JOBS and _syncfs is not None:
                    results = _sync_filesystems(batch)
                else:
                    results = [(job, done, _run_job(job)) for job, done in batch]
            except Exception:  # never strand the waiters: each job on its own, errors to its waiters
                logger.exception("flushing %d jobs together failed; flushing them one by one", len(batch))
                results = [(job, done, _run_job(job)) for job, done in batch]
            if self._observe_seconds is not None:
                self._observe_seconds(time.perf_counter() - started)
            try:
                self._token.run_sync_soon(_deliver, results)
            except trio.RunFinishedError:
                return


async def flush_dirty_logs(replicas: Callable[[], list], interval_ms: int) -> None:
    """Every ``interval_ms``, each partition whose unflushed data is older than its ``flush.ms`` starts an fsync."""
    while True:
        await trio.sleep(interval_ms / 1000)
        for partition in replicas():
            partition.flush_if_due()


def _run_job(job) -> BaseException | None:
    try:
        job.run()
    except WriteBeforeFsyncFailed as error:  # a full disk, say: no fsync ran, the next flush writes again
        logger.warning("flush not run: %s", error)
        return error
    except BaseException as error:  # an fsync failure is the waiters' to report
        logger.error("fsync failed: %s", error)
        return error
    return None


def _sync_filesystems(batch) -> list:
    """Make every job's data durable with one syncfs per filesystem they are on, after every job's
    first writes (Log.defer_write: new partitions' checkpoints), which the syncfs then covers. Those
    writes go to a few threads at once: each creates a file, and on a VM disk a creation waited
    0.04-2 ms on the journal, so 2,000 new partitions' checkpoints one after another held the acks of
    all of them for seconds."""
    synced: dict[int, BaseException | None] = {}  # filesystem (st_dev) -> its syncfs error
    results, written = [], []
    jobs = [job for job, _ in batch]
    # Threads only when several jobs write: most batches write nothing and only need their filesystem.
    run = _WRITERS.map if sum(bool(job.writes) for job in jobs) > 1 else map
    for (job, done), outcome in zip(batch, run(_write_first, jobs)):
        if isinstance(outcome, BaseException):  # a full disk, or the partition went away meanwhile
            results.append((job, done, outcome))
        else:
            written.append((job, done, outcome))
    for job, done, device in written:
        if device not in synced:
            synced[device] = _syncfs_of(job.segments[0].directory)
        results.append((job, done, synced[device]))
    return results


def _write_first(job) -> int | OSError:
    """A job's first writes; the filesystem its partition is on, or the error."""
    try:
        job.write_first()
        return os.stat(job.segments[0].directory).st_dev
    except OSError as error:
        return error


def _syncfs_of(directory: str) -> BaseException | None:
    """The error of one syncfs of ``directory``'s filesystem, or None. Returned, never raised: the jobs
    whose syncfs failed must not fall back to their own fsyncs (a retry after a failed sync; see
    kbroker/replication/replica.py), so an open that fails is their error too."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError as error:
        return error
    try:
        if _syncfs(descriptor) != 0:
            error = OSError(ctypes.get_errno(), f"syncfs of {directory}: {os.strerror(ctypes.get_errno())}")
            logger.error("%s", error)
            return error
    finally:
        os.close(descriptor)
    return None


def _deliver(results) -> None:
    for job, done, error in results:
        done(job, error)
