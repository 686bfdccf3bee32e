"""A share group (KIP-932) beside a consumer group on the same data, on kbroker, with confluent-kafka.

    python bench/share_bench.py [--records 200000] [--size 100] [--partitions 4] [--consumers 4]
                                [--rounds 1] [--dir /tmp]

Each round starts kbroker afresh as a process on a free loopback port (bench/broker_bench.py's
BrokerUnderTest), produces --records records of --size bytes to a topic of --partitions partitions, then
reads them all twice, each time with --consumers consumers, each a process of its own:
  consumer group   confluent-kafka Consumers in one classic group (auto.offset.reset=earliest): each
                   partition read by one member, fetched in batches, no acknowledgements;
  share group      confluent-kafka ShareConsumers in one share group (implicit acknowledgement: each poll
                   accepts the previous one's records): the members share the partitions, the broker hands
                   out each record once and keeps its state through the share coordinator.
records/s counts from the first record any member received to the last; broker CPU is the broker process's
user + system time over the same read, per 1,000 records. Both exclude joining the group: the share group's
start offsets are set to the earliest before its members join (``kbroker groups reset-offsets --share``, as
kafka-share-groups --reset-offsets), which initializes its partitions' state, so that each member is assigned
partitions at its first heartbeat. (A member that joins a group whose state is not initialized yet learns of
its partitions a heartbeat later, 5 s, as with Kafka, while the others read: that wait would count as reading.)
Nothing here fails on time; every wait is bounded.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [BENCH_DIR, REPO_DIR]

from broker_bench import BrokerUnderTest, free_port  # noqa: E402

READY_TIMEOUT_S = 30
READ_TIMEOUT_S = 180


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                         "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=n % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def share_from_earliest(bootstrap: str, group: str, topic: str) -> None:
    """The share group ``group`` made, its start offsets on ``topic`` at the earliest (its partitions' state
    initialized), before any member joins."""
    subprocess.run([sys.executable, "-m", "kbroker.cli", "groups", "reset-offsets", "--bootstrap-server", bootstrap,
                    "--share", "--topic", topic, "--to-earliest", "--execute", group],
                   cwd=REPO_DIR, check=True, stdout=subprocess.DEVNULL, timeout=READY_TIMEOUT_S)


def member(kind: str, bootstrap: str, topic: str, group: str, total: int, received, times, index: int) -> None:
    """One consumer process: read until the members together received ``total`` records (or the timeout);
    note when this member got its first and last record."""
    import confluent_kafka

    if kind == "share":
        consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        poll = lambda: consumer.poll(0.1)  # noqa: E731
    else:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        poll = lambda: consumer.consume(1000, 0.1)  # noqa: E731
    consumer.subscribe([topic])
    first = last = 0.0
    deadline = time.monotonic() + READ_TIMEOUT_S
    while received.value < total and time.monotonic() < deadline:
        got = sum(1 for message in poll() if message.error() is None)
        if got:
            now = time.monotonic()
            first = first or now
            last = now
            with received.get_lock():
                received.value += got
    if kind == "share":
        consumer.commit_sync(10)
    consumer.close()
    times[2 * index], times[2 * index + 1] = first, last


def read_all(broker: BrokerUnderTest, kind: str, topic: str, group: str, consumers: int, total: int) -> dict:
    context = multiprocessing.get_context("spawn")
    received = context.Value("q", 0)
    times = context.Array("d", 2 * consumers)
    cpu_before = broker.cpu_seconds()
    processes = [context.Process(target=member, args=(kind, broker.bootstrap, topic, group, total, received, times, i))
                 for i in range(consumers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(READ_TIMEOUT_S + 30)
        if process.is_alive():
            process.kill()
            process.join()
    cpu = broker.cpu_seconds() - cpu_before
    firsts = [times[2 * i] for i in range(consumers) if times[2 * i]]
    lasts = [times[2 * i + 1] for i in range(consumers) if times[2 * i + 1]]
    span = (max(lasts) - min(firsts)) if firsts else float("nan")
    return {"records": received.value, "seconds": span, "records_per_s": received.value / span if span else 0.0,
            "members_reading": len(firsts), "cpu_ms_per_1000": cpu * 1000 / max(1, received.value) * 1000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    arguments = parser.parse_args(argv)
    results: dict[str, list[dict]] = {"consumer group": [], "share group": []}
    for round_index in range(arguments.rounds):
        broker = BrokerUnderTest("kbroker", arguments.dir)
        broker.spawn(free_port())
        try:
            broker.wait_ready(READY_TIMEOUT_S)
            topic = f"work-{round_index}"
            produce(broker.bootstrap, topic, arguments.partitions, arguments.records, arguments.size)
            results["consumer group"].append(read_all(broker, "consumer", topic, f"classic-{round_index}",
                                                      arguments.consumers, arguments.records))
            share_from_earliest(broker.bootstrap, f"share-{round_index}", topic)
            results["share group"].append(read_all(broker, "share", topic, f"share-{round_index}",
                                                   arguments.consumers, arguments.records))
        finally:
            broker.stop()
        for name, rounds in results.items():
            last = rounds[-1]
            print(f"round {round_index + 1} {name}: {last['records']} records in {last['seconds']:.2f} s, "
                  f"{last['records_per_s']:,.0f} records/s, broker CPU {last['cpu_ms_per_1000']:.1f} ms per 1,000 "
                  f"records, {last['members_reading']} of {arguments.consumers} members read", flush=True)
    print(f"\n{arguments.records:,} x {arguments.size} B records, {arguments.partitions} partitions, "
          f"{arguments.consumers} consumers, medians of {arguments.rounds} round(s):")
    medians = {name: (statistics.median(r["records_per_s"] for r in rounds),
                      statistics.median(r["cpu_ms_per_1000"] for r in rounds)) for name, rounds in results.items()}
    for name, (rate, cpu) in medians.items():
        print(f"  {name:15} {rate:>10,.0f} records/s   broker CPU {cpu:6.1f} ms per 1,000 records")
    share, consumer = medians["share group"], medians["consumer group"]
    # n/a where the consumer group's figure is 0: a short run can read in one poll, or use less CPU than a clock tick
    rate_ratio, cpu_ratio = (f"{ours / theirs:.2f}x" if theirs else "n/a" for ours, theirs in zip(share, consumer))
    print(f"  share/consumer  {rate_ratio} the records/s at {cpu_ratio} the CPU per record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
