"""How answers leave a plaintext connection (kbroker/server.py): one finished with nothing before it is
written at once by the task that finished it, as far as the socket takes it; the rest of it, and every
answer behind one not finished, from the writer task. Whatever the mix, each answer arrives whole and in
request order."""

from __future__ import annotations

import socket
import struct
import time

from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME

TOPIC = "answers"
PRODUCE, FETCH, METADATA, CREATE_TOPICS = (API_BY_NAME[name] for name in ("Produce", "Fetch", "Metadata",
                                                                           "CreateTopics"))


def produce_frame(correlation_id: int, value: bytes, acks: int = 1) -> bytes:
    data = PRODUCE.request_class.TopicProduceData
    body = PRODUCE.request_class(acks=acks, timeout_ms=10_000, topic_data=[data(name=TOPIC, partition_data=[
        data.PartitionProduceData(index=0, records=build_batch([Record(offset_delta=0, value=value)]))])])
    return encode_request(PRODUCE.key, 9, correlation_id, "answers-test", body)


def metadata_frame(correlation_id: int) -> bytes:
    return encode_request(METADATA.key, 12, correlation_id, "answers-test", METADATA.request_class(topics=[]))


def fetch_frame(correlation_id: int) -> bytes:
    topic = FETCH.request_class.FetchTopic
    body = FETCH.request_class(max_wait_ms=0, min_bytes=0, topics=[topic(topic=TOPIC, partitions=[
        topic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=64 << 20)])])
    return encode_request(FETCH.key, 12, correlation_id, "answers-test", body)


def create_topic(port: int) -> None:
    creatable = CREATE_TOPICS.request_class.CreatableTopic
    body = CREATE_TOPICS.request_class(topics=[creatable(name=TOPIC, num_partitions=1, replication_factor=1,
                                                         assignments=[], configs=[])])
    [answer] = exchange(port, [encode_request(CREATE_TOPICS.key, 7, 1, "answers-test", body)], [CREATE_TOPICS], [7])
    assert answer.topics[0].error_code == ErrorCode.NONE


def exchange(port: int, frames: list[bytes], apis, versions, *, receive_buffer: int | None = None,
             read_after_s: float = 0.0) -> list:
    """Send ``frames`` in one write; the answers, checked to come in request order (correlation ids 1...)."""
    with socket.socket() as connection:
        if receive_buffer is not None:  # before connecting: the window the broker may fill
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        connection.settimeout(30)
        connection.connect(("127.0.0.1", port))
        connection.sendall(b"".join(frames))
        time.sleep(read_after_s)  # the broker meanwhile finds the socket full
        answers, buffered = [], bytearray()
        while len(answers) < len(frames):
            chunk = connection.recv(1 << 20)
            assert chunk, "connection closed"
            buffered += chunk
            while len(buffered) >= 4 and len(buffered) >= 4 + struct.unpack_from(">i", buffered)[0]:
                size = struct.unpack_from(">i", buffered)[0]
                api, version = apis[len(answers)], versions[len(answers)]
                correlation_id, answer = decode_response(api.key, version, bytes(buffered[4:4 + size]))
                assert correlation_id == len(answers) + 1
                answers.append(answer)
                del buffered[:4 + size]
        assert not buffered
    return answers


def test_a_large_fetch_answer_to_a_slow_reader_arrives_whole_and_before_the_next():
    values = [bytes([index]) * (512 * 1024) for index in range(8)]  # 4 MiB: more than any socket buffer here
    with running_broker() as broker:
        create_topic(broker.port)
        produced = exchange(broker.port, [produce_frame(n + 1, value) for n, value in enumerate(values)],
                            [PRODUCE] * len(values), [9] * len(values))
        assert [answer.responses[0].partition_responses[0].base_offset for answer in produced] == list(range(8))
        fetched, metadata = exchange(broker.port, [fetch_frame(1), metadata_frame(2)], [FETCH, METADATA], [12, 12],
                                     receive_buffer=16 * 1024, read_after_s=0.5)
    partition = fetched.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE and partition.high_watermark == 8
    records = bytes(partition.records)
    assert len(records) > sum(map(len, values))
    assert all(value in records for value in values)
    assert metadata.brokers


def test_answers_finished_at_once_and_later_keep_request_order():
    """Metadata (finished when handled) between acks=1 and acks=all produces (finished after their fsync),
    pipelined in one write and read whole."""
    frames, apis, versions = [], [], []
    for n in range(1, 61):
        if n % 3:
            frames.append(metadata_frame(n))
            apis.append(METADATA)
            versions.append(12)
        else:
            frames.append(produce_frame(n, b"%d" % n, acks=1 if n % 2 else -1))
            apis.append(PRODUCE)
            versions.append(9)
    with running_broker() as broker:
        create_topic(broker.port)
        answers = exchange(broker.port, frames, apis, versions)
    produced = [answer.responses[0].partition_responses[0] for answer in answers if hasattr(answer, "responses")]
    assert [(p.error_code, p.base_offset) for p in produced] == [(ErrorCode.NONE, offset) for offset in range(20)]


def test_a_connection_whose_client_stopped_sending_closes_once_its_last_answer_is_written():
    """The client sends an acks=all produce and shuts its side: the answer, written by the task that waited
    for the fsync, is the last thing on the connection, which then closes."""
    with running_broker() as broker:
        create_topic(broker.port)
        with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as connection:
            connection.sendall(produce_frame(1, b"last", acks=-1))
            connection.shutdown(socket.SHUT_WR)
            received = bytearray()
            while chunk := connection.recv(65536):  # until the broker closes (the socket timeout bounds it)
                received += chunk
    size, = struct.unpack_from(">i", received)
    assert len(received) == 4 + size
    correlation_id, answer = decode_response(PRODUCE.key, 9, bytes(received[4:]))
    assert correlation_id == 1 and answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
