"""Topic and broker configs as DescribeConfigs shows them and AlterConfigs changes them (group configs:
kbroker/config/group_config_admin.py, with the authorization here).

Kafka is the reference (``ConfigHelper``, ``ConfigAdminManager``, ``ConfigurationControlManager``,
``ControllerConfigurationValidator``): a topic shows every topic config, its override if it has one
(source DYNAMIC_TOPIC_CONFIG) else the broker-wide default; synonyms list the override, then the
broker settings that can supply the default, layer by layer (kbroker/config/dynamic.py). A
broker shows every setting with the layer that gave it; the empty name shows the cluster-wide
dynamic default. Overrides of topics and dynamic broker configs are ConfigRecords in the metadata
log; a record with no value removes one.

A change to a broker's configs is checked first by the broker it is sent to (Kafka's
ConfigAdminManager.preprocess: its own id or the empty name, only settings that may change at
runtime and at that level, values that go with its static settings and a key store it can load),
then planned into records where metadata changes (a lone broker, or the active controller, which
checks only that the node exists).
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.config import BrokerConfig, ConfigError
from kbroker.config.definitions import SETTINGS, SETTINGS_BY_NAME, TOPIC_CONFIG_SYNONYMS
from kbroker.config.topic_definitions import (INTERNAL_TOPIC_SETTINGS, TOPIC_CONFIG_NAMES, TOPIC_SETTINGS,
                                              topic_setting)
from kbroker.config.dynamic import (APPEND, DEFAULT_CONFIG, DELETE, DYNAMIC_DEFAULT_BROKER_CONFIG, SET, SUBTRACT,
                                           ConfigLayers, DynamicConfigError, apply_incremental,
                                           check_dynamic_configs, is_read_only, setting_of)
from kbroker.metadata import records
from kbroker.metadata.image import BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE, MetadataImage, apply_record
from kbroker.topics import TopicError, check_topic_configs, validate_topic_name
from kbroker.results import mark_not_made
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed, allowed_on_cluster
from kbroker.security.listener import ListenerSecurity
from kbroker.wire.errors import ErrorCode

DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigsResponse.ConfigSource of a topic's override

# DescribeConfigsResponse.ConfigType, by Kafka's ConfigDef type (UNKNOWN, 0, for a custom config)
CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8,
                "password": 9}


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
    documentation: str | None
    synonyms: tuple[Synonym, ...]


def describe_topic(layers: ConfigLayers, image: MetadataImage, name: str, keys: list[str] | None) -> list[ConfigEntry]:
    """Every topic config (or those named in ``keys``) of topic ``name``; ConfigsError if there is none
    (an unknown topic with an empty message, as Kafka's ConfigHelper answers it)."""
    return topic_entries(layers, _existing_topic(image, name, "").configs, keys)


def _existing_topic(image: MetadataImage, name: str, missing_message: str | None = None):
    """Topic ``name`` of the image; ConfigsError for an invalid name or one that does not exist."""
    try:
        validate_topic_name(name)
    except TopicError as error:
        raise ConfigsError(error.error_code, str(error)) from None
    topic = image.topics.get(name)
    if topic is None:
        raise ConfigsError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, missing_message)
    return topic


def topic_entries(layers: ConfigLayers, overrides: dict[str, str], keys: list[str] | None = None,
                  as_given: bool = False) -> list[ConfigEntry]:
    """The configs of a topic with these overrides (or those named in ``keys``): values, sources, synonyms.
    An override is shown parsed and written back, or ``as_given`` (CreateTopics' answer, as Kafka's)."""
    defaults = layers.effective.log_config_defaults()
    entries = []
    for config_name in sorted(TOPIC_SETTINGS):
        if keys and config_name not in keys:
            continue
        setting = topic_setting(config_name)
        broker_synonyms = TOPIC_CONFIG_SYNONYMS.get(config_name)
        synonyms = [Synonym(*synonym) for synonym in layers.synonyms(broker_synonyms[0][0])] if broker_synonyms else []
        if config_name in overrides:
            value = overrides[config_name] if as_given else _normalized(setting, overrides[config_name])
            synonyms.insert(0, Synonym(config_name, value, DYNAMIC_TOPIC_CONFIG))
        else:
            value = setting.format(defaults[config_name] if broker_synonyms else setting.default)
        entries.append(ConfigEntry(
            config_name, value, synonyms[0].source if synonyms else DEFAULT_CONFIG, read_only=False, sensitive=False,
            config_type=CONFIG_TYPES[setting.type], documentation=setting.doc, synonyms=tuple(synonyms),
        ))
    for config_name in sorted(INTERNAL_TOPIC_SETTINGS):  # as Kafka: listed only where the topic sets it
        if config_name in overrides and (not keys or config_name in keys):
            setting = topic_setting(config_name)
            value = overrides[config_name] if as_given else _normalized(setting, overrides[config_name])
            entries.append(ConfigEntry(config_name, value, DYNAMIC_TOPIC_CONFIG, read_only=False, sensitive=False,
                                       config_type=CONFIG_TYPES[setting.type], documentation=setting.doc,
                                       synonyms=(Synonym(config_name, value, DYNAMIC_TOPIC_CONFIG),)))
    return entries


def describe_broker(layers: ConfigLayers, node_id: int, resource_name: str,
                    keys: list[str] | None) -> list[ConfigEntry]:
    """This broker's settings (or those named in ``keys``), each with the layer that gave its value;
    "" names the cluster-wide dynamic default, which shows only what is set there (Kafka's ConfigHelper)."""
    if resource_name == "":
        return [_broker_entry(layers, name, text, default_only=True)
                for name, text in sorted(layers.cluster_default.items()) if not keys or name in keys]
    _check_described_broker(resource_name, node_id)
    effective = layers.effective
    names = [setting.name for setting in SETTINGS]
    names += sorted({*effective.originals, *layers.cluster_default, *layers.per_broker} - set(names))
    entries = []
    for name in names:
        if keys and name not in keys:
            continue
        if name in SETTINGS_BY_NAME:
            text = SETTINGS_BY_NAME[name].format(effective.declared(name))
        elif name in effective.originals:  # a listener's setting
            text = effective.originals[name].text
        else:  # a custom config
            text = layers.per_broker.get(name, layers.cluster_default.get(name))
        entries.append(_broker_entry(layers, name, text))
    return entries


def _broker_entry(layers: ConfigLayers, name: str, text: str | None, default_only: bool = False) -> ConfigEntry:
    """Kafka's createBrokerConfigEntry: a custom config's type is unknown, so it is shown as sensitive."""
    setting = setting_of(name)
    sensitive = setting is None or setting.sensitive
    synonyms = [Synonym(*synonym) for synonym in layers.synonyms(name, sensitive)]
    if default_only:
        synonyms = [synonym for synonym in synonyms if synonym.source == DYNAMIC_DEFAULT_BROKER_CONFIG]
    own = SETTINGS_BY_NAME.get(name)
    return ConfigEntry(
        name, None if sensitive else text, synonyms[0].source if synonyms else DEFAULT_CONFIG,
        read_only=is_read_only(name), sensitive=sensitive, config_type=CONFIG_TYPES[setting.type] if setting else 0,
        documentation=own.doc if own else None, synonyms=tuple(synonyms),
    )


def plan_alter(config: BrokerConfig, image: MetadataImage, node_id: int, resource_type: int, resource_name: str,
               new_configs: dict[str, str | None]) -> list:
    """The ConfigRecords that make ``new_configs`` the resource's whole set of values (AlterConfigs)."""
    if resource_type == BROKER_RESOURCE:
        changes = [(name, SET, value) for name, value in new_configs.items()]
        return plan_broker_alter(image, _controller_ids(config, node_id), resource_name, changes, legacy=True)
    current = _topic_configs(image, resource_type, resource_name)
    nulls = [name for name, value in new_configs.items() if value is None]
    if nulls:
        raise ConfigsError(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls))
    return _records(resource_name, current, new_configs)


def plan_incremental_alter(config: BrokerConfig, image: MetadataImage, node_id: int, resource_type: int,
                           resource_name: str, operations: list[tuple[str, int, str | None]]) -> list:
    """The ConfigRecords for SET / DELETE / APPEND / SUBTRACT operations on a topic's or broker's values."""
    if resource_type == BROKER_RESOURCE:
        return plan_broker_alter(image, _controller_ids(config, node_id), resource_name, operations, legacy=False)
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
            if name not in TOPIC_SETTINGS or topic_setting(name).type != "list":
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
        check_topic_configs(configs, TOPIC_CONFIG_NAMES)
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
    if topic_setting("remote.storage.enable").parse(configs.get("remote.storage.enable", "false")):
        raise ConfigsError(ErrorCode.INVALID_CONFIG, "Tiered Storage functionality is disabled in the broker. "
                                                     "Topic cannot be configured with remote log storage.")


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
    return dict(_existing_topic(image, name, f"The topic '{name}' does not exist.").configs)


def _parts(config: BrokerConfig, current: dict[str, str], name: str) -> tuple[str, ...]:
    """A list config's items: the override's, else the default's (Kafka takes the topic config's own
    default; we take the broker-wide one, which is the same unless log.cleanup.policy is set)."""
    if name in current:
        return topic_setting(name).parse(current[name])
    if name not in TOPIC_CONFIG_SYNONYMS:
        return tuple(topic_setting(name).default)
    return tuple(config.log_config_defaults()[name])


def _check_described_broker(resource_name: str, node_id: int) -> None:
    if _node_id(resource_name, f"Broker id must be an integer, but it is: {resource_name}") != node_id:
        raise ConfigsError(ErrorCode.INVALID_REQUEST,
                           f"Unexpected broker id, expected {node_id} or empty string, but received {resource_name}")


def _node_id(resource_name: str, not_a_number: str) -> int:
    """A BROKER resource's name as a node id; INVALID_REQUEST saying ``not_a_number`` if it is not one (the
    message differs by where Kafka checks it)."""
    try:
        return int(resource_name)
    except ValueError:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, not_a_number) from None


def check_change_form(changes: list[tuple[str, int, str | None]], legacy: bool) -> None:
    """Kafka's ConfigAdminManager.preprocess, for a resource of any type: ConfigsError (INVALID_REQUEST)
    for a name given twice or a missing value (but to DELETE; ``legacy``, AlterConfigs, has no DELETE)."""
    names = [name for name, _, _ in changes]
    if len(set(names)) != len(names):
        raise ConfigsError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [name for name, operation, value in changes if value is None and (legacy or operation != DELETE)]
    if nulls:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))


def check_broker_change(static: BrokerConfig, image: MetadataImage, node_id: int, listeners, resource_name: str,
                        changes: list[tuple[str, int, str | None]], legacy: bool) -> None:
    """A broker's own check of a change to its dynamic configs or the cluster-wide default, before it is
    made or forwarded (Kafka's ConfigAdminManager.preprocess and validateBrokerConfigChange): ConfigsError
    unless it may be made. ``changes`` are (name, operation, value); ``legacy``: AlterConfigs, which
    replaces the resource's whole set. ``listeners`` are this broker's (name, security protocol)."""
    check_change_form(changes, legacy)
    names = [name for name, _, _ in changes]
    if resource_name and _node_id(resource_name, f"Node id must be an integer, but it is: {resource_name}") != node_id:
        raise ConfigsError(ErrorCode.INVALID_REQUEST,
                           f"Unexpected broker id, expected {node_id}, but received {resource_name}")
    layers = ConfigLayers.of(static, image, node_id)
    current = layers.per_broker if resource_name else layers.cluster_default
    try:
        props = {name: value for name, _, value in changes} if legacy else apply_incremental(current, changes)
        check_dynamic_configs(props, per_broker=bool(resource_name))
        changed = layers.with_change(resource_name, props)
        effective = changed.effective
    except DynamicConfigError as error:
        raise ConfigsError(error.error_code, str(error)) from None
    except ConfigError as error:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, str(error)) from None
    if resource_name and any(name.startswith("listener.name.") for name in names):
        for listener, protocol in listeners:  # Kafka's SslFactory.validateReconfiguration: the stores must load
            try:
                ListenerSecurity.from_config(effective, listener, protocol)
            except ConfigError as error:
                raise ConfigsError(ErrorCode.INVALID_REQUEST, f"Validation of dynamic config update of "
                                                              f"{', '.join(sorted(names))} failed: {error}") from None


def plan_broker_alter(image: MetadataImage, controller_ids: set[int], resource_name: str,
                      changes: list[tuple[str, int, str | None]], legacy: bool) -> list:
    """The ConfigRecords of a change to a broker's dynamic configs ("" the cluster-wide default), checked
    as Kafka's controller does (ControllerConfigurationValidator, ConfigResourceExistenceChecker). Every
    named value gets a record, changed or not, so that brokers reload what it names (KAFKA-14136)."""
    if resource_name:
        broker_id = _node_id(resource_name, "Unable to parse broker name as a base 10 number.")
        if broker_id < 0:
            raise ConfigsError(ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")
        if broker_id not in {broker.node_id for broker in image.brokers} | controller_ids:
            raise ConfigsError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {broker_id} found.")
    current = image.broker_configs.get(resource_name, {})
    if legacy:
        wanted = {name: value for name, _, value in changes}
        names = [*wanted, *(name for name in current if name not in wanted)]
    else:
        try:
            wanted = apply_incremental(current, changes)
        except DynamicConfigError as error:
            raise ConfigsError(error.error_code, str(error)) from None
        names = [name for name, _, _ in changes]
    return [records.ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=resource_name, name=name,
                                 value=wanted.get(name)) for name in names]


def _controller_ids(config: BrokerConfig, node_id: int) -> set[int]:
    """The quorum's voters, whose ids are valid broker resource names too (a lone broker: itself)."""
    return {voter.node_id for voter in config.quorum_voters} or {node_id}


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
        results.append(result_class(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                                    resource_name=resource.resource_name))
        plans.extend(plan)
        for record in plan:
            image = apply_record(image, record)
    error = await broker.submit(plans) if plans and not validate_only else None
    mark_not_made(results, error)
    return results


def refuse_resources(resources, result_class, code: int = ErrorCode.NOT_CONTROLLER) -> list:
    """Every resource answered ``code`` (NOT_CONTROLLER: a controller that is not active)."""
    return [result_class(error_code=code, resource_type=resource.resource_type,
                         resource_name=resource.resource_name) for resource in resources]


def config_authorization_error(broker, context, operation, resource_type: int, name: str) -> int | None:
    """The error for a principal that may not do ``operation`` (DESCRIBE_CONFIGS, ALTER_CONFIGS) to a
    config resource, or None: a topic's are the topic's, a group's the group's, a broker's are the
    cluster's (as Kafka's)."""
    if resource_type == TOPIC_RESOURCE:
        if not allowed(broker, context, operation, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource_type == GROUP_RESOURCE:
        if not allowed(broker, context, operation, ResourceType.GROUP, name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif not allowed_on_cluster(broker, context, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


async def alter_authorized(broker, context, request, alter, response_class, result_class, check=None):
    """Run ``alter`` (a metadata_change handler: it may forward) on the resources the principal may
    alter and ``check(resource)`` (a broker's check of BROKER resources) lets through; the others are
    answered with their error, each in its place (Kafka's reassembleIncrementalResponse)."""
    answered = {}
    for resource in request.resources:
        code = config_authorization_error(broker, context, AclOperation.ALTER_CONFIGS, resource.resource_type,
                                          resource.resource_name)
        message = None
        if code is None and check is not None:
            try:
                check(resource)
            except ConfigsError as error:
                code, message = error.error_code, error.message
        if code is not None:
            answered[id(resource)] = result_class(error_code=code, error_message=message,
                                                  resource_type=resource.resource_type,
                                                  resource_name=resource.resource_name)
    if not answered:
        return await alter(broker, context, request)
    asked = request.resources
    request.resources = [resource for resource in asked if id(resource) not in answered]
    response = await alter(broker, context, request) if request.resources else response_class(responses=[])
    made = {(result.resource_type, result.resource_name): result for result in response.responses}
    response.responses = [answered.get(id(resource)) or made.get((resource.resource_type, resource.resource_name))
                          or result_class(error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                          resource_type=resource.resource_type, resource_name=resource.resource_name)
                          for resource in asked]
    return response
