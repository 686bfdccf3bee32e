"""Request frames captured from real clients decode to what those clients sent.

The frames under tests/wire/golden/ come from confluent-kafka (librdkafka),
kafka-python and aiokafka talking to tests/wire/golden/capture.py; the
manifest records the messages each producer sent. Regenerate with
``python -m tests.wire.golden.capture``.
"""

import json
import os

import pytest

from kbroker.wire.compression import CODEC_NAMES
from kbroker.wire.frame import decode_request_header
from kbroker.wire.records import decode_records, iter_batches, validate_batch
from kbroker.wire.schema import API_BY_NAME

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
MANIFEST = json.load(open(os.path.join(GOLDEN, "manifest.json")))
FRAMES = sorted(MANIFEST["frames"].items())


def load(path):
    with open(os.path.join(GOLDEN, path), "rb") as file:
        raw = file.read()
    header, body_start = decode_request_header(raw)
    return raw, header, body_start


def expected_messages():
    def data(text):
        return None if text is None else text.encode()

    return [
        (data(m["key"]), data(m["value"]), [(name, value.encode()) for name, value in m["headers"]])
        for m in MANIFEST["messages"]
    ]


def test_every_client_and_api_was_captured():
    seen = {(path.split("/")[0], info["api"]) for path, info in FRAMES}
    for client in ("confluent", "kafka-python", "aiokafka"):
        for api in ("ApiVersions", "Metadata", "Produce", "Fetch", "JoinGroup", "InitProducerId"):
            assert (client, api) in seen
    produce_scenarios = {path.rsplit("-Produce", 1)[0] for path, info in FRAMES if info["api"] == "Produce"}
    assert len(produce_scenarios) == 3 * 7  # five codecs and two idempotent producers per client


@pytest.mark.parametrize("path, info", FRAMES, ids=[path for path, _ in FRAMES])
def test_frame_decodes_and_reencodes_to_the_same_bytes(path, info):
    raw, header, body_start = load(path)
    api = API_BY_NAME[info["api"]]
    assert (header.api_key, header.api_version, header.client_id) == (api.key, info["version"], info["client_id"])
    request = api.decode_request(header.api_version, raw[body_start:])
    assert bytes(api.encode_request(header.api_version, request)) == raw[body_start:]


PRODUCE_FRAMES = [(path, info) for path, info in FRAMES if info["api"] == "Produce"]


@pytest.mark.parametrize("path, info", PRODUCE_FRAMES, ids=[path for path, _ in PRODUCE_FRAMES])
def test_produced_records_are_intact(path, info):
    raw, header, body_start = load(path)
    request = API_BY_NAME["Produce"].decode_request(header.api_version, raw[body_start:])
    ((topic,),) = [request.topic_data]
    assert topic.name == MANIFEST["topic"] or header.api_version >= 13
    ((partition,),) = [topic.partition_data]
    codec = path.split("produce-")[1].split("-")[0]
    records = []
    for position, batch in iter_batches(partition.records):
        validate_batch(partition.records, position)
        assert CODEC_NAMES[batch.compression] == codec
        if "idempotent" in path:
            assert batch.producer_id == MANIFEST["producer_id"] and batch.base_sequence == 0
        else:
            assert batch.producer_id == -1
        _, decoded = decode_records(partition.records, position)
        records.extend((r.key, r.value, list(r.headers)) for r in decoded)
    assert records == expected_messages()


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_fetch_and_join_group_carry_what_the_consumer_asked_for(client):
    [(fetch_path, _)] = [(p, i) for p, i in FRAMES if p.startswith(client + "/") and i["api"] == "Fetch"]
    raw, header, body_start = load(fetch_path)
    fetch = API_BY_NAME["Fetch"].decode_request(header.api_version, raw[body_start:])
    partitions = [(t.topic, p.partition, p.fetch_offset) for t in fetch.topics for p in t.partitions]
    assert partitions == [(MANIFEST["topic"], 0, 0)] or header.api_version >= 13
    assert fetch.max_wait_ms > 0 and fetch.max_bytes > 0

    [(join_path, _)] = [(p, i) for p, i in FRAMES if p.startswith(client + "/") and i["api"] == "JoinGroup"]
    raw, header, body_start = load(join_path)
    join = API_BY_NAME["JoinGroup"].decode_request(header.api_version, raw[body_start:])
    assert (join.group_id, join.protocol_type, join.member_id) == (MANIFEST["group"], "consumer", "")
    assert join.protocols and all(protocol.metadata for protocol in join.protocols)
