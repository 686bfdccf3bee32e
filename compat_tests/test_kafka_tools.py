"""Kafka's own command-line tools (Kafka 4.4.0's jars, each run as the main class its bin/kafka-*.sh runs,
through testkit/kafka_tools.py) against kbroker processes, their printed output read as a user reads it
(issue 41, point 3).

One broker process serves most tests (topics, configs, groups, transactions, offsets, records, the quorum,
share groups, the performance and verifiable clients); one with SASL and the ACL authorizer serves
kafka-acls; a three-node cluster (slow) serves kafka-reassign-partitions, kafka-leader-election and the
quorum of three. Records and committed offsets come from real clients (confluent-kafka).

Each tool run is a JVM of its own (a second or two each), so each test runs few. Where the jars or java
cannot be had the tests skip with one line; on CI (``CI`` or ``KBTEST_REQUIRE_KAFKA=1``) they fail.

The assertions are Kafka's behaviour: every test here passed as written against Kafka 4.4 itself too
(testkit/reference_kafka.py in place of the brokers). Where kbroker answers differently on purpose
(docs/kafka-differences.md), the test says so at that line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient

from compat_tests.kafka_oracle import skip_or_fail
from kbroker.testing import running_cluster
from testkit.broker_process import BrokerProcess, free_port
from testkit.kafka_tools import check_available, run_tool
from testkit.maven import Unavailable

pytestmark = pytest.mark.timeout(300)

TIMEOUT_S = 30
# Share group heartbeats every 200 ms, so a share consumer gets its assignment at once.
SHARE_OVERRIDES = ("group.share.heartbeat.interval.ms=200", "group.share.min.heartbeat.interval.ms=100")
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{user}="{password}"' for user, password in USERS.items()) + ";")
# A transactional producer that leaves its transaction open: it sends three records in one, flushes them and
# waits to be killed. The coordinator keeps the transaction Ongoing for its timeout (ten minutes).
OPEN_TRANSACTION = r"""
import sys, time
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                     "transaction.timeout.ms": 600000})
producer.init_transactions(30)
producer.begin_transaction()
for n in range(3):
    producer.produce(sys.argv[3], b"open-%d" % n, partition=0)
assert producer.flush(30) == 0
print("open", flush=True)
time.sleep(120)
"""


# -- fixtures and helpers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tools_available() -> None:
    """Kafka's tools can run here, or the module is skipped (failed on CI) with the one line saying why."""
    try:
        check_available()
    except Unavailable as missing:
        skip_or_fail(str(missing))


@pytest.fixture(scope="module")
def broker(tools_available, tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("tools-broker"), None, *SHARE_OVERRIDES)
    process.start()
    try:
        yield process
    finally:
        process.kill()


class SaslBroker(BrokerProcess):
    """A broker with the ACL authorizer: users over SASL_PLAINTEXT with PLAIN (admin a super user), the
    brokers' own traffic on a PLAINTEXT listener of its own."""

    def __init__(self, directory) -> None:
        self.sasl_port = free_port()
        port = free_port()
        super().__init__(
            directory / "data", port,
            f"listeners=SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},INTERNAL://127.0.0.1:{port}",
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin", "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}")
        self.admin_properties = directory / "admin.properties"
        self.admin_properties.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="{USERS["admin"]}";\n')

    def client_config(self, user: str) -> dict:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


@pytest.fixture(scope="module")
def sasl_broker(tools_available, tmp_path_factory):
    process = SaslBroker(tmp_path_factory.mktemp("tools-acls"))
    process.start()
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture(scope="module")
def cluster(tools_available):
    with running_cluster(nodes=3) as running:
        yield running


def tool(name: str, *args: str, expect: int = 0) -> str:
    """The tool's stdout, once it has exited with ``expect``."""
    result = run_tool(name, *args)
    assert result.returncode == expect, (f"{name} {' '.join(args)} exited {result.returncode}\n"
                                         f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-3000:]}")
    return result.stdout


def table(text: str) -> list[dict[str, str]]:
    """The rows of a table a tool printed (a header line, then one line per row, columns separated by
    blanks; no value holds one), as {column: value}."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    header, rows = lines[0], lines[1:]
    for row in rows:
        assert len(row) == len(header), (header, row)
    return [dict(zip(header, row)) for row in rows]


def described_partitions(text: str) -> dict[int, dict[str, str]]:
    """kafka-topics --describe's partition lines ("Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>...") by
    partition: {"Leader": "1", "Replicas": "1,2", "Isr": "1,2", ...}."""
    partitions = {}
    for line in text.splitlines():
        fields = dict(field.split(": ", 1) if ": " in field else (field.rstrip(":"), "")
                      for field in line.strip().split("\t"))
        if "Partition" in fields:
            partitions[int(fields["Partition"])] = fields
    return partitions


def described_until(server: tuple[str, ...], topic: str, wanted, timeout_s: float = 10) -> dict[int, dict[str, str]]:
    """kafka-topics --describe's partitions of ``topic``, described again (a second apart) until ``wanted`` of
    them holds or ``timeout_s`` has passed; the last ones."""
    deadline = time.monotonic() + timeout_s
    while True:
        partitions = described_partitions(tool("kafka-topics", *server, "--describe", "--topic", topic))
        if wanted(partitions) or time.monotonic() > deadline:
            return partitions
        time.sleep(1)


def produce(bootstrap: str, topic: str, values_by_partition: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, count in values_by_partition.items():
        for n in range(count):
            producer.produce(topic, b"%d-%d" % (partition, n), partition=partition)
    assert producer.flush(TIMEOUT_S) == 0


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


# -- one broker ----------------------------------------------------------------------------------------------


def test_kafka_topics_create_list_describe_alter_delete(broker):
    server = ("--bootstrap-server", broker.bootstrap)
    assert tool("kafka-topics", *server, "--create", "--topic", "tools-topic", "--partitions", "3",
                "--replication-factor", "1", "--config", "retention.ms=86400000").strip() \
        == "Created topic tools-topic."
    assert "tools-topic" in tool("kafka-topics", *server, "--list").split()

    described = tool("kafka-topics", *server, "--describe", "--topic", "tools-topic")
    summary = re.match(r"Topic: tools-topic\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\t"
                       r"Configs: (.*)$", described.splitlines()[0])
    assert summary is not None, described
    # Kafka also lists the cluster-wide min.insync.replicas its controller writes when eligible leader replicas
    # (KIP-966) are on; kbroker has none.
    assert "retention.ms=86400000" in summary[1].split(","), described
    partitions = described_partitions(described)
    assert sorted(partitions) == [0, 1, 2]
    for partition in partitions.values():
        assert (partition["Leader"], partition["Replicas"], partition["Isr"]) == ("1", "1", "1"), partition

    tool("kafka-topics", *server, "--alter", "--topic", "tools-topic", "--partitions", "5")
    partitions = described_partitions(tool("kafka-topics", *server, "--describe", "--topic", "tools-topic"))
    assert sorted(partitions) == [0, 1, 2, 3, 4]
    assert all(partition["Leader"] == "1" and partition["Isr"] == "1" for partition in partitions.values())

    tool("kafka-topics", *server, "--delete", "--topic", "tools-topic")
    assert "tools-topic" not in tool("kafka-topics", *server, "--list").split()


def test_kafka_configs_alter_then_describe(broker):
    server = ("--bootstrap-server", broker.bootstrap)
    tool("kafka-topics", *server, "--create", "--topic", "tools-configs")

    topic = ("--entity-type", "topics", "--entity-name", "tools-configs")
    assert tool("kafka-configs", *server, "--alter", *topic, "--add-config",
                "retention.ms=3600000,cleanup.policy=compact").strip() \
        == "Completed updating config for topic tools-configs."
    described = tool("kafka-configs", *server, "--describe", *topic)
    assert described.splitlines()[0] == "Dynamic configs for topic tools-configs are:"
    assert "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}" \
        in described.splitlines()
    assert "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, " \
           "DEFAULT_CONFIG:log.cleanup.policy=delete}" in described.splitlines()
    tool("kafka-configs", *server, "--alter", *topic, "--delete-config", "retention.ms")
    described = tool("kafka-configs", *server, "--describe", *topic)
    assert "retention.ms" not in described and "cleanup.policy=compact" in described

    broker_entity = ("--entity-type", "brokers", "--entity-name", "1")
    assert tool("kafka-configs", *server, "--alter", *broker_entity, "--add-config",
                "log.cleaner.backoff.ms=20000").strip() == "Completed updating config for broker 1."
    described = tool("kafka-configs", *server, "--describe", *broker_entity).splitlines()
    assert described[0] == "Dynamic configs for broker 1 are:"
    assert described[1] == ("  log.cleaner.backoff.ms=20000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                            "log.cleaner.backoff.ms=20000, DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}")

    group = ("--entity-type", "groups", "--entity-name", "tools-configs-group")
    assert tool("kafka-configs", *server, "--alter", *group, "--add-config", "consumer.session.timeout.ms=50000"
                ).strip() == "Completed updating config for group tools-configs-group."
    described = tool("kafka-configs", *server, "--describe", *group).splitlines()
    assert described[0] == "Dynamic configs for group tools-configs-group are:"
    assert described[1].startswith("  consumer.session.timeout.ms=50000 sensitive=false "
                                   "synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000"), described

    client = ("--entity-type", "clients", "--entity-name", "tools-client")
    assert tool("kafka-configs", *server, "--alter", *client, "--add-config",
                "producer_byte_rate=1048576,consumer_byte_rate=2097152").strip() \
        == "Completed updating config for client tools-client."
    assert tool("kafka-configs", *server, "--describe", *client).strip() == (
        "Quota configs for client-id 'tools-client' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0")
    user_and_client = ("--entity-type", "users", "--entity-name", "tools-user", "--entity-type", "clients",
                       "--entity-name", "tools-client")
    tool("kafka-configs", *server, "--alter", *user_and_client, "--add-config", "request_percentage=50")
    assert tool("kafka-configs", *server, "--describe", *user_and_client).strip() == (
        "Quota configs for user-principal 'tools-user', client-id 'tools-client' are request_percentage=50.0")


def test_kafka_consumer_groups_describe_reset_delete(broker):
    server, topic, group = ("--bootstrap-server", broker.bootstrap), "tools-groups", "tools-group"
    tool("kafka-topics", *server, "--create", "--topic", topic, "--partitions", "2")
    produce(broker.bootstrap, topic, {0: 6, 1: 4})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "tools-member",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        received, deadline = 0, time.monotonic() + TIMEOUT_S
        while received < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received += 1
        assert received == 10
        consumer.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 4)], asynchronous=False)

        # The member is active: its partitions show its id, host and client id.
        rows = table(tool("kafka-consumer-groups", *server, "--describe", "--group", group))
        by_partition = {row["PARTITION"]: row for row in rows}
        assert set(by_partition) == {"0", "1"}
        for partition, (current, end, lag) in {"0": ("4", "6", "2"), "1": ("4", "4", "0")}.items():
            row = by_partition[partition]
            assert (row["GROUP"], row["TOPIC"], row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) \
                == (group, topic, current, end, lag), row
            assert row["CONSUMER-ID"].startswith("tools-member-") and row["CLIENT-ID"] == "tools-member", row
            assert row["HOST"] == "/127.0.0.1", row
    finally:
        consumer.close()

    # Only an inactive group's offsets may be reset.
    rows = table(tool("kafka-consumer-groups", *server, "--reset-offsets", "--group", group, "--topic", topic,
                      "--to-earliest", "--execute"))
    assert sorted((row["PARTITION"], row["NEW-OFFSET"]) for row in rows) == [("0", "0"), ("1", "0")]
    checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = checker.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=TIMEOUT_S)
        assert [partition.offset for partition in committed] == [0, 0]
    finally:
        checker.close()

    assert tool("kafka-consumer-groups", *server, "--delete", "--group", group).strip() \
        == f"Deletion of requested consumer groups ('{group}') was successful."
    assert group not in tool("kafka-consumer-groups", *server, "--list").split()


def test_kafka_get_offsets_and_kafka_delete_records(broker, tmp_path):
    server, topic = ("--bootstrap-server", broker.bootstrap), "tools-records"
    tool("kafka-topics", *server, "--create", "--topic", topic, "--partitions", "2")
    produce(broker.bootstrap, topic, {0: 7, 1: 3})
    assert tool("kafka-get-offsets", *server, "--topic", topic).split() == [f"{topic}:0:7", f"{topic}:1:3"]

    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 5}]}))
    assert tool("kafka-delete-records", *server, "--offset-json-file", str(plan)).splitlines() == [
        "Executing records delete operation", "Records delete operation completed:",
        f"partition: {topic}-0\tlow_watermark: 5"]
    assert tool("kafka-get-offsets", *server, "--topic", topic, "--time", "earliest").split() \
        == [f"{topic}:0:5", f"{topic}:1:0"]


def test_kafka_transactions_list_describe_and_abort_an_open_transaction(broker):
    server, topic, transactional_id = ("--bootstrap-server", broker.bootstrap), "tools-transactions", "tools-open"
    tool("kafka-topics", *server, "--create", "--topic", topic)
    produce(broker.bootstrap, topic, {0: 2})  # offsets 0 and 1, outside any transaction
    holder = subprocess.Popen([sys.executable, "-c", OPEN_TRANSACTION, broker.bootstrap, transactional_id, topic],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
    finally:
        holder.kill()  # the transaction stays open: nobody ends it
        holder.wait(TIMEOUT_S)

    listed = [row for row in table(tool("kafka-transactions", *server, "list"))
              if row["TransactionalId"] == transactional_id]
    assert [(row["Coordinator"], row["TransactionState"]) for row in listed] == [("1", "Ongoing")]
    [described] = table(tool("kafka-transactions", *server, "describe", "--transactional-id", transactional_id))
    assert (described["CoordinatorId"], described["ProducerId"], described["ProducerEpoch"],
            described["TransactionState"], described["TransactionTimeoutMs"], described["TopicPartitions"]) \
        == ("1", listed[0]["ProducerId"], "0", "Ongoing", "600000", f"{topic}-0")

    partition = ("--topic", topic, "--partition", "0")
    producers = table(tool("kafka-transactions", *server, "describe-producers", *partition))
    [open_one] = [row for row in producers if row["ProducerId"] == described["ProducerId"]]
    assert (open_one["LastSequence"], open_one["CurrentTransactionStartOffset"]) == ("2", "2")
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "tools-transactions-reader",
                       "isolation.level": "read_committed"})
    try:
        # The open transaction holds the last stable offset at its first record.
        assert reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S) == (0, 2)
        tool("kafka-transactions", *server, "abort", *partition, "--start-offset",
             open_one["CurrentTransactionStartOffset"])
        # The abort marker (offset 5) ends it: the last stable offset is the log's end.
        assert reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S) == (0, 6)
    finally:
        reader.close()
    producers = table(tool("kafka-transactions", *server, "describe-producers", *partition))
    [aborted] = [row for row in producers if row["ProducerId"] == described["ProducerId"]]
    assert aborted["CurrentTransactionStartOffset"] == "None"


def test_kafka_metadata_quorum_on_one_node(broker):
    server = ("--bootstrap-server", broker.bootstrap)
    status = dict(line.split(":", 1) for line in tool("kafka-metadata-quorum", *server, "describe",
                                                      "--status").splitlines() if ":" in line)
    status = {name: value.strip() for name, value in status.items()}
    assert status["LeaderId"] == "1" and int(status["LeaderEpoch"]) >= 1 and int(status["HighWatermark"]) > 0
    assert status["MaxFollowerLag"] == "0"
    # A single node's sole voter listens nowhere (docs/kafka-differences.md): no endpoints.
    assert [voter["id"] for voter in json.loads(status["CurrentVoters"])] == [1]
    assert json.loads(status["CurrentObservers"]) == []
    [replica] = table(tool("kafka-metadata-quorum", *server, "describe", "--replication"))
    assert (replica["NodeId"], replica["Lag"], replica["Status"]) == ("1", "0", "Leader")
    assert int(replica["LogEndOffset"]) >= int(status["HighWatermark"])


def test_kafka_share_groups_list_and_describe(broker):
    server, name = ("--bootstrap-server", broker.bootstrap), "tools-share"
    tool("kafka-topics", *server, "--create", "--topic", name)
    tool("kafka-configs", *server, "--alter", "--entity-type", "groups", "--entity-name", name, "--add-config",
         "share.auto.offset.reset=earliest")
    produce(broker.bootstrap, name, {0: 5})
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": name, "client.id": "tools-sharer",
                              "share.acknowledgement.mode": "explicit"})
    try:
        consumer.subscribe([name])
        # Two rounds, each record accepted: Kafka writes a share-partition's start offset as it stood before the
        # acknowledgements it writes, so the second round's write holds the start after the first five.
        assert accept_all(consumer, 5) == [0, 1, 2, 3, 4]
        produce(broker.bootstrap, name, {0: 2})
        assert accept_all(consumer, 2) == [5, 6]

        assert name in tool("kafka-share-groups", *server, "--list").split()
        [member] = table(tool("kafka-share-groups", *server, "--describe", "--group", name, "--members"))
        assert (member["GROUP"], member["HOST"], member["CLIENT-ID"], member["#PARTITIONS"], member["ASSIGNMENT"]) \
            == (name, "/127.0.0.1", "tools-sharer", "1", f"{name}:0"), member
        [state] = table(tool("kafka-share-groups", *server, "--describe", "--group", name, "--state")
                        .replace("COORDINATOR (ID)", "COORDINATOR").replace("  (", "("))
        assert (state["GROUP"], state["COORDINATOR"], state["STATE"], state["#MEMBERS"]) \
            == (name, f"{broker.bootstrap}(1)", "Stable", "1"), state
        [offsets] = table(tool("kafka-share-groups", *server, "--describe", "--group", name))
        assert (offsets["GROUP"], offsets["TOPIC"], offsets["PARTITION"], offsets["START-OFFSET"]) \
            == (name, name, "0", "5"), offsets
        # The lag needs KIP-1226's delivery complete count, which kbroker does not keep
        # (docs/kafka-differences.md): "-" here, 0 on Kafka (every record delivered and accepted).
        assert offsets["LAG"] in ("-", "0"), offsets
    finally:
        consumer.close()


def accept_all(consumer: ShareConsumer, count: int) -> list[int]:
    """The offsets of the next ``count`` records the share consumer gets, each accepted and committed."""
    received, deadline = [], time.monotonic() + TIMEOUT_S
    while len(received) < count and time.monotonic() < deadline:
        received += [message for message in consumer.poll(0.5) if message.error() is None]
    for message in received:
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    assert all(error is None for error in consumer.commit_sync(TIMEOUT_S).values())
    return sorted(message.offset() for message in received)


def test_kafka_producer_and_consumer_perf_tests(broker):
    server, topic, count = ("--bootstrap-server", broker.bootstrap), "tools-perf", 2000
    produced = tool("kafka-producer-perf-test", *server, "--topic", topic, "--num-records", str(count),
                    "--record-size", "100", "--throughput", "-1")
    [summary] = [line for line in produced.splitlines() if " records sent, " in line]
    figures = re.match(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                       r"([\d.]+) ms max latency", summary)
    assert figures is not None, summary
    assert int(figures[1]) == count and float(figures[2]) > 0 and float(figures[4]) <= float(figures[5])

    consumed = tool("kafka-consumer-perf-test", *server, "--topic", topic, "--num-records", str(count),
                    "--timeout", "20000")
    lines = [line for line in consumed.splitlines() if ", " in line]
    header, values = [name.strip() for name in lines[0].split(",")], [value.strip() for value in lines[1].split(",")]
    row = dict(zip(header, values))
    assert int(row["data.consumed.in.nMsg"]) == count and float(row["nMsg.sec"]) > 0, row
    assert float(row["data.consumed.in.MB"]) == pytest.approx(count * 100 / 1024 / 1024, abs=0.001), row


def test_kafka_verifiable_producer_and_consumer(broker):
    server, topic, count = ("--bootstrap-server", broker.bootstrap), "tools-verifiable", 60
    tool("kafka-topics", *server, "--create", "--topic", topic, "--partitions", "2")
    events = json_lines(tool("kafka-verifiable-producer", *server, "--topic", topic, "--max-messages", str(count),
                             "--acks", "-1"))
    acked = [event for event in events if event["name"] == "producer_send_success"]
    assert not [event for event in events if event["name"] == "producer_send_error"]
    [summary] = [event for event in events if event["name"] == "tool_data"]
    assert summary["sent"] == summary["acked"] == len(acked) == count
    assert sorted(int(event["value"]) for event in acked) == list(range(count))
    per_partition = {}
    for event in acked:
        per_partition.setdefault(event["partition"], []).append(event["offset"])
    for offsets in per_partition.values():  # each partition's offsets from 0, none twice
        assert sorted(offsets) == list(range(len(offsets)))

    events = json_lines(tool("kafka-verifiable-consumer", *server, "--topic", topic, "--group-id",
                             "tools-verifiable", "--max-messages", str(count), "--reset-policy", "earliest"))
    assigned = [event for event in events if event["name"] == "partitions_assigned"]
    assert sorted(part["partition"] for part in assigned[0]["partitions"]) == [0, 1]
    consumed = {}
    for event in events:
        if event["name"] == "records_consumed":
            for part in event["partitions"]:
                consumed.setdefault(part["partition"], []).append((part["minOffset"], part["maxOffset"], part["count"]))
    assert sum(count for runs in consumed.values() for _, _, count in runs) == count
    for partition, offsets in per_partition.items():  # what was acked, read once each, in order
        runs = sorted(consumed[partition])
        assert runs[0][0] == 0 and runs[-1][1] == len(offsets) - 1
        assert sum(count for _, _, count in runs) == len(offsets)
    committed = {}
    for event in events:
        if event["name"] == "offsets_committed":
            assert event["success"], event
            committed.update({part["partition"]: part["offset"] for part in event["offsets"]})
    assert committed == {partition: len(offsets) for partition, offsets in per_partition.items()}
    assert events[-1]["name"] in ("shutdown_complete", "shutdown_requested")


# -- SASL and ACLs -------------------------------------------------------------------------------------------


def test_kafka_acls_add_list_remove(sasl_broker):
    server = ("--bootstrap-server", f"127.0.0.1:{sasl_broker.sasl_port}", "--command-config",
              str(sasl_broker.admin_properties))
    tool("kafka-topics", *server, "--create", "--topic", "tools-secret")
    alice = AdminClient(sasl_broker.client_config("alice"))
    assert "tools-secret" not in alice.list_topics(timeout=TIMEOUT_S).topics

    topic_pattern = "ResourcePattern(resourceType=TOPIC, name=tools-secret, patternType=LITERAL)"
    group_pattern = "ResourcePattern(resourceType=GROUP, name=tools-, patternType=PREFIXED)"
    read, describe = ("(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
                      "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)")
    added = tool("kafka-acls", *server, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                 "--operation", "Describe", "--topic", "tools-secret")
    assert f"Adding ACLs for resource `{topic_pattern}`:" in added and read in added and describe in added
    tool("kafka-acls", *server, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group",
         "tools-", "--resource-pattern-type", "prefixed")

    listed = tool("kafka-acls", *server, "--list").splitlines()
    at_topic = listed.index(f"Current ACLs for resource `{topic_pattern}`:")
    assert sorted(line.strip() for line in listed[at_topic + 1:at_topic + 3]) == sorted([describe, read])
    at_group = listed.index(f"Current ACLs for resource `{group_pattern}`:")
    assert listed[at_group + 1].strip() == read
    assert "tools-secret" in alice.list_topics(timeout=TIMEOUT_S).topics  # DESCRIBE lets her see it

    tool("kafka-acls", *server, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read",
         "--operation", "Describe", "--topic", "tools-secret")
    listed = tool("kafka-acls", *server, "--list", "--principal", "User:alice")
    assert topic_pattern not in listed and f"Current ACLs for resource `{group_pattern}`:" in listed
    assert "tools-secret" not in alice.list_topics(timeout=TIMEOUT_S).topics


# -- three nodes ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_kafka_reassign_partitions_then_preferred_leader_election(cluster, tmp_path):
    server, topic = ("--bootstrap-server", cluster.bootstrap), "tools-moved"
    tool("kafka-topics", *server, "--create", "--topic", topic, "--replica-assignment", "1:2,2:3")
    produce(cluster.bootstrap, topic, {0: 50, 1: 50})

    wanted = tmp_path / "topics.json"
    wanted.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = tool("kafka-reassign-partitions", *server, "--generate", "--topics-to-move-json-file", str(wanted),
                     "--broker-list", "1,2,3").splitlines()
    current = json.loads(generated[generated.index("Current partition replica assignment") + 1])
    assert [(part["partition"], part["replicas"]) for part in current["partitions"]] == [(0, [1, 2]), (1, [2, 3])]
    proposed = json.loads(generated[generated.index("Proposed partition reassignment configuration") + 1])
    assert sorted(part["partition"] for part in proposed["partitions"]) == [0, 1]
    assert all(len(part["replicas"]) == 2 and set(part["replicas"]) <= {1, 2, 3} for part in proposed["partitions"])

    # Partition 0's replicas swap order (2 is now preferred; 1 stays leader); partition 1 moves from 2 to 1.
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 1]}, {"topic": topic, "partition": 1, "replicas": [3, 1]}]}))
    executed = tool("kafka-reassign-partitions", *server, "--execute", "--reassignment-json-file", str(plan))
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in executed
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        verified = tool("kafka-reassign-partitions", *server, "--verify", "--reassignment-json-file", str(plan))
        if "still in progress" not in verified or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert f"Reassignment of partition {topic}-0 is completed." in verified
    assert f"Reassignment of partition {topic}-1 is completed." in verified
    partitions = described_until(server, topic, lambda partitions: partitions[1]["Replicas"] == "3,1")
    assert (partitions[0]["Replicas"], partitions[0]["Leader"]) == ("2,1", "1")
    assert partitions[1]["Replicas"] == "3,1" and sorted(partitions[1]["Isr"].split(",")) == ["1", "3"]
    assert partitions[1]["Leader"] in ("3", "1")

    elections = tmp_path / "elections.json"
    elections.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0}]}))
    elected = tool("kafka-leader-election", *server, "--election-type", "preferred", "--path-to-json-file",
                   str(elections))
    assert elected.strip() == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0"
    # The broker that answers may apply the election's record a moment after the controller committed it.
    partitions = described_until(server, topic, lambda partitions: partitions[0]["Leader"] == "2")
    assert partitions[0]["Leader"] == "2"
    # The moved replica holds the records: partition 1's end offset is the same wherever it is read.
    assert tool("kafka-get-offsets", *server, "--topic", topic).split() == [f"{topic}:0:50", f"{topic}:1:50"]


@pytest.mark.slow
def test_kafka_metadata_quorum_on_three_nodes(cluster):
    server = ("--bootstrap-server", cluster.bootstrap)
    status = {name: value.strip() for name, value in (
        line.split(":", 1) for line in tool("kafka-metadata-quorum", *server, "describe", "--status").splitlines()
        if ":" in line)}
    voters = json.loads(status["CurrentVoters"])
    assert voters == [{"id": node.node_id, "endpoints": [f"CONTROLLER://127.0.0.1:{node.controller_port}"]}
                      for node in cluster.nodes]
    leader = int(status["LeaderId"])
    assert leader in (1, 2, 3) and int(status["HighWatermark"]) > 0
    replicas = table(tool("kafka-metadata-quorum", *server, "describe", "--replication"))
    assert sorted((int(row["NodeId"]), row["Status"]) for row in replicas) \
        == sorted((node_id, "Leader" if node_id == leader else "Follower") for node_id in (1, 2, 3))
    assert all(int(row["LogEndOffset"]) > 0 for row in replicas)
