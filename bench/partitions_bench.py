"""One node with very many partitions, each holding data: creation, a message each, full Metadata,
memory and descriptors, and a restart to serving on the same data.

    python bench/partitions_bench.py [--partitions 100000] [--topics 10] [--producer batched|confluent]
                                     [--dir /tmp]

kbroker runs as the ``kbroker`` command (a process of its own) on a fresh data directory under --dir.
The partitions are spread over --topics topics, created by one confluent-kafka CreateTopics call; one
acks=all message goes to every partition (by default in Produce requests of 1,000 partitions each, as
the Java producer groups partitions; with --producer confluent, by confluent-kafka with linger.ms 5,
which sends a partition per request); then, on one connection, a
full Metadata request (every topic) is timed five times. The broker is stopped (SIGTERM) and started
again on the same directory: printed are the time from the spawn to its ready line, to the first full
Metadata answered, to a first acknowledged message on the last partition and to every log it found
opened (it serves first and opens them in the background: kbroker_log_remaining_logs_to_recover in
/metrics reaching 0), and the resident memory and open descriptors (/proc) at each step. The peer keeps partitions in memory only, so it has no
restart to compare: 2,000-partition figures side by side with it are bench/broker_bench.py's. Nothing
here fails on time; every wait is bounded by --deadline-s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.request

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [BENCH_DIR, os.path.dirname(BENCH_DIR)]

from broker_bench import BrokerUnderTest, free_port  # noqa: E402
from broker_bench_clients import full_metadata  # noqa: E402

METADATA_REPEATS = 5
PARTITIONS_PER_REQUEST = 1000


def as_ms(seconds: float) -> str:
    """Milliseconds, whole from 10 up and two significant digits below: a small run's figures do not print as 0."""
    value = seconds * 1000
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def as_s(seconds: float) -> str:
    """Seconds, to a tenth from 1 s up and two significant digits below."""
    return f"{seconds:.1f}" if seconds >= 1 else f"{seconds:.2g}"


class KbrokerOnDirectory(BrokerUnderTest):
    """The kbroker command on a data directory that outlives its process (for the restart)."""

    def __init__(self, work_dir: str, data_dir: str) -> None:
        super().__init__("kbroker", work_dir)
        self.kept_dir = data_dir
        self.metrics_port: int | None = None

    def remaining_logs(self) -> int:
        """kbroker_log_remaining_logs_to_recover, from /metrics: found logs not opened yet."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith("kbroker_log_remaining_logs_to_recover "):
                    return int(float(line.split()[1]))
        raise RuntimeError("no kbroker_log_remaining_logs_to_recover in /metrics")

    def _command(self):
        if self.metrics_port is None:
            self.metrics_port = free_port()
        settings = [f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.kept_dir}",
                    f"metrics.port={self.metrics_port}"]
        return [sys.executable, "-m", "kbroker.cli", *(part for setting in settings for part in ("--override", setting))], \
            "ready on"

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))


def create(bootstrap: str, topics: list[tuple[str, int]], deadline_s: float) -> float:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=deadline_s)
    started = time.perf_counter()
    futures = admin.create_topics([NewTopic(name, count, 1) for name, count in topics], operation_timeout=deadline_s)
    for future in futures.values():
        future.result(timeout=deadline_s)
    return time.perf_counter() - started


def one_message_each(bootstrap: str, topics: list[tuple[str, int]], deadline_s: float) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": int(deadline_s * 1000), "queue.buffering.max.messages": 1_000_000})
    producer.list_topics(timeout=deadline_s)
    failures = []
    started = time.perf_counter()
    for name, count in topics:
        for partition in range(count):
            producer.produce(name, b"one", partition=partition,
                             on_delivery=lambda error, _m: failures.append(error) if error else None)
            producer.poll(0)
    remaining = producer.flush(deadline_s)
    if remaining or failures:
        raise RuntimeError(f"{remaining} unacknowledged, {len(failures)} failed: {failures[:3]}")
    return time.perf_counter() - started


def one_message_each_batched(port: int, topics: list[tuple[str, int]], deadline_s: float) -> float:
    """As the Java producer sends: every partition bound for the broker in one Produce request (here up to
    PARTITIONS_PER_REQUEST of them), one acks=all batch each, on one connection. librdkafka sends a
    partition per request, and at 100,000 partitions its own per-partition work outlasts the run."""
    from kbroker.wire.errors import ErrorCode
    from kbroker.wire.records import Record, build_batch
    from testkit.raw_client import Connection, request

    data = request("Produce").TopicProduceData
    batch = bytes(build_batch([Record(offset_delta=0, value=b"one")]))
    started = time.perf_counter()
    with Connection(port, timeout_s=deadline_s) as connection:
        for name, count in topics:
            for first in range(0, count, PARTITIONS_PER_REQUEST):
                indexes = range(first, min(count, first + PARTITIONS_PER_REQUEST))
                answer = connection.call("Produce", 9, request("Produce", acks=-1, timeout_ms=int(deadline_s * 1000),
                    topic_data=[data(name=name, partition_data=[data.PartitionProduceData(
                        index=index, records=bytearray(batch)) for index in indexes])]))
                errors = [p.error_code for p in answer.responses[0].partition_responses if p.error_code != ErrorCode.NONE]
                if errors:
                    raise RuntimeError(f"{len(errors)} partitions of {name} refused the message: {errors[:3]}")
    return time.perf_counter() - started


def metadata_times(port: int, partitions: int, deadline_s: float) -> list[float]:
    with socket.create_connection(("127.0.0.1", port), timeout=deadline_s) as connection:
        timings = []
        for correlation_id in range(METADATA_REPEATS):
            started = time.perf_counter()
            size = full_metadata(connection, correlation_id)
            timings.append(time.perf_counter() - started)
    if size < partitions * 20:
        raise RuntimeError(f"a Metadata answer of {size} bytes cannot describe {partitions} partitions")
    return timings


def first_metadata_after(port: int, started: float, deadline_s: float) -> float:
    """Seconds from ``started`` until a full Metadata is answered (connection refusals retried)."""
    give_up = time.monotonic() + deadline_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=deadline_s) as connection:
                full_metadata(connection, 1)
                return time.perf_counter() - started
        except OSError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--producer", choices=("batched", "confluent"), default="batched",
                        help="how the message to each partition is sent (see one_message_each_batched)")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--deadline-s", type=float, default=900)
    arguments = parser.parse_args()
    per_topic = arguments.partitions // arguments.topics
    topics = [(f"many-{index}", per_topic) for index in range(arguments.topics)]
    total = per_topic * arguments.topics
    data_dir = tempfile.mkdtemp(prefix="kbroker-partitions-", dir=arguments.dir)
    broker = KbrokerOnDirectory(arguments.dir, data_dir)
    figures: list[tuple[str, str]] = []

    def note(what: str, value: str) -> None:
        figures.append((what, value))
        print(f"  {what}: {value}", flush=True)

    try:
        broker.spawn(free_port())
        broker.wait_ready(60)
        note("partitions", f"{total:,} in {arguments.topics} topics")
        note("create", f"{as_ms(create(broker.bootstrap, topics, arguments.deadline_s))} ms")
        note("after create", f"RSS {broker.rss_mib():.0f} MiB, {broker.descriptors()} descriptors")
        if arguments.producer == "confluent":
            note("one acks=all message to each (confluent-kafka, a partition per request)",
                 f"{as_s(one_message_each(broker.bootstrap, topics, arguments.deadline_s))} s")
        else:
            note(f"one acks=all message to each ({PARTITIONS_PER_REQUEST:,} partitions per request)",
                 f"{as_s(one_message_each_batched(broker.port, topics, arguments.deadline_s))} s")
        note("after the messages", f"RSS {broker.rss_mib():.0f} MiB, {broker.descriptors()} descriptors")
        timings = metadata_times(broker.port, total, arguments.deadline_s)
        note("full Metadata", f"first {as_ms(timings[0])} ms, then {as_ms(min(timings[1:]))}-"
                              f"{as_ms(max(timings[1:]))} ms")
        started = time.perf_counter()
        broker.stop()
        note("stop (SIGTERM to exit)", f"{as_s(time.perf_counter() - started)} s")

        started = time.perf_counter()
        broker.spawn(broker.port)
        broker.wait_ready(arguments.deadline_s)
        note("restart: spawn to ready line", f"{as_s(time.perf_counter() - started)} s")
        note("restart: spawn to a full Metadata answered",
             f"{as_s(first_metadata_after(broker.port, started, arguments.deadline_s))} s")
        last_topic, last_count = topics[-1]
        note("restart: spawn to an acks=all message acknowledged",
             f"{as_s(time.perf_counter() - started + one_message_each(broker.bootstrap, [(last_topic, 1)], 60))} s")
        note("after the restart", f"RSS {broker.rss_mib():.0f} MiB, {broker.descriptors()} descriptors")
        timings = metadata_times(broker.port, total, arguments.deadline_s)
        note("full Metadata after the restart", f"{as_ms(min(timings))}-{as_ms(max(timings))} ms")
        give_up = time.monotonic() + arguments.deadline_s
        while broker.remaining_logs() and time.monotonic() < give_up:
            time.sleep(1)
        note("restart: spawn to every found log open (in the background)", f"{as_s(time.perf_counter() - started)} s")
        note("after every log opened", f"RSS {broker.rss_mib():.0f} MiB, {broker.descriptors()} descriptors")
        timings = metadata_times(broker.port, total, arguments.deadline_s)
        note("full Metadata then", f"{as_ms(min(timings))}-{as_ms(max(timings))} ms")
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
