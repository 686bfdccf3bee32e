"""The client side of broker_bench: confluent-kafka workloads, each run in its own process.

Every function here runs in a child process started by ``broker_bench.run_client``
and returns a plain dict (or raises; the parent reports the error). Every loop is
bounded by a count and by ``deadline_s`` seconds.
"""

from __future__ import annotations

import struct
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SEND_TIME = struct.Struct(">q")  # CLOCK_MONOTONIC ns, the same clock in every process on the host
POLL_S = 0.2


def create_topic(bootstrap: str, topic: str, partitions: int, deadline_s: float) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=deadline_s)
    futures[topic].result(timeout=deadline_s)
    stop = time.monotonic() + deadline_s
    while time.monotonic() < stop:  # wait until metadata shows every partition with a leader
        metadata = admin.list_topics(topic=topic, timeout=deadline_s).topics[topic]
        if metadata.error is None and len(metadata.partitions) == partitions:
            return {"partitions": len(metadata.partitions)}
        time.sleep(0.05)
    raise TimeoutError(f"{topic}: {partitions} partitions not visible after {deadline_s} s")


def first_acknowledged_produce(bootstrap: str, topic: str, ready, go, deadline_s: float) -> dict:
    """Wait for ``go`` (set just before the broker process is spawned), then produce one
    acks=all message to a topic that does not exist yet, retrying until the broker answers.
    Returns the CLOCK_MONOTONIC time of the acknowledgement."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "reconnect.backoff.ms": 5,
            "log_level": 2,  # the refused connects before the broker listens are expected
            "reconnect.backoff.max.ms": 20,
            "topic.metadata.refresh.fast.interval.ms": 10,
            "retry.backoff.ms": 10,
            "message.timeout.ms": int(deadline_s * 1000),
        }
    )
    ready.set()
    if not go.wait(deadline_s):
        raise TimeoutError("never told to start")
    outcome = {}
    producer.produce(topic, b"first", on_delivery=lambda error, message: outcome.update(error=error, at=time.monotonic()))
    stop = time.monotonic() + deadline_s
    while "at" not in outcome and time.monotonic() < stop:
        producer.poll(0.001)
    if "at" not in outcome:
        raise TimeoutError(f"no acknowledgement within {deadline_s} s")
    if outcome["error"] is not None:
        raise KafkaException(outcome["error"])
    return {"acked_at": outcome["at"]}


def produce_throughput(bootstrap: str, topic: str, partitions: int, count: int, size: int, deadline_s: float) -> dict:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1024 * 1024,
            "queue.buffering.max.messages": max(100_000, count),
            "queue.buffering.max.kbytes": 1024 * 1024,
            "message.timeout.ms": int(deadline_s * 1000),
        }
    )
    producer.list_topics(topic=topic, timeout=deadline_s)  # connect and learn leaders before the clock starts
    value = bytes(index % 251 for index in range(size))
    errors = []

    def delivered(error, _message) -> None:
        if error is not None and len(errors) < 5:
            errors.append(str(error))

    stop = time.monotonic() + deadline_s
    started = time.perf_counter()
    for index in range(count):
        for _attempt in range(10_000):  # bounded wait for queue room
            try:
                producer.produce(topic, value, partition=index % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.005)
        if index % 10_000 == 0:
            producer.poll(0)
            if time.monotonic() > stop:
                raise TimeoutError(f"only {index} of {count} queued within {deadline_s} s")
    remaining = producer.flush(max(0.0, stop - time.monotonic()))
    elapsed = time.perf_counter() - started
    if remaining:
        raise TimeoutError(f"{remaining} of {count} messages unacknowledged after {deadline_s} s")
    if errors:
        raise RuntimeError(f"delivery errors: {errors}")
    return {"seconds": elapsed, "bytes": count * size, "messages": count}


def consume_throughput(bootstrap: str, topic: str, partitions: int, count: int, deadline_s: float) -> dict:
    """Read the whole topic from offset 0 by assignment (group.id is set because librdkafka
    insists, but nothing subscribes or commits). The local queue may hold the whole topic:
    with the defaults (100,000 messages, 64 MiB) librdkafka pauses fetching for
    fetch.queue.backoff.ms = 1 s whenever Python falls behind, which measures the client."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "queued.min.messages": max(100_000, count),
            "queued.max.messages.kbytes": 1024 * 1024,
            "fetch.queue.backoff.ms": 5,
        }
    )
    received = 0
    payload_bytes = 0
    stop = time.monotonic() + deadline_s
    started = time.perf_counter()
    try:
        consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
        while received < count and time.monotonic() < stop:
            # consume() waits for num_messages or the timeout: never ask for more than is due
            for message in consumer.consume(num_messages=min(10_000, count - received), timeout=POLL_S):
                if message.error() is not None:
                    raise KafkaException(message.error())
                received += 1
                payload_bytes += len(message.value())
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if received < count:
        raise TimeoutError(f"received {received} of {count} within {deadline_s} s")
    return {"seconds": elapsed, "bytes": payload_bytes, "messages": received}


def latency_consumer(bootstrap: str, topic: str, partitions: int, count: int, size: int, warm, deadline_s: float) -> dict:
    """Collect one delay per timed message; set ``warm`` once a warm-up message arrived from
    every partition, so the producer starts only when fetches are flowing."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    warm_partitions = set()
    delays_ns = []
    stop = time.monotonic() + deadline_s
    try:
        consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
        while len(delays_ns) < count and time.monotonic() < stop:
            message = consumer.poll(POLL_S)  # poll, not consume(): it returns the moment one arrives
            if message is not None:
                received_ns = time.monotonic_ns()
                if message.error() is not None:
                    raise KafkaException(message.error())
                value = message.value()
                if value[SEND_TIME.size : SEND_TIME.size + 1] == b"W":
                    warm_partitions.add(message.partition())
                    if len(warm_partitions) == partitions:
                        warm.set()
                else:
                    delays_ns.append(received_ns - SEND_TIME.unpack_from(value)[0])
    finally:
        consumer.close()
    if len(delays_ns) < count:
        raise TimeoutError(f"received {len(delays_ns)} of {count} timed messages within {deadline_s} s")
    delays_ns.sort()
    return {"p50_ms": _percentile(delays_ns, 0.50) / 1e6, "p99_ms": _percentile(delays_ns, 0.99) / 1e6}


def latency_producer(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float, size: int, warm, deadline_s: float) -> dict:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "message.timeout.ms": int(deadline_s * 1000)})
    padding = bytes(max(0, size - SEND_TIME.size - 1))
    for partition in range(partitions):
        producer.produce(topic, SEND_TIME.pack(time.monotonic_ns()) + b"W" + padding, partition=partition)
    if producer.flush(deadline_s) or not warm.wait(deadline_s):
        raise TimeoutError("the warm-up messages did not go round")
    count = int(rate * seconds)
    ack_delays_ns = []

    def acknowledged(error, message) -> None:  # runs inside poll(), which is where the producer waits
        if error is None:
            ack_delays_ns.append(time.monotonic_ns() - SEND_TIME.unpack_from(message.value())[0])

    started = time.monotonic()
    for index in range(count):
        for _wait in range(1000):  # wait for the send time inside poll(), serving acknowledgements
            pause = started + index / rate - time.monotonic()
            if pause <= 0:
                break
            producer.poll(pause)
        producer.produce(topic, SEND_TIME.pack(time.monotonic_ns()) + b"M" + padding, partition=index % partitions, on_delivery=acknowledged)
        producer.poll(0)
    send_seconds = time.monotonic() - started
    if producer.flush(deadline_s) or len(ack_delays_ns) < count:
        raise TimeoutError(f"{count - len(ack_delays_ns)} timed messages unacknowledged after {deadline_s} s")
    ack_delays_ns.sort()
    return {
        "send_seconds": send_seconds,
        "ack_p50_ms": _percentile(ack_delays_ns, 0.50) / 1e6,
        "ack_p99_ms": _percentile(ack_delays_ns, 0.99) / 1e6,
    }


def _percentile(sorted_values: list[int], fraction: float) -> float:
    return float(sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))])
