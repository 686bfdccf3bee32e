"""Replication's cost: produce throughput and acknowledgement latency on a 3-broker loopback cluster
(replication factor 3, min.insync.replicas=2) with acks=all and acks=1, and with acks=all replicating over
an SSL inter-broker listener (mutual TLS), beside a single node, in one run.

    python bench/replication_bench.py [--count 200000] [--size 100] [--rate 2000] [--seconds 5] [--dir /tmp]

  throughput  --count values of --size bytes over 6 partitions, one confluent-kafka producer,
              until every acknowledgement is in: MB/s and messages/s.
  latency     --rate messages/s for --seconds: from produce() to the delivery report, p50 and p99.
Ratios are against the single node with acks=all (each acknowledged write fsynced there; in the
cluster, fsynced on the leader and on every in-sync follower). Every wait is bounded; nothing here
fails on time.
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
sys.path[:0] = [BENCH_DIR, REPO_DIR]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker_bench_clients import produce_throughput  # noqa: E402
from testkit.broker_process import BrokerProcess  # noqa: E402
from testkit.quorum_process import Quorum, add_listener  # noqa: E402

PARTITIONS = 6
DEADLINE_S = 300


def create(bootstrap: str, topic: str, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if replication > 1 else {}
    admin.create_topics([NewTopic(topic, PARTITIONS, replication, config=config)])[topic].result(30)
    time.sleep(1)  # every broker learns the leaders


def tls_between_brokers(root: Path) -> Quorum:
    """Three combined nodes replicating over an SSL inter-broker listener with client certificates
    required (each fetch, marker and their answers encrypted); clients and the quorum on plaintext."""
    from testkit.secure_broker import make_certificates

    root.mkdir(parents=True)
    certificates = make_certificates(root)
    cluster = Quorum(root, combined=True, overrides=(
        "listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL", "listener.name.internal.ssl.client.auth=required",
        f"ssl.keystore.location={certificates.broker}", f"ssl.truststore.location={certificates.ca}"))
    add_listener(cluster, "INTERNAL", client_listener="EXTERNAL")
    return cluster


def latency(bootstrap: str, topic: str, acks: str, rate: int, seconds: float) -> tuple[float, float]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    producer.list_topics(topic=topic, timeout=30)
    samples: list[float] = []
    value = b"x" * 100
    started = time.perf_counter()
    count = int(rate * seconds)
    for index in range(count):
        due = started + index / rate
        while (left := due - time.perf_counter()) > 0:  # waiting in poll, not spinning: 2 cores, 4 processes
            producer.poll(left)
        sent = time.perf_counter()
        producer.produce(topic, value, partition=index % PARTITIONS,
                         on_delivery=lambda error, _m, sent=sent: error is None and samples.append(
                             (time.perf_counter() - sent) * 1000))
    producer.flush(60)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def measure(name: str, bootstrap: str, topic: str, acks: str, arguments) -> dict:
    result = produce_throughput(bootstrap, topic, PARTITIONS, arguments.count, arguments.size, DEADLINE_S, acks=acks)
    p50, p99 = latency(bootstrap, topic + "-latency", acks, arguments.rate, arguments.seconds)
    row = {"name": name, "mb_s": result["bytes"] / result["seconds"] / 1e6,
           "msg_s": result["messages"] / result["seconds"], "p50": p50, "p99": p99}
    print(f"{name:46} {row['mb_s']:7.1f} MB/s {row['msg_s']:10,.0f} msg/s   p50 {p50:6.2f} ms  p99 {p99:6.2f} ms",
          flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--dir", default=None)
    arguments = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=arguments.dir) as root:
        single = BrokerProcess(Path(root) / "single")
        single.start()
        try:
            for topic in ("single", "single-latency"):
                create(single.bootstrap, topic, 1)
            rows.append(measure("single node, acks=all", single.bootstrap, "single", "all", arguments))
        finally:
            single.kill()
        clusters = [(Quorum(Path(root) / "cluster", combined=True), ("all", "1"), ""),
                    (tls_between_brokers(Path(root) / "tls"), ("all",), ", TLS between brokers")]
        for cluster, acks_settings, how in clusters:
            try:
                cluster.start()
                bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
                for acks in acks_settings:
                    create(bootstrap, f"acks-{acks}", 3)
                    create(bootstrap, f"acks-{acks}-latency", 3)
                    rows.append(measure(f"3 brokers, RF=3, acks={acks}{how}", bootstrap, f"acks-{acks}", acks,
                                        arguments))
            finally:
                cluster.close()
    base = rows[0]
    for row in rows[1:]:
        print(f"{row['name']} / single node acks=all: throughput x{row['msg_s'] / base['msg_s']:.2f}, "
              f"p99 latency x{row['p99'] / base['p99']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
