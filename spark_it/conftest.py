"""PySpark against a live kbroker process: the session, the broker and small client helpers.

Every test here skips, with one reason, when Spark's Kafka connector cannot
be had (see spark_it/connector.py) or Java is missing; in CI (``CI`` or
``KBTEST_REQUIRE_KAFKA=1`` set, as .ci/run does) each fails with that reason instead.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from testkit.broker_process import BrokerProcess
from spark_it.connector import ConnectorMissing, find_connector

POLL_TIMEOUT_S = 60


def _required() -> bool:
    ci = os.environ.get("CI", "").strip().lower()
    return ci not in ("", "0", "false", "no") or os.environ.get("KBTEST_REQUIRE_KAFKA") == "1"


@functools.cache
def _connector_or_reason():
    if shutil.which("java") is None:
        return None, "java is not on PATH (PySpark needs Java 17 or newer)"
    try:
        return find_connector(), None
    except ConnectorMissing as missing:
        return None, str(missing)


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    ours = [item for item in items if str(item.fspath).startswith(here)]
    if not ours:
        return
    connector, reason = _connector_or_reason()
    if connector is None and not _required():  # required: the spark fixture fails each test instead
        skip = pytest.mark.skip(reason=reason)
        for item in ours:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def spark():
    connector, reason = _connector_or_reason()
    if connector is None:
        if _required():
            pytest.fail(f"Spark's connector is required here (CI or KBTEST_REQUIRE_KAFKA=1 is set): {reason}",
                        pytrace=False)
        pytest.skip(reason)
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("kbroker-spark-it")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
    )
    for name, value in connector.settings.items():
        builder = builder.config(name, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """One kbroker process for the suite; each test uses its own topics."""
    process = BrokerProcess(tmp_path_factory.mktemp("kbroker"))
    process.start()
    yield process
    process.stop()


def create_topic(bootstrap: str, name: str, partitions: int = 2, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, config=configs)])[name].result(timeout=15)


def produce(bootstrap: str, topic: str, records, **settings) -> list[tuple[int, int]]:
    """Produce ``(key, value, headers, partition, timestamp)`` tuples (trailing ones optional); their (partition, offset)s."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **settings})
    positions: list = [None] * len(records)

    def report(index):
        def delivered(error, message):
            assert error is None, error
            positions[index] = (message.partition(), message.offset())
        return delivered

    for index, record in enumerate(records):
        key, value, headers, partition, timestamp = (tuple(record) + (None,) * 5)[:5]
        extra = {"partition": partition} if partition is not None else {}
        if timestamp is not None:
            extra["timestamp"] = timestamp
        producer.produce(topic, value, key, headers=headers or [], on_delivery=report(index), **extra)
        producer.poll(0)
    assert producer.flush(30) == 0
    return positions


def consume(bootstrap: str, topic: str, count: int, partitions: int = 2) -> list:
    """Exactly the first ``count`` records of ``topic`` (fails on fewer within the time limit)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
    received = []
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while len(received) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            received.append(message)
    consumer.close()
    assert len(received) == count, f"read {len(received)} of {count} from {topic}"
    return received


def wait_until(condition, timeout_s: float = POLL_TIMEOUT_S, interval_s: float = 0.25):
    """Poll ``condition`` until it returns something truthy, which is returned; fails at the time limit."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s} s")
