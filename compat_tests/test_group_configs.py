"""Group configs (ConfigResource type GROUP, 32; KIP-848, KIP-932) with stock admin clients, as Kafka 4.2 answers
them: set with IncrementalAlterConfigs (what ``kafka-configs --entity-type groups --add-config`` sends), read back
with DescribeConfigs and their source, refused with INVALID_CONFIG, deleted back to the default, kept across a
restart, and seen by what the coordinators read (kbroker/config/group_configs.py)."""

import confluent_kafka
import pytest
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                  ResourceType)

from compat_tests.java_harness import java_harness  # noqa: F401  (the session fixture)
from kbroker.config.group_configs import group_config
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode

TIMEOUT_S = 10
GROUP_RESOURCE = 32


def group_resource(name, *entries):
    """The group's resource, with (name, value, operation) changes."""
    return ConfigResource(ResourceType.GROUP, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=operation) for key, value, operation in entries])


def describe(admin, name):
    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, name)], request_timeout=TIMEOUT_S).values()
    return future.result(timeout=TIMEOUT_S)


def incremental(admin, name, *entries, **kwargs):
    [future] = admin.incremental_alter_configs([group_resource(name, *entries)], request_timeout=TIMEOUT_S,
                                               **kwargs).values()
    return future.result(timeout=TIMEOUT_S)


def refused(admin, name, *entries) -> int:
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        incremental(admin, name, *entries)
    return raised.value.args[0].code()


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        yield running, AdminClient({"bootstrap.servers": running.bootstrap})


def test_set_describe_and_delete_share_auto_offset_reset(broker):
    running, admin = broker
    before = describe(admin, "orders")["share.auto.offset.reset"]
    assert (before.value, before.source) == ("latest", ConfigSource.DEFAULT_CONFIG.value)
    incremental(admin, "orders", ("share.auto.offset.reset", "earliest", AlterConfigOpType.SET))
    configs = describe(admin, "orders")
    assert (configs["share.auto.offset.reset"].value, configs["share.auto.offset.reset"].source) == (
        "earliest", ConfigSource.GROUP_CONFIG.value)
    assert not configs["share.auto.offset.reset"].is_read_only
    assert configs["share.record.lock.duration.ms"].value == "30000"
    assert configs["share.record.lock.duration.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert group_config(running.broker.image, running.broker.config, "orders").share_auto_offset_reset == "earliest"
    assert group_config(running.broker.image, running.broker.config, "other").share_auto_offset_reset == "latest"

    incremental(admin, "orders", ("share.auto.offset.reset", None, AlterConfigOpType.DELETE))
    after = describe(admin, "orders")["share.auto.offset.reset"]
    assert (after.value, after.source) == ("latest", ConfigSource.DEFAULT_CONFIG.value)
    assert "orders" not in running.broker.image.group_configs


@pytest.mark.parametrize("name, value", [
    ("share.auto.offset.reset", "sometimes"),
    ("share.auto.offset.reset", "by_duration:-PT1H"),
    ("share.isolation.level", "serializable"),
    ("share.record.lock.duration.ms", "soon"),
    ("share.record.lock.duration.ms", "999999999"),  # above group.share.max.record.lock.duration.ms
    ("no.such.config", "1"),
])
def test_an_invalid_value_or_an_unknown_name_is_invalid_config(broker, name, value):
    running, admin = broker
    assert refused(admin, "refused", (name, value, AlterConfigOpType.SET)) == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "refused" not in running.broker.image.group_configs


def test_append_is_invalid_config_as_no_group_config_is_a_list(broker):
    running, admin = broker
    code = refused(admin, "listed", ("share.auto.offset.reset", "earliest", AlterConfigOpType.APPEND))
    assert code == confluent_kafka.KafkaError.INVALID_CONFIG


def test_validate_only_changes_nothing(broker):
    running, admin = broker
    incremental(admin, "checked", ("share.isolation.level", "read_committed", AlterConfigOpType.SET),
                validate_only=True)
    assert describe(admin, "checked")["share.isolation.level"].value == "read_uncommitted"


def test_a_duration_and_bounded_values_are_kept_as_set(broker):
    running, admin = broker
    incremental(admin, "timed", ("share.auto.offset.reset", "by_duration:PT1H", AlterConfigOpType.SET),
                ("share.record.lock.duration.ms", "15000", AlterConfigOpType.SET),
                ("share.session.timeout.ms", "50000", AlterConfigOpType.SET))
    configs = describe(admin, "timed")
    assert [configs[name].value for name in ("share.auto.offset.reset", "share.record.lock.duration.ms",
                                             "share.session.timeout.ms")] == ["by_duration:PT1H", "15000", "50000"]
    looked_up = group_config(running.broker.image, running.broker.config, "timed")
    assert looked_up.share_auto_offset_reset_strategy.list_offsets_timestamp(7_200_000) == 3_600_000
    assert (looked_up.share_record_lock_duration_ms, looked_up.share_session_timeout_ms) == (15000, 50000)


def test_edge_resources_over_a_raw_socket(broker):
    """The empty group name is INVALID_REQUEST, to DescribeConfigs and to a change; the legacy AlterConfigs
    replaces a group's whole set, as Kafka's controller does."""
    from compat_tests.test_errors import call
    from kbroker.wire.schema import API_BY_NAME

    running, admin = broker
    describe_request = API_BY_NAME["DescribeConfigs"].request_class
    body = describe_request(resources=[describe_request.DescribeConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name="", configuration_keys=None)], include_synonyms=True)
    [result] = call(running.port, "DescribeConfigs", 4, body).results
    assert (result.error_code, result.configs) == (ErrorCode.INVALID_REQUEST, [])

    alter_request = API_BY_NAME["AlterConfigs"].request_class
    resource = alter_request.AlterConfigsResource

    def legacy(group, **configs):
        body = alter_request(resources=[resource(resource_type=GROUP_RESOURCE, resource_name=group, configs=[
            resource.AlterableConfig(name=name.replace("_", "."), value=value) for name, value in configs.items()])],
            validate_only=False)
        [answer] = call(running.port, "AlterConfigs", 2, body).responses
        return answer.error_code

    assert legacy("", share_auto_offset_reset="earliest") == ErrorCode.INVALID_REQUEST
    assert legacy("replaced", share_auto_offset_reset="earliest", share_isolation_level="read_committed") == 0
    assert legacy("replaced", share_isolation_level="read_uncommitted") == ErrorCode.NONE
    assert running.broker.image.group_configs["replaced"] == {"share.isolation.level": "read_uncommitted"}


def test_kafka_python_sets_and_describes_a_groups_config(broker):
    import kafka.admin

    running, admin = broker
    client = kafka.admin.KafkaAdminClient(bootstrap_servers=running.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        client.alter_configs([kafka.admin.ConfigResource("GROUP", "python", {
            "share.record.lock.duration.ms": "45000"})], raise_on_unknown=False)
        described = client.describe_configs([kafka.admin.ConfigResource("GROUP", "python")], config_filter="all")
    finally:
        client.close()
    configs = described["group"]["python"]
    assert configs["share.record.lock.duration.ms"]["value"] == "45000"
    assert configs["share.record.lock.duration.ms"]["config_source"] == "DYNAMIC_GROUP_CONFIG"
    assert configs["share.auto.offset.reset"]["config_source"] == "DEFAULT_CONFIG"


def test_kafkas_java_admin_client_sets_describes_and_deletes_a_groups_config(java_harness, broker):
    """Kafka's own admin client (kafka-clients 4.3.0), as kafka-configs --entity-type groups drives it."""
    running, admin = broker
    run = java_harness.run("group-configs", running.bootstrap, "java", "SET:share.auto.offset.reset=earliest",
                           "SET:share.auto.offset.reset=sometimes", "SET:no.such.config=1",
                           "DELETE:share.auto.offset.reset")
    assert run.returncode == 0, run.stderr[-2000:]
    seen = [(line["after"], line["entry"]["value"], line["entry"]["source"]) for line in run.of_type("config")]
    assert seen == [("SET:share.auto.offset.reset=earliest", "earliest", "DYNAMIC_GROUP_CONFIG"),
                    ("DELETE:share.auto.offset.reset", "latest", "DEFAULT_CONFIG")]
    assert [(line["step"], line["error"]) for line in run.of_type("error")] == [
        ("SET:share.auto.offset.reset=sometimes", "InvalidConfigurationException"),
        ("SET:no.such.config=1", "InvalidConfigurationException")]


def test_a_groups_config_survives_a_restart(tmp_path):
    with running_broker(str(tmp_path)) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        incremental(admin, "kept", ("share.auto.offset.reset", "earliest", AlterConfigOpType.SET))
    with running_broker(str(tmp_path)) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        configs = describe(admin, "kept")
        assert (configs["share.auto.offset.reset"].value, configs["share.auto.offset.reset"].source) == (
            "earliest", ConfigSource.GROUP_CONFIG.value)
        assert group_config(running.broker.image, running.broker.config, "kept").share_auto_offset_reset == "earliest"


@pytest.mark.slow
def test_on_a_cluster_every_node_sees_a_groups_config(tmp_path):
    """A change sent to any broker is forwarded to the active controller, checked there and written to the
    metadata log; every node then describes it, and a value the controller refuses is INVALID_CONFIG."""
    from testkit.quorum_process import Quorum, until

    cluster = Quorum(tmp_path, combined=True)
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.node(2).bootstrap})
        incremental(admin, "spread", ("share.auto.offset.reset", "earliest", AlterConfigOpType.SET))
        for node in cluster.nodes:
            node_admin = AdminClient({"bootstrap.servers": node.bootstrap})
            until(lambda: describe(node_admin, "spread")["share.auto.offset.reset"].value == "earliest", 20,
                  f"node {node.node_id} to see the group's config")
        assert refused(admin, "spread", ("share.record.lock.duration.ms", "1", AlterConfigOpType.SET)) == (
            confluent_kafka.KafkaError.INVALID_CONFIG)
    finally:
        cluster.close()
