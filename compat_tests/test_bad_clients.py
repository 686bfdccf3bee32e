"""Garbage, huge frame claims, torn frames and idle crowds never hurt well-behaved clients."""

import os
import random
import socket
import struct
import threading
import time

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from testkit.broker_process import BrokerProcess

IDLE_CONNECTIONS = 1000


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def hostile_traffic(port: int, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    for round_number in range(rounds):
        with socket.create_connection(("127.0.0.1", port), timeout=0.3) as connection:
            kind = round_number % 4
            if kind == 0:
                connection.sendall(os.urandom(rng.randint(1, 4096)))
            elif kind == 1:
                connection.sendall(struct.pack(">i", 2**31 - 1) + os.urandom(64))  # claims 2 GiB
            elif kind == 2:
                connection.sendall(struct.pack(">i", 1000) + os.urandom(100))  # torn, then closed
                continue
            else:
                connection.sendall(struct.pack(">i", 12) + struct.pack(">hhi", rng.randint(100, 30000), 0, 1) + b"\x00\x00")
            try:
                connection.recv(100)
            except (TimeoutError, ConnectionResetError):  # a partial frame just waits, as on Kafka
                pass


@pytest.mark.slow
def test_a_producer_and_consumer_keep_working_through_hostile_clients(tmp_path):
    broker = BrokerProcess(tmp_path / "data", None, f"max.connections={IDLE_CONNECTIONS + 50}")
    broker.start()
    idle = []
    try:
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        client.create_topics([admin.NewTopic("steady", 1)])["steady"].result(10)
        rss_before = rss_kib(broker.process.pid)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1})
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition("steady", 0, confluent_kafka.OFFSET_BEGINNING)])
        attackers = [threading.Thread(target=hostile_traffic, args=(broker.port, 60, seed)) for seed in range(4)]
        for attacker in attackers:
            attacker.start()
        for _ in range(IDLE_CONNECTIONS):
            idle.append(socket.create_connection(("127.0.0.1", broker.port), timeout=5))

        received = []
        for i in range(2000):
            producer.produce("steady", value=b"%d" % i)
            if i % 100 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 30
        while len(received) < 2000 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received.append(int(message.value()))
        for attacker in attackers:
            attacker.join(60)
        assert received == list(range(2000))

        # Past max.connections a new connection is closed at once; the broker stays up.
        extra = [socket.create_connection(("127.0.0.1", broker.port), timeout=5) for _ in range(60)]
        closed = 0
        for connection in extra:
            connection.settimeout(0.2)
            try:
                closed += connection.recv(1) == b""
            except socket.timeout:
                pass
            connection.close()
        assert closed >= 10
        rss_after = rss_kib(broker.process.pid)
        consumer.close()
        assert broker.process.poll() is None
        assert rss_after - rss_before < 64 * 1024, (rss_before, rss_after)  # bounded: no frame was buffered
        print(f"\nRSS {rss_before} KiB -> {rss_after} KiB with {IDLE_CONNECTIONS} idle connections and 240 hostile ones")
    finally:
        for connection in idle:
            connection.close()
        broker.kill()
