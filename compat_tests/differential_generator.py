"""A seeded generator of request sequences for the differential suite: from one seed, the same random run
of Produce, Fetch, ListOffsets, Metadata and DeleteRecords requests (right and wrong ones) over two topics,
sent to kbroker and to Kafka alike. A failing seed is printed and replays (KBTEST_DIFFERENTIAL_SEED).

Only requests whose answers Kafka gives deterministically are drawn: no topic is created or deleted during
the run (Kafka does both asynchronously), and every write is acks=-1 or 1 on a single node.
"""

from __future__ import annotations

import random
import time
import uuid

from compat_tests.differential_sessions import (READY_TIMEOUT_S, create_topics, metadata, produce, request, values,
                                                versions, wait_led)
from kbroker.wire.schema import API_BY_NAME
from testkit.differential import Side

TOPICS = ("gen-a", "gen-b")
PARTITIONS = 3
STEPS = 120
# earliest, latest, times. Not the max timestamp (-3): after DeleteRecords Kafka answers it with an offset
# below the log start (the segment's own, KAFKA's segment-level bookkeeping), kbroker with one in the log
# (docs/kafka-differences.md); the scripted produce session asks it at every version on an undeleted log.
TIMESTAMPS = (-2, -1, 1_700_000_000_000, 1_700_000_000_005, 1_800_000_000_000)


def generated_session(seed: int):
    """The session of ``seed`` (a function of one Side, as the scripted ones)."""

    def session(side: Side) -> None:
        draw = random.Random(seed)
        suffix = f"-{seed}"
        topics = [name + suffix for name in TOPICS]
        create_topics(side, 7, *((name, PARTITIONS, 1) for name in topics), record=False)
        wait_led(side, *topics)
        topic_ids = {t.name: t.topic_id for t in metadata(side, 12, topics, record=False).topics}
        wait_serving(side, topics)
        for _ in range(STEPS):
            draw.choice(STEPS_DRAWN)(side, draw, topics, topic_ids)

    session.__name__ = f"generated_{seed}"
    return session


def _topic(draw: random.Random, topics: list[str]) -> str:
    return draw.choice(topics + ["gen-unknown"]) if draw.random() < 0.1 else draw.choice(topics)


def _partition(draw: random.Random) -> int:
    return draw.choice([0, 1, 2, 2, 1, 0, 9, -1]) if draw.random() < 0.15 else draw.randrange(PARTITIONS)


def step_produce(side, draw, topics, topic_ids) -> None:
    count = draw.randint(1, 5)
    batch = values(*(bytes(draw.randrange(256) for _ in range(draw.randint(0, 40))) for _ in range(count)))
    if draw.random() < 0.05:
        corrupt = bytearray(batch)
        corrupt[-1] ^= 0xFF
        batch = bytes(corrupt)
    produce(side, draw.choice(versions("Produce")), _topic(draw, topics), _partition(draw), batch,
            acks=draw.choice([-1, -1, 1]))


def step_fetch(side, draw, topics, topic_ids) -> None:
    version = draw.choice(versions("Fetch"))
    fetch = API_BY_NAME["Fetch"].request_class
    topic = _topic(draw, topics)
    side.call("Fetch", version, request(
        "Fetch", replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=draw.choice([1 << 20, 64, 1]),
        isolation_level=draw.choice([0, 1]), session_id=0, session_epoch=-1, topics=[fetch.FetchTopic(
            topic=topic, topic_id=topic_ids.get(topic, uuid.UUID(int=7)), partitions=[fetch.FetchTopic.FetchPartition(
                partition=_partition(draw), fetch_offset=draw.choice([0, 1, 3, 7, 10_000, -5]),
                partition_max_bytes=draw.choice([1 << 20, 100, 1]), current_leader_epoch=draw.choice([-1, -1, 0, 5]),
                log_start_offset=-1, last_fetched_epoch=-1)])]))


def step_list_offsets(side, draw, topics, topic_ids) -> None:
    listing = API_BY_NAME["ListOffsets"].request_class.ListOffsetsTopic
    side.call("ListOffsets", draw.choice(versions("ListOffsets")), request(
        "ListOffsets", replica_id=-1, isolation_level=draw.choice([0, 1]), topics=[listing(
            name=_topic(draw, topics), partitions=[listing.ListOffsetsPartition(
                partition_index=_partition(draw), timestamp=draw.choice(TIMESTAMPS),
                current_leader_epoch=draw.choice([-1, -1, 0, 5]))])]))


def step_metadata(side, draw, topics, topic_ids) -> None:
    metadata(side, draw.choice([v for v in versions("Metadata") if v >= 4]), draw.sample(topics, draw.randint(1, 2)))


def step_delete_records(side, draw, topics, topic_ids) -> None:
    deleting = API_BY_NAME["DeleteRecords"].request_class.DeleteRecordsTopic
    side.call("DeleteRecords", draw.choice(versions("DeleteRecords")), request(
        "DeleteRecords", timeout_ms=30000, topics=[deleting(name=_topic(draw, topics), partitions=[
            deleting.DeleteRecordsPartition(partition_index=_partition(draw),
                                            offset=draw.choice([0, 1, 2, -1, 10_000]))])]))


STEPS_DRAWN = [step_produce, step_produce, step_produce, step_fetch, step_fetch, step_list_offsets,
               step_metadata, step_delete_records]


def wait_serving(side: Side, topics: list[str]) -> None:
    """Until every partition answers ListOffsets without an error (Kafka's leader may be named in the
    metadata before its log is ready): unrecorded requests."""
    listing = API_BY_NAME["ListOffsets"].request_class.ListOffsetsTopic
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = side.call("ListOffsets", 7, request("ListOffsets", replica_id=-1, isolation_level=0, topics=[
            listing(name=name, partitions=[listing.ListOffsetsPartition(partition_index=index, timestamp=-1)
                                           for index in range(PARTITIONS)]) for name in topics]), record=False)
        if all(p.error_code == 0 for t in answer.topics for p in t.partitions):
            return
        time.sleep(0.05)
    raise AssertionError(f"{side.name}: {topics} not serving within {READY_TIMEOUT_S} s")
