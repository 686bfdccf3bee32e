"""Faults on demand as Kafka's Java client lives them (kbroker/faults.py; issue 43): each fault is set on a broker in
this process, and kafka-clients 4.4.0's own reaction is what the test looks at: its retries that succeed, its
rebalance listener's calls, the exception its commit throws, its send callback's exception, its reconnects, its
new lookup of the coordinator, its wait for a leader. The confluent-kafka side is test_faults_clients.py.

The client is compat_tests/java_faults/FaultsClient.java, compiled once per module by testkit/streams_apps.py
with the jars of the pom's ``streams`` profile (kafka-clients 4.4.0 among them; .ci/run prefetches it). A JVM
costs a second or more to start on a small machine, so one JVM plays every scenario in turn: the test writes a
scenario to its standard input, and at each of the scenario's steps sets its fault and answers "go". Every
wait is bounded (the client's own timeouts, the JVM's, SCENARIO_TIMEOUT_S here); nothing asserts on wall-clock
time. Without java, javac or the jars the tests skip saying which; on CI (CI or KBTEST_REQUIRE_KAFKA=1) they fail.
"""

from __future__ import annotations

import itertools
import pathlib
import time
import uuid
from dataclasses import dataclass

import pytest

from compat_tests.kafka_oracle import skip_or_fail
from kbroker.testing import running_broker
from testkit.maven import Unavailable
from testkit.streams_apps import StreamsApp, StreamsApps

SOURCES = pathlib.Path(__file__).with_name("java_faults")
MAIN = "FaultsClient"
SCENARIO_TIMEOUT_S = 90  # the client's next step or end (a JVM's start, then its own waits: 30 s at most each)
STOP_TIMEOUT_S = 15
TIMEOUT_S = 30
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
            "transaction.state.log.num.partitions": 1}
# A classic member whose session runs out on the broker's clock: a long session the client asks for, and a
# heartbeat slow enough that none lands between the clock's move and the expiry it causes.
SESSION_MS, SLOW_HEARTBEAT_MS = 60_000, 2_000


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> StreamsApps:
    try:
        return StreamsApps.compile(SOURCES, tmp_path_factory.mktemp("faults-java-classes"))
    except Unavailable as missing:
        skip_or_fail(f"the Java client of these tests cannot be built: {missing}")


@pytest.fixture(scope="module")
def running():
    with running_broker(settings=SETTINGS) as running:
        yield running


@pytest.fixture(scope="module")
def jvm(apps, running, tmp_path_factory):
    client = JavaClient(apps, running.bootstrap, tmp_path_factory.mktemp("faults-java"))
    yield client
    client.stop()


@pytest.fixture
def java(jvm, running):
    """The Java client, started again if an earlier test left it dead; the faults cleared after the test."""
    jvm.ensure_started()
    yield jvm
    running.faults.clear()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def wait_until(condition, what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(0.05)


@dataclass
class Played:
    """A scenario's end (``done``: what the client saw, by name) and every line it printed."""

    done: dict
    lines: list[dict]

    def events(self, *kinds: str) -> list[dict]:
        return [line for line in self.lines if line["event"] in kinds]


class JavaClient:
    """FaultsClient in one JVM, playing the scenarios it is given one after another."""

    def __init__(self, apps: StreamsApps, bootstrap: str, directory: pathlib.Path) -> None:
        self.apps, self.bootstrap, self.directory = apps, bootstrap, directory
        self.app: StreamsApp | None = None
        self._runs = itertools.count(1)
        self._starts = itertools.count(1)
        self._run = ""  # the scenario playing

    def ensure_started(self) -> None:
        if self.app is None or self.app.process.poll() is not None:
            self.app = self.apps.start(MAIN, self.directory / f"jvm-{next(self._starts)}",
                                       {"bootstrap.servers": self.bootstrap}, stdin=True)

    def play(self, scenario: str, *args, steps: dict | None = None) -> Played:
        """Play ``scenario`` with ``args``; at each step the client prints, ``steps[name]()`` runs (the test sets
        its fault) and the client is told to go on. The scenario's end, or an AssertionError with its failure."""
        steps = dict(steps or {})
        run = self._run = str(next(self._runs))
        self.app.send(" ".join([run, scenario, *map(str, args)]))
        handled = 0
        while (line := self._next(run, handled, scenario))["event"] == "step":
            step = steps.pop(line["step"], None)
            try:
                assert step is not None, f"{scenario}: no action for the step {line['step']!r}"
                step()
            except BaseException:
                self.app.send("abort")  # the scenario throws, closes its clients and reports
                self._next(run, handled + 1, scenario)
                raise
            self.app.send("go")
            handled += 1
        if line["event"] == "failed":
            raise AssertionError(f"{scenario} failed in the Java client: {line['chain']}\n{self.app.report()}")
        assert not steps, f"{scenario} ended before the steps {sorted(steps)}"
        return Played(line, self._lines(run))

    def heard(self, event: str) -> list[dict]:
        """The lines of the scenario playing now that tell ``event``, for a step to look at."""
        return [line for line in self._lines(self._run) if line["event"] == event]

    def _lines(self, run: str) -> list[dict]:
        return [line for line in self.app.lines if line.get("run") == run]

    def _next(self, run: str, handled: int, scenario: str) -> dict:
        """The scenario's next step or end after the ``handled`` ones; the JVM killed if none comes in time, so
        that the next test starts a new one."""
        def reached(lines):
            marks = [line for line in lines if line.get("run") == run and line["event"] in ("step", "done", "failed")]
            return marks[handled] if len(marks) > handled else None

        try:
            return self.app.wait_for(reached, SCENARIO_TIMEOUT_S, f"{scenario}'s next step")
        except AssertionError:
            self.app.kill()
            raise

    def stop(self) -> None:
        if self.app is None or self.app.process.poll() is not None:
            return
        try:
            self.app.process.stdin.close()  # the end of its input: it exits
            self.app.wait_exit(STOP_TIMEOUT_S)
        finally:
            self.app.kill()


# ---------------------------------------------------------------------------------------------- the scenarios


@pytest.mark.parametrize("error, idempotent", [("NOT_LEADER_OR_FOLLOWER", False), ("REQUEST_TIMED_OUT", True)])
def test_a_producer_retries_a_refused_produce_and_writes_once(java, running, error, idempotent):
    topic = unique("retried")
    running.create_topic(topic, partitions=1)
    fault = running.faults.fail("Produce", error, count=2, topic=topic)
    played = java.play("produce", topic, str(idempotent).lower())
    assert fault.fired == 2
    # The client's own count: two retries, no record failed; the third try appended it, once.
    assert played.done["retries"] == 2 and played.done["errors"] == 0, played.done
    assert played.done["offset"] == 0
    assert [record["value"] for record in running.records(topic)] == [b"once"]


def test_a_classic_member_gives_its_partitions_back_and_gets_them_again_in_a_rebalance(java, running):
    topic, group = unique("rebalanced"), unique("group")
    running.create_topic(topic, partitions=2)
    played = java.play("rebalance", topic, group,
                       steps={"assigned": lambda: _rebalanced(running, group)})
    # An eager (range) member: everything revoked, then everything assigned, in the next generation.
    assert played.done["events"] == [["revoked", [0, 1]], ["assigned", [0, 1]]], played.done
    assert played.done["generation_after"] > played.done["generation_before"]
    assert played.done["same_member"] is True


def _rebalanced(running, group: str) -> None:
    assert running.faults.rebalance(group) is True


def test_a_fenced_transactional_producer_cannot_commit_and_nothing_is_read(java, running):
    topic, transactional_id = unique("fenced"), unique("txn")
    running.create_topic(topic, partitions=1)
    epochs = []

    def fence():
        epochs.append(running.faults.fence_producer(transactional_id))

    def aborted():  # the fence aborted the open transaction: its marker written, the partition stable again
        wait_until(lambda: _state(running, transactional_id) == "CompleteAbort", "the abort of the fenced transaction")

    played = java.play("fenced", topic, transactional_id, steps={"in-transaction": fence, "commit-refused": aborted})
    assert epochs[0] >= 1
    # kafka-clients 4.4 hears PRODUCER_FENCED for its EndTxn and makes it its fatal ProducerFencedException. (After
    # a transaction timed out, with the epoch one ahead only, Kafka 4.4 answers INVALID_TXN_STATE instead: the fault
    # bumps it twice, as a new producer does.)
    assert played.done["commit_error"], played.done  # (null: the commit went through)
    [[thrown, _], *_] = played.done["commit_error"]
    assert thrown == "org.apache.kafka.common.errors.ProducerFencedException", played.done["commit_error"]
    # A read_committed consumer reads up to the end (the record and the abort marker) and gets none of it.
    assert played.done["read"] == [] and played.done["end"] == 2 and played.done["position"] == 2, played.done
    assert running.records(topic) == []


def _state(running, transactional_id: str) -> str | None:
    return next((txn["state"] for txn in running.transactions() if txn["transactional_id"] == transactional_id), None)


def test_a_full_disk_fails_a_send_without_retries_until_it_is_freed(java, running):
    topic = unique("full")
    running.create_topic(topic, partitions=1)
    running.faults.disk_full(True)
    played = java.play("disk-full", topic, steps={"refused": lambda: running.faults.disk_full(False)})
    assert played.done["callback_error"], played.done  # (null: the send went through)
    [[thrown, _], *_] = played.done["callback_error"]
    assert thrown == "org.apache.kafka.common.errors.KafkaStorageException", played.done["callback_error"]
    assert played.done["offset"] == 0  # the refused record left nothing behind
    assert [record["value"] for record in running.records(topic)] == [b"taken"]


def test_a_producer_and_a_consumer_reconnect_after_their_connections_are_closed(java, running):
    topic = unique("reconnected")
    running.create_topic(topic, partitions=1)
    closed = []
    played = java.play("reconnect", topic,
                       steps={"connected": lambda: closed.append(running.faults.close_connections())})
    assert closed[0] >= 2  # at least the producer's and the consumer's
    assert played.done["read"] == ["first", "second"] and played.done["second_offset"] == 1
    for side in ("producer_connections", "consumer_connections"):
        before, after = played.done[side]
        assert after > before, (side, played.done)  # the client made new connections of its own


def test_a_commit_succeeds_after_the_client_finds_its_moved_coordinator_again(java, running):
    topic, group = unique("moved"), unique("group")
    running.create_topic(topic, partitions=1)
    moved = []
    played = java.play("coordinator-moved", topic, group,
                       steps={"read": lambda: moved.append(running.faults.move_coordinator(group=group))})
    [fault] = moved
    # Answered NOT_COORDINATOR, the client asked FindCoordinator again (which ends the move) and committed there.
    assert fault.fired >= 1 and not fault.active
    assert played.done["committed"] == 1
    assert running.committed_offsets(group) == {(topic, 0): 1}


def test_a_send_to_a_leaderless_partition_waits_and_succeeds_once_it_is_back(java, running):
    topic = unique("unavailable")
    running.create_topic(topic, partitions=1)
    fault = running.faults.make_unavailable(topic, 0)

    def asked_then_cleared():
        # The client asks for the partition's leader again and again, and sends nothing meanwhile.
        wait_until(lambda: fault.fired >= 3, "the client asking for the leaderless partition")
        assert java.heard("delivered") == []
        running.faults.clear()

    played = java.play("unavailable", topic, steps={"sent": asked_then_cleared})
    assert played.events("delivered")[0].get("offset") == 0 and played.done["offset"] == 0
    assert [record["value"] for record in running.records(topic)] == [b"waited"]


def test_a_classic_member_whose_session_ran_out_loses_its_partitions_and_rejoins(java, running):
    topic, group = unique("session"), unique("group")
    running.create_topic(topic, partitions=2)

    def session_ran_out():
        [member] = running.group(group)["members"]
        running.advance_time(SESSION_MS + 1_000)
        assert running.group(group)["members"] == [], member  # gone at once, at the broker

    played = java.play("session-expired", topic, group, SESSION_MS, SLOW_HEARTBEAT_MS,
                       steps={"assigned": session_ran_out})
    # Its next heartbeat hears UNKNOWN_MEMBER_ID: the partitions are lost (not revoked: another member may
    # have them already), and it joins again as a new member and gets them back.
    assert played.done["events"] == [["lost", [0, 1]], ["assigned", [0, 1]]], played.done
    assert played.done["member_after"] != played.done["member_before"]
