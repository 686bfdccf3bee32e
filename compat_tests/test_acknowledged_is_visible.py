"""An acknowledged record is visible at once (DESIGN rule 12, issue 40's first difference).

On a lone in-sync replica Kafka's high watermark is its log end, so whatever a produce acknowledged,
with acks=1 as with acks=all, is readable, counted by ListOffsets(latest) and deletable by DeleteRecords
when the answer arrives. kbroker's high watermark there is its fsynced end, so its acks=1 answer waits
for the fsync the append already started (docs/kafka-differences.md says why). Each check asks from a
connection of its own, right after the answer, as another client would.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.test_errors import call
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME

Produce = API_BY_NAME["Produce"].request_class
ListOffsets = API_BY_NAME["ListOffsets"].request_class
DeleteRecords = API_BY_NAME["DeleteRecords"].request_class
CreateTopics = API_BY_NAME["CreateTopics"].request_class
TOPIC = "visible"
SENDS = 50
LATEST = -1


@pytest.fixture(scope="module")
def broker():
    with running_broker() as broker:
        answer = call(broker.port, "CreateTopics", 7, CreateTopics(timeout_ms=5000, topics=[
            CreateTopics.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)]))
        assert answer.topics[0].error_code == ErrorCode.NONE
        yield broker


def produce(port: int, value: bytes, acks: int) -> int:
    data = Produce.TopicProduceData
    answer = call(port, "Produce", 9, Produce(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        data(name=TOPIC, partition_data=[data.PartitionProduceData(index=0, records=build_batch([Record(value=value)]))])]))
    partition = answer.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.NONE
    return partition.base_offset


def latest(port: int) -> int:
    topic = ListOffsets.ListOffsetsTopic
    answer = call(port, "ListOffsets", 7, ListOffsets(replica_id=-1, isolation_level=0, topics=[
        topic(name=TOPIC, partitions=[topic.ListOffsetsPartition(partition_index=0, timestamp=LATEST)])]))
    return answer.topics[0].partitions[0].offset


@pytest.mark.parametrize("acks", [1, -1])
def test_every_acknowledged_record_is_counted_by_list_offsets_at_once(broker, acks):
    for n in range(SENDS):
        offset = produce(broker.port, f"{acks}-{n}".encode(), acks)
        assert latest(broker.port) == offset + 1, f"send {n}: acknowledged at {offset}, not yet counted"


@pytest.mark.parametrize("acks", [1, -1])
def test_records_below_an_acknowledged_offset_can_be_deleted_at_once(broker, acks):
    offset = produce(broker.port, b"to delete", acks)
    answer = call(broker.port, "DeleteRecords", 2, DeleteRecords(timeout_ms=5000, topics=[
        DeleteRecords.DeleteRecordsTopic(name=TOPIC, partitions=[
            DeleteRecords.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=offset + 1)])]))
    result = answer.topics[0].partitions[0]
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, offset + 1)


def test_a_consumer_seeking_to_the_end_after_an_ack_waits_for_what_comes_next(broker):
    """Seek to the end right after an acks=1 produce: the next record read is the next one produced,
    never the one just acknowledged."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "seek-end", "enable.auto.commit": False})
    try:
        for n in range(5):
            producer.produce(TOPIC, value=f"before-{n}".encode(), partition=0)
            producer.flush(10)
            end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)[1]
            consumer.assign([TopicPartition(TOPIC, 0, end)])
            producer.produce(TOPIC, value=f"after-{n}".encode(), partition=0)
            producer.flush(10)
            message = consumer.poll(10)
            assert message is not None and message.error() is None and message.value() == f"after-{n}".encode()
    finally:
        consumer.close()
