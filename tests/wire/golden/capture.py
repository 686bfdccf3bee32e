"""Capture request frames from real clients into tests/wire/golden/.

    python -m tests.wire.golden.capture

A throwaway broker on 127.0.0.1 answers just enough (ApiVersions, Metadata,
Produce, InitProducerId, ListOffsets, Fetch, FindCoordinator, JoinGroup) for
confluent-kafka, kafka-python and aiokafka to send the requests we keep: the
first frame of each API per scenario, written as ``<client>/<scenario>-<Api>-v<N>.bin``
(the frame body, without its size prefix). ``manifest.json`` says what each
scenario produced so the tests can check the decoded records.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socketserver
import threading
import time
import uuid

from kbroker.wire.frame import FrameDecoder, decode_request_header, encode_response
from kbroker.wire.schema import API_BY_KEY, API_BY_NAME

GOLDEN_DIR = os.path.dirname(os.path.abspath(__file__))
TOPIC = "golden"
GROUP = "golden-group"
TOPIC_ID = uuid.UUID("6a1f3c55-2b1e-4c67-9d3f-0c1d2e3f4a5b")
PRODUCER_ID = 4242
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
MESSAGES = [
    (b"key-0", b"value-0", [("trace", b"abc")]),
    (None, b"value-1 without a key", []),
    (b"key-2", None, [("empty", b"")]),
    # Clients send small batches uncompressed when compression would not shrink them.
    (b"key-3", b"compressible " * 64, []),
]
ANSWERED = ("ApiVersions", "Metadata", "Produce", "InitProducerId", "ListOffsets", "Fetch", "FindCoordinator", "JoinGroup")
MEMBER_ID_REQUIRED = 79


class CaptureBroker(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Connection)
        self.port = self.server_address[1]
        self.frames: dict[tuple[str, str], tuple[int, bytes]] = {}
        self.lock = threading.Lock()
        self.next_offset = 0

    def keep(self, client_id: str, api_name: str, version: int, frame: bytes) -> None:
        with self.lock:
            self.frames.setdefault((client_id, api_name), (version, frame))


class _Connection(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        decoder = FrameDecoder()
        self.request.settimeout(30)
        while True:
            try:
                data = self.request.recv(65536)
            except OSError:
                return
            if not data:
                return
            decoder.feed(data)
            while (frame := decoder.next_frame()) is not None:
                header, body_start = decode_request_header(frame)
                api = API_BY_KEY[header.api_key]
                self.server.keep(header.client_id or "", api.name, header.api_version, frame)
                if api.name not in ANSWERED:
                    return
                request = api.decode_request(header.api_version, frame[body_start:])
                response = getattr(self, "answer_" + api.name)(request, header.api_version)
                out = encode_response(header.api_key, header.api_version, header.correlation_id, response)
                self.request.sendall(out)

    def answer_ApiVersions(self, request, version):
        response = API_BY_NAME["ApiVersions"].response_class
        keys = [
            response.ApiVersion(api_key=API_BY_NAME[name].key, min_version=API_BY_NAME[name].min_version, max_version=API_BY_NAME[name].max_version)
            for name in ANSWERED
        ]
        return response(api_keys=keys)

    def answer_Metadata(self, request, version):
        response = API_BY_NAME["Metadata"].response_class
        topic = response.MetadataResponseTopic
        partitions = [
            topic.MetadataResponsePartition(partition_index=0, leader_id=0, leader_epoch=0, replica_nodes=[0], isr_nodes=[0])
        ]
        return response(
            brokers=[response.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=self.server.port)],
            cluster_id="golden-cluster",
            controller_id=0,
            topics=[topic(name=TOPIC, topic_id=TOPIC_ID, partitions=partitions)],
        )

    def answer_Produce(self, request, version):
        response = API_BY_NAME["Produce"].response_class
        topics = []
        for topic in request.topic_data:
            partitions = []
            for partition in topic.partition_data:
                with self.server.lock:
                    base_offset = self.server.next_offset
                    self.server.next_offset += 100
                partitions.append(response.TopicProduceResponse.PartitionProduceResponse(index=partition.index, base_offset=base_offset))
            topics.append(response.TopicProduceResponse(name=topic.name, topic_id=topic.topic_id, partition_responses=partitions))
        return response(responses=topics)

    def answer_InitProducerId(self, request, version):
        return API_BY_NAME["InitProducerId"].response_class(producer_id=PRODUCER_ID, producer_epoch=0)

    def answer_ListOffsets(self, request, version):
        response = API_BY_NAME["ListOffsets"].response_class
        topic = response.ListOffsetsTopicResponse
        return response(
            topics=[
                topic(name=t.name, partitions=[topic.ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=0, timestamp=-1) for p in t.partitions])
                for t in request.topics
            ]
        )

    def answer_Fetch(self, request, version):
        time.sleep(min(request.max_wait_ms, 100) / 1000)
        response = API_BY_NAME["Fetch"].response_class
        topic = response.FetchableTopicResponse
        return response(
            responses=[
                topic(topic=t.topic, topic_id=t.topic_id, partitions=[topic.PartitionData(partition_index=p.partition, high_watermark=0, last_stable_offset=0, log_start_offset=0, records=b"") for p in t.partitions])
                for t in request.topics
            ]
        )

    def answer_FindCoordinator(self, request, version):
        response = API_BY_NAME["FindCoordinator"].response_class
        keys = request.coordinator_keys or [request.key]
        coordinators = [response.Coordinator(key=key, node_id=0, host="127.0.0.1", port=self.server.port) for key in keys]
        return response(node_id=0, host="127.0.0.1", port=self.server.port, coordinators=coordinators)

    def answer_JoinGroup(self, request, version):
        return API_BY_NAME["JoinGroup"].response_class(error_code=MEMBER_ID_REQUIRED, member_id="member-1", generation_id=-1)


def _wait_for(broker: CaptureBroker, client_id: str, api_name: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (client_id, api_name) in broker.frames:
            return
        time.sleep(0.02)
    raise TimeoutError(f"{client_id} sent no {api_name} within {seconds}s")


def capture_confluent(broker: CaptureBroker, bootstrap: str) -> None:
    import confluent_kafka

    for codec in CODECS:
        for idempotent in (False, True):
            if idempotent and codec not in ("none", "lz4"):
                continue
            client_id = f"confluent-produce-{codec}{'-idempotent' if idempotent else ''}"
            producer = confluent_kafka.Producer(
                {"bootstrap.servers": bootstrap, "client.id": client_id, "compression.type": codec,
                 "enable.idempotence": idempotent, "linger.ms": 50}
            )
            for key, value, headers in MESSAGES:
                producer.produce(TOPIC, key=key, value=value, headers=headers, partition=0)
            producer.flush(10)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "client.id": "confluent-consume", "group.id": GROUP, "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    consumer.poll(0.5)
    _wait_for(broker, "confluent-consume", "Fetch")
    consumer.close()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "client.id": "confluent-group", "group.id": GROUP})
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 10
    while ("confluent-group", "JoinGroup") not in broker.frames and time.monotonic() < deadline:
        consumer.poll(0.1)
    consumer.close()


def capture_kafka_python(broker: CaptureBroker, bootstrap: str) -> None:
    import kafka

    for codec in CODECS:
        for idempotent in (False, True):
            if idempotent and codec not in ("none", "lz4"):
                continue
            client_id = f"kafka-python-produce-{codec}{'-idempotent' if idempotent else ''}"
            producer = kafka.KafkaProducer(
                bootstrap_servers=bootstrap, client_id=client_id, linger_ms=50,
                compression_type=None if codec == "none" else codec, enable_idempotence=idempotent,
            )
            for key, value, headers in MESSAGES:
                producer.send(TOPIC, key=key, value=value, headers=headers, partition=0)
            producer.flush(10)
            producer.close(5)
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, client_id="kafka-python-consume", enable_auto_commit=False)
    consumer.assign([kafka.TopicPartition(TOPIC, 0)])
    consumer.seek(kafka.TopicPartition(TOPIC, 0), 0)
    consumer.poll(500)
    _wait_for(broker, "kafka-python-consume", "Fetch")
    consumer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, client_id="kafka-python-group", group_id=GROUP)
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 10
    while ("kafka-python-group", "JoinGroup") not in broker.frames and time.monotonic() < deadline:
        consumer.poll(100)
    consumer.close()


def capture_aiokafka(broker: CaptureBroker, bootstrap: str) -> None:
    import aiokafka

    async def run() -> None:
        for codec in CODECS:
            for idempotent in (False, True):
                if idempotent and codec not in ("none", "lz4"):
                    continue
                client_id = f"aiokafka-produce-{codec}{'-idempotent' if idempotent else ''}"
                producer = aiokafka.AIOKafkaProducer(
                    bootstrap_servers=bootstrap, client_id=client_id, linger_ms=50,
                    compression_type=None if codec == "none" else codec, enable_idempotence=idempotent,
                )
                await producer.start()
                batch = producer.create_batch()
                for key, value, headers in MESSAGES:
                    batch.append(key=key, value=value, timestamp=None, headers=headers)
                await producer.send_batch(batch, TOPIC, partition=0)
                await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="aiokafka-consume", enable_auto_commit=False)
        await consumer.start()
        consumer.assign([aiokafka.TopicPartition(TOPIC, 0)])
        consumer.seek(aiokafka.TopicPartition(TOPIC, 0), 0)
        await consumer.getmany(timeout_ms=500)
        await consumer.stop()
        consumer = aiokafka.AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, client_id="aiokafka-group", group_id=GROUP)
        # start() waits for an assignment, which this broker never grants.
        starting = asyncio.ensure_future(consumer.start())
        deadline = time.monotonic() + 10
        while ("aiokafka-group", "JoinGroup") not in broker.frames and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        starting.cancel()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(consumer.stop(), 2)

    asyncio.run(asyncio.wait_for(run(), 120))


def main() -> None:
    broker = CaptureBroker()
    threading.Thread(target=broker.serve_forever, daemon=True).start()
    bootstrap = f"127.0.0.1:{broker.port}"
    for capture in (capture_confluent, capture_kafka_python, capture_aiokafka):
        capture(broker, bootstrap)
    broker.shutdown()
    manifest = {"topic": TOPIC, "group": GROUP, "producer_id": PRODUCER_ID, "messages": [
        {"key": None if key is None else key.decode(), "value": None if value is None else value.decode(),
         "headers": [[name, data.decode()] for name, data in headers]} for key, value, headers in MESSAGES
    ], "frames": {}}
    kept = {"Produce", "Fetch", "JoinGroup", "ApiVersions", "Metadata", "InitProducerId"}
    for (client_id, api_name), (version, frame) in sorted(broker.frames.items()):
        if api_name not in kept or not client_id:
            continue
        client, _, scenario = client_id.partition("-produce-") if "-produce-" in client_id else client_id.rpartition("-")
        if "-produce-" in client_id:
            scenario = "produce-" + scenario
        directory = os.path.join(GOLDEN_DIR, client)
        os.makedirs(directory, exist_ok=True)
        name = f"{scenario}-{api_name}-v{version}.bin"
        with open(os.path.join(directory, name), "wb") as file:
            file.write(frame)
        manifest["frames"][f"{client}/{name}"] = {"client_id": client_id, "api": api_name, "version": version}
    with open(os.path.join(GOLDEN_DIR, "manifest.json"), "w") as file:
        json.dump(manifest, file, indent=1, sort_keys=True)
    print(f"captured {len(manifest['frames'])} frames")


if __name__ == "__main__":
    main()
