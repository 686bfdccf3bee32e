"""A share group across the failover of its partition's leader on a three-node cluster (KIP-932).

The topic has three replicas; ``__share_group_state`` and ``__consumer_offsets`` keep the cluster defaults
(three replicas, min.insync.replicas 2). A ShareConsumer accepts the first half of the records and releases
the second half; the leader of the topic's partition is then SIGKILLed. Another replica leads, reads the
share-partition's state from the share coordinator (wherever it is, moved too if it was on the dead node),
and a new consumer gets exactly the released records, their delivery count kept (2), and nothing accepted.
Records produced after the failover come once, with delivery count 1.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from compat_tests.test_share_consumer import BROKER_OVERRIDES, QUIET_S, nothing_more, share_consumer
from testkit.quorum_process import Quorum, until

pytestmark = pytest.mark.timeout(300)
RECORDS = 200
TIMEOUT_S = 60


def produce(bootstrap: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for n in range(first, first + count):
        producer.produce("work", b"v%d" % n)
    assert producer.flush(TIMEOUT_S) == 0


def poll_offsets(consumer, wanted: int, timeout_s: float = TIMEOUT_S) -> list:
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < wanted and time.monotonic() < deadline:
        got += [message for message in consumer.poll(0.3) if message.error() is None]
    return got


def settle(consumer) -> tuple[set[int], dict[int, int]]:
    """Accept the first half of the records and release the second half once (a record back again is accepted):
    (the accepted offsets, the released ones with their delivery counts). Each poll's acknowledgements are
    committed before the next."""
    accepted: set[int] = set()
    released: dict[int, int] = {}
    deadline = time.monotonic() + TIMEOUT_S
    while len(accepted) + len(released) < RECORDS and time.monotonic() < deadline:
        messages = [message for message in consumer.poll(0.3) if message.error() is None]
        for message in messages:
            if message.offset() < RECORDS // 2 or message.delivery_count() > 1:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                accepted.add(message.offset())
                released.pop(message.offset(), None)
            else:
                consumer.acknowledge(message, AcknowledgeType.RELEASE)
                released[message.offset()] = message.delivery_count()
        if messages:
            assert all(error is None for error in consumer.commit_sync(TIMEOUT_S).values())
    return accepted, released


@pytest.mark.slow
def test_no_accepted_record_comes_back_and_delivery_counts_survive_a_leader_kill(tmp_path):
    cluster = Quorum(tmp_path, combined=True, overrides=BROKER_OVERRIDES + ("broker.session.timeout.ms=2000",
                                                                           "offsets.topic.num.partitions=3",
                                                                           "share.coordinator.state.topic.num.partitions=3"))
    try:
        cluster.start()
        bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures die with it
        admin.create_topics([NewTopic("work", 1, 3, config={"min.insync.replicas": "2"})])["work"].result(TIMEOUT_S)
        group = ConfigResource(ResourceType.GROUP, "work", incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([group]).values():
            future.result(TIMEOUT_S)
        produce(bootstrap, 0, RECORDS)

        first = share_consumer(bootstrap, "work", explicit=True)
        accepted, released = settle(first)
        assert released and accepted | set(released) == set(range(RECORDS))
        first.close()

        leader = admin.list_topics(timeout=10).topics["work"].partitions[0].leader
        cluster.node(leader).kill()
        until(lambda: admin.list_topics(timeout=5).topics["work"].partitions[0].leader not in (-1, leader), 30,
              "a new leader of work-0")
        print(f"\nthe leader of work-0, broker {leader}, was SIGKILLed")

        second = share_consumer(bootstrap, "work", explicit=True)
        try:
            again = poll_offsets(second, len(released))
            # the released ones, their deliveries counted; no accepted one
            assert sorted((m.offset(), m.delivery_count()) for m in again) == sorted(
                (offset, count + 1) for offset, count in released.items())
            for message in again:
                second.acknowledge(message)
            assert all(error is None for error in second.commit_sync(TIMEOUT_S).values())
            produce(bootstrap, RECORDS, 10)
            late = poll_offsets(second, 10)
            assert sorted((m.offset(), m.delivery_count()) for m in late) == [
                (n, 1) for n in range(RECORDS, RECORDS + 10)]
            for message in late:
                second.acknowledge(message)
            second.commit_sync(TIMEOUT_S)
            assert nothing_more(second, QUIET_S) == []
        finally:
            second.close()
    finally:
        cluster.close()
