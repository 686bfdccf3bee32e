"""Broker configs changed at runtime (KIP-226), as Kafka changes them: AlterConfigs and
IncrementalAlterConfigs on a BROKER resource, the broker's id for its own values and the empty name
for the cluster-wide default. The change is a metadata record, applied without a restart and kept
across one: a log default reaches every topic without its own value, a listener's key store serves new
connections, a listener's JAAS config lets new users in. DescribeConfigs shows each value's source and
synonyms as Kafka's ConfigHelper does; settings that cannot change at runtime are refused with
Kafka's error and message. On a three-node cluster a default reaches every node and a broker's own
value only that broker."""

from __future__ import annotations

import socket
import ssl
import time

import confluent_kafka
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from testkit import raw_client
from testkit.quorum_process import Quorum, until
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

pytestmark = pytest.mark.timeout(300)

TIMEOUT_S = 10
HOUR_MS = 3600 * 1000
BROKER = ConfigResource.Type.BROKER
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
DescribeConfigsRequest = API_BY_NAME["DescribeConfigs"].request_class
IncrementalAlterConfigsRequest = API_BY_NAME["IncrementalAlterConfigs"].request_class
AlterConfigsRequest = API_BY_NAME["AlterConfigs"].request_class
# A broker that looks for expired segments often; its static retention default is 48 hours.
SETTINGS = {"auto.create.topics.enable": False, "log.retention.check.interval.ms": 100, "log.retention.hours": 48}


def incremental(admin, name: str, *entries: tuple[str, str | None, AlterConfigOpType]):
    """IncrementalAlterConfigs through confluent-kafka (which cannot name the cluster-wide default: see
    alter_default)."""
    resource = ConfigResource(BROKER, name, incremental_configs=[
        ConfigEntry(config, value, incremental_operation=operation) for config, value, operation in entries])
    [future] = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S).values()
    return future.result(timeout=TIMEOUT_S)


def describe_raw(port: int, resource_type: int, name: str, keys=None):
    """DescribeConfigs v4 with synonyms, over a raw connection: every synonym (confluent-kafka keeps one
    per name) and the exact sources."""
    body = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)], include_synonyms=True)
    [result] = raw_client.call(port, "DescribeConfigs", 4, body).results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {entry.name: entry for entry in result.configs}


def synonyms(entry) -> list[tuple[str, str | None, int]]:
    return [(synonym.name, synonym.value, synonym.source) for synonym in entry.synonyms]


def alter_raw(port: int, name: str, *entries: tuple[str, str | None, int], legacy: bool = False):
    """One BROKER resource altered over a raw connection: (error code, error message)."""
    if legacy:
        resource = AlterConfigsRequest.AlterConfigsResource(resource_type=4, resource_name=name, configs=[
            AlterConfigsRequest.AlterConfigsResource.AlterableConfig(name=config, value=value)
            for config, value, _ in entries])
        body = AlterConfigsRequest(resources=[resource], validate_only=False)
        [result] = raw_client.call(port, "AlterConfigs", 2, body).responses
    else:
        resource = IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=4, resource_name=name, configs=[
            IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
                name=config, config_operation=operation, value=value) for config, value, operation in entries])
        body = IncrementalAlterConfigsRequest(resources=[resource], validate_only=False)
        [result] = raw_client.call(port, "IncrementalAlterConfigs", 1, body).responses
    return result.error_code, result.error_message


def alter_default(port: int, *entries: tuple[str, str | None, int]) -> None:
    """IncrementalAlterConfigs on the cluster-wide default (the empty name), over a raw connection:
    librdkafka and kafka-python refuse a BROKER resource without a node id."""
    assert alter_raw(port, "", *entries) == (ErrorCode.NONE, None)


def produce_old_records(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records an hour old, one batch each (so that 1 KiB segments roll between them)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    an_hour_ago = int(time.time() * 1000) - HOUR_MS
    for index in range(count):
        producer.produce(topic, b"v" * 200, key=str(index).encode(), timestamp=an_hour_ago)
        assert producer.flush(TIMEOUT_S) == 0


def log_start(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
    finally:
        consumer.close()
    return low


def until_log_start_passes(bootstrap: str, topic: str, offset: int) -> int:
    return until(lambda: (start := log_start(bootstrap, topic)) > offset and start, 20,
                 f"retention to delete {topic}'s old segments")


# --- (a), (c): a retention default changed at runtime ---

def test_a_retention_default_changed_at_runtime_reaches_topics_without_their_own(tmp_path):
    data = str(tmp_path / "data")
    with running_broker(data, settings=SETTINGS) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        # internal.segment.bytes: Kafka's way below segment.bytes' floor of 1 MiB, for tests
        topics = [NewTopic("follows", 1, config={"internal.segment.bytes": "1024"}),
                  NewTopic("own", 1, config={"internal.segment.bytes": "1024", "retention.ms": str(7 * 24 * HOUR_MS)})]
        for future in admin.create_topics(topics).values():
            future.result(timeout=TIMEOUT_S)
        for topic in ("follows", "own"):
            produce_old_records(running.bootstrap, topic, 20)

        incremental(admin, "1", ("log.retention.ms", "60000", SET))  # this broker's own value
        first = until_log_start_passes(running.bootstrap, "follows", 0)
        assert running.broker.partition("follows", 0).log.config.retention_ms == 60000

        incremental(admin, "1", ("log.retention.ms", None, DELETE))
        assert running.broker.partition("follows", 0).log.config.retention_ms == 48 * HOUR_MS
        produce_old_records(running.bootstrap, "follows", 20)
        alter_default(running.port, ("log.retention.ms", "60000", 0))  # the cluster-wide default
        until_log_start_passes(running.bootstrap, "follows", first)
        assert log_start(running.bootstrap, "own") == 0
        assert running.broker.partition("own", 0).log.config.retention_ms == 7 * 24 * HOUR_MS
        incremental(admin, "1", ("message.max.bytes", "2000000", SET))

    with running_broker(data, settings=SETTINGS) as running:  # (c) both kept across a restart
        assert running.broker.partition("follows", 0).log.config.retention_ms == 60000
        assert running.broker.partition("follows", 0).log.config.max_message_bytes == 2000000
        assert running.broker.partition("own", 0).log.config.retention_ms == 7 * 24 * HOUR_MS
        configs = describe_raw(running.port, 4, "1", ["log.retention.ms", "message.max.bytes"])
        assert (configs["log.retention.ms"].value, configs["log.retention.ms"].config_source) == ("60000", 3)
        assert (configs["message.max.bytes"].value, configs["message.max.bytes"].config_source) == ("2000000", 2)


# --- (e), (f): what DescribeConfigs shows, what is refused ---

@pytest.fixture(scope="module")
def broker():
    with running_broker(settings=SETTINGS) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic("described", 1)])["described"].result(timeout=TIMEOUT_S)
        yield running, admin


def test_describe_shows_each_layer_in_kafkas_order(broker):
    running, admin = broker
    alter_default(running.port, ("log.retention.ms", "120000", 0))
    incremental(admin, "1", ("log.retention.ms", "60000", SET))
    try:
        configs = describe_raw(running.port, 4, "1", ["log.retention.ms", "log.retention.hours", "num.partitions"])
        retention = configs["log.retention.ms"]
        assert (retention.value, retention.config_source, retention.read_only) == ("60000", 2, False)
        assert synonyms(retention) == [("log.retention.ms", "60000", 2), ("log.retention.ms", "120000", 3),
                                       ("log.retention.hours", "48", 4), ("log.retention.hours", "168", 5)]
        hours = configs["log.retention.hours"]
        # As in Kafka: the dynamic log.retention.ms hides its synonyms' static values from the broker's
        # current config (DynamicBrokerConfig.overrideProps), so the value is the default, while the
        # synonyms, read from the layers, still show the static one and name the source.
        assert (hours.value, hours.config_source, hours.read_only) == ("168", 4, True)
        assert synonyms(hours) == [("log.retention.hours", "48", 4), ("log.retention.hours", "168", 5)]
        assert synonyms(configs["num.partitions"]) == [("num.partitions", "1", 5)]

        default = describe_raw(running.port, 4, "")
        assert list(default) == ["log.retention.ms"]
        assert (default["log.retention.ms"].value, default["log.retention.ms"].config_source) == ("120000", 3)
        assert synonyms(default["log.retention.ms"]) == [("log.retention.ms", "120000", 3)]

        topic = describe_raw(running.port, 2, "described", ["retention.ms"])["retention.ms"]
        assert (topic.value, topic.config_source) == ("60000", 2)
        assert synonyms(topic) == synonyms(retention)

        # the same through confluent-kafka's AdminClient
        [future] = admin.describe_configs([ConfigResource(BROKER, "1")], request_timeout=TIMEOUT_S).values()
        described = future.result(timeout=TIMEOUT_S)
        entry = described["log.retention.ms"]
        assert (entry.value, entry.source) == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        entry = described["num.partitions"]
        assert (entry.value, entry.source, entry.is_read_only) == ("1", ConfigSource.DEFAULT_CONFIG.value, True)
    finally:
        incremental(admin, "1", ("log.retention.ms", None, DELETE))
        alter_default(running.port, ("log.retention.ms", None, 1))
    assert describe_raw(running.port, 4, "") == {}


def test_alter_configs_replaces_the_brokers_whole_set(broker):
    running, admin = broker
    assert alter_raw(running.port, "1", ("log.segment.bytes", "2097152", 0), ("log.cleaner.backoff.ms", "1000", 0),
                     legacy=True) == (ErrorCode.NONE, None)
    assert alter_raw(running.port, "1", ("log.segment.bytes", "4194304", 0), legacy=True) == (ErrorCode.NONE, None)
    configs = describe_raw(running.port, 4, "1", ["log.segment.bytes", "log.cleaner.backoff.ms"])
    assert (configs["log.segment.bytes"].value, configs["log.segment.bytes"].config_source) == ("4194304", 2)
    assert (configs["log.cleaner.backoff.ms"].value, configs["log.cleaner.backoff.ms"].config_source) == ("15000", 5)
    assert alter_raw(running.port, "1", legacy=True) == (ErrorCode.NONE, None)
    assert describe_raw(running.port, 4, "1", ["log.segment.bytes"])["log.segment.bytes"].config_source == 5


def test_a_custom_name_is_kept_and_shown_as_kafka_shows_it(broker):
    running, _admin = broker
    assert alter_raw(running.port, "1", ("my.custom.setting", "x", 0)) == (ErrorCode.NONE, None)
    entry = describe_raw(running.port, 4, "1")["my.custom.setting"]
    assert (entry.value, entry.config_source, entry.is_sensitive, entry.read_only) == (None, 2, True, True)
    assert alter_raw(running.port, "1", ("my.custom.setting", None, 1)) == (ErrorCode.NONE, None)


@pytest.mark.parametrize("name, entries, error", [
    ("1", [("num.partitions", "3", 0)], "Cannot update these configs dynamically: Set(num.partitions)"),
    ("", [("log.dirs", "/elsewhere", 0)], "Cannot update these configs dynamically: Set(log.dirs)"),
    ("1", [("ssl.keystore.location", "/x.pem", 0)],
     "These security configs can be dynamically updated only per-listener using the listener prefix: "
     "Set(ssl.keystore.location)"),
    ("", [("listener.name.ssl.ssl.keystore.location", "/x.pem", 0)],
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(listener.name.ssl.ssl.keystore.location)"),
    ("2", [("log.retention.ms", "1000", 0)], "Unexpected broker id, expected 1, but received 2"),
    ("one", [("log.retention.ms", "1000", 0)], "Node id must be an integer, but it is: one"),
    ("1", [("log.retention.ms", "1000", 0), ("log.retention.ms", "2000", 0)], "Error due to duplicate config keys"),
    ("1", [("log.retention.ms", None, 0)], "Null value not supported for : log.retention.ms"),
])
def test_what_cannot_change_is_refused_with_kafkas_error(broker, name, entries, error):
    running, admin = broker
    assert alter_raw(running.port, name, *entries) == (ErrorCode.INVALID_REQUEST, error)
    if not any(value is None for _, value, _ in entries) and len(entries) == 1:
        assert alter_raw(running.port, name, *entries, legacy=True) == (ErrorCode.INVALID_REQUEST, error)
    assert describe_raw(running.port, 4, "") == {}


def test_an_invalid_value_is_refused(broker):
    running, admin = broker
    code, message = alter_raw(running.port, "1", ("log.retention.ms", "soon", 0))
    assert code == ErrorCode.INVALID_REQUEST
    assert message.startswith("Invalid value soon for configuration log.retention.ms: ")
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        incremental(admin, "1", ("num.partitions", "3", SET))
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REQUEST


# --- (b), (c): a TLS listener's key store, and a SASL listener's JAAS config ---

def test_a_listener_key_store_replaced_at_runtime_serves_new_connections(tmp_path):
    from testkit.secure_broker import PLAIN_JAAS, SecureBroker, make_certificates, trustme

    certificates = make_certificates(tmp_path)
    new_ca = trustme.CA()
    new_ca_path, new_chain_path = str(tmp_path / "new_ca.pem"), str(tmp_path / "new_broker.pem")
    new_ca.cert_pem.write_to_path(new_ca_path)
    issued = new_ca.issue_cert("127.0.0.1", "localhost")
    issued.private_key_and_cert_chain_pem.write_to_path(new_chain_path)
    new_certificate = ssl.PEM_cert_to_DER_cert(issued.cert_chain_pems[0].bytes().decode())

    process = SecureBroker(tmp_path / "data", certificates)
    process.start()
    try:
        admin = AdminClient(process.confluent_config("PLAINTEXT"))
        assert served_certificate(process) != new_certificate
        assert not lists_topics({**process.confluent_config("SSL"), "ssl.ca.location": new_ca_path})
        carol = {**process.confluent_config("PLAIN", "carol", "carol-secret")}
        assert not lists_topics(carol)

        jaas = PLAIN_JAAS.replace('user_bob="bob-secret"', 'user_bob="bob-secret" user_carol="carol-secret"')
        incremental(admin, "1", ("listener.name.ssl.ssl.keystore.location", new_chain_path, SET),
                    ("listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas, SET))
        assert served_certificate(process) == new_certificate
        assert lists_topics({**process.confluent_config("SSL"), "ssl.ca.location": new_ca_path})
        assert lists_topics(carol)
        entry = describe_raw(process.ports["PLAINTEXT"], 4, "1")["listener.name.ssl.ssl.keystore.location"]
        assert (entry.value, entry.config_source, entry.read_only) == (new_chain_path, 2, True)
        assert synonyms(entry) == [("listener.name.ssl.ssl.keystore.location", new_chain_path, 2),
                                   ("ssl.keystore.location", certificates.broker, 4)]
        code, message = alter_raw(process.ports["PLAINTEXT"], "1",
                                  ("listener.name.ssl.ssl.keystore.location", str(tmp_path / "absent.pem"), 0))
        assert code == ErrorCode.INVALID_REQUEST
        assert message.startswith("Validation of dynamic config update of listener.name.ssl.ssl.keystore.location "
                                  "failed: listener SSL: cannot load its TLS key store"), message
        assert served_certificate(process) == new_certificate

        process.kill()
        process.start()  # (c) the same data: the new key store and users are served from the start
        assert served_certificate(process) == new_certificate
        assert lists_topics(carol)
    finally:
        process.kill()


def served_certificate(process) -> bytes:
    """The certificate a new TLS connection to the SSL listener is served (DER)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.load_cert_chain(process.certificates.client_cert, process.certificates.client_key)
    with socket.create_connection(("127.0.0.1", process.ports["SSL"]), timeout=TIMEOUT_S) as connection:
        with context.wrap_socket(connection) as tls:
            return tls.getpeercert(binary_form=True)


def lists_topics(config: dict) -> bool:
    try:
        AdminClient(config).list_topics(timeout=3)
    except confluent_kafka.KafkaException:
        return False
    return True


# --- (d): on a three-node cluster ---

def test_on_a_cluster_a_default_reaches_every_node_and_a_brokers_value_only_its_own(tmp_path):
    cluster = Quorum(tmp_path, combined=True)
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap})
        admin.create_topics([NewTopic("spread", 3, 3)])["spread"].result(timeout=30)
        alter_default(cluster.node(1).client_port, ("log.retention.ms", "120000", 0))
        incremental(admin, "2", ("message.max.bytes", "2000000", SET))

        def applied(node) -> bool:
            configs = describe_raw(node.client_port, 4, str(node.node_id), ["log.retention.ms", "message.max.bytes"])
            topic = describe_raw(node.client_port, 2, "spread", ["retention.ms", "max.message.bytes"])
            own = node.node_id == 2
            return ((configs["log.retention.ms"].value, configs["log.retention.ms"].config_source) == ("120000", 3)
                    and (configs["message.max.bytes"].config_source == 2) == own
                    and (configs["message.max.bytes"].value == "2000000") == own
                    and topic["retention.ms"].value == "120000"
                    and (topic["max.message.bytes"].value == "2000000") == own)

        for node in cluster.nodes:
            until(lambda: applied(node), 20, f"node {node.node_id} to apply the dynamic configs")
        code, message = alter_raw(cluster.node(1).client_port, "2", ("log.retention.ms", "1", 0))
        assert (code, message) == (ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2")
        code, message = alter_raw(cluster.node(3).client_port, "", ("num.partitions", "3", 0))
        assert (code, message) == (ErrorCode.INVALID_REQUEST,
                                   "Cannot update these configs dynamically: Set(num.partitions)")
    finally:
        cluster.close()

