"""The metadata quorum: commit latency and applied records/s on three controller processes.

    python bench/raft_bench.py [--proposals 300] [--batch 50] [--batches 20] [--dir /tmp]

Starts three ``process.roles=controller`` kbroker processes on loopback
(compat_tests/quorum_process.py), registers one broker, then:
  commit latency   --proposals CreateTopics of one topic (two metadata records), one after
                   another, at the active controller, each on a new loopback connection: each
                   is answered once a majority has fsynced it. p50, p99 and max in ms.
  records/s        --batches CreateTopics of --batch topics each (two records a topic): metadata
                   records committed and applied per second.
There is no peer here: tansu has no Raft quorum to set beside this one. Every wait is
bounded; nothing here fails on time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [REPO_DIR]

from testkit.quorum_process import Quorum, register_broker  # noqa: E402
from kbroker.wire.errors import ErrorCode  # noqa: E402
from kbroker.wire.schema import API_BY_NAME  # noqa: E402

CreateTopics = API_BY_NAME["CreateTopics"].request_class


class Proposer:
    """CreateTopics at the active controller, found once and again only when it says NOT_CONTROLLER."""

    def __init__(self, quorum: Quorum) -> None:
        self.quorum = quorum
        self.leader = quorum.leader()

    def create(self, names: list[str]) -> None:
        body = CreateTopics(timeout_ms=30_000, validate_only=False, topics=[
            CreateTopics.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])
            for name in names])
        for _ in range(20):  # bounded: the leader may change under the benchmark
            results = self.leader.call("CreateTopics", 7, body, timeout_s=30).topics
            if all(r.error_code == ErrorCode.NONE for r in results):
                return
            if not all(r.error_code == ErrorCode.NOT_CONTROLLER for r in results):
                raise RuntimeError(f"CreateTopics failed: {[(r.name, r.error_code) for r in results]}")
            self.leader = self.quorum.leader()
        raise RuntimeError("no controller took the proposal")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proposals", type=int, default=300)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--dir", default=None)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=arguments.dir) as root:
        quorum = Quorum(Path(root), overrides=("broker.session.timeout.ms=600000",))
        try:
            quorum.start()
            register_broker(quorum, 101)
            proposer = Proposer(quorum)
            latencies = []
            for i in range(arguments.proposals):
                started = time.perf_counter()
                proposer.create([f"latency-{i:05}"])
                latencies.append((time.perf_counter() - started) * 1000)
            latencies.sort()
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            print(f"commit latency over {len(latencies)} proposals (3 voters, loopback, fsync): "
                  f"p50 {statistics.median(latencies):.2f} ms  p99 {p99:.2f} ms  max {latencies[-1]:.2f} ms")
            started = time.perf_counter()
            for b in range(arguments.batches):
                proposer.create([f"batch-{b:03}-{t:04}" for t in range(arguments.batch)])
            elapsed = time.perf_counter() - started
            records = arguments.batches * arguments.batch * 2
            print(f"applied: {records} records in {arguments.batches} proposals in {elapsed:.2f} s = "
                  f"{records / elapsed:,.0f} records/s")
        finally:
            quorum.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
