"""Kafka's own Java client (kafka-clients 4.3.0) against a live broker, through compat_tests/java/KafkaCompat.java.

Each test's docstring is its line in the table of compat_tests/README.md (`python -m compat_tests.java_table`).
"""

import struct
import time
from dataclasses import dataclass

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from compat_tests import java_table
from compat_tests.java_harness import java_harness  # noqa: F401  (the session fixture)
from compat_tests.test_errors import call
from kbroker.testing import running_broker
from kbroker.wire.murmur2 import default_partition
from kbroker.wire.schema import API_BY_NAME

PARTITIONS = 3
COUNT = 10_000
CODECS = ("gzip", "snappy", "lz4", "zstd")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
DYNAMIC = "DYNAMIC_TOPIC_CONFIG"
DEFAULT = "DEFAULT_CONFIG"

# Explicit timestamps lie in the past, so no limit on future timestamps applies to them.
BASE_MS = 1_700_000_000_000
TIMED_PER_PARTITION = 30
# Before everything, exact, between two records, at and just after a repeated timestamp,
# reaching the out-of-order maximum, past the end of partition 1, past everything.
TIMED_TARGETS = (BASE_MS - 1, BASE_MS + 5_000, BASE_MS + 5_001, BASE_MS + 10_500, BASE_MS + 10_501,
                 BASE_MS + 25_000, BASE_MS + 50_000, BASE_MS + 200_000)
OFFSET_SPECS = ("earliest", "latest", "max", *map(str, TIMED_TARGETS))


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        yield running


def create_topic(bootstrap, name, partitions=PARTITIONS, config=None):
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([admin.NewTopic(name, partitions, config=config or {})])[name].result(timeout=10)


def records(count, prefix):
    """(key, value, headers): null and empty keys, tombstones, empty values, several and null-valued headers."""
    produced = []
    for i in range(count):
        key = None if i % 101 == 0 else b"" if i % 211 == 5 else f"{prefix}-key-{i % 400}".encode()
        value = None if i % 89 == 1 else b"" if i % 97 == 2 else f"{prefix}-value-{i}-".encode() + bytes([i % 256]) * (i % 50)
        headers = []
        if i % 2 == 0:
            headers.append(("seq", str(i).encode()))
        if i % 5 == 0:
            headers.append(("bin", bytes(range(i % 7, 256, 37))))
            headers.append(("seq", None))  # repeated names and null values keep their order
        produced.append((key, value, headers))
    return produced


def as_stdin(produced):
    """The produce command's input: (key, value, headers) and optionally (partition, timestamp) per record."""
    def hex_or_dash(data):
        return "-" if data is None else data.hex()

    def dash_or(number):
        return "-" if number is None else str(number)

    lines = []
    for key, value, headers, *placement in produced:
        partition, timestamp = placement or (None, None)
        encoded_headers = ",".join(f"{name.encode().hex()}:{hex_or_dash(v)}" for name, v in headers)
        lines.append(f"{hex_or_dash(key)}\t{hex_or_dash(value)}\t{encoded_headers}\t{dash_or(partition)}\t{dash_or(timestamp)}\n")
    return "".join(lines)


def as_tuple(line):
    """A consumed record line as (key, value, headers), bytes exactly."""
    def unhex(text):
        return None if text is None else bytes.fromhex(text)

    return unhex(line["key"]), unhex(line["value"]), [(name, unhex(value)) for name, value in line["headers"]]


def produce_with_java(harness, bootstrap, topic, produced, codec, *producer_settings):
    """Acks as {index: (partition, offset)}, and the run (its ack lines also carry the timestamps)."""
    run = harness.run("produce", bootstrap, topic, codec, *producer_settings, stdin=as_stdin(produced))
    summary = run.one("produced")
    assert run.returncode == 0 and summary["errors"] == 0, (run.of_type("send_error")[:5], run.stderr[-2000:])
    assert summary["count"] == len(produced)
    config = run.one("producer_config")
    assert config == {"type": "producer_config", "enable.idempotence": True, "acks": "-1"}  # 4.x defaults, untouched
    acks = {line["index"]: (line["partition"], line["offset"]) for line in run.of_type("ack")}
    assert sorted(acks) == list(range(len(produced)))
    return acks, run


def check_acks(acks, produced, partitions=PARTITIONS):
    """Keyed records on their murmur2 partition; offsets per partition dense and in send order."""
    by_partition = {p: [] for p in range(partitions)}
    for index in range(len(produced)):
        partition, offset = acks[index]
        key = produced[index][0]
        if key is not None:
            assert partition == default_partition(key, partitions), (index, key)
        by_partition[partition].append(offset)
    for partition, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {partition} offsets out of send order"


def consume_run(harness, bootstrap, topic, count, seeks=None, partitions=None, **settings):
    """The consume command; seeks {partition: offset}, partitions to assign, settings isolation= and reset=."""
    options = []
    if partitions is not None:
        options.append("partitions=" + ",".join(map(str, partitions)))
    if seeks is not None:
        options.append("seeks=" + ",".join(f"{p}:{o}" for p, o in seeks.items()))
    options += [f"{name}={value}" for name, value in settings.items()]
    run = harness.run("consume", bootstrap, topic, str(count), *options)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.one("consumed")["count"] == len(run.of_type("record"))
    return run


def consume_with_java(harness, bootstrap, topic, count, **options):
    """Exactly count record lines, with no poll error."""
    run = consume_run(harness, bootstrap, topic, count, **options)
    lines = run.of_type("record")
    assert run.of_type("poll_error") == [] and len(lines) == count, f"consumed {len(lines)} of {count}: {run.of_type('poll_error')}"
    return lines


def check_consumed(lines, produced, acks):
    """Every record once, at the offset it was acknowledged with, bytes exact, in per-partition order."""
    expected = {acks[index]: produced[index] for index in range(len(produced))}
    seen = {}
    for line in lines:
        position = (line["partition"], line["offset"])
        assert position not in seen, f"{position} consumed twice"
        seen[position] = as_tuple(line)
    assert seen.keys() == expected.keys()
    for position, record in expected.items():
        assert seen[position] == (record[0], record[1], record[2]), position
    for partition in range(PARTITIONS):
        offsets = [line["offset"] for line in lines if line["partition"] == partition]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))) if offsets else True, f"partition {partition} out of order"


def positions(lines):
    return sorted((line["partition"], line["offset"]) for line in lines)


def batch_count(broker, topic, partition):
    """Record batches in a quiet partition's log, from each v2 batch header's length field."""
    data = broker.broker.partition(topic, partition).log.read_bytes(0, 1 << 20)
    count = position = 0
    while position < len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        position += 12 + length
        count += 1
    return count


# ---- admin -------------------------------------------------------------------------------


@pytest.mark.slow
def test_describe_cluster_and_list_topics(java_harness, broker):
    """describeCluster names this broker as the only node and the controller; listTopics hides __cluster_metadata."""
    run = java_harness.run("metadata", broker.bootstrap)
    assert run.of_type("error") == []
    cluster = run.one("cluster")
    assert cluster["cluster_id"] == broker.broker.cluster_id
    assert cluster["controller"] == 1
    assert cluster["nodes"] == [{"id": 1, "host": broker.host, "port": broker.port}]
    assert "__cluster_metadata" not in run.one("topics")["names"]


@pytest.fixture(scope="module")
def admin_run(java_harness, broker):
    """One run of the admin sequence on topic java-admin (3 partitions); the tests below read parts of it."""
    return java_harness.run("admin-create-describe-delete", broker.bootstrap, "java-admin", "3")


def test_admin_create_describe_alter_delete(admin_run, broker):
    """createTopics with configs (twice: TopicExists), validateOnly (creates nothing, refuses a bad config), describe, describeConfigs, createPartitions, deleteTopics by id."""
    run = admin_run
    errors = {line["step"]: line["error"] for line in run.of_type("error") if line["step"] != "describeTopicsById"}
    assert errors == {
        "createTopicsAgain": "TopicExistsException",
        "createTopicsValidateOnlyBadConfig": "InvalidConfigurationException",
        "describeDeletedTopic": "UnknownTopicOrPartitionException",
        "describeDeletedTopicById": "UnknownTopicIdException",
    }
    created = run.one("created")
    assert (created["partitions"], created["replication_factor"]) == (3, 1)
    validated = run.one("validated")
    assert (validated["topic"], validated["partitions"], validated["replication_factor"]) == ("java-admin-dry-run", 4, 1)
    described = run.one("described")
    assert described["topic_id"] == created["topic_id"] and not described["internal"]
    assert described["partitions"] == [{"partition": p, "leader": 1, "replicas": [1], "isr": [1]} for p in range(3)]
    names = run.one("topics")["names"]
    assert "java-admin" in names and "java-admin-dry-run" not in names and "java-admin-bad" not in names
    configs = run.one("configs")
    assert configs["retention.ms"] == "3600000" and configs["source"] == DYNAMIC
    grown = run.one("described_after_create_partitions")
    assert [p["partition"] for p in grown["partitions"]] == [0, 1, 2, 3] and grown["topic_id"] == created["topic_id"]
    assert run.one("deleted")["topic_id"] == created["topic_id"]
    assert "java-admin" not in broker.broker.image.topics and "java-admin-dry-run" not in broker.broker.image.topics


def test_describe_topics_by_id(admin_run):
    """describeTopics(TopicCollection.ofTopicIds) finds the topic createTopics returned, as describing it by name does."""
    assert [line for line in admin_run.of_type("error") if line["step"] == "describeTopicsById"] == []
    by_id = admin_run.one("described_by_id")
    assert {**by_id, "type": "described"} == admin_run.one("described")


def test_create_topics_answers_with_configs(admin_run):
    """createTopics, real and validateOnly, answers with the new topic's configs: the requested ones as DYNAMIC_TOPIC_CONFIG."""
    assert admin_run.one("created")["configs"] == {
        "max.message.bytes": {"value": "200000", "source": DYNAMIC},
        "retention.ms": {"value": "3600000", "source": DYNAMIC},
    }
    assert admin_run.one("validated")["configs"] == {"cleanup.policy": {"value": "compact", "source": DYNAMIC}}


def test_incremental_alter_configs_on_cleanup_policy(java_harness, broker):
    """incrementalAlterConfigs SET, APPEND, SUBTRACT and DELETE on cleanup.policy, each followed by describeConfigs' value and source."""
    topic = "java-configs"
    create_topic(broker.bootstrap, topic, 1)
    steps = [  # operation, then the value and source describeConfigs shows
        ("SET:cleanup.policy=compact", "compact", DYNAMIC),
        ("APPEND:cleanup.policy=delete", "compact,delete", DYNAMIC),
        ("APPEND:cleanup.policy=compact", "compact,delete", DYNAMIC),  # already there: unchanged
        ("SUBTRACT:cleanup.policy=compact", "delete", DYNAMIC),
        ("DELETE:cleanup.policy", "delete", DEFAULT),
        ("APPEND:cleanup.policy=compact", "delete,compact", DYNAMIC),  # appended to the default
    ]
    run = java_harness.run("alter-configs", broker.bootstrap, topic, *(operation for operation, _, _ in steps))
    assert run.returncode == 0 and run.of_type("error") == [], run.of_type("error")
    seen = [(line["after"], line["entry"]["value"], line["entry"]["source"]) for line in run.of_type("config")]
    assert seen == steps


def test_broker_configs_changed_at_runtime(java_harness, tmp_path):
    """incrementalAlterConfigs on the cluster-wide default and on the broker, read-only ones refused; describeConfigs' sources and synonyms."""
    with running_broker(str(tmp_path), settings={"log.retention.hours": 48}) as running:
        run = java_harness.run("broker-configs", running.bootstrap, "1", "default/SET:log.retention.ms=120000",
                               "1/SET:log.retention.ms=60000", "1/SET:num.partitions=3",
                               "default/SET:listener.name.ssl.ssl.keystore.location=/x.pem")
    assert [(line["step"], line["error"], line["message"]) for line in run.of_type("error")] == [
        ("1/SET:num.partitions=3", "InvalidRequestException",
         "Cannot update these configs dynamically: Set(num.partitions)"),
        ("default/SET:listener.name.ssl.ssl.keystore.location=/x.pem", "InvalidRequestException",
         "Cannot update these configs at default cluster level, broker id must be specified: "
         "Set(listener.name.ssl.ssl.keystore.location)")]
    described = {line["resource"]: line["entries"] for line in run.of_type("broker_configs")}
    assert described["1"]["log.retention.ms"] == {
        "value": "60000", "source": "DYNAMIC_BROKER_CONFIG", "read_only": False, "synonyms": [
            ["log.retention.ms", "60000", "DYNAMIC_BROKER_CONFIG"],
            ["log.retention.ms", "120000", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
            ["log.retention.hours", "48", "STATIC_BROKER_CONFIG"], ["log.retention.hours", "168", "DEFAULT_CONFIG"]]}
    assert described["1"]["num.partitions"] == {"value": "1", "source": "DEFAULT_CONFIG", "read_only": True,
                                                "synonyms": [["num.partitions", "1", "DEFAULT_CONFIG"]]}
    assert described[""] == {"log.retention.ms": {"value": "120000", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                                                  "read_only": False, "synonyms": [
                                                      ["log.retention.ms", "120000", "DYNAMIC_DEFAULT_BROKER_CONFIG"]]}}


# ---- timestamps and offsets --------------------------------------------------------------


@dataclass
class Timed:
    topic: str
    stamps: dict  # partition -> the timestamp of each offset
    rows: list  # (key, value, headers, partition, timestamp) in send order
    run: object  # the produce run


def timed_stamps():
    """One record a second per partition (partition 1 half a second later); partition 0 has its maximum
    out of order at offset 20, partition 1 repeats offset 10's timestamp at offset 11."""
    stamps = {p: [BASE_MS + 1_000 * i + 500 * p for i in range(TIMED_PER_PARTITION)] for p in (0, 1)}
    stamps[0][20] = BASE_MS + 100_000
    stamps[1][11] = stamps[1][10]
    return stamps


def first_at_or_after(stamps, target):
    """What Kafka answers for a timestamp: (offset, timestamp) of the first record at or after it, else None."""
    return next(((offset, stamp) for offset, stamp in enumerate(stamps) if stamp >= target), None)


@pytest.fixture(scope="module")
def timed(java_harness, broker):
    """Topic java-timestamps: two partitions written by the Java producer with explicit CreateTime timestamps,
    a few records per batch so that lookups cross batch boundaries."""
    topic = "java-timestamps"
    create_topic(broker.bootstrap, topic, 2)
    stamps = timed_stamps()
    rows = [(f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), [], p, stamps[p][i])
            for i in range(TIMED_PER_PARTITION) for p in stamps]
    acks, run = produce_with_java(java_harness, broker.bootstrap, topic, rows, "none", "batch.size=300")
    assert [acks[index] for index in range(len(rows))] == [(row[3], index // 2) for index, row in enumerate(rows)]
    assert all(batch_count(broker, topic, p) >= 3 for p in stamps)
    return Timed(topic, stamps, rows, run)


def check_timed_records(lines, timed, expected_positions):
    """Records at exactly these positions, bytes exact, each with its producer's CreateTime timestamp."""
    assert positions(lines) == sorted(expected_positions)
    for line in lines:
        partition, offset = line["partition"], line["offset"]
        assert as_tuple(line) == (f"k{partition}-{offset}".encode(), f"v{partition}-{offset}".encode(), [])
        assert (line["timestamp"], line["timestamp_type"]) == (timed.stamps[partition][offset], "CREATE_TIME")


def all_timed_positions(timed, starts=None):
    starts = starts or {}
    return [(p, o) for p in timed.stamps for o in range(starts.get(p, 0), TIMED_PER_PARTITION)]


def test_explicit_create_time_is_kept(java_harness, broker, timed):
    """Records sent with explicit timestamps: RecordMetadata and the consumer both carry them, as CREATE_TIME."""
    ack_stamps = {(line["partition"], line["offset"]): line["timestamp"] for line in timed.run.of_type("ack")}
    assert ack_stamps == {(p, o): stamp for p, stamps in timed.stamps.items() for o, stamp in enumerate(stamps)}
    lines = consume_with_java(java_harness, broker.bootstrap, timed.topic, 2 * TIMED_PER_PARTITION)
    check_timed_records(lines, timed, all_timed_positions(timed))


@pytest.fixture(scope="module")
def offset_lookups(java_harness, broker, timed):
    """{(client, spec, partition): line} from one offsets run over java-timestamps."""
    run = java_harness.run("offsets", broker.bootstrap, timed.topic, *OFFSET_SPECS)
    assert run.returncode == 0 and run.of_type("error") == [], (run.of_type("error"), run.stderr[-2000:])
    return {(line["client"], line["spec"], line["partition"]): line for line in run.of_type("offset")}


def test_admin_list_offsets(offset_lookups, timed):
    """Admin listOffsets: earliest, latest, maxTimestamp (an out-of-order maximum) and forTimestamp (exact, between, repeated; past the end: -1)."""
    expected = {}
    for partition, stamps in timed.stamps.items():
        expected["earliest", partition] = (0, -1)
        expected["latest", partition] = (TIMED_PER_PARTITION, -1)
        expected["max", partition] = (stamps.index(max(stamps)), max(stamps))
        for target in TIMED_TARGETS:
            expected[str(target), partition] = first_at_or_after(stamps, target) or (-1, -1)
    admin_lines = {(spec, p): line for (client, spec, p), line in offset_lookups.items() if client == "admin"}
    assert {key: (line["offset"], line["timestamp"]) for key, line in admin_lines.items()} == expected
    assert expected[str(BASE_MS + 50_000), 0] == (20, BASE_MS + 100_000) and expected[str(BASE_MS + 50_000), 1] == (-1, -1)
    # No leader change ever happened: epoch 0 wherever an offset was found, none where it was not.
    assert all(line["leader_epoch"] == (None if line["offset"] == -1 else 0) for line in admin_lines.values())


def test_consumer_offset_lookups(offset_lookups, timed):
    """Consumer beginningOffsets, endOffsets and offsetsForTimes (null past the end) agree with the log."""
    expected = {}
    for partition, stamps in timed.stamps.items():
        expected["earliest", partition] = (0, None)
        expected["latest", partition] = (TIMED_PER_PARTITION, None)
        for target in TIMED_TARGETS:
            expected[str(target), partition] = first_at_or_after(stamps, target) or (None, None)
    found = {(spec, p): (line["offset"], line["timestamp"]) for (client, spec, p), line in offset_lookups.items() if client == "consumer"}
    assert found == expected


@pytest.mark.parametrize("isolation", ISOLATION_LEVELS)
def test_isolation_levels_read_everything(java_harness, broker, timed, isolation):
    """Without transactions, read_committed and read_uncommitted consumers both read every record."""
    lines = consume_with_java(java_harness, broker.bootstrap, timed.topic, 2 * TIMED_PER_PARTITION, isolation=isolation)
    check_timed_records(lines, timed, all_timed_positions(timed))


def test_unpositioned_partition_follows_auto_offset_reset(java_harness, broker, timed):
    """assign + seek on one partition: with auto.offset.reset=none the other raises NoOffsetForPartitionException, with earliest it is read from its start."""
    run = consume_run(java_harness, broker.bootstrap, timed.topic, TIMED_PER_PARTITION, seeks={0: 25}, reset="none")
    assert run.of_type("record") == []
    error = run.one("poll_error")
    assert (error["error"], error["partitions"], error["offsets"]) == ("NoOffsetForPartitionException", [1], {})
    starts = {0: 25, 1: 0}
    lines = consume_with_java(java_harness, broker.bootstrap, timed.topic, 5 + TIMED_PER_PARTITION, seeks={0: 25}, reset="earliest")
    check_timed_records(lines, timed, all_timed_positions(timed, starts))


def test_log_append_time_topic(java_harness, broker):
    """A LogAppendTime topic: the broker's clock replaces the producer's timestamps, in RecordMetadata and for consumers (LOG_APPEND_TIME)."""
    topic = "java-log-append-time"
    create_topic(broker.bootstrap, topic, 2, {"message.timestamp.type": "LogAppendTime"})
    rows = [(f"k{i}".encode(), f"v{i}".encode(), [], i % 2, BASE_MS + i) for i in range(40)]
    before_ms = int(time.time() * 1000)
    acks, run = produce_with_java(java_harness, broker.bootstrap, topic, rows, "none")
    after_ms = int(time.time() * 1000) + 1
    ack_stamps = {(line["partition"], line["offset"]): line["timestamp"] for line in run.of_type("ack")}
    assert all(before_ms <= stamp <= after_ms for stamp in ack_stamps.values()), (before_ms, after_ms, ack_stamps)
    lines = consume_with_java(java_harness, broker.bootstrap, topic, len(rows))
    by_position = {acks[index]: row for index, row in enumerate(rows)}
    for line in lines:
        position = (line["partition"], line["offset"])
        assert as_tuple(line) == by_position[position][:3]
        assert (line["timestamp"], line["timestamp_type"]) == (ack_stamps[position], "LOG_APPEND_TIME")


def test_a_compacted_topic_refuses_a_batch_with_a_record_without_a_key(java_harness, broker):
    """A null key on a compacted topic: InvalidRecordException naming it, the rest of its batch failed with it (KIP-467)."""
    topic = "java-compacted"
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    rows = [(b"k1", b"a", [], 0, None), (None, b"b", [], 0, None), (b"k3", b"c", [], 0, None)]
    run = java_harness.run("produce", broker.bootstrap, topic, "lz4", "linger.ms=1000", stdin=as_stdin(rows))
    assert run.returncode == 0, run.stderr[-2000:]
    failed = {line["index"]: (line["error"], line["message"]) for line in run.of_type("send_error")}
    whole_batch = ("KafkaException",  # the client's words, typo included
                   "Failed to append record because it was part of a batch which had one more more invalid records")
    assert failed == {0: whole_batch, 2: whole_batch, 1: (
        "InvalidRecordException", f"Compacted topic cannot accept message without key in topic partition {topic}-0")}
    acks, _ = produce_with_java(java_harness, broker.bootstrap, topic, rows[:1], "lz4")  # the producer carries on
    assert acks == {0: (0, 0)}


@pytest.mark.slow
def test_delete_records_moves_log_start(java_harness, broker):
    """deleteRecords moves the log start (past the high watermark: OffsetOutOfRange), listOffsets earliest follows, a seek below it fails (reset=none) or resets (earliest)."""
    topic = "java-delete-records"
    create_topic(broker.bootstrap, topic, 3)
    rows = [(f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), [], p, None) for i in range(20) for p in range(3)]
    produce_with_java(java_harness, broker.bootstrap, topic, rows, "none")

    run = java_harness.run("delete-records", broker.bootstrap, topic, "0:7,1:20,2:21")
    assert {line["partition"]: line["low_watermark"] for line in run.of_type("deleted_records")} == {0: 7, 1: 20}
    assert [(line["step"], line["error"]) for line in run.of_type("error")] == [("deleteRecords 2", "OffsetOutOfRangeException")]
    assert {line["partition"]: line["offset"] for line in run.of_type("offset")} == {0: 7, 1: 20, 2: 0}

    run = consume_run(java_harness, broker.bootstrap, topic, 13, partitions=[0], seeks={0: 3}, reset="none")
    assert run.of_type("record") == []
    error = run.one("poll_error")
    assert (error["error"], error["partitions"], error["offsets"]) == ("OffsetOutOfRangeException", [0], {"0": 3})

    lines = consume_with_java(java_harness, broker.bootstrap, topic, 13, partitions=[0, 1], seeks={0: 3, 1: 0}, reset="earliest")
    assert positions(lines) == [(0, offset) for offset in range(7, 20)]
    assert all(as_tuple(line) == (f"k0-{line['offset']}".encode(), f"v0-{line['offset']}".encode(), []) for line in lines)


# ---- producer and consumer ---------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_producer_and_assigned_consumer(java_harness, broker, codec):
    """10,000 records (null/empty keys and values, headers), idempotent acks=all producer: murmur2 partitions, dense offsets, exact bytes back."""
    topic = f"java-{codec}"
    create_topic(broker.bootstrap, topic)
    produced = records(COUNT, codec)
    acks, _ = produce_with_java(java_harness, broker.bootstrap, topic, produced, codec)
    check_acks(acks, produced)
    check_consumed(consume_with_java(java_harness, broker.bootstrap, topic, COUNT), produced, acks)


def test_seek_to_offsets(java_harness, broker):
    """assign + seek to the middle, the last record and the start of three partitions reads exactly from there."""
    topic = "java-seek"
    create_topic(broker.bootstrap, topic)
    produced = [(f"k{i % 11}".encode(), f"v{i}".encode(), []) for i in range(600)]
    acks, _ = produce_with_java(java_harness, broker.bootstrap, topic, produced, "none")
    ends = {p: sum(1 for a in acks.values() if a[0] == p) for p in range(PARTITIONS)}
    seeks = {0: ends[0] // 2, 1: ends[1] - 1, 2: 0}
    wanted = sum(ends[p] - seeks[p] for p in range(PARTITIONS))
    lines = consume_with_java(java_harness, broker.bootstrap, topic, wanted, seeks=seeks)
    for partition in range(PARTITIONS):
        offsets = [line["offset"] for line in lines if line["partition"] == partition]
        assert offsets == list(range(seeks[partition], ends[partition]))
    by_position = {position: produced[index] for index, position in acks.items()}
    assert all(as_tuple(line) == by_position[(line["partition"], line["offset"])] for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_subscribed_consumer_in_a_group_commits_what_it_read(java_harness, broker, protocol):
    """subscribe() in a group: every record once, then the committed offsets are the log ends, as another client sees them."""
    topic, group = f"java-group-{protocol}", f"java-group-{protocol}"
    create_topic(broker.bootstrap, topic)
    produced = [(f"k{i}".encode(), f"v{i}".encode(), []) for i in range(900)]
    acks, _ = produce_with_java(java_harness, broker.bootstrap, topic, produced, "none")
    run = consume_run(java_harness, broker.bootstrap, topic, len(produced), group=group, protocol=protocol)
    check_consumed(run.of_type("record"), produced, acks)
    ends = {p: sum(1 for a in acks.values() if a[0] == p) for p in range(PARTITIONS)}
    committed = run.one("committed")
    assert committed["assignment"] == list(range(PARTITIONS))
    assert {int(p): o for p, o in committed["offsets"].items()} == ends
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(group)]).values()
    assert {tp.partition: tp.offset for tp in future.result(15).topic_partitions} == ends


@pytest.mark.parametrize("codec", CODECS)
def test_java_reads_what_confluent_kafka_wrote(java_harness, broker, codec):
    """The Java consumer reads librdkafka's idempotent, compressed batches byte for byte."""
    topic = f"from-librdkafka-{codec}"
    create_topic(broker.bootstrap, topic)
    produced = records(2_000, "c")
    acks = {}
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "compression.type": codec, "linger.ms": 5,
         "partitioner": "murmur2_random"}
    )

    def delivered(index):
        def report(error, message):
            assert error is None, error
            acks[index] = (message.partition(), message.offset())
        return report

    for index, (key, value, headers) in enumerate(produced):
        producer.produce(topic, key=key, value=value, headers=headers, on_delivery=delivered(index))
        producer.poll(0)
    assert producer.flush(30) == 0
    lines = consume_with_java(java_harness, broker.bootstrap, topic, len(produced))
    check_consumed(lines, produced, acks)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_reads_what_java_wrote(java_harness, broker, codec):
    """librdkafka reads the Java producer's compressed batches byte for byte."""
    topic = f"from-java-{codec}"
    create_topic(broker.bootstrap, topic)
    produced = records(2_000, "j")
    acks, _ = produce_with_java(java_harness, broker.bootstrap, topic, produced, codec)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = {}
    deadline = time.monotonic() + 60
    while len(seen) < len(produced) and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        seen[(message.partition(), message.offset())] = (message.key(), message.value(), message.headers() or [])
    consumer.close()
    assert seen == {acks[index]: record for index, record in enumerate(produced)}


# ---- documentation -----------------------------------------------------------------------


def test_readme_table_is_current():
    """compat_tests/README.md lists exactly the cases of this module (no Java needed)."""
    readme = java_table.README.read_text(encoding="utf-8")
    assert java_table.with_table(readme, java_table.render_table()) == readme, (
        "compat_tests/README.md is stale: regenerate it with `python -m compat_tests.java_table`"
    )


@pytest.mark.slow
def test_java_transactions_are_visible_to_read_committed_only_when_committed(java_harness, broker):
    """Transactions (version 2) with sendOffsetsToTransaction: read_committed sees committed ones only.

    Transaction version 2: no AddPartitionsToTxn, an epoch per transaction. Java and librdkafka
    read_committed readers see the committed transactions only, read_uncommitted sees all, and the
    group's offset is the last committed one."""
    topic, group = "java-transactions", "java-transactions-offsets"
    create_topic(broker.bootstrap, topic)
    run = java_harness.run("transact", broker.bootstrap, topic, "java-tx", "commit:300,abort:200,commit:100",
                           f"offsets-group={group}")
    assert run.returncode == 0, (run.of_type("error"), run.stderr[-2000:])
    assert [line["outcome"] for line in run.of_type("transaction")] == ["commit", "abort", "commit"]
    committed = {f"s0-{i}" for i in range(300)} | {f"s2-{i}" for i in range(100)}
    everything = committed | {f"s1-{i}" for i in range(200)}

    def values(lines):
        return [bytes.fromhex(line["value"]).decode() for line in lines]

    read = values(consume_run(java_harness, broker.bootstrap, topic, len(committed), isolation="read_committed",
                              reset="earliest").of_type("record"))
    assert sorted(read) == sorted(committed)
    read = values(consume_run(java_harness, broker.bootstrap, topic, len(everything), isolation="read_uncommitted",
                              reset="earliest").of_type("record"))
    assert sorted(read) == sorted(everything)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "librdkafka-reader",
                                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < len(committed) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value().decode())
    finally:
        consumer.close()
    assert sorted(seen) == sorted(committed)
    admin_client = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin_client.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(group)]).values()
    assert [(tp.partition, tp.offset) for tp in future.result(15).topic_partitions] == [(0, 3)]
    # Transaction version 2: the coordinator bumped the producer's epoch at each of the three EndTxn.
    describe = API_BY_NAME["DescribeTransactions"].request_class(transactional_ids=["java-tx"])
    [state] = call(broker.port, "DescribeTransactions", 0, describe).transaction_states
    assert (state.transaction_state, state.producer_epoch) == ("CompleteCommit", 3)
