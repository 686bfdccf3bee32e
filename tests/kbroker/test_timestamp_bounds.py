"""message.timestamp.before.max.ms / after.max.ms (KIP-937) from the broker's settings and a topic's
configs to a produce's answer: INVALID_TIMESTAMP naming each record out of range."""

import time

from kbroker.config import BrokerConfig
from kbroker.log.config import LogConfig
from kbroker.testing import running_broker
from kbroker.topics import topic_log_config
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.raw_client import call

Produce = API_BY_NAME["Produce"].request_class
CreateTopics = API_BY_NAME["CreateTopics"].request_class
HOUR_MS = 3600 * 1000


def test_the_bounds_reach_the_log_config():
    config = BrokerConfig.load(overrides=["log.message.timestamp.after.max.ms=5"]).log_config()
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (2**63 - 1, 5)
    topic = topic_log_config(config, {"message.timestamp.before.max.ms": "7"})
    assert (topic.message_timestamp_before_max_ms, topic.message_timestamp_after_max_ms) == (7, 5)


def test_a_record_stamped_out_of_the_topics_bounds_is_refused():
    with running_broker(settings={"log.message.timestamp.after.max.ms": HOUR_MS}) as running:
        call(running.port, "CreateTopics", 7, CreateTopics(topics=[CreateTopics.CreatableTopic(
            name="recent", num_partitions=1, replication_factor=1, configs=[
                CreateTopics.CreatableTopic.CreatableTopicConfig(name="message.timestamp.before.max.ms",
                                                                 value=str(HOUR_MS))])], timeout_ms=5000))

        def produce(timestamp_ms: int):
            data = Produce.TopicProduceData
            records = build_batch([Record(value=b"v")], base_timestamp=timestamp_ms)
            body = Produce(acks=-1, timeout_ms=5000, topic_data=[
                data(name="recent", partition_data=[data.PartitionProduceData(index=0, records=records)])])
            [result] = call(running.port, "Produce", 9, body).responses[0].partition_responses
            return result

        now_ms = int(time.time() * 1000)
        assert produce(now_ms).error_code == ErrorCode.NONE
        for timestamp_ms in (now_ms - 2 * HOUR_MS, now_ms + 2 * HOUR_MS):  # the topic's bound, the broker's
            refused = produce(timestamp_ms)
            assert refused.error_code == ErrorCode.INVALID_TIMESTAMP
            assert [e.batch_index for e in refused.record_errors] == [0]
            assert f"Timestamp {timestamp_ms} of message with offset 0 is out of range" in refused.error_message


def test_by_default_a_record_more_than_an_hour_ahead_is_refused_and_named_as_kafka_4_does():
    """Kafka 4's default message.timestamp.after.max.ms is an hour (KIP-937); the batch header's max
    timestamp shows when a batch needs its records read."""
    with running_broker() as running:
        now_ms = int(time.time() * 1000)
        data = Produce.TopicProduceData

        def produce(records):
            body = Produce(acks=-1, timeout_ms=5000, topic_data=[
                data(name="ahead", partition_data=[data.PartitionProduceData(index=0, records=records)])])
            [result] = call(running.port, "Produce", 9, body).responses[0].partition_responses
            return result

        call(running.port, "CreateTopics", 7, CreateTopics(topics=[CreateTopics.CreatableTopic(
            name="ahead", num_partitions=1, replication_factor=1)], timeout_ms=5000))
        within = [Record(value=b"a"), Record(offset_delta=1, value=b"b", timestamp_delta=HOUR_MS - 60_000)]
        assert produce(build_batch(within, base_timestamp=now_ms)).error_code == ErrorCode.NONE
        beyond = [Record(value=b"a"), Record(offset_delta=1, value=b"b"),
                  Record(offset_delta=2, value=b"c", timestamp_delta=2 * HOUR_MS)]
        refused = produce(build_batch(beyond, base_timestamp=now_ms))
        assert refused.error_code == ErrorCode.INVALID_TIMESTAMP
        assert [error.batch_index for error in refused.record_errors] == [2]
        assert produce(build_batch([Record(value=b"old")], base_timestamp=now_ms - 30 * 24 * HOUR_MS)).error_code \
            == ErrorCode.NONE  # no lower bound by default
