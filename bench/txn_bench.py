"""Transactions on kbroker beside the tansu peer, measured with confluent-kafka in the same run.

    python bench/txn_bench.py [--seconds 3] [--check-transactions 50] [--rounds 1] [--brokers kbroker,tansu]
                              [--dir /tmp]

Each round starts every broker afresh as a real process on a free loopback port
(bench/broker_bench.py's BrokerUnderTest; tansu with memory storage), then with
one confluent-kafka transactional producer:
  transactions/s   begin, produce, commit, for --seconds: one record per transaction, then
                   100 records of 100 bytes over 4 partitions per transaction (each commit
                   waits for its markers' round trip; records/s is 100 times that).
  read_committed   --check-transactions committed and as many aborted transactions of 10
                   records, interleaved, read back by a read_committed consumer: how many aborted
                   records it was shown and how many committed ones it missed (both must be 0).
Medians over the rounds, and the kbroker/tansu ratio of the medians. Every wait is bounded;
nothing here fails on time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [BENCH_DIR, REPO_DIR]

import confluent_kafka  # noqa: E402

from broker_bench import BrokerUnderTest, free_port, tansu_binary  # noqa: E402
from broker_bench_clients import create_topic  # noqa: E402
from group_bench import report  # noqa: E402

READY_TIMEOUT_S = 30
CALL_TIMEOUT_S = 30
PARTITIONS = 4
CHECK_RECORDS = 10
READ_TIMEOUT_S = 30


def producer(bootstrap: str) -> confluent_kafka.Producer:
    made = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}",
                                     "linger.ms": 0})
    made.init_transactions(CALL_TIMEOUT_S)
    return made


def transactions_per_second(bootstrap: str, topic: str, records: int, seconds: float) -> float:
    sender = producer(bootstrap)
    value = b"x" * 100
    done = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        sender.begin_transaction()
        for index in range(records):
            sender.produce(topic, value=value, partition=index % PARTITIONS)
        sender.commit_transaction(CALL_TIMEOUT_S)
        done += 1
    return done / (time.monotonic() - started)


def read_committed_check(bootstrap: str, topic: str, transactions: int) -> tuple[int, int]:
    """(aborted records shown, committed records missed) to a read_committed consumer."""
    sender = producer(bootstrap)
    committed, aborted = set(), set()
    for number in range(2 * transactions):
        commit = number % 2 == 0
        values = {f"t{number}-{index}" for index in range(CHECK_RECORDS)}
        sender.begin_transaction()
        for index, value in enumerate(sorted(values)):
            sender.produce(topic, value=value.encode(), partition=index % PARTITIONS)
        sender.flush(CALL_TIMEOUT_S)  # the records reach the broker before the abort
        if commit:
            sender.commit_transaction(CALL_TIMEOUT_S)
            committed |= values
        else:
            sender.abort_transaction(CALL_TIMEOUT_S)
            aborted |= values
    sender.begin_transaction()  # a last committed record per partition marks the end
    for partition in range(PARTITIONS):
        sender.produce(topic, value=f"end-{partition}".encode(), partition=partition)
    sender.commit_transaction(CALL_TIMEOUT_S)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(PARTITIONS)])
    seen, ends = set(), set()
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        while len(ends) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            value = message.value().decode()
            (ends if value.startswith("end-") else seen).add(value)
    finally:
        consumer.close()
    return len(seen & aborted), len(committed - seen)


def bench_broker(broker: BrokerUnderTest, arguments, results: dict) -> None:
    broker.spawn(free_port())
    try:
        broker.wait_ready(READY_TIMEOUT_S)
        measures = []
        for records in (1, 100):
            topic = f"txn-bench-{records}-{uuid.uuid4().hex[:6]}"
            measures.append((f"transactions/s, {records} record(s) each", topic,
                             lambda topic=topic, records=records: transactions_per_second(
                                 broker.bootstrap, topic, records, arguments.seconds)))
        check_topic = f"txn-check-{uuid.uuid4().hex[:6]}"
        check = {}

        def run_check(name):
            if not check:
                check.update(zip(("aborted", "missed"), read_committed_check(broker.bootstrap, check_topic,
                                                                              arguments.check_transactions)))
            return check[name]

        measures.append(("read_committed: aborted records shown", check_topic, lambda: run_check("aborted")))
        measures.append(("read_committed: committed records missed", check_topic, lambda: run_check("missed")))
        created = set()
        for metric, topic, measure in measures:
            try:
                if topic not in created:
                    create_topic(broker.bootstrap, topic, PARTITIONS, CALL_TIMEOUT_S)
                    created.add(topic)
                value = measure()
            except Exception as error:  # reported; the other figures still count
                print(f"  {broker.name}: {metric}: failed: {error}")
                continue
            results.setdefault(metric, {}).setdefault(broker.name, []).append(value)
            print(f"  {broker.name}: {metric}: {value:.1f}", flush=True)
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--check-transactions", type=int, default=50,
                        help="committed transactions of the read_committed check, and as many aborted")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--brokers", default="kbroker,tansu", help="comma-separated, kbroker and/or tansu; the last is the peer")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where kbroker's data goes")
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
            bench_broker(broker, arguments, results)
    report(results, names, "transactions/s (higher is better); read_committed counts must be 0")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
