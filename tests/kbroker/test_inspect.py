"""A look inside a running broker without a consumer (kbroker/testing/inspect.py): what a topic holds as a
read_committed consumer sees it, a group's members, assignments and committed offsets, the transactions, the
schemas; every answer plain Python values. Real clients (confluent-kafka) make the state looked at."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import confluent_kafka
import pytest

from kbroker.testing import running_broker
from kbroker.wire.compression import GZIP
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.raw_client import call

TIMEOUT_S = 20
Produce = API_BY_NAME["Produce"].request_class


@pytest.fixture(scope="module")
def running():
    with running_broker(settings={"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1,
                                  "group.initial.rebalance.delay.ms": 0}) as running:
        yield running


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def plain(value) -> bool:
    """Only dicts, lists, tuples, strings, bytes, numbers, booleans and None, all the way down."""
    if isinstance(value, dict):
        return all(plain(key) and plain(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return all(plain(item) for item in value)
    return value is None or type(value) in (str, bytes, int, float, bool)


def wait_for(condition, what: str):
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {TIMEOUT_S} s")


def test_records_are_what_a_read_committed_consumer_reads_as_plain_values(running):
    topic = unique("records")
    running.create_topic(topic, partitions=2)
    # A gzip batch of two records with keys, headers and their own timestamps, to partition 1, raw.
    batch = build_batch([Record(offset_delta=0, key=b"k0", value=b"v0", headers=[("h", b"x"), ("none", None)]),
                         Record(offset_delta=1, timestamp_delta=5, key=None, value=b"v1")],
                        compression=GZIP, base_timestamp=1_700_000_000_000)
    data = Produce.TopicProduceData
    answer = call(running.port, "Produce", 9, Produce(acks=-1, timeout_ms=5000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=1, records=batch)])]))
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "transactional.id": unique("t")})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=0)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    producer.flush(TIMEOUT_S)
    plain_producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap})
    plain_producer.produce(topic, b"after the open transaction", partition=0)
    assert plain_producer.flush(TIMEOUT_S) == 0

    found = running.records(topic)
    assert plain(found)
    # Partition 0 stops at the open transaction (its last stable offset); the aborted record and the markers
    # (offsets 1 and 3) are left out.
    assert [(r["partition"], r["offset"], r["value"], r["transactional"]) for r in found] == [
        (0, 2, b"committed", True), (1, 0, b"v0", False), (1, 1, b"v1", False)]
    assert found[1] == {"topic": topic, "partition": 1, "offset": 0, "timestamp": 1_700_000_000_000, "key": b"k0",
                        "value": b"v0", "headers": [("h", b"x"), ("none", None)], "transactional": False}
    assert (found[2]["key"], found[2]["timestamp"], found[2]["headers"]) == (None, 1_700_000_000_005, [])
    assert [r["offset"] for r in running.records(topic, 1, from_offset=1)] == [1]
    assert len(running.records(topic, max_records=2)) == 2

    producer.commit_transaction(TIMEOUT_S)
    assert [r["value"] for r in running.records(topic, 0)] == [b"committed", b"open", b"after the open transaction"]
    with pytest.raises(KeyError):
        running.records(unique("no-such-topic"))
    with pytest.raises(KeyError):
        running.records(topic, 2)


def test_transactions_show_their_state_producer_and_partitions(running):
    topic, transactional_id = unique("txns"), unique("tid")
    running.create_topic(topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=0)
    producer.flush(TIMEOUT_S)
    [ongoing] = [t for t in running.transactions() if t["transactional_id"] == transactional_id]
    assert plain(ongoing)
    assert ongoing["state"] == "Ongoing" and ongoing["partitions"] == [(topic, 0)]
    assert ongoing["producer_id"] >= 0 and ongoing["producer_epoch"] >= 0
    producer.commit_transaction(TIMEOUT_S)
    ended = wait_for(lambda: [t for t in running.transactions() if t["transactional_id"] == transactional_id
                              and t["state"] == "CompleteCommit"], "the commit completed")
    assert ended[0]["producer_id"] == ongoing["producer_id"]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_shows_its_members_assignments_and_committed_offsets(running, protocol):
    topic, group_id = unique("grouped"), unique(f"group-{protocol}")
    running.create_topic(topic, partitions=2)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap})
    producer.produce(topic, b"one", partition=1)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": group_id,
                                         "client.id": "inspected", "group.protocol": protocol,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        message = None
        deadline = time.monotonic() + TIMEOUT_S
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
        assert message is not None and message.error() is None
        consumer.commit(message=message, asynchronous=False)
        seen = wait_for(lambda: (lambda g: g if g["state"] == "Stable" and g["members"] else None)(
            running.group(group_id)), "a stable group")
        assert plain(seen)
        assert (seen["group_id"], seen["type"]) == (group_id, protocol)
        assert seen["protocol"]  # the assignor: the chosen one (classic) or the broker's (consumer)
        [member] = seen["members"]
        assert member["client_id"] == "inspected" and member["assignment"] == {topic: [0, 1]}
        assert seen["committed"] == running.committed_offsets(group_id) == {(topic, 1): 1}
    finally:
        consumer.close()
    assert running.group(unique("never"))["state"] == "Dead"


def test_schemas_show_every_subjects_versions(running):
    assert running.schemas() == {}  # nothing registered (and nothing made for it)
    url = running.schema_registry_url
    subject = unique("orders-value")
    for fields in ([], [{"name": "id", "type": "long", "default": 0}]):
        schema = json.dumps({"type": "record", "name": "Order", "fields": fields})
        request = urllib.request.Request(f"{url}/subjects/{subject}/versions", method="POST",
                                         data=json.dumps({"schema": schema}).encode(),
                                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            assert answer.status == 200
    found = running.schemas()
    assert plain(found)
    assert [(v["version"], v["schema_type"]) for v in found[subject]] == [(1, "AVRO"), (2, "AVRO")]
    assert json.loads(found[subject][1]["schema"])["fields"][0]["name"] == "id"
    assert found[subject][0]["id"] != found[subject][1]["id"]
