"""kcat (librdkafka's command-line client) against a live broker: metadata, produce with keys and headers, consume."""

import json
import shutil
import subprocess

import confluent_kafka.admin as admin
import pytest

from kbroker.testing import running_broker
from kbroker.wire.murmur2 import default_partition

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")

PARTITIONS = 3
COUNT = 2_000
FORMAT = "%p|%o|%k|%s|%h\n"


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        yield running


def kcat(bootstrap, *args, stdin=None):
    result = subprocess.run(["kcat", "-b", bootstrap, *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def create_topic(bootstrap, name, partitions=PARTITIONS):
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([admin.NewTopic(name, partitions)])[name].result(timeout=10)


def by_partition(lines):
    """Consumed lines per partition, in the order kcat printed them (partitions interleave freely)."""
    grouped = {}
    for line in lines:
        grouped.setdefault(int(line.split("|", 1)[0]), []).append(line)
    return grouped


def test_metadata(broker):
    create_topic(broker.bootstrap, "kcat-metadata")
    metadata = json.loads(kcat(broker.bootstrap, "-L", "-J"))
    assert metadata["controllerid"] == 1
    assert metadata["brokers"] == [{"id": 1, "name": broker.bootstrap}]
    topic = next(t for t in metadata["topics"] if t["topic"] == "kcat-metadata")
    assert topic["partitions"] == [
        {"partition": p, "leader": 1, "replicas": [{"id": 1}], "isrs": [{"id": 1}]} for p in range(PARTITIONS)
    ]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_with_keys_and_headers_then_consume(broker, codec):
    topic = f"kcat-{codec}"
    create_topic(broker.bootstrap, topic)
    sent = [(f"key-{i % 37}", f"value {i} {codec}") for i in range(COUNT)]
    kcat(broker.bootstrap, "-P", "-t", topic, "-K", "\t", "-z", codec, "-H", "origin=kcat", "-H", "codec=" + codec,
         "-X", "partitioner=murmur2_random", stdin="".join(f"{k}\t{v}\n" for k, v in sent))

    output = kcat(broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", FORMAT)
    expected = {}
    for key, value in sent:
        partition = default_partition(key.encode(), PARTITIONS)
        offset = len(expected.setdefault(partition, []))
        expected[partition].append(f"{partition}|{offset}|{key}|{value}|origin=kcat,codec={codec}")
    assert by_partition(output.splitlines()) == expected


def test_consume_from_an_offset_with_a_count(broker):
    topic = "kcat-offsets"
    create_topic(broker.bootstrap, topic, partitions=1)
    kcat(broker.bootstrap, "-P", "-t", topic, "-p", "0", stdin="".join(f"m{i}\n" for i in range(50)))
    output = kcat(broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "20", "-c", "5", "-q", "-f", "%o %s\n")
    assert output.splitlines() == [f"{i} m{i}" for i in range(20, 25)]
    tail = kcat(broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "-3", "-e", "-q", "-f", "%o %s\n")
    assert tail.splitlines() == [f"{i} m{i}" for i in range(47, 50)]


def test_null_keys_and_json_envelope(broker):
    topic = "kcat-json"
    create_topic(broker.bootstrap, topic, partitions=1)
    kcat(broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":", stdin="k1:v1\nno key here\nk3:\n")
    consumed = [json.loads(line) for line in kcat(broker.bootstrap, "-C", "-t", topic, "-e", "-q", "-J").splitlines()]
    assert [(m["offset"], m["key"], m["payload"]) for m in consumed] == [(0, "k1", "v1"), (1, None, "no key here"), (2, "k3", "")]
