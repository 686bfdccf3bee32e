"""A consume-transform-produce worker, as an exactly-once application writes it with confluent-kafka.

    python -m compat_tests.eos_worker BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [IDLE_S]

It reads INPUT in group GROUP (read_committed), and for every batch it polls,
in one transaction: writes "out:<value>" to OUTPUT (same key and partition)
and commits the batch's next offsets with send_offsets_to_transaction. It prints
"committed <records in this transaction>" after each commit, and exits 0 when
nothing new was committed for IDLE_S seconds. A transaction the broker tells it to abort
is aborted (it prints "aborted <error>") and the batch read again from the group's committed offsets; a
fatal error (it was fenced) exits 3.

A fatal consumer error exits 5. librdkafka up to 2.16 at least, when its group session lapses
(the coordinator out of reach for session.timeout.ms, as two coordinator failovers in a row can
make it), forgets its member id and heartbeats without one; the coordinator answers a static
member so FENCED_INSTANCE_ID, as Kafka's does, and the consumer is fenced for good, as a crashed
worker would be. The session is 15 s (Kafka's default is 45 s) so that failovers seldom lapse it.

librdkafka up to 2.16 at least can hang for good in send_offsets_to_transaction,
past its own timeout, when the group coordinator it has cached drops out of a
Metadata response (a killed broker, fenced until it is back: Kafka lists only
unfenced brokers): confluentinc/librdkafka#5511. The worker then prints "stuck"
and exits 4, as a crashed worker would; a new one takes over the transactional id.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import confluent_kafka

BATCH = 200
TIMEOUT_S = 30
OFFSETS_TIMEOUT_S = 10  # librdkafka's own limit for send_offsets_to_transaction (a timeout aborts the batch)


def main(bootstrap: str, source: str, target: str, group: str, transactional_id: str, idle_s: float = 5.0) -> int:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": transactional_id,
        "isolation.level": "read_committed", "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": 15000})
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                         "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    consumer.subscribe([source])
    last_progress = time.monotonic()
    try:
        while time.monotonic() - last_progress < idle_s:
            polled = consumer.consume(BATCH, 0.5)
            fatal = next((m.error() for m in polled if m.error() is not None and m.error().fatal()), None)
            if fatal is not None:
                print(f"consumer fatal {fatal}", flush=True)
                return 5
            messages = [m for m in polled if m.error() is None]
            if not messages:
                continue
            try:
                producer.begin_transaction()
                for message in messages:
                    producer.produce(target, key=message.key(), value=b"out:" + message.value(),
                                     partition=message.partition())
                within(OFFSETS_TIMEOUT_S + 15, producer.send_offsets_to_transaction,
                       consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), OFFSETS_TIMEOUT_S)
                producer.commit_transaction(TIMEOUT_S)
            except confluent_kafka.KafkaException as error:
                if error.args[0].fatal():
                    print(f"fatal {error.args[0]}", flush=True)
                    return 3
                print(f"aborted {error.args[0]}", flush=True)
                producer.abort_transaction(TIMEOUT_S)
                rewind(consumer)
                continue
            print(f"committed {len(messages)}", flush=True)
            last_progress = time.monotonic()
    finally:
        consumer.close()
    return 0


def within(limit_s: float, call, *args) -> None:
    """``call(*args)``, or exit 4 if it has not returned after ``limit_s`` (see librdkafka#5511 above)."""
    outcome: list = []
    thread = threading.Thread(target=lambda: outcome.append(_outcome(call, *args)), daemon=True)
    thread.start()
    thread.join(limit_s)
    if not outcome:
        print(f"stuck in {call.__name__} for {limit_s:.0f} s (librdkafka#5511)", flush=True)
        os._exit(4)
    if isinstance(outcome[0], BaseException):
        raise outcome[0]


def _outcome(call, *args):
    try:
        call(*args)
    except BaseException as error:  # noqa: BLE001 (raised again in the caller's thread)
        return error
    return None


def rewind(consumer: confluent_kafka.Consumer) -> None:
    """Back to the group's committed offsets: the aborted batch is read again."""
    for partition in consumer.committed(consumer.assignment(), TIMEOUT_S):
        offset = partition.offset if partition.offset >= 0 else confluent_kafka.OFFSET_BEGINNING
        consumer.seek(confluent_kafka.TopicPartition(partition.topic, partition.partition, offset))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    raise SystemExit(main(*arguments[:5], *(float(a) for a in arguments[5:6])))
