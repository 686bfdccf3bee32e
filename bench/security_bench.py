"""What security costs: produce and consume throughput of one broker process over each of its
listeners (PLAINTEXT, SSL with a client certificate, SASL_SSL with SCRAM-SHA-512, SASL_PLAINTEXT
with PLAIN), in one run, as ratios to PLAINTEXT. Fetches leave by sendfile on PLAINTEXT only; TLS
encrypts them from buffers.

    python bench/security_bench.py [--count 300000] [--size 100] [--rounds 3] [--dir /tmp]

Each listener gets a topic (one partition) per round: --count values of --size bytes produced with
acks=1 by one confluent-kafka producer until every acknowledgement is in, then read back from
offset 0 by one consumer. The listeners take turns within each round; medians (and ranges) over
the rounds are printed. Every wait is bounded; nothing here fails on time.
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
sys.path.insert(0, os.path.dirname(BENCH_DIR))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,  # noqa: E402
                                   UserScramCredentialUpsertion)

from testkit.secure_broker import SecureBroker, make_certificates  # noqa: E402

WAYS = ["PLAINTEXT", "SSL", "SCRAM-SHA-512", "PLAIN"]
DEADLINE_S = 120


def produce(config: dict, topic: str, count: int, size: int) -> float:
    producer = Producer({**config, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(DEADLINE_S):
        raise TimeoutError("produce did not finish")
    return count * size / (time.perf_counter() - started) / 1e6


def consume(config: dict, topic: str, count: int, size: int) -> float:
    # The local queue may hold the whole topic: with librdkafka's defaults it pauses fetching for a
    # second whenever Python falls behind, which would measure the client (see broker_bench_clients).
    consumer = Consumer({**config, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                         "queued.min.messages": max(100_000, count), "queued.max.messages.kbytes": 1024 * 1024,
                         "fetch.queue.backoff.ms": 5})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received, started = 0, time.perf_counter()
    deadline = started + DEADLINE_S
    while received < count and time.perf_counter() < deadline:
        for message in consumer.consume(min(10_000, count - received), 1.0):
            if message.error() is None:
                received += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return received * size / elapsed / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=arguments.dir) as work:
        directory = Path(work)
        broker = SecureBroker(directory / "data", make_certificates(directory))
        broker.start()
        try:
            admin = AdminClient(broker.confluent_config("PLAINTEXT"))
            upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                                  b"alice-secret")
            admin.alter_user_scram_credentials([upsert])["alice"].result(30)
            results: dict[str, list] = {way: [] for way in WAYS}
            for round_ in range(arguments.rounds):
                for way in WAYS:
                    topic = f"bench-{way.lower()}-{round_}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    config = broker.confluent_config(way)
                    results[way].append((produce(config, topic, arguments.count, arguments.size),
                                         consume(config, topic, arguments.count, arguments.size)))
        finally:
            broker.kill()
    medians = {way: [statistics.median(run[i] for run in runs) for i in (0, 1)] for way, runs in results.items()}
    base_produce, base_consume = medians["PLAINTEXT"]
    print(f"{arguments.count:,} x {arguments.size} B, acks=1, one partition per listener, "
          f"median of {arguments.rounds} rounds (range)")
    for way, runs in results.items():
        produced, consumed = medians[way]
        low_high = [(min(run[i] for run in runs), max(run[i] for run in runs)) for i in (0, 1)]
        print(f"{way:14} produce {produced:7.1f} MB/s ({low_high[0][0]:.0f}-{low_high[0][1]:.0f}, "
              f"x{produced / base_produce:.2f})   consume {consumed:7.1f} MB/s ({low_high[1][0]:.0f}-"
              f"{low_high[1][1]:.0f}, x{consumed / base_consume:.2f})")


if __name__ == "__main__":
    main()
