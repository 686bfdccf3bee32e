"""Broker CPU per request on the request path, beside the floor that trio itself sets.

    python bench/request_cost_bench.py [--rounds 3] [--requests 20000] [--produces 5000] [--fetches 3000]
                                       [--produce-rate 1000] [--cases metadata,...] [--dir /tmp] [--smoke]

One kbroker process (the ``kbroker`` command, its defaults, a fresh data directory under --dir) and one
floor process: a minimal length-prefixed echo server on trio, in this script (``--echo-server``), which
reads what arrives, and sends every whole frame back in one write. Both are driven by the same client
loop over raw sockets, the requests encoded once with kbroker's own codec (kbroker.wire). A figure is
the server process's CPU (user + system, every thread, those ended too) over a counted run of requests,
divided by the count: read from the process's CPU clock (``clock_gettime`` of its pid), which is the sum
``/proc/<pid>/stat`` gives as utime + stime, in nanoseconds rather than 10 ms ticks; the run's total by
both is printed at the end as a check. Each case is warmed up first (a tenth of its count, at most 500).

  Metadata v12, no topics        one request in flight; and 16 pipelined (sent in one write, then read)
  ApiVersions v3                 one in flight
  Produce 100 B, acks=1 / all    one batch of one 100-byte record per request (Produce v12), one in flight
  Fetch beside produce load      a steady load of 100 B acks=1 produces (--produce-rate a second, its own
                                 connection, paced from a thread) runs throughout, while one consumer
                                 fetches (Fetch v12, read_committed as librdkafka's default, one in
                                 flight, min_bytes 1, each from the previous answer's high watermark, so
                                 that each returns what was produced since). The broker's CPU per
                                 produce with the load alone, measured before and after, times the
                                 produces made while fetching, is taken from its CPU then; the rest, per
                                 Fetch, is what a Fetch adds. The load is kept below what saturates the
                                 broker: saturated, it would not keep its rate, and less load would
                                 leave room for the fetches' CPU.

The floor process serves the same frames under the same loop (a Fetch's frame is echoed at once, so its
floor is one exchange). Each round measures every case (or those --cases names) on kbroker and then at
once on the floor, so that the machine's load at that moment falls on both; the table shows the median of
the rounds and their range. On a shared machine the figures drift with its load (both kbroker's and the
floor's, by half or more from one run to the next): compare runs by their ratios to the floor, or
interleave them. kbroker's idle CPU rate (its timers) is printed: it is in the figures, not taken out.
Nothing here fails on time; every wait is bounded (a socket timeout of 30 s, counted loops).
--smoke makes one round of a few hundred requests: it shows the script works, not the broker's cost.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [BENCH_DIR, os.path.dirname(BENCH_DIR)]

SOCKET_TIMEOUT_S = 30.0
RECEIVE_BYTES = 1 << 20
PIPELINED = 16
WARM_UP_MAX = 500
VALUE_BYTES = 100
PRODUCE_VERSION = 12
FETCH_VERSION = 12
FETCH_MAX_WAIT_MS = 500
READ_COMMITTED = 1  # librdkafka's default isolation.level
LOAD_ALONE_S = 1.0  # each measurement of the produce load alone, before and after the fetches
SMOKE_LOAD_ALONE_S = 0.2
ECHO_LIFETIME_S = 3600  # the floor process ends by itself after this, whatever happens to this script
SMOKE_DEFAULTS = {"rounds": 1, "requests": 320, "produces": 200, "fetches": 100, "produce_rate": 500}


# -- the floor: a minimal length-prefixed echo server on trio ---------------------------------------------------


def serve_echo(lifetime_s: float) -> None:
    """Listen on a free loopback port, print it, and echo whole frames back until killed or ``lifetime_s``."""
    import trio

    async def echo(stream: trio.SocketStream) -> None:
        buffer = bytearray()
        while True:
            data = await stream.receive_some(RECEIVE_BYTES)
            if not data:
                return
            buffer += data
            end = 0
            while len(buffer) - end >= 4:
                whole = end + 4 + int.from_bytes(buffer[end:end + 4], "big")
                if whole > len(buffer):
                    break
                end = whole
            if end:
                await stream.send_all(buffer[:end])
                del buffer[:end]

    async def main() -> None:
        with trio.move_on_after(lifetime_s):
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            print(f"echo on {listeners[0].socket.getsockname()[1]}", flush=True)
            await trio.serve_listeners(echo, listeners)

    trio.run(main)


class EchoProcess:
    """The floor's process, started from this script and ended by its pid."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--echo-server"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()  # bounded: the process prints its port first, or exits
        if not line.startswith("echo on "):
            self.stop()
            raise RuntimeError(f"the echo server did not start: {line!r}")
        self.port = int(line.split()[-1])
        self.pid = self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


# -- what a process spent -----------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """The process's CPU, user + system, of every thread (ended ones too), by its CPU clock."""
    return time.clock_gettime(((~pid) << 3) | 2)  # Linux: MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)


def stat_cpu_seconds(pid: int) -> float:
    """The same from /proc/<pid>/stat: utime + stime, in clock ticks."""
    with open(f"/proc/{pid}/stat") as source:
        fields = source.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the client loop -------------------------------------------------------------------------------------------------


class Client:
    """One connection: whole frames in, whole response frames out, nothing decoded unless asked."""

    def __init__(self, port: int) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S)
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()

    def next_frame(self) -> bytes:
        """The body of the next response frame."""
        buffer = self.buffer
        while True:
            if len(buffer) >= 4:
                end = 4 + int.from_bytes(buffer[:4], "big")
                if len(buffer) >= end:
                    body = bytes(buffer[4:end])
                    del buffer[:end]
                    return body
            chunk = self.socket.recv(RECEIVE_BYTES)
            if not chunk:
                raise ConnectionError("connection closed")
            buffer += chunk

    def exchange(self, frame: bytes) -> bytes:
        self.socket.sendall(frame)
        return self.next_frame()

    def repeat(self, frame: bytes, count: int, in_flight: int) -> None:
        """``count`` requests (a multiple of ``in_flight``), ``in_flight`` of them sent in one write each time."""
        burst = frame * in_flight
        send, next_frame = self.socket.sendall, self.next_frame
        for _ in range(count // in_flight):
            send(burst)
            for _ in range(in_flight):
                next_frame()

    def close(self) -> None:
        self.socket.close()


def measure(pid: int, run, count: int) -> float:
    """Microseconds of ``pid``'s CPU per request over ``run()``, which makes ``count`` requests."""
    before = cpu_seconds(pid)
    run()
    return (cpu_seconds(pid) - before) / count * 1e6


# -- the requests ----------------------------------------------------------------------------------------------------


def frames(topic: str) -> dict[str, tuple]:
    """Each case's request frame (one correlation id throughout: the servers answer it as any other)."""
    from kbroker.wire.frame import encode_request
    from kbroker.wire.records import Record, build_batch
    from kbroker.wire.schema import API_BY_NAME

    def encoded(api_name: str, version: int, **fields) -> bytes:
        api = API_BY_NAME[api_name]
        return encode_request(api.key, version, 7, "request-cost-bench", api.request_class(**fields))

    batch = build_batch([Record(offset_delta=0, value=b"v" * VALUE_BYTES)], base_timestamp=int(time.time() * 1000))
    produce_data = API_BY_NAME["Produce"].request_class.TopicProduceData

    def produce(acks: int) -> bytes:
        return encoded("Produce", PRODUCE_VERSION, acks=acks, timeout_ms=30_000, topic_data=[produce_data(
            name=topic, partition_data=[produce_data.PartitionProduceData(index=0, records=batch)])])

    return {
        "metadata": encoded("Metadata", 12, topics=[], allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False),
        "api_versions": encoded("ApiVersions", 3, client_software_name="request-cost-bench",
                                client_software_version="1"),
        "produce_acks_1": produce(1),
        "produce_acks_all": produce(-1),
    }


def fetch_frame(topic: str, offset: int) -> bytes:
    from kbroker.wire.frame import encode_request
    from kbroker.wire.schema import API_BY_NAME

    api = API_BY_NAME["Fetch"]
    fetch_topic = api.request_class.FetchTopic
    body = api.request_class(max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1, isolation_level=READ_COMMITTED,
                             topics=[fetch_topic(
        topic=topic, partitions=[fetch_topic.FetchPartition(partition=0, fetch_offset=offset,
                                                             partition_max_bytes=1 << 20)])])
    return encode_request(api.key, FETCH_VERSION, 7, "request-cost-bench", body)


def answer(api_name: str, version: int, body: bytes):
    from kbroker.wire.frame import decode_response
    from kbroker.wire.schema import API_BY_NAME

    return decode_response(API_BY_NAME[api_name].key, version, body)[1]


def check_produced(body: bytes) -> None:
    partition = answer("Produce", PRODUCE_VERSION, body).responses[0].partition_responses[0]
    if partition.error_code:
        raise RuntimeError(f"Produce answered error {partition.error_code}")


def create_topics(port: int, names: list[str]) -> None:
    from kbroker.wire.frame import encode_request
    from kbroker.wire.schema import API_BY_NAME

    api = API_BY_NAME["CreateTopics"]
    topic = api.request_class.CreatableTopic
    body = api.request_class(topics=[topic(name=name, num_partitions=1, replication_factor=1, assignments=[],
                                           configs=[]) for name in names], timeout_ms=30_000)
    client = Client(port)
    try:
        created = answer("CreateTopics", 7, client.exchange(encode_request(api.key, 7, 1, "request-cost-bench", body)))
    finally:
        client.close()
    refused = [(t.name, t.error_code) for t in created.topics if t.error_code]
    if refused:
        raise RuntimeError(f"CreateTopics refused {refused}")


# -- the cases -------------------------------------------------------------------------------------------------------


CASES = {  # --cases names -> the table's
    "metadata": "Metadata v12, no topics",
    "pipelined": f"Metadata v12, {PIPELINED} pipelined",
    "api_versions": "ApiVersions v3",
    "produce_1": "Produce 100 B, acks=1",
    "produce_all": "Produce 100 B, acks=all",
    "fetch": "Fetch beside produce load (+ per Fetch)",
}
CASE_REQUESTS = {  # the repeated cases: (frame, requests in flight, the option counting them)
    "metadata": ("metadata", 1, "requests"),
    "pipelined": ("metadata", PIPELINED, "requests"),
    "api_versions": ("api_versions", 1, "requests"),
    "produce_1": ("produce_acks_1", 1, "produces"),
    "produce_all": ("produce_acks_all", 1, "produces"),
}


def warm_up_count(count: int) -> int:
    return max(PIPELINED, min(WARM_UP_MAX, count // 10)) // PIPELINED * PIPELINED


def repeated_case(port: int, pid: int, frame: bytes, count: int, in_flight: int = 1, check=None) -> float:
    client = Client(port)
    try:
        if check is not None:
            check(client.exchange(frame))
        client.repeat(frame, warm_up_count(count), in_flight)
        count = count // in_flight * in_flight
        figure = measure(pid, lambda: client.repeat(frame, count, in_flight), count)
        if check is not None:
            check(client.exchange(frame))
        return figure
    finally:
        client.close()


class ProduceLoad:
    """100 B acks=1 produces at a steady ``rate`` a second on a connection of their own, in a thread."""

    def __init__(self, port: int, frame: bytes, rate: int) -> None:
        self.client = Client(port)
        self.frame = frame
        self.interval_s = 1 / rate
        self.sent = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ProduceLoad:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            check_produced(self.client.exchange(self.frame))
            started = time.perf_counter()
            while not self._stop.is_set():
                self.client.exchange(self.frame)
                self.sent += 1
                wait_s = started + self.sent * self.interval_s - time.perf_counter()
                if wait_s > 0:
                    time.sleep(wait_s)
            check_produced(self.client.exchange(self.frame))
        except BaseException as error:  # handed to the measuring thread
            self.error = error

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(SOCKET_TIMEOUT_S)
        self.client.close()
        if self.error is not None and exc[0] is None:
            raise RuntimeError(f"the produce load failed: {self.error!r}") from self.error


def fetch_case(port: int, pid: int, produce_frame: bytes, topic: str, count: int, rate: int, alone_s: float) -> float:
    """Microseconds of broker CPU a Fetch adds beside the produce load (see the module's docstring)."""
    client = Client(port)
    try:
        with ProduceLoad(port, produce_frame, rate) as load:
            offset = fetch_once(client, topic, 0)
            for _ in range(warm_up_count(count)):
                offset = fetch_once(client, topic, offset)
            alone_cpu, alone_produced = load_alone(pid, load, alone_s)
            cpu_started, produced_started = cpu_seconds(pid), load.sent
            for _ in range(count):
                offset = fetch_once(client, topic, offset)
            cpu_s, produced = cpu_seconds(pid) - cpu_started, load.sent - produced_started
            cpu_after, produced_after = load_alone(pid, load, alone_s)
        per_produce_s = (alone_cpu + cpu_after) / max(1, alone_produced + produced_after)
        return (cpu_s - produced * per_produce_s) / count * 1e6
    finally:
        client.close()


def fetch_once(client: Client, topic: str, offset: int) -> int:
    """Fetch from ``offset``; the high watermark the answer gives, from which the next one fetches."""
    fetched = answer("Fetch", FETCH_VERSION, client.exchange(fetch_frame(topic, offset)))
    partition = fetched.responses[0].partitions[0]
    if fetched.error_code or partition.error_code:
        raise RuntimeError(f"Fetch answered error {fetched.error_code or partition.error_code}")
    return partition.high_watermark


def load_alone(pid: int, load: ProduceLoad, seconds: float) -> tuple[float, int]:
    """``pid``'s CPU seconds over ``seconds`` while nothing but the produce load runs, and its produces then."""
    cpu_started, produced_started = cpu_seconds(pid), load.sent
    time.sleep(seconds)
    return cpu_seconds(pid) - cpu_started, load.sent - produced_started


def kbroker_figure(case: str, port: int, pid: int, requests: dict, arguments, alone_s: float) -> float:
    if case == "fetch":
        return fetch_case(port, pid, requests["fetch_load"], "cost-fetch", arguments.fetches, arguments.produce_rate,
                          alone_s)
    frame, in_flight, count_option = CASE_REQUESTS[case]
    check = check_produced if case.startswith("produce") else None
    return repeated_case(port, pid, requests[frame], getattr(arguments, count_option), in_flight, check)


def floor_figure(case: str, echo: EchoProcess, requests: dict, arguments) -> float:
    if case == "fetch":
        return repeated_case(echo.port, echo.pid, fetch_frame("cost-fetch", 0), arguments.fetches)
    frame, in_flight, count_option = CASE_REQUESTS[case]
    return repeated_case(echo.port, echo.pid, requests[frame], getattr(arguments, count_option), in_flight)


# -- printing --------------------------------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    """The median, and the range when there is more than one value."""
    median = f"{statistics.median(values):.1f}"
    return median if len(values) == 1 else f"{median} ({min(values):.1f} to {max(values):.1f})"


def machine_line(loads: list[float]) -> str:
    try:
        with open("/proc/cpuinfo") as source:
            model = next((line.split(":", 1)[1].strip() for line in source if line.startswith("model name")), "?")
    except OSError:
        model = "?"
    return (f"machine: {os.cpu_count()} cores ({model}), {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, load average (1 min) {loads[0]:.1f} at the start, "
            f"{loads[-1]:.1f} at the end; kbroker: {source_state()}")


def source_state() -> str:
    """The commit under test and whether the work tree differs from it (the broker runs from the work tree)."""
    root = os.path.dirname(BENCH_DIR)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=30).stdout.strip() or "?"
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                 capture_output=True, text=True, timeout=30).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return "commit unknown"
    return f"commit {commit}, {len(changed)} files changed in the work tree" if changed else f"commit {commit}"


def print_table(kbroker: dict[str, list[float]], floor: dict[str, list[float]]) -> None:
    print()
    print(f"{'case':42} {'kbroker us/request':>26} {'floor us/request':>26} {'kbroker/floor':>14}")
    for case, ours in kbroker.items():
        theirs = floor[case]
        ratio = statistics.median(ours) / statistics.median(theirs)
        print(f"{CASES[case]:42} {spread(ours):>26} {spread(theirs):>26} {ratio:>14.2f}")


# -- the run ---------------------------------------------------------------------------------------------------------


def run(arguments) -> None:
    from testkit.broker_process import BrokerProcess

    alone_s = SMOKE_LOAD_ALONE_S if arguments.smoke else LOAD_ALONE_S
    loads = [os.getloadavg()[0]]
    data_dir = tempfile.mkdtemp(prefix="kbroker-request-cost-", dir=arguments.dir)
    broker = BrokerProcess(data_dir)
    echo = None
    try:
        broker.start(timeout_s=60)
        echo = EchoProcess()
        pid = broker.process.pid
        create_topics(broker.port, ["cost-produce", "cost-fetch"])
        requests = frames("cost-produce")
        requests["fetch_load"] = frames("cost-fetch")["produce_acks_1"]
        idle_started = cpu_seconds(pid)
        time.sleep(alone_s)
        idle = (cpu_seconds(pid) - idle_started) / alone_s
        kbroker = {case: [] for case in arguments.cases}
        floor = {case: [] for case in arguments.cases}
        for round_index in range(1, arguments.rounds + 1):
            figures = []
            for case in arguments.cases:  # this case on kbroker, then at once on the floor
                kbroker[case].append(kbroker_figure(case, broker.port, pid, requests, arguments, alone_s))
                floor[case].append(floor_figure(case, echo, requests, arguments))
                figures.append(f"{CASES[case]} {kbroker[case][-1]:.1f} / {floor[case][-1]:.1f}")
            loads.append(os.getloadavg()[0])
            print(f"round {round_index}, kbroker / floor us: {', '.join(figures)}", flush=True)
        print_table(kbroker, floor)
        print()
        print(f"kbroker idle: {idle * 1000:.1f} ms CPU a second (in the figures above); run's CPU by its clock "
              f"{cpu_seconds(pid):.2f} s, by /proc/{pid}/stat {stat_cpu_seconds(pid):.2f} s")
        print(machine_line(loads))
    finally:
        if echo is not None:
            echo.stop()
        broker.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="each case on kbroker, then on the floor, per round")
    parser.add_argument("--requests", type=int, default=20_000, help="Metadata and ApiVersions requests per case")
    parser.add_argument("--produces", type=int, default=5_000, help="Produce requests per case")
    parser.add_argument("--fetches", type=int, default=3_000, help="Fetch requests beside the produce load")
    parser.add_argument("--produce-rate", type=int, default=1_000, help="the produce load, requests a second")
    parser.add_argument("--cases", type=lambda text: text.split(","), default=list(CASES),
                        help=f"comma-separated, of {','.join(CASES)} (all unless told)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where kbroker keeps its data")
    parser.add_argument("--smoke", action="store_true", help="one round of a few hundred requests (the other "
                        "options still win): a check that the script runs, not a measurement")
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)  # the floor's own process
    if "--smoke" in argv:
        parser.set_defaults(**SMOKE_DEFAULTS)
    arguments = parser.parse_args(argv)
    unknown = [case for case in arguments.cases if case not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}: choose from {', '.join(CASES)}")
    return arguments


def main(argv: list[str]) -> int:
    arguments = parse_arguments(argv)
    if arguments.echo_server:
        serve_echo(ECHO_LIFETIME_S)
        return 0
    run(arguments)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
