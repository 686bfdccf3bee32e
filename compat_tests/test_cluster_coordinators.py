"""Group coordination across a coordinator failover on a three-broker cluster.

``__consumer_offsets`` is replicated like any topic (offsets.topic.replication.factor is 3 on a
node of a cluster, as Kafka's default, without being set): when
the broker leading a group's offsets partition dies, another replica becomes its leader, loads
the partition and coordinates the group; the committed offsets are all there.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from testkit.quorum_process import Quorum, find_coordinator, until

pytestmark = pytest.mark.timeout(300)

# The internal topics' replication factors are left to the cluster defaults (3, and min.insync.replicas 2).
COORDINATOR_SETTINGS = ("offsets.topic.num.partitions=6", "broker.session.timeout.ms=2000")
MESSAGES = 3000


def coordinator_of(cluster: Quorum, group: str) -> int:
    return find_coordinator(cluster, group, key_type=0)


def consume(consumer: Consumer, count: int, seen: set, timeout_s: float) -> None:
    """Poll until ``count`` distinct values are seen, committing every 100 messages (a commit the
    coordinator cannot take now is simply made again later, as an application would)."""
    deadline = time.monotonic() + timeout_s
    polled = 0
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message.value())
            polled += 1
            if polled % 100 == 0:
                commit(consumer)


def commit(consumer: Consumer) -> None:
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as error:
        if error.args[0].code() != KafkaError._NO_OFFSET:  # nothing new to commit is fine
            raise


def _committed(consumer: Consumer) -> bool:
    try:
        commit(consumer)
        return True
    except KafkaException:
        return False


@pytest.mark.slow
def test_a_group_carries_on_when_its_coordinator_dies(tmp_path):
    cluster = Quorum(tmp_path, combined=True, overrides=COORDINATOR_SETTINGS)
    try:
        cluster.start()
        bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures die with it
        admin.create_topics([NewTopic("work", 3, 3, config={"min.insync.replicas": "2"})])["work"].result(15)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(MESSAGES):
            producer.produce("work", value=b"%d" % i, partition=i % 3)
        assert producer.flush(30) == 0

        settings = {"bootstrap.servers": bootstrap, "group.id": "workers", "enable.auto.commit": False,
                    "auto.offset.reset": "earliest", "session.timeout.ms": 10000}
        consumer = Consumer(settings)
        consumer.subscribe(["work"])
        seen: set = set()
        consume(consumer, MESSAGES // 3, seen, 60)
        commit(consumer)
        offsets_topic = admin.list_topics(timeout=10).topics["__consumer_offsets"]
        assert [len(offsets_topic.partitions[p].replicas) for p in range(6)] == [3] * 6
        coordinator = until(lambda: coordinator_of(cluster, "workers"), 10, "the group's coordinator")
        cluster.node(coordinator).kill()
        moved_to = until(lambda: (c := coordinator_of(cluster, "workers")) not in (-1, coordinator) and c, 30,
                         "another coordinator")
        print(f"\ncoordinator of 'workers' moved from broker {coordinator} to {moved_to}")
        consume(consumer, MESSAGES, seen, 90)
        until(lambda: _committed(consumer), 30, "a last commit through the new coordinator")
        consumer.close()
        assert len(seen) == MESSAGES

        again = Consumer(settings)  # everything was committed, through the new coordinator: nothing is left
        again.subscribe(["work"])
        leftover = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = again.poll(0.5)
            if message is not None and message.error() is None:
                leftover.append(message.value())
        again.close()
        assert leftover == []
    finally:
        cluster.close()


@pytest.mark.slow
def test_group_churn_goes_on_across_a_coordinator_kill(tmp_path):
    """Issue 7's churn test (members joining and leaving at random while a producer writes; every
    record processed, the committed offsets at the log ends), on three brokers whose group
    coordinator is SIGKILLed and restarted mid-run."""
    from compat_tests.test_groups import BROKER_OVERRIDES, churn

    cluster = Quorum(tmp_path, combined=True, overrides=COORDINATOR_SETTINGS + BROKER_OVERRIDES + (
        "default.replication.factor=3", "min.insync.replicas=2"))
    try:
        cluster.start()
        bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
        killed = []

        def nemesis() -> None:
            time.sleep(4)  # the churn is under way
            victim = coordinator_of(cluster, "churn-confluent-classic")
            if victim > 0:
                cluster.node(victim).kill()
                killed.append(victim)
                time.sleep(3)
                cluster.node(victim).start(cluster.voters)

        thread = threading.Thread(target=nemesis, daemon=True)
        thread.start()
        (tmp_path / "members").mkdir()
        churn(bootstrap, "confluent-classic", tmp_path / "members", rounds=8)
        thread.join(60)
        assert killed, "the coordinator was never killed"
        print(f"coordinator broker {killed[0]} was SIGKILLed and restarted during the churn")
    finally:
        cluster.close()
