"""What broker-side schema validation costs (issue 27): the same Avro-framed records produced to a topic
with confluent.value.schema.validation=true and to one without, on one kbroker process.

    python bench/schema_validation_bench.py [--records 200000] [--size 100] [--rounds 3] [--dir /tmp]

Each round starts kbroker afresh (bench/broker_bench.py's BrokerUnderTest, with its schema registry on a
free port), registers one Avro schema, then alternates the two topics: one confluent-kafka producer
(acks=all, linger.ms=5) sends --records values of --size bytes, each the registry's wire format (zero byte,
schema id, Avro body). Printed per topic: MB/s and the broker's CPU milliseconds per MB (utime+stime
from /proc), medians over the rounds, and the validated/plain ratios. Nothing here fails on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [BENCH_DIR, REPO_DIR]

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from broker_bench import BrokerUnderTest, free_port  # noqa: E402

START_TIMEOUT_S = 30
LIMIT_S = 120
SCHEMA = {"type": "record", "name": "Payload", "fields": [{"name": "data", "type": "bytes"}]}


def register(registry_url: str, subject: str) -> int:
    body = json.dumps({"schema": json.dumps(SCHEMA)}).encode()
    request = urllib.request.Request(f"{registry_url}/subjects/{subject}/versions", data=body, method="POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())["id"]


def framed_value(schema_id: int, size: int) -> bytes:
    """A record of ``size`` bytes in the registry's wire format: its Avro body one bytes field."""
    body_bytes = max(0, size - 7)
    length = body_bytes * 2  # Avro's zig-zag long
    varint = bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        varint.append(byte | (0x80 if length else 0))
        if not length:
            break
    return b"\x00" + schema_id.to_bytes(4, "big") + bytes(varint) + b"x" * body_bytes


def produce(bootstrap: str, topic: str, value: bytes, count: int) -> float:
    """Seconds to have ``count`` copies of ``value`` acknowledged."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                         "queue.buffering.max.messages": 1_000_000})
    failed = []
    started = time.monotonic()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda error, _: error is not None and failed.append(error))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    remaining = producer.flush(LIMIT_S)
    elapsed = time.monotonic() - started
    if remaining or failed:
        raise RuntimeError(f"{topic}: {remaining} not delivered, {len(failed)} failed ({failed[:1]})")
    return elapsed


def one_round(arguments, results: dict) -> None:
    registry_port = free_port()
    broker = BrokerUnderTest("kbroker", arguments.dir, kbroker_overrides=(
        f"schema.registry.listeners=http://127.0.0.1:{registry_port}",))
    broker.spawn(free_port())
    try:
        broker.wait_ready(START_TIMEOUT_S)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = {"validated": {"confluent.value.schema.validation": "true"}, "plain": {}}
        for future in admin.create_topics([NewTopic(name, 1, 1, config=config)
                                           for name, config in topics.items()]).values():
            future.result(30)
        schema_id = register(f"http://127.0.0.1:{registry_port}", "validated-value")
        value = framed_value(schema_id, arguments.size)
        payload_mb = len(value) * arguments.records / 1e6
        for topic in ("plain", "validated"):
            produce(broker.bootstrap, topic, value, 1000)  # connections and metadata warm
            cpu_before = broker.cpu_seconds()
            seconds = produce(broker.bootstrap, topic, value, arguments.records)
            results[topic]["MB/s"].append(payload_mb / seconds)
            results[topic]["broker CPU ms/MB"].append((broker.cpu_seconds() - cpu_before) * 1000 / payload_mb)
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    arguments = parser.parse_args(argv)
    results = {topic: {"MB/s": [], "broker CPU ms/MB": []} for topic in ("plain", "validated")}
    for round_index in range(arguments.rounds):
        one_round(arguments, results)
        print(f"round {round_index + 1}: " + ", ".join(
            f"{topic} {values['MB/s'][-1]:.1f} MB/s {values['broker CPU ms/MB'][-1]:.1f} ms/MB"
            for topic, values in results.items()), flush=True)
    print(f"\n{arguments.records:,} x {arguments.size} B Avro-framed values, acks=all, medians of {arguments.rounds}:")
    for measure in ("MB/s", "broker CPU ms/MB"):
        plain = statistics.median(results["plain"][measure])
        validated = statistics.median(results["validated"][measure])
        ratio = f"{validated / plain:.2f}" if plain else "n/a"  # a short run's CPU can be below one clock tick
        print(f"  {measure:18} plain {plain:8.1f}   validated {validated:8.1f}   validated/plain {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
