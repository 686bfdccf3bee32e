"""Share groups (KIP-932) under load and at their edges (issue 45), with confluent-kafka's ShareConsumer
(librdkafka 2.16) against kbroker in this process: two consumers of one group, one consumer of fifteen
topics, consumers joining a group one after another, bursts of commits while consumers come and go, and
four consumer threads of one process. Consumers run in threads, as librdkafka's own share consumer tests
run them; every wait is bounded, each test well below what the issue allowed.

The brokers keep Kafka's defaults for share groups. A member that joins before its group's partitions are
initialized at the share coordinator learns of its partitions at its next heartbeat
(group.share.heartbeat.interval.ms, 5 s), as with Kafka 4.4, whose members of a new group all wait so: that
wait, not the reading, is most of each test's time.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

TIMEOUT_S = 30  # any one wait for the broker or a client
QUIET_S = 2  # how long a consumer must see nothing to say nothing more is coming


class LogLines(logging.Handler):
    """librdkafka's log lines of the consumers given it as their ``logger``."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def logger(self) -> logging.Logger:
        logger = logging.getLogger(f"{__name__}.{uuid.uuid4().hex}")
        logger.addHandler(self)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        return logger

    def mentioning(self, *words: str) -> list[str]:
        return [line for line in self.lines if any(word.lower() in line.lower() for word in words)]


def create_topics(bootstrap: str, partitions: int, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1) for name in names]).values():
        future.result(TIMEOUT_S)


def from_earliest(bootstrap: str, group: str) -> None:
    """The share group reads from the first record (share.auto.offset.reset=earliest, a group config)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n in range(count):
        producer.produce(topic, b"v%d" % n, partition=n % partitions)
    assert producer.flush(TIMEOUT_S) == 0


def share_consumer(bootstrap: str, group: str, *, explicit: bool = False, logger=None) -> ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group,
              "share.acknowledgement.mode": "explicit" if explicit else "implicit"}
    if logger is not None:
        config["logger"] = logger
    return ShareConsumer(config)


def received(messages) -> list[tuple[str, int, int, int]]:
    """(topic, partition, offset, delivery count) of each record, errors left out."""
    return [(m.topic(), m.partition(), m.offset(), m.delivery_count()) for m in messages if m.error() is None]


def nothing_more(bootstrap: str, group: str, *topics: str) -> list:
    """What a consumer joining ``group`` now receives within QUIET_S of its first fetch: nothing, when every
    record was accepted. (The group's partitions are initialized already: its first heartbeat assigns them.)"""
    consumer = share_consumer(bootstrap, group)
    consumer.subscribe(list(topics))
    got = []
    try:
        deadline = time.monotonic() + QUIET_S + 1
        while time.monotonic() < deadline:
            got += received(consumer.poll(0.2))
        consumer.commit_sync(TIMEOUT_S)
    finally:
        consumer.close()
    return got


def run_all(*targets) -> None:
    """Run each target in a thread of its own; re-raise the first failure once all are done."""
    failures: list[BaseException] = []

    def guarded(target) -> None:
        try:
            target()
        except BaseException as failure:  # noqa: BLE001 - handed to the test's thread
            failures.append(failure)

    threads = [threading.Thread(target=guarded, args=(target,), daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(2 * TIMEOUT_S)
        assert not thread.is_alive(), "a consumer thread did not finish"
    if failures:
        raise failures[0]


def test_two_consumers_of_one_group_read_every_record_once_and_close_their_sessions(kbroker):
    """The lead of issue 45 (bench/share_bench.py): librdkafka's close leaves the group, then closes its share
    session with a final ShareAcknowledge. The broker ended the session when the member left, so every close
    was answered SHARE_SESSION_NOT_FOUND ("ShareAcknowledge reply error: ... not found"), and what that final
    request acknowledged was lost."""
    create_topics(kbroker.bootstrap, 2, "pair")
    from_earliest(kbroker.bootstrap, "pair")
    produce(kbroker.bootstrap, "pair", 4000, 2)
    log = LogLines()
    got: list[list] = [[], []]

    def member(index: int) -> None:
        consumer = share_consumer(kbroker.bootstrap, "pair", logger=log.logger())
        consumer.subscribe(["pair"])
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while sum(map(len, got)) < 4000 and time.monotonic() < deadline:
                got[index] += received(consumer.poll(0.1))
            consumer.commit_sync(TIMEOUT_S)  # accepts the last poll's records (librdkafka's close does not)
        finally:
            consumer.close()

    started = time.monotonic()
    run_all(lambda: member(0), lambda: member(1))
    elapsed = time.monotonic() - started
    records = [(partition, offset) for records in got for _, partition, offset, _ in records]
    assert sorted(records) == sorted((p, o) for p in range(2) for o in range(2000)), "each record once"
    assert all(got), "both members read"
    assert log.mentioning("session was not found", "SHARE_SESSION_NOT_FOUND") == []
    assert elapsed < 20, f"{elapsed:.1f} s"


def test_one_consumer_of_fifteen_topics_receives_all_their_records(kbroker):
    """Scenario 2 (librdkafka's 0170 subscribe-15-topics): the consumer is made, its group set to read from
    the earliest record, then it subscribes to 15 topics of 100 records each and polls 2 s at a time."""
    topics = [f"fifteen-{n}" for n in range(15)]
    create_topics(kbroker.bootstrap, 1, *topics)
    for topic in topics:
        produce(kbroker.bootstrap, topic, 100, 1)
    consumer = share_consumer(kbroker.bootstrap, "fifteen")
    from_earliest(kbroker.bootstrap, "fifteen")
    consumer.subscribe(topics)
    got = []
    started = time.monotonic()
    try:
        while len(got) < 1500 and time.monotonic() - started < TIMEOUT_S:
            got += received(consumer.poll(2.0))
        elapsed = time.monotonic() - started
        consumer.commit_sync(TIMEOUT_S)
    finally:
        consumer.close()
    assert sorted((topic, offset) for topic, _, offset, _ in got) == sorted(
        (topic, offset) for topic in topics for offset in range(100))
    assert elapsed < 15, f"{elapsed:.1f} s"


def test_consumers_joining_a_group_one_after_another_each_get_records(kbroker):
    """Scenario 3: four consumers join a group of a 4-partition topic a second apart while records keep
    coming; each gets records soon after it joins, and together they read each record once."""
    create_topics(kbroker.bootstrap, 4, "staggered")
    from_earliest(kbroker.bootstrap, "staggered")
    producing = threading.Event()
    producing.set()
    produced = []
    first_record_after_s: dict[int, float] = {}
    got: dict[int, list] = {index: [] for index in range(4)}

    def produce_steadily() -> None:
        producer = Producer({"bootstrap.servers": kbroker.bootstrap, "linger.ms": 5})
        deadline = time.monotonic() + TIMEOUT_S
        while producing.is_set() and time.monotonic() < deadline:
            for _ in range(40):
                producer.produce("staggered", b"v%d" % len(produced), partition=len(produced) % 4)
                produced.append(1)
            producer.poll(0.05)
        assert producer.flush(TIMEOUT_S) == 0

    def member(index: int) -> None:
        time.sleep(index)  # one after another
        joined = time.monotonic()
        consumer = share_consumer(kbroker.bootstrap, "staggered")
        consumer.subscribe(["staggered"])
        try:
            deadline = joined + TIMEOUT_S
            while time.monotonic() < deadline and (producing.is_set() or
                                                   sum(map(len, got.values())) < len(produced)):
                records = received(consumer.poll(0.2))
                if records and index not in first_record_after_s:
                    first_record_after_s[index] = time.monotonic() - joined
                got[index] += records
                if len(first_record_after_s) == 4:
                    producing.clear()  # every member has records: stop producing, read what is left
            consumer.commit_sync(TIMEOUT_S)
        finally:
            consumer.close()

    run_all(produce_steadily, *(lambda index=index: member(index) for index in range(4)))
    assert sorted(first_record_after_s) == [0, 1, 2, 3], f"members with records: {first_record_after_s}"
    # The first member waits a heartbeat for the partitions' state to be initialized; the others are assigned
    # as they join.
    assert max(first_record_after_s.values()) < 10, first_record_after_s
    records = [(partition, offset) for records in got.values() for _, partition, offset, _ in records]
    assert len(records) == len(set(records)) == len(produced), (len(records), len(set(records)), len(produced))


def test_bursts_of_commits_while_consumers_come_and_go_lose_no_acknowledgement(kbroker):
    """Scenario 4 (librdkafka's 0176 chaos burst, under churn): one consumer accepts each record with five
    commit_async and a commit_sync after it, while other consumers join the group, accept what they get and
    leave. librdkafka sends one acknowledgement request at a time, and what waits behind it at close goes in
    the final ShareAcknowledge, after the member left its group: the broker had ended the session (or
    released the member's records) when the member left, so those acknowledgements were refused and the
    records came again. (librdkafka 2.15's commit_sync sends nothing while a request is in flight, so with it
    almost every acknowledgement waits for the close: the refusal in the log is what shows them lost, before a
    later consumer accepts the records again.)"""
    create_topics(kbroker.bootstrap, 2, "burst")
    from_earliest(kbroker.bootstrap, "burst")
    produce(kbroker.bootstrap, "burst", 200, 2)
    seen: set = set()  # (partition, offset) of every record some consumer accepted
    bursting, bursts_begun = threading.Event(), threading.Event()
    bursting.set()
    commits = {"async": 0, "sync": 0}

    log = LogLines()

    def burst() -> None:
        consumer = share_consumer(kbroker.bootstrap, "burst", explicit=True, logger=log.logger())
        consumer.subscribe(["burst"])
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while len(seen) < 200 and time.monotonic() < deadline:
                for message in consumer.poll(0.5):
                    if message.error() is not None:
                        continue
                    consumer.acknowledge(message)
                    seen.add((message.partition(), message.offset()))
                    for _ in range(5):
                        consumer.commit_async()
                        commits["async"] += 1
                    consumer.commit_sync(TIMEOUT_S)
                    commits["sync"] += 1
                    bursts_begun.set()
        finally:
            bursting.clear()
            bursts_begun.set()
            consumer.close()

    def come_and_go() -> None:
        bursts_begun.wait(TIMEOUT_S)  # the others join while the bursts go on
        while bursting.is_set():
            consumer = share_consumer(kbroker.bootstrap, "burst", explicit=True, logger=log.logger())
            consumer.subscribe(["burst"])
            try:
                stay_until = time.monotonic() + 1.5
                while bursting.is_set() and time.monotonic() < stay_until:
                    for message in consumer.poll(0.2):
                        if message.error() is None:
                            consumer.acknowledge(message)
                            seen.add((message.partition(), message.offset()))
                    consumer.commit_async()
            finally:
                consumer.close()  # what it acknowledged is committed as it closes

    started = time.monotonic()
    run_all(burst, come_and_go)
    elapsed = time.monotonic() - started
    assert seen == {(p, o) for p in range(2) for o in range(100)}
    assert commits["sync"] > 0 and commits["async"] == 5 * commits["sync"]
    assert elapsed < 45, f"{elapsed:.1f} s"
    assert nothing_more(kbroker.bootstrap, "burst", "burst") == []  # every record was accepted once
    assert log.mentioning("session was not found", "SHARE_SESSION_NOT_FOUND") == []  # no acknowledgement lost


def test_four_consumer_threads_of_one_group_read_everything_exactly_once(kbroker):
    """Scenario 5 (librdkafka's 0174 fan-out): a producer thread and four consumer threads of one group, in
    implicit acknowledgement; each consumer gets records, and each record is delivered once."""
    create_topics(kbroker.bootstrap, 4, "fan-out")
    from_earliest(kbroker.bootstrap, "fan-out")
    producing = threading.Event()
    producing.set()
    produced = []
    got: dict[int, list] = {index: [] for index in range(4)}

    def produce_steadily() -> None:
        producer = Producer({"bootstrap.servers": kbroker.bootstrap, "linger.ms": 5})
        deadline = time.monotonic() + TIMEOUT_S
        while (producing.is_set() or len(produced) < 8000) and time.monotonic() < deadline:
            for _ in range(200):
                producer.produce("fan-out", b"v%d" % len(produced), partition=len(produced) % 4)
                produced.append(1)
            producer.poll(0.05)
        assert producer.flush(TIMEOUT_S) == 0

    def member(index: int) -> None:
        consumer = share_consumer(kbroker.bootstrap, "fan-out")
        consumer.subscribe(["fan-out"])
        try:
            deadline = time.monotonic() + 2 * TIMEOUT_S - 10
            while time.monotonic() < deadline and (producing.is_set() or
                                                   sum(map(len, got.values())) < len(produced)):
                got[index] += received(consumer.poll(0.5))
                if all(got.values()):
                    producing.clear()  # every member has records
            consumer.commit_sync(TIMEOUT_S)
        finally:
            consumer.close()

    started = time.monotonic()
    run_all(produce_steadily, *(lambda index=index: member(index) for index in range(4)))
    elapsed = time.monotonic() - started
    assert all(got.values()), {index: len(records) for index, records in got.items()}
    records = [(partition, offset) for records in got.values() for _, partition, offset, _ in records]
    assert len(records) == len(set(records)) == len(produced), (len(records), len(set(records)), len(produced))
    assert {count for records in got.values() for *_, count in records} == {1}, "each delivered once"
    assert elapsed < 40, f"{elapsed:.1f} s"
