"""Structured Streaming on kbroker: triggers, rate limits, checkpoints, data loss, new partitions, the Kafka sink."""

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from spark_it.conftest import consume, create_topic, produce, wait_until

QUERY_TIMEOUT_S = 120


def stream(spark, broker, **options):
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def run_available_now(frame, checkpoint, sink, **options):
    """Run to the end of what is available now; the finished query."""
    writer = frame.writeStream.format(sink).trigger(availableNow=True).option("checkpointLocation", str(checkpoint))
    for name, value in options.items():
        writer = writer.option(name, value)
    query = writer.start()
    try:
        finished = query.awaitTermination(QUERY_TIMEOUT_S)
    except Exception as error:  # pyspark's StreamingQueryException: the query failed
        raise AssertionError(f"query failed: {error}") from None
    assert finished, "the availableNow query did not finish"
    return query


def values(spark, path):
    return sorted(row.value.decode() for row in spark.read.parquet(str(path)).collect())


def test_subscribe_available_now_reads_everything_once(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "stream-all", partitions=3)
    produce(broker.bootstrap, "stream-all", [(f"k{i}".encode(), f"v{i}".encode()) for i in range(300)])
    frame = stream(spark, broker, subscribe="stream-all", startingOffsets="earliest").select("value")
    run_available_now(frame, tmp_path / "checkpoint", sink="parquet", path=str(tmp_path / "out"))
    assert values(spark, tmp_path / "out") == sorted(f"v{i}" for i in range(300))


def test_starting_offsets_latest_skips_what_came_before(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "stream-latest", partitions=1)
    produce(broker.bootstrap, "stream-latest", [(None, b"old")])
    frame = stream(spark, broker, subscribe="stream-latest", startingOffsets="latest").select("value")
    run_available_now(frame, tmp_path / "checkpoint", sink="parquet", path=str(tmp_path / "out"))
    produce(broker.bootstrap, "stream-latest", [(None, b"new-1"), (None, b"new-2")])
    run_available_now(frame, tmp_path / "checkpoint", sink="parquet", path=str(tmp_path / "out"))
    assert values(spark, tmp_path / "out") == ["new-1", "new-2"]


def test_max_offsets_per_trigger_splits_the_work(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "stream-limited", partitions=2)
    produce(broker.bootstrap, "stream-limited", [(None, f"v{i}".encode()) for i in range(250)])
    frame = stream(spark, broker, subscribe="stream-limited", startingOffsets="earliest", maxOffsetsPerTrigger="50").select("value")
    query = run_available_now(frame, tmp_path / "checkpoint", sink="parquet", path=str(tmp_path / "out"))
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 250 and max(sizes) <= 50 and len(sizes) >= 5
    assert values(spark, tmp_path / "out") == sorted(f"v{i}" for i in range(250))


def test_restart_from_a_checkpoint_writes_each_record_exactly_once(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "stream-restart", partitions=2)
    frame = stream(spark, broker, subscribe="stream-restart", startingOffsets="earliest").select("value")
    expected = []
    for round_ in range(3):
        batch = [f"r{round_}-{i}" for i in range(120)]
        produce(broker.bootstrap, "stream-restart", [(None, v.encode()) for v in batch])
        expected += batch
        run_available_now(frame, tmp_path / "checkpoint", sink="parquet", path=str(tmp_path / "out"))
        assert values(spark, tmp_path / "out") == sorted(expected)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_fail_on_data_loss_after_delete_records(spark, broker, tmp_path, fail_on_data_loss):
    topic = f"stream-loss-{str(fail_on_data_loss).lower()}"
    create_topic(broker.bootstrap, topic, partitions=1)
    produce(broker.bootstrap, topic, [(None, f"v{i}".encode()) for i in range(100)])
    options = {"subscribe": topic, "startingOffsets": "earliest", "failOnDataLoss": str(fail_on_data_loss).lower()}
    frame = stream(spark, broker, **options).select("value")
    sink = {"sink": "parquet", "path": str(tmp_path / "out")}
    run_available_now(frame, tmp_path / "checkpoint", **sink)
    produce(broker.bootstrap, topic, [(None, f"v{i}".encode()) for i in range(100, 200)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [deleted] = admin.delete_records([TopicPartition(topic, 0, 150)]).values()
    assert deleted.result(timeout=15).low_watermark == 150
    if fail_on_data_loss:
        with pytest.raises(AssertionError, match="(?i)data loss|lost|OffsetOutOfRange|out of range"):
            run_available_now(frame, tmp_path / "checkpoint", **sink)
    else:
        run_available_now(frame, tmp_path / "checkpoint", **sink)
        assert values(spark, tmp_path / "out") == sorted([f"v{i}" for i in range(100)] + [f"v{i}" for i in range(150, 200)])


def test_processing_time_trigger_picks_up_new_records_and_new_partitions(spark, broker):
    create_topic(broker.bootstrap, "stream-growing", partitions=1)
    produce(broker.bootstrap, "stream-growing", [(None, f"first-{i}".encode()) for i in range(10)])
    frame = stream(spark, broker, subscribe="stream-growing", startingOffsets="earliest").select("partition", "value")
    query = frame.writeStream.format("memory").queryName("growing").trigger(processingTime="500 milliseconds").start()
    try:
        wait_until(lambda: spark.table("growing").count() == 10)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions("stream-growing", 3)])["stream-growing"].result(timeout=15)
        later = [(None, f"later-{p}-{i}".encode(), [], p) for p in range(3) for i in range(5)]
        produce(broker.bootstrap, "stream-growing", later)
        wait_until(lambda: spark.table("growing").count() == 25)
        rows = spark.table("growing").collect()
        assert sorted((r.partition, r.value.decode()) for r in rows) == sorted(
            [(0, f"first-{i}") for i in range(10)] + [(p, f"later-{p}-{i}") for p in range(3) for i in range(5)]
        )
        assert query.exception() is None
    finally:
        query.stop()


def test_streaming_kafka_sink_with_headers(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "pipe-in", partitions=2)
    create_topic(broker.bootstrap, "pipe-out", partitions=2)
    produce(broker.bootstrap, "pipe-in", [(f"k{i}".encode(), f"v{i}".encode(), [("src", b"in")]) for i in range(150)])
    frame = stream(spark, broker, subscribe="pipe-in", startingOffsets="earliest", includeHeaders="true")
    out = frame.selectExpr("key", "upper(cast(value as string)) as value", "headers")
    run_available_now(out, tmp_path / "checkpoint", sink="kafka", **{"kafka.bootstrap.servers": broker.bootstrap, "topic": "pipe-out"})
    got = consume(broker.bootstrap, "pipe-out", 150)
    assert sorted((m.key(), m.value(), tuple(m.headers())) for m in got) == sorted(
        (f"k{i}".encode(), f"V{i}".encode(), (("src", b"in"),)) for i in range(150)
    )


def test_streaming_subscribe_pattern_and_assign(spark, broker, tmp_path):
    for name in ("events-eu", "events-us", "other"):
        create_topic(broker.bootstrap, name, partitions=2)
        produce(broker.bootstrap, name, [(None, f"{name}-{p}-{i}".encode(), [], p) for p in range(2) for i in range(20)])
    by_pattern = stream(spark, broker, subscribePattern="events-.*", startingOffsets="earliest").select("value")
    run_available_now(by_pattern, tmp_path / "pattern-checkpoint", sink="parquet", path=str(tmp_path / "pattern"))
    assert values(spark, tmp_path / "pattern") == sorted(f"{t}-{p}-{i}" for t in ("events-eu", "events-us") for p in range(2) for i in range(20))
    assigned = stream(spark, broker, assign='{"events-us": [1], "other": [0]}', startingOffsets="earliest").select("value")
    run_available_now(assigned, tmp_path / "assign-checkpoint", sink="parquet", path=str(tmp_path / "assign"))
    assert values(spark, tmp_path / "assign") == sorted([f"events-us-1-{i}" for i in range(20)] + [f"other-0-{i}" for i in range(20)])
