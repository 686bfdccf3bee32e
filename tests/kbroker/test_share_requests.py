"""ShareFetch and ShareAcknowledge over the wire (KIP-932), for what stock share consumers never send: the
share sessions' errors, acknowledgements of records a member does not hold, a connection that closes
holding records, locks that run out, and read_committed share groups skipping aborted transactions.
confluent-kafka's ShareConsumer against the same handlers is compat_tests/test_share_consumer.py."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import decode_records, iter_batches
from kbroker.wire.schema import API_BY_NAME
from testkit.raw_client import Connection

LOCK_DURATION_MS = 1000
SETTINGS = {"group.share.heartbeat.interval.ms": 100, "group.share.min.heartbeat.interval.ms": 100,
            "group.share.min.record.lock.duration.ms": 1000, "group.share.record.lock.duration.ms": LOCK_DURATION_MS,
            "share.coordinator.state.topic.num.partitions": 3}
TIMEOUT_S = 15
Fetch = API_BY_NAME["ShareFetch"].request_class
Acknowledge = API_BY_NAME["ShareAcknowledge"].request_class
Heartbeat = API_BY_NAME["ShareGroupHeartbeat"].request_class
FindCoordinator = API_BY_NAME["FindCoordinator"].request_class
ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture(scope="module")
def running():
    with running_broker(settings=SETTINGS) as broker:
        yield broker


def prepare(running, name: str, records: int, **group_configs: str):
    """Topic ``name`` with ``records`` records, group ``name`` starting from the earliest (and ``group_configs``):
    the topic's id."""
    running.create_topic(name, partitions=1)
    configs = {"share.auto.offset.reset": "earliest", **group_configs}
    resource = ConfigResource(ResourceType.GROUP, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in configs.items()])
    admin = AdminClient({"bootstrap.servers": running.bootstrap})  # kept until the answer: it ends its calls
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)
    if records:
        producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap})
        for n in range(records):
            producer.produce(name, b"v%d" % n)
        assert producer.flush(TIMEOUT_S) == 0
    return running.broker.image.topics[name].topic_id


def join(connection: Connection, group: str, member_id: str) -> None:
    """Join share group ``group`` (subscribed to the topic of its name) and heartbeat until the partition is
    assigned (its share-group state initialized)."""
    epoch = 0
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:  # as a client, find the coordinator first: __consumer_offsets is made so
        found = connection.call("FindCoordinator", 4, FindCoordinator(key_type=0, coordinator_keys=[group]))
        if found.coordinators[0].error_code == ErrorCode.NONE:
            break
        time.sleep(0.1)
    while time.monotonic() < deadline:
        response = connection.call("ShareGroupHeartbeat", 1, Heartbeat(
            group_id=group, member_id=member_id, member_epoch=epoch, subscribed_topic_names=[group]))
        if response.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:  # found before it loaded: a client retries
            time.sleep(0.1)
            continue
        assert response.error_code == ErrorCode.NONE, response.error_message
        epoch = response.member_epoch
        if response.assignment is not None and response.assignment.topic_partitions:
            return
        time.sleep(0.1)
    raise AssertionError(f"{member_id} got no assignment in {group}")


def fetch(connection: Connection, group: str, member_id: str, epoch: int, topic_id, *, acknowledgements=(),
          max_wait_ms: int = 500, name_partition: bool = True):
    batches = [Fetch.FetchTopic.FetchPartition.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                                    acknowledge_types=[kind])
               for first, last, kind in acknowledgements]
    topics = [Fetch.FetchTopic(topic_id=topic_id, partitions=[Fetch.FetchTopic.FetchPartition(
        partition_index=0, acknowledgement_batches=batches)])] if name_partition or batches else []
    return connection.call("ShareFetch", 1, Fetch(
        group_id=group, member_id=member_id, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
        max_bytes=1 << 20, max_records=500, batch_size=500, topics=topics, forgotten_topics_data=[]))


def acquired(response) -> list[tuple[int, int, int]]:
    return [(run.first_offset, run.last_offset, run.delivery_count)
            for topic in response.responses for partition in topic.partitions for run in partition.acquired_records]


def values(response) -> list[bytes]:
    found = []
    for topic in response.responses:
        for partition in topic.partitions:
            data = bytes(partition.records or b"")
            for position, header in iter_batches(data):
                if not header.is_control:
                    found += [record.value for record in decode_records(data, position)[1]]
    return found


def test_a_session_opens_at_epoch_0_and_each_request_must_carry_the_next_epoch(running):
    topic_id = prepare(running, "epochs", 3)
    with Connection(running.port) as connection:
        join(connection, "epochs", "m1")
        missing = fetch(connection, "epochs", "m1", 4, topic_id)
        assert missing.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        opened = fetch(connection, "epochs", "m1", 0, topic_id)
        assert opened.error_code == ErrorCode.NONE
        assert acquired(opened) == [(0, 2, 1)] and values(opened) == [b"v0", b"v1", b"v2"]
        assert opened.acquisition_lock_timeout_ms == LOCK_DURATION_MS
        stale = fetch(connection, "epochs", "m1", 5, topic_id)
        assert stale.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        accepted = fetch(connection, "epochs", "m1", 1, topic_id, acknowledgements=[(0, 2, ACCEPT)], max_wait_ms=0,
                         name_partition=False)
        assert accepted.error_code == ErrorCode.NONE
        assert [p.acknowledge_error_code for t in accepted.responses for p in t.partitions] == [ErrorCode.NONE]
        reopened = fetch(connection, "epochs", "m1", 0, topic_id, acknowledgements=[(0, 0, ACCEPT)])
        assert reopened.error_code == ErrorCode.INVALID_REQUEST  # acknowledgements never open a session
        acknowledge = connection.call("ShareAcknowledge", 1, Acknowledge(
            group_id="epochs", member_id="m1", share_session_epoch=0, topics=[]))
        assert acknowledge.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH


def test_acknowledging_records_another_member_holds_is_invalid_record_state(running):
    topic_id = prepare(running, "held", 2)
    with Connection(running.port) as first, Connection(running.port) as second:
        join(first, "held", "m1")
        join(second, "held", "m2")
        assert acquired(fetch(first, "held", "m1", 0, topic_id)) == [(0, 1, 1)]
        assert acquired(fetch(second, "held", "m2", 0, topic_id, max_wait_ms=0)) == []
        refused = acknowledge(second, "held", "m2", 1, topic_id, 0, 1, ACCEPT)
        assert [p.error_code for t in refused.responses for p in t.partitions] == [ErrorCode.INVALID_RECORD_STATE]
        released = acknowledge(first, "held", "m1", 1, topic_id, 0, 1, RELEASE)
        assert [p.error_code for t in released.responses for p in t.partitions] == [ErrorCode.NONE]
        again = fetch(second, "held", "m2", 2, topic_id, name_partition=False)
        assert acquired(again) == [(0, 1, 2)], again


def acknowledge(connection: Connection, group: str, member_id: str, epoch: int, topic_id, first: int, last: int,
                kind: int):
    Partition = Acknowledge.AcknowledgeTopic.AcknowledgePartition
    return connection.call("ShareAcknowledge", 1, Acknowledge(
        group_id=group, member_id=member_id, share_session_epoch=epoch, topics=[Acknowledge.AcknowledgeTopic(
            topic_id=topic_id, partitions=[Partition(partition_index=0, acknowledgement_batches=[
                Partition.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=[kind])])])]))


def test_a_closed_connection_gives_its_records_back_at_once(running):
    topic_id = prepare(running, "hung-up", 2)
    with Connection(running.port) as second:
        join(second, "hung-up", "m2")
        with Connection(running.port) as first:
            join(first, "hung-up", "m1")
            assert acquired(fetch(first, "hung-up", "m1", 0, topic_id)) == [(0, 1, 1)]
        started = time.monotonic()
        again = fetch(second, "hung-up", "m2", 0, topic_id, max_wait_ms=TIMEOUT_S * 1000)
        assert acquired(again) == [(0, 1, 2)]
        assert time.monotonic() - started < LOCK_DURATION_MS / 1000  # released by the close, not by the lock


def test_records_whose_lock_runs_out_are_delivered_again(running):
    topic_id = prepare(running, "timed-out", 1)
    with Connection(running.port) as connection:
        join(connection, "timed-out", "m1")
        taken = time.monotonic()
        assert acquired(fetch(connection, "timed-out", "m1", 0, topic_id)) == [(0, 0, 1)]
        again = fetch(connection, "timed-out", "m1", 1, topic_id, max_wait_ms=TIMEOUT_S * 1000, name_partition=False)
        assert acquired(again) == [(0, 0, 2)]
        assert time.monotonic() - taken >= LOCK_DURATION_MS / 1000 * 0.9
        fetch(connection, "timed-out", "m1", 2, topic_id, acknowledgements=[(0, 0, REJECT)], max_wait_ms=0)
        labels = {"group": "timed-out", "topic": "timed-out", "partition": "0"}  # while its session is open here
        assert {name: scraped(running, name, labels) for name in (
            "kbroker_share_partition_in_flight_records", "kbroker_share_partition_acquired_records",
            "kbroker_share_partition_acquired_total", "kbroker_share_partition_redelivered_total",
            "kbroker_share_partition_acknowledged_total", "kbroker_share_partition_archived_total")} == {
            "kbroker_share_partition_in_flight_records": 0, "kbroker_share_partition_acquired_records": 0,
            "kbroker_share_partition_acquired_total": 2, "kbroker_share_partition_redelivered_total": 1,
            "kbroker_share_partition_acknowledged_total": 0, "kbroker_share_partition_archived_total": 1}


def scraped(running, name: str, labels: dict) -> float:
    """One sample of the broker's /metrics exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    from kbroker.metrics import BrokerMetrics

    text = BrokerMetrics(running.broker).exposition().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    raise AssertionError(f"no {name}{labels} in the exposition")


def test_a_read_committed_share_group_never_delivers_aborted_records(running):
    topic_id = prepare(running, "transactional", 0, **{"share.isolation.level": "read_committed"})
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "transactional.id": "share-txn"})
    producer.init_transactions(TIMEOUT_S)
    for value, commit in ((b"aborted", False), (b"committed", True)):
        producer.begin_transaction()
        producer.produce("transactional", value)
        producer.flush(TIMEOUT_S)
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
    with Connection(running.port) as connection:
        join(connection, "transactional", "m1")
        response = fetch(connection, "transactional", "m1", 0, topic_id)
        # offset 0 aborted, 1 its marker, 2 committed, 3 its marker: only 2 is delivered
        assert acquired(response) == [(2, 2, 1)]
        assert b"committed" in values(response)


def test_a_share_group_heartbeats_at_its_own_interval(running):
    """share.heartbeat.interval.ms set on the group overrides the broker's group.share.heartbeat.interval.ms."""
    prepare(running, "own-interval", 0, **{"share.heartbeat.interval.ms": "150"})
    with Connection(running.port) as connection:
        join(connection, "own-interval", "m1")
        response = connection.call("ShareGroupHeartbeat", 1, Heartbeat(group_id="own-interval", member_id="m1",
                                                                       member_epoch=0, subscribed_topic_names=["own-interval"]))
        assert (response.error_code, response.heartbeat_interval_ms) == (ErrorCode.NONE, 150)
    assert SETTINGS["group.share.heartbeat.interval.ms"] != 150
