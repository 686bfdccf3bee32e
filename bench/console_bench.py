"""How fast the web console's pages answer on a broker holding many topics.

    python bench/console_bench.py [--topics 2000] [--partitions 10] [--messages 300] [--rounds 20]
                                  [--dir /tmp] [--deadline-s 300]

One kbroker process (the ``kbroker.cli`` command, testkit's BrokerProcess) serves Kafka on a free loopback
port and HTTP on another (``metrics.port``; connected to on 127.0.0.1), with its data in a fresh directory
under --dir; the bench waits until GET /ready answers 200. It then creates --topics topics of
--partitions partitions each (bench-0000, bench-0001, ...) in raw CreateTopics requests of
TOPICS_PER_REQUEST topics on one connection, timed; confluent-kafka produces --messages small acks=all
messages with keys and headers to bench-0000, round robin over its partitions; and the consumer group
bench-group reads them, commits its offsets synchronously and closes (an empty group with offsets).

Each console URL is then asked once to warm it, then --rounds times, GET on one kept-alive http.client
connection, the whole body read; the table gives the status and body size of the last answer and min,
median, p90 (nearest rank) and max of the rounds in ms. A page that answers another status than 200 is
timed and printed all the same. Last, the broker's RSS (VmRSS, /proc/PID/status) after the run. Nothing
here fails on time; every wait is bounded by --deadline-s (or less), and the broker process started
here, only it, is stopped in the end.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [BENCH_DIR, os.path.dirname(BENCH_DIR)]

from broker_bench import source_state  # noqa: E402
from kbroker.wire.errors import ErrorCode  # noqa: E402
from testkit.broker_process import BrokerProcess, free_port  # noqa: E402
from testkit.raw_client import Connection, request  # noqa: E402

TOPICS_PER_REQUEST = 100
CREATE_TOPICS_VERSION = 7
FIRST_TOPIC = "bench-0000"
GROUP = "bench-group"
START_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 60  # one HTTP answer, one CreateTopics answer
URLS = (
    "/",
    "/topics",
    "/topics?q=bench-19",
    f"/topics/{FIRST_TOPIC}",
    f"/topics/{FIRST_TOPIC}/messages?partition=0",
    f"/topics/{FIRST_TOPIC}/messages?partition=0&order=oldest",
    "/groups",
    f"/groups/{GROUP}",
    "/api/rates",
)


def topic_name(index: int) -> str:
    return f"bench-{index:04d}"


def wait_http_ready(http_port: int, deadline_s: float) -> None:
    """Until GET /ready answers 200 (503 while the broker starts; refusals retried)."""
    give_up = time.monotonic() + deadline_s
    last = "no answer"
    while time.monotonic() < give_up:
        connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=5)
        try:
            connection.request("GET", "/ready")
            answer = connection.getresponse()
            body = answer.read()
            if answer.status == 200:
                return
            last = f"{answer.status} {body[:200]!r}"
        except OSError as error:
            last = repr(error)
        finally:
            connection.close()
        time.sleep(0.05)
    raise RuntimeError(f"GET /ready did not answer 200 within {deadline_s:g} s: {last}")


def create_topics(port: int, count: int, partitions: int) -> float:
    """Seconds to create ``count`` topics of ``partitions`` partitions, TOPICS_PER_REQUEST to a request."""
    creatable = request("CreateTopics").CreatableTopic
    started = time.perf_counter()
    with Connection(port, timeout_s=REQUEST_TIMEOUT_S) as connection:
        for first in range(0, count, TOPICS_PER_REQUEST):
            names = [topic_name(index) for index in range(first, min(count, first + TOPICS_PER_REQUEST))]
            answer = connection.call("CreateTopics", CREATE_TOPICS_VERSION, request(
                "CreateTopics", timeout_ms=REQUEST_TIMEOUT_S * 1000, topics=[
                    creatable(name=name, num_partitions=partitions, replication_factor=1) for name in names]))
            refused = [(t.name, t.error_code) for t in answer.topics if t.error_code != ErrorCode.NONE]
            if refused:
                raise RuntimeError(f"CreateTopics refused {len(refused)} topics: {refused[:3]}")
    return time.perf_counter() - started


def produce_messages(bootstrap: str, count: int, partitions: int, deadline_s: float) -> None:
    """``count`` small acks=all messages with keys and headers to FIRST_TOPIC, round robin over its partitions."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": int(deadline_s * 1000)})
    failures = []
    for index in range(count):
        producer.produce(FIRST_TOPIC, value=f'{{"order": {index}, "amount": {index * 7 % 1000}}}'.encode(),
                         key=f"customer-{index % 37}".encode(), partition=index % partitions,
                         headers=[("source", b"console-bench"), ("sequence", str(index).encode())],
                         on_delivery=lambda error, _message: failures.append(error) if error else None)
        producer.poll(0)
    remaining = producer.flush(deadline_s)
    if remaining or failures:
        raise RuntimeError(f"{remaining} unacknowledged, {len(failures)} failed: {failures[:3]}")


def commit_group_offsets(bootstrap: str, count: int, deadline_s: float) -> int:
    """GROUP reads FIRST_TOPIC from the start until ``count`` messages or the deadline, commits synchronously
    and closes; how many it read."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([FIRST_TOPIC])
        received = 0
        give_up = time.monotonic() + deadline_s
        while received < count and time.monotonic() < give_up:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received += 1
        if not received:
            raise RuntimeError(f"{GROUP} read nothing from {FIRST_TOPIC} within {deadline_s:g} s")
        consumer.commit(asynchronous=False)
        return received
    finally:
        consumer.close()


class PageTimer:
    """GETs on one kept-alive connection; a connection the server closed is opened again (and counted)."""

    def __init__(self, http_port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=REQUEST_TIMEOUT_S)
        self.reconnects = 0

    def get(self, url: str) -> tuple[int, int, float]:
        """(status, body bytes, seconds from the request sent to the last body byte read)."""
        for attempt in range(2):
            started = time.perf_counter()
            try:
                self.connection.request("GET", url)
                answer = self.connection.getresponse()
                body = answer.read()
                return answer.status, len(body), time.perf_counter() - started
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()
                self.reconnects += 1
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.connection.close()


def time_pages(http_port: int, rounds: int) -> tuple[list[tuple[str, int, int, list[float]]], int]:
    """Per URL: (url, status, body bytes, seconds of each round), after one warm-up; and the reconnects."""
    timer = PageTimer(http_port)
    rows = []
    try:
        for url in URLS:
            timer.get(url)
            timings = []
            for _ in range(rounds):
                status, size, seconds = timer.get(url)
                timings.append(seconds)
            rows.append((url, status, size, timings))
            print(f"  {url}: {status}, median {statistics.median(timings) * 1000:.1f} ms", flush=True)
    finally:
        timer.close()
    return rows, timer.reconnects


def nearest_rank(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


def print_table(rows: list[tuple[str, int, int, list[float]]]) -> None:
    header = ("url", "status", "bytes", "min ms", "median ms", "p90 ms", "max ms")
    lines = [header]
    for url, status, size, timings in rows:
        ordered = sorted(timings)
        lines.append((url, str(status), f"{size:,}", *(f"{value * 1000:.1f}" for value in (
            ordered[0], statistics.median(ordered), nearest_rank(ordered, 0.9), ordered[-1]))))
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    for line in lines:
        print("  " + "  ".join(cell.ljust(width) if column == 0 else cell.rjust(width)
                               for column, (cell, width) in enumerate(zip(line, widths))))


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as source:
            return next((line.split(":", 1)[1].strip() for line in source if line.startswith("model name")), "?")
    except OSError:
        return "?"


def stop(broker: BrokerProcess) -> None:
    """SIGTERM to the process started here, SIGKILL if it has not exited within BrokerProcess.stop's wait."""
    if broker.process is None:
        return
    try:
        broker.stop()
    except subprocess.TimeoutExpired:
        broker.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=10, help="partitions per topic")
    parser.add_argument("--messages", type=int, default=300, help=f"messages produced to {FIRST_TOPIC}")
    parser.add_argument("--rounds", type=int, default=20, help="timed GETs per URL, after one warm-up")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--deadline-s", type=float, default=300, help="bound of each wait")
    arguments = parser.parse_args()
    if arguments.topics < 1 or arguments.partitions < 1 or arguments.messages < 1 or arguments.rounds < 1:
        parser.error("--topics, --partitions, --messages and --rounds are at least 1")

    print(f"console bench, {datetime.date.today()}: {os.cpu_count()} cores ({cpu_model()}), "
          f"python {platform.python_version()}, kbroker {source_state()}")
    data_dir = tempfile.mkdtemp(prefix="kbroker-console-", dir=arguments.dir)
    http_port = free_port()
    broker = BrokerProcess(data_dir, None, f"metrics.port={http_port}")
    try:
        broker.start(START_TIMEOUT_S)
        wait_http_ready(http_port, START_TIMEOUT_S)
        total = arguments.topics * arguments.partitions
        print(f"  broker pid {broker.process.pid}, Kafka on {broker.bootstrap}, HTTP on 127.0.0.1:{http_port}")
        seconds = create_topics(broker.port, arguments.topics, arguments.partitions)
        print(f"  create {arguments.topics:,} topics x {arguments.partitions} partitions ({total:,}), "
              f"{TOPICS_PER_REQUEST} topics per CreateTopics: {seconds:.3f} s", flush=True)
        produce_messages(broker.bootstrap, arguments.messages, arguments.partitions, arguments.deadline_s)
        read = commit_group_offsets(broker.bootstrap, arguments.messages, arguments.deadline_s)
        print(f"  {arguments.messages} messages with keys and headers to {FIRST_TOPIC}; {GROUP} read {read} "
              f"and committed", flush=True)
        rows, reconnects = time_pages(http_port, arguments.rounds)
        print(f"\n{arguments.topics:,} topics, {total:,} partitions; GET on one kept-alive connection, "
              f"{arguments.rounds} rounds after one warm-up"
              f"{f', {reconnects} reconnects' if reconnects else ''}")
        print_table(rows)
        print(f"broker RSS after the run: {rss_mib(broker.process.pid):.0f} MiB")
    finally:
        stop(broker)
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
