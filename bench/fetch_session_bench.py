"""A consumer of many partitions of which a few receive data: what fetch sessions (KIP-227) save the broker.

    python bench/fetch_session_bench.py [--partitions 2000] [--active 10] [--rate 1000] [--seconds 10]
                                        [--rounds 3] [--warm-up-s 2] [--before-python PATH] [--dir /tmp]

Each round starts kbroker afresh as a process on a free loopback port for each way of running it, in turn:
  sessions      the defaults: the consumer's fetches open a session and name only what changed; answers
                carry only the partitions with something new;
  no sessions   max.incremental.fetch.session.cache.slots=0: every fetch names and is answered with every
                partition, as before sessions were granted;
  before        (with --before-python) the same as "no sessions", served by another installed kbroker (the
                interpreter given runs ``-m kbroker.cli``): the code before this change, for its long poll.
A topic of --partitions partitions is created; a kafka-python consumer (it uses sessions, as Kafka's Java
consumer does; librdkafka does not) is assigned all of them from their end, and a confluent-kafka producer
sends 100 B records at --rate records/s round robin to --active of them for --seconds. Printed per way:
the broker's CPU per second of wall time (its user + system time over the measured window, which starts
after a --warm-up-s warm-up), the consumer's share of it (less the same round's "producer only" way: the producer
alone, no consumer), fetch requests per second (the broker's own count, kbroker_request_latency_seconds_count
for Fetch), and the records the consumer received against those sent in the window. Nothing here fails on time; every wait is bounded.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import urllib.request

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [BENCH_DIR, REPO_DIR]

from broker_bench import BrokerUnderTest, free_port  # noqa: E402

READY_TIMEOUT_S = 30
PRODUCER_ONLY = "producer only"
CONTEXT = multiprocessing.get_context("spawn")


class Kbroker(BrokerUnderTest):
    """kbroker run by a given interpreter (another installation's, for --before-python)."""

    def __init__(self, work_dir: str, overrides: tuple[str, ...], python: str) -> None:
        super().__init__("kbroker", work_dir, kbroker_overrides=overrides)
        self.python = python
        if python != sys.executable:  # not from this checkout: start where no kbroker package is found first
            self.cwd = work_dir

    def _command(self):
        command, marker = super()._command()
        return [self.python, *command[1:]], marker


def consume(bootstrap: str, topic: str, partitions: int, counted_from, stop, ready, result) -> None:
    """Assigned every partition from its end; counts the records stamped from ``counted_from`` on until
    ``stop`` is set (at most 300 s)."""
    import kafka

    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   auto_offset_reset="latest", request_timeout_ms=30_000)
    assigned = [kafka.TopicPartition(topic, index) for index in range(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_end(*assigned)
    for partition in assigned:
        consumer.position(partition)  # resolve every position before the clock starts
    ready.set()
    received = 0
    give_up = time.monotonic() + 300
    try:
        while not stop.is_set() and time.monotonic() < give_up:
            for records in consumer.poll(timeout_ms=100).values():
                received += sum(1 for record in records if record.timestamp / 1000 >= counted_from.value)
    finally:
        consumer.close()
    result.put(received)


def produce(bootstrap: str, topic: str, active: int, rate: int, ready, window, result) -> None:
    """Says it is ready once its client exists, then produces over ``window``: (start, counted from, stop),
    in time.time(), set by the parent after that (so a slow start of this process shortens no window)."""
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1})
    value = b"x" * 100
    counted = sent = 0
    ready.set()
    give_up = time.monotonic() + 60
    while not window[2] and time.monotonic() < give_up:
        time.sleep(0.01)
    start_at, counted_from, stop_at = window[:]
    while time.time() < start_at:
        time.sleep(0.01)
    while (now := time.time()) < stop_at:
        due = int((now - start_at) * rate)
        stamp = int(now * 1000)  # the consumer counts by the same stamp
        while sent < due:
            producer.produce(topic, value, partition=sent % active, timestamp=stamp)
            sent += 1
            counted += stamp / 1000 >= counted_from
        producer.poll(0)
        time.sleep(0.002)
    assert producer.flush(30) == 0
    result.put(counted)


def fetch_requests(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith('kbroker_request_latency_seconds_count{api="Fetch"}'):
                return float(line.split()[-1])
    return 0.0


def one_round(way: str, overrides: tuple[str, ...], python: str, arguments) -> dict:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    metrics_port = free_port()
    broker = Kbroker(arguments.dir, (*overrides, f"metrics.port={metrics_port}"), python)
    broker.spawn(free_port())
    try:
        broker.wait_ready(READY_TIMEOUT_S)
        topic = "many"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        try:
            admin.create_topics([NewTopic(topic, arguments.partitions, 1)])[topic].result(60)
        except confluent_kafka.KafkaException as error:  # a retry of a create that had gone through
            if error.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        ready, stop, results = CONTEXT.Event(), CONTEXT.Event(), CONTEXT.Queue()
        counted_from_value = CONTEXT.Value("d", float("inf"))
        consumer = None
        if way != PRODUCER_ONLY:
            consumer = CONTEXT.Process(target=consume, args=(broker.bootstrap, topic, arguments.partitions,
                                                             counted_from_value, stop, ready, results))
            consumer.start()
            if not ready.wait(60):
                raise RuntimeError("the consumer was not positioned within 60 s")
        producer_ready, window = CONTEXT.Event(), CONTEXT.Array("d", 3)
        producer = CONTEXT.Process(target=produce, args=(broker.bootstrap, topic, arguments.active, arguments.rate,
                                                         producer_ready, window, results))
        producer.start()
        if not producer_ready.wait(60):
            raise RuntimeError("the producer was not ready within 60 s")
        start_at = time.time() + 0.5
        counted_from = counted_from_value.value = start_at + arguments.warm_up_s
        stop_at = counted_from + arguments.seconds
        window[:] = [start_at, counted_from, stop_at]
        while time.time() < counted_from:
            time.sleep(0.01)
        cpu_before, fetches_before = broker.cpu_seconds(), fetch_requests(metrics_port)
        while time.time() < stop_at:
            time.sleep(0.01)
        cpu, fetches = broker.cpu_seconds() - cpu_before, fetch_requests(metrics_port) - fetches_before
        window = stop_at - counted_from
        sent = results.get(timeout=60)  # the producer's, once it flushed
        time.sleep(2)  # the last records' way to the consumer
        stop.set()
        received = results.get(timeout=60) if consumer is not None else 0
        for process in (consumer, producer):
            if process is not None:
                process.join(30)
        return {"cpu per s": cpu / window * 1000, "fetches per s": fetches / window,
                "received": received, "sent": sent}
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--active", type=int, default=10)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warm-up-s", type=float, default=2.0, help="producing before the measured window")
    parser.add_argument("--before-python", help="an interpreter with another kbroker installed, run as 'before'")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    arguments = parser.parse_args(argv)
    ways = [("sessions", (), sys.executable), ("no sessions", ("max.incremental.fetch.session.cache.slots=0",), sys.executable),
            (PRODUCER_ONLY, (), sys.executable)]
    if arguments.before_python:
        ways.append(("before", (), arguments.before_python))
    figures: dict[str, list[dict]] = {way: [] for way, _, _ in ways}
    for round_index in range(1, arguments.rounds + 1):
        for way, overrides, python in ways:
            found = one_round(way, overrides, python, arguments)
            figures[way].append(found)
            print(f"round {round_index} {way}: broker CPU {found['cpu per s']:.0f} ms/s, {found['fetches per s']:.0f} "
                  f"fetches/s, received {found['received']} of {found['sent']}", flush=True)
    print(f"\n{arguments.partitions} partitions, {arguments.active} receiving {arguments.rate} records/s, "
          f"{arguments.seconds:.0f} s windows, medians of {arguments.rounds}:")
    producing = statistics.median(found["cpu per s"] for found in figures[PRODUCER_ONLY])
    print(f"  {PRODUCER_ONLY:12} broker CPU {producing:6.0f} ms/s (what the records' way in costs)")
    reading = {way: statistics.median(found["cpu per s"] - producing_each["cpu per s"]
                                      for found, producing_each in zip(figures[way], figures[PRODUCER_ONLY]))
               for way, _, _ in ways if way != PRODUCER_ONLY}
    for way, cpu in reading.items():
        total = statistics.median(found["cpu per s"] for found in figures[way])
        rate = statistics.median(found["fetches per s"] for found in figures[way])
        print(f"  {way:12} broker CPU {total:6.0f} ms/s, the consumer's share {cpu:6.0f} ms/s "
              f"({cpu / max(reading['sessions'], 1):5.1f}x sessions'), {rate:5.0f} fetches/s, "
              f"{cpu / max(rate, 1e-9):6.2f} ms of it per fetch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
