"""Crash consistency with real processes: SIGKILL a writer, reopen, check what was acknowledged.

Each iteration starts ``tests/log/crash_writer.py`` with its own seed, segment
size and mode, reads the offsets it acknowledges (each only after its fsync
returned), kills it with SIGKILL at a seeded moment and reopens the log
three ways: recovering everything (recovery point 0); from the recovery point
the writer last checkpointed; and, on a copy, after tearing a batch beyond
the last fsync while keeping later segments (what a power cut may leave; a
SIGKILL tears a write only now and then). Each must hold every acknowledged
batch byte for byte, as a gap-free prefix of what the writer produced, with
nothing after a torn batch and no bytes after the last whole one; and appends
go on.

``KBTEST_CRASH_ITERATIONS`` (default 30) sets the number of kills,
``KBTEST_CRASH_SEED`` the base seed; a failure names the iteration's seed.
"""

from __future__ import annotations

import os
import random
import selectors
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from kbroker.log.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from tests.log.crash_writer import TOPIC_PARTITION, batch_for, partition_directory, record_count
from kbroker.wire.records import iter_batches, stamp_base_offset

ITERATIONS = int(os.environ.get("KBTEST_CRASH_ITERATIONS", "30"))
BASE_SEED = int(os.environ.get("KBTEST_CRASH_SEED", "3141"))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ACK_WAIT_S = 20.0
_NEWLINE = b"\n"
_SEGMENT_BYTES_CHOICES = (4096, 16 * 1024, 64 * 1024, 150 * 1024, 1024 * 1024)


@dataclass
class Scenario:
    seed: int
    segment_bytes: int
    mode: str
    threads: int
    acks_before_kill: int
    delay_s: float

    @classmethod
    def for_iteration(cls, iteration: int) -> Scenario:
        rng = random.Random(BASE_SEED * 100_003 + iteration)
        return cls(
            seed=rng.randrange(2**31),
            segment_bytes=rng.choice(_SEGMENT_BYTES_CHOICES),
            mode=rng.choice(("flush", "burst", "group")),
            threads=rng.randint(2, 6),
            acks_before_kill=rng.choice((0, rng.randint(1, 10), rng.randint(10, 60))),
            delay_s=rng.uniform(0, 0.03),
        )


class Expected:
    """Every byte the writer produces for one seed: batch ``n`` stamped at its offset."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._offsets = [0]  # _offsets[n]: base offset of batch n

    def offset_of(self, number: int) -> int:
        while len(self._offsets) <= number:
            self._offsets.append(self._offsets[-1] + record_count(self.seed, len(self._offsets) - 1))
        return self._offsets[number]

    def batch(self, number: int) -> bytes:
        data = bytearray(batch_for(self.seed, number))
        stamp_base_offset(data, 0, self.offset_of(number))
        return bytes(data)

    def batch_ends(self, total_bytes: int) -> list[int]:
        """Byte positions in the whole stream where batches end, up to ``total_bytes``."""
        ends, position, number = [], 0, 0
        while position < total_bytes:
            position += len(batch_for(self.seed, number))
            ends.append(position)
            number += 1
        return ends


@dataclass
class Killed:
    acknowledged: dict[int, int]  # batch number -> last offset, as the writer reported
    checkpointed_recovery_point: int | None
    log_bytes_on_disk: int


def run_and_kill(scenario: Scenario, log_dir: str) -> Killed:
    stderr_path = os.path.join(os.path.dirname(log_dir), "writer.stderr")
    with open(stderr_path, "wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.log.crash_writer", log_dir, str(scenario.seed), str(scenario.segment_bytes), scenario.mode, str(scenario.threads)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    output = bytearray()
    try:
        _read_acks(child, output, scenario.acks_before_kill)
        time.sleep(scenario.delay_s)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)  # only the child started above
        child.wait(timeout=30)
        output += child.stdout.read()
        child.stdout.close()
    with open(stderr_path, "rb") as stderr:
        errors = stderr.read().decode(errors="replace")
    assert child.returncode == -signal.SIGKILL, f"the writer ended by itself ({child.returncode}):\n{errors}"
    acknowledged = {}
    for line in bytes(output).split(b"\n")[:-1]:  # a line counts only once its newline is out
        number, last_offset = map(int, line.split())
        acknowledged[number] = last_offset
    checkpoint = OffsetCheckpointFile(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT)).read().get(TOPIC_PARTITION)
    directory = partition_directory(log_dir)
    on_disk = 0
    if os.path.isdir(directory):
        on_disk = sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory) if name.endswith(".log"))
    return Killed(acknowledged, checkpoint, on_disk)


def _read_acks(child: subprocess.Popen, output: bytearray, wanted: int) -> None:
    deadline = time.monotonic() + _ACK_WAIT_S
    fd = child.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while output.count(b"\n") < wanted:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"the writer acknowledged {output.count(_NEWLINE)} of {wanted} batches in {_ACK_WAIT_S} s"
            if not selector.select(remaining):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return  # the writer died; the caller reports it
            output += chunk


def read_everything(log: Log) -> bytes:
    """The whole log through file regions, segment by segment."""
    data = bytearray()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, 1 << 30)
        assert region is not None, f"nothing readable at {offset} below the end {log.log_end_offset}"
        chunk = region.read()
        assert len(chunk) == region.length
        *_, (position, last) = iter_batches(chunk)
        data += chunk
        offset = last.next_offset
    return bytes(data)


def check_recovered(log: Log, expected: Expected, killed: Killed, rng: random.Random, where: str) -> int:
    """Check the reopened log against what the writer wrote; returns the number of whole batches."""
    data = read_everything(log)
    whole = 0
    position = 0
    for position, header in iter_batches(data):  # raises on a partial batch
        wanted = expected.batch(whole)
        assert data[position : position + len(wanted)] == wanted, f"{where}: batch {whole} differs from what was written"
        whole += 1
    assert sum(len(expected.batch(n)) for n in range(whole)) == len(data), f"{where}: bytes beyond the last batch"
    acknowledged_max = max(killed.acknowledged, default=-1)
    assert whole > acknowledged_max, f"{where}: acknowledged batch {acknowledged_max} lost, log holds {whole} batches"
    for number, last_offset in killed.acknowledged.items():
        assert last_offset == expected.offset_of(number + 1) - 1, f"{where}: batch {number} was acked at a wrong offset"
    assert log.log_start_offset == 0
    assert log.log_end_offset == expected.offset_of(whole), f"{where}: offsets are not contiguous"
    if killed.checkpointed_recovery_point is not None:
        assert killed.checkpointed_recovery_point <= log.log_end_offset, f"{where}: data below the checkpoint lost"
    # On disk: exactly the segments the log knows, holding exactly its batches.
    directory = log.directory
    log_files = sorted(name for name in os.listdir(directory) if name.endswith(".log"))
    known = [segment.base_offset for segment in log.segments]
    if whole == 0 and not log_files:
        known = []  # an empty new log's segment file appears with its first batch
    assert [int(name.split(".")[0]) for name in log_files] == known
    assert sum(os.path.getsize(os.path.join(directory, name)) for name in log_files) == len(data), f"{where}: bytes on disk beyond the last batch"
    # Reads by offset land on the batch holding it, through the (rebuilt) indexes.
    for offset in rng.sample(range(log.log_end_offset), min(20, log.log_end_offset)):
        region = log.read(offset, 1)
        (_, header), *_ = iter_batches(region.read())
        assert header.base_offset <= offset <= header.last_offset, f"{where}: read({offset}) found batch at {header.base_offset}"
    return whole


def tear_unflushed_tail(directory: str, expected: Expected, killed: Killed, rng: random.Random) -> int | None:
    """Cut one segment inside a batch beyond everything fsynced, keeping later segments.

    What a power cut may leave of writes no fsync covered: any page lost,
    in any order, so a later segment can outlive a torn earlier one.
    Returns the number of whole batches before the cut, or None when
    nothing unflushed was on disk.
    """
    names = sorted(name for name in os.listdir(directory) if name.endswith(".log"))
    sizes = [os.path.getsize(os.path.join(directory, name)) for name in names]
    total = sum(sizes)
    ends = expected.batch_ends(total)
    durable_batches = max(killed.acknowledged, default=-1) + 1
    if killed.checkpointed_recovery_point is not None:
        while expected.offset_of(durable_batches) < killed.checkpointed_recovery_point:
            durable_batches += 1
    durable_bytes = ends[durable_batches - 1] if durable_batches else 0
    if durable_bytes + 1 >= total:
        return None
    cut = rng.randrange(durable_bytes + 1, total)
    if cut in ends:
        cut -= 1  # strictly inside a batch, so the cut always tears one
    start = 0
    for name, size in zip(names, sizes):
        if start <= cut < start + size:
            os.truncate(os.path.join(directory, name), cut - start)
            break
        start += size
    return sum(1 for end in ends if end <= cut)


def reopen_and_check(directory: str, scenario: Scenario, killed: Killed, recovery_point: int, where: str) -> int:
    expected = Expected(scenario.seed)
    rng = random.Random(scenario.seed)
    config = LogConfig(segment_bytes=scenario.segment_bytes)
    log = Log.open(directory, config, recovery_point=recovery_point)
    try:
        whole = check_recovered(log, expected, killed, rng, where)
        # Appends go on where the writer would have gone on.
        result = log.append(bytearray(batch_for(scenario.seed, whole)))
        assert result.first_offset == expected.offset_of(whole)
        log.flush()
    finally:
        log.close()
    log = Log.open(directory, config, recovery_point=0)
    try:
        assert read_everything(log) == b"".join(expected.batch(n) for n in range(whole + 1)), f"{where}: the append after recovery"
    finally:
        log.close()
    return whole


_SUMMARY: list[tuple[int, int, int, int, bool]] = []  # (acknowledged, whole batches, bytes cut, segments, tail torn by the test)


@pytest.fixture(scope="module", autouse=True)
def _summary():
    yield
    if _SUMMARY:
        print(
            f"\ncrash: {len(_SUMMARY)} kills, {sum(row[0] for row in _SUMMARY)} batches acknowledged, "
            f"{sum(row[1] for row in _SUMMARY)} recovered, {sum(1 for row in _SUMMARY if row[2])} with a torn tail cut off, "
            f"{sum(1 for row in _SUMMARY if row[4])} more torn after the kill, up to {max(row[3] for row in _SUMMARY)} segments"
        )


@pytest.mark.parametrize("iteration", range(ITERATIONS))
def test_acknowledged_batches_survive_sigkill(iteration, tmp_path):
    scenario = Scenario.for_iteration(iteration)
    log_dir = str(tmp_path / "logs")
    killed = run_and_kill(scenario, log_dir)
    directory = partition_directory(log_dir)
    copies = {name: str(tmp_path / name / os.path.basename(directory)) for name in ("checkpointed", "torn")}
    if os.path.isdir(directory):
        for copy in copies.values():
            shutil.copytree(directory, copy)
    # As the kill left it, recovering every segment.
    whole = reopen_and_check(directory, scenario, killed, 0, f"{scenario} from 0")
    expected = Expected(scenario.seed)
    intact_bytes = sum(len(expected.batch(n)) for n in range(whole))
    segments = len([name for name in os.listdir(directory) if name.endswith(".log")])
    # As the kill left it, trusting the segments below the checkpointed recovery point.
    if killed.checkpointed_recovery_point is not None:
        where = f"{scenario} from checkpoint {killed.checkpointed_recovery_point}"
        assert reopen_and_check(copies["checkpointed"], scenario, killed, killed.checkpointed_recovery_point, where) == whole
    # As a power cut might have left it: a torn write beyond the last fsync.
    torn = None
    if os.path.isdir(copies["torn"]):
        torn = tear_unflushed_tail(copies["torn"], expected, killed, random.Random(scenario.seed + 1))
    if torn is not None:
        where = f"{scenario} torn after {torn} batches"
        assert reopen_and_check(copies["torn"], scenario, killed, killed.checkpointed_recovery_point or 0, where) == torn
    _SUMMARY.append((len(killed.acknowledged), whole, killed.log_bytes_on_disk - intact_bytes, segments, torn is not None))
