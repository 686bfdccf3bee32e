"""Replication under a nemesis: no acknowledged write lost across leader kills, restarts and partitions.

Three combined broker+controller processes, a topic with replication factor 3 and
min.insync.replicas=2, an idempotent confluent-kafka producer with acks=all writing
all the while. The nemesis SIGKILLs the leader of a partition and restarts it, cuts
its node off the network, blackholes its links to the other brokers, or makes the links
between brokers slow and lossy and cuts one, then heals; ``KBTEST_NEMESIS_CYCLES`` cycles of
each (10 by default). Also here: acks=all refused below min.insync.replicas, preferred leader
election, and a reassignment under load.
Afterwards compat_tests/replication_checker.py compares what the producer was told
with what a consumer reads and with every replica's log, byte for byte.
"""

from __future__ import annotations

import collections
import os
import threading
import time

import pytest
from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import NewTopic as KafkaNewTopic

from testkit import raw_client
from testkit.quorum_process import Quorum, read_to_end, until
from compat_tests.replication_checker import check, replica_logs
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME

pytestmark = pytest.mark.timeout(900)

CYCLES = int(os.environ.get("KBTEST_NEMESIS_CYCLES", "10"))
TOPIC = "jepsen"
PARTITIONS = 3
FAST_FAILOVER = ("broker.session.timeout.ms=2000", "replica.lag.time.max.ms=2000")


class Writer:
    """Writes "<partition>:<sequence>" to each partition in turn until stopped; keeps what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "message.timeout.ms": 120000, "linger.ms": 5})
        self.acknowledged: list[tuple[int, int, str]] = []
        self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acknowledged.append((message.partition(), message.offset(), message.value().decode()))
        else:
            self.failed += 1

    def _run(self) -> None:
        sequence = [0] * PARTITIONS
        deadline = time.monotonic() + 600
        while not self.stop.is_set() and time.monotonic() < deadline:
            for partition in range(PARTITIONS):
                try:
                    self.producer.produce(TOPIC, value=f"{partition}:{sequence[partition]}".encode(),
                                          partition=partition, on_delivery=self._delivered)
                    sequence[partition] += 1
                except BufferError:
                    pass
            self.producer.poll(0.01)
        self.producer.flush(150)


def start_writing(cluster: Quorum) -> Writer:
    """Starts the cluster, makes the topic (replication factor 3, min.insync.replicas=2) and a Writer at it."""
    cluster.start()
    admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(15)
    until(lambda: leader_of(cluster, 0) > 0, 15, "a leader")
    writer = Writer(",".join(node.bootstrap for node in cluster.nodes))
    writer.thread.start()
    return writer


def leader_of(cluster: Quorum, partition: int) -> int:
    for node in cluster.nodes:
        if node.running:
            try:
                metadata = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(TOPIC, timeout=5)
                return metadata.topics[TOPIC].partitions[partition].leader
            except Exception:
                continue
    return -1


def read_back(bootstrap: str) -> list[tuple[int, int, str]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        return [(partition, offset, value.decode()) for partition, offset, value in read_to_end(consumer, PARTITIONS)]
    finally:
        consumer.close()


def stop_and_check(cluster: Quorum, writer: Writer):
    """The checker's verdict on what ``writer`` was told, what a consumer reads back from the cluster and
    every replica's log, read once the nodes are stopped."""
    read = read_back(",".join(node.bootstrap for node in cluster.nodes))
    for node in cluster.nodes:
        node.stop()
    return check(writer.acknowledged, read, replica_logs(cluster.nodes, TOPIC, PARTITIONS))


def kill_and_restart(cluster: Quorum, victim) -> None:
    victim.kill()
    time.sleep(2.5)  # the others fence it, elect new leaders and go on without it
    victim.start(cluster.voters)


def isolate_and_heal(cluster: Quorum, victim) -> None:
    victim.isolate()  # nobody reaches it; it still reaches the others (and heartbeats)
    time.sleep(3)  # its followers fall out of touch, its ISR shrinks, or clients wait
    victim.heal()


def blackhole_from_peers(cluster: Quorum, victim) -> None:
    """Every link between the leader's node and the other nodes silently stops (clients still reach
    all three): the leader can neither replicate nor reach the quorum and learns it only by timing
    out, while the others fence it and elect a new leader. What was held back arrives at the heal."""
    for other in cluster.nodes:
        if other is not victim:
            cluster.fail_links(victim, other, "blackhole")
    time.sleep(3)
    cluster.heal_links()


def flaky_links(cluster: Quorum, victim) -> None:
    """Every link between nodes slow (30 ms each way) and lossy (a chunk in five retransmitted after
    0.2 s), the leader's node cut from one of its followers."""
    nodes = cluster.nodes
    for index, first in enumerate(nodes):
        for second in nodes[index + 1:]:
            cluster.fail_links(first, second, "delay", seconds=0.03)
            cluster.fail_links(first, second, "drop", probability=0.2)
    cluster.fail_links(victim, next(node for node in nodes if node is not victim), "sever")
    time.sleep(3)
    cluster.heal_links()


NEMESES = [kill_and_restart, isolate_and_heal, blackhole_from_peers, flaky_links]


@pytest.mark.slow
@pytest.mark.parametrize("fault", NEMESES, ids=["kill", "partition", "blackhole", "flaky"])
def test_no_acknowledged_write_is_lost_under_a_nemesis(tmp_path, fault):
    """SIGKILL and restart the leader of a partition; cut it off the network (every listener of its node
    behind a severed compat_tests/link_proxy.py); blackhole its links to the other brokers; or make every
    link between brokers slow and lossy and cut one of the leader's; then heal, cycle after cycle."""
    cluster = Quorum(tmp_path, combined=True, overrides=FAST_FAILOVER, proxied=fault is not kill_and_restart)
    try:
        writer = start_writing(cluster)
        faults = []
        for cycle in range(CYCLES):
            time.sleep(1.0)
            victim_id = leader_of(cluster, cycle % PARTITIONS)
            if victim_id <= 0:
                continue
            fault(cluster, cluster.node(victim_id))
            faults.append(victim_id)
        time.sleep(2)
        writer.stop.set()
        writer.thread.join(180)
        until(lambda: all(node.running for node in cluster.nodes), 5, "every node up")
        time.sleep(4)  # followers catch up and rejoin the ISR
        verdict = stop_and_check(cluster, writer)
        print(f"\nnemesis: {len(faults)} x {fault.__name__} of a leader (brokers {faults}); {verdict}; "
              f"{writer.failed} writes not acknowledged")
        assert verdict.acknowledged > 1000 and len(faults) >= CYCLES - 1
        for node in cluster.nodes:  # the faults hit links between brokers: each node's proxies knew the others
            seen = sum((proxy.sources_seen for proxy in node.proxies.values()), collections.Counter())
            assert not node.proxies or {other.node_id for other in cluster.nodes if other is not node} <= set(seen)
        assert verdict.anomalies == 0, (verdict.lost[:5], verdict.duplicated[:5], verdict.conflicting[:5],
                                        verdict.reordered[:5], verdict.diverged)
    finally:
        cluster.close()


@pytest.mark.slow
def test_a_clean_stop_hands_its_leaderships_over_before_the_process_exits(tmp_path):
    """Controlled shutdown: a SIGTERMed broker asks the controller to move its leaderships and exits once
    they have moved. broker.session.timeout.ms is 60 s here, so fencing by a missed session cannot
    be what moves them within the 10 s the others are watched for; an acks=all producer writing
    throughout loses nothing."""
    cluster = Quorum(tmp_path, combined=True, overrides=("broker.session.timeout.ms=60000",))
    try:
        writer = start_writing(cluster)
        time.sleep(1)
        victim = cluster.node(leader_of(cluster, 0))
        rest = [node for node in cluster.nodes if node is not victim]
        stopped_at = time.monotonic()
        assert victim.stop() == 0

        def handed_over(node) -> bool:
            partitions = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(TOPIC, timeout=5) \
                .topics[TOPIC].partitions.values()
            return all(p.leader in {n.node_id for n in rest} and victim.node_id not in p.isrs for p in partitions)

        try:
            until(lambda: all(handed_over(node) for node in rest), 10, "the stopped broker's leaderships elsewhere")
        except AssertionError as error:
            raise AssertionError(f"{error}; the stopped broker's log ends:\n{victim.log_tail(15)}") from None
        print(f"\nbroker {victim.node_id} stopped cleanly; every survivor shows its leaderships moved and it out "
              f"of every ISR {time.monotonic() - stopped_at:.1f} s after SIGTERM (session timeout 60 s)")
        time.sleep(1)
        writer.stop.set()
        writer.thread.join(180)
        verdict = check(writer.acknowledged, read_back(",".join(node.bootstrap for node in rest)))
        print(f"{verdict}; {writer.failed} writes not acknowledged")
        assert verdict.acknowledged > 100 and verdict.anomalies == 0, (verdict.lost[:5], verdict.reordered[:5])
    finally:
        cluster.close()


@pytest.mark.slow
def test_an_isr_shrinking_under_a_waiting_produce_answers_not_enough_replicas_after_append(tmp_path):
    """Kafka's two refusals of acks=all. The followers' fetches to the leader are blackholed (their other
    links, and the clients', go through): an acks=all produce is written at the leader and waits;
    after replica.lag.time.max.ms the leader shrinks the ISR to itself, the high watermark passes the
    record with the ISR below min.insync.replicas=2, so it is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND
    (written, not replicated enough). The next is refused before any write: NOT_ENOUGH_REPLICAS. Healed,
    the followers catch up, rejoin the ISR, and writes are acknowledged again."""
    cluster = Quorum(tmp_path, combined=True, overrides=FAST_FAILOVER, proxied=True)
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
        admin.create_topics([NewTopic("shrinking", 1, 3, config={"min.insync.replicas": "2"})])["shrinking"].result(15)
        until(lambda: len(isr_of(admin, "shrinking")) == 3, 15, "three in-sync replicas")
        leader = cluster.node(admin.list_topics("shrinking", timeout=5).topics["shrinking"].partitions[0].leader)
        port = leader.reachable_port("broker")
        assert produce_raw(port, "shrinking", b"replicated") == ErrorCode.NONE
        for follower in cluster.nodes:
            if follower is not leader:
                leader.proxies["broker"].blackhole(follower.node_id)
        assert produce_raw(port, "shrinking", b"written, not replicated") == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        until(lambda: isr_of(admin, "shrinking") == [leader.node_id], 10, "every broker to show the ISR shrunk")
        assert produce_raw(port, "shrinking", b"refused") == ErrorCode.NOT_ENOUGH_REPLICAS
        cluster.heal_links()
        until(lambda: len(isr_of(admin, "shrinking")) == 3, 30, "the followers back in the ISR")
        assert produce_raw(port, "shrinking", b"after") == ErrorCode.NONE
        consumer = Consumer({"bootstrap.servers": leader.bootstrap, "group.id": "shrinking",
                             "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition("shrinking", 0, 0)])
            values = [value for _, _, value in read_to_end(consumer, 1, timeout_s=30)]
        finally:
            consumer.close()
        assert values == [b"replicated", b"written, not replicated", b"after"]
    finally:
        cluster.close()


def isr_of(admin: AdminClient, topic: str) -> list[int]:
    return sorted(admin.list_topics(topic, timeout=5).topics[topic].partitions[0].isrs)


def produce_raw(port: int, topic: str, value: bytes) -> int:
    """One acks=all record to partition 0 in a Produce v9 request of our own (no client retries it)."""
    request = API_BY_NAME["Produce"].request_class
    data = request.TopicProduceData
    response = raw_client.call(port, "Produce", 9, request(
        transactional_id=None, acks=-1, timeout_ms=15000, topic_data=[data(name=topic, partition_data=[
            data.PartitionProduceData(index=0, records=build_batch([Record(value=value)]))])]), timeout_s=30)
    return response.responses[0].partition_responses[0].error_code


@pytest.mark.slow
def test_with_two_of_three_replicas_down_acks_all_is_refused_until_they_return(tmp_path):
    """Controllers apart from the brokers (so the quorum outlives them): two brokers die, the controller
    fences them and the ISR shrinks to one, below min.insync.replicas=2: acks=all produce answers
    NOT_ENOUGH_REPLICAS and writes nothing. The brokers come back, catch up, rejoin the ISR: writes resume."""
    cluster = Quorum(tmp_path, brokers=3, overrides=FAST_FAILOVER)
    try:
        cluster.start()
        first = cluster.brokers[0]
        admin = AdminClient({"bootstrap.servers": first.bootstrap})
        admin.create_topics([NewTopic("quorum", 1, 3,
                                      config={"min.insync.replicas": "2"})])["quorum"].result(15)

        def produce(value: bytes):
            outcome = []
            producer = Producer({"bootstrap.servers": first.bootstrap, "acks": "all", "retries": 0,
                                 "message.timeout.ms": 10000, "enable.idempotence": False})
            producer.produce("quorum", value=value, partition=0, on_delivery=lambda error, _: outcome.append(error))
            producer.flush(15)
            return outcome[0] if outcome else "no answer"

        until(lambda: produce(b"before") is None, 15, "a first write")
        metadata = admin.list_topics("quorum", timeout=5).topics["quorum"].partitions[0]
        others = [node for node in cluster.brokers if node.node_id != metadata.leader]
        leader = next(node for node in cluster.brokers if node.node_id == metadata.leader)
        for node in others:
            node.kill()
        admin = AdminClient({"bootstrap.servers": leader.bootstrap})
        until(lambda: len(admin.list_topics("quorum", timeout=5).topics["quorum"].partitions[0].isrs) == 1, 20,
              "the ISR to shrink to the leader")
        refused = produce(b"refused")
        assert refused is not None and refused.name() == "NOT_ENOUGH_REPLICAS", refused
        for node in others:
            node.start(cluster.voters)
        until(lambda: len(admin.list_topics("quorum", timeout=5).topics["quorum"].partitions[0].isrs) == 3, 30,
              "the returned brokers back in the ISR")
        assert produce(b"after") is None
        consumer = Consumer({"bootstrap.servers": leader.bootstrap, "group.id": "q", "enable.partition.eof": True,
                             "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("quorum", 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                values.append(message.value())
            elif message is not None and message.error().code() == -191:
                break
        consumer.close()
        assert values == [b"before", b"after"]  # nothing was written for the refused produce
    finally:
        cluster.close()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["elect_leaders", "auto_rebalance"])
def test_leadership_returns_to_preferred_replicas(tmp_path, how):
    """A restarted broker gets its leaderships back: through ElectLeaders (confluent-kafka's
    elect_leaders), or with auto.leader.rebalance.enable by the controller on its own."""
    auto = "true" if how == "auto_rebalance" else "false"
    cluster = Quorum(tmp_path, combined=True, overrides=FAST_FAILOVER + ("leader.imbalance.check.interval.seconds=1",
                                                                           f"auto.leader.rebalance.enable={auto}"))
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
        admin.create_topics([NewTopic("prefer", 3, 3)])["prefer"].result(15)

        def leaders(node) -> dict:
            found = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics("prefer", timeout=5)
            return {p: (m.leader, m.replicas[0], len(m.isrs)) for p, m in found.topics["prefer"].partitions.items()}

        assert all(leader == preferred for leader, preferred, _ in until(lambda: leaders(cluster.node(1)), 10, "").values())
        victim = cluster.node(2)
        victim.kill()
        until(lambda: all(leader != 2 for leader, _, _ in leaders(cluster.node(1)).values()), 20, "leaders moved off 2")
        victim.start(cluster.voters)
        if how == "auto_rebalance":
            until(lambda: all(leader == preferred for leader, preferred, _ in leaders(cluster.node(1)).values()), 30,
                  "preferred leaders again, with no request")
            return
        until(lambda: all(isr == 3 for _, _, isr in leaders(cluster.node(1)).values()), 30, "2 back in every ISR")
        assert any(leader != preferred for leader, preferred, _ in leaders(cluster.node(1)).values())
        partitions = [TopicPartition("prefer", p) for p in range(3)]
        results = admin.elect_leaders(ElectionType.PREFERRED, partitions).result(15)
        assert sum(error is None for error in results.values()) == 1  # the one partition broker 2 prefers
        until(lambda: all(leader == preferred for leader, preferred, _ in leaders(cluster.node(1)).values()), 15,
              "preferred leaders again")
    finally:
        cluster.close()


@pytest.mark.slow
def test_a_partition_reassigned_under_load_loses_nothing(tmp_path):
    """Replicas {1,2,3} -> {1,2,4} (kafka-python's alter_partition_reassignments) while an acks=all
    producer writes: broker 4 catches up and joins the ISR before 3 is dropped; nothing acknowledged
    is lost, and broker 3 no longer holds the partition."""
    cluster = Quorum(tmp_path, combined=True, brokers=1, overrides=FAST_FAILOVER)
    try:
        cluster.start()
        bootstrap = ",".join(node.bootstrap for node in cluster.nodes + cluster.brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        mover = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
        try:
            mover.create_topics([KafkaNewTopic(TOPIC, num_partitions=-1, replication_factor=-1,
                                               replica_assignments={p: [1, 2, 3] for p in range(PARTITIONS)},
                                               topic_configs={"min.insync.replicas": "2"})])
            until(lambda: leader_of(cluster, PARTITIONS - 1) > 0, 15, "leaders")
            writer = Writer(bootstrap)
            writer.thread.start()
            time.sleep(2)
            accepted = mover.alter_partition_reassignments(
                {KafkaTopicPartition(TOPIC, p): [1, 2, 4] for p in range(PARTITIONS)})
            assert all(error is None for error in accepted.values()), accepted

            def placed() -> dict:
                found = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions
                return {p: sorted(m.replicas) for p, m in found.items()}
            # Done when the metadata shows the new replicas and no broker lists the move as ongoing
            # (each answers from its own image, which may lag a moment behind another's).
            until(lambda: placed() == {p: [1, 2, 4] for p in range(PARTITIONS)}
                  and not mover.list_partition_reassignments(), 60, "the reassignments to complete")
        finally:
            mover.close()
        time.sleep(2)  # more writes on the new replica set
        writer.stop.set()
        writer.thread.join(180)
        read = read_back(bootstrap)
        verdict = check(writer.acknowledged, read)
        print(f"\nreassignment {{1,2,3}} -> {{1,2,4}} under load: {verdict}")
        assert verdict.acknowledged > 500 and verdict.anomalies == 0, (verdict.lost[:5], verdict.duplicated[:5])
        assert not (cluster.node(3).data_dir / f"{TOPIC}-0").exists()
    finally:
        cluster.close()
