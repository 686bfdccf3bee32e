"""Codec speed on the broker's hot messages, beside kio (a compiled codec) in the same run.

    python bench/wire_bench.py [--seconds 0.3]

For each scenario both codecs do the same work on the same message; the table
shows the best per-call time of several rounds and the speedup (kio / ours).
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kio.serial import entity_reader, entity_writer  # noqa: E402

from testkit.kio_bridge import kio_class, to_kio  # noqa: E402
from kbroker.wire.records import build_batch, Record  # noqa: E402
from kbroker.wire.schema import API_BY_NAME, EncodeBuffer  # noqa: E402

PRODUCE_VERSION = 11
FETCH_VERSION = 16
METADATA_VERSION = 12
API_VERSIONS_VERSION = 3


def best_per_call(function, seconds: float, rounds: int = 5) -> float:
    """Best mean time per call over ``rounds`` rounds of about ``seconds / rounds`` each."""
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            function()
        elapsed = time.perf_counter() - started
        if elapsed > seconds / rounds / 4:
            break
        calls *= 2
    calls = max(1, int(calls * (seconds / rounds) / max(elapsed, 1e-9)))
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def batch_of(records: int, batch_bytes: int) -> bytes:
    value_size = max(1, batch_bytes // records - 20)
    return build_batch([Record(offset_delta=i, key=None, value=b"v" * value_size) for i in range(records)])


def produce_request(records_per_batch: int):
    produce = API_BY_NAME["Produce"].request_class
    topic = produce.TopicProduceData
    partitions = [
        topic.PartitionProduceData(index=i, records=batch_of(records_per_batch, 16 * 1024)) for i in range(6)
    ]
    return produce(acks=-1, timeout_ms=30000, topic_data=[topic(name="bench", partition_data=partitions)])


def fetch_response():
    fetch = API_BY_NAME["Fetch"].response_class
    topic = fetch.FetchableTopicResponse
    records = batch_of(10, 1024)
    partitions = [
        topic.PartitionData(partition_index=i, high_watermark=1000 + i, last_stable_offset=1000 + i, log_start_offset=0, records=records)
        for i in range(100)
    ]
    return fetch(responses=[topic(topic="bench", topic_id=uuid.uuid4(), partitions=partitions)])


def metadata_response():
    metadata = API_BY_NAME["Metadata"].response_class
    topic = metadata.MetadataResponseTopic
    brokers = [metadata.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=9092 + i) for i in range(3)]
    topics = [
        topic(
            name=f"topic-{t}",
            topic_id=uuid.uuid4(),
            partitions=[
                topic.MetadataResponsePartition(
                    partition_index=p, leader_id=p % 3, leader_epoch=5, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2]
                )
                for p in range(100)
            ],
        )
        for t in range(10)
    ]
    return metadata(brokers=brokers, cluster_id="kbroker", controller_id=0, topics=topics)


def api_versions_response():
    api_versions = API_BY_NAME["ApiVersions"].response_class
    keys = [
        api_versions.ApiVersion(api_key=api.key, min_version=api.min_version, max_version=api.max_version)
        for api in API_BY_NAME.values()
    ]
    return api_versions(api_keys=keys)


def kio_writer(name, version, kind):
    cls = kio_class(name, version, kind)
    write = entity_writer(cls)

    def encode(entity):
        buffer = io.BytesIO()
        write(buffer, entity)
        return buffer.getvalue()

    return cls, encode


def scenarios():
    """(label, ours, theirs) triples of zero-argument callables."""
    for records in (1, 400):
        api = API_BY_NAME["Produce"]
        value = produce_request(records)
        body = bytes(api.encode_request(PRODUCE_VERSION, value))
        reader = entity_reader(kio_class("Produce", PRODUCE_VERSION, "request"))
        yield (
            f"Produce request decode (6 x 16 KiB, {records} records/batch)",
            lambda body=body, api=api: api.decode_request(PRODUCE_VERSION, body),
            lambda body=body, reader=reader: reader(body, 0),
        )
    for name, version, build in (
        ("Fetch", FETCH_VERSION, fetch_response),
        ("Metadata", METADATA_VERSION, metadata_response),
        ("ApiVersions", API_VERSIONS_VERSION, api_versions_response),
    ):
        api = API_BY_NAME[name]
        value = build()
        cls, kio_encode = kio_writer(name, version, "response")
        entity = to_kio(value, cls)
        body = bytes(api.encode_response(version, value))
        assert kio_encode(entity) == body, f"{name}: codecs disagree"
        reader = entity_reader(cls)
        yield (
            f"{name} response encode",
            lambda api=api, value=value, version=version: api.encode_response(version, value, EncodeBuffer()),
            lambda entity=entity, kio_encode=kio_encode: kio_encode(entity),
        )
        yield (
            f"{name} response decode",
            lambda api=api, body=body, version=version: api.decode_response(version, body),
            lambda body=body, reader=reader: reader(body, 0),
        )
    api = API_BY_NAME["ApiVersions"]
    value = api_versions_response()
    cls, kio_encode = kio_writer("ApiVersions", API_VERSIONS_VERSION, "response")
    entity = to_kio(value, cls)
    reader = entity_reader(cls)
    yield (
        "ApiVersions response round trip",
        lambda: api.decode_response(API_VERSIONS_VERSION, api.encode_response(API_VERSIONS_VERSION, value)),
        lambda: reader(kio_encode(entity), 0),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    args = parser.parse_args()
    print(f"wire codec benchmark, {datetime.date.today()}, python {sys.version.split()[0]}")
    print(f"{'scenario':<52} {'ours µs':>10} {'kio µs':>10} {'speedup':>8}")
    for label, ours, theirs in scenarios():
        ours_time = best_per_call(ours, args.seconds)
        theirs_time = best_per_call(theirs, args.seconds)
        print(f"{label:<52} {ours_time * 1e6:>10.1f} {theirs_time * 1e6:>10.1f} {theirs_time / ours_time:>7.1f}x")


if __name__ == "__main__":
    main()
