"""The child process of the crash tests: appends deterministic batches until killed.

    python -m tests.log.crash_writer LOG_DIR SEED SEGMENT_BYTES MODE THREADS

Batch number ``n`` is :func:`batch_for` ``(seed, n)``; batches go into the log
strictly in that order, so batch ``n`` starts at offset
``sum(record_count(seed, i) for i < n)`` and the test can rebuild every byte
the log should hold. A line ``"<n> <last offset>\\n"`` goes to stdout only
after an fsync covering batch ``n`` returned. After some acknowledgements the
recovery point is checkpointed (Kafka's ``recovery-point-offset-checkpoint``)
in LOG_DIR.

MODE ``flush``: one thread appends 1-4 batches, calls ``log.flush()`` and
acknowledges them; MODE ``burst`` likewise with 10-40 batches per flush, so
that most of its time goes to writes and a kill often tears one. MODE ``group``: THREADS trio tasks append
and wait on the broker's own group commit (kbroker/replication/flusher.py), whose fsyncs run on its thread
while the tasks go on appending.
"""

from __future__ import annotations

import os
import random
import sys
import time

import trio

from kbroker.log.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from kbroker.replication.flusher import Flusher
from kbroker.replication.replica import Partition
from kbroker.wire.records import Record, build_batch

TOPIC_PARTITION = ("crash", 0)
LARGE_BATCH_BYTES = 100 * 1024
_RUN_SECONDS_MAX = 60  # a child the test forgot to kill still ends
_CHECKPOINT_EVERY = 7


def partition_directory(log_dir: str) -> str:
    return os.path.join(log_dir, f"{TOPIC_PARTITION[0]}-{TOPIC_PARTITION[1]}")


def _shape(seed: int, number: int) -> tuple[int, int]:
    """(record count, value bytes per record) of batch ``number``: mostly small, some ~100 KiB."""
    large_share = random.Random(seed).uniform(0.05, 0.6)
    rng = random.Random(f"{seed}/{number}")
    if rng.random() < large_share:
        count = rng.randint(1, 4)
        return count, LARGE_BATCH_BYTES // count
    return rng.randint(1, 12), rng.randint(1, 600)


def record_count(seed: int, number: int) -> int:
    return _shape(seed, number)[0]


def batch_for(seed: int, number: int) -> bytes:
    """Batch ``number`` unstamped (base offset 0); every value names its batch and record."""
    count, value_bytes = _shape(seed, number)
    records = []
    for index in range(count):
        tag = b"<%d:%d:%d>" % (seed, number, index)
        value = (tag * (value_bytes // len(tag) + 1))[:value_bytes]
        records.append(Record(offset_delta=index, timestamp_delta=index, key=b"k%d" % number, value=value))
    return build_batch(records, base_timestamp=1_700_000_000_000 + number)


class Writer:
    def __init__(self, log_dir: str, seed: int, segment_bytes: int) -> None:
        self.seed = seed
        self.log = Log.open(partition_directory(log_dir), LogConfig(segment_bytes=segment_bytes))
        self.checkpoint_file = OffsetCheckpointFile(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT))
        self.next_number = 0
        self.deadline = time.monotonic() + _RUN_SECONDS_MAX

    def acknowledge(self, number: int, last_offset: int) -> None:
        os.write(1, b"%d %d\n" % (number, last_offset))  # one small write: atomic on a pipe
        if number % _CHECKPOINT_EVERY == 0:
            self.checkpoint_file.write({TOPIC_PARTITION: self.log.recovery_point})

    def append_next(self) -> tuple[int, int]:
        number = self.next_number
        self.next_number += 1
        result = self.log.append(bytearray(batch_for(self.seed, number)))
        return number, result.last_offset

    def run_flushing(self, batches_per_flush_max: int) -> None:
        rng = random.Random(self.seed)
        while time.monotonic() < self.deadline:
            count = rng.randint(max(1, batches_per_flush_max // 4), batches_per_flush_max)
            appended = [self.append_next() for _ in range(count)]
            self.log.flush()
            for number, last_offset in appended:
                self.acknowledge(number, last_offset)

    async def run_group(self, tasks: int) -> None:
        flusher = Flusher()
        partition = Partition(*TOPIC_PARTITION, self.log, flusher, node_id=1, replicas=(1,), isr=(1,), leader=1)

        async def body() -> None:
            while time.monotonic() < self.deadline:
                number, last_offset = self.append_next()  # as the leader's append, but keeping the batch's bytes
                await partition.wait_durable(last_offset)
                self.acknowledge(number, last_offset)

        try:
            async with trio.open_nursery() as nursery:
                for _ in range(tasks):
                    nursery.start_soon(body)
        finally:
            flusher.stop()


def main(argv: list[str]) -> None:
    log_dir, seed, segment_bytes, mode, threads = argv
    writer = Writer(log_dir, int(seed), int(segment_bytes))
    if mode == "flush":
        writer.run_flushing(batches_per_flush_max=4)
    elif mode == "burst":
        writer.run_flushing(batches_per_flush_max=40)
    elif mode == "group":
        trio.run(writer.run_group, int(threads))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
