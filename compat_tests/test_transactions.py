"""Transactions with stock clients against a real broker process.

- librdkafka's transactional producer: committed records are read by
  read_committed and read_uncommitted consumers of every client here
  (confluent-kafka, kafka-python, kcat), aborted ones by read_uncommitted only,
  and no client ever shows a marker as a record;
- zombie fencing: a second producer with the same transactional.id fences the
  first, whose open transaction is aborted;
- a broker SIGKILLed with transactions open, committed and committing comes
  back with every transaction whole (committed or aborted), and its last stable
  offsets move again;
- a producer that dies inside a transaction: the coordinator aborts it after
  transaction.timeout.ms and the last stable offset moves past it.

Values name their transaction ("<tag>-<n>"), so what a reader sees is checked
transaction by transaction.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from testkit.broker_process import BrokerProcess
from compat_tests.test_errors import call
from kbroker.wire.schema import API_BY_NAME

PARTITIONS = 3
TIMEOUT_S = 30
# Timed-out transactions are looked for twice a second here (Kafka's default is every 10 s).
BROKER_SETTINGS = ("transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
                   "group.initial.rebalance.delay.ms=0")


@pytest.fixture
def broker(tmp_path):
    process = BrokerProcess(tmp_path / "data", None, *BROKER_SETTINGS)
    process.start()
    try:
        yield process
    finally:
        process.kill()


def create_topic(bootstrap, name, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT_S)


def transactional_producer(bootstrap, transactional_id, **settings):
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                         "linger.ms": 5, **settings})
    producer.init_transactions(TIMEOUT_S)
    return producer


def produce_transaction(producer, topic, tag, count, *, commit: bool | None):
    """One transaction of ``count`` records valued "<tag>-<n>" over the partitions; flushed, then
    committed, aborted, or (commit=None) left open. Its values."""
    values = [f"{tag}-{n}" for n in range(count)]
    producer.begin_transaction()
    for n, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=n % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0
    if commit is True:
        producer.commit_transaction(TIMEOUT_S)
    elif commit is False:
        producer.abort_transaction(TIMEOUT_S)
    return values


def read_confluent(bootstrap, topic, isolation, expected, partitions=PARTITIONS):
    """Values read from offset 0 until ``expected`` of them came (and a short while more), with the
    consumer's positions at the end."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                         "isolation.level": isolation, "enable.auto.commit": False})
    assignment = [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
    consumer.assign(assignment)
    values = []
    deadline = time.monotonic() + TIMEOUT_S
    quiet_until = None
    try:
        while time.monotonic() < deadline and (quiet_until is None or time.monotonic() < quiet_until):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
            if len(values) >= expected and quiet_until is None:
                quiet_until = time.monotonic() + 1.0  # anything extra would show up now
        positions = {tp.partition: tp.offset for tp in consumer.position(
            [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)])}
    finally:
        consumer.close()
    return values, positions


def read_kafka_python(bootstrap, topic, isolation, expected):
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   consumer_timeout_ms=2000)
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
    values = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                values.extend(record.value.decode() for record in batch)
        for batch in consumer.poll(timeout_ms=1000).values():  # nothing more may come
            values.extend(record.value.decode() for record in batch)
    finally:
        consumer.close()
    return values


def read_kcat(bootstrap, topic, isolation):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        return None
    result = subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-o", "beginning",
                             "-X", f"isolation.level={isolation}", "-f", "%s\\n"],
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


def list_offsets(ports, topic, isolation_level, partitions=PARTITIONS):
    """ListOffsets latest per partition: the high watermark (0) or the last stable offset (1). ``ports``:
    one broker's, or a cluster's (each partition as its leader answers; nodes down are passed over)."""
    request = API_BY_NAME["ListOffsets"].request_class
    wanted = request.ListOffsetsTopic(name=topic, partitions=[
        request.ListOffsetsTopic.ListOffsetsPartition(partition_index=p, timestamp=-1) for p in range(partitions)])
    offsets = {}
    for port in [ports] if isinstance(ports, int) else ports:
        try:
            answer = call(port, "ListOffsets", 7, request(replica_id=-1, isolation_level=isolation_level,
                                                          topics=[wanted]))
        except OSError:
            continue
        offsets.update({p.partition_index: p.offset for p in answer.topics[0].partitions if p.error_code == 0})
    return offsets


def describe_transaction(port, transactional_id):
    request = API_BY_NAME["DescribeTransactions"].request_class(transactional_ids=[transactional_id])
    [state] = call(port, "DescribeTransactions", 0, request).transaction_states
    return state


@pytest.mark.slow
def test_committed_records_reach_every_reader_and_aborted_ones_only_read_uncommitted(broker):
    topic = "orders"
    create_topic(broker.bootstrap, topic)
    producer = transactional_producer(broker.bootstrap, "shop")
    committed = produce_transaction(producer, topic, "c1", 30, commit=True)
    aborted = produce_transaction(producer, topic, "a1", 20, commit=False)
    committed += produce_transaction(producer, topic, "c2", 10, commit=True)
    aborted += produce_transaction(producer, topic, "a2", 5, commit=False)
    committed += produce_transaction(producer, topic, "c3", 1, commit=True)
    everything = committed + aborted

    values, positions = read_confluent(broker.bootstrap, topic, "read_committed", len(committed))
    assert sorted(values) == sorted(committed)
    ends = list_offsets(broker.port, topic, 0)
    assert list_offsets(broker.port, topic, 1) == ends  # every transaction ended: the LSO is the end
    assert positions == ends  # the reader is past every marker: nothing left to read
    values, _ = read_confluent(broker.bootstrap, topic, "read_uncommitted", len(everything))
    assert sorted(values) == sorted(everything)  # records only: no marker shows up as one

    assert sorted(read_kafka_python(broker.bootstrap, topic, "read_committed", len(committed))) == sorted(committed)
    assert sorted(read_kafka_python(broker.bootstrap, topic, "read_uncommitted", len(everything))) == sorted(everything)
    kcat_committed = read_kcat(broker.bootstrap, topic, "read_committed")
    if kcat_committed is not None:  # kcat is installed by .ci/run
        assert sorted(kcat_committed) == sorted(committed)
        assert sorted(read_kcat(broker.bootstrap, topic, "read_uncommitted")) == sorted(everything)


@pytest.mark.slow
def test_a_second_producer_fences_the_first_and_aborts_its_open_transaction(broker):
    topic = "fencing"
    create_topic(broker.bootstrap, topic)
    zombie = transactional_producer(broker.bootstrap, "worker-1")
    zombie_values = produce_transaction(zombie, topic, "zombie", 12, commit=None)

    successor = transactional_producer(broker.bootstrap, "worker-1")  # returns once the open transaction is aborted
    state = describe_transaction(broker.port, "worker-1")
    assert (state.transaction_state, state.producer_epoch) == ("Empty", 2)  # 0 zombie, 1 the abort, 2 successor
    with pytest.raises(confluent_kafka.KafkaException) as fenced:
        zombie.commit_transaction(TIMEOUT_S)
    error = fenced.value.args[0]
    assert error.fatal() and error.code() in (confluent_kafka.KafkaError._FENCED,
                                              confluent_kafka.KafkaError.PRODUCER_FENCED), error
    successor_values = produce_transaction(successor, topic, "successor", 7, commit=True)

    values, _ = read_confluent(broker.bootstrap, topic, "read_committed", len(successor_values))
    assert sorted(values) == sorted(successor_values)
    values, _ = read_confluent(broker.bootstrap, topic, "read_uncommitted", len(successor_values) + len(zombie_values))
    assert sorted(values) == sorted(successor_values + zombie_values)


@pytest.mark.slow
def test_a_broker_killed_mid_transactions_comes_back_with_every_transaction_whole(broker):
    topic = "crash"
    create_topic(broker.bootstrap, topic)
    timeout_ms = 3000
    early = transactional_producer(broker.bootstrap, "early")
    committed = produce_transaction(early, topic, "before-kill", 40, commit=True)
    aborted = produce_transaction(early, topic, "aborted-before-kill", 15, commit=False)
    open_ones = []
    for name in ("open-a", "open-b"):  # open at the kill, their producers never come back
        producer = transactional_producer(broker.bootstrap, name, **{"transaction.timeout.ms": timeout_ms})
        open_ones += produce_transaction(producer, topic, name, 9, commit=None)
    committing = transactional_producer(broker.bootstrap, "committing", **{"transaction.timeout.ms": timeout_ms})
    in_flight = produce_transaction(committing, topic, "in-flight", 25, commit=None)
    try:
        committing.commit_transaction(0.005)  # EndTxn sent; the kill may land before or after its decision
    except confluent_kafka.KafkaException:
        pass
    broker.kill()
    broker.start()

    # A new transaction commits and a read_committed reader gets to the end of every partition:
    # the open transactions were aborted after their timeout, so the last stable offset moved on.
    later = transactional_producer(broker.bootstrap, "later")
    committed += produce_transaction(later, topic, "after-restart", 6, commit=True)
    deadline = time.monotonic() + TIMEOUT_S
    while list_offsets(broker.port, topic, 1) != list_offsets(broker.port, topic, 0):
        assert time.monotonic() < deadline, (list_offsets(broker.port, topic, 1), list_offsets(broker.port, topic, 0))
        time.sleep(0.1)
    values, positions = read_confluent(broker.bootstrap, topic, "read_committed", len(committed))
    assert positions == list_offsets(broker.port, topic, 0)
    seen = set(values)
    assert seen.issuperset(committed)
    assert not seen & set(aborted + open_ones)
    # The transaction whose commit raced the kill is whole: all of it or none of it.
    assert seen & set(in_flight) in (set(), set(in_flight))
    assert len(values) == len(seen)  # and nothing twice
    everything, _ = read_confluent(broker.bootstrap, topic, "read_uncommitted",
                                   len(committed) + len(aborted) + len(open_ones) + len(in_flight))
    assert set(everything) == set(committed + aborted + open_ones + in_flight)


ABANDONING_PRODUCER = textwrap.dedent("""
    import sys, time
    import confluent_kafka
    bootstrap, topic = sys.argv[1], sys.argv[2]
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "vanishing",
                                         "transaction.timeout.ms": 2000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for n in range(8):
        producer.produce(topic, value=f"vanished-{n}".encode(), partition=n % 3)
    assert producer.flush(30) == 0
    print("produced", flush=True)
    time.sleep(120)  # killed long before
""")


@pytest.mark.slow
def test_a_vanished_producers_transaction_is_aborted_after_its_timeout(broker, tmp_path):
    topic = "vanishing"
    create_topic(broker.bootstrap, topic)
    script = tmp_path / "abandon.py"
    script.write_text(ABANDONING_PRODUCER)
    child = subprocess.Popen([sys.executable, str(script), broker.bootstrap, topic], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "produced"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    stuck = list_offsets(broker.port, topic, 1)
    assert stuck == {p: 0 for p in range(PARTITIONS)}  # the open transaction holds every partition's LSO
    other = transactional_producer(broker.bootstrap, "survivor")
    survivors = produce_transaction(other, topic, "survivor", 6, commit=True)
    assert list_offsets(broker.port, topic, 1) == stuck  # committed behind the open one: not yet stable

    deadline = time.monotonic() + TIMEOUT_S
    while describe_transaction(broker.port, "vanishing").transaction_state != "CompleteAbort":
        assert time.monotonic() < deadline, describe_transaction(broker.port, "vanishing")
        time.sleep(0.1)
    assert list_offsets(broker.port, topic, 1) == list_offsets(broker.port, topic, 0)
    values, _ = read_confluent(broker.bootstrap, topic, "read_committed", len(survivors))
    assert sorted(values) == sorted(survivors)
