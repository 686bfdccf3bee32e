"""Consumer groups on kbroker beside the tansu peer, measured with confluent-kafka in the same run.

    python bench/group_bench.py [--members 10] [--partitions 20] [--commit-seconds 3] [--rounds 1]
                                [--brokers kbroker,tansu] [--dir /tmp]

Each round starts every broker afresh as a real process on a free loopback port
(bench/broker_bench.py's BrokerUnderTest; tansu with memory storage), then:
  time to Stable   --members confluent-kafka consumers, each a process of its own
                   (compat_tests/group_member.py), are created and connected first; the
                   clock starts when all are told to subscribe at once and stops at the last
                   assignment change of the rebalance that leaves every member with its even
                   share of the --partitions partitions, no overlap (taken from the members'
                   own CLOCK_MONOTONIC event times). Classic protocol (eager, range), and
                   KIP-848 (group.protocol=consumer) where the broker advertises
                   ConsumerGroupHeartbeat.
  commits/s        one consumer in a group of its own, synchronous commits of an explicit,
                   growing offset of one partition, for --commit-seconds; the same two protocols.
Medians over the rounds, and the kbroker/tansu ratio of the medians. Every wait is bounded;
nothing here fails on time.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [BENCH_DIR, REPO_DIR]

import confluent_kafka  # noqa: E402

from broker_bench import BrokerUnderTest, free_port, tansu_binary  # noqa: E402
from broker_bench_clients import create_topic  # noqa: E402
from testkit.group_member import Member, balanced, wait_until  # noqa: E402
from kbroker.wire.frame import decode_response, encode_request  # noqa: E402
from kbroker.wire.schema import API_BY_NAME  # noqa: E402

READY_TIMEOUT_S = 30
STABLE_TIMEOUT_S = 60
CALL_TIMEOUT_S = 10
PROTOCOLS = {"classic": "confluent-classic", "consumer": "confluent-consumer"}
CONSUMER_GROUP_HEARTBEAT = API_BY_NAME["ConsumerGroupHeartbeat"].key


def advertised_api_keys(port: int) -> set[int]:
    api = API_BY_NAME["ApiVersions"]
    body = api.request_class(client_software_name="group-bench", client_software_version="1")
    with socket.create_connection(("127.0.0.1", port), timeout=CALL_TIMEOUT_S) as connection:
        connection.sendall(encode_request(api.key, 3, 1, "group-bench", body))
        stream = connection.makefile("rb")
        size = struct.unpack(">i", stream.read(4))[0]
        _, response = decode_response(api.key, 3, stream.read(size))
    return {entry.api_key for entry in response.api_keys}


def time_to_stable(bootstrap: str, protocol: str, members_count: int, partitions: int, log_dir: str, tag: str) -> float:
    """Seconds from 'subscribe now' to the last assignment change of the balanced group."""
    topic = group = f"stable-{protocol}-{tag}"
    create_topic(bootstrap, topic, partitions, CALL_TIMEOUT_S)
    members = [Member(PROTOCOLS[protocol], bootstrap, group, topic, f"{group}-{i}", log_dir, session_timeout_ms=10000,
                      heartbeat_interval_ms=500, wait_for_start=True).start() for i in range(members_count)]
    try:
        if not wait_until(lambda: all(m.last("ready") for m in members), READY_TIMEOUT_S):
            raise RuntimeError("members not ready: " + "; ".join(m.describe() for m in members))
        started = time.monotonic()
        for member in members:
            member.send("start")
        if not wait_until(lambda: balanced(members, partitions), STABLE_TIMEOUT_S, 0.01):
            raise RuntimeError("not stable: " + "; ".join(m.describe() for m in members))
        last_change = max(event["t"] for m in members for event in m.events if event["event"] in ("assigned", "revoked"))
        return last_change - started
    finally:
        for member in members:
            member.send("close")
        for member in members:
            try:
                member.close(15)
            except AssertionError:
                pass  # killed by close(); a slow leave does not spoil the figure taken already


def commits_per_second(bootstrap: str, protocol: str, seconds: float, tag: str) -> float:
    topic = group = f"commits-{protocol}-{tag}"
    create_topic(bootstrap, topic, 1, CALL_TIMEOUT_S)
    # session.timeout.ms as the members': tansu holds a new group's first JoinGroup for half of it (22.5 s of the default)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                                         "enable.auto.commit": False,
                                         **({"session.timeout.ms": 10000} if protocol == "classic" else {})})
    assigned = []
    consumer.subscribe([topic], on_assign=lambda _c, partitions: assigned.extend(partitions))
    try:
        deadline = time.monotonic() + STABLE_TIMEOUT_S
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.05)
        if not assigned:
            raise RuntimeError("the committing consumer got no partition")
        commits = 0
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, commits)], asynchronous=False)
            commits += 1
        return commits / (time.monotonic() - started)
    finally:
        consumer.close()


def bench_broker(broker: BrokerUnderTest, arguments, round_index: int, results: dict) -> None:
    broker.spawn(free_port())
    try:
        broker.wait_ready(READY_TIMEOUT_S)
        served = advertised_api_keys(broker.port)
        log_dir = tempfile.mkdtemp(prefix="group-bench-", dir=arguments.dir)
        for protocol in PROTOCOLS:
            if protocol == "consumer" and CONSUMER_GROUP_HEARTBEAT not in served:
                print(f"  {broker.name}: no ConsumerGroupHeartbeat advertised, KIP-848 skipped")
                continue
            tag = f"r{round_index}"
            for metric, measure in ((f"time to Stable, {arguments.members} members, {protocol}",
                                     lambda: time_to_stable(broker.bootstrap, protocol, arguments.members, arguments.partitions, log_dir, tag)),
                                    (f"commits/s, one consumer, {protocol}",
                                     lambda: commits_per_second(broker.bootstrap, protocol, arguments.commit_seconds, tag))):
                try:
                    value = measure()
                except Exception as error:  # reported; the other figures still count
                    print(f"  {broker.name}: {metric}: failed: {error}")
                    continue
                results.setdefault(metric, {}).setdefault(broker.name, []).append(value)
                print(f"  {broker.name}: {metric}: {value:.3f}", flush=True)
    finally:
        broker.stop()


def report(results: dict, names: list[str], units: str = "time to Stable in seconds (lower is better); "
                                                         "commits/s (higher is better)") -> None:
    """Medians per metric and broker, and the ratio of the first broker to the second (the peer)."""
    print()
    header = ["metric", *names] + (["kbroker/" + names[-1]] if len(names) == 2 else [])
    rows = [header]
    for metric, by_broker in results.items():
        medians = {name: statistics.median(by_broker[name]) for name in names if by_broker.get(name)}
        row = [metric, *(f"{medians[name]:.3f}" if name in medians else "n/a" for name in names)]
        if len(names) == 2:
            row.append(f"{medians[names[0]] / medians[names[1]]:.2f}" if len(medians) == 2 and medians[names[1]] else "")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths))))
    print(units)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--commit-seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--brokers", default="kbroker,tansu", help="comma-separated, kbroker and/or tansu; the last is the peer")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where kbroker's data and the members' logs go")
    arguments = parser.parse_args(argv)
    names = [name.strip() for name in arguments.brokers.split(",") if name.strip()]
    if not names or set(names) - {"kbroker", "tansu"}:
        raise SystemExit("--brokers takes kbroker and/or tansu")
    tansu_path = tansu_binary() if "tansu" in names else None
    brokers = [BrokerUnderTest(name, arguments.dir, tansu_path) for name in names]
    results: dict = {}
    for round_index in range(arguments.rounds):
        for broker in brokers if round_index % 2 == 0 else brokers[::-1]:
            print(f"round {round_index}: {broker.name}", flush=True)
            bench_broker(broker, arguments, round_index, results)
    report(results, names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
