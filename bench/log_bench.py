"""Partition log speed beside plain files on the same filesystem, measured in the same run.

    python bench/log_bench.py [--batch-kib 16] [--nosync-mib 256] [--fsync-appends 400]
                              [--group-appends 3000] [--writers 8] [--segments 1000] [--dir /tmp]

Rows (each the best of ``--rounds`` rounds, log and baseline alternating):
  append, no fsync         Log.append of 16 KiB batches    vs  os.write of the same bytes
                           (and of --large-batch-kib batches, to show the fixed cost per append)
  append, fsync each       Log.append + Log.flush          vs  os.write + os.fdatasync
  group commit, 8 writers  8 trio tasks each appending and  vs  the "fsync each" Log figure
                           awaiting Partition.wait_durable: the broker's group commit
                           (kbroker/replication/flusher.py)
    over a plain file      the same over os.write + os.fdatasync: what the flusher thread
                           and fsyncs allow here, whatever the log does
  sequential read          Log.read + pread/sendfile       vs  pread/sendfile of the raw file
  open 1,000 segments      Log.open at the recovery point  (and a full recovery, for scale)
Targets (issue 3): appends within 80% of raw under the same fsync policy; group
commit with 8 writers at least 4x the per-append-fsync throughput. Reads and
opening have no target; their ratios are for information.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import trio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kbroker.log.config import LogConfig  # noqa: E402
from kbroker.log.partition_log import AppendResult, FlushJob, Log  # noqa: E402
from kbroker.replication.flusher import Flusher  # noqa: E402
from kbroker.replication.replica import Partition  # noqa: E402
from kbroker.wire.records import Record, build_batch  # noqa: E402

MIB = 1024 * 1024
RECORDS_PER_BATCH = 16


class PlainFileLog:
    """Just enough of Log for a Partition over one plain file: os.write, then os.fdatasync."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.log_end_offset = 0
        self.recovery_point = 0

    def append(self, data, **_options) -> AppendResult:
        os.write(self.fd, data)
        self.log_end_offset += RECORDS_PER_BATCH
        return AppendResult(self.log_end_offset - RECORDS_PER_BATCH, self.log_end_offset - 1, -1, -1, -1, 1)

    def begin_flush(self) -> FlushJob:
        return _PlainFlush(self.log_end_offset, self.fd)

    def complete_flush(self, job, now_ms: int | None = None) -> None:
        self.recovery_point = max(self.recovery_point, job.target_offset)

    def close(self) -> None:
        os.close(self.fd)


class _PlainFlush:
    def __init__(self, target_offset: int, fd: int) -> None:
        self.target_offset = target_offset
        self.fd = fd

    def run(self) -> None:
        os.fdatasync(self.fd)


def batch_of(batch_bytes: int) -> bytearray:
    """A v2 batch of about ``batch_bytes`` (16 records), writable so the log can stamp it."""
    value = b"v" * max(1, batch_bytes // RECORDS_PER_BATCH - 24)
    return bytearray(build_batch([Record(offset_delta=i, timestamp_delta=i, value=value) for i in range(RECORDS_PER_BATCH)], base_timestamp=1_700_000_000_000))


class Bench:
    def __init__(self, arguments: argparse.Namespace) -> None:
        self.arguments = arguments
        self.root = tempfile.mkdtemp(prefix="log-bench-", dir=arguments.dir)
        self.batch = batch_of(arguments.batch_kib * 1024)
        self.rows: list[tuple[str, str, str, str, str]] = []
        self.counter = 0

    def fresh(self, name: str) -> str:
        self.counter += 1
        return os.path.join(self.root, f"{name}-{self.counter}")

    def best_pair(self, ours, theirs) -> tuple[float, float]:
        """The highest MB/s of several rounds of each, alternating so both see the same disk and page cache."""
        ours_best = theirs_best = 0.0
        for _ in range(self.arguments.rounds):
            ours_best = max(ours_best, ours())
            theirs_best = max(theirs_best, theirs())
        return ours_best, theirs_best

    # -- appends --------------------------------------------------------------

    def raw_append(self, count: int, sync, data: bytearray | None = None) -> float:
        path = self.fresh("raw")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        data = self.batch if data is None else data
        try:
            started = time.perf_counter()
            for _ in range(count):
                os.write(fd, data)
                if sync is not None:
                    sync(fd)
            elapsed = time.perf_counter() - started
        finally:
            os.close(fd)
            os.unlink(path)
        return count * len(data) / elapsed / 1e6

    def log_append(self, count: int, flush: bool, data: bytearray | None = None) -> float:
        directory = self.fresh("log")
        log = Log.open(directory)
        data = self.batch if data is None else data
        try:
            started = time.perf_counter()
            for _ in range(count):
                log.append(data)
                if flush:
                    log.flush()
            elapsed = time.perf_counter() - started
        finally:
            log.close()
            shutil.rmtree(directory)
        return count * len(data) / elapsed / 1e6

    def group_append(self, count: int, writers: int, plain_file: bool = False) -> tuple[float, float]:
        """(MB/s, appends per fsync) with ``writers`` trio tasks sharing the flusher's fsyncs."""
        directory = self.fresh("group")
        log = PlainFileLog(directory) if plain_file else Log.open(directory)
        per_writer = count // writers
        fsync_rounds = []

        async def run() -> float:
            flusher = Flusher(observe_seconds=fsync_rounds.append)  # one call per round of fsyncs
            partition = Partition("group", 0, log, flusher, node_id=1, replicas=(1,), isr=(1,), leader=1)

            async def write() -> None:
                data = bytearray(self.batch)  # each writer's own buffer: the log stamps it
                for _ in range(per_writer):
                    await partition.wait_durable(partition.append(data).last_offset)

            started = time.perf_counter()
            try:
                async with trio.open_nursery() as nursery:
                    for _ in range(writers):
                        nursery.start_soon(write)
            finally:
                flusher.stop()
            return time.perf_counter() - started

        elapsed = trio.run(run)
        appended = per_writer * writers
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
        if plain_file:
            os.unlink(directory)
        return appended * len(self.batch) / elapsed / 1e6, appended / max(1, len(fsync_rounds))

    # -- reads ----------------------------------------------------------------

    def read_rows(self) -> None:
        arguments = self.arguments
        count = arguments.read_mib * MIB // len(self.batch)
        directory = self.fresh("read-log")
        log = Log.open(directory)
        raw_path = self.fresh("read-raw")
        raw = os.open(raw_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        for _ in range(count):
            log.append(self.batch)
            os.write(raw, self.batch)
        fetch_bytes = arguments.fetch_batches * len(self.batch)  # whole batches per read, as a fetch of that size
        null = os.open(os.devnull, os.O_WRONLY)
        total = count * len(self.batch)

        def through_log(send: bool) -> float:
            offset, moved = 0, 0
            started = time.perf_counter()
            while offset < log.log_end_offset:
                region = log.read(offset, fetch_bytes)
                with region.descriptor() as source:
                    if send:
                        moved += os.sendfile(null, source, region.position, region.length)
                    else:
                        moved += len(os.pread(source, region.length, region.position))
                offset += region.length // len(self.batch) * RECORDS_PER_BATCH
            elapsed = time.perf_counter() - started
            assert moved == total, (moved, total)
            return total / elapsed / 1e6

        def through_file(send: bool) -> float:
            position = 0
            started = time.perf_counter()
            while position < total:
                length = min(fetch_bytes, total - position)
                if send:
                    position += os.sendfile(null, raw, position, length)
                else:
                    position += len(os.pread(raw, length, position))
            elapsed = time.perf_counter() - started
            return total / elapsed / 1e6

        try:
            for send, name in ((False, "sequential read (pread)"), (True, "sequential read (sendfile)")):
                ours, theirs = self.best_pair(lambda: through_log(send), lambda: through_file(send))
                self.add_ratio(name, ours, theirs, None)
        finally:
            os.close(null)
            os.close(raw)
            log.close()
            shutil.rmtree(directory)
            os.unlink(raw_path)

    # -- opening --------------------------------------------------------------

    def open_rows(self) -> None:
        segments = self.arguments.segments
        directory = self.fresh("open")
        config = LogConfig(segment_bytes=1)  # every append after the first rolls
        log = Log.open(directory, config)
        small = batch_of(512)
        started = time.perf_counter()
        for _ in range(segments):
            log.append(small)
        log.flush()
        build_s = time.perf_counter() - started
        recovery_point = log.recovery_point
        assert len(log.segments) == segments, len(log.segments)
        log.close()
        timings = {}
        for name, point in (("at recovery point", recovery_point), ("full recovery", 0)):
            best = float("inf")
            for _ in range(self.arguments.rounds):
                started = time.perf_counter()
                reopened = Log.open(directory, config, recovery_point=point)
                best = min(best, time.perf_counter() - started)
                assert reopened.log_end_offset == recovery_point and len(reopened.segments) == segments
                reopened.close()
            timings[name] = best
        shutil.rmtree(directory)
        lazy, full = timings["at recovery point"], timings["full recovery"]
        self.rows.append(
            (f"open {segments:,} segments", f"{lazy * 1e3:.1f} ms", f"{full * 1e3:.1f} ms full recovery", f"{lazy / full:.2f}x", f"(built in {build_s:.1f} s)")
        )

    # -- the table ------------------------------------------------------------

    def add_ratio(self, name: str, ours: float, theirs: float, target: float | None) -> None:
        ratio = ours / theirs
        goal = "-" if target is None else f">= {target:g}x " + ("met" if ratio >= target else "MISSED")
        self.rows.append((name, f"{ours:,.1f} MB/s", f"{theirs:,.1f} MB/s", f"{ratio:.2f}x", goal))

    def run(self) -> None:
        arguments = self.arguments
        nosync_count = arguments.nosync_mib * MIB // len(self.batch)
        ours, theirs = self.best_pair(lambda: self.log_append(nosync_count, flush=False), lambda: self.raw_append(nosync_count, None))
        self.add_ratio(f"append {arguments.batch_kib} KiB, no fsync", ours, theirs, 0.8)
        large = batch_of(arguments.large_batch_kib * 1024)
        large_count = arguments.nosync_mib * MIB // len(large)
        ours, theirs = self.best_pair(
            lambda: self.log_append(large_count, flush=False, data=large), lambda: self.raw_append(large_count, None, data=large)
        )
        self.add_ratio(f"append {arguments.large_batch_kib} KiB, no fsync", ours, theirs, None)
        fsync_each, theirs = self.best_pair(
            lambda: self.log_append(arguments.fsync_appends, flush=True), lambda: self.raw_append(arguments.fsync_appends, os.fdatasync)
        )
        self.add_ratio(f"append {arguments.batch_kib} KiB, fsync each", fsync_each, theirs, 0.8)
        group = plain = (0.0, 0.0)
        for _ in range(arguments.rounds):
            group = max(group, self.group_append(arguments.group_appends, arguments.writers))
            plain = max(plain, self.group_append(arguments.group_appends, arguments.writers, plain_file=True))
        self.add_ratio(f"group commit, {arguments.writers} writers", group[0], fsync_each, 4)
        self.rows[-1] = self.rows[-1][:2] + (f"{fsync_each:,.1f} MB/s fsync each",) + self.rows[-1][3:]
        self.rows.append(("  appends per fsync", f"{group[1]:.1f}", f"{plain[1]:.1f}", "", ""))
        self.add_ratio("  over a plain file", plain[0], fsync_each, None)
        self.rows[-1] = self.rows[-1][:2] + (f"{fsync_each:,.1f} MB/s fsync each",) + self.rows[-1][3:]
        self.read_rows()
        self.open_rows()

    def print_table(self) -> None:
        header = ("measurement", "log", "baseline", "ratio", "target")
        widths = [max(len(row[i]) for row in [header, *self.rows]) for i in range(len(header))]
        line = "  ".join("{:<%d}" % width for width in widths)
        print(line.format(*header))
        print(line.format(*("-" * width for width in widths)))
        for row in self.rows:
            print(line.format(*row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-kib", type=int, default=16)
    parser.add_argument("--nosync-mib", type=int, default=256, help="bytes appended per no-fsync round")
    parser.add_argument("--large-batch-kib", type=int, default=256)
    parser.add_argument("--fsync-appends", type=int, default=400, help="appends per fsync-each round")
    parser.add_argument("--group-appends", type=int, default=3000, help="appends per group-commit round, all writers")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--read-mib", type=int, default=256)
    parser.add_argument("--fetch-batches", type=int, default=64, help="batches per read (64 x 16 KiB = 1 MiB)")
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary files go")
    arguments = parser.parse_args()
    bench = Bench(arguments)
    started = time.perf_counter()
    try:
        bench.run()
    finally:
        shutil.rmtree(bench.root, ignore_errors=True)
    print(f"log bench in {bench.root} ({time.perf_counter() - started:.1f} s)")
    bench.print_table()


if __name__ == "__main__":
    main()
