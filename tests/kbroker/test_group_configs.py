"""Group configs (resource type 32) without a broker: Kafka 4.2's names, types and defaults (GroupConfig), the
broker settings they fall back on, the checks and errors of a change (ConfigAdminManager.preprocess,
ControllerConfigurationValidator, GroupConfig.validate), the records and the image they build, what
DescribeConfigs shows (ConfigHelper.createGroupConfigEntry), what coordinators read (group_config), and the
config handlers on an in-memory lone broker."""

import pytest
import trio

from kbroker.config import BrokerConfig
from kbroker.config import group_configs
from kbroker.config.admin import ConfigsError
from kbroker.config.definitions import SETTINGS_BY_NAME
from kbroker.config.dynamic import APPEND, DEFAULT_CONFIG, DELETE, SET, STATIC_BROKER_CONFIG, SUBTRACT, ConfigLayers
from kbroker.config.group_config_admin import GROUP_CONFIG, describe_group, plan_group_change
from kbroker.config.group_configs import (GROUP_SETTINGS, KAFKA_GROUP_SETTING_DEFAULTS, InvalidGroupConfig,
                                          ShareAutoOffsetReset, broker_group_setting, check_group_configs,
                                          group_config, iso_duration_ns)
from kbroker.controller.state import image_records
from kbroker.handlers import alter_configs, describe_configs, incremental_alter_configs
from kbroker.metadata.image import GROUP_RESOURCE, MetadataImage, apply_record
from kbroker.metadata.records import ConfigRecord
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME
from tests.kbroker.in_memory_parts import RefusingAuthorization, answer_of

EMPTY = MetadataImage(cluster_id="c", controller_id=1)
KAFKA_42_NAMES = {
    "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms", "share.auto.offset.reset",
    "share.heartbeat.interval.ms", "share.isolation.level", "share.record.lock.duration.ms",
    "share.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.initial.rebalance.delay.ms",
    "streams.num.standby.replicas", "streams.session.timeout.ms",
}


def broker(monkeypatch=None, **settings) -> BrokerConfig:
    """A broker's settings, by Kafka's names with underscores; one kbroker does not define yet is given
    through the fallback table (so the test holds before and after definitions.py has it)."""
    named = {name.replace("_", "."): value for name, value in settings.items()}
    for name in [name for name in named if name not in SETTINGS_BY_NAME]:
        monkeypatch.setitem(KAFKA_GROUP_SETTING_DEFAULTS, name, named.pop(name))
    return BrokerConfig.from_mapping(named)


def image_with(*changes, image=EMPTY) -> MetadataImage:
    for change in changes:
        image = apply_record(image, change)
    return image


def record(group, name, value):
    return ConfigRecord(resource_type=GROUP_RESOURCE, resource_name=group, name=name, value=value)


def refused(code, call, *args, **kwargs) -> str:
    with pytest.raises(ConfigsError) as raised:
        call(*args, **kwargs)
    assert raised.value.error_code == code, raised.value.message
    return raised.value.message


# --- the configs, their defaults ---

def test_the_group_configs_are_kafka_4_2s_with_their_types_and_defaults():
    assert {group.name for group in GROUP_SETTINGS} == KAFKA_42_NAMES
    config = group_config(EMPTY, BrokerConfig(), "g")
    assert (config.consumer_session_timeout_ms, config.consumer_heartbeat_interval_ms) == (45000, 5000)
    assert (config.share_session_timeout_ms, config.share_heartbeat_interval_ms) == (45000, 5000)
    assert (config.share_record_lock_duration_ms, config.share_delivery_count_limit) == (30000, 5)
    assert (config.share_auto_offset_reset, config.share_isolation_level) == ("latest", "read_uncommitted")
    assert (config.streams_session_timeout_ms, config.streams_heartbeat_interval_ms) == (45000, 5000)
    assert (config.streams_num_standby_replicas, config.streams_initial_rebalance_delay_ms) == (0, 3000)


def test_defaults_are_the_brokers_settings(monkeypatch):
    config = broker(monkeypatch, group_consumer_session_timeout_ms=50000, group_share_record_lock_duration_ms=20000)
    assert group_config(EMPTY, config, "g").consumer_session_timeout_ms == 50000
    assert group_config(EMPTY, config, "g").share_record_lock_duration_ms == 20000


def test_a_broker_setting_kbroker_does_not_define_yet_takes_kafkas_default():
    for name, default in KAFKA_GROUP_SETTING_DEFAULTS.items():
        expected = SETTINGS_BY_NAME[name].default if name in SETTINGS_BY_NAME else default
        assert broker_group_setting(BrokerConfig(), name) == expected, name


# --- a group's own values ---

def test_a_groups_values_lie_over_the_brokers_and_only_that_groups():
    image = image_with(record("g", "share.auto.offset.reset", "earliest"), record("g", "share.record.lock.duration.ms",
                                                                                   "20000"))
    config = group_config(image, BrokerConfig(), "g")
    assert (config.share_auto_offset_reset, config.share_record_lock_duration_ms) == ("earliest", 20000)
    assert group_config(image, BrokerConfig(), "other").share_auto_offset_reset == "latest"


def test_a_value_outside_bounds_the_broker_later_narrowed_is_brought_within(monkeypatch):
    image = image_with(record("g", "share.record.lock.duration.ms", "50000"),
                       record("g", "consumer.heartbeat.interval.ms", "6000"))
    config = broker(monkeypatch, group_share_max_record_lock_duration_ms=40000,
                    group_consumer_min_heartbeat_interval_ms=7000, group_consumer_heartbeat_interval_ms=7000)
    assert group_config(image, config, "g").share_record_lock_duration_ms == 40000
    assert group_config(image, config, "g").consumer_heartbeat_interval_ms == 7000


def test_a_stored_value_that_does_not_parse_or_is_not_a_group_config_is_ignored():
    image = image_with(record("g", "share.session.timeout.ms", "soon"), record("g", "no.such.config", "1"))
    assert group_config(image, BrokerConfig(), "g").share_session_timeout_ms == 45000


# --- share.auto.offset.reset ---

@pytest.mark.parametrize("text, strategy, duration_ns", [
    ("earliest", "earliest", 0), ("latest", "latest", 0), ("by_duration:PT0S", "by_duration", 0),
    ("by_duration:P1DT2H3M4.5S", "by_duration", ((26 * 60 + 3) * 60 + 4) * 10**9 + 5 * 10**8),
    ("by_duration:pt1h", "by_duration", 3600 * 10**9), ("by_duration:PT-1M90S", "by_duration", 30 * 10**9),
])
def test_share_auto_offset_reset_takes_kafkas_strategies(text, strategy, duration_ns):
    assert ShareAutoOffsetReset.parse(text) == ShareAutoOffsetReset(strategy, duration_ns)


@pytest.mark.parametrize("text", ["none", "EARLIEST", "Latest", "by_duration", "by_duration:", "by_duration:P",
                                  "by_duration:PT", "by_duration:-PT1H", "by_duration:PT1H30", "by_duration:P1Y",
                                  "by_duration:PT1.5M", "by_duration: PT1H", "hello"])
def test_share_auto_offset_reset_refuses_what_kafka_refuses(text):
    with pytest.raises(ValueError):
        ShareAutoOffsetReset.parse(text)


def test_the_start_timestamp_of_each_strategy():
    assert ShareAutoOffsetReset.parse("earliest").list_offsets_timestamp(10_000) == -2
    assert ShareAutoOffsetReset.parse("latest").list_offsets_timestamp(10_000) == -1
    assert ShareAutoOffsetReset.parse("by_duration:PT1.0005S").list_offsets_timestamp(10_000) == 8_999
    assert iso_duration_ns("-PT-2S") == 2 * 10**9 and iso_duration_ns("+P1D") == 86400 * 10**9


def test_the_lookup_gives_the_text_and_its_strategy():
    image = image_with(record("g", "share.auto.offset.reset", "by_duration:PT10M"))
    config = group_config(image, BrokerConfig(), "g")
    assert config.share_auto_offset_reset == "by_duration:PT10M"
    assert config.share_auto_offset_reset_strategy == ShareAutoOffsetReset("by_duration", 600 * 10**9)


# --- the checks (GroupConfig.validate) ---

@pytest.mark.parametrize("texts, message", [
    ({"no.such.config": "1"}, "Unknown group config name: no.such.config"),
    ({"share.auto.offset.reset": "none"}, "Invalid value none for configuration share.auto.offset.reset"),
    ({"share.isolation.level": "serializable"}, "Invalid value serializable for configuration share.isolation"),
    ({"share.record.lock.duration.ms": "soon"}, "Invalid value soon for configuration share.record.lock"),
    ({"share.record.lock.duration.ms": "999"}, "Invalid value 999 for configuration share.record.lock"),
    ({"consumer.session.timeout.ms": "0"}, "Invalid value 0 for configuration consumer.session.timeout.ms"),
    ({"share.record.lock.duration.ms": "14999"},
     "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"share.record.lock.duration.ms": "60001"},
     "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"),
    ({"consumer.heartbeat.interval.ms": "4999"},
     "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"share.session.timeout.ms": "60001"},
     "share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
    ({"streams.num.standby.replicas": "3"},
     "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
    ({"streams.initial.rebalance.delay.ms": "-1"}, "Invalid value -1 for configuration streams.initial"),
])
def test_what_groupconfig_refuses(texts, message):
    with pytest.raises(InvalidGroupConfig) as raised:
        check_group_configs(BrokerConfig(), texts)
    assert str(raised.value).startswith(message)
    assert raised.value.error_code == ErrorCode.INVALID_CONFIG


def test_a_session_timeout_must_exceed_its_heartbeat_interval_with_the_brokers_values_for_the_rest(monkeypatch):
    config = broker(monkeypatch, group_share_max_heartbeat_interval_ms=50000)
    with pytest.raises(InvalidGroupConfig, match="share.session.timeout.ms must be greater than share.heartbeat"):
        check_group_configs(config, {"share.heartbeat.interval.ms": "45000"})
    check_group_configs(config, {"share.heartbeat.interval.ms": "44999"})


def test_what_groupconfig_accepts():
    check_group_configs(BrokerConfig(), {
        "share.auto.offset.reset": " by_duration:P2D ", "share.isolation.level": "read_committed",
        "share.record.lock.duration.ms": "15000", "consumer.session.timeout.ms": "60000",
        "streams.num.standby.replicas": "2", "streams.initial.rebalance.delay.ms": "0"})


def test_the_brokers_own_values_are_not_held_to_the_bounds(monkeypatch):
    real = group_configs.broker_group_setting
    monkeypatch.setattr(group_configs, "broker_group_setting",  # below Kafka's minimum, which Kafka refuses at start
                        lambda config, name: 30000 if name == "group.consumer.session.timeout.ms" else real(config, name))
    check_group_configs(BrokerConfig(), {"share.auto.offset.reset": "earliest"})


# --- planning a change (preprocess, then the controller's checks) ---

def test_a_change_is_the_records_of_the_values_that_change():
    image = image_with(record("g", "share.auto.offset.reset", "earliest"), record("g", "share.session.timeout.ms",
                                                                                   "50000"))
    records = plan_group_change(BrokerConfig(), image, "g", [
        ("share.auto.offset.reset", SET, "earliest"), ("share.isolation.level", SET, "read_committed"),
        ("share.session.timeout.ms", DELETE, None), ("streams.session.timeout.ms", DELETE, None)], legacy=False)
    assert records == [record("g", "share.isolation.level", "read_committed"),
                       record("g", "share.session.timeout.ms", None)]


def test_the_legacy_alter_configs_replaces_the_groups_whole_set():
    image = image_with(record("g", "share.auto.offset.reset", "earliest"))
    records = plan_group_change(BrokerConfig(), image, "g", [("share.isolation.level", SET, "read_committed")],
                                legacy=True)
    assert records == [record("g", "share.isolation.level", "read_committed"),
                       record("g", "share.auto.offset.reset", None)]


@pytest.mark.parametrize("group, changes, legacy, code, message", [
    ("g", [("share.auto.offset.reset", SET, "earliest")] * 2, False, ErrorCode.INVALID_REQUEST,
     "Error due to duplicate config keys"),
    ("g", [("share.auto.offset.reset", SET, None)], False, ErrorCode.INVALID_REQUEST, "Null value not supported"),
    ("g", [("share.auto.offset.reset", SET, None)], True, ErrorCode.INVALID_REQUEST, "Null value not supported"),
    ("", [("share.auto.offset.reset", SET, "earliest")], False, ErrorCode.INVALID_REQUEST,
     "Default group resources are not allowed."),
    ("g", [("share.auto.offset.reset", APPEND, "earliest")], False, ErrorCode.INVALID_CONFIG,
     "Can't APPEND to key share.auto.offset.reset because its type is not LIST."),
    ("g", [("no.such.config", SUBTRACT, "1")], False, ErrorCode.INVALID_CONFIG, "Can't SUBTRACT to key"),
    ("g", [("share.auto.offset.reset", 9, "earliest")], False, ErrorCode.INVALID_REQUEST, "Unknown alter config"),
    ("g", [("share.auto.offset.reset", SET, "sometime")], False, ErrorCode.INVALID_CONFIG, "Invalid value sometime"),
    ("g", [("no.such.config", SET, "1")], True, ErrorCode.INVALID_CONFIG, "Unknown group config name"),
])
def test_what_a_change_is_refused_with(group, changes, legacy, code, message):
    assert refused(code, plan_group_change, BrokerConfig(), EMPTY, group, changes, legacy).startswith(message)


def test_deleting_a_value_the_group_does_not_have_changes_nothing():
    assert plan_group_change(BrokerConfig(), EMPTY, "g", [("no.such.config", DELETE, None)], legacy=False) == []


# --- the records in the image ---

def test_group_config_records_build_the_image_and_its_snapshot():
    image = image_with(record("g", "share.auto.offset.reset", "earliest"), record("h", "share.isolation.level",
                                                                                   "read_committed"),
                       record("h", "share.session.timeout.ms", "50000"), record("h", "share.session.timeout.ms", None))
    assert image.group_configs == {"g": {"share.auto.offset.reset": "earliest"},
                                   "h": {"share.isolation.level": "read_committed"}}
    assert image.broker_configs == {} and image.version == 4
    assert "g" not in apply_record(image, record("g", "share.auto.offset.reset", None)).group_configs
    rebuilt = image_with(*image_records(image))
    assert rebuilt.group_configs == image.group_configs


def test_a_config_record_of_an_unknown_resource_type_changes_only_the_version():
    image = apply_record(EMPTY, ConfigRecord(resource_type=16, resource_name="subscription", name="metrics",
                                             value="a"))
    assert (image.group_configs, image.broker_configs, image.version) == ({}, {}, 1)


# --- DescribeConfigs ---

def entries_of(image, config=None, keys=None, group="g"):
    return {entry.name: entry for entry in describe_group(ConfigLayers(config or BrokerConfig()), image, group, keys)}


def test_describe_shows_every_config_with_its_source_and_synonyms():
    image = image_with(record("g", "share.auto.offset.reset", "earliest"),
                       record("g", "share.record.lock.duration.ms", " 20000 "))
    config = BrokerConfig.from_mapping({"group.consumer.session.timeout.ms": 50000})
    entries = entries_of(image, config)
    assert list(entries) == sorted(KAFKA_42_NAMES)
    reset = entries["share.auto.offset.reset"]
    assert (reset.value, reset.source, reset.config_type, reset.read_only, reset.sensitive) == (
        "earliest", GROUP_CONFIG, 2, False, False)
    assert [(s.name, s.value, s.source) for s in reset.synonyms] == [
        ("share.auto.offset.reset", "earliest", GROUP_CONFIG), ("share.auto.offset.reset", "latest", DEFAULT_CONFIG)]
    lock = entries["share.record.lock.duration.ms"]
    assert (lock.value, lock.source, lock.config_type) == ("20000", GROUP_CONFIG, 3)
    assert [(s.name, s.source) for s in lock.synonyms][0] == ("share.record.lock.duration.ms", GROUP_CONFIG)
    assert lock.synonyms[1].name == "group.share.record.lock.duration.ms"
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.source) == ("50000", STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("group.consumer.session.timeout.ms", "50000", STATIC_BROKER_CONFIG),
        ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG)]
    isolation = entries["share.isolation.level"]
    assert (isolation.value, isolation.source) == ("read_uncommitted", DEFAULT_CONFIG)
    assert all(entry.documentation for entry in entries.values())


def test_describe_filters_by_key_and_needs_a_group_name():
    assert list(entries_of(EMPTY, keys=["share.auto.offset.reset", "no.such"])) == ["share.auto.offset.reset"]
    assert refused(ErrorCode.INVALID_REQUEST, entries_of, EMPTY, group="") == "Group name must not be empty"


# --- the handlers, on a lone broker in memory ---

class LoneBroker:
    """The parts of a lone broker (its own controller) the config handlers read; ``submit`` applies."""

    forwards, is_active, node_id, listener_protocols = False, True, 1, []

    def __init__(self, refused=()) -> None:
        self.static_config = self.config = BrokerConfig()
        self.config_layers = ConfigLayers(self.config)
        self.image = EMPTY
        self.authorization = RefusingAuthorization(refused)
        self.write_lock = trio.Lock()

    async def submit(self, changes):
        self.image = image_with(*changes, image=self.image)
        return None


def incremental_request(group, *configs, validate_only=False):
    request = API_BY_NAME["IncrementalAlterConfigs"].request_class
    resource = request.AlterConfigsResource
    return request(resources=[resource(resource_type=GROUP_RESOURCE, resource_name=group, configs=[
        resource.AlterableConfig(name=name, config_operation=operation, value=value)
        for name, operation, value in configs])], validate_only=validate_only)


def legacy_request(group, **configs):
    request = API_BY_NAME["AlterConfigs"].request_class
    resource = request.AlterConfigsResource
    return request(resources=[resource(resource_type=GROUP_RESOURCE, resource_name=group, configs=[
        resource.AlterableConfig(name=name.replace("_", "."), value=value) for name, value in configs.items()])],
        validate_only=False)


def describe_request(group):
    request = API_BY_NAME["DescribeConfigs"].request_class
    return request(resources=[request.DescribeConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group,
                                                              configuration_keys=None)],
                   include_synonyms=True, include_documentation=True)


@pytest.mark.trio
async def test_the_handlers_set_describe_and_delete_a_groups_config():
    node = LoneBroker()
    change = incremental_request("g", ("share.auto.offset.reset", SET, "earliest"))
    [result] = (await answer_of(incremental_alter_configs, node, "IncrementalAlterConfigs", 1, change)).responses
    assert (result.error_code, result.resource_type, result.resource_name) == (ErrorCode.NONE, GROUP_RESOURCE, "g")
    assert node.image.group_configs == {"g": {"share.auto.offset.reset": "earliest"}}
    [described] = (await answer_of(describe_configs, node, "DescribeConfigs", 4, describe_request("g"))).results
    reset = next(entry for entry in described.configs if entry.name == "share.auto.offset.reset")
    assert (reset.value, reset.config_source, reset.documentation is not None) == ("earliest", GROUP_CONFIG, True)
    delete = incremental_request("g", ("share.auto.offset.reset", DELETE, None))
    await answer_of(incremental_alter_configs, node, "IncrementalAlterConfigs", 1, delete)
    assert node.image.group_configs == {}


@pytest.mark.trio
async def test_validate_only_and_a_refused_value_change_nothing():
    node = LoneBroker()
    checked = incremental_request("g", ("share.auto.offset.reset", SET, "earliest"), validate_only=True)
    [result] = (await answer_of(incremental_alter_configs, node, "IncrementalAlterConfigs", 1, checked)).responses
    assert result.error_code == ErrorCode.NONE and node.image.group_configs == {}
    bad = incremental_request("g", ("share.auto.offset.reset", SET, "sometime"))
    [result] = (await answer_of(incremental_alter_configs, node, "IncrementalAlterConfigs", 1, bad)).responses
    assert result.error_code == ErrorCode.INVALID_CONFIG and "sometime" in result.error_message
    assert node.image.group_configs == {}


@pytest.mark.trio
async def test_the_legacy_alter_configs_sets_a_groups_whole_set():
    node = LoneBroker()
    await answer_of(alter_configs, node, "AlterConfigs", 2, legacy_request("g", share_isolation_level="read_committed"))
    await answer_of(alter_configs, node, "AlterConfigs", 2, legacy_request("g", share_auto_offset_reset="earliest"))
    assert node.image.group_configs == {"g": {"share.auto.offset.reset": "earliest"}}


@pytest.mark.trio
async def test_a_principal_needs_alter_configs_and_describe_configs_on_the_group():
    node = LoneBroker(refused=("secret",))
    change = incremental_request("secret", ("share.auto.offset.reset", SET, "earliest"))
    [result] = (await answer_of(incremental_alter_configs, node, "IncrementalAlterConfigs", 1, change)).responses
    assert result.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED and node.image.group_configs == {}
    [result] = (await answer_of(alter_configs, node, "AlterConfigs", 2,
                                legacy_request("secret", share_auto_offset_reset="earliest"))).responses
    assert result.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    [described] = (await answer_of(describe_configs, node, "DescribeConfigs", 4, describe_request("secret"))).results
    assert (described.error_code, described.configs) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
    assert node.authorization.asked == [(AclOperation.ALTER_CONFIGS, ResourceType.GROUP, "secret")] * 2 + [
        (AclOperation.DESCRIBE_CONFIGS, ResourceType.GROUP, "secret")]
