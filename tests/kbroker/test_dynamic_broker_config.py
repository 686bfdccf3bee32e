"""Dynamic broker configs (KIP-226) without a broker: which settings change at runtime and at what level,
the checks and their messages (Kafka's DynamicBrokerConfig.validateConfigs), the incremental operations
(ConfigAdminManager.prepareIncrementalConfigs), the overlay (static, then the cluster-wide default, then
the broker's own values) and the synonyms DescribeConfigs shows (ConfigHelper.configSynonyms)."""

import pytest

from kbroker.config import BrokerConfig
from kbroker.config.sources import Source
from kbroker.config.definitions import LONG_MAX
from kbroker.config.dynamic import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    ConfigLayers,
    DynamicConfigError,
    apply_incremental,
    check_dynamic_configs,
    synonyms_of,
)

HOUR_MS = 3600 * 1000


def static(**settings):
    return BrokerConfig.from_mapping({name.replace("_", "."): value for name, value in settings.items()})


def layers(config=None, default=None, per_broker=None):
    return ConfigLayers(config or static(), default or {}, per_broker or {})


# --- the overlay ---

def test_the_brokers_own_value_beats_the_cluster_default_which_beats_the_static_setting():
    config = static(log_retention_hours=48)
    assert layers(config).effective.get("log.retention.ms") == 48 * HOUR_MS
    default_only = layers(config, {"log.retention.ms": "120000"}).effective
    assert default_only.get("log.retention.ms") == 120000
    assert default_only.source("log.retention.ms").source is Source.DYNAMIC_DEFAULT
    both = layers(config, {"log.retention.ms": "120000"}, {"log.retention.ms": "60000"}).effective
    assert both.get("log.retention.ms") == 60000
    assert both.source("log.retention.ms").source is Source.DYNAMIC_BROKER
    assert both.log_config().retention_ms == 60000
    assert both.get("log.retention.hours") == 168  # Kafka drops a dynamic value's synonyms from the layers below


def test_a_dynamic_value_drops_its_synonyms_from_the_layers_below_as_kafka_does():
    config = static(log_flush_scheduler_interval_ms=5000, log_roll_hours=2)
    effective = layers(config, {"log.flush.interval.ms": "100"}, {"log.roll.ms": "1000"}).effective
    assert effective.get("log.flush.interval.ms") == 100
    assert effective.declared("log.flush.scheduler.interval.ms") == LONG_MAX  # Kafka's overrideProps
    assert effective.get("log.roll.ms") == 1000 and effective.declared("log.roll.hours") == 168


def test_sources_map_to_describe_configs_sources():
    assert (Source.DYNAMIC_BROKER.kafka_config_source, Source.DYNAMIC_DEFAULT.kafka_config_source) == (2, 3)
    assert (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG) == (2, 3, 4, 5)


def test_custom_names_are_kept_but_change_nothing():
    effective = layers(None, {"my.custom.setting": "x"}, {"another.one": "y"}).effective
    assert "my.custom.setting" not in effective.originals and effective.get("num.partitions") == 1


def test_a_listener_key_store_given_per_broker_serves_that_listener_only():
    config = static(listeners="PLAINTEXT://localhost:9092,SSL://localhost:9093",
                    ssl_keystore_location="/old.pem")
    effective = layers(config, {}, {"listener.name.ssl.ssl.keystore.location": "/new.pem"}).effective
    assert effective.for_listener("SSL", "ssl.keystore.location") == "/new.pem"
    assert effective.for_listener("PLAINTEXT", "ssl.keystore.location") == "/old.pem"


def test_an_overlay_the_static_settings_refuse_names_the_setting():
    with pytest.raises(Exception, match="log.retention.ms"):
        layers(None, {}, {"log.retention.ms": "0"}).effective


# --- what may change, and where ---

@pytest.mark.parametrize("name", ["log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms",
                                  "log.cleanup.policy", "log.flush.interval.messages", "log.flush.interval.ms",
                                  "message.max.bytes", "log.cleaner.backoff.ms", "log.cleaner.delete.retention.ms",
                                  "log.cleaner.min.cleanable.ratio", "max.connections", "min.insync.replicas",
                                  "compression.type"])
def test_cluster_wide_settings_change_per_broker_or_for_all(name):
    value = {"log.cleanup.policy": "compact", "compression.type": "zstd",
             "log.cleaner.min.cleanable.ratio": "0.3"}.get(name, "1000")
    check_dynamic_configs({name: value}, per_broker=True)
    check_dynamic_configs({name: value}, per_broker=False)


@pytest.mark.parametrize("name", ["listener.name.ssl.ssl.keystore.location", "listener.name.ssl.ssl.keystore.key",
                                  "listener.name.ssl.ssl.keystore.certificate.chain",
                                  "listener.name.ssl.ssl.truststore.location",
                                  "listener.name.sasl_plaintext.plain.sasl.jaas.config"])
def test_listener_key_stores_and_jaas_configs_change_per_broker_only(name):
    check_dynamic_configs({name: "x"}, per_broker=True)
    with pytest.raises(DynamicConfigError) as refused:
        check_dynamic_configs({name: "x"}, per_broker=False)
    assert str(refused.value) == ("Cannot update these configs at default cluster level, broker id must be "
                                  f"specified: Set({name})")


@pytest.mark.parametrize("names", [["num.partitions"], ["log.dirs", "auto.create.topics.enable"],
                                   ["log.retention.hours"], ["log.roll.hours"], ["num.io.threads"],
                                   ["listeners"], ["sasl.jaas.config"]])
def test_read_only_settings_are_refused_with_kafkas_message(names):
    with pytest.raises(DynamicConfigError) as refused:
        check_dynamic_configs({name: "1" for name in names}, per_broker=True)
    assert str(refused.value) == f"Cannot update these configs dynamically: Set({', '.join(sorted(names))})"


def test_a_listener_setting_that_is_not_a_key_store_is_refused():
    with pytest.raises(DynamicConfigError) as refused:
        check_dynamic_configs({"listener.name.ssl.ssl.client.auth": "none"}, per_broker=True)
    assert str(refused.value) == "Cannot update these configs dynamically: Set(listener.name.ssl.ssl.client.auth)"


def test_key_stores_change_only_with_a_listener_prefix():
    with pytest.raises(DynamicConfigError) as refused:
        check_dynamic_configs({"ssl.keystore.location": "/x.pem"}, per_broker=True)
    assert str(refused.value) == ("These security configs can be dynamically updated only per-listener using the "
                                  "listener prefix: Set(ssl.keystore.location)")


@pytest.mark.parametrize("name, value, named", [
    ("log.retention.ms", "soon", "log.retention.ms"), ("log.cleanup.policy", "shred", "log.cleanup.policy"),
    ("message.max.bytes", "-5", "message.max.bytes"),
    ("listener.name.ssl.ssl.keystore.type", "JKS", "ssl.keystore.type")])  # Kafka names the plain setting
def test_values_are_checked_by_type_and_rule(name, value, named):
    with pytest.raises(DynamicConfigError, match=f"^Invalid value {value} for configuration {named}: "):
        check_dynamic_configs({name: value}, per_broker=True)


def test_names_kafka_does_not_know_are_accepted_as_kafka_accepts_custom_configs():
    check_dynamic_configs({"my.custom.setting": "anything"}, per_broker=False)


# --- IncrementalAlterConfigs' operations on a broker resource ---

def test_set_delete_append_subtract():
    current = {"log.retention.ms": "1000", "log.cleanup.policy": "compact"}
    changed = apply_incremental(current, [("log.retention.ms", 1, None), ("log.segment.bytes", 0, "2048"),
                                          ("log.cleanup.policy", 2, "delete")])
    assert changed == {"log.segment.bytes": "2048", "log.cleanup.policy": "compact,delete"}
    assert current == {"log.retention.ms": "1000", "log.cleanup.policy": "compact"}  # untouched
    assert apply_incremental({}, [("log.cleanup.policy", 2, "compact")]) == {"log.cleanup.policy": "delete,compact"}
    assert apply_incremental(changed, [("log.cleanup.policy", 3, "compact")])["log.cleanup.policy"] == "delete"


def test_append_to_a_setting_that_is_not_a_list_is_refused():
    with pytest.raises(DynamicConfigError) as refused:
        apply_incremental({}, [("log.retention.ms", 2, "5")])
    assert str(refused.value) == "Config value append is not allowed for config key: log.retention.ms"
    assert refused.value.error_code == 40  # INVALID_CONFIG


# --- synonyms, as DescribeConfigs lists them ---

def test_kafkas_synonym_names():
    assert synonyms_of("log.retention.hours") == ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    assert synonyms_of("log.flush.interval.ms") == ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    assert synonyms_of("log.flush.scheduler.interval.ms") == ["log.flush.scheduler.interval.ms"]
    assert synonyms_of("listener.name.ssl.ssl.keystore.location") == ["listener.name.ssl.ssl.keystore.location",
                                                                       "ssl.keystore.location"]
    assert synonyms_of("listener.name.sasl_plaintext.plain.sasl.jaas.config") == [
        "listener.name.sasl_plaintext.plain.sasl.jaas.config", "sasl.jaas.config"]


def test_synonyms_go_layer_by_layer_from_the_first_named_as_asked():
    described = layers(static(log_retention_hours=48), {"log.retention.ms": "120000"}, {"log.retention.ms": "60000"})
    assert described.synonyms("log.retention.ms") == [
        ("log.retention.ms", "60000", DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "120000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "48", STATIC_BROKER_CONFIG), ("log.retention.hours", "168", DEFAULT_CONFIG)]
    assert described.synonyms("log.retention.hours") == [
        ("log.retention.hours", "48", STATIC_BROKER_CONFIG), ("log.retention.hours", "168", DEFAULT_CONFIG)]
    # Unset, log.retention.ms has no synonym of its own name, so Kafka lists none for it.
    assert layers(static(log_retention_hours=48)).synonyms("log.retention.ms") == []


def test_a_sensitive_synonym_hides_its_value():
    described = layers(None, {}, {"listener.name.sasl_plaintext.plain.sasl.jaas.config": "secret"})
    assert described.synonyms("listener.name.sasl_plaintext.plain.sasl.jaas.config", sensitive=True) == [
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", None, DYNAMIC_BROKER_CONFIG)]


# --- the records in the image ---

def test_broker_config_records_build_the_image_and_its_snapshot():
    from kbroker.controller.state import image_records
    from kbroker.metadata.image import BROKER_RESOURCE, MetadataImage, apply_record
    from kbroker.metadata.records import ConfigRecord

    def record(resource, name, value):
        return ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=resource, name=name, value=value)

    image = MetadataImage(cluster_id="c", controller_id=1)
    for change in (record("", "log.retention.ms", "60000"), record("2", "message.max.bytes", "2000000"),
                   record("2", "log.segment.bytes", "1048576"), record("2", "log.segment.bytes", None)):
        image = apply_record(image, change)
    assert image.broker_configs == {"": {"log.retention.ms": "60000"}, "2": {"message.max.bytes": "2000000"}}
    again = apply_record(image, record("2", "message.max.bytes", "2000000"))
    assert again.broker_configs == image.broker_configs
    assert again.broker_configs["2"] is not image.broker_configs["2"]  # brokers see the write, and reload
    assert again.broker_configs[""] is image.broker_configs[""]
    gone = apply_record(image, record("2", "message.max.bytes", None))
    assert "2" not in gone.broker_configs
    rebuilt = MetadataImage(cluster_id="c", controller_id=1)
    for change in image_records(image):
        rebuilt = apply_record(rebuilt, change)
    assert rebuilt.broker_configs == image.broker_configs
    assert ConfigLayers.of(static(), image, 2).per_broker == {"message.max.bytes": "2000000"}
    assert ConfigLayers.of(static(), image, 3).effective.get("log.retention.ms") == 60000
