"""Exactly-once with stock clients against a real broker process, under crashes.

- consume-transform-produce (compat_tests/eos_worker.py, confluent-kafka with
  send_offsets_to_transaction): the worker process is SIGKILLed mid-run and a
  new one takes over from the committed offsets; the output has every input
  record exactly once.
- A randomized transactional workload: several producers committing and
  aborting at random, read_committed consumers polling all along, and the
  broker SIGKILLed or stopped and restarted in between; the history is checked
  by compat_tests/txn_checker.py (no aborted read, no lost committed write,
  every transaction whole, no duplicate, monotonic polls), which prints the
  counts it checked. ``KBTEST_LONG=1`` runs it longer, with more restarts.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from testkit.broker_process import BrokerProcess
from compat_tests.test_transactions import BROKER_SETTINGS, list_offsets
from compat_tests.txn_checker import Transaction, check

TIMEOUT_S = 30
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LONG = os.environ.get("KBTEST_LONG") == "1"


def create_topics(bootstrap, names, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1) for name in names]).values():
        future.result(TIMEOUT_S)


def read_all(bootstrap, topic, partitions, ports):
    """Every record of ``topic`` as a read_committed consumer gets it, from offset 0 to the end
    (``ports``: the broker's, or the cluster's, asked for the ends)."""
    ends = list_offsets(ports, topic, 0, partitions)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(partitions)])
    records = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    records.append((topic, message.partition(), message.offset(), message.value().decode()))
            positions = consumer.position([confluent_kafka.TopicPartition(topic, p) for p in range(partitions)])
            if all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions):
                break
        else:
            raise AssertionError(f"{topic}: not read to {ends} within 60 s")
    finally:
        consumer.close()
    return records


def start_worker(bootstrap, source, target, idle_s, stderr=subprocess.DEVNULL):
    command = [sys.executable, "-m", "compat_tests.eos_worker", bootstrap, source, target, "transformers", "transformer-1",
               str(idle_s)]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, text=True)


@pytest.mark.slow
def test_consume_transform_produce_is_exactly_once_across_a_worker_crash(tmp_path):
    broker = BrokerProcess(tmp_path / "data", None, *BROKER_SETTINGS)
    broker.start()
    worker = None
    try:
        source, target, partitions, count = "inputs", "outputs", 3, 10_000
        create_topics(broker.bootstrap, [source, target], partitions)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for index in range(count):
            producer.produce(source, key=str(index).encode(), value=f"in-{index}".encode(), partition=index % partitions)
            if index % 1000 == 0:
                producer.poll(0)
        assert producer.flush(TIMEOUT_S) == 0

        worker = start_worker(broker.bootstrap, source, target, idle_s=60)
        done = 0
        while done < 3_000:  # committed some, not all: then the crash
            line = worker.stdout.readline()
            assert line, f"the worker stopped early with {worker.wait(10)} after {done}"
            if line.startswith("committed "):
                done += int(line.split()[1])
        worker.kill()
        worker.wait(10)
        assert done < count

        worker = start_worker(broker.bootstrap, source, target, idle_s=5)
        output, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0, output[-2000:]
        records = read_all(broker.bootstrap, target, partitions, broker.port)
        values = [value for *_, value in records]
        assert len(values) == count, f"{len(values)} records, {len(values) - len(set(values))} duplicates"
        assert set(values) == {f"out:in-{index}" for index in range(count)}
        for _, partition, _, value in records:  # and each in its input's partition
            assert int(value.split("-")[1]) % partitions == partition
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait(10)
        broker.kill()


class Workload:
    """Producers and readers running against the broker(s) at ``bootstrap`` until ``stop`` is set, recording the history."""

    def __init__(self, bootstrap, topics, partitions, seed):
        self.bootstrap, self.topics, self.partitions = bootstrap, topics, partitions
        self.random = random.Random(seed)
        self.stop = threading.Event()
        self.transactions: list[Transaction] = []
        self.polls: dict[str, list] = {}
        self.lock = threading.Lock()
        self.errors: list[str] = []

    def run(self, task, *args):
        """A thread's body: an exception fails the test instead of vanishing with the thread."""
        try:
            task(*args)
        except BaseException as error:  # noqa: BLE001 (reported to the test)
            self.errors.append(f"{task.__name__}{args}: {error!r}")
            self.stop.set()

    def produce(self, name, seed):
        chooser = random.Random(seed)
        settings = {"bootstrap.servers": self.bootstrap, "transactional.id": name, "linger.ms": 2,
                    "transaction.timeout.ms": 10000, "message.timeout.ms": 10000}
        producer = _initialised(settings, self.stop)
        number = 0
        while not self.stop.is_set() and producer is not None:
            transaction = Transaction(name, number)
            number += 1
            with self.lock:
                self.transactions.append(transaction)
            commit = chooser.random() < 0.7
            try:
                producer.begin_transaction()
                for index in range(chooser.randint(1, 8)):
                    topic, partition = chooser.choice(self.topics), chooser.randrange(self.partitions)
                    value = f"{name}-{transaction.number}-{index}"
                    transaction.values.append(value)
                    producer.produce(topic, value=value.encode(), partition=partition)
                if commit:
                    producer.commit_transaction(TIMEOUT_S)
                    transaction.outcome = "committed"
                else:
                    producer.flush(TIMEOUT_S)  # let the records reach the partitions before the abort
                    producer.abort_transaction(TIMEOUT_S)
                    transaction.outcome = "aborted"
            except confluent_kafka.KafkaException as error:
                kafka_error = error.args[0]
                if kafka_error.txn_requires_abort():
                    try:
                        producer.abort_transaction(TIMEOUT_S)
                        transaction.outcome = "aborted"
                        continue
                    except confluent_kafka.KafkaException:
                        pass
                # The outcome is the broker's to tell; a new producer (the same id) settles it.
                transaction.outcome = "unknown"
                producer = _initialised(settings, self.stop)

    def read(self, name):
        consumer = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap, "group.id": uuid.uuid4().hex,
                                             "isolation.level": "read_committed", "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for topic in self.topics for p in range(self.partitions)])
        records = self.polls.setdefault(name, [])
        try:
            while not self.stop.is_set():
                for message in consumer.consume(200, 0.2):
                    if message.error() is None:
                        records.append((message.topic(), message.partition(), message.offset(),
                                        message.value().decode()))
        finally:
            consumer.close()


def _initialised(settings, stop):
    """A producer whose init_transactions succeeded (retried across restarts), or None once stopping."""
    while not stop.is_set():
        producer = confluent_kafka.Producer(settings)
        try:
            producer.init_transactions(TIMEOUT_S)
            return producer
        except confluent_kafka.KafkaException:
            time.sleep(0.2)
    return None


@pytest.mark.slow
def test_randomized_transactions_across_broker_restarts_pass_the_checker(tmp_path):
    broker = BrokerProcess(tmp_path / "data", None, *BROKER_SETTINGS)
    broker.start()

    def restart(nemesis: random.Random) -> None:
        if nemesis.random() < 0.5:
            broker.kill()
        else:
            broker.stop()
        broker.start()

    try:
        create_topics(broker.bootstrap, ["jepsen-a", "jepsen-b"], 3)
        run_randomized_workload(broker.bootstrap, [broker.port], restart, restarts=12 if LONG else 3,
                                between_s=8.0 if LONG else 4.0)
    finally:
        broker.kill()


def run_randomized_workload(bootstrap, ports, restart, restarts, between_s) -> dict:
    """Three transactional producers and two read_committed readers on topics jepsen-a and jepsen-b
    (3 partitions each, created by the caller) while ``restart(random)`` is called ``restarts``
    times; then the history goes through the checker. ``ports``: where to ask for offsets."""
    seed = int(os.environ.get("KBTEST_TXN_SEED", random.randrange(1 << 30)))
    print(f"seed {seed} (KBTEST_TXN_SEED={seed} replays the workload's choices)")
    workload = Workload(bootstrap, ["jepsen-a", "jepsen-b"], 3, seed)
    threads = [threading.Thread(target=workload.run, args=(workload.produce, f"producer-{i}", seed + i))
               for i in range(3)]
    threads += [threading.Thread(target=workload.run, args=(workload.read, f"reader-{i}")) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        nemesis = random.Random(seed)
        for _ in range(restarts):
            time.sleep(between_s * (0.5 + nemesis.random()))
            restart(nemesis)
        time.sleep(between_s)
    finally:
        workload.stop.set()
        for thread in threads:
            thread.join(90)
    assert not any(thread.is_alive() for thread in threads)
    assert not workload.errors, workload.errors

    # Unknown transactions left open end by their timeout; then everything is stable.
    deadline = time.monotonic() + 60
    for topic in workload.topics:
        while list_offsets(ports, topic, 1, 3) != list_offsets(ports, topic, 0, 3) \
                or len(list_offsets(ports, topic, 0, 3)) < 3:
            assert time.monotonic() < deadline, "the last stable offset never reached the end"
            time.sleep(0.2)
    final = [record for topic in workload.topics for record in read_all(bootstrap, topic, 3, ports)]
    counts = check(workload.transactions, workload.polls, final)
    print("checked:", ", ".join(f"{name} {value}" for name, value in counts.items()))
    assert counts["transactions committed"] > 0 and counts["transactions aborted"] > 0
    assert counts["records polled"] > 0
    return counts
