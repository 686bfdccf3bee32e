"""Transactions on a three-broker cluster: the coordinator, the partition leaders and the group
coordinator on different brokers (markers and KIP-890 verification go between them), and the
transaction coordinator killed mid-run: committed transactions are read once, aborted ones never."""

from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from testkit.quorum_process import Quorum, find_coordinator, read_to_end, until
from compat_tests.test_cluster_coordinators import COORDINATOR_SETTINGS

pytestmark = pytest.mark.timeout(300)

TRANSACTIONS = 30
PER_TRANSACTION = 10


def transaction_coordinator(cluster: Quorum, transactional_id: str) -> int:
    return find_coordinator(cluster, transactional_id, key_type=1)


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    try:
        return [value for _, _, value in read_to_end(consumer, 3, timeout_s=60)]
    finally:
        consumer.close()


@pytest.mark.slow
def test_transactions_survive_their_coordinators_death(tmp_path):
    cluster = Quorum(tmp_path, combined=True, overrides=COORDINATOR_SETTINGS)
    try:
        cluster.start()
        bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("ledger", 3, 3, config={"min.insync.replicas": "2"})])["ledger"].result(15)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ledger-writer",
                             "transaction.timeout.ms": 20000})
        until(lambda: _init(producer), 60, "InitProducerId")
        committed, aborted, killed = [], [], None
        for number in range(TRANSACTIONS):
            if number == TRANSACTIONS // 2:
                killed = transaction_coordinator(cluster, "ledger-writer")
                cluster.node(killed).kill()
            values = [f"{number}-{i}".encode() for i in range(PER_TRANSACTION)]
            for attempt in range(20):
                try:
                    producer.begin_transaction()
                    for i, value in enumerate(values):
                        producer.produce("ledger", value=value, partition=i % 3)
                    if number % 10 == 3:  # now and then, an abort
                        producer.abort_transaction(30)
                        aborted += values
                    else:
                        producer.commit_transaction(30)
                        committed += values
                    break
                except KafkaException as error:
                    if error.args[0].txn_requires_abort():
                        producer.abort_transaction(30)
                    elif not error.args[0].retriable():
                        raise
                    time.sleep(0.5)
        state_topic = admin.list_topics(timeout=10).topics["__transaction_state"]
        assert {len(partition.replicas) for partition in state_topic.partitions.values()} == {3}
        moved = transaction_coordinator(cluster, "ledger-writer")
        print(f"\ntransaction coordinator killed: broker {killed}; now broker {moved}")
        assert moved not in (-1, killed)
        read = read_committed(",".join(n.bootstrap for n in cluster.nodes if n.running), "ledger")
        assert sorted(read) == sorted(committed) and len(set(read)) == len(read)
        assert not set(read) & set(aborted)
    finally:
        cluster.close()


def _init(producer: Producer) -> bool:
    try:
        producer.init_transactions(10)
        return True
    except KafkaException:
        return False


@pytest.mark.slow
def test_consume_transform_produce_stays_exactly_once_across_coordinator_kills(tmp_path):
    """Issue 8's exactly-once worker on three brokers: its transaction coordinator is SIGKILLed after
    1,500 committed records and its group coordinator after 3,000 (each restarted); every input
    record comes out exactly once, in its input's partition."""
    from compat_tests.test_exactly_once import start_worker

    cluster = Quorum(tmp_path, combined=True, overrides=COORDINATOR_SETTINGS)
    worker = None
    try:
        cluster.start()
        bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
        source, target, partitions, count = "inputs", "outputs", 3, 6_000
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})
                                           for name in (source, target)]).values():
            future.result(15)
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for index in range(count):
            producer.produce(source, value=f"in-{index}".encode(), partition=index % partitions)
            if index % 1000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0

        done, killed, replaced = 0, [], []
        victims = [(1_500, "transformer-1", 1), (3_000, "transformers", 0)]
        while True:
            worker = start_worker(bootstrap, source, target, idle_s=8, stderr=subprocess.STDOUT)
            output = []
            for line in worker.stdout:
                output.append(line)
                if line.startswith("committed "):
                    done += int(line.split()[1])
                if victims and done >= victims[0][0]:
                    _, key, key_type = victims.pop(0)
                    victim = find_coordinator(cluster, key, key_type)
                    cluster.node(victim).kill()
                    killed.append(victim)
                    cluster.node(victim).start(cluster.voters)
            code = worker.wait(30)
            if code in (4, 5) and len(replaced) < 3:  # the client hung or was fenced (see eos_worker): a new worker
                replaced.append(output[-1].strip() if output else f"exit {code}")
                continue
            assert code == 0, "".join(output)[-3000:]
            break
        print(f"\n{done} records committed by the worker; coordinators killed: brokers {killed}; "
              f"workers replaced after a client hang or fence: {len(replaced)} {replaced}")
        assert len(killed) == 2
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker",
                             "isolation.level": "read_committed", "enable.partition.eof": True,
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(target, p, 0) for p in range(partitions)])
        try:
            records = read_to_end(consumer, partitions, timeout_s=60)
        finally:
            consumer.close()
        values = [value.decode() for _, _, value in records]
        assert len(values) == count, (f"{len(values)} records, {len(values) - len(set(values))} duplicates; "
                                      f"the worker's last lines:\n" + "".join(output)[-3000:])
        assert set(values) == {f"out:in-{index}" for index in range(count)}
        assert all(int(value.split(b"-")[1]) % partitions == partition for partition, _, value in records)
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait(10)
        cluster.close()


@pytest.mark.slow
def test_randomized_transactions_on_three_brokers_pass_the_checker(tmp_path):
    """Issue 8's randomized transactional workload and its checker on three brokers, with one broker
    at a time SIGKILLed or SIGTERMed and started again (coordinators and partition leaders move)."""
    from compat_tests.test_exactly_once import LONG, run_randomized_workload
    from compat_tests.test_transactions import BROKER_SETTINGS

    cluster = Quorum(tmp_path, combined=True, overrides=COORDINATOR_SETTINGS + BROKER_SETTINGS)
    try:
        cluster.start()
        bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(name, 3, 3, config={"min.insync.replicas": "2"})
                                           for name in ("jepsen-a", "jepsen-b")]).values():
            future.result(15)
        restarted = []

        def restart(nemesis) -> None:
            node = nemesis.choice(cluster.nodes)
            if nemesis.random() < 0.5:
                node.kill()
            else:
                node.stop()
            node.start(cluster.voters)
            restarted.append(node.node_id)

        run_randomized_workload(bootstrap, [node.client_port for node in cluster.nodes], restart,
                                restarts=8 if LONG else 3, between_s=5.0)
        print(f"brokers restarted in turn: {restarted}")
    finally:
        cluster.close()
