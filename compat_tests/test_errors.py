"""Errors clients rely on, from a live broker, with Kafka's codes."""

import socket
import struct

import confluent_kafka
import confluent_kafka.admin
import pytest

from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME


def call(port, api_name, version, body):
    api = API_BY_NAME[api_name]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(encode_request(api.key, version, 1, "errors-test", body))
        return decode_response(api.key, version, read_frame(connection))[1]


def read_frame(connection):
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = connection.recv(65536)
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return data[4:]


def produce(port, topic, records, version=9, acks=-1):
    request = API_BY_NAME["Produce"].request_class
    data = request.TopicProduceData
    body = request(acks=acks, timeout_ms=5000, topic_data=[data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=records)])])
    [result] = call(port, "Produce", version, body).responses[0].partition_responses
    return result


@pytest.fixture(scope="module")
def broker():
    with running_broker(settings={"auto.create.topics.enable": False}) as running:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([confluent_kafka.admin.NewTopic("errors", 1)])["errors"].result(timeout=10)
        compacted = confluent_kafka.admin.NewTopic("compacted", 1, config={"cleanup.policy": "compact"})
        admin.create_topics([compacted])["compacted"].result(timeout=10)
        yield running


def test_unknown_topic_when_auto_creation_is_off(broker):
    result = produce(broker.port, "no-such-topic", build_batch([Record(offset_delta=0, value=b"x")]))
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    metadata = API_BY_NAME["Metadata"].request_class
    response = call(broker.port, "Metadata", 12, metadata(topics=[metadata.MetadataRequestTopic(name="no-such-topic")]))
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    response = call(broker.port, "Metadata", 12, metadata(topics=[metadata.MetadataRequestTopic(name="bad name!")]))
    assert response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_corrupt_message_for_a_bad_crc(broker):
    batch = bytearray(build_batch([Record(offset_delta=0, value=b"payload")]))
    batch[-1] ^= 0xFF
    assert produce(broker.port, "errors", bytes(batch)).error_code == ErrorCode.CORRUPT_MESSAGE


def test_message_too_large(broker):
    batch = build_batch([Record(offset_delta=0, value=b"x" * (2 * 1024 * 1024))])
    assert produce(broker.port, "errors", batch).error_code == ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("version", range(3, 13))
def test_invalid_record_names_each_record_without_a_key_on_a_compacted_topic(broker, version):
    """Kafka's LogValidator.validateKey refuses the batch; from v8 the answer says which records and why (KIP-467)."""
    records = [Record(offset_delta=0, key=b"k", value=b"x"), Record(offset_delta=1, value=b"y"),
               Record(offset_delta=2, value=b"z")]
    result = produce(broker.port, "compacted", build_batch(records), version=version)
    assert result.error_code == ErrorCode.INVALID_RECORD
    if version >= 8:
        message = "Compacted topic cannot accept message without key in topic partition compacted-0"
        refused = [(e.batch_index, e.batch_index_error_message) for e in result.record_errors]
        assert refused == [(1, message), (2, message)]
        assert result.error_message.startswith("One or more records have been rejected due to 2 record errors in total")
    assert produce(broker.port, "compacted", build_batch(records[:1]), version=version).error_code == ErrorCode.NONE


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_are_advertised_but_close_the_connection(broker, version):
    """KIP-896 removed them in Kafka 4, whose ApiVersions still lists Produce from v0 for librdkafka's sake
    (KAFKA-18659): a request of one closes the connection, as Kafka 4's SocketServer does with a version it
    has not enabled. Which versions is the schema's word (``rejected 0-2``), read by the handler registry."""
    request = API_BY_NAME["ApiVersions"].request_class(client_software_name="errors-test", client_software_version="1")
    answer = call(broker.port, "ApiVersions", 3, request)
    advertised = {key.api_key: (key.min_version, key.max_version) for key in answer.api_keys}
    assert advertised[API_BY_NAME["Produce"].key] == (0, 13)
    batch = build_batch([Record(offset_delta=0, value=b"x")])
    with pytest.raises((EOFError, ConnectionResetError)):
        produce(broker.port, "errors", batch, version=version)
    assert produce(broker.port, "errors", batch, version=3).error_code == ErrorCode.NONE


def test_offset_out_of_range(broker):
    assert produce(broker.port, "errors", build_batch([Record(offset_delta=0, value=b"x")])).error_code == ErrorCode.NONE
    fetch = API_BY_NAME["Fetch"].request_class
    topic = fetch.FetchTopic
    body = fetch(max_wait_ms=0, min_bytes=0, topics=[topic(topic="errors", partitions=[topic.FetchPartition(partition=0, fetch_offset=10_000, partition_max_bytes=1024)])])
    response = call(broker.port, "Fetch", 12, body)
    assert response.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
