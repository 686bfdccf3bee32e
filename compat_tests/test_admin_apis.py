"""Admin APIs through stock admin clients (raw requests where no client exposes one)."""

import uuid

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition

from compat_tests.test_errors import call
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME


@pytest.fixture(scope="module")
def broker():
    with running_broker(settings={"auto.create.topics.enable": False}) as running:
        yield running


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture(scope="module")
def kafka_admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


def create(admin, name, partitions=1, config=None):
    admin.create_topics([NewTopic(name, partitions, config=config or {})])[name].result(timeout=10)


def produce(bootstrap, topic, partition, count, **settings):
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **settings})
    for i in range(count):
        producer.produce(topic, b"value-%d" % i, partition=partition)
        producer.poll(0)
    assert producer.flush(10) == 0


def first_offset_read(bootstrap, topic, partition):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}", "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, confluent_kafka.OFFSET_BEGINNING)])
        for _ in range(100):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                return message.offset()
        raise AssertionError("nothing consumed within 10 s")
    finally:
        consumer.close()


def error_code_of(future):
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        future.result(timeout=10)
    return raised.value.args[0].code()


# -- CreatePartitions ---------------------------------------------------------


def test_create_partitions_grows_the_topic_and_its_new_partitions_take_records(broker, admin):
    create(admin, "grow", 2)
    admin.create_partitions([NewPartitions("grow", 4)])["grow"].result(timeout=10)
    assert sorted(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == [0, 1, 2, 3]
    produce(broker.bootstrap, "grow", 3, 5)
    assert first_offset_read(broker.bootstrap, "grow", 3) == 0


def test_create_partitions_errors(broker, admin, kafka_admin):
    create(admin, "grow-errors", 3)
    assert error_code_of(admin.create_partitions([NewPartitions("grow-errors", 3)])["grow-errors"]) == ErrorCode.INVALID_PARTITIONS
    assert error_code_of(admin.create_partitions([NewPartitions("grow-errors", 2)])["grow-errors"]) == ErrorCode.INVALID_PARTITIONS
    assert error_code_of(admin.create_partitions([NewPartitions("no-such-topic", 5)])["no-such-topic"]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    response = kafka_admin.create_partitions({"grow-errors": {"count": 5, "assignments": [[1], [2]]}}, raise_errors=False)
    assert response.results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "no such broker" in response.results[0].error_message
    response = kafka_admin.create_partitions({"grow-errors": {"count": 6, "assignments": [[1]]}}, raise_errors=False)
    assert response.results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    response = kafka_admin.create_partitions({"grow-errors": {"count": 5, "assignments": [[1], [1]]}}, raise_errors=False)
    assert response.results[0].error_code == ErrorCode.NONE
    assert len(admin.list_topics("grow-errors", timeout=10).topics["grow-errors"].partitions) == 5


def test_create_partitions_validate_only_changes_nothing(admin):
    create(admin, "grow-validate", 1)
    admin.create_partitions([NewPartitions("grow-validate", 3)], validate_only=True)["grow-validate"].result(timeout=10)
    assert len(admin.list_topics("grow-validate", timeout=10).topics["grow-validate"].partitions) == 1


def test_new_partitions_survive_a_restart(tmp_path):
    with running_broker(str(tmp_path)) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        create(admin, "grown", 1)
        admin.create_partitions([NewPartitions("grown", 2)])["grown"].result(timeout=10)
        produce(running.bootstrap, "grown", 1, 3)
    with running_broker(str(tmp_path)) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        assert len(admin.list_topics("grown", timeout=10).topics["grown"].partitions) == 2
        assert first_offset_read(running.bootstrap, "grown", 1) == 0


# -- DeleteRecords ------------------------------------------------------------


def test_delete_records_moves_the_earliest_offset(broker, admin):
    create(admin, "trim", 1)
    produce(broker.bootstrap, "trim", 0, 10)
    [future] = admin.delete_records([confluent_kafka.TopicPartition("trim", 0, 4)]).values()
    assert future.result(timeout=10).low_watermark == 4
    partition = confluent_kafka.TopicPartition("trim", 0)
    earliest = admin.list_offsets({partition: confluent_kafka.admin.OffsetSpec.earliest()})[partition].result(timeout=10)
    assert earliest.offset == 4
    assert first_offset_read(broker.bootstrap, "trim", 0) == 4


def test_delete_records_errors_and_high_watermark(broker, admin, kafka_admin):
    create(admin, "trim-errors", 1)
    create(admin, "trim-compacted", 1, {"cleanup.policy": "compact"})
    produce(broker.bootstrap, "trim-errors", 0, 3)
    body = _delete_records_request({"trim-errors": [(0, 99)], "trim-compacted": [(0, 0)], "nope": [(0, 0)]})
    results = {t.name: t.partitions[0] for t in call(broker.port, "DeleteRecords", 2, body).topics}
    assert results["trim-errors"].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert results["trim-compacted"].error_code == ErrorCode.POLICY_VIOLATION
    assert results["nope"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results["nope"].low_watermark == -1
    [result] = kafka_admin.delete_records({KafkaTopicPartition("trim-errors", 0): -1}).values()
    assert result["low_watermark"] == 3


def test_deleted_records_stay_deleted_after_a_restart(tmp_path):
    with running_broker(str(tmp_path)) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        create(admin, "trimmed", 1)
        produce(running.bootstrap, "trimmed", 0, 6)
        [future] = admin.delete_records([confluent_kafka.TopicPartition("trimmed", 0, 5)]).values()
        future.result(timeout=10)
    with running_broker(str(tmp_path)) as running:
        assert first_offset_read(running.bootstrap, "trimmed", 0) == 5


def _delete_records_request(offsets):
    request = API_BY_NAME["DeleteRecords"].request_class
    topic = request.DeleteRecordsTopic
    return request(timeout_ms=5000, topics=[
        topic(name=name, partitions=[topic.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in wanted])
        for name, wanted in offsets.items()
    ])


# -- DescribeCluster, DescribeLogDirs, DescribeProducers ----------------------


def test_describe_cluster(broker, admin, kafka_admin):
    # librdkafka answers describe_cluster from Metadata; kafka-python sends DescribeCluster.
    described = admin.describe_cluster().result(timeout=10)
    assert described.cluster_id == broker.broker.cluster_id
    assert described.controller.id == 1 and [node.port for node in described.nodes] == [broker.port]
    plain = kafka_admin.describe_cluster()
    assert plain["cluster_id"] == broker.broker.cluster_id and plain["controller_id"] == 1
    assert [(b["broker_id"], b["port"]) for b in plain["brokers"]] == [(1, broker.port)]
    assert set(plain["authorized_operations"]) == {
        "CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
    }
    request = API_BY_NAME["DescribeCluster"].request_class
    assert call(broker.port, "DescribeCluster", 1, request()).cluster_authorized_operations == -2147483648
    assert call(broker.port, "DescribeCluster", 1, request(endpoint_type=2)).error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE


def test_describe_log_dirs(broker, admin, kafka_admin):
    create(admin, "sized", 2)
    produce(broker.bootstrap, "sized", 1, 4)
    [described] = kafka_admin.describe_log_dirs(topic_partitions={"sized": [0, 1]})
    [log_dir] = described["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["usable_bytes"] > 0 and log_dir["total_bytes"] >= log_dir["usable_bytes"]
    [topic] = log_dir["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    assert sizes[0] == 0 and sizes[1] == broker.broker.logs.logs[("sized", 1)].size_bytes > 0
    assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in topic["partitions"])


def test_describe_producers(broker, admin, kafka_admin):
    create(admin, "idempotent", 1)
    produce(broker.bootstrap, "idempotent", 0, 7, **{"enable.idempotence": True})
    states = kafka_admin.describe_producers([KafkaTopicPartition("idempotent", 0)])
    [producer] = states[KafkaTopicPartition("idempotent", 0)].active_producers
    assert producer.producer_id >= 0 and producer.producer_epoch == 0 and producer.last_sequence == 6
    assert producer.last_timestamp > 0 and producer.current_transaction_start_offset == -1
    request = API_BY_NAME["DescribeProducers"].request_class
    body = request(topics=[request.TopicRequest(name="nope", partition_indexes=[0])])
    [partition] = call(broker.port, "DescribeProducers", 0, body).topics[0].partitions
    assert partition.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- DescribeTopicPartitions, GetTelemetrySubscriptions ------------------------


def describe_topic_partitions(port, names, limit=2000, cursor=None):
    request = API_BY_NAME["DescribeTopicPartitions"].request_class
    body = request(topics=[request.TopicRequest(name=n) for n in names], response_partition_limit=limit,
                   cursor=None if cursor is None else request.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    return call(port, "DescribeTopicPartitions", 0, body)


def test_describe_topic_partitions_pages_with_a_cursor(broker, admin, kafka_admin):
    create(admin, "paged-a", 3)
    create(admin, "paged-b", 2)
    first = kafka_admin.describe_topic_partitions(["paged-b", "paged-a"], response_partition_limit=2)
    assert [t["name"] for t in first["topics"]] == ["paged-a"]
    assert [p["partition_index"] for p in first["topics"][0]["partitions"]] == [0, 1]
    assert first["next_cursor"] == {"topic_name": "paged-a", "partition_index": 2}
    second = describe_topic_partitions(broker.port, ["paged-a", "paged-b"], limit=2, cursor=("paged-a", 2))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in second.topics] == [("paged-a", [2]), ("paged-b", [0])]
    assert (second.next_cursor.topic_name, second.next_cursor.partition_index) == ("paged-b", 1)
    partition = second.topics[0].partitions[0]
    assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (1, [1], [1])
    assert partition.eligible_leader_replicas == [] and partition.offline_replicas == []
    assert second.topics[0].topic_id == broker.broker.image.topics["paged-a"].topic_id


def test_describe_topic_partitions_errors(broker):
    response = describe_topic_partitions(broker.port, ["nope", "bad name!"])
    assert {t.name: t.error_code for t in response.topics} == {
        "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "bad name!": ErrorCode.INVALID_TOPIC_EXCEPTION,
    }
    response = describe_topic_partitions(broker.port, ["nope"], cursor=("other", 0))
    assert response.topics[0].error_code == ErrorCode.INVALID_REQUEST


def test_get_telemetry_subscriptions_asks_for_no_metrics(broker):
    request = API_BY_NAME["GetTelemetrySubscriptions"].request_class
    response = call(broker.port, "GetTelemetrySubscriptions", 0, request(client_instance_id=ZERO_UUID))
    assert response.error_code == ErrorCode.NONE and response.client_instance_id != ZERO_UUID
    assert response.requested_metrics == [] and response.push_interval_ms >= 60_000
    known = uuid.uuid4()
    assert call(broker.port, "GetTelemetrySubscriptions", 0, request(client_instance_id=known)).client_instance_id == known


def test_clients_stay_quiet_about_telemetry(broker):
    logs = []
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "debug": "telemetry", "logger": _Collect(logs)})
    producer.list_topics(timeout=10)
    for _ in range(20):
        producer.poll(0.1)
        if any("GetSubscriptionsScheduled" in line for line in logs):
            break
    del producer
    # librdkafka asked, was told no metrics, and waits a push interval before asking again.
    assert any("GetSubscriptionsScheduled" in line and "metrics = 0" in line for line in logs), logs
    assert not [line for line in logs if "PushTelemetry" in line or "error" in line.lower()]


class _Collect:
    def __init__(self, lines):
        self.lines = lines

    def log(self, level, message, *args):
        self.lines.append(message % args if args else message)

    def __getattr__(self, name):  # debug, info, warning, error ...
        return lambda message, *args, **kwargs: self.lines.append(message % args if args else message)


@pytest.mark.parametrize("version", [0, 3, 4, 6])
def test_find_coordinator_names_this_broker_for_groups(broker, version):
    request = API_BY_NAME["FindCoordinator"].request_class
    if version < 4:
        response = call(broker.port, "FindCoordinator", version, request(key="a-group"))
        found = [(response.error_code, response.node_id, response.port)]
    else:
        response = call(broker.port, "FindCoordinator", version, request(coordinator_keys=["g1", "g2"]))
        assert [c.key for c in response.coordinators] == ["g1", "g2"]
        found = [(c.error_code, c.node_id, c.port) for c in response.coordinators]
    assert set(found) == {(ErrorCode.NONE, 1, broker.port)}


def test_find_coordinator_names_this_broker_for_transactional_ids(broker):
    request = API_BY_NAME["FindCoordinator"].request_class
    response = call(broker.port, "FindCoordinator", 4, request(key_type=1, coordinator_keys=["txn"]))
    assert [(c.key, c.error_code, c.port) for c in response.coordinators] == [("txn", ErrorCode.NONE, broker.port)]


def test_find_coordinator_errors(broker):
    request = API_BY_NAME["FindCoordinator"].request_class
    assert call(broker.port, "FindCoordinator", 3, request(key_type=7, key="x")).error_code == ErrorCode.INVALID_REQUEST
    # an empty group id has a coordinator, as in Kafka 4.4 (the differential suite's find_coordinator_session)
    assert call(broker.port, "FindCoordinator", 2, request(key="")).error_code == ErrorCode.NONE


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_a_created_topic_has_a_null_error_message_as_kafka_sends(broker, version):
    """Null, not "": CreateTopics' error_message when there is no error (Kafka's ApiError.NONE)."""
    request = API_BY_NAME["CreateTopics"].request_class
    name = f"null-message-v{version}-{uuid.uuid4().hex[:6]}"
    answer = call(broker.port, "CreateTopics", version, request(timeout_ms=5000, topics=[
        request.CreatableTopic(name=name, num_partitions=1, replication_factor=1)]))
    assert (answer.topics[0].error_code, answer.topics[0].error_message) == (ErrorCode.NONE, None)


# Every topic config of Kafka 4.4 (LogConfig), with its default; kbroker adds Confluent Server's two.
KAFKA_TOPIC_CONFIG_DEFAULTS = {
    "cleanup.policy": "delete", "compression.gzip.level": "-1", "compression.lz4.level": "9",
    "compression.type": "producer", "compression.zstd.level": "3", "delete.retention.ms": "86400000",
    "errors.deadletterqueue.group.enable": "false", "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807", "flush.ms": "9223372036854775807",
    "follower.replication.throttled.replicas": "", "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807", "max.decompressed.message.bytes": "2147483639",
    "max.message.bytes": "1048588", "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1", "preallocate": "false", "remote.copy.lag.bytes": "-1", "remote.copy.lag.ms": "0",
    "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false", "remote.storage.enable": "false",
    "retention.bytes": "-1", "retention.ms": "604800000", "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760", "segment.jitter.ms": "0", "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
    # kbroker's default differs (docs/kafka-differences.md): Kafka's is 3600000
    "message.timestamp.after.max.ms": "3600000",
}


def _create_topic(port, version, name, configs=None, validate_only=False, partitions=1, copies=1):
    request = API_BY_NAME["CreateTopics"].request_class
    topic = request.CreatableTopic(name=name, num_partitions=partitions, replication_factor=copies, configs=[
        request.CreatableTopic.CreatableTopicConfig(name=key, value=value) for key, value in (configs or {}).items()])
    return call(port, "CreateTopics", version, request(timeout_ms=5000, topics=[topic], validate_only=validate_only))


@pytest.mark.parametrize("version", [5, 7])
def test_a_created_topic_lists_every_topic_config_kafka_has(broker, version):
    """CreateTopics v5+ answers the new topic's configs: all of Kafka 4.4's, with its defaults, beside
    Confluent Server's schema validation pair (the list lacked 15 of Kafka's before)."""
    answer = _create_topic(broker.port, version, f"every-config-v{version}-{uuid.uuid4().hex[:6]}").topics[0]
    listed = {config.name: config.value for config in answer.configs}
    assert listed == KAFKA_TOPIC_CONFIG_DEFAULTS | {"confluent.key.schema.validation": "false",
                                                   "confluent.value.schema.validation": "false"}
    assert {(config.config_source, config.read_only, config.is_sensitive) for config in answer.configs} == {(5, False, False)}


def test_the_topic_configs_kafka_has_are_described_with_their_broker_synonyms(broker):
    name = f"synonyms-{uuid.uuid4().hex[:6]}"
    _create_topic(broker.port, 7, name, {"compression.zstd.level": "-5", "leader.replication.throttled.replicas": "*"})
    request = API_BY_NAME["DescribeConfigs"].request_class
    answer = call(broker.port, "DescribeConfigs", 4, request(include_synonyms=True, resources=[
        request.DescribeConfigsResource(resource_type=2, resource_name=name, configuration_keys=[
            "compression.zstd.level", "leader.replication.throttled.replicas", "preallocate", "remote.storage.enable",
            "local.retention.ms"])])).results[0]
    described = {c.name: (c.value, c.config_source, c.config_type, [(s.name, s.value, s.source) for s in c.synonyms])
                 for c in answer.configs}
    assert described == {
        "compression.zstd.level": ("-5", 1, 3, [("compression.zstd.level", "-5", 1), ("compression.zstd.level", "3", 5)]),
        "leader.replication.throttled.replicas": ("*", 1, 7, [("leader.replication.throttled.replicas", "*", 1)]),
        "preallocate": ("false", 5, 1, [("log.preallocate", "false", 5)]),
        "remote.storage.enable": ("false", 5, 1, []),
        "local.retention.ms": ("-2", 5, 5, [("log.local.retention.ms", "-2", 5)]),
    }


@pytest.mark.parametrize("config, value, accepted", [
    ("segment.bytes", "1000", False),  # the topic's floor is 1 MiB (log.segment.bytes' was taken before)
    ("internal.segment.bytes", "1000", True),  # Kafka's own way below it, for tests
    ("segment.ms", "0", False), ("retention.ms", "-2", False), ("flush.ms", "-1", False),
    ("compression.gzip.level", "10", False), ("compression.gzip.level", "-1", True),
    ("compression.lz4.level", "18", False), ("compression.zstd.level", "-131073", False),
    ("local.retention.bytes", "-3", False), ("remote.copy.lag.ms", "-2", False),
    ("max.decompressed.message.bytes", "0", False),
    ("leader.replication.throttled.replicas", "0:1,1:1", True), ("follower.replication.throttled.replicas", "0:a", False),
    ("remote.storage.enable", "true", False),  # as a Kafka whose tiered storage is off
    ("remote.log.copy.disable", "true", True), ("errors.deadletterqueue.group.enable", "true", True),
])
def test_topic_config_values_are_checked_by_the_topic_rules_as_kafka_does(broker, config, value, accepted):
    answer = _create_topic(broker.port, 7, f"checked-{uuid.uuid4().hex[:6]}", {config: value}, validate_only=True)
    topic = answer.topics[0]
    if accepted:
        assert (topic.error_code, topic.error_message) == (ErrorCode.NONE, None)
    else:
        assert topic.error_code == ErrorCode.INVALID_CONFIG and topic.error_message


@pytest.mark.parametrize("version", [2, 5, 7])
def test_a_topic_named_twice_is_answered_once_and_not_created(broker, version):
    """Kafka answers a name given twice once, INVALID_REQUEST, and creates neither (kbroker created the
    first and refused the second)."""
    request = API_BY_NAME["CreateTopics"].request_class
    name = f"twice-v{version}-{uuid.uuid4().hex[:6]}"
    topics = [request.CreatableTopic(name=name, num_partitions=1, replication_factor=1) for _ in range(2)]
    answer = call(broker.port, "CreateTopics", version, request(timeout_ms=5000, topics=topics))
    assert [(t.name, t.error_code, t.error_message) for t in answer.topics] == [
        (name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")]
    metadata = API_BY_NAME["Metadata"].request_class
    described = call(broker.port, "Metadata", 12, metadata(topics=[metadata.MetadataRequestTopic(name=name)],
                                                            allow_auto_topic_creation=False))
    assert described.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", [5, 6])
def test_deleting_an_unknown_topic_says_why_as_kafka_does(broker, version):
    request = API_BY_NAME["DeleteTopics"].request_class
    name = f"never-made-{uuid.uuid4().hex[:6]}"
    body = (request(timeout_ms=5000, topics=[request.DeleteTopicState(name=name),
                                             request.DeleteTopicState(name=None, topic_id=uuid.uuid4())])
            if version >= 6 else request(timeout_ms=5000, topic_names=[name]))
    answers = {(r.name, r.error_code): r.error_message for r in call(broker.port, "DeleteTopics", version, body).responses}
    assert answers[(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)] == "This server does not host this topic-partition."
    if version >= 6:
        assert answers[(None, ErrorCode.UNKNOWN_TOPIC_ID)] == "This server does not host this topic ID."


def _alter(port, api_name, version, name, configs, resource_type=2):
    """AlterConfigs (``configs`` name -> value) or IncrementalAlterConfigs (name -> (operation, value))."""
    request = API_BY_NAME[api_name].request_class
    resource = request.AlterConfigsResource
    entries = [resource.AlterableConfig(name=key, value=value) if api_name == "AlterConfigs" else
               resource.AlterableConfig(name=key, config_operation=value[0], value=value[1])
               for key, value in configs.items()]
    answer = call(port, api_name, version, request(validate_only=False, resources=[
        resource(resource_type=resource_type, resource_name=name, configs=entries)]))
    return answer.responses[0]


@pytest.mark.parametrize("api_name, version, configs", [
    ("AlterConfigs", 0, {"retention.ms": None}), ("AlterConfigs", 2, {"retention.ms": None}),
    ("IncrementalAlterConfigs", 0, {"retention.ms": (0, None)}), ("IncrementalAlterConfigs", 1, {"retention.ms": (2, None)}),
])
def test_a_null_value_for_a_topic_config_is_an_invalid_request_as_kafka_says(broker, admin, api_name, version, configs):
    """Kafka's ConfigAdminManager.preprocess refuses it for a resource of any type (kbroker said
    INVALID_CONFIG for a topic's)."""
    name = f"null-value-{uuid.uuid4().hex[:6]}"
    create(admin, name)
    answer = _alter(broker.port, api_name, version, name, configs)
    assert (answer.error_code, answer.error_message) == (ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms")


@pytest.mark.parametrize("version", [0, 1])
def test_an_operation_that_is_none_is_an_unknown_server_error_without_a_message_as_kafka_answers(broker, admin, version):
    name = f"no-operation-{uuid.uuid4().hex[:6]}"
    create(admin, name)
    answer = _alter(broker.port, "IncrementalAlterConfigs", version, name, {"retention.ms": (9, "1")})
    assert (answer.error_code, answer.error_message) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)


@pytest.mark.parametrize("version", [1, 4])
def test_describing_an_unknown_topic_s_configs_has_an_empty_message_as_kafka_s(broker, version):
    request = API_BY_NAME["DescribeConfigs"].request_class
    answer = call(broker.port, "DescribeConfigs", version, request(resources=[
        request.DescribeConfigsResource(resource_type=2, resource_name=f"never-made-{uuid.uuid4().hex[:6]}")])).results[0]
    assert (answer.error_code, answer.error_message) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")


def test_broker_settings_kafka_4_4_has_are_described_with_its_types_and_defaults(broker):
    request = API_BY_NAME["DescribeConfigs"].request_class
    answer = call(broker.port, "DescribeConfigs", 4, request(resources=[request.DescribeConfigsResource(
        resource_type=4, resource_name="1", configuration_keys=[
            "group.share.max.size", "num.recovery.threads.per.data.dir", "compression.zstd.level",
            "log.local.retention.ms", "log.remote.copy.lag.bytes", "max.decompressed.message.bytes",
            "log.preallocate"])])).results[0]
    assert {c.name: (c.value, c.config_type, c.read_only) for c in answer.configs} == {
        "group.share.max.size": ("200", 3, True), "num.recovery.threads.per.data.dir": ("2", 3, True),
        "compression.zstd.level": ("3", 3, False), "log.local.retention.ms": ("-2", 5, False),
        "log.remote.copy.lag.bytes": ("-1", 5, False), "max.decompressed.message.bytes": ("2147483639", 3, False),
        "log.preallocate": ("false", 1, False)}  # a topic config's synonym may change at runtime


def test_broker_loggers_are_described_and_changed_as_kafka_s(broker):
    """KIP-412 over kbroker's Python loggers (kbroker refused the resource type before)."""
    describe = API_BY_NAME["DescribeConfigs"].request_class
    described = call(broker.port, "DescribeConfigs", 4, describe(resources=[describe.DescribeConfigsResource(
        resource_type=8, resource_name="1", configuration_keys=["root", "kbroker.server"])])).results[0]
    assert described.error_code == ErrorCode.NONE
    assert {c.name for c in described.configs} == {"root", "kbroker.server"}
    assert {(c.config_source, c.read_only, c.is_sensitive) for c in described.configs} == {(6, False, False)}

    def alter(operations, name="1"):
        answer = _alter(broker.port, "IncrementalAlterConfigs", 1, name, dict(operations), resource_type=8)
        return answer.error_code, answer.error_message

    assert alter({"kbroker.server": (0, "TRACE")}) == (ErrorCode.NONE, None)
    described = call(broker.port, "DescribeConfigs", 4, describe(resources=[describe.DescribeConfigsResource(
        resource_type=8, resource_name="1", configuration_keys=["kbroker.server"])])).results[0]
    assert described.configs[0].value == "TRACE"
    assert alter({"kbroker.server": (1, None)}) == (ErrorCode.NONE, None)
    assert alter({"kbroker.no.such": (0, "DEBUG")}) == (ErrorCode.INVALID_CONFIG, "Logger kbroker.no.such does not exist!")
    assert alter({"root": (0, "LOUD")})[0] == ErrorCode.INVALID_CONFIG
    assert alter({"root": (1, None)}) == (ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
    assert alter({"root": (2, "INFO")}) == (ErrorCode.INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource")
    assert alter({"root": (0, "INFO")}, name="2") == (ErrorCode.INVALID_REQUEST, "Unexpected node id. Expected 1, but received 2")


def test_created_topic_answers_its_overrides_as_given_and_describes_them_parsed(broker):
    """Kafka's CreateTopics v5+ answer shows an override as the request gave it; DescribeConfigs shows
    it parsed and written back (kbroker showed both parsed)."""
    name = f"as-given-{uuid.uuid4().hex[:6]}"
    overrides = {"cleanup.policy": "compact, delete", "internal.segment.bytes": "1000"}
    created = _create_topic(broker.port, 7, name, overrides).topics[0]
    assert {c.name: c.value for c in created.configs if c.config_source == 1} == overrides
    request = API_BY_NAME["DescribeConfigs"].request_class
    described = call(broker.port, "DescribeConfigs", 4, request(resources=[request.DescribeConfigsResource(
        resource_type=2, resource_name=name)])).results[0]
    overridden = {c.name: c.value for c in described.configs if c.config_source == 1}
    assert overridden == {"cleanup.policy": "compact,delete", "internal.segment.bytes": "1000"}  # internal: where set
