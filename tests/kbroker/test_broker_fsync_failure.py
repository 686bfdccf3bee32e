"""A Broker whose fsyncs start failing (issue 26) stays up: the acks=all produce waiting for the failed fsync
is never acknowledged, and from then on its partitions answer KAFKA_STORAGE_ERROR, its log directory is
described as offline, and no fsync is tried again, even once the disk would work: only a restart brings the
directory back. The failure is injected as compat_tests/test_fsync_failure.py does (KBTEST_FSYNC_FAILS_IF)."""

import pytest
import trio

from kbroker.broker import Broker, BrokerSettings, plaintext_listener
from kbroker.replication.flusher import FAIL_FSYNC_ENV
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.raw_client import call

pytestmark = pytest.mark.trio

CreateTopics = API_BY_NAME["CreateTopics"].request_class
Produce = API_BY_NAME["Produce"].request_class
Metadata = API_BY_NAME["Metadata"].request_class
DescribeLogDirs = API_BY_NAME["DescribeLogDirs"].request_class
TOPIC = "disk"


def produce(port: int, value: bytes, acks: int = -1):
    """The produce's error code, or "closed" when the broker closed the connection instead of answering."""
    data = Produce.TopicProduceData
    body = Produce(acks=acks, timeout_ms=5000, topic_data=[data(name=TOPIC, partition_data=[
        data.PartitionProduceData(index=0, records=build_batch([Record(value=value)]))])])
    try:
        response = call(port, "Produce", 9, body)
    except OSError:
        return "closed"
    return response.responses[0].partition_responses[0].error_code


async def test_a_broker_whose_fsyncs_fail_answers_kafka_storage_error_and_stays_up(tmp_path, monkeypatch):
    monkeypatch.setenv(FAIL_FSYNC_ENV, "fsync-fails")
    data_dir = tmp_path / "data"
    broker = Broker(BrokerSettings(listeners=plaintext_listener("127.0.0.1", 0), data_dir=str(data_dir)))
    async with trio.open_nursery() as nursery:
        _, port = await nursery.start(broker.run)
        created = await trio.to_thread.run_sync(call, port, "CreateTopics", 7, CreateTopics(topics=[
            CreateTopics.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1, configs=[])],
            timeout_ms=5000))
        assert created.topics[0].error_code == ErrorCode.NONE
        assert await trio.to_thread.run_sync(produce, port, b"kept") == ErrorCode.NONE
        (data_dir / "fsync-fails").touch()
        assert await trio.to_thread.run_sync(produce, port, b"lost?") in (ErrorCode.KAFKA_STORAGE_ERROR, "closed")
        assert broker.log_dir_offline is not None
        (data_dir / "fsync-fails").unlink()  # the disk would work again: too late, the pages may be gone
        for acks in (-1, 1):
            assert await trio.to_thread.run_sync(produce, port, b"refused", acks) == ErrorCode.KAFKA_STORAGE_ERROR
        partition = broker.partition(TOPIC, 0)
        assert partition.high_watermark == 1 and partition.log.recovery_point == 1
        metadata = await trio.to_thread.run_sync(call, port, "Metadata", 12, Metadata(topics=None))
        assert [topic.name for topic in metadata.topics] == [TOPIC]
        with trio.fail_after(10):  # fenced at its own asking, its replica is reported offline
            while metadata.topics[0].partitions[0].offline_replicas != [broker.node_id]:
                await trio.sleep(0.05)
                metadata = await trio.to_thread.run_sync(call, port, "Metadata", 12, Metadata(topics=None))
        described = await trio.to_thread.run_sync(call, port, "DescribeLogDirs", 1, DescribeLogDirs(topics=None))
        assert described.results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        ready, why = broker.readiness()
        assert not ready and "log directory offline" in why
        nursery.cancel_scope.cancel()
    # Stopped without the last fsync and checkpoint a clean stop makes: the recovery point stays where
    # the last fsync that succeeded left it, so the restart recovers (checks) everything after it.
    checkpoint = data_dir / "recovery-point-offset-checkpoint"
    written = checkpoint.read_text().split("\n") if checkpoint.exists() else []
    assert f"{TOPIC} 0 2" not in written, written
