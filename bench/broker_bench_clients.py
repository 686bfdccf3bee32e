"""The client side of broker_bench: confluent-kafka workloads, each run in its own process.

Every function here runs in a child process started by ``broker_bench.run_client``
and returns a plain dict (or raises; the parent reports the error). Every loop is
bounded by a count and by ``deadline_s`` seconds.
"""

from __future__ import annotations

import resource
import socket
import statistics
import struct
import tempfile
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SEND_TIME = struct.Struct(">q")  # CLOCK_MONOTONIC ns, the same clock in every process on the host
POLL_S = 0.2
METADATA_RESPONSE_MAX_BYTES = 64 * 1024 * 1024


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


def produce_throughput(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    size: int,
    deadline_s: float,
    acks: str = "all",
    compression: str = "none",
    ready=None,
    go=None,
) -> dict:
    """Produce ``count`` values of ``size`` bytes round robin over the partitions and wait for
    every acknowledgement. With ``ready``/``go`` (several producers at once) the clock starts
    only when the parent says go, after every producer has connected. ``cpu_seconds`` is this
    whole process (Python and librdkafka's threads) over the timed part."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "compression.type": compression,
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

    if ready is not None:
        ready.set()
        if not go.wait(deadline_s):
            raise TimeoutError("never told to start")
    stop = time.monotonic() + deadline_s
    cpu_started = _cpu_seconds()
    started_at = time.monotonic()
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
    finished_at = time.monotonic()
    cpu_seconds = _cpu_seconds() - cpu_started
    if remaining:
        raise TimeoutError(f"{remaining} of {count} messages unacknowledged after {deadline_s} s")
    if errors:
        raise RuntimeError(f"delivery errors: {errors}")
    return {
        "seconds": elapsed,
        "bytes": count * size,
        "messages": count,
        "cpu_seconds": cpu_seconds,
        "started_at": started_at,
        "finished_at": finished_at,
    }


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
    cpu_started = _cpu_seconds()
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
        cpu_seconds = _cpu_seconds() - cpu_started
    finally:
        consumer.close()
    if received < count:
        raise TimeoutError(f"received {received} of {count} within {deadline_s} s")
    return {"seconds": elapsed, "bytes": payload_bytes, "messages": received, "cpu_seconds": cpu_seconds}


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
    return {
        "p50_ms": _percentile(delays_ns, 0.50) / 1e6,
        "p99_ms": _percentile(delays_ns, 0.99) / 1e6,
        "p999_ms": _percentile(delays_ns, 0.999) / 1e6,
        "max_ms": delays_ns[-1] / 1e6,
    }


def latency_producer(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float, size: int, warm, deadline_s: float,
                     acks: str = "all") -> dict:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "message.timeout.ms": int(deadline_s * 1000)})
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
            producer.poll(max(pause, 0.001))  # librdkafka waits in whole milliseconds: a shorter wait spins a core
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


def in_process_startup(work_dir: str, repetitions: int, deadline_s: float) -> dict:
    """``kbroker.testing.running_broker()`` from entering the block to the first Metadata
    answered on a fresh connection, in this process with the modules already imported; one
    unmeasured warm-up first, the broker's shutdown is outside the clock."""
    from kbroker.testing import running_broker

    timings_ms = []
    stop = time.monotonic() + deadline_s
    for repetition in range(repetitions + 1):
        if time.monotonic() > stop:
            raise TimeoutError(f"only {len(timings_ms)} of {repetitions} repetitions within {deadline_s} s")
        with tempfile.TemporaryDirectory(prefix="kbroker-fixture-", dir=work_dir) as data_dir:
            started = time.perf_counter()
            with running_broker(data_dir) as running:
                with socket.create_connection((running.host, running.port), timeout=deadline_s) as connection:
                    full_metadata(connection, 1)
                elapsed_ms = (time.perf_counter() - started) * 1000
        if repetition:
            timings_ms.append(elapsed_ms)
    return {"timings_ms": timings_ms}


def many_partitions(bootstrap: str, topic: str, partitions: int, repeats: int, deadline_s: float) -> dict:
    """One topic with ``partitions`` partitions: CreateTopics until acknowledged, a full Metadata
    request (every topic) first and then ``repeats`` more on one connection, one acks=all
    message per partition produced and then consumed by assignment from offset 0. Each
    client connects before its clock starts."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=deadline_s)
    started = time.perf_counter()
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=deadline_s)[topic].result(timeout=deadline_s)
    create_ms = (time.perf_counter() - started) * 1000

    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=deadline_s) as connection:
        metadata_ms = []
        for correlation_id in range(1 + repeats):
            started = time.perf_counter()
            response_bytes = full_metadata(connection, correlation_id)
            metadata_ms.append((time.perf_counter() - started) * 1000)
    if response_bytes < partitions * 20:  # a partition takes at least 20 bytes in a v4 response
        raise RuntimeError(f"a Metadata response of {response_bytes} bytes cannot describe {partitions} partitions")

    produce_ms = _one_per_partition_produced(bootstrap, topic, partitions, deadline_s)
    consume_ms = _one_per_partition_consumed(bootstrap, topic, partitions, deadline_s)
    return {
        "create_ms": create_ms,
        "metadata_first_ms": metadata_ms[0],
        "metadata_repeat_ms": statistics.median(metadata_ms[1:]) if repeats else metadata_ms[0],
        "metadata_bytes": response_bytes,
        "produce_ms": produce_ms,
        "consume_ms": consume_ms,
    }


def _one_per_partition_produced(bootstrap: str, topic: str, partitions: int, deadline_s: float) -> float:
    # log_level 3: a new topic's leaders not yet in the client's cache are a warning per partition (thousands of lines)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": int(deadline_s * 1000),
                         "log_level": 3})
    producer.list_topics(topic=topic, timeout=deadline_s)
    failures = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(str(error))

    started = time.perf_counter()
    for partition in range(partitions):
        producer.produce(topic, b"one", partition=partition, on_delivery=delivered)
    remaining = producer.flush(deadline_s)
    elapsed_ms = (time.perf_counter() - started) * 1000
    if remaining or failures:
        raise RuntimeError(f"{remaining} unacknowledged, {len(failures)} failed ({failures[:3]}) of {partitions}")
    return elapsed_ms


def _one_per_partition_consumed(bootstrap: str, topic: str, partitions: int, deadline_s: float) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "enable.auto.commit": False, "enable.partition.eof": False})
    seen = set()
    try:
        consumer.list_topics(topic=topic, timeout=deadline_s)
        stop = time.monotonic() + deadline_s
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
        while len(seen) < partitions and time.monotonic() < stop:
            for message in consumer.consume(num_messages=partitions - len(seen), timeout=POLL_S):
                if message.error() is not None:
                    raise KafkaException(message.error())
                seen.add(message.partition())
        elapsed_ms = (time.perf_counter() - started) * 1000
    finally:
        consumer.close()
    if len(seen) < partitions:
        raise TimeoutError(f"received from {len(seen)} of {partitions} partitions within {deadline_s} s")
    return elapsed_ms


def full_metadata(connection: socket.socket, correlation_id: int) -> int:
    """Send Metadata v4 for every topic (null topic array) and read the whole answer; returns
    its size in bytes. Raw bytes so the figure is the broker's, not a client library's parsing."""
    client_id = b"bench"
    request = struct.pack(">hhih", 3, 4, correlation_id, len(client_id)) + client_id + struct.pack(">ib", -1, 0)
    connection.sendall(struct.pack(">i", len(request)) + request)
    (size,) = struct.unpack(">i", _receive_exactly(connection, 4))
    if not 4 <= size <= METADATA_RESPONSE_MAX_BYTES:
        raise RuntimeError(f"Metadata response size {size}")
    response = _receive_exactly(connection, size)
    (answered_id,) = struct.unpack_from(">i", response)
    if answered_id != correlation_id:
        raise RuntimeError(f"Metadata answer for correlation id {answered_id}, asked {correlation_id}")
    return size


def _receive_exactly(connection: socket.socket, size: int) -> bytes:
    buffer = bytearray(size)
    view = memoryview(buffer)
    filled = 0
    while filled < size:
        received = connection.recv_into(view[filled:])  # the socket's timeout bounds each wait
        if not received:
            raise ConnectionError(f"connection closed after {filled} of {size} bytes")
        filled += received
    return bytes(buffer)


def _cpu_seconds() -> float:
    """User + system CPU of this whole process, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _percentile(sorted_values: list[int], fraction: float) -> float:
    return float(sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))])
