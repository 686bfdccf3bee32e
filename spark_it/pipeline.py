"""An example pipeline on kbroker: click events -> per-page counts in one-minute windows -> a topic.

    kbroker &                                              # localhost:9092
    python -m spark_it.pipeline feed --count 6000          # click events into topic "clicks"
    python -m spark_it.pipeline run                        # Spark: "clicks" -> "page-counts"
    python -m spark_it.pipeline show                       # the counts, as the sink wrote them

``run`` is an ordinary Structured Streaming query: it reads ``clicks`` with
Spark's Kafka source, parses the JSON, counts clicks per page in tumbling
one-minute event-time windows with a two-minute watermark, and writes each
updated count to ``page-counts`` with the Kafka sink, keyed by page. Its
checkpoint makes a rerun continue where the last one stopped. By default it
processes what is there and stops (``availableNow``); ``--follow`` keeps it
running. Spark needs the Kafka connector jars: see the README ("Spark").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from spark_it.connector import Connector, ConnectorMissing, find_connector

PAGES = ("home", "search", "product", "cart", "checkout")
START_MS = 1_700_000_000_000  # event times of the generated clicks start here, one every 100 ms


def click(i: int) -> dict:
    """The i-th generated click: deterministic, so its counts can be checked."""
    return {"user": f"user-{i % 37}", "page": PAGES[(i * 7) % len(PAGES)], "ts": START_MS + 100 * i}


def expected_counts(count: int) -> dict[tuple[str, int], int]:
    """(page, window start ms) -> clicks, for the first ``count`` generated clicks."""
    counts: dict[tuple[str, int], int] = {}
    for i in range(count):
        event = click(i)
        window = event["ts"] - event["ts"] % 60_000
        counts[(event["page"], window)] = counts.get((event["page"], window), 0) + 1
    return counts


def feed(bootstrap: str, topic: str, count: int) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    for i in range(count):
        event = click(i)
        producer.produce(topic, json.dumps(event).encode(), event["user"].encode(), timestamp=event["ts"])
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(60):
        sys.exit("some clicks were not acknowledged")
    print(f"fed {count} clicks into {topic}")


def build_query(spark, bootstrap: str, source: str, sink: str, checkpoint: str, follow: bool):
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("user", StringType()), StructField("page", StringType()), StructField("ts", LongType())])
    clicks = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("click"))
        .select("click.page", (F.col("click.ts") / 1000).cast("timestamp").alias("event_time"))
    )
    counts = (
        clicks.withWatermark("event_time", "2 minutes")
        .groupBy(F.window("event_time", "1 minute"), "page")
        .count()
        .select(
            F.col("page").alias("key"),
            F.to_json(F.struct("page", (F.unix_millis(F.col("window.start"))).alias("window_start_ms"), "count")).alias("value"),
        )
    )
    writer = (
        counts.writeStream.format("kafka")
        .outputMode("update")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
    )
    writer = writer.trigger(processingTime="2 seconds") if follow else writer.trigger(availableNow=True)
    return writer.start()


def spark_session(connector: Connector, extra: dict[str, str] | None = None):
    """A local session with the connector's jars on its classpath."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("kbroker-click-counts")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for name, value in {**connector.settings, **(extra or {})}.items():
        builder = builder.config(name, value)
    return builder.getOrCreate()


def latest_counts(bootstrap: str, topic: str, timeout_s: float = 30) -> dict[tuple[str, int], int]:
    """The last count written for each (page, window): update mode may write a window more than once."""
    import time

    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "pipeline-show", "enable.auto.commit": False})
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    partitions = [confluent_kafka.TopicPartition(topic, p) for p in metadata.partitions]
    ends = {p.partition: consumer.get_watermark_offsets(p, timeout=10)[1] for p in partitions}
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in ends])
    counts: dict[tuple[str, int], int] = {}
    positions = {p: 0 for p in ends}
    deadline = time.monotonic() + timeout_s
    while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        positions[message.partition()] = message.offset() + 1
        row = json.loads(message.value())
        counts[(row["page"], row["window_start_ms"])] = row["count"]
    consumer.close()
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m spark_it.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--source", default="clicks")
    parser.add_argument("--sink", default="page-counts")
    commands = parser.add_subparsers(dest="command", required=True)
    feed_command = commands.add_parser("feed", help="produce generated click events")
    feed_command.add_argument("--count", type=int, default=6000)
    run_command = commands.add_parser("run", help="run the Spark query")
    run_command.add_argument("--checkpoint", default=os.path.join(tempfile.gettempdir(), "kbroker-click-counts"))
    run_command.add_argument("--follow", action="store_true", help="keep running (processing-time trigger) until Ctrl-C")
    commands.add_parser("show", help="print the latest count per page and window")
    args = parser.parse_args(argv)

    if args.command == "feed":
        feed(args.bootstrap, args.source, args.count)
    elif args.command == "run":
        try:
            connector = find_connector()
        except ConnectorMissing as missing:
            sys.exit(f"{parser.prog} run: {missing}")
        spark = spark_session(connector)
        spark.sparkContext.setLogLevel("WARN")
        query = build_query(spark, args.bootstrap, args.source, args.sink, args.checkpoint, args.follow)
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
        spark.stop()
        print(f"wrote counts to {args.sink} (checkpoint {args.checkpoint})")
    else:
        for (page, window), count in sorted(latest_counts(args.bootstrap, args.sink).items(), key=lambda item: (item[0][1], item[0][0])):
            print(f"{window}  {page:<9} {count}")


if __name__ == "__main__":
    main()
