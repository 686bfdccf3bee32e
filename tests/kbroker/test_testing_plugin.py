"""The pytest plugin (kbroker/testing): cheap to load, fixtures that stock clients can use, topics made
in one call, brokers with settings and a replicated cluster of real processes."""

import importlib.metadata
import os
import subprocess
import sys
import textwrap
import time

import confluent_kafka
import confluent_kafka.admin
import pytest

from kbroker.testing import running_broker, running_cluster
from kbroker.tools.client import KafkaError

# What loading the plugin must not import: the packages of the broker and the event loop.
BROKER_PACKAGES = {"trio", "wire", "log", "raft", "kbroker"}
LIGHT_MODULES = {"kbroker", "kbroker.testing"}
PLUGIN_MODULES = LIGHT_MODULES | {"kbroker.testing.fixtures"}  # the fixtures, imported where pytest is


def run_python(code: str, **options) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **options)


# -- loading the plugin imports nothing heavy ----------------------------------------------------------------

def test_pytest_loads_kbroker_testing_as_the_plugin():
    [entry_point] = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "kbroker"]
    assert entry_point.value == "kbroker.testing"


def test_importing_the_plugin_imports_no_broker():
    result = run_python("import sys, kbroker.testing; print(*sys.modules, sep='\\n')")
    assert result.returncode == 0, result.stderr
    assert {name for name in result.stdout.split() if name.split(".")[0] in BROKER_PACKAGES} == LIGHT_MODULES
    assert "pytest" not in result.stdout.split()  # a broker host and ``kbroker test-broker`` start without it


def test_the_old_imports_still_work_and_bring_the_broker_only_then():
    result = run_python("import sys; from kbroker.testing import running_broker, RunningBroker, running_cluster; "
                        "print('trio' in sys.modules, 'kbroker.broker' in sys.modules, RunningBroker.__module__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "kbroker.testing.in_process_broker"]


def test_a_pytest_run_imports_the_broker_only_for_a_test_that_asks(tmp_path):
    """Other plugins (pytest-trio) import trio themselves, so the run loads only this one."""
    (tmp_path / "test_lazy.py").write_text(textwrap.dedent(f"""
        import sys

        def broker_modules():
            return {{n for n in sys.modules if n.split(".")[0] in {sorted(BROKER_PACKAGES)}}}

        def test_without_the_fixture(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin("kbroker.testing")
            assert broker_modules() == set({sorted(PLUGIN_MODULES)})

        def test_with_the_fixture(kbroker_session):
            assert "kbroker.broker" in broker_modules() and "trio" in broker_modules()
    """))
    environment = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "kbroker.testing",
                             "test_lazy.py"], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_pytest_fixtures_documents_what_each_fixture_yields(tmp_path):
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "--fixtures", "-p", "no:cacheprovider"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    shown = result.stdout[result.stdout.index("from kbroker.testing"):]
    for words in ("kbroker -- ", "kbroker_session [session scope]", "kbroker_clean -- ", ".bootstrap", ".host",
                  ".port", ".data_dir", ".create_topic(name", "running_broker(settings=", ".restart()", ".reset()"):
        assert words in shown, words


# -- the fixtures and helpers, through a stock client ------------------------------------------------------

@pytest.mark.parametrize("fixture", ["kbroker", "kbroker_session", "kbroker_clean"])
def test_fixture_broker_answers_metadata(fixture, request):
    broker = request.getfixturevalue(fixture)
    metadata = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [(broker.host, broker.port)]
    if fixture == "kbroker":  # in another process: its cluster id is its own
        assert metadata.cluster_id and metadata.cluster_id != request.getfixturevalue("kbroker_session").broker.cluster_id
    else:
        assert metadata.cluster_id == broker.broker.cluster_id


def test_each_test_gets_its_own_data_directory(kbroker, kbroker_session):
    assert kbroker.data_dir != kbroker_session.data_dir
    assert kbroker.port != kbroker_session.port
    assert os.path.isdir(kbroker.data_dir)


def produce(bootstrap: str, topic: str, values: list[bytes], **config) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **config})
    failures = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, _: error and failures.append(error))
    assert producer.flush(30) == 0
    assert failures == []


def consume(bootstrap: str, topic: str, count: int, timeout_s: float = 30) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            values.append(message.value())
    consumer.close()
    return values


def test_produce_and_consume_through_the_fixture(kbroker):
    kbroker.create_topic("greetings")
    produce(kbroker.bootstrap, "greetings", [b"hello", b"world"])
    assert consume(kbroker.bootstrap, "greetings", 2) == [b"hello", b"world"]


def test_create_topic_with_partitions_and_config(kbroker_session):
    kbroker_session.create_topic("compacted", partitions=3, config={"cleanup.policy": "compact", "retention.ms": 60_000})
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": kbroker_session.bootstrap})
    assert len(admin.list_topics("compacted", timeout=10).topics["compacted"].partitions) == 3
    resource = confluent_kafka.admin.ConfigResource("topic", "compacted")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert (configs["cleanup.policy"].value, configs["retention.ms"].value) == ("compact", "60000")
    with pytest.raises(KafkaError, match="TOPIC_ALREADY_EXISTS"):
        kbroker_session.create_topic("compacted")


@pytest.fixture
def strict_broker():
    """The fixture form the plugin's documentation suggests for a broker with its own settings."""
    with running_broker(settings={"auto.create.topics.enable": False, "num.partitions": 4}) as broker:
        yield broker


def test_a_broker_with_settings(strict_broker):
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": strict_broker.bootstrap})
    unknown = admin.list_topics("unknown", timeout=10).topics["unknown"]
    assert unknown.error.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART  # not auto-created
    strict_broker.create_topic("defaults", partitions=-1)  # -1: the broker's num.partitions
    assert len(admin.list_topics("defaults", timeout=10).topics["defaults"].partitions) == 4
    assert "unknown" not in admin.list_topics(timeout=10).topics


# -- a broker per test, a shared one emptied after each test ---------------------------------------------------

FIRST_BROKERS = {}  # what the first test of each pair below saw, for the second


def test_a_per_test_broker_first(kbroker):
    kbroker.create_topic("left-behind")
    FIRST_BROKERS["kbroker"] = (kbroker.port, kbroker.data_dir)


def test_a_per_test_broker_second_is_another_and_the_first_is_stopped_and_removed(kbroker):
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": kbroker.bootstrap})
    assert "left-behind" not in admin.list_topics(timeout=10).topics
    if "kbroker" in FIRST_BROKERS:  # not when this test runs alone
        port, data_dir = FIRST_BROKERS["kbroker"]
        assert kbroker.port != port
        deadline = time.monotonic() + 30  # stopped behind the first test, without it waiting
        while os.path.exists(data_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(data_dir)


def test_a_clean_broker_first(kbroker_clean):
    kbroker_clean.create_topic("left-behind")
    produce(kbroker_clean.bootstrap, "left-behind", [b"x"])
    assert consume(kbroker_clean.bootstrap, "left-behind", 1) == [b"x"]  # and commits for its group
    FIRST_BROKERS["kbroker_clean"] = kbroker_clean.port


def test_a_clean_broker_second_finds_the_same_port_and_nothing_left(kbroker_clean):
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": kbroker_clean.bootstrap})
    assert list(admin.list_topics(timeout=10).topics) == []
    assert admin.list_consumer_groups().result(10).valid == []
    assert kbroker_clean.port == FIRST_BROKERS.get("kbroker_clean", kbroker_clean.port)


def test_a_fault_on_the_session_broker_first(kbroker_session):
    kbroker_session.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=None, topic="never-produced-to")
    assert len(kbroker_session.faults.active) == 1


def test_a_fault_on_the_session_broker_second_finds_it_cleared(kbroker_session):
    assert kbroker_session.faults.active == []


def test_a_pytest_run_leaves_no_broker_behind(tmp_path):
    """The brokers started ahead and stopped behind are all stopped, and their directories removed, when
    the run ends."""
    (tmp_path / "test_three.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.parametrize("index", range(3))
        def test_a_broker(kbroker, index):
            kbroker.create_topic(f"topic-{index}")
    """))
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_three.py"],
                            cwd=tmp_path, env=dict(os.environ, TMPDIR=str(temporary)), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert [path.name for path in temporary.iterdir() if path.name.startswith("kbroker-")] == []


# -- a cluster of real processes -----------------------------------------------------------------------------

@pytest.mark.slow
def test_running_cluster_replicates_an_acks_all_produce():
    with running_cluster(nodes=3) as cluster:
        pids = [node.process.pid for node in cluster.nodes]
        assert len(set(pids)) == 3 and all(node.process.poll() is None for node in cluster.nodes)
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert sorted(admin.list_topics(timeout=10).brokers) == [1, 2, 3]
        cluster.create_topic("replicated", partitions=2, replication_factor=3)
        [partition, _] = admin.list_topics("replicated", timeout=10).topics["replicated"].partitions.values()
        assert sorted(partition.replicas) == sorted(partition.isrs) == [1, 2, 3]
        produce(cluster.bootstrap, "replicated", [b"%d" % i for i in range(100)], acks="all", **{"enable.idempotence": True})
        assert sorted(consume(cluster.bootstrap, "replicated", 100)) == sorted(b"%d" % i for i in range(100))
    assert all(node.process.returncode is not None for node in cluster.nodes)  # each one it started, reaped
    assert not any(os.path.exists(node.data_dir) for node in cluster.nodes)


def test_running_cluster_refuses_settings_it_sets_per_node():
    with pytest.raises(ValueError, match="listeners, node.id"):
        with running_cluster(settings={"node.id": 7, "listeners": "PLAINTEXT://:9092"}):
            pass


def test_running_cluster_reports_a_node_that_cannot_start():
    with pytest.raises(RuntimeError, match=r"(?s)node 1 exited with code \d+.*no.such.setting"):
        with running_cluster(nodes=1, settings={"no.such.setting": 1}, start_timeout_s=30):
            pass


def test_test_brokers_wait_300_ms_for_a_new_groups_members_and_a_test_may_say_otherwise():
    """Kafka's 3 s would make every test's first poll late; none at all lets kafka-python 3.0.12 hang (issue 31)."""
    from kbroker.testing import running_broker

    with running_broker() as running:
        assert running.broker.config.get("group.initial.rebalance.delay.ms") == 300
    with running_broker(settings={"group.initial.rebalance.delay.ms": 0}) as running:
        assert running.broker.config.get("group.initial.rebalance.delay.ms") == 0
