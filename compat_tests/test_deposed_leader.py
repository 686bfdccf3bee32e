"""Issue 44's minimal sequence: a leader cut off from its followers must not acknowledge what it truncates.

Three combined nodes behind loopback proxies (testkit/link_proxy.py), a topic with replication factor 3 and
min.insync.replicas=2. The leader's links to the other nodes are blackholed while clients still reach it:
acks=all produces sent to it are written there and wait for followers that never fetch. The others fence
it and elect a new leader, which takes a write of its own at the same offsets. At the heal the old leader
learns it follows, truncates to the new leader's log and follows its high watermark past the offsets of
the waiting writes. Before the fix those writes were then answered with no error, and their records were
in no replica's log; now each is answered NOT_LEADER_OR_FOLLOWER at once, and whatever was acknowledged
is in the log at its offset.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from testkit import raw_client
from testkit.quorum_process import Quorum, read_to_end, until
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "deposed"
FAST_FAILOVER = ("broker.session.timeout.ms=2000", "replica.lag.time.max.ms=2000")
ProduceRequest = API_BY_NAME["Produce"].request_class
WAITING_WRITES = 5
HEAL_ANSWER_S_MAX = 5  # the deposed leader learns of its successor within a few metadata fetches


def produce_raw(port: int, value: bytes, timeout_ms: int = 60_000):
    """One acks=all record to partition 0 in a Produce v9 request of our own (nothing retries it):
    the partition's answer (error code, base offset)."""
    data = ProduceRequest.TopicProduceData
    response = raw_client.call(port, "Produce", 9, ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=timeout_ms, topic_data=[data(name=TOPIC, partition_data=[
            data.PartitionProduceData(index=0, records=build_batch([Record(value=value)]))])]),
        timeout_s=timeout_ms / 1000 + 30)
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def partition_state(node):
    return AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0]


def test_a_deposed_leader_answers_its_waiting_writes_not_leader_and_loses_nothing_acknowledged(tmp_path):
    cluster = Quorum(tmp_path, combined=True, overrides=FAST_FAILOVER, proxied=True)
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(15)
        until(lambda: len(partition_state(cluster.node(1)).isrs) == 3, 15, "three in-sync replicas")
        old = cluster.node(partition_state(cluster.node(1)).leader)
        assert produce_raw(old.reachable_port("broker"), b"before") == (ErrorCode.NONE, 0)
        others = [node for node in cluster.nodes if node is not old]
        for other in others:
            cluster.fail_links(old, other, "blackhole")

        answers: dict[bytes, tuple[int, int, float]] = {}

        def send(value: bytes) -> None:
            error_code, offset = produce_raw(old.reachable_port("broker"), value)
            answers[value] = (error_code, offset, time.monotonic())

        senders = [threading.Thread(target=send, args=(str(n).encode(),), daemon=True)
                   for n in range(1, WAITING_WRITES + 1)]
        for sender in senders:
            sender.start()
            time.sleep(0.05)  # in this order at offsets 1..5 of the old leader's log
        new_leader = until(lambda: next((node for node in others if partition_state(node).leader == node.node_id),
                                        None), 30, "a new leader among the others")
        written = until(lambda: (lambda answer: answer if answer[0] == ErrorCode.NONE else None)(
            produce_raw(new_leader.reachable_port("broker"), b"new leader's", timeout_ms=5000)), 30,
            "a write at the new leader")
        assert written[1] == 1  # where the old leader's waiting writes begin: the logs diverge from here
        assert not answers, answers  # nothing is answered while the old leader is cut off
        healed_at = time.monotonic()
        cluster.heal_links()
        for sender in senders:
            sender.join(90)
        assert len(answers) == WAITING_WRITES
        consumer = Consumer({"bootstrap.servers": new_leader.bootstrap, "group.id": "deposed",
                             "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            log = {offset: value for _, offset, value in read_to_end(consumer, 1, timeout_s=30)}
        finally:
            consumer.close()
        lost = {value: offset for value, (error_code, offset, _) in answers.items()
                if error_code == ErrorCode.NONE and log.get(offset) != value}
        print(f"\nwaiting writes answered {sorted((v, ErrorCode(e).name) for v, (e, _, _) in answers.items())}, "
              f"{max(at for _, _, at in answers.values()) - healed_at:.1f} s after the heal; log {log}")
        assert not lost, f"acknowledged, then not in the log at their offsets: {lost}"
        assert {error_code for error_code, _, _ in answers.values()} == {ErrorCode.NOT_LEADER_OR_FOLLOWER}
        assert max(at for _, _, at in answers.values()) - healed_at < HEAL_ANSWER_S_MAX
        assert log[0] == b"before" and log[1] == b"new leader's"
    finally:
        cluster.close()
