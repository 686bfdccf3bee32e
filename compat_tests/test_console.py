"""The web console over plain HTTP (issue 30): what Kafka clients wrote shows on its pages, its changes are
Kafka requests as the signed-in user, its forms need the page's CSRF token, and bad input gets one line.

Each test runs a real broker process with ``metrics.port`` and real clients (confluent-kafka, the
``kbroker`` command); tests/compat_tests/test_console_browser.py drives the same pages in a browser.
"""

from __future__ import annotations

import html
import re
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402

from compat_tests.console_client import (ConsoleBroker, ConsoleClient, consume_and_commit, described_rows,  # noqa: E402
                                         kbroker, make_topic, produce, rows, secured_broker, signed_in,
                                         registry_broker)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with ConsoleBroker(tmp_path_factory.mktemp("console")) as process:
        yield process


def test_a_topic_written_by_a_client_shows_with_its_partitions(broker):
    topic = make_topic(broker, partitions=3)
    produce(broker, topic, 30)
    console = broker.console()
    status, page = console.get("/topics")
    assert status == 200 and topic in [row[0] for row in rows(page, "topics")]
    status, page = console.get(f"/topics?q={topic[-8:]}")
    assert [row[0] for row in rows(page, "topics")] == [topic]
    status, page = console.get(f"/topics/{topic}")
    partitions = rows(page, "partitions")
    assert status == 200 and [row[0] for row in partitions] == ["0", "1", "2"]
    assert sum(int(row[5]) for row in partitions) == 30  # the high watermarks
    assert all(row[1] == "1" and row[2] == "1" and row[3] == "1" for row in partitions)  # leader, replicas, ISR


def test_messages_are_found_by_key_with_their_headers(broker):
    topic = make_topic(broker)
    produce(broker, topic, 40)
    console = broker.console()
    status, page = console.get(f"/topics/{topic}/messages?partition=0&key=key-2")
    found = rows(page, "messages")
    assert status == 200 and [int(row[0]) for row in found] == list(range(38, 0, -4))  # newest first, key-2 only
    assert all(row[2] == "key-2" for row in found)
    assert "origin: test" in found[0][3] and "n: 38" in found[0][3]
    assert found[0][4] == '{"n": 38}'
    status, page = console.get(f"/topics/{topic}/messages?partition=0&order=oldest&contains=%22n%22%3A%207%7D")
    assert [int(row[0]) for row in rows(page, "messages")] == [7]
    status, page = console.get(f"/topics/{topic}/messages?partition=0&order=oldest&limit=1&format=hex")
    assert rows(page, "messages")[0][4] == b'{"n": 0}'.hex(" ")
    status, page = console.get(f"/topics/{topic}/messages?partition=0&order=oldest&limit=1&format=json")
    assert rows(page, "messages")[0][4] == '{\n  "n": 0\n}'


def test_a_page_of_a_large_partition_reads_only_that_page(broker):
    topic = make_topic(broker)
    produce(broker, topic, 1000)
    console = broker.console()
    status, page = console.get(f"/topics/{topic}/messages?partition=0&limit=50")
    assert [int(row[0]) for row in rows(page, "messages")] == list(range(999, 949, -1))
    assert "read offsets 950 to 1000" in page
    older = html.unescape(re.search(r'<a id="next" href="([^"]+)"', page).group(1))
    status, page = console.get(older)
    assert [int(row[0]) for row in rows(page, "messages")] == list(range(949, 899, -1))
    status, page = console.get(f"/topics/{topic}/messages?partition=0&order=oldest&offset=500&limit=10")
    assert [int(row[0]) for row in rows(page, "messages")] == list(range(500, 510))
    assert "read offsets 500 to 510" in page
    status, page = console.get(f"/topics/{topic}/messages?partition=0&order=oldest&timestamp=0&limit=3")
    assert [int(row[0]) for row in rows(page, "messages")] == [0, 1, 2]
    status, page = console.get(f"/topics/{topic}/messages?partition=0&order=oldest&timestamp=4102444800000")
    assert 'id="messages-empty"' in page  # 2100: after every message


def test_group_lag_is_what_the_command_prints_and_a_reset_moves_it(broker):
    topic, group = make_topic(broker, partitions=2), f"group-{uuid.uuid4().hex[:6]}"
    produce(broker, topic, 20, partition=0)
    produce(broker, topic, 10, partition=1)
    consume_and_commit(broker, topic, group, 25)
    produce(broker, topic, 5, partition=1)
    console = broker.console()
    status, page = console.get("/groups")
    assert group in [row[0] for row in rows(page, "groups")]
    status, page = console.get(f"/groups/{group}")
    shown = {(row[0], row[1]): row[2:5] for row in rows(page, "offsets")}
    printed = {(row[1], row[2]): row[3:6] for row in described_rows(broker, group)}
    assert shown == printed and len(shown) == 2
    status, page = console.post(f"/groups/{group}/reset-offsets", {"topic": topic, "to": "earliest", "offset": ""})
    assert status == 200 and rows(page, "reset-plan") == [[topic, "0", "0"], [topic, "1", "0"]]
    assert {(row[1], row[2]): row[3] for row in described_rows(broker, group)} != {(topic, "0"): "0", (topic, "1"): "0"}
    status, page = console.post(f"/groups/{group}/reset-offsets", {"topic": topic, "to": "earliest", "offset": "",
                                                                  "execute": "1"})
    assert status == 200 and f"Reset offsets of group {group} on {topic}." in page
    assert {(row[1], row[2]): row[3] for row in described_rows(broker, group)} == {(topic, "0"): "0", (topic, "1"): "0"}


def test_create_alter_produce_and_delete_from_the_page(broker):
    console = broker.console()
    console.get("/topics")
    name = f"made-{uuid.uuid4().hex[:8]}"
    status, page = console.post("/topics", {"name": name, "partitions": "2", "replication_factor": "",
                                            "configs": "cleanup.policy=compact\nretention.ms=60000"})
    assert status == 200 and f"Created topic {name}." in page
    assert rows(page, "configs") == [["cleanup.policy", "compact"], ["retention.ms", "60000"]]
    status, page = console.post(f"/topics/{name}/configs", {"configs": "retention.ms=\nmax.message.bytes=2048"})
    assert f"Changed configs of {name}." in page
    assert rows(page, "configs") == [["cleanup.policy", "compact"], ["max.message.bytes", "2048"]]
    status, page = console.post(f"/topics/{name}/produce", {"partition": "1", "key": "k", "value": "hello",
                                                            "headers": "trace: abc"})
    assert f"Produced to {name}-1 at offset 0." in page
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name, "auto.offset.reset": "earliest"})
    consumer.subscribe([name])
    deadline, message = time.monotonic() + 30, None
    while message is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
    consumer.close()
    assert (message.partition(), message.key(), message.value(), message.headers()) == (1, b"k", b"hello",
                                                                                         [("trace", b"abc")])
    status, page = console.post("/topics", {"name": name, "partitions": "1"})
    assert 'id="error"' in page and "TOPIC_ALREADY_EXISTS" in page
    status, page = console.post(f"/topics/{name}/delete", {})
    assert f"Deleted topic {name}." in page and name not in [row[0] for row in rows(page, "topics")] \
        if 'id="topics"' in page else True


def test_a_change_without_the_pages_token_is_refused(broker):
    console, other = broker.console(), broker.console()
    console.get("/topics")
    other.get("/topics")
    name = f"csrf-{uuid.uuid4().hex[:8]}"
    assert console.post("/topics", {"name": name}, csrf="")[0] == 403
    assert console.post("/topics", {"name": name}, csrf=other.csrf)[0] == 403  # another session's token
    assert ConsoleClient(broker.http_port).post("/topics", {"name": name}, csrf=console.csrf)[0] == 403  # no cookie
    assert name not in kbroker("topics", "list", "--bootstrap-server", broker.bootstrap).split()
    assert console.post("/topics", {"name": name})[0] == 200
    assert name in kbroker("topics", "list", "--bootstrap-server", broker.bootstrap).split()


def test_what_clients_wrote_is_escaped(broker):
    topic = make_topic(broker)
    produce(broker, topic, 1, key=lambda i: "<b>key</b>")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, key=b"<script>", value=b"<script>alert(1)</script>", headers=[("<i>", b"\"'&")])
    producer.flush(30)
    status, page = broker.console().get(f"/topics/{topic}/messages?partition=0")
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>key</b>" not in page and "&lt;i&gt;: &quot;&#x27;&amp;" in page


def test_bad_input_gets_one_line_and_the_console_goes_on(broker):
    topic = make_topic(broker)
    console = broker.console()
    for query, said in (("partition=9", "partition 9 does not exist: the topic has 1"),
                        ("partition=x", "partition 'x' is not a number"),
                        ("offset=-3", "offset -3 is negative"),
                        ("timestamp=yesterday", "timestamp 'yesterday': give milliseconds or an ISO time")):
        status, page = console.get(f"/topics/{topic}/messages?{query}")
        assert status == 200 and re.search(r'<p class="error" id="error">(.*?)</p>', page).group(1) == html.escape(said, quote=True)
    assert console.get("/topics/no-such-topic")[0] == 404
    assert console.get("/groups/no-such-group")[0] == 404
    assert console.get("/static/../../etc/passwd")[0] == 404
    status, page = console.post("/topics", {"name": "x", "configs": "no equals sign"})
    assert "Refused: &#x27;no equals sign&#x27;: expected name=value" in page
    status, _ = console.post(f"/topics/{topic}/produce", {"value": "v" * (1 << 20)})
    assert status == 413
    assert broker.console().get("/")[0] == 200


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with secured_broker(tmp_path_factory.mktemp("secured")) as process:
        yield process


def test_a_broker_that_authenticates_asks_for_credentials(secured):
    console = secured.console()
    status, page = console.get("/topics")
    assert status == 200 and 'id="login"' in page and "PLAIN" in page
    status, page = console.post("/login", {"username": "alice", "password": "wrong"})
    assert status == 401 and "Not signed in" in page and "refused the login of alice" in page
    assert console.get("/api/rates")[1].startswith("<!doctype html>")  # still signed out
    signed_in(secured, "alice")


def test_the_console_does_only_what_the_authorizer_lets_the_user_do(secured):
    admin, alice = signed_in(secured, "admin"), signed_in(secured, "alice")
    name = f"secret-{uuid.uuid4().hex[:8]}"
    status, page = admin.post("/topics", {"name": name})
    assert f"Created topic {name}." in page
    assert name not in alice.get("/topics")[1]  # she may not describe it
    assert alice.get(f"/topics/{name}")[0] == 404
    status, page = alice.post("/topics", {"name": f"hers-{uuid.uuid4().hex[:8]}"})
    assert 'id="error"' in page and "TOPIC_AUTHORIZATION_FAILED" in page
    status, page = alice.post(f"/topics/{name}/delete", {})
    assert "Refused: TOPIC_AUTHORIZATION_FAILED" in page
    assert name in admin.get("/topics")[1]
    status, page = alice.get("/")
    assert 'id="disks-empty"' in page and "CLUSTER_AUTHORIZATION_FAILED" in page  # no DESCRIBE on the cluster


def test_schemas_their_versions_and_values_decoded_through_them(tmp_path):
    import json

    with registry_broker(tmp_path) as (broker, topic, serialize):
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        value = serialize({"id": 7, "item": "widget", "note": "<fragile>"})
        producer.produce(topic, key=b"order-7", value=value)
        producer.produce(topic, key=b"plain", value=b"\x00\x00\x00\x00\x63 not a schema id")
        assert producer.flush(30) == 0
        console = broker.console()
        status, page = console.get("/schemas")
        assert rows(page, "subjects") == [[f"{topic}-value", "2", "AVRO", "2", "2"]]
        status, page = console.get(f"/schemas/{topic}-value?version=2&compare=1")
        diff = html.unescape(re.search(r'<pre class="diff" id="diff">(.*?)</pre>', page, re.S).group(1))
        added = [re.sub("<[^>]+>", "", line) for line in diff.splitlines() if line.startswith('<span class="added">+ ')]
        assert [line.strip(" +") for line in added] == ["},", "{", '"name": "note",', '"type": "string",',
                                                       '"default": ""']
        status, page = console.get(f"/topics/{topic}/messages?partition=0&order=oldest")
        found = rows(page, "messages")
        assert found[0][4].startswith(f"schema 2 (AVRO, {topic}-value v2)")
        assert json.loads(found[0][4].split(")", 1)[1]) == {"id": 7, "item": "widget", "note": "<fragile>"}
        assert found[1][4] == "\x00\x00\x00\x00c not a schema id"  # id 99 is no schema: shown as it is
        status, page = console.get(f"/topics/{topic}/messages?partition=0&order=oldest&format=hex")
        assert rows(page, "messages")[0][4] == value.hex(" ")


def test_a_share_group_shows_its_members_and_start_offsets_and_resets_from_the_page(broker):
    from compat_tests.test_share_consumer import poll_until, prepare, share_consumer

    name = f"share-{uuid.uuid4().hex[:8]}"
    prepare(broker.bootstrap, name, 10)
    consumer = share_consumer(broker.bootstrap, name)
    try:
        assert len(poll_until(consumer, 10)) == 10
        consumer.commit_sync(30)
        console = broker.console()
        status, page = console.get(f"/groups/{name}")
        assert 'id="group-state">State <strong>Stable</strong> · share group' in page
        [member] = rows(page, "members")
        assert member[3] == f"{name}-0"
        printed = kbroker("groups", "describe", name, "--bootstrap-server", broker.bootstrap).strip().split("\n\n")[0]
        assert rows(page, "offsets") == [line.split() for line in printed.splitlines()[1:]]  # as the command prints
        status, page = console.post(f"/groups/{name}/reset-offsets", {"topic": name, "to": "earliest", "offset": ""})
        assert f"Refused: Share group &#x27;{name}&#x27; is not empty." in page
    finally:
        consumer.close()
    console.get(f"/groups/{name}")
    status, page = console.post(f"/groups/{name}/reset-offsets", {"topic": name, "to": "offset", "offset": "7",
                                                                 "execute": "1"})
    assert f"Reset offsets of group {name} on {name}." in page
    assert [row[3:] for row in rows(page, "offsets")] == [["7", "3"]]  # START-OFFSET, LAG


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_live_groups_members_and_their_assignments_are_shown(broker, protocol):
    topic, group = make_topic(broker, partitions=2), f"live-{uuid.uuid4().hex[:6]}"
    produce(broker, topic, 4)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": protocol,
                         "auto.offset.reset": "earliest", "client.id": "page-reader"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        status, page = broker.console().get(f"/groups/{group}")
        assert f'State <strong>Stable</strong> · {protocol} group' in page
        [member] = rows(page, "members")
        assert member[1] == "page-reader" and member[3] == f"{topic}-0, {topic}-1"
        printed = {row[6] for row in described_rows(broker, group)}  # CONSUMER-ID
        assert printed == {member[0]}
    finally:
        consumer.close()


def test_a_cluster_nodes_console_shows_every_node_and_the_groups_of_other_coordinators(tmp_path):
    """Three combined nodes, the console of node 1: its overview names the three nodes and voters, a topic
    led elsewhere shows its partitions and messages, and groups coordinated by any node show their lag."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from testkit.broker_process import free_port
    from testkit.quorum_process import Quorum, find_coordinator

    cluster = Quorum(tmp_path, combined=True)
    port = free_port()
    cluster.nodes[0].overrides += (f"metrics.port={port}",)
    try:
        cluster.start()
        bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("spread", 3, 3)])["spread"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(30):
            producer.produce("spread", key=f"k{i}", value=b"v", partition=i % 3)
        assert producer.flush(30) == 0
        # a group coordinated by node 1 and one by another node (FindCoordinator must answer, after the first
        # lookup creates __consumer_offsets)
        by_coordinator: dict[bool, str] = {}
        deadline = time.monotonic() + 30
        for n in range(200):
            coordinator = -1
            while coordinator < 0 and time.monotonic() < deadline:
                coordinator = find_coordinator(cluster, f"spread-{n}", 0)
                if coordinator < 0:
                    time.sleep(0.2)
            by_coordinator.setdefault(coordinator == 1, f"spread-{n}")
            if len(by_coordinator) == 2:
                break
        groups = sorted(by_coordinator.values())
        assert len(groups) == 2
        for group in groups:
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                 "enable.auto.commit": False})
            consumer.subscribe(["spread"])
            read, deadline = 0, time.monotonic() + 30
            while read < 30 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                read += message is not None and not message.error()
            consumer.commit(asynchronous=False)
            consumer.close()
        console = ConsoleClient(port)
        status, page = console.get("/")
        assert [row[0] for row in rows(page, "nodes")] == ["1 (this node)", "2", "3"]
        assert [row[0] for row in rows(page, "voters")] == ["1", "2", "3"]
        status, page = console.get("/topics/spread")
        partitions = rows(page, "partitions")
        assert [sorted(row[2].split(",")) for row in partitions] == [["1", "2", "3"]] * 3  # replicas
        assert [row[5] for row in partitions] == ["10"] * 3  # high watermarks: node 1 has a replica of each
        for partition in range(3):
            status, page = console.get(f"/topics/spread/messages?partition={partition}")
            assert len(rows(page, "messages")) == 10
        for group in groups:
            status, page = console.get(f"/groups/{group}")
            assert [row[2:5] for row in rows(page, "offsets")] == [["10", "10", "0"]] * 3, group
    finally:
        cluster.close()
