"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs with stock clients, as Kafka answers them."""

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode

TIMEOUT_S = 10


def topic_resource(name, **kwargs):
    return ConfigResource(ConfigResource.Type.TOPIC, name, **kwargs)


def describe(admin, resource):
    [future] = admin.describe_configs([resource], request_timeout=TIMEOUT_S).values()
    return future.result(timeout=TIMEOUT_S)


def alter(admin, resource, **kwargs):
    [future] = admin.alter_configs([resource], request_timeout=TIMEOUT_S, **kwargs).values()
    return future.result(timeout=TIMEOUT_S)


def incremental(admin, resource, **kwargs):
    [future] = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S, **kwargs).values()
    return future.result(timeout=TIMEOUT_S)


def error_code(future_error):
    return future_error.value.args[0].code()


@pytest.fixture(scope="module")
def broker():
    settings = {"auto.create.topics.enable": False, "log.retention.hours": 48}
    with running_broker(settings=settings) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic("described", 2, config={"retention.ms": "3600000"})])["described"].result(timeout=TIMEOUT_S)
        yield running, admin


def test_describe_topic_values_and_sources(broker):
    running, admin = broker
    configs = describe(admin, topic_resource("described"))
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].value == str(1024**3)
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert configs["compression.type"].value == "producer"
    for entry in configs.values():
        assert not entry.is_read_only and not entry.is_sensitive
    assert set(configs) >= {"max.message.bytes", "min.insync.replicas", "message.timestamp.type", "segment.ms"}


def test_describe_topic_synonyms_and_a_static_broker_default(broker):
    running, admin = broker
    configs = describe(admin, topic_resource("described"))
    # retention.ms is overridden; the broker's own default comes from log.retention.hours=48, set at start.
    # Kafka lists a topic config's broker synonyms from the first one named as its first broker synonym
    # (ConfigHelper.configSynonyms drops the others), so with log.retention.ms unset there are none.
    synonyms = [(s.name, s.value, s.source) for s in configs["retention.ms"].synonyms.values()]
    assert synonyms == [("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)]
    synonyms = [(s.name, s.value, s.source) for s in configs["max.message.bytes"].synonyms.values()]
    assert synonyms == [("message.max.bytes", str(1024 * 1024 + 12), ConfigSource.DEFAULT_CONFIG.value)]


def test_describe_filters_by_key_and_returns_types_and_docs(broker):
    running, admin = broker
    from compat_tests.test_errors import call
    from kbroker.wire.schema import API_BY_NAME

    request = API_BY_NAME["DescribeConfigs"].request_class
    body = request(
        resources=[request.DescribeConfigsResource(resource_type=2, resource_name="described",
                                                   configuration_keys=["retention.ms", "cleanup.policy"])],
        include_synonyms=False, include_documentation=True,
    )
    [result] = call(running.port, "DescribeConfigs", 4, body).results
    assert result.error_code == ErrorCode.NONE
    by_name = {entry.name: entry for entry in result.configs}
    assert set(by_name) == {"retention.ms", "cleanup.policy"}
    assert by_name["retention.ms"].config_type == 5  # LONG
    assert by_name["cleanup.policy"].config_type == 7  # LIST
    assert by_name["retention.ms"].documentation
    assert by_name["retention.ms"].synonyms == []


def test_describe_unknown_topic(broker):
    running, admin = broker
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        describe(admin, topic_resource("no-such-topic"))
    assert error_code(raised) == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_broker(broker):
    running, admin = broker
    node_id = str(running.broker.settings.node_id)
    configs = describe(admin, ConfigResource(ConfigResource.Type.BROKER, node_id))
    assert configs["auto.create.topics.enable"].value == "false"
    assert configs["auto.create.topics.enable"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].value == "1"
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["num.partitions"].is_read_only
    # Unset, log.retention.ms shows no value and no synonym of its own, as in Kafka (log.retention.hours=48 supplies it)
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].source) == (None, ConfigSource.DEFAULT_CONFIG.value)
    assert configs["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        alter(admin, ConfigResource(ConfigResource.Type.BROKER, node_id, set_config={"num.partitions": "3"}))
    assert error_code(raised) == confluent_kafka.KafkaError.INVALID_REQUEST


def test_alter_configs_replaces_the_whole_override_set(broker):
    running, admin = broker
    admin.create_topics([NewTopic("altered", 1, config={"retention.ms": "60000"})])["altered"].result(timeout=TIMEOUT_S)
    alter(admin, topic_resource("altered", set_config={"segment.bytes": "1048576", "cleanup.policy": "compact"}))
    configs = describe(admin, topic_resource("altered"))
    assert configs["segment.bytes"].value == "1048576"
    assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    # the override is gone: the broker's default (from log.retention.hours, which Kafka does not list as a synonym)
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["retention.ms"].value == str(48 * 3600 * 1000)
    log = running.broker.partition("altered", 0).log
    assert log.config.segment_bytes == 1048576 and log.config.compact
    assert log.config.retention_ms == 48 * 3600 * 1000


def test_validate_only_changes_nothing(broker):
    running, admin = broker
    alter(admin, topic_resource("described", set_config={"retention.ms": "1234"}), validate_only=True)
    incremental(admin, topic_resource("described", incremental_configs=[
        ConfigEntry("retention.ms", "5678", incremental_operation=AlterConfigOpType.SET)]), validate_only=True)
    assert describe(admin, topic_resource("described"))["retention.ms"].value == "3600000"


def test_incremental_alter_set_delete_append_subtract(broker):
    running, admin = broker
    admin.create_topics([NewTopic("incremental", 1)])["incremental"].result(timeout=TIMEOUT_S)
    resource = topic_resource("incremental", incremental_configs=[
        ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    incremental(admin, resource)
    configs = describe(admin, topic_resource("incremental"))
    assert configs["max.message.bytes"].value == "2000000"
    assert configs["cleanup.policy"].value == "delete,compact"
    log = running.broker.partition("incremental", 0).log
    assert log.config.max_message_bytes == 2000000 and log.config.compact and log.config.delete

    incremental(admin, topic_resource("incremental", incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
    ]))
    configs = describe(admin, topic_resource("incremental"))
    assert configs["cleanup.policy"].value == "compact"
    assert configs["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert log.config.max_message_bytes == 1024 * 1024 + 12 and not log.config.delete


@pytest.mark.parametrize("name, value", [
    ("no.such.config", "1"),
    ("retention.ms", "soon"),
    ("cleanup.policy", "shred"),
    ("compression.type", "brotli"),
    ("min.cleanable.dirty.ratio", "2.5"),
])
def test_invalid_config(broker, name, value):
    running, admin = broker
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        alter(admin, topic_resource("described", set_config={name: value}))
    assert error_code(raised) == confluent_kafka.KafkaError.INVALID_CONFIG
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        incremental(admin, topic_resource("described", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)]))
    assert error_code(raised) == confluent_kafka.KafkaError.INVALID_CONFIG
    assert describe(admin, topic_resource("described"))["retention.ms"].value == "3600000"


def test_append_to_a_non_list_config_is_invalid(broker):
    running, admin = broker
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        incremental(admin, topic_resource("described", incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)]))
    assert error_code(raised) == confluent_kafka.KafkaError.INVALID_CONFIG


def test_alter_unknown_topic(broker):
    running, admin = broker
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        alter(admin, topic_resource("no-such-topic", set_config={"retention.ms": "1000"}))
    assert error_code(raised) == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_a_change_survives_a_restart(tmp_path):
    with running_broker(str(tmp_path)) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic("kept", 1)])["kept"].result(timeout=TIMEOUT_S)
        incremental(admin, topic_resource("kept", incremental_configs=[
            ConfigEntry("segment.bytes", "2097152", incremental_operation=AlterConfigOpType.SET)]))
    with running_broker(str(tmp_path)) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        configs = describe(admin, topic_resource("kept"))
        assert configs["segment.bytes"].value == "2097152"
        assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert running.broker.partition("kept", 0).log.config.segment_bytes == 2097152


def test_kafka_python_describe_configs(broker):
    import kafka.admin

    running, admin = broker
    client = kafka.admin.KafkaAdminClient(bootstrap_servers=running.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        modified = client.describe_configs([kafka.admin.ConfigResource("TOPIC", "described")])
        every = client.describe_configs([kafka.admin.ConfigResource("TOPIC", "described")], config_filter="all",
                                        include_synonyms=True)
        broker_configs = client.describe_configs([kafka.admin.ConfigResource("BROKER", "1")], config_filter="all")
    finally:
        client.close()
    assert set(modified["topic"]["described"]) == {"retention.ms"}
    configs = every["topic"]["described"]
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert broker_configs["broker"]["1"]["auto.create.topics.enable"]["value"] == "false"


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_edge_resources_over_a_raw_socket(broker, version):
    from compat_tests.test_errors import call
    from kbroker.wire.schema import API_BY_NAME

    running, admin = broker
    request = API_BY_NAME["DescribeConfigs"].request_class
    resource = request.DescribeConfigsResource
    body = request(resources=[
        resource(resource_type=4, resource_name="", configuration_keys=None),
        resource(resource_type=4, resource_name="7", configuration_keys=None),
        resource(resource_type=99, resource_name="x", configuration_keys=None),
        resource(resource_type=2, resource_name="bad name!", configuration_keys=None),
        resource(resource_type=2, resource_name="described", configuration_keys=["retention.ms"]),
    ], include_synonyms=True)
    results = call(running.port, "DescribeConfigs", version, body).results
    codes = [result.error_code for result in results]
    assert codes == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
                     ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.NONE]
    assert results[0].configs == []
    [entry] = results[4].configs
    assert (entry.name, entry.value, entry.config_source) == ("retention.ms", "3600000", 1)
    # log.retention.ms and .minutes are unset and have no default: the hours setting supplies the default,
    # but Kafka lists broker synonyms only from the first named log.retention.ms (ConfigHelper.configSynonyms)
    assert [(synonym.name, synonym.source) for synonym in entry.synonyms] == [("retention.ms", 1)]
