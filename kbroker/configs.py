"""Topic and broker configs as DescribeConfigs shows them and AlterConfigs changes them.

Kafka is the reference (``ConfigHelper``, ``ConfigurationControlManager``,
``ControllerConfigurationValidator``): a topic shows every topic config, its
override if it has one (source DYNAMIC_TOPIC_CONFIG) else the broker-wide
default and where that came from; synonyms list the override, then each broker
setting that can supply the default, set ones (STATIC_BROKER_CONFIG) and
defaults (DEFAULT_CONFIG). A topic's overrides are ConfigRecords in the
metadata log; a record with no value removes one.

Broker settings are static here: they are shown read-only, and altering one is
refused with INVALID_REQUEST as Kafka refuses a setting it cannot update
dynamically (a deliberate difference: Kafka can update some dynamically).
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.config import BrokerConfig, Source
from kbroker.config_definitions import SETTINGS, SETTINGS_BY_NAME, TOPIC_CONFIG_SYNONYMS
from kbroker.metadata import records
from kbroker.metadata.image import TOPIC_RESOURCE, MetadataImage, apply_record
from kbroker.topics import TopicError, check_topic_configs, validate_topic_name
from kbroker.results import mark_not_made
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed, allowed_on_cluster
from wire.errors import ErrorCode

BROKER_RESOURCE = 4

# DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# DescribeConfigsResponse.ConfigType, by Kafka's ConfigDef type
CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8,
                "password": 9}

# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# Broker setting -> the settings that can supply its value, first set one wins (log.retention.ms's chain).
_BROKER_CHAINS = {
    name: tuple(synonym for synonym, _ in chain[index:])
    for chain in TOPIC_CONFIG_SYNONYMS.values() if len(chain) > 1
    for index, (name, _) in enumerate(chain)
}


class ConfigsError(Exception):
    def __init__(self, error_code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    config_type: int
    documentation: str
    synonyms: tuple[Synonym, ...]


def topic_setting(name: str):
    """The broker setting whose type and rules a topic config shares (its first synonym)."""
    return SETTINGS_BY_NAME[TOPIC_CONFIG_SYNONYMS[name][0][0]]


def describe_topic(config: BrokerConfig, image: MetadataImage, name: str, keys: list[str] | None) -> list[ConfigEntry]:
    """Every topic config (or those named in ``keys``) of topic ``name``; ConfigsError if there is none."""
    try:
        validate_topic_name(name)
    except TopicError as error:
        raise ConfigsError(error.error_code, str(error)) from None
    topic = image.topics.get(name)
    if topic is None:
        raise ConfigsError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return topic_entries(config, topic.configs, keys)


def topic_entries(config: BrokerConfig, overrides: dict[str, str], keys: list[str] | None = None) -> list[ConfigEntry]:
    """The configs of a topic with these overrides (or those named in ``keys``): values, sources, synonyms."""
    entries = []
    for config_name in sorted(TOPIC_CONFIG_SYNONYMS):
        if keys and config_name not in keys:
            continue
        setting = topic_setting(config_name)
        synonyms = [_broker_synonym(config, synonym) for synonym, _ in TOPIC_CONFIG_SYNONYMS[config_name]]
        synonyms = [synonym for synonym in synonyms if synonym is not None]
        if config_name in overrides:
            value = _normalized(setting, overrides[config_name])
            synonyms.insert(0, Synonym(config_name, value, DYNAMIC_TOPIC_CONFIG))
        else:
            value = setting.format(config.log_config_defaults()[config_name])
        entries.append(ConfigEntry(
            config_name, value, synonyms[0].source if synonyms else DEFAULT_CONFIG, read_only=False, sensitive=False,
            config_type=CONFIG_TYPES[setting.type], documentation=setting.doc, synonyms=tuple(synonyms),
        ))
    return entries


def describe_broker(config: BrokerConfig, node_id: int, resource_name: str, keys: list[str] | None) -> list[ConfigEntry]:
    """This broker's settings (read-only: none is dynamic here); "" names the (empty) cluster-wide dynamic defaults."""
    if resource_name == "":
        return []
    _check_broker_name(resource_name, node_id)
    entries = []
    for setting in SETTINGS:
        if keys and setting.name not in keys:
            continue
        synonyms = [_broker_synonym(config, name) for name in _BROKER_CHAINS.get(setting.name, (setting.name,))]
        synonyms = [synonym for synonym in synonyms if synonym is not None]
        value = None if setting.sensitive else setting.format(config.declared(setting.name))
        entries.append(ConfigEntry(
            setting.name, value, synonyms[0].source if synonyms else DEFAULT_CONFIG, read_only=True,
            sensitive=setting.sensitive, config_type=CONFIG_TYPES[setting.type], documentation=setting.doc,
            synonyms=tuple(synonyms),
        ))
    return entries


def plan_alter(config: BrokerConfig, image: MetadataImage, node_id: int, resource_type: int, resource_name: str,
               new_configs: dict[str, str | None]) -> list:
    """The ConfigRecords that make ``new_configs`` the topic's whole override set (AlterConfigs)."""
    if resource_type == BROKER_RESOURCE:
        _refuse_broker_change(resource_name, node_id, new_configs)
    current = _topic_configs(image, resource_type, resource_name)
    nulls = [name for name, value in new_configs.items() if value is None]
    if nulls:
        raise ConfigsError(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls))
    return _records(resource_name, current, new_configs)


def plan_incremental_alter(config: BrokerConfig, image: MetadataImage, node_id: int, resource_type: int,
                           resource_name: str, operations: list[tuple[str, int, str | None]]) -> list:
    """The ConfigRecords for SET / DELETE / APPEND / SUBTRACT operations on a topic's overrides."""
    if resource_type == BROKER_RESOURCE:
        _refuse_broker_change(resource_name, node_id, {name: value for name, _, value in operations})
    current = _topic_configs(image, resource_type, resource_name)
    names = [name for name, _, _ in operations]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(duplicates)}")
    wanted = dict(current)
    for name, operation, value in operations:
        if operation == SET:
            wanted[name] = value
        elif operation == DELETE:
            wanted.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            if name not in TOPIC_CONFIG_SYNONYMS or topic_setting(name).type != "list":
                verb = "APPEND" if operation == APPEND else "SUBTRACT"
                raise ConfigsError(ErrorCode.INVALID_CONFIG, f"Can't {verb} to key {name} because its type is not LIST.")
            parts = list(_parts(config, current, name))
            for item in (value or "").split(","):
                if operation == APPEND and item not in parts:
                    parts.append(item)
                elif operation == SUBTRACT and item in parts:
                    parts.remove(item)
            wanted[name] = ",".join(parts)
        else:
            raise ConfigsError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {operation} for {name}")
    nulls = [name for name, value in wanted.items() if value is None]
    if nulls:
        raise ConfigsError(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls))
    return _records(resource_name, current, wanted)


def validate_topic_configs(configs: dict[str, str]) -> None:
    """INVALID_CONFIG for an unknown topic config or a value its type or rules refuse."""
    try:
        check_topic_configs(configs, set(TOPIC_CONFIG_SYNONYMS))
    except TopicError as error:
        raise ConfigsError(error.error_code, str(error)) from None
    for name, text in configs.items():
        setting = topic_setting(name)
        try:
            value = setting.parse(text)
        except ValueError as error:
            raise ConfigsError(ErrorCode.INVALID_CONFIG, f"Invalid value {text} for configuration {name}: {error}") from None
        if setting.validator is not None and not setting.validator(value):
            raise ConfigsError(ErrorCode.INVALID_CONFIG,
                               f"Invalid value {text} for configuration {name}: expected {setting.allowed()}")


def _records(topic: str, current: dict[str, str], wanted: dict[str, str]) -> list:
    validate_topic_configs(wanted)
    changes = [(name, value) for name, value in sorted(wanted.items()) if current.get(name) != value]
    changes += [(name, None) for name in sorted(current) if name not in wanted]
    return [records.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=topic, name=name, value=value)
            for name, value in changes]


def _topic_configs(image: MetadataImage, resource_type: int, name: str) -> dict[str, str]:
    if resource_type != TOPIC_RESOURCE:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource_type}")
    if name == "":
        raise ConfigsError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    try:
        validate_topic_name(name)
    except TopicError as error:
        raise ConfigsError(error.error_code, str(error)) from None
    topic = image.topics.get(name)
    if topic is None:
        raise ConfigsError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    return dict(topic.configs)


def _parts(config: BrokerConfig, current: dict[str, str], name: str) -> tuple[str, ...]:
    """A list config's items: the override's, else the default's (Kafka takes the topic config's own
    default; we take the broker-wide one, which is the same unless log.cleanup.policy is set)."""
    if name in current:
        return topic_setting(name).parse(current[name])
    return tuple(config.log_config_defaults()[name])


def _check_broker_name(resource_name: str, node_id: int) -> None:
    try:
        broker_id = int(resource_name)
    except ValueError:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.") from None
    if broker_id != node_id:
        raise ConfigsError(ErrorCode.INVALID_REQUEST,
                           f"Unexpected broker id, expected {node_id} or empty string, but received {resource_name}")


def _refuse_broker_change(resource_name: str, node_id: int, configs: dict[str, str | None]) -> None:
    if resource_name != "":
        _check_broker_name(resource_name, node_id)
    names = ", ".join(sorted(configs)) or "(none)"
    raise ConfigsError(ErrorCode.INVALID_REQUEST,
                       f"Cannot update these configs dynamically: {names}; kbroker's broker settings are static "
                       "(set them in server.properties, KBROKER_* or --override and restart)")


def _broker_synonym(config: BrokerConfig, name: str) -> Synonym | None:
    """How broker setting ``name`` supplies a value: as set (static) or as its default; None if neither."""
    setting = SETTINGS_BY_NAME[name]
    original = config.originals.get(name)
    if original is not None and original.origin.source is not Source.DEFAULT:
        value = None if setting.sensitive else setting.format(config.declared(name))
        return Synonym(name, value, STATIC_BROKER_CONFIG)
    default = config.declared(name)  # a cluster node's defaults may be Kafka's rather than the single node's
    if default is None:
        return None
    return Synonym(name, None if setting.sensitive else setting.format(default), DEFAULT_CONFIG)


def _normalized(setting, text: str) -> str:
    """An override as Kafka shows it: parsed and written back (``compact, delete`` -> ``compact,delete``)."""
    try:
        return setting.format(setting.parse(text))
    except ValueError:
        return text


async def alter_resources(broker, resources, plan_for, result_class, validate_only: bool) -> list:
    """Plan each resource's change with ``plan_for(image, resource)``, commit all together.

    Each plan sees the changes planned before it, so one request can name a
    topic twice; a resource that fails gets its error and changes nothing.
    """
    results, plans = [], []
    image = broker.image
    for resource in resources:
        try:
            plan = plan_for(image, resource)
        except ConfigsError as error:
            results.append(result_class(error_code=error.error_code, error_message=error.message,
                                        resource_type=resource.resource_type, resource_name=resource.resource_name))
            continue
        results.append(result_class(error_code=ErrorCode.NONE, resource_type=resource.resource_type,
                                    resource_name=resource.resource_name))
        plans.extend(plan)
        for record in plan:
            image = apply_record(image, record)
    error = await broker.submit(plans) if plans and not validate_only else None
    mark_not_made(results, error)
    return results


def refuse_resources(resources, result_class) -> list:
    """Every resource answered NOT_CONTROLLER (a controller that is not active)."""
    return [result_class(error_code=ErrorCode.NOT_CONTROLLER, resource_type=resource.resource_type,
                         resource_name=resource.resource_name) for resource in resources]


def config_authorization_error(broker, context, operation, resource_type: int, name: str) -> int | None:
    """The error for a principal that may not do ``operation`` (DESCRIBE_CONFIGS, ALTER_CONFIGS) to a
    config resource, or None: a topic's are the topic's, a broker's are the cluster's (as Kafka's)."""
    if resource_type == TOPIC_RESOURCE:
        if not allowed(broker, context, operation, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif not allowed_on_cluster(broker, context, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


async def alter_authorized(broker, context, request, alter, response_class, result_class):
    """Run ``alter`` (a metadata_change handler: it may forward) on the resources the principal may
    alter; the others are answered with their authorization error."""
    refused = []
    for resource in request.resources:
        code = config_authorization_error(broker, context, AclOperation.ALTER_CONFIGS, resource.resource_type,
                                          resource.resource_name)
        if code is not None:
            refused.append(result_class(error_code=code, resource_type=resource.resource_type,
                                        resource_name=resource.resource_name))
    if not refused:
        return await alter(broker, context, request)
    refused_names = {(r.resource_type, r.resource_name) for r in refused}
    request.resources = [r for r in request.resources if (r.resource_type, r.resource_name) not in refused_names]
    response = await alter(broker, context, request) if request.resources else response_class(responses=[])
    response.responses += refused
    return response
