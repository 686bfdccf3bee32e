"""Scripted sessions for the differential suite (compat_tests/test_differential.py): topics and configs.

DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, CreatePartitions, DeleteRecords and DescribeCluster,
each at every version kbroker serves, with their refusals. Topic names are per session and per version, so
that no version's answer depends on what an earlier one did; a topic is made and waited for with unrecorded
requests (Kafka creates topics and partitions asynchronously). A change to a broker's dynamic configs is
undone at the end of its session, since the brokers live on for the sessions after it.

DescribeLogDirs is not here yet: every answer names the log directory's path and, from v4, the disk's
total and usable bytes, which differ from run to run on both brokers; comparing them needs a rule for
those fields in testkit/differential.py first.
"""

from __future__ import annotations

import time

from compat_tests.differential_sessions import READY_TIMEOUT_S, create_topics, metadata, request, values, wait_led
from kbroker.handlers import HANDLERS
from kbroker.wire.schema import API_BY_NAME
from testkit.differential import Side

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8  # DescribeConfigs resource types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations
TOPIC_KEYS = ["retention.ms", "cleanup.policy", "min.insync.replicas", "segment.bytes", "compression.zstd.level",
              "leader.replication.throttled.replicas", "preallocate", "message.timestamp.type"]
BROKER_KEYS = ["log.retention.hours", "log.retention.ms", "log.segment.bytes", "num.partitions", "message.max.bytes",
               "compression.type", "log.cleanup.policy", "auto.create.topics.enable", "log.preallocate",
               "compression.gzip.level", "log.cleaner.backoff.ms", "min.insync.replicas", "group.share.max.size",
               "log.local.retention.ms", "log.remote.copy.lag.bytes", "max.decompressed.message.bytes",
               "no.such.setting"]


def versions(api_name: str) -> range:
    """Every version kbroker serves (its handler's range, which may stop short of the declaration's)."""
    handler = HANDLERS[API_BY_NAME[api_name].key]
    return range(handler.min_version, handler.max_version + 1)


def node_id(side: Side) -> str:
    """The broker's own id (a BROKER resource's name), from an unrecorded Metadata request."""
    return str(metadata(side, 12, [], record=False).brokers[0].node_id)


def describe_configs(side: Side, version: int, resource_type: int, name: str, keys: list[str] | None = None,
                     synonyms: bool = False, documentation: bool = False, record: bool = True):
    resource = API_BY_NAME["DescribeConfigs"].request_class.DescribeConfigsResource
    return side.call("DescribeConfigs", version, request(
        "DescribeConfigs", resources=[resource(resource_type=resource_type, resource_name=name,
                                               configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=documentation), record=record)


def alter_configs(side: Side, version: int, resource_type: int, name: str, configs: dict, validate_only=False):
    resource = API_BY_NAME["AlterConfigs"].request_class.AlterConfigsResource
    return side.call("AlterConfigs", version, request("AlterConfigs", validate_only=validate_only, resources=[
        resource(resource_type=resource_type, resource_name=name, configs=[
            resource.AlterableConfig(name=key, value=value) for key, value in configs.items()])]))


def incremental_alter(side: Side, version: int, resource_type: int, name: str, operations: list[tuple],
                      validate_only=False, record: bool = True):
    """``operations``: (name, operation, value)."""
    resource = API_BY_NAME["IncrementalAlterConfigs"].request_class.AlterConfigsResource
    return side.call("IncrementalAlterConfigs", version, request(
        "IncrementalAlterConfigs", validate_only=validate_only, resources=[
            resource(resource_type=resource_type, resource_name=name, configs=[
                resource.AlterableConfig(name=key, config_operation=operation, value=value)
                for key, operation, value in operations])]), record=record)


def create_partitions(side: Side, version: int, *topics, validate_only: bool = False):
    """``topics``: (name, count[, assignments as lists of broker ids])."""
    wanted = API_BY_NAME["CreatePartitions"].request_class.CreatePartitionsTopic
    return side.call("CreatePartitions", version, request("CreatePartitions", timeout_ms=30000, validate_only=validate_only, topics=[
        wanted(name=name, count=count, assignments=None if not assignments else [
            wanted.CreatePartitionsAssignment(broker_ids=ids) for ids in assignments[0]])
        for name, count, *assignments in topics]))


def delete_records(side: Side, version: int, topic: str, offsets: dict[int, int]):
    wanted = API_BY_NAME["DeleteRecords"].request_class.DeleteRecordsTopic
    return side.call("DeleteRecords", version, request("DeleteRecords", timeout_ms=30000, topics=[
        wanted(name=topic, partitions=[wanted.DeleteRecordsPartition(partition_index=partition, offset=offset)
                                       for partition, offset in offsets.items()])]))


def wait_config(side: Side, name: str, key: str, value: str | None) -> None:
    """Until topic ``name`` describes ``key`` as ``value`` (Kafka's brokers apply a change once its record
    reaches their metadata image, a moment after the controller answers)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = describe_configs(side, 4, TOPIC, name, [key], record=False)
        if answer.results[0].configs and answer.results[0].configs[0].value == value:
            return
        time.sleep(0.05)
    raise AssertionError(f"{side.name}: {name}'s {key} is not {value!r} within {READY_TIMEOUT_S} s")


def wait_broker_config(side: Side, broker: str, key: str, value: str) -> None:
    """Until broker ``broker`` describes ``key`` as ``value`` (Kafka's broker applies a dynamic config once
    its record reaches it)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = describe_configs(side, 4, BROKER, broker, [key], record=False)
        if answer.results[0].configs and answer.results[0].configs[0].value == value:
            return
        time.sleep(0.05)
    raise AssertionError(f"{side.name}: broker {broker}'s {key} is not {value!r} within {READY_TIMEOUT_S} s")


def wait_partitions(side: Side, name: str, count: int) -> None:
    """Until topic ``name`` has ``count`` partitions, each led (unrecorded Metadata requests: a broker of
    Kafka learns of new partitions a moment after its controller answers CreatePartitions)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        topic = metadata(side, 12, [name], record=False).topics[0]
        if len(topic.partitions) == count and all(partition.leader_id >= 0 for partition in topic.partitions):
            return
        time.sleep(0.05)
    raise AssertionError(f"{side.name}: {name} has not {count} led partitions within {READY_TIMEOUT_S} s")


def produce_unrecorded(side: Side, topic: str, partition: int, batch: bytes) -> None:
    """The batch appended, with unrecorded tries (a partition Metadata shows led may not lead yet on Kafka's
    broker: NOT_LEADER_OR_FOLLOWER for a moment)."""
    data = API_BY_NAME["Produce"].request_class.TopicProduceData
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        answer = side.call("Produce", 9, request("Produce", acks=-1, timeout_ms=30000, topic_data=[
            data(name=topic, partition_data=[data.PartitionProduceData(index=partition, records=batch)])]),
            record=False)
        code = answer.responses[0].partition_responses[0].error_code
        if code == 0:
            return
        assert code == 6 and time.monotonic() < deadline, answer
        time.sleep(0.05)


# -- sessions ---------------------------------------------------------------------------------------------

def describe_configs_session(side: Side) -> None:
    """A topic's and a broker's configs, all or some, with synonyms and documentation; the refusals."""
    name = "diff-describe-configs"
    create_topics(side, 7, (name, 1, 1, {"retention.ms": "3600000", "cleanup.policy": "compact, delete",
                                         "compression.zstd.level": "-5"}), record=False)
    wait_led(side, name)
    broker = node_id(side)
    for version in versions("DescribeConfigs"):
        describe_configs(side, version, TOPIC, name)  # every config, no synonyms
        describe_configs(side, version, TOPIC, name, TOPIC_KEYS, synonyms=True)
        describe_configs(side, version, TOPIC, name, ["retention.ms", "compression.gzip.level"], synonyms=True,
                         documentation=True)
        describe_configs(side, version, TOPIC, name, ["no.such.config"])
        describe_configs(side, version, TOPIC, f"{name}-unknown-v{version}")
        describe_configs(side, version, TOPIC, "bad/name")
        describe_configs(side, version, BROKER, broker, BROKER_KEYS, synonyms=True)
        describe_configs(side, version, BROKER, "", BROKER_KEYS, synonyms=True)  # the cluster-wide default
        describe_configs(side, version, BROKER, "99")  # another broker's
        describe_configs(side, version, BROKER, "one")  # not a node id
        describe_configs(side, version, BROKER_LOGGER, broker, ["root"])  # the loggers' names are each broker's own
        describe_configs(side, version, BROKER_LOGGER, "")


def alter_configs_session(side: Side) -> None:
    """AlterConfigs replaces a topic's whole set of overrides: set, cleared, refused; validate_only."""
    broker = node_id(side)
    for version in versions("AlterConfigs"):
        name = f"diff-alter-configs-v{version}"
        create_topics(side, 7, (name, 1, 1, {"retention.ms": "3600000"}), record=False)
        wait_led(side, name)
        alter_configs(side, version, TOPIC, name, {"cleanup.policy": "compact", "max.message.bytes": "2000"})
        wait_config(side, name, "retention.ms", "604800000")  # the earlier override is gone
        describe_configs(side, 4, TOPIC, name, TOPIC_KEYS + ["max.message.bytes"], synonyms=True)
        alter_configs(side, version, TOPIC, name, {"no.such.config": "1"})
        alter_configs(side, version, TOPIC, name, {"retention.ms": "soon"})
        alter_configs(side, version, TOPIC, name, {"segment.bytes": "1000"})  # below the 1 MiB floor
        alter_configs(side, version, TOPIC, name, {"remote.storage.enable": "true"})
        alter_configs(side, version, TOPIC, name, {"retention.ms": None})
        alter_configs(side, version, TOPIC, name, {"retention.ms": "1000"}, validate_only=True)
        describe_configs(side, 4, TOPIC, name, ["retention.ms", "cleanup.policy"])  # unchanged
        alter_configs(side, version, TOPIC, f"{name}-unknown", {"retention.ms": "1000"})
        alter_configs(side, version, TOPIC, "", {"retention.ms": "1000"})
        alter_configs(side, version, BROKER, broker, {"log.dirs": "/elsewhere"})  # not dynamic
        alter_configs(side, version, BROKER, broker, {"log.cleaner.backoff.ms": "not a number"})
        alter_configs(side, version, BROKER, "99", {"log.cleaner.backoff.ms": "20000"})
        alter_configs(side, version, BROKER, broker, {"log.cleaner.backoff.ms": "20000"}, validate_only=True)
        alter_configs(side, version, 99, name, {"retention.ms": "1000"})  # no such resource type


def incremental_alter_configs_session(side: Side) -> None:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a list, and their refusals."""
    broker = node_id(side)
    for version in versions("IncrementalAlterConfigs"):
        name = f"diff-incremental-v{version}"
        create_topics(side, 7, (name, 1, 1, {"retention.ms": "3600000", "segment.ms": "7200000"}), record=False)
        wait_led(side, name)
        incremental_alter(side, version, TOPIC, name, [("max.message.bytes", SET, "2000"), ("segment.ms", DELETE, None),
                                                       ("cleanup.policy", APPEND, "compact")])
        wait_config(side, name, "cleanup.policy", "delete,compact")
        describe_configs(side, 4, TOPIC, name, TOPIC_KEYS + ["max.message.bytes", "segment.ms"], synonyms=True)
        incremental_alter(side, version, TOPIC, name, [("cleanup.policy", SUBTRACT, "delete"),
                                                       ("leader.replication.throttled.replicas", APPEND, "0:1")])
        wait_config(side, name, "cleanup.policy", "compact")
        describe_configs(side, 4, TOPIC, name, ["cleanup.policy", "leader.replication.throttled.replicas"])
        incremental_alter(side, version, TOPIC, name, [("retention.ms", APPEND, "1")])  # not a list
        incremental_alter(side, version, TOPIC, name, [("no.such.config", SET, "1")])
        incremental_alter(side, version, TOPIC, name, [("no.such.config", DELETE, None)])
        incremental_alter(side, version, TOPIC, name, [("retention.ms", SET, "soon")])
        incremental_alter(side, version, TOPIC, name, [("retention.ms", SET, None)])
        incremental_alter(side, version, TOPIC, name, [("retention.ms", SET, "1"), ("retention.ms", SET, "2")])
        incremental_alter(side, version, TOPIC, name, [("retention.ms", 9, "1")])  # no such operation
        incremental_alter(side, version, TOPIC, name, [("retention.ms", SET, "1000")], validate_only=True)
        describe_configs(side, 4, TOPIC, name, ["retention.ms"])  # unchanged
        incremental_alter(side, version, TOPIC, f"{name}-unknown", [("retention.ms", SET, "1000")])
        incremental_alter(side, version, BROKER, broker, [("log.cleaner.backoff.ms", SET, "20000")])
        wait_broker_config(side, broker, "log.cleaner.backoff.ms", "20000")
        describe_configs(side, 4, BROKER, broker, ["log.cleaner.backoff.ms"], synonyms=True)
        incremental_alter(side, version, BROKER, broker, [("log.cleaner.backoff.ms", DELETE, None)])
        wait_broker_config(side, broker, "log.cleaner.backoff.ms", "15000")
        incremental_alter(side, version, BROKER, broker, [("log.dirs", SET, "/elsewhere")])  # not dynamic
        incremental_alter(side, version, BROKER, "", [("log.cleanup.policy", APPEND, "compact")], validate_only=True)
        incremental_alter(side, version, BROKER, broker, [("num.partitions", APPEND, "2")])  # not a list
        incremental_alter(side, version, BROKER, "99", [("log.cleaner.backoff.ms", SET, "20000")])
        for operations in ([("root", SET, "INFO")], [("root", SET, "LOUD")], [("root", DELETE, None)],
                           [("root", APPEND, "INFO")], [("differential.no.such.logger", SET, "DEBUG")]):
            incremental_alter(side, version, BROKER_LOGGER, broker, operations, validate_only=True)
        incremental_alter(side, version, BROKER_LOGGER, "", [("root", SET, "INFO")], validate_only=True)


def create_partitions_session(side: Side) -> None:
    """Growing a topic, and what is refused: shrinking, the same count, an unknown topic, wrong
    assignments, a topic named twice; validate_only."""
    broker = int(node_id(side))
    for version in versions("CreatePartitions"):
        name = f"diff-partitions-v{version}"
        create_topics(side, 7, (name, 1, 1), record=False)
        wait_led(side, name)
        create_partitions(side, version, (name, 3))
        wait_partitions(side, name, 3)
        metadata(side, 12, [name])
        create_partitions(side, version, (name, 2))  # fewer
        create_partitions(side, version, (name, 3))  # as many
        create_partitions(side, version, (name, 5), validate_only=True)
        create_partitions(side, version, (f"{name}-unknown", 2))
        create_partitions(side, version, (name, 5, [[broker]]))  # one assignment for two partitions
        create_partitions(side, version, (name, 4, [[99]]))  # no such broker
        create_partitions(side, version, (name, 4, [[broker, broker]]))  # a broker twice
        create_partitions(side, version, (name, 4, [[]]))  # empty
        create_partitions(side, version, (name, 4), (name, 5))  # named twice
        create_partitions(side, version, (name, 4, [[broker]]))
        wait_partitions(side, name, 4)
        metadata(side, 12, [name])


def delete_records_session(side: Side) -> None:
    """DeleteRecords below the high watermark, at it (-1), beyond it; an unknown partition and topic."""
    for version in versions("DeleteRecords"):
        name = f"diff-delete-records-v{version}"
        create_topics(side, 7, (name, 2, 1), record=False)
        wait_led(side, name)
        produce_unrecorded(side, name, 0, values(b"a", b"b", b"c", b"d", b"e"))
        delete_records(side, version, name, {0: 2})
        delete_records(side, version, name, {0: 1})  # below the log start: nothing more to delete
        delete_records(side, version, name, {0: 100, 1: 0})  # beyond the high watermark; nothing to delete
        delete_records(side, version, name, {0: -1})  # up to the high watermark
        delete_records(side, version, name, {0: -2})  # no such offset
        delete_records(side, version, name, {7: 0})
        delete_records(side, version, f"{name}-unknown", {0: 0})


# A value for every topic config Kafka 4.4 has, each side of its bounds where it has some.
TOPIC_CONFIG_VALUES = [
    ("segment.bytes", "1048575"), ("segment.bytes", "1048576"), ("internal.segment.bytes", "1000"),
    ("segment.ms", "0"), ("segment.jitter.ms", "-1"), ("segment.index.bytes", "3"), ("flush.messages", "0"),
    ("flush.ms", "-1"), ("retention.bytes", "-5"), ("retention.ms", "-2"), ("retention.ms", "-1"),
    ("max.message.bytes", "-1"), ("index.interval.bytes", "-1"), ("delete.retention.ms", "-1"),
    ("min.compaction.lag.ms", "-1"), ("max.compaction.lag.ms", "0"), ("file.delete.delay.ms", "-1"),
    ("min.cleanable.dirty.ratio", "1.5"), ("min.cleanable.dirty.ratio", "0.25"), ("cleanup.policy", ""),
    ("cleanup.policy", "compact,compact"), ("cleanup.policy", "delete,later"),
    ("unclean.leader.election.enable", "yes"), ("min.insync.replicas", "0"), ("compression.type", "GZIP"),
    ("compression.type", "zstd"), ("compression.gzip.level", "0"), ("compression.gzip.level", "-1"),
    ("compression.gzip.level", "10"), ("compression.lz4.level", "0"), ("compression.lz4.level", "17"),
    ("compression.zstd.level", "23"), ("compression.zstd.level", "-131072"), ("preallocate", "true"),
    ("message.timestamp.type", "LogAppendTime"), ("message.timestamp.type", "logappendtime"),
    ("message.timestamp.before.max.ms", "-1"), ("message.timestamp.after.max.ms", "-1"),
    ("leader.replication.throttled.replicas", "*"), ("leader.replication.throttled.replicas", "0:1,1:1"),
    ("follower.replication.throttled.replicas", "0:a"), ("remote.storage.enable", "true"),
    ("remote.storage.enable", "false"), ("remote.storage.enable", "maybe"), ("local.retention.ms", "-3"),
    ("local.retention.bytes", "1000"), ("remote.log.copy.disable", "true"), ("remote.copy.lag.ms", "-2"),
    ("remote.copy.lag.bytes", "-1"), ("remote.log.delete.on.disable", "true"),
    ("max.decompressed.message.bytes", "0"), ("errors.deadletterqueue.group.enable", "true"),
]


def topic_config_values_session(side: Side) -> None:
    """Every topic config's rules, through CreateTopics' validate_only (nothing is made; v4, whose answer
    lists no configs) and AlterConfigs'; then how overrides are listed, an internal one among them."""
    name = "diff-config-values"
    create_topics(side, 7, (name, 1, 1), record=False)
    wait_led(side, name)
    for index, (config, value) in enumerate(TOPIC_CONFIG_VALUES):
        create_topics(side, 4, (f"{name}-{index}", 1, 1, {config: value}), validate_only=True)
        alter_configs(side, 2, TOPIC, name, {config: value}, validate_only=True)
    overrides = {"internal.segment.bytes": "1000", "compression.zstd.level": "-5", "remote.copy.lag.ms": "-1",
                 "leader.replication.throttled.replicas": "0:1 , 1:1", "errors.deadletterqueue.group.enable": "true"}
    create_topics(side, 7, (f"{name}-overrides", 1, 1, overrides), validate_only=True)
    create_topics(side, 7, (f"{name}-made", 1, 1, overrides), record=False)
    wait_led(side, f"{name}-made")
    describe_configs(side, 4, TOPIC, f"{name}-made", [*overrides, "segment.bytes"], synonyms=True)


def describe_cluster_session(side: Side) -> None:
    for version in versions("DescribeCluster"):
        for operations in (False, True):
            side.call("DescribeCluster", version, request("DescribeCluster", include_cluster_authorized_operations=operations,
                                                          endpoint_type=1))
        if version >= 1:
            side.call("DescribeCluster", version, request("DescribeCluster", include_cluster_authorized_operations=False,
                                                          endpoint_type=2))  # a controller's, asked of a broker
            side.call("DescribeCluster", version, request("DescribeCluster", include_cluster_authorized_operations=False,
                                                          endpoint_type=7))  # no such endpoint type


def describe_log_dirs_session(side: Side) -> None:
    name = "diff-log-dirs"
    create_topics(side, 7, (name, 2, 1), record=False)
    wait_led(side, name)
    dirs = API_BY_NAME["DescribeLogDirs"].request_class
    deadline = time.monotonic() + READY_TIMEOUT_S  # Kafka makes a partition's log a moment after it leads it
    while time.monotonic() < deadline:
        answer = side.call("DescribeLogDirs", 4, request("DescribeLogDirs", topics=[
            dirs.DescribableLogDirTopic(topic=name, partitions=[0, 1])]), record=False)
        if sum(len(topic.partitions) for result in answer.results for topic in result.topics) == 2:
            break
        time.sleep(0.05)
    for version in versions("DescribeLogDirs"):
        side.call("DescribeLogDirs", version, request("DescribeLogDirs", topics=[
            dirs.DescribableLogDirTopic(topic=name, partitions=[0, 1, 5]),
            dirs.DescribableLogDirTopic(topic=f"{name}-unknown", partitions=[0])]))


SESSIONS = [describe_configs_session, topic_config_values_session, alter_configs_session,
            incremental_alter_configs_session, create_partitions_session, delete_records_session,
            describe_cluster_session, describe_log_dirs_session]
