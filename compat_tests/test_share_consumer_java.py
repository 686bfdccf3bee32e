"""Share groups (KIP-932) with Kafka's Java KafkaShareConsumer (kafka-clients 4.3.0) in explicit
acknowledgement mode, against a broker process: the scenarios of test_share_consumer.py (confluent-kafka),
with the same short timings, through compat_tests/java/KafkaCompat.java's ``share`` and ``share-hold``.

A JVM costs seconds to start, so one ``share`` run plays the first three scenarios in turn, each on a topic
and share group of its own, and the tests read their group's lines of it; the killed consumer needs a JVM of
its own and one more to take its records. The module takes about 20 s: four JVMs, and each plan polls 2 s
more to see that nothing else comes.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from compat_tests.java_harness import java_harness  # noqa: F401  (the session fixture)
from compat_tests.test_share_consumer import (BROKER_OVERRIDES, DELIVERY_COUNT_LIMIT, LOCK_DURATION_MS, TIMEOUT_S,
                                               prepare)
from testkit.broker_process import BrokerProcess

TOGETHER = 300  # records the three consumers share


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("share-java-broker"), None, *BROKER_OVERRIDES)
    process.start()
    yield process
    process.kill()


@pytest.fixture(scope="module")
def plans(java_harness, broker):
    """One JVM plays three plans in turn (<group>:<consumers>:<deliveries>:<acknowledgement rules>): three
    consumers accepting everything; one that releases offset 0 once, rejects 1 and accepts the rest; one that
    releases everything. Each then polls 2 s more, so the lines also show what never came back."""
    prepare(broker.bootstrap, "java-together", TOGETHER)
    prepare(broker.bootstrap, "java-acknowledged", 4)
    prepare(broker.bootstrap, "java-limited", 1)
    run = java_harness.run("share", broker.bootstrap, f"java-together:3:{TOGETHER}:",
                           "java-acknowledged:1:5:0@1=RELEASE,1=REJECT",
                           f"java-limited:1:{DELIVERY_COUNT_LIMIT}:*=RELEASE")
    assert run.returncode == 0 and run.of_type("error") == [], (run.of_type("error"), run.stderr[-2000:])
    return run


def received(run, group: str) -> list[dict]:
    """The group's records, in order of arrival."""
    return [line for line in run.of_type("share_record") if line["group"] == group]


def deliveries(run, group: str) -> list[tuple[int, int]]:
    return [(line["offset"], line["delivery_count"]) for line in received(run, group)]


def commit_errors(run, group: str) -> list[dict]:
    return [line for line in run.of_type("share_commit") if line["group"] == group and line["errors"]]


def test_three_java_consumers_together_receive_every_record_once(plans):
    records = received(plans, "java-together")
    assert sorted(line["offset"] for line in records) == list(range(TOGETHER))  # none twice, none again later
    assert {line["delivery_count"] for line in records} == {1}
    assert all(bytes.fromhex(line["value"]) == b"v%d" % line["offset"] for line in records)
    assert commit_errors(plans, "java-together") == []


def test_release_redelivers_at_once_and_reject_archives(plans):
    records = received(plans, "java-acknowledged")
    assert [(line["offset"], line["delivery_count"], line["acknowledged"]) for line in records] == [
        (0, 1, "RELEASE"), (1, 1, "REJECT"), (2, 1, "ACCEPT"), (3, 1, "ACCEPT"), (0, 2, "ACCEPT")]  # 1 never again
    assert bytes.fromhex(records[-1]["value"]) == b"v0"
    released_ms = next(line["at_ms"] for line in plans.of_type("share_commit") if line["group"] == "java-acknowledged")
    assert records[-1]["at_ms"] - released_ms < LOCK_DURATION_MS / 2  # well before any lock runs out
    assert commit_errors(plans, "java-acknowledged") == []


def test_a_record_released_delivery_count_limit_times_is_archived(plans):
    assert deliveries(plans, "java-limited") == [(0, count) for count in range(1, DELIVERY_COUNT_LIMIT + 1)]
    assert commit_errors(plans, "java-limited") == []


def test_the_records_of_a_killed_java_consumer_go_to_another(java_harness, broker):
    prepare(broker.bootstrap, "java-killed", 5)
    holder = subprocess.Popen(java_harness.command("share-hold", broker.bootstrap, "java-killed"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held = []
    try:
        for line in holder.stdout:  # it says holding after its first records, or after 30 s with none
            if line.startswith("{"):
                held.append(json.loads(line))
                if held[-1]["type"] == "holding":
                    break
    finally:
        holder.kill()  # SIGKILL, holding records 0-4 unacknowledged: its connections close, and they go back
        _, stderr = holder.communicate(TIMEOUT_S)
    assert [(line["offset"], line["delivery_count"]) for line in held if line["type"] == "share_record"] == [
        (n, 1) for n in range(5)], (held, stderr[-2000:])
    run = java_harness.run("share", broker.bootstrap, "java-killed:1:5:")
    assert run.returncode == 0 and run.of_type("error") == [], (run.of_type("error"), run.stderr[-2000:])
    assert deliveries(run, "java-killed") == [(n, 2) for n in range(5)]
    assert commit_errors(run, "java-killed") == []
