"""One consumer-group member in its own process, so that a test can close it or SIGKILL it.

    python -m compat_tests.group_worker <client> <bootstrap> <topic> <group> [instance id]

``client`` is confluent-classic, confluent-consumer (KIP-848), kafka-python or
aiokafka. The worker subscribes, commits after every batch it processes and
reports on stdout, one JSON object per line: ``{"assigned": [partitions]}``
whenever its assignment changes and ``{"records": [[partition, offset], ...]}``
for each processed batch (committed right after the report). A line ``close`` on
stdin makes it leave the group cleanly; it also stops after 120 s in any case.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import sys
import time

LIFETIME_S = 120
SESSION_TIMEOUT_MS = 6000


def report(**fields) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def told_to_close() -> bool:
    readable, _, _ = select.select([sys.stdin], [], [], 0)
    return bool(readable) and sys.stdin.readline().strip() in ("close", "")


class Assignments:
    """Reports the assignment when it changes."""

    def __init__(self) -> None:
        self.last = None

    def see(self, partitions) -> None:
        current = sorted(partitions)
        if current != self.last:
            self.last = current
            report(assigned=current)


def run_confluent(bootstrap, topic, group, instance, protocol) -> None:
    import confluent_kafka

    settings = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "group.protocol": protocol}
    if protocol == "classic":
        settings |= {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 500}
    if instance:
        settings["group.instance.id"] = instance
    consumer = confluent_kafka.Consumer(settings)
    consumer.subscribe([topic])
    assignments = Assignments()
    stop = time.monotonic() + LIFETIME_S
    while time.monotonic() < stop and not told_to_close():
        messages = consumer.consume(num_messages=500, timeout=0.2)
        assignments.see(tp.partition for tp in consumer.assignment())
        batch = [(m.partition(), m.offset()) for m in messages if m.error() is None]
        if batch:  # reported before the commit: a kill in between shows as a re-read, never as a gap
            report(records=batch)
            consumer.commit(asynchronous=False)
    consumer.close()


def run_kafka_python(bootstrap, topic, group, instance) -> None:
    import kafka

    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                   enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
                                   heartbeat_interval_ms=500)
    assignments = Assignments()
    stop = time.monotonic() + LIFETIME_S
    while time.monotonic() < stop and not told_to_close():
        polled = consumer.poll(timeout_ms=200, max_records=500)
        assignments.see(tp.partition for tp in consumer.assignment())
        batch = [(m.partition, m.offset) for messages in polled.values() for m in messages]
        if batch:
            report(records=batch)
            consumer.commit()
    consumer.close()


def run_aiokafka(bootstrap, topic, group, instance) -> None:
    import aiokafka

    async def main() -> None:
        consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                             auto_offset_reset="earliest", enable_auto_commit=False,
                                             session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=500)
        await consumer.start()
        assignments = Assignments()
        stop = time.monotonic() + LIFETIME_S
        while time.monotonic() < stop and not told_to_close():
            polled = await consumer.getmany(timeout_ms=200, max_records=500)
            assignments.see(tp.partition for tp in consumer.assignment())
            batch = [(m.partition, m.offset) for messages in polled.values() for m in messages]
            if batch:
                report(records=batch)
                await consumer.commit()
        await consumer.stop()

    asyncio.run(main())


def main(argv: list[str]) -> None:
    client, bootstrap, topic, group, *rest = argv
    instance = rest[0] if rest else None
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    if client == "confluent-classic":
        run_confluent(bootstrap, topic, group, instance, "classic")
    elif client == "confluent-consumer":
        run_confluent(bootstrap, topic, group, instance, "consumer")
    elif client == "kafka-python":
        run_kafka_python(bootstrap, topic, group, instance)
    elif client == "aiokafka":
        run_aiokafka(bootstrap, topic, group, instance)
    else:
        raise SystemExit(f"unknown client {client}")
    report(closed=True)


if __name__ == "__main__":
    main(sys.argv[1:])
