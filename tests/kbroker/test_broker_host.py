"""The broker hosts (kbroker/testing/broker_host.py) and their brokers as a test sees them (RemoteBroker,
kbroker/testing/remote_broker.py, the ``kbroker`` fixture): a broker per test in a process of its own,
driven through stock clients, its faults, time, looks inside, restart and reset reached over HTTP."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request

import confluent_kafka
import pytest

from kbroker.testing import FIXTURE_SETTINGS
from kbroker.testing.remote_broker import BrokerHost, BrokerHostError, BrokerHosts
from kbroker.tools.client import KafkaError
from testkit.broker_process import process_running

WAIT_S = 30


def produce(bootstrap: str, topic: str, values: list[bytes], **config) -> list:
    """Each value produced and flushed; the delivery errors seen (retried ones are not reported)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **config})
    failures = []
    for value in values:
        producer.produce(topic, value, key=b"k", headers=[("origin", b"test")],
                         on_delivery=lambda error, _: error and failures.append(error))
    assert producer.flush(WAIT_S) == 0
    return failures


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


def test_a_hosted_broker_serves_a_stock_client_and_shows_what_it_holds(kbroker):
    kbroker.create_topic("orders", partitions=2, config={"cleanup.policy": "compact"})
    assert produce(kbroker.bootstrap, "orders", [b"one", b"two"]) == []
    records = kbroker.records("orders")
    assert [(r["key"], r["value"], r["headers"]) for r in records] == [(b"k", b"one", [("origin", b"test")]),
                                                                       (b"k", b"two", [("origin", b"test")])]
    assert {r["partition"] for r in records} <= {0, 1} and os.path.isdir(kbroker.data_dir)
    with pytest.raises(KafkaError, match="TOPIC_ALREADY_EXISTS"):
        kbroker.create_topic("orders")
    with pytest.raises(KeyError, match="no topic 'absent'"):
        kbroker.records("absent")


def test_its_broker_is_in_another_process_and_says_where_to_find_one(kbroker):
    for name in ("broker", "in_broker"):
        with pytest.raises(AttributeError, match=r"another process.*running_broker\(\)"):
            getattr(kbroker, name)


def test_a_request_fault_is_a_handle_read_from_the_broker(kbroker):
    kbroker.create_topic("retried")
    fault = kbroker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2, topic="retried")
    assert (fault.kind, fault.api, fault.error, fault.fired, fault.remaining, fault.active) == \
        ("fail", "Produce", "NOT_LEADER_OR_FOLLOWER", 0, 2, True)
    assert [each["api"] for each in kbroker.faults.active] == ["Produce"]
    assert produce(kbroker.bootstrap, "retried", [b"kept"]) == []  # the producer retried twice
    assert (fault.fired, fault.remaining, fault.active) == (2, 0, False)
    assert [r["value"] for r in kbroker.records("retried")] == [b"kept"]
    delay = kbroker.faults.delay("Fetch", ms=10_000, count=None)
    delay.cancel()
    assert delay.active is False and kbroker.faults.active == []
    with pytest.raises(ValueError, match="NO_SUCH_ERROR|error"):
        kbroker.faults.fail("Produce", "NO_SUCH_ERROR")


def test_groups_transactions_time_and_schemas(kbroker):
    kbroker.create_topic("paid")
    producer = confluent_kafka.Producer({"bootstrap.servers": kbroker.bootstrap, "transactional.id": "t1"})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce("paid", b"settled")
    producer.commit_transaction(WAIT_S)
    commit(kbroker.bootstrap, "billing", "paid", 1)
    assert kbroker.committed_offsets("billing") == {("paid", 0): 1}
    assert kbroker.group("billing")["committed"] == {("paid", 0): 1}
    [transaction] = kbroker.transactions()
    assert transaction["transactional_id"] == "t1" and transaction["partitions"] in ([], [("paid", 0)])
    assert kbroker.records("paid")[0]["transactional"] is True
    assert kbroker.faults.fence_producer("t1") > transaction["producer_epoch"]
    kbroker.advance_time(1_000)
    assert kbroker.schemas() == {}
    with urllib.request.urlopen(f"{kbroker.schema_registry_url}/subjects", timeout=WAIT_S) as answer:
        assert json.load(answer) == []


def test_restart_keeps_the_port_and_the_records_and_reset_empties_it(kbroker):
    kbroker.create_topic("kept")
    produce(kbroker.bootstrap, "kept", [b"acknowledged"])
    port = kbroker.port
    kbroker.restart()
    assert kbroker.port == port
    assert [r["value"] for r in kbroker.records("kept")] == [b"acknowledged"]
    kbroker.reset()
    with pytest.raises(KeyError):
        kbroker.records("kept")


def test_each_test_gets_a_broker_of_its_own_and_a_dropped_one_is_gone():
    hosts = BrokerHosts(settings=FIXTURE_SETTINGS)
    try:
        first, second = hosts.take(), hosts.take()  # one from each host
        assert first.host_process is not second.host_process
        assert first.port != second.port and first.data_dir != second.data_dir
        hosts.give_back(first)
        third = hosts.take()  # the first host's next, started when the first was given back
        assert third.host_process is first.host_process and third.port != first.port
        with pytest.raises(KeyError, match="no broker"):
            first.records("anything")
        deadline = time.monotonic() + WAIT_S
        while os.path.exists(first.data_dir) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not os.path.exists(first.data_dir), "a dropped broker's directory was left"
        assert third.host_process.request("GET", "/health") == {"status": "ok", "brokers": 1}
        third.create_topic("served")
        assert produce(third.bootstrap, "served", [b"by the third"]) == []
    finally:
        hosts.close()
    for broker in (second, third):
        assert not os.path.exists(broker.data_dir), "the hosts' close left a broker's directory"


def test_a_host_that_cannot_start_a_broker_says_why_in_one_line():
    host = BrokerHost(settings={"num.partitions": "not a number"})
    try:
        with pytest.raises(BrokerHostError, match="could not start a broker: .*num.partitions"):
            host.started().receive()
    finally:
        host.close()


def test_the_hosts_stop_with_the_process_that_started_them():
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("this machine has no /proc to tell a finished process from a running one")
    parent = subprocess.Popen([sys.executable, "-c", (
        "import json, sys\n"
        "from kbroker.testing.remote_broker import BrokerHosts\n"
        "hosts = BrokerHosts()\n"
        "broker = hosts.take()\n"
        "print(json.dumps({'pids': [host.pid for host in hosts._hosts], 'data_dir': broker.data_dir}), flush=True)\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = json.loads(parent.stdout.readline())
    finally:
        parent.kill()
        parent.wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while (any(map(process_running, line["pids"])) or os.path.exists(line["data_dir"])) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(process_running, line["pids"])), "a broker host outlived its parent"
    assert not os.path.exists(line["data_dir"]), "a broker host left its broker's directory"


def test_a_test_with_the_kbroker_fixture_imports_no_broker_into_its_process(tmp_path):
    (tmp_path / "test_light.py").write_text(textwrap.dedent("""
        import sys

        def test_hosted(kbroker):
            kbroker.create_topic("light")
            kbroker.faults.fail("Produce", 6)
            assert not {"trio", "kbroker.broker", "kbroker.server"} & set(sys.modules)
    """))
    environment = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "kbroker.testing",
                             "test_light.py"], cwd=tmp_path, env=environment, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout



def test_a_host_runs_below_the_tests_priority_and_keeps_data_in_memory_backed_storage(kbroker):
    from kbroker.testing.broker_host import NICENESS
    from kbroker.testing.in_process_broker import memory_backed_directory

    if not hasattr(os, "getpriority"):
        pytest.skip("this platform has no process priorities (os.getpriority)")
    assert os.getpriority(os.PRIO_PROCESS, kbroker.host_process.pid) == \
        min(19, os.getpriority(os.PRIO_PROCESS, 0) + NICENESS)
    assert os.path.dirname(kbroker.data_dir) == (memory_backed_directory() or tempfile.gettempdir())


def test_memory_backed_storage_is_taken_only_with_room(monkeypatch):
    from kbroker.testing import in_process_broker

    monkeypatch.setattr(in_process_broker, "MEMORY_BACKED_ROOM", 1 << 62)  # more than any machine has
    assert in_process_broker.memory_backed_directory() is None
    monkeypatch.setattr(in_process_broker, "MEMORY_BACKED", "/no/such/directory")
    monkeypatch.setattr(in_process_broker, "MEMORY_BACKED_ROOM", 0)
    assert in_process_broker.memory_backed_directory() is None
    with in_process_broker.running_broker() as running:  # the usual temporary directory then
        assert os.path.dirname(running.data_dir) == tempfile.gettempdir()


def test_two_answers_that_arrive_together_are_both_read():
    """A host's lines can reach the pipe together: the second is read from what was read already, not waited for
    on the pipe (where a buffered reader would hide it until the host wrote again)."""
    host = BrokerHost(settings=FIXTURE_SETTINGS).started()
    try:
        host._command("take")  # two brokers asked for at once: their answers may come in one read
        host._command("take")
        time.sleep(0.5)  # both written by now
        first = host.receive()
        host._asked = True  # the second answer is already on its way
        second = host.receive()
        assert first.id != second.id and first.port != second.port
    finally:
        host.close()
