"""The Broker's clock reaches its time-keeping parts: a produce to a LogAppendTime topic is stamped with the
time of the FakeClock the broker was given, and moves only when that clock does."""

import pytest
import trio

from kbroker.broker import Broker, BrokerSettings, plaintext_listener
from kbroker.log.clock import FakeClock
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.raw_client import call

pytestmark = pytest.mark.trio

CreateTopics = API_BY_NAME["CreateTopics"].request_class
Produce = API_BY_NAME["Produce"].request_class
TOPIC = "stamped"


async def produce(port: int) -> int:
    """The log append time of one record produced to the topic (acks=1)."""
    data = Produce.TopicProduceData
    body = Produce(acks=1, timeout_ms=5000, topic_data=[data(name=TOPIC, partition_data=[
        data.PartitionProduceData(index=0, records=build_batch([Record(value=b"v")], base_timestamp=5))])])
    response = await trio.to_thread.run_sync(call, port, "Produce", 9, body)
    [result] = response.responses[0].partition_responses
    assert result.error_code == ErrorCode.NONE
    return result.log_append_time_ms


async def test_the_brokers_clock_stamps_log_append_time(tmp_path):
    clock = FakeClock(wall_ms=1_234_567_890_000)
    broker = Broker(BrokerSettings(listeners=plaintext_listener("127.0.0.1", 0), data_dir=str(tmp_path)), clock=clock)
    assert broker.isr.clock is broker.maintenance.clock is clock
    async with trio.open_nursery() as nursery:
        _, port = await nursery.start(broker.run)
        created = await trio.to_thread.run_sync(call, port, "CreateTopics", 7, CreateTopics(topics=[
            CreateTopics.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1, configs=[
                CreateTopics.CreatableTopic.CreatableTopicConfig(name="message.timestamp.type", value="LogAppendTime")])],
            timeout_ms=5000))
        assert created.topics[0].error_code == ErrorCode.NONE
        assert await produce(port) == 1_234_567_890_000
        assert await produce(port) == 1_234_567_890_000  # the clock has not moved
        clock.advance(60_000)
        assert await produce(port) == 1_234_567_950_000
        assert broker.partition(TOPIC, 0).clock is clock
        nursery.cancel_scope.cancel()
