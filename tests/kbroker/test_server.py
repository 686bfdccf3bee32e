"""The server over real sockets: ApiVersions, Metadata, bad input, idle connections."""

import socket
import struct

import pytest
import trio

from kbroker.broker import Broker, BrokerSettings, plaintext_listener
from kbroker.listen import bind_listeners
from kbroker.server import ServerLimits
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.schema import API_BY_NAME

pytestmark = pytest.mark.trio


async def start(nursery, tmp_path, **limits):
    broker = Broker(BrokerSettings(listeners=plaintext_listener("127.0.0.1", 0), data_dir=str(tmp_path),
                                   limits=ServerLimits(**limits)))
    host, port = await nursery.start(broker.run)
    return broker, host, port


async def roundtrip(port, frame: bytes, api_key: int, version: int):
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(frame)
        return decode_response(api_key, version, await read_frame(stream))


async def read_frame(stream):
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return data[4:]


def api_versions_request(version, correlation_id=1):
    body = API_BY_NAME["ApiVersions"].request_class(client_software_name="test", client_software_version="1")
    return encode_request(18, version, correlation_id, "test", body)


async def test_api_versions_lists_exactly_the_handled_apis(tmp_path):
    async with trio.open_nursery() as nursery:
        _, _, port = await start(nursery, tmp_path)
        correlation_id, response = await roundtrip(port, api_versions_request(3, 7), 18, 3)
        assert correlation_id == 7 and response.error_code == ErrorCode.NONE
        versions = {key.api_key: (key.min_version, key.max_version) for key in response.api_keys}
        assert versions[18] == (0, 5) and versions[3] == (0, 13)
        nursery.cancel_scope.cancel()


async def test_unsupported_api_versions_version_gets_a_v0_answer(tmp_path):
    async with trio.open_nursery() as nursery:
        _, _, port = await start(nursery, tmp_path)
        raw = struct.pack(">hhi", 18, 99, 5) + struct.pack(">h", 1) + b"c" + b"\x00\x00\x00"
        _, response = await roundtrip(port, struct.pack(">i", len(raw)) + raw, 18, 0)
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [key.api_key for key in response.api_keys] == [18]  # only ApiVersions' range, as Kafka answers
        nursery.cancel_scope.cancel()


async def test_metadata_names_this_broker_and_unknown_topics(tmp_path):
    async with trio.open_nursery() as nursery:
        broker, host, port = await start(nursery, tmp_path)
        request = API_BY_NAME["Metadata"].request_class
        body = request(topics=[request.MetadataRequestTopic(name="missing")], allow_auto_topic_creation=False)
        _, response = await roundtrip(port, encode_request(3, 12, 2, "test", body), 3, 12)
        assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, host, port)]
        assert response.cluster_id == broker.cluster_id
        assert [(t.name, t.error_code) for t in response.topics] == [("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        # Allowed by the client and by auto.create.topics.enable (default true): the controller creates it
        # with num.partitions, and the answer waits for that (Broker.auto_create).
        body = request(topics=[request.MetadataRequestTopic(name="missing")])
        _, response = await roundtrip(port, encode_request(3, 12, 3, "test", body), 3, 12)
        [topic] = response.topics
        assert (topic.name, topic.error_code, len(topic.partitions)) == ("missing", ErrorCode.NONE, 1)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", 2**31 - 1) + b"\x00" * 100,  # a frame claiming 2 GiB
        struct.pack(">i", -1),
        struct.pack(">i", 10) + struct.pack(">hhi", 9999, 0, 1) + b"\xff\xff",  # unknown api key
        struct.pack(">i", 10) + struct.pack(">hhi", 3, 12, 1) + b"\x00\x05",  # truncated header
        struct.pack(">i", 20) + bytes(range(20)),
    ],
)
async def test_garbage_closes_that_connection_and_the_broker_keeps_serving(tmp_path, garbage):
    async with trio.open_nursery() as nursery:
        _, _, port = await start(nursery, tmp_path)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(garbage)
        with trio.fail_after(5):
            assert await stream.receive_some(100) == b""
        await stream.aclose()
        _, response = await roundtrip(port, api_versions_request(3), 18, 3)
        assert response.error_code == ErrorCode.NONE
        nursery.cancel_scope.cancel()


async def test_idle_connections_are_closed(tmp_path):
    async with trio.open_nursery() as nursery:
        _, _, port = await start(nursery, tmp_path, idle_ms=200)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        with trio.fail_after(5):
            assert await stream.receive_some(100) == b""
        nursery.cancel_scope.cancel()


async def test_pipelined_requests_are_answered_in_order(tmp_path):
    async with trio.open_nursery() as nursery:
        _, _, port = await start(nursery, tmp_path)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        metadata = API_BY_NAME["Metadata"].request_class(topics=None)
        frames = [api_versions_request(3, 1), encode_request(3, 12, 2, "t", metadata), api_versions_request(0, 3)]
        await stream.send_all(b"".join(frames))
        ids = []
        buffered = b""
        while len(ids) < 3:
            buffered += await stream.receive_some(65536)
            while len(buffered) >= 4 and len(buffered) >= 4 + struct.unpack_from(">i", buffered)[0]:
                size = struct.unpack_from(">i", buffered)[0]
                ids.append(struct.unpack_from(">i", buffered, 4)[0])
                buffered = buffered[4 + size :]
        assert ids == [1, 2, 3]
        await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_many_small_answers_finished_together_arrive_whole_and_in_order(tmp_path):
    # Answers that finish together leave in one write: every frame must still be whole.
    async with trio.open_nursery() as nursery:
        _, _, port = await start(nursery, tmp_path)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        metadata = API_BY_NAME["Metadata"].request_class(topics=None)
        frames = [
            encode_request(3, 12, n, "t", metadata) if n % 7 == 0 else api_versions_request(3, n) for n in range(300)
        ]
        await stream.send_all(b"".join(frames))
        answers = []
        buffered = b""
        with trio.fail_after(10):
            while len(answers) < 300:
                buffered += await stream.receive_some(1 << 20)
                while len(buffered) >= 4 and len(buffered) >= 4 + struct.unpack_from(">i", buffered)[0]:
                    size = struct.unpack_from(">i", buffered)[0]
                    answers.append(buffered[4 : 4 + size])
                    buffered = buffered[4 + size :]
        assert [struct.unpack_from(">i", body)[0] for body in answers] == list(range(300))
        assert len({body[4:] for n, body in enumerate(answers) if n % 7}) == 1  # every ApiVersions answer alike
        assert buffered == b""
        await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_stock_clients_read_metadata(tmp_path):
    import confluent_kafka.admin
    import kafka

    async with trio.open_nursery() as nursery:
        _, host, port = await start(nursery, tmp_path)
        bootstrap = f"127.0.0.1:{port}"

        def confluent():
            admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
            return admin.list_topics(timeout=10)

        def kafka_python():
            consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=10000)
            try:
                return consumer.topics()
            finally:
                consumer.close()

        metadata = await trio.to_thread.run_sync(confluent)
        assert [(b.id, b.host, b.port) for b in metadata.brokers.values()] == [(1, host, port)]
        assert await trio.to_thread.run_sync(kafka_python) == set()
        nursery.cancel_scope.cancel()


async def test_a_connection_made_before_the_broker_starts_is_served(tmp_path):
    """The kbroker command binds its listener first (kbroker.listen): early clients wait in the backlog."""
    [listening] = bind_listeners("127.0.0.1", 0)
    port = listening.getsockname()[1]
    early = socket.create_connection(("127.0.0.1", port), timeout=10)  # accepted by the kernel, not yet by us
    early.sendall(api_versions_request(3))
    broker = Broker(BrokerSettings(listeners=plaintext_listener("127.0.0.1", port, (listening,)), data_dir=str(tmp_path)))
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(early))
        _, response = decode_response(18, 3, await read_frame(stream))
        assert response.error_code == ErrorCode.NONE and response.api_keys
        await stream.aclose()
        nursery.cancel_scope.cancel()
