"""A broker under a low RLIMIT_NOFILE (set for the child process only, soft = hard, so it cannot raise
it): segments' files are opened and closed through a bounded cache (kbroker/log/descriptor_cache.py), so
20,000 partitions with data are served, produced to, fetched from and restarted under 1024 descriptors;
and running out of descriptors altogether (connections taking them all) makes the listener wait while
connected clients are still served, never ending the process or closing a client's connection.
Each step prints the broker's open descriptors (/proc/<pid>/fd) and resident memory (VmRSS)."""

from __future__ import annotations

import os
import socket
import time

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from testkit.broker_process import BrokerProcess

TOPICS = 20
PARTITIONS = 1000  # a topic: 20,000 in all


def process_stats(pid: int) -> tuple[int, int]:
    """(open descriptors, resident MiB) of a process, from /proc."""
    descriptors = len(os.listdir(f"/proc/{pid}/fd"))
    with open(f"/proc/{pid}/status") as status:
        rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return descriptors, rss_kib // 1024


def report(broker: BrokerProcess, what: str, started: float) -> int:
    descriptors, rss_mib = process_stats(broker.process.pid)
    print(f"{what}: {descriptors} descriptors open, RSS {rss_mib} MiB, {time.monotonic() - started:.1f} s in")
    return descriptors


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    for name in names:  # one topic a request: one of 20,000 partitions outlasts the client's timeout
        try:
            client.create_topics([admin.NewTopic(name, partitions)], operation_timeout=60)[name].result(timeout=120)
        except confluent_kafka.KafkaException as error:
            # librdkafka sent the request again (its connection broke on a loaded machine) after the first had
            # created the topic: what is asked is there (every partition is produced to below).
            if error.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def produce_to_every_partition(bootstrap: str, names: list[str], partitions: int, round_: int) -> None:
    failed = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50,
                                         "queue.buffering.max.messages": 1_000_000, "message.timeout.ms": 120_000})
    for name in names:
        for partition in range(partitions):
            producer.produce(name, value=b"%s-%d-%d" % (name.encode(), partition, round_), partition=partition,
                             on_delivery=lambda error, _: error is not None and failed.append(error))
        producer.poll(0)
    assert producer.flush(150) == 0
    assert not failed, failed[:5]


def read_everything(bootstrap: str, names: list[str], partitions: int, rounds: int) -> None:
    """Every partition's messages, fetched by one consumer assigned all of them."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([confluent_kafka.TopicPartition(name, partition, 0)  # 0, not OFFSET_BEGINNING: no ListOffsets
                     for name in names for partition in range(partitions)])
    seen: dict[tuple[str, int], list[bytes]] = {}
    wanted = len(names) * partitions * rounds
    count = 0
    deadline = time.monotonic() + 120
    while count < wanted and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            assert message.error() is None, message.error()
            seen.setdefault((message.topic(), message.partition()), []).append(message.value())
            count += 1
    consumer.close()
    expected = {(name, partition): [b"%s-%d-%d" % (name.encode(), partition, round_) for round_ in range(rounds)]
                for name in names for partition in range(partitions)}
    assert seen == expected, (count, wanted)


@pytest.mark.slow
def test_twenty_thousand_partitions_under_a_limit_of_1024_descriptors(tmp_path):
    started = time.monotonic()
    broker = BrokerProcess(tmp_path / "data", None, open_files_limit=1024)
    names = [f"many-{index}" for index in range(TOPICS)]
    broker.start()
    try:
        create_topics(broker.bootstrap, names, PARTITIONS)
        report(broker, f"{TOPICS * PARTITIONS} partitions created", started)
        produce_to_every_partition(broker.bootstrap, names, PARTITIONS, round_=0)
        assert report(broker, "one message produced to each", started) < 600  # 512 for segment files
        read_everything(broker.bootstrap, names, PARTITIONS, rounds=1)
        assert report(broker, "all fetched", started) < 600
        assert broker.stop() == 0

        broker.start(timeout_s=120)
        report(broker, "restarted on the same data", started)
        read_everything(broker.bootstrap, names, PARTITIONS, rounds=1)
        produce_to_every_partition(broker.bootstrap, names, PARTITIONS, round_=1)
        read_everything(broker.bootstrap, names, PARTITIONS, rounds=2)
        assert report(broker, "a second message each, all fetched again", started) < 600
        log = "".join(broker.log_tail)
        assert "Too many open files" not in log and "unexpected error" not in log, log[-5000:]
    finally:
        broker.kill()


@pytest.mark.slow
def test_out_of_descriptors_the_listener_waits_and_connected_clients_are_served(tmp_path):
    """Connections take every descriptor the broker has left: its accepts fail and the listener waits (the
    rest stay in the backlog), while a connected producer's appends to partitions whose files were closed
    go on, the cache giving up idle segments' files to open theirs (or, when even that is not enough,
    answering KAFKA_STORAGE_ERROR, which the client retries: tests/kbroker/test_out_of_descriptors.py);
    once the connections go, a new client reads everything, and nothing ended the process."""
    limit = 256  # 128 for segment files
    broker = BrokerProcess(tmp_path / "data", None, open_files_limit=limit)
    broker.start()
    hogs: list[socket.socket] = []
    try:
        names = ["crowded"]
        create_topics(broker.bootstrap, names, 300)
        produce_to_every_partition(broker.bootstrap, names, 300, round_=0)
        create_topics(broker.bootstrap, ["warm-up"], 1)
        # Idempotent: an acks=all append whose fsync could not open its files is answered KAFKA_STORAGE_ERROR
        # though written, and retried; the broker's producer state then keeps the retry from being a duplicate.
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5,
                                             "enable.idempotence": True, "message.timeout.ms": 60_000,
                                             "retry.backoff.ms": 50})
        producer.produce("warm-up", value=b"warm-up")
        assert producer.flush(10) == 0  # connected to the broker before its descriptors run out
        while process_stats(broker.process.pid)[0] < limit or len(hogs) < limit:
            hogs.append(socket.create_connection(("127.0.0.1", broker.port)))  # the last ones wait in the backlog
        deadline = time.monotonic() + 10
        while "new connections wait" not in "".join(broker.log_tail) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "out of file descriptors (Too many open files): new connections wait" in "".join(broker.log_tail)

        failed = []
        for partition in range(300):
            producer.produce("crowded", value=b"crowded-%d-1" % partition, partition=partition,
                             on_delivery=lambda error, _: error is not None and failed.append(error))
        in_crowd = producer.flush(30)
        print(f"{300 - in_crowd} of 300 delivered while connections held every descriptor")
        assert broker.process.poll() is None
        for hog in hogs:
            hog.close()
        hogs.clear()
        assert producer.flush(60) == 0 and not failed, failed[:5]
        read_everything(broker.bootstrap, names, 300, rounds=2)
        log = "".join(broker.log_tail)
        print("".join(line for line in broker.log_tail if "WARNING" in line or "ERROR" in line))
        assert "unexpected error" not in log and "Traceback" not in log, log[-5000:]
        assert broker.process.poll() is None
    finally:
        for hog in hogs:
            hog.close()
        broker.kill()
