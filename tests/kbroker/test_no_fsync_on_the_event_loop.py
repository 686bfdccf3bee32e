"""Nothing fsyncs on the broker's trio thread: a single node creating topics, rolling segments (with index
entries) under acks=all, committing a group's offsets and a transaction, deleting a topic does every fsync in a worker thread (the flusher, the Raft
driver's store), so that no request waits behind a disk flush it does not need."""

from __future__ import annotations

import os
import threading

import pytest
import trio

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from kbroker.testing import running_broker  # noqa: E402


@pytest.fixture
def fsyncs_on_the_loop(monkeypatch):
    """The stack of every fsync made from inside a trio run (the broker's thread)."""
    seen: list[str] = []
    lock = threading.Lock()
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def recording(descriptor, _real=real, _name=name):
            if trio.lowlevel.in_trio_run():
                import traceback

                with lock:
                    seen.append(f"os.{_name} at:\n{''.join(traceback.format_stack(limit=8))}")
            return _real(descriptor)

        monkeypatch.setattr(os, name, recording)
    return seen


def test_a_working_single_node_fsyncs_only_off_its_event_loop(fsyncs_on_the_loop):
    with running_broker() as broker:
        broker.create_topic("rolling", 2, {"internal.segment.bytes": 4096, "index.interval.bytes": 256})
        broker.create_topic("doomed", 3)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                             "enable.idempotence": True})
        for i in range(300):  # 300 x 200 B over 2 partitions: dozens of rolls
            producer.produce("rolling", value=b"x" * 200, partition=i % 2)
            if i % 50 == 0:
                producer.flush(10)
        assert producer.flush(30) == 0
        transactional = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "no-fsync"})
        transactional.init_transactions(30)
        transactional.begin_transaction()
        transactional.produce("rolling", value=b"in a transaction", partition=0)
        transactional.commit_transaction(30)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "no-fsync"})
        consumer.commit(offsets=[TopicPartition("rolling", 0, 10)], asynchronous=False)
        consumer.close()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["doomed"])["doomed"].result(10)
    assert fsyncs_on_the_loop == [], fsyncs_on_the_loop[0]
