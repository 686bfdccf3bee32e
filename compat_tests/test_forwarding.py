"""A broker forwards admin requests to the active controller as Kafka's ForwardingManager does: one attempt
waits controller.socket.timeout.ms, and a forward that got no answer in time is answered REQUEST_TIMED_OUT,
never sent again (the controller may have applied it: a creation sent twice would be answered
TOPIC_ALREADY_EXISTS, as happened to 2,000-partition creations that outlasted a 2 s attempt)."""

import time

from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from testkit.raw_client import call, request

CreatableTopic = request("CreateTopics").CreatableTopic


def create(port: int, name: str, partitions: int):
    body = request("CreateTopics", timeout_ms=30_000, topics=[CreatableTopic(name=name, num_partitions=partitions,
                                                                             replication_factor=1)])
    [result] = call(port, "CreateTopics", 7, body, timeout_s=60).topics
    return result


def partitions_of(port: int, name: str) -> int | None:
    answer = call(port, "Metadata", 12, request("Metadata", topics=[request("Metadata").MetadataRequestTopic(name=name)],
                                                 allow_auto_topic_creation=False))
    [topic] = answer.topics
    return None if topic.error_code else len(topic.partitions)


def test_a_forward_that_outlasts_its_attempt_is_answered_request_timed_out_and_applied_once(tmp_path):
    with running_broker(str(tmp_path), settings={"controller.socket.timeout.ms": 1}) as broker:
        result = create(broker.port, "slow", 400)
        assert result.error_code == ErrorCode.REQUEST_TIMED_OUT
        give_up = time.monotonic() + 30
        while partitions_of(broker.port, "slow") is None and time.monotonic() < give_up:
            time.sleep(0.05)
        assert partitions_of(broker.port, "slow") == 400  # the controller applied it, once


def test_a_large_creation_is_answered_once(tmp_path):
    with running_broker(str(tmp_path)) as broker:
        assert create(broker.port, "large", 2000).error_code == ErrorCode.NONE
        assert partitions_of(broker.port, "large") == 2000
