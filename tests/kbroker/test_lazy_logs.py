"""A restart serves before it opens the logs it found: each opens on its first use, or soon after the start
in the background (Broker._open_found_logs), and none loses its log start or its records meanwhile."""

import time

from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from testkit.raw_client import call, request

PARTITIONS = 20
WAIT_S = 10


def produce(port: int, topic: str, index: int, value: bytes) -> None:
    data = request("Produce").TopicProduceData
    answer = call(port, "Produce", 9, request("Produce", acks=-1, timeout_ms=5000, topic_data=[data(
        name=topic, partition_data=[data.PartitionProduceData(index=index, records=bytearray(
            build_batch([Record(offset_delta=0, value=value)])))])]))
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def test_a_restart_opens_its_logs_after_it_serves_and_keeps_their_log_starts(tmp_path):
    with running_broker(str(tmp_path)) as running:
        created = call(running.port, "CreateTopics", 7, request("CreateTopics", timeout_ms=10_000, topics=[
            request("CreateTopics").CreatableTopic(name="kept", num_partitions=PARTITIONS, replication_factor=1)]))
        assert created.topics[0].error_code == ErrorCode.NONE
        for index in range(PARTITIONS):
            produce(running.port, "kept", index, b"first")
            produce(running.port, "kept", index, b"second")
        topic = request("DeleteRecords").DeleteRecordsTopic
        deleted = call(running.port, "DeleteRecords", 2, request("DeleteRecords", timeout_ms=5000, topics=[topic(
            name="kept", partitions=[topic.DeleteRecordsPartition(partition_index=3, offset=1)])]))
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.NONE

    with running_broker(str(tmp_path)) as running:
        produce(running.port, "kept", 7, b"third")  # a first use opens its log at once
        give_up = time.monotonic() + WAIT_S
        while running.broker.logs.unopened() and time.monotonic() < give_up:
            time.sleep(0.01)
        assert running.broker.logs.unopened() == [] and running.broker.logs.unopened_count == 0
        logs = running.broker.logs.logs
        assert {index: logs[("kept", index)].log_end_offset for index in range(PARTITIONS)} == {
            index: 3 if index == 7 else 2 for index in range(PARTITIONS)}
        assert logs[("kept", 3)].log_start_offset == 1

    with running_broker(str(tmp_path)) as running:  # what the second start checkpointed, the third finds
        assert running.broker.partition("kept", 3).log.log_start_offset == 1
