"""Spark's Kafka source and sink in batch queries: offsets, timestamps, headers, partitions, the sink's columns."""

import json

import pytest

from spark_it.conftest import consume, create_topic, produce
from kbroker.wire.murmur2 import default_partition

COUNT = 200


@pytest.fixture(scope="module")
def filled(broker):
    """Topic "batch-src": 2 partitions, COUNT records with keys, headers and timestamps 1_000_000 + 1000 * i."""
    create_topic(broker.bootstrap, "batch-src", partitions=2)
    records = [
        (f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())], i % 2, 1_000_000 + 1000 * i) for i in range(COUNT)
    ]
    positions = produce(broker.bootstrap, "batch-src", records)
    return {f"v{i}": position for i, position in enumerate(positions)}


def read(spark, broker, **options):
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_earliest_to_latest_reads_every_record_with_its_columns(spark, broker, filled):
    rows = read(spark, broker, subscribe="batch-src", includeHeaders="true").collect()
    assert len(rows) == COUNT
    for row in rows:
        i = int(row.value.decode()[1:])
        assert row.key == f"k{i}".encode()
        assert (row.partition, row.offset) == filled[f"v{i}"]
        assert row.topic == "batch-src"
        assert int(row.timestamp.timestamp() * 1000) == 1_000_000 + 1000 * i
        assert row.timestampType == 0  # CreateTime
        assert [(h.key, bytes(h.value)) for h in row.headers] == [("n", str(i).encode())]


def test_ending_offsets_are_exactly_the_high_watermarks(spark, broker, filled):
    """Spark reads each partition up to ListOffsets(latest); one short or one over would show here."""
    rows = read(spark, broker, subscribe="batch-src", startingOffsets="earliest", endingOffsets="latest").select("partition", "offset").collect()
    by_partition = {}
    for row in rows:
        by_partition.setdefault(row.partition, []).append(row.offset)
    assert {p: sorted(o) for p, o in by_partition.items()} == {0: list(range(COUNT // 2)), 1: list(range(COUNT // 2))}


def test_json_starting_and_ending_offsets(spark, broker, filled):
    starting = json.dumps({"batch-src": {"0": 10, "1": -2}})  # -2: earliest
    ending = json.dumps({"batch-src": {"0": 20, "1": 5}})
    rows = read(spark, broker, subscribe="batch-src", startingOffsets=starting, endingOffsets=ending).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]


def test_starting_timestamp(spark, broker, filled):
    # Partition 0 holds even i (timestamps 1_000_000 + 2000 * k), partition 1 odd i.
    rows = read(spark, broker, subscribe="batch-src", startingTimestamp=str(1_000_000 + 1000 * 150)).collect()
    assert sorted(int(r.value.decode()[1:]) for r in rows) == list(range(150, COUNT))


def test_assign_and_subscribe_pattern(spark, broker, filled):
    assigned = read(spark, broker, assign=json.dumps({"batch-src": [1]})).collect()
    assert {r.partition for r in assigned} == {1} and len(assigned) == COUNT // 2
    create_topic(broker.bootstrap, "batch-pattern-a", partitions=1)
    create_topic(broker.bootstrap, "batch-pattern-b", partitions=1)
    produce(broker.bootstrap, "batch-pattern-a", [(None, b"a")])
    produce(broker.bootstrap, "batch-pattern-b", [(None, b"b1"), (None, b"b2")])
    rows = read(spark, broker, subscribePattern="batch-pattern-.*").collect()
    assert sorted((r.topic, r.value) for r in rows) == [("batch-pattern-a", b"a"), ("batch-pattern-b", b"b1"), ("batch-pattern-b", b"b2")]


def test_min_partitions_splits_offset_ranges(spark, broker, filled):
    frame = read(spark, broker, subscribe="batch-src", minPartitions="8")
    assert frame.rdd.getNumPartitions() >= 8
    assert frame.count() == COUNT


def test_batch_write_with_keys_headers_and_a_topic_column(spark, broker):
    create_topic(broker.bootstrap, "sink-a", partitions=2)
    create_topic(broker.bootstrap, "sink-b", partitions=2)
    rows = [(f"sink-{'a' if i % 3 else 'b'}", f"key-{i}", f"value-{i}", [("i", str(i).encode())]) for i in range(90)]
    frame = spark.createDataFrame(rows, "topic string, key string, value string, headers array<struct<key: string, value: binary>>")
    frame.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).save()
    written = {"sink-a": [r for r in rows if r[0] == "sink-a"], "sink-b": [r for r in rows if r[0] == "sink-b"]}
    for topic, expected in written.items():
        got = consume(broker.bootstrap, topic, len(expected))
        assert sorted((m.key(), m.value(), tuple(m.headers() or [])) for m in got) == sorted(
            (k.encode(), v.encode(), tuple(h)) for _, k, v, h in expected
        )
        assert all(m.partition() == default_partition(m.key(), 2) for m in got)


def test_batch_write_to_a_topic_named_by_option(spark, broker):
    create_topic(broker.bootstrap, "sink-option", partitions=1)
    frame = spark.createDataFrame([(None, f"only-value-{i}") for i in range(25)], "key string, value string")
    frame.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "sink-option").save()
    got = consume(broker.bootstrap, "sink-option", 25, partitions=1)
    assert sorted(m.value() for m in got) == sorted(f"only-value-{i}".encode() for i in range(25))
    assert all(m.key() is None for m in got)
