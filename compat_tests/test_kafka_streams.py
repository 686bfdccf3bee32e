"""Kafka Streams 4.4.0 applications against a kbroker process (issue 41).

The applications are the project's own (compat_tests/streams_apps/), compiled once per session by
testkit/streams_apps.py and run each in a JVM of its own against a kbroker process; they print what they
do (state changes, the tasks they hold, restorations, errors) as JSON lines, and the tests read their output
topics with confluent-kafka.

- WordCount, exactly_once_v2, a RocksDB store with its changelog topic and a repartition topic: SIGKILLed in
  the middle of a transaction and restarted, its committed output is every word's count going 1, 2, ..., n.
- Two WordCount instances with a standby replica each: the tasks move when one leaves and when it comes back,
  and the output stays exact.
- ClickWindows: a windowed count suppressed until its windows close, and a KStream-KTable join, against an
  output computed here from Kafka Streams' rules.
- group.protocol=streams (KIP-1071) fails the way the client says it does, kbroker lacking its APIs.

Without the jars (Maven), java or javac the tests skip with one line; on CI (CI or KBTEST_REQUIRE_KAFKA=1)
they fail instead.
"""

from __future__ import annotations

import collections
import pathlib
import random
import struct
import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from compat_tests.connect_worker import wait_until
from compat_tests.kafka_oracle import skip_or_fail
from kbroker.wire.murmur2 import default_partition
from testkit.broker_process import BrokerProcess
from testkit.maven import Unavailable
from testkit.raw_client import call, request
from testkit.streams_apps import StreamsApps

SOURCES = pathlib.Path(__file__).with_name("streams_apps")
PARTITIONS = 3
TIMEOUT_S = 30  # one admin call, one topic read
START_TIMEOUT_S = 60  # a JVM up, in its group, RUNNING
PROCESS_TIMEOUT_S = 90  # an application through all its input
SIGTERM_EXIT = 143  # a JVM ended by SIGTERM exits 128 + 15, after its shutdown hook closed the application
WORD_COUNT_TASKS = {f"{subtopology}_{partition}" for subtopology in (0, 1) for partition in range(PARTITIONS)}
COUNTING_TASKS = {f"1_{partition}" for partition in range(PARTITIONS)}  # the stateful ones (the store "counts")
WORDS = ("apple", "birch", "cedar", "delta", "ember", "fjord", "grove", "harbor", "iris", "juniper", "kelp", "lumen")

BROKER_SETTINGS = ("group.initial.rebalance.delay.ms=0",
                   "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")


@pytest.fixture(scope="session")
def apps(tmp_path_factory) -> StreamsApps:
    try:
        return StreamsApps.compile(SOURCES, tmp_path_factory.mktemp("streams-classes"))
    except Unavailable as missing:
        skip_or_fail(str(missing))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, apps):
    process = BrokerProcess(tmp_path_factory.mktemp("streams-broker"), None, *BROKER_SETTINGS)
    process.start()
    yield process
    process.kill()


@pytest.fixture
def started(apps):
    """start(main, directory, properties) runs an application; every one started is SIGKILLed at the end."""
    made = []

    def start(main, directory, properties):
        app = apps.start(main, directory, properties)
        made.append(app)
        return app

    yield start
    for app in made:
        app.kill()


# ---------------------------------------------------------------------------------------------- helpers


def create_topics(bootstrap: str, names) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names]).values():
        future.result(TIMEOUT_S)


def produce(bootstrap: str, topic: str, records) -> None:
    """``records``: (key, value, timestamp ms or None); each to the partition Java's default partitioner picks
    for its key (murmur2), as a Streams application's own producer would."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                         "linger.ms": 5})
    for key, value, timestamp_ms in records:
        producer.produce(topic, key=key.encode(), value=value.encode(),
                         partition=default_partition(key.encode(), PARTITIONS), timestamp=timestamp_ms or 0)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0


def end_offsets(bootstrap: str, topic: str, committed: bool) -> dict[int, int]:
    """Each partition's end as a reader sees it: the last stable offset (read_committed) or the high watermark."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    asked = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)},
                               isolation_level=level, request_timeout=TIMEOUT_S)
    return {tp.partition: future.result(TIMEOUT_S).offset for tp, future in asked.items()}


class TopicReader:
    """Every record of a topic's partitions, from the beginning, as a read_committed (or read_uncommitted)
    consumer without a group gets them; ``records`` grows with each read."""

    def __init__(self, bootstrap: str, topic: str, committed: bool = True) -> None:
        self.bootstrap, self.topic, self.committed = bootstrap, topic, committed
        self.records: list[tuple[int, str, bytes]] = []  # (partition, key, value) in each partition's order
        self._consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}", "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted"})
        self._consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])

    def poll(self, timeout_s: float = 0.2) -> None:
        for message in self._consumer.consume(1000, timeout_s):
            assert message.error() is None, message.error()
            self.records.append((message.partition(), message.key().decode(), message.value()))

    def poll_until(self, predicate, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate(self.records):
            if time.monotonic() >= deadline:
                raise AssertionError(f"{self.topic}: {what} not read within {timeout_s} s")
            self.poll()

    def read_to_end(self) -> list[tuple[int, str, bytes]]:
        """Reads on to the partitions' ends as they are now; every record read so far."""
        ends = end_offsets(self.bootstrap, self.topic, self.committed)

        def at_ends(_records) -> bool:
            positions = self._consumer.position([TopicPartition(self.topic, p) for p in range(PARTITIONS)])
            return all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions)
        self.poll_until(at_ends, TIMEOUT_S, f"up to {ends}")
        return self.records

    def close(self) -> None:
        self._consumer.close()


def values_by_key(records, decode) -> dict[str, list]:
    """Each key's values in the order its partition holds them."""
    found = collections.defaultdict(list)
    for _, key, value in records:
        found[key].append(decode(value))
    return dict(found)


def as_long(value: bytes) -> int:
    return struct.unpack(">q", value)[0]


def last_event(app, kind: str) -> dict | None:
    found = app.events(kind)
    return found[-1] if found else None


def is_running(app) -> bool:
    state = last_event(app, "state")
    return state is not None and state["new"] == "RUNNING"


# ------------------------------------------------------------------------------------------- word count


def text_lines(seed: int, count: int) -> list[str]:
    chooser = random.Random(seed)
    return [" ".join(chooser.choice(WORDS).capitalize() if chooser.random() < 0.2 else chooser.choice(WORDS)
                     for _ in range(chooser.randint(1, 6))) + chooser.choice(("", ".", "!", ", then"))
            for _ in range(count)]


def word_counts(lines) -> collections.Counter:
    """What WordCount counts: lowercase runs of letters and digits."""
    counts = collections.Counter()
    for line in lines:
        counts.update(word for word in "".join(c if c.isalnum() else " " for c in line.lower()).split())
    return counts


def produce_lines(bootstrap: str, topic: str, lines, first_key: int) -> None:
    produce(bootstrap, topic, [(f"line-{first_key + i}", line, None) for i, line in enumerate(lines)])


def word_count_properties(app_id: str, bootstrap: str, state_dir: pathlib.Path, lines_topic: str,
                          counts_topic: str) -> dict:
    return {
        "app.input": lines_topic, "app.output": counts_topic,
        "application.id": app_id, "bootstrap.servers": bootstrap, "state.dir": state_dir,
        "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 100,
        "statestore.cache.max.bytes": 0,  # every update of a count goes out, so that each can be checked
        # A killed or departed member is noticed within seconds (the group's minimum session is 6 s).
        "consumer.session.timeout.ms": 6000, "consumer.heartbeat.interval.ms": 500,
    }


def counts_reached(expected) -> callable:
    """A predicate over read records: every word's last count is its expected total."""
    def reached(records) -> bool:
        last = {key: as_long(value) for _, key, value in records}
        return all(last.get(word) == total for word, total in expected.items())
    return reached


def assert_every_update_once(records, expected) -> None:
    """Each word's counts, in its partition's order, are exactly 1, 2, ..., its total: none twice, none missing."""
    counts = values_by_key(records, as_long)
    assert {word: values[-1] for word, values in counts.items()} == dict(expected)
    assert counts == {word: list(range(1, total + 1)) for word, total in expected.items()}


@pytest.mark.slow
def test_word_count_is_exactly_once_across_a_sigkill_mid_transaction(broker, started, tmp_path):
    """WordCount (exactly_once_v2; a RocksDB store logged to a changelog topic; a repartition topic) holds its
    stream thread after 40% of the first input's words with the transaction open (its records visible past the
    last stable offset), is SIGKILLed there, and restarts on the same state directory while more input comes:
    its store is restored from the changelog's committed records, exactly as many as the output's committed
    updates at the kill, and read_committed the output holds every word's counts 1, 2, ..., total, once each."""
    app_id, lines_topic, counts_topic = "wc-eos", "wc-eos-lines", "wc-eos-counts"
    create_topics(broker.bootstrap, [lines_topic, counts_topic])
    before, after = text_lines(1, 1500), text_lines(2, 500)
    expected = word_counts(before + after)
    produce_lines(broker.bootstrap, lines_topic, before, 0)
    properties = word_count_properties(app_id, broker.bootstrap, tmp_path / "state", lines_topic, counts_topic)
    pause_after = sum(word_counts(before).values()) * 2 // 5

    killed = started("WordCount", tmp_path / "killed", {**properties, "app.pause.after.updates": pause_after})
    killed.wait_for(lambda lines: any(line["event"] == "paused" for line in lines), PROCESS_TIMEOUT_S,
                    f"the {pause_after}th update")
    # The open transaction's records reach the broker (the producer lingers 100 ms): the output's high watermark
    # passes its last stable offset.
    wait_until(lambda: end_offsets(broker.bootstrap, counts_topic, committed=False)
               != end_offsets(broker.bootstrap, counts_topic, committed=True), TIMEOUT_S,
               "the open transaction's records in the output topic")
    reader = TopicReader(broker.bootstrap, counts_topic)
    committed_at_kill = len(reader.read_to_end())
    killed.kill()
    assert 0 < committed_at_kill < pause_after

    produce_lines(broker.bootstrap, lines_topic, after, len(before))
    restarted = started("WordCount", tmp_path / "restarted", properties)
    reader.poll_until(counts_reached(expected), PROCESS_TIMEOUT_S, "every word's total")
    assert restarted.terminate() == SIGTERM_EXIT
    assert [line["clean"] for line in restarted.events("closed")] == [True]
    records = reader.read_to_end()
    reader.close()

    assert_every_update_once(records, expected)
    assert len(records) == sum(expected.values())
    # The killed transaction's records are in the log, aborted: a read_uncommitted reader sees them too.
    everything = TopicReader(broker.bootstrap, counts_topic, committed=False)
    aborted = len(everything.read_to_end()) - len(records)
    everything.close()
    assert aborted > 0
    # exactly_once_v2 keeps no checkpoint while processing, so the restart rebuilt the store from the changelog:
    # its committed records, one per committed update.
    restored = {line["partition"]: line for line in restarted.events("restore_end")}  # the last one of each
    assert {line["topic"] for line in restored.values()} == {f"{app_id}-counts-changelog"}
    assert sorted(restored) == list(range(PARTITIONS))
    assert sum(line["restored"] for line in restored.values()) == committed_at_kill
    # Streams made its two internal topics with the source's partitions; the changelog is compacted.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    for internal in (f"{app_id}-words-repartition", f"{app_id}-counts-changelog"):
        assert len(topics[internal].partitions) == PARTITIONS, internal
    changelog = ConfigResource(ConfigResource.Type.TOPIC, f"{app_id}-counts-changelog")
    configs = admin.describe_configs([changelog])[changelog].result(TIMEOUT_S)
    assert configs["cleanup.policy"].value == "compact"
    print(f"word count: {len(records)} updates of {len(expected)} words, paused after {pause_after}, "
          f"{committed_at_kill} committed at the kill, {aborted} aborted; restored "
          f"{sum(line['restored'] for line in restored.values())} from the changelog")


def settled_split(first, second):
    """(first's, second's) last tasks lines once both are RUNNING and hold the word count's tasks between them,
    each active on one instance and each stateful one standing by on the other; else None."""
    if not (is_running(first) and is_running(second)):
        return None
    a, b = last_event(first, "tasks"), last_event(second, "tasks")
    if a is None or b is None:
        return None
    active_a, active_b = set(a["active"]), set(b["active"])
    if active_a & active_b or active_a | active_b != WORD_COUNT_TASKS or not active_a or not active_b:
        return None
    if set(a["standby"]) != COUNTING_TASKS & active_b or set(b["standby"]) != COUNTING_TASKS & active_a:
        return None
    return a, b


def changelog_partition(task: str) -> int:
    """The counts changelog's partition of a counting task ("1_2": partition 2)."""
    return int(task.split("_")[1])


def holds_everything(app) -> dict | None:
    """app's last tasks line once it is RUNNING with every task active and no standby (no one to stand by for)."""
    tasks = last_event(app, "tasks")
    if is_running(app) and tasks and set(tasks["active"]) == WORD_COUNT_TASKS and tasks["standby"] == []:
        return tasks
    return None


@pytest.mark.slow
def test_two_instances_share_the_tasks_with_standbys_and_hand_them_over(broker, started, tmp_path):
    """Two WordCount instances (exactly_once_v2, num.standby.replicas=1): the second to start takes half the
    tasks, each stateful task standing by on the other instance; when it leaves (SIGTERM: a clean close that
    leaves the group) the first holds all six, and when it comes back on its state directory they split again.
    Each move is read from the instances' own lines, and the moved counts restore only the tail of their
    changelog (the standby's copy, the returning instance's own). Input comes in each phase, and
    read_committed the output holds every word's counts 1, 2, ..., total."""
    app_id, lines_topic, counts_topic = "wc-pair", "wc-pair-lines", "wc-pair-counts"
    create_topics(broker.bootstrap, [lines_topic, counts_topic])
    phases = [text_lines(10 + phase, 150) for phase in range(4)]
    reader = TopicReader(broker.bootstrap, counts_topic)

    def feed(phase: int) -> None:
        """Phase ``phase``'s lines in, and on until the output has counted them (with every phase before)."""
        produce_lines(broker.bootstrap, lines_topic, phases[phase], 1000 * phase)
        expected = word_counts(line for lines in phases[:phase + 1] for line in lines)
        reader.poll_until(counts_reached(expected), PROCESS_TIMEOUT_S, f"the counts after phase {phase}")

    def properties(name: str) -> dict:
        return {**word_count_properties(app_id, broker.bootstrap, tmp_path / name / "state", lines_topic,
                                        counts_topic), "num.standby.replicas": 1}

    first = started("WordCount", tmp_path / "first", properties("first"))
    first.wait_for(lambda lines: holds_everything(first), START_TIMEOUT_S, "the first instance holding every task")
    feed(0)

    second = started("WordCount", tmp_path / "second", properties("second"))
    split = wait_until(lambda: settled_split(first, second), START_TIMEOUT_S, "the two instances sharing the tasks")
    feed(1)

    assert second.terminate() == SIGTERM_EXIT
    first.wait_for(lambda lines: holds_everything(first), START_TIMEOUT_S, "the first instance taking every task")
    feed(2)

    back = started("WordCount", tmp_path / "second-back", properties("second"))
    split_again = wait_until(lambda: settled_split(first, back), START_TIMEOUT_S, "the tasks shared again")
    feed(3)
    assert first.terminate() == SIGTERM_EXIT and back.terminate() == SIGTERM_EXIT
    records = reader.read_to_end()
    reader.close()

    # What each instance held, in turn, from its own lines.
    moves_of_first = [set(line["active"]) for line in first.events("tasks") if line["active"]]
    assert moves_of_first[0] == WORD_COUNT_TASKS
    assert set(split[0]["active"]) in moves_of_first and set(split_again[0]["active"]) in moves_of_first
    held_all_again = moves_of_first.index(set(split[0]["active"])) + 1
    assert WORD_COUNT_TASKS in moves_of_first[held_all_again:]
    for shared in (split, split_again):
        assert len(shared[0]["active"]) == len(shared[1]["active"]) == len(WORD_COUNT_TASKS) // 2
        assert set(shared[0]["standby"]) | set(shared[1]["standby"]) == COUNTING_TASKS
    # The state moved with the tasks, kept warm: the first instance's standby copy of the count it took over, and
    # the returning one's own (checkpointed at its clean close, then standing by) needed only their tail.
    taken_over = {changelog_partition(task) for task in COUNTING_TASKS & set(split[1]["active"])}
    warm = {line["partition"] for line in first.events("restore_start") if line["start"] > 0}
    assert taken_over and taken_over <= warm
    taken_back = {changelog_partition(task) for task in COUNTING_TASKS & set(split_again[1]["active"])}
    restored_back = back.events("restore_start")
    assert taken_back == {line["partition"] for line in restored_back}
    assert all(line["start"] > 0 for line in restored_back)
    assert_every_update_once(records, word_counts(line for lines in phases for line in lines))
    print(f"two instances: {len(records)} updates; shared {split[0]['active']} / {split[1]['active']}, "
          f"then {split_again[0]['active']} / {split_again[1]['active']}")


# --------------------------------------------------------------------------------------- windows, join

WINDOW_MS = 10_000
GRACE_MS = 2_000
REGIONS = {"ada": "north", "bo": "south", "cy": "east", "dee": "west", "eli": "north", "fay": "south"}
MOVED = ("bo", "east")  # bo moves, in the middle of the clicks
UNKNOWN_USER = "ghost"  # clicks without a user: counted in windows, dropped by the inner join


def click_stream(base_ms: int):
    """(users, clicks): the users table's records and the clicks, each (key, value, timestamp ms), in the order
    they are produced. Clicks come roughly in time order, some up to 6 s late: within the 2 s grace some
    windows still take them, others have closed. After them come one click per partition far in the future,
    which closes every earlier window (its own stays open), then one very late click, for a closed window."""
    chooser = random.Random(41)
    users = [(user, region, base_ms - 5_000) for user, region in REGIONS.items()]
    moved_at = base_ms + 25_500
    users.append((MOVED[0], MOVED[1], moved_at))
    names = [*REGIONS, UNKNOWN_USER]
    clicks = []
    for index in range(240):
        at = base_ms + index * 250 - chooser.choice((0, 0, 0, 0, 700, 1_500, 2_500, 4_000, 6_000))
        if at == moved_at:
            at += 1  # no tie between a click and the user's move: which goes first would be the task's choice
        clicks.append((chooser.choice(names), f"page-{chooser.randint(1, 9)}", at))
    last = max(at for _, _, at in clicks)
    future_at = last + 10 * WINDOW_MS
    for partition in range(PARTITIONS):
        key = next(f"tick-{n}" for n in range(1000) if default_partition(f"tick-{n}".encode(), PARTITIONS) == partition)
        clicks.append((key, "tick", future_at + partition))
    clicks.append(("ada", "page-late", base_ms + 1_000))
    return users, clicks


def expected_click_outputs(users, clicks) -> tuple[dict[str, str], dict[str, list[str]], int, int]:
    """(window counts, enriched clicks, late clicks counted, late clicks dropped) by Kafka Streams' rules, one
    partition (one task) at a time.

    Windows: a click's stream time is the largest timestamp its task has seen; a click whose window ended at
    or before stream time minus the grace is dropped (its window has closed); suppress emits a window's count
    once, when stream time minus the grace reaches the window's end. The join: a task takes, of its two
    partitions (clicks and users, co-partitioned), the record whose timestamp is lowest at their heads, and a
    click joins its user's region as the table holds it then."""
    window_counts: dict[str, str] = {}
    enriched = collections.defaultdict(list)
    late_counted = dropped = 0
    for partition in range(PARTITIONS):
        mine = [click for click in clicks if default_partition(click[0].encode(), PARTITIONS) == partition]
        table_updates = collections.deque(sorted(
            (user for user in users if default_partition(user[0].encode(), PARTITIONS) == partition),
            key=lambda user: user[2]))
        table: dict[str, str] = {}
        stream_ms = -1
        counts: collections.Counter = collections.Counter()
        for user, page, at in mine:
            while table_updates and table_updates[0][2] < at:
                key, region, _ = table_updates.popleft()
                table[key] = region
            if user in table:
                enriched[user].append(f"{table[user]}:{page}")
            late = at < stream_ms
            stream_ms = max(stream_ms, at)
            start = at - at % WINDOW_MS
            if start + WINDOW_MS > stream_ms - GRACE_MS:
                counts[(user, start)] += 1
                late_counted += late
            else:
                dropped += 1
        for (user, start), count in counts.items():
            if start + WINDOW_MS <= stream_ms - GRACE_MS:
                window_counts[f"{user}@{start}"] = str(count)
    return window_counts, dict(enriched), late_counted, dropped


@pytest.mark.slow
def test_windowed_counts_are_suppressed_until_their_windows_close_and_clicks_join_their_users(
        broker, started, tmp_path):
    """ClickWindows: clicks counted per user in 10 s tumbling windows with 2 s grace, suppressed until each
    window closes, and joined with a users table (a KStream-KTable inner join). The output is exactly what
    Kafka Streams' rules give: one final count per closed window (late clicks within the grace counted, later
    ones dropped, the windows still open not emitted), and each click of a known user with the region the user
    had at the click's time (one user moves in the middle), those of an unknown user dropped."""
    names = {name: f"clicks-{name}" for name in ("clicks", "users", "window-counts", "enriched")}
    create_topics(broker.bootstrap, names.values())
    base_ms = (int(time.time() * 1000) // WINDOW_MS - 360) * WINDOW_MS  # an hour ago, on a window's start
    users, clicks = click_stream(base_ms)
    expected_counts, expected_enriched, late_counted, dropped = expected_click_outputs(users, clicks)
    produce(broker.bootstrap, names["users"], users)
    produce(broker.bootstrap, names["clicks"], clicks)

    app = started("ClickWindows", tmp_path / "app", {
        "app.clicks": names["clicks"], "app.users": names["users"], "app.window.counts": names["window-counts"],
        "app.enriched": names["enriched"], "app.window.ms": WINDOW_MS, "app.grace.ms": GRACE_MS,
        "application.id": "clicks", "bootstrap.servers": broker.bootstrap, "state.dir": tmp_path / "state",
        "commit.interval.ms": 100, "statestore.cache.max.bytes": 0})
    counts_reader = TopicReader(broker.bootstrap, names["window-counts"])
    enriched_reader = TopicReader(broker.bootstrap, names["enriched"])
    counts_reader.poll_until(lambda records: len(records) >= len(expected_counts), PROCESS_TIMEOUT_S,
                             f"{len(expected_counts)} window counts")
    enriched_reader.poll_until(lambda records: len(records) >= sum(map(len, expected_enriched.values())),
                               PROCESS_TIMEOUT_S, "every enriched click")
    assert app.terminate() == SIGTERM_EXIT
    window_counts = counts_reader.read_to_end()
    enriched = enriched_reader.read_to_end()
    counts_reader.close()
    enriched_reader.close()

    assert len(window_counts) == len(expected_counts)  # each window once: no early or repeated result
    assert {key: value.decode() for _, key, value in window_counts} == expected_counts
    assert values_by_key(enriched, bytes.decode) == expected_enriched
    # What the expectation holds, so that the rules above are exercised rather than vacuous.
    assert late_counted > 0 and dropped > 1  # the very late click and others
    assert not any(key.startswith("tick-") for key in expected_counts)
    assert "north:page-late" in expected_enriched["ada"]
    assert UNKNOWN_USER not in expected_enriched and any(key.startswith(UNKNOWN_USER) for key in expected_counts)
    assert {value.split(":")[0] for value in expected_enriched["bo"]} == {"south", "east"}
    print(f"clicks: {len(clicks)} clicks, {len(window_counts)} window counts ({late_counted} late clicks counted, "
          f"{dropped} dropped), {len(enriched)} enriched")


# ------------------------------------------------------------------------------------ streams protocol

STREAMS_PROTOCOL_REFUSED = ("The cluster does not support the STREAMS group protocol or does not support the "
                            "versions of the STREAMS group protocol used by this client (used versions: 0 to 1).")


def test_the_streams_rebalance_protocol_fails_at_once_for_want_of_its_apis(broker, started, tmp_path):
    """group.protocol=streams (KIP-1071) needs StreamsGroupHeartbeat (key 88) and StreamsGroupDescribe (89),
    which kbroker does not serve (its ApiVersions lists neither). The Streams client sends its first
    StreamsGroupHeartbeat, its network client refuses it for want of the API, and the stream thread dies with
    UnsupportedVersionException, wrapped in a StreamsException: the instance goes to ERROR without ever
    running, and the process exits 1. group.protocol=classic (the default, the other tests) is the way."""
    versions = call(broker.port, "ApiVersions", 3, request("ApiVersions", client_software_name="compat-test",
                                                            client_software_version="1"))
    assert not {88, 89} & {api.api_key for api in versions.api_keys}
    create_topics(broker.bootstrap, ["kip1071-lines", "kip1071-counts"])

    app = started("WordCount", tmp_path / "app", {
        **word_count_properties("kip1071", broker.bootstrap, tmp_path / "state", "kip1071-lines", "kip1071-counts"),
        "group.protocol": "streams"})
    assert app.wait_exit(START_TIMEOUT_S) == 1

    [error] = app.events("error")
    assert error["chain"] == [
        ["org.apache.kafka.streams.errors.StreamsException",
         f"org.apache.kafka.common.errors.UnsupportedVersionException: {STREAMS_PROTOCOL_REFUSED}"],
        ["org.apache.kafka.common.errors.UnsupportedVersionException", STREAMS_PROTOCOL_REFUSED]]
    states = [line["new"] for line in app.events("state")]
    assert states == ["REBALANCING", "PENDING_ERROR", "ERROR"]
    assert all(line["active"] == line["standby"] == [] for line in app.events("tasks"))
