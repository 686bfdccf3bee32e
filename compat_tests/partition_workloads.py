"""The workloads that write and read while the network between a cluster's nodes fails, and what they saw.

Each workload runs in threads (or, for the Java producer, a process of its own) in the tests' own
network namespace, against every node's client listener, and keeps its history for the checkers:

- ``ConfluentWriter``: librdkafka's idempotent producer, acks=all;
- ``PlainWriter``: kafka-python with acks=all and no retries: every error is the caller's;
- ``JavaWriter``: Kafka's own Java producer (compat_tests/java/KafkaCompat.java ``produce``), its defaults
  (idempotent, acks=all);
- ``TransactionalWriter`` and ``CommittedReader``: transactions of a few records, one in five aborted on
  purpose, and read_committed consumers reading all the while (compat_tests/txn_checker.py checks them);
- ``GroupCommitter``: consumer group members that read a topic and commit what they read.

A writer's values are "<partition>:<sequence>", in sequence order per partition, so that
compat_tests/replication_checker.py can tell a reordering. Every loop is bounded in time.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections import defaultdict

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_tests.txn_checker import Transaction

RUN_S_MAX = 600  # no workload runs longer than this, whatever its caller forgets
PAUSE_S = 0.005  # between sends: a steady trickle, not a flood that the checker must wade through
JOIN_S = 150


class Writer:
    """What every writer keeps: (partition, offset, value) acknowledged, when each acknowledgement came
    (time.monotonic()), and how many sends failed."""

    name = "writer"

    def __init__(self, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.acknowledged: list[tuple[int, int, str]] = []
        self.ack_times: list[float] = []
        self.failed = 0
        self.errors: dict[str, int] = defaultdict(int)
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._guarded, daemon=True, name=self.name)
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join(JOIN_S)

    def _acknowledged(self, partition: int, offset: int, value: str) -> None:
        with self._lock:
            self.acknowledged.append((partition, offset, value))
            self.ack_times.append(time.monotonic())

    def _failed(self, error: str) -> None:
        with self._lock:
            self.failed += 1
            self.errors[error] += 1

    def _guarded(self) -> None:
        try:
            self._run()
        except Exception as error:  # a broken workload must show in the test, not vanish with its thread
            self._failed(f"workload stopped: {error!r}")

    def _values(self):
        """(partition, value) in turn over the partitions, until stopped or out of time."""
        sequence = [0] * self.partitions
        deadline = time.monotonic() + RUN_S_MAX
        while not self.stopping.is_set() and time.monotonic() < deadline:
            for partition in range(self.partitions):
                yield partition, f"{partition}:{sequence[partition]}"
                sequence[partition] += 1

    def _run(self) -> None:
        raise NotImplementedError


class ConfluentWriter(Writer):
    name = "librdkafka idempotent"

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(topic, partitions)
        # the client's own request.timeout.ms (30 s): a request held by a leader cut off from its followers
        # is still waiting when the fault heals and that leader learns it was deposed (issue 44)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 120000})

    def _delivered(self, error, message) -> None:
        if error is None:
            self._acknowledged(message.partition(), message.offset(), message.value().decode())
        else:
            self._failed(error.name())

    def _run(self) -> None:
        for partition, value in self._values():
            while not self.stopping.is_set():
                try:
                    self.producer.produce(self.topic, value=value.encode(), partition=partition,
                                          on_delivery=self._delivered)
                    break
                except BufferError:  # the queue is full while the cluster heals: wait, never skip a value
                    self.producer.poll(0.1)
            self.producer.poll(PAUSE_S)
        self.producer.flush(JOIN_S - 30)


class PlainWriter(Writer):
    """kafka-python, retries=0: an error is the caller's, never retried. It looks at the metadata every
    second, so that while a leader is cut off it writes to the new one beside its requests still held by
    the old one (those are the writes a deposed leader must not acknowledge, issue 44)."""

    name = "kafka-python, no retries"

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(topic, partitions)
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", retries=0,
                                      metadata_max_age_ms=1000, max_block_ms=10000)

    def _run(self) -> None:
        try:
            for partition, value in self._values():
                try:
                    future = self.producer.send(self.topic, value=value.encode(), partition=partition)
                except Exception as error:  # the buffer stayed full for max_block_ms: not sent
                    self._failed(type(error).__name__)
                    continue
                future.add_callback(lambda metadata, value=value: self._acknowledged(
                    metadata.partition, metadata.offset, value))
                future.add_errback(lambda error: self._failed(type(error).__name__))
                time.sleep(PAUSE_S)
            self.producer.flush(JOIN_S - 30)
        finally:
            self.producer.close(10)


class JavaWriter(Writer):
    """Kafka's Java producer in a JVM of its own, fed one record per line; its acks come back as lines."""

    name = "Java producer"

    def __init__(self, command: list[str], topic: str, partitions: int) -> None:
        super().__init__(topic, partitions)
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self._sent: dict[int, tuple[int, str]] = {}  # the harness's index of a record -> (partition, value)
        self._reader = threading.Thread(target=self._read_acks, daemon=True)

    def start(self) -> None:
        self._reader.start()
        super().start()

    def stop(self) -> None:
        super().stop()
        self._reader.join(JOIN_S)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def _run(self) -> None:
        index = 0
        try:
            for partition, value in self._values():
                self._sent[index] = (partition, value)
                self.process.stdin.write(f"-\t{value.encode().hex()}\t\t{partition}\n")
                self.process.stdin.flush()
                index += 1
                time.sleep(PAUSE_S)
        finally:
            self.process.stdin.close()  # the harness flushes what it holds and exits

    def _read_acks(self) -> None:
        for line in self.process.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event.get("type") == "ack":
                partition, value = self._sent[event["index"]]
                self._acknowledged(event["partition"], event["offset"], value)
            elif event.get("type") == "send_error":
                self._failed(event["error"])


class TransactionalWriter(Writer):
    """Transactions of ``size`` records over the partitions; every fifth aborted on purpose. Each
    transaction's outcome is what the producer learned: committed, aborted, or unknown (the commit
    itself failed). An acknowledgement here is a committed transaction."""

    name = "transactional"
    SIZE = 4
    ABORT_EVERY = 5

    def __init__(self, bootstrap: str, topic: str, partitions: int, transactional_id: str) -> None:
        super().__init__(topic, partitions)
        self.bootstrap, self.transactional_id = bootstrap, transactional_id
        self.transactions: list[Transaction] = []

    def _producer(self) -> Producer:
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
                             "transaction.timeout.ms": 60000, "request.timeout.ms": 5000,
                             "message.timeout.ms": 30000, "linger.ms": 1})
        producer.init_transactions(60)
        return producer

    def _run(self) -> None:
        producer = self._producer()
        deadline = time.monotonic() + RUN_S_MAX
        number = 0
        while not self.stopping.is_set() and time.monotonic() < deadline:
            transaction = Transaction(self.transactional_id, number)
            self.transactions.append(transaction)
            try:
                producer.begin_transaction()
                for i in range(self.SIZE):
                    value = f"{self.transactional_id}-{number}-{i}"
                    transaction.values.append(value)
                    producer.produce(self.topic, value=value.encode(), partition=(number + i) % self.partitions)
                if number % self.ABORT_EVERY == self.ABORT_EVERY - 1:
                    producer.abort_transaction(30)
                    transaction.outcome = "aborted"
                else:
                    producer.commit_transaction(30)
                    transaction.outcome = "committed"
                    self._acknowledged(-1, -1, transaction.values[-1])
            except KafkaException as error:
                kafka_error = error.args[0]
                self._failed(kafka_error.name())
                producer = self._recover(producer, kafka_error, transaction)
            number += 1
            time.sleep(PAUSE_S)
        producer.flush(10)

    def _recover(self, producer: Producer, error, transaction: Transaction) -> Producer:
        """After a failed step: abort what can be aborted (then the outcome is known), or start over with a
        new producer, which fences the old one and aborts its open transaction."""
        if error.txn_requires_abort():
            try:
                producer.abort_transaction(30)
                transaction.outcome = "aborted"
                return producer
            except KafkaException:
                pass
        if error.retriable() and not error.fatal():
            return producer  # the outcome stays unknown; the next transaction begins once this one ends
        time.sleep(0.5)
        return self._producer()


class CommittedReader:
    """A read_committed consumer of every partition of a topic, from the start, keeping what it was given
    in order (for compat_tests/txn_checker.py)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, name: str) -> None:
        self.name = name
        self.polls: list[tuple[str, int, int, str]] = []
        self.stopping = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{name}-unused",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join(JOIN_S)
        self.consumer.close()

    def _run(self) -> None:
        deadline = time.monotonic() + RUN_S_MAX
        while not self.stopping.is_set() and time.monotonic() < deadline:
            for message in self.consumer.consume(100, 0.2):
                if message.error() is None:
                    self.polls.append((message.topic(), message.partition(), message.offset(),
                                       message.value().decode()))


class GroupCommitter:
    """``members`` consumers in one group reading a topic and committing, synchronously, the offset after
    the last record each read. What each commit said and what had been read when it was made are kept for
    the checker: a committed offset is never ahead of what was read, and no acknowledged commit is lost."""

    def __init__(self, bootstrap: str, topic: str, group: str, members: int = 2) -> None:
        self.topic, self.group, self.bootstrap = topic, group, bootstrap
        self.read_up_to: dict[int, int] = defaultdict(lambda: -1)  # partition -> highest offset read by any member
        self.commits: list[tuple[int, int, float]] = []  # (partition, offset, when) of acknowledged commits
        self.ahead: list[tuple[int, int, int]] = []  # (partition, committed, read up to): a commit ahead of reading
        self.failed: dict[str, int] = defaultdict(int)
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._member, args=(n,), daemon=True) for n in range(members)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()
            time.sleep(0.5)

    def stop(self) -> None:
        self.stopping.set()
        for thread in self._threads:
            thread.join(JOIN_S)

    @property
    def ack_times(self) -> list[float]:
        return [when for _, _, when in self.commits]

    def _member(self, number: int) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        consumer.subscribe([self.topic])
        deadline = time.monotonic() + RUN_S_MAX
        try:
            while not self.stopping.is_set() and time.monotonic() < deadline:
                messages = [m for m in consumer.consume(200, 0.3) if m.error() is None]
                if not messages:
                    continue
                last: dict[int, int] = {}
                with self._lock:
                    for message in messages:
                        last[message.partition()] = message.offset()
                        self.read_up_to[message.partition()] = max(self.read_up_to[message.partition()],
                                                                   message.offset())
                wanted = [TopicPartition(self.topic, partition, offset + 1) for partition, offset in last.items()]
                try:
                    committed = consumer.commit(offsets=wanted, asynchronous=False)
                except KafkaException as error:
                    with self._lock:
                        self.failed[error.args[0].name()] += 1
                    continue
                with self._lock:
                    for answer in committed:
                        if answer.error is None:
                            self.commits.append((answer.partition, answer.offset, time.monotonic()))
                            if answer.offset > self.read_up_to[answer.partition] + 1:
                                self.ahead.append((answer.partition, answer.offset, self.read_up_to[answer.partition]))
        finally:
            consumer.close()

    def final_offsets(self, partitions: int) -> dict[int, int]:
        """The group's committed offsets as the cluster has them now."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        try:
            answers = consumer.committed([TopicPartition(self.topic, p) for p in range(partitions)], timeout=30)
            return {answer.partition: answer.offset for answer in answers}
        finally:
            consumer.close()

    def verdict(self, partitions: int) -> list[str]:
        """Anomalies: commits ahead of what was read, and acknowledged commits the cluster no longer has."""
        final = self.final_offsets(partitions)
        anomalies = [f"commit of {p}@{o} ahead of what was read ({r})" for p, o, r in self.ahead]
        for partition in range(partitions):
            acknowledged = max((o for p, o, _ in self.commits if p == partition), default=-1)
            if acknowledged >= 0 and final.get(partition, -1) < acknowledged:
                anomalies.append(f"lost commit: partition {partition} committed at {acknowledged}, "
                                 f"the cluster has {final.get(partition)}")
            if final.get(partition, -1) > self.read_up_to[partition] + 1:
                anomalies.append(f"partition {partition}: committed {final[partition]} ahead of what was read "
                                 f"({self.read_up_to[partition]})")
        return anomalies


def longest_gap_s(ack_times: list[float], start: float, end: float) -> float:
    """The longest time without an acknowledgement around a fault that began at ``start``: from the last
    acknowledgement before it to the next, and so on up to the first after ``end`` (or ``end`` itself if
    none came by then)."""
    times = sorted(ack_times)
    before = [t for t in times if t <= start]
    after = [t for t in times if t > end]
    points = [before[-1] if before else start, *(t for t in times if start < t <= end), after[0] if after else end]
    return max(b - a for a, b in zip(points, points[1:]))
