"""Broker configs changed at runtime (KIP-226): which settings may change, at which level, and how the
layers of a broker's settings overlay.

Kafka is the reference (``DynamicBrokerConfig``, ``DynamicConfig.Broker``, ``ConfigHelper``,
``ConfigAdminManager.prepareIncrementalConfigs``). A broker's settings come in four layers, the first
set one winning: its own dynamic values (the BROKER resource named by its node id), the cluster-wide
dynamic default (the BROKER resource with the empty name), its static settings, the defaults. The two
dynamic layers are ConfigRecords in the metadata log (``MetadataImage.broker_configs``);
:class:`ConfigLayers` overlays them on the static settings as Kafka's ``updateCurrentConfig`` does.

What may change, of what kbroker has and acts on (Kafka's ``AllDynamicConfigs``):

- per broker or cluster-wide: the brokers' topic defaults (each topic config's first broker synonym:
  ``log.retention.ms``, ``log.segment.bytes``, ``log.roll.ms``, ``log.cleanup.policy``,
  ``message.max.bytes``, ...), ``log.cleaner.backoff.ms`` and ``max.connections``;
- per broker only, under a listener prefix: the listener's key store and trust store
  (``listener.name.<l>.ssl.keystore.location``, ...) and its JAAS configs
  (``listener.name.<l>.<mechanism>.sasl.jaas.config``).

Every other setting kbroker knows is read-only. A name kbroker does not know is kept as a custom
config and changes nothing, as Kafka keeps names it does not know. Deliberate differences: Kafka's
thread counts (``num.io.threads``, ``log.cleaner.threads``, ...) may change in Kafka but mean nothing
on kbroker's one thread, so they are read-only here; a listener-prefixed setting other than the
stores and JAAS configs (``listener.name.<l>.ssl.client.auth``), which Kafka takes but applies only
at the next start, is refused; the older units of a topic default (``log.retention.hours``,
``log.roll.hours``) are read-only, as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Mapping

from kbroker.config import BrokerConfig
from kbroker.config.sources import Origin, Original, Source
from kbroker.config.broker_config import listener_setting
from kbroker.config.definitions import SETTINGS_BY_NAME, TOPIC_CONFIG_SYNONYMS
from kbroker.wire.errors import ErrorCode

# DescribeConfigsResponse.ConfigSource of a broker setting's layers
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

CLUSTER_WIDE: frozenset[str] = frozenset(
    {synonyms[0][0] for synonyms in TOPIC_CONFIG_SYNONYMS.values()}  # DynamicLogConfig.ReconfigurableConfigs
    | {"log.cleaner.backoff.ms", "message.max.bytes"}  # LogCleaner.ReconfigurableConfigs
    | {"max.connections"})  # SocketServer.ReconfigurableConfigs
# SslConfigs.RECONFIGURABLE_CONFIGS: only per listener (listener.name.<l>.<name>), only per broker.
PER_LISTENER: frozenset[str] = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates"})
assert CLUSTER_WIDE | PER_LISTENER <= SETTINGS_BY_NAME.keys()

_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")  # Kafka's ListenerConfigRegex
_LISTENER_MECHANISM_CONFIGS = ("sasl.jaas.config", "connections.max.reauth.ms")  # given as <mechanism>.<name>
# Names that set one value in different units (Kafka's brokerConfigSynonyms); log.flush.interval.ms
# falls back on log.flush.scheduler.interval.ms, not the other way round.
_SAME_VALUE = (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
               ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
               ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"))


class DynamicConfigError(ValueError):
    """A dynamic config change Kafka refuses; INVALID_REQUEST unless told, with Kafka's message."""

    def __init__(self, message: str, error_code: int = ErrorCode.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.error_code = error_code


def synonyms_of(name: str, match_listener_override: bool = True) -> list[str]:
    """The settings that give ``name``'s value, highest precedence first (Kafka's brokerConfigSynonyms):
    a listener's setting falls back on the plain one."""
    for group in _SAME_VALUE:
        if name in group and (name == group[0] or group[0] != "log.flush.interval.ms"):
            return list(group)
    match = _LISTENER_CONFIG.fullmatch(name)
    if match and match_listener_override:
        base = match.group(1)
        return [name, next((config for config in _LISTENER_MECHANISM_CONFIGS if base.endswith(config)), base)]
    return [name]


def is_read_only(name: str) -> bool:
    """A setting kbroker knows that cannot change at runtime (DescribeConfigs' read_only, as Kafka's:
    true for a listener-prefixed name and a custom one too)."""
    return name not in CLUSTER_WIDE | PER_LISTENER


def check_dynamic_configs(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs: DynamicConfigError naming the settings that may not
    change at runtime, or not at this level, or a value its type or rules refuse."""
    _refuse([name for name in props if not _may_change(name)], "Cannot update these configs dynamically")
    _refuse([name for name in props if name in PER_LISTENER],
            "These security configs can be dynamically updated only per-listener using the listener prefix")
    for name, text in props.items():
        _check_value(name, text)
    if not per_broker:
        _refuse([name for name in props if _LISTENER_CONFIG.fullmatch(name)],
                "Cannot update these configs at default cluster level, broker id must be specified")


def apply_incremental(current: Mapping[str, str], operations) -> dict[str, str]:
    """A resource's dynamic configs after IncrementalAlterConfigs' (name, operation, value) operations
    (Kafka's prepareIncrementalConfigs): APPEND and SUBTRACT start from the default of a list setting."""
    props = dict(current)
    for name, operation, value in operations:
        if operation == SET:
            props[name] = value
        elif operation == DELETE:
            props.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            props[name] = _list_operation(props, name, operation, value or "")
        else:
            raise DynamicConfigError(f"Unknown operations type {operation}")
    return props


def _list_operation(props: Mapping[str, str], name: str, operation: int, value: str) -> str:
    setting = SETTINGS_BY_NAME.get(name)
    if setting is None:
        raise DynamicConfigError(f"Unknown config name: {name}", ErrorCode.INVALID_CONFIG)
    verb = "append" if operation == APPEND else "subtract"
    if setting.type != "list":
        raise DynamicConfigError(f"Config value {verb} is not allowed for config key: {name}",
                                 ErrorCode.INVALID_CONFIG)
    old = props.get(name, setting.format(setting.default))
    given = value.split(",")
    if operation == APPEND:
        items = [item for item in old.split(",") if item]
        return ",".join(items + [item for item in given if item not in items])
    items = old.split(",")
    for item in given:  # Scala's diff: one occurrence for each
        if item in items:
            items.remove(item)
    return ",".join(items)


@dataclass(frozen=True)
class ConfigLayers:
    """One broker's settings layer by layer: its static config, the cluster-wide dynamic default and its
    own dynamic values (each name -> text, as stored)."""

    static: BrokerConfig
    cluster_default: Mapping[str, str] = field(default_factory=dict)
    per_broker: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, static: BrokerConfig, image, node_id: int) -> ConfigLayers:
        """Broker ``node_id``'s layers in a MetadataImage."""
        return cls(static, image.broker_configs.get("", {}), image.broker_configs.get(str(node_id), {}))

    def with_change(self, resource_name: str, props: Mapping[str, str]) -> ConfigLayers:
        """These layers with the dynamic configs of ``resource_name`` ("" the default) replaced."""
        return replace(self, per_broker=props) if resource_name else replace(self, cluster_default=props)

    @cached_property
    def effective(self) -> BrokerConfig:
        """The static settings overlaid by the default, then by the broker's own values (Kafka's
        updateCurrentConfig: a value also hides its synonyms below it); ConfigError if they do not go
        together. Custom names change nothing."""
        originals = dict(self.static.originals)
        for source, layer in ((Source.DYNAMIC_DEFAULT, self.cluster_default), (Source.DYNAMIC_BROKER, self.per_broker)):
            for name, text in layer.items():
                if name not in SETTINGS_BY_NAME and listener_setting(name) is None:
                    continue
                for synonym in synonyms_of(name, match_listener_override=False):
                    originals.pop(synonym, None)
                originals[name] = Original(name, text, Origin(source))
        return BrokerConfig(originals.values())

    def synonyms(self, name: str, sensitive: bool = False) -> list[tuple[str, str | None, int]]:
        """(name, value, source) of every layer that gives ``name`` a value, as DescribeConfigs lists them
        (Kafka's ConfigHelper.configSynonyms): layer by layer, highest first, each in synonym order, from
        the first entry named ``name`` on."""
        names = synonyms_of(name)
        layers = ((DYNAMIC_BROKER_CONFIG, self.per_broker), (DYNAMIC_DEFAULT_BROKER_CONFIG, self.cluster_default),
                  (STATIC_BROKER_CONFIG, self._static_texts), (DEFAULT_CONFIG, self._default_texts))
        found = [(synonym, None if sensitive else values[synonym], source)
                 for source, values in layers for synonym in names if synonym in values]
        start = next((index for index, (synonym, _, _) in enumerate(found) if synonym == name), len(found))
        return found[start:]

    @cached_property
    def _static_texts(self) -> dict[str, str]:
        return {name: _shown(name, original.text) for name, original in self.static.originals.items()
                if original.origin.source is not Source.DEFAULT}

    @cached_property
    def _default_texts(self) -> dict[str, str]:
        defaults = {name: setting.format(self.static.default(name)) for name, setting in SETTINGS_BY_NAME.items()}
        return {name: text for name, text in defaults.items() if text is not None}


def setting_of(name: str):
    """The Setting whose type ``name`` has (Kafka's KafkaConfig.configType): its own, else its first
    synonym's (a listener's setting: the plain one; a JAAS config: sasl.jaas.config); None for a custom
    name."""
    if name in SETTINGS_BY_NAME:
        return SETTINGS_BY_NAME[name]
    return next((SETTINGS_BY_NAME[synonym] for synonym in synonyms_of(name) if synonym in SETTINGS_BY_NAME), None)


def _may_change(name: str) -> bool:
    if name in CLUSTER_WIDE or name in PER_LISTENER:
        return True
    if name.startswith("listener.name."):
        found = listener_setting(name)
        return found is not None and (found[1] in PER_LISTENER or found[1].endswith(".sasl.jaas.config"))
    return name not in SETTINGS_BY_NAME  # a custom config


def _check_value(name: str, text: str) -> None:
    """Kafka's validateConfigTypes: a listener's setting is checked as the plain one, and named so."""
    match = _LISTENER_CONFIG.fullmatch(name)
    shown = match.group(1) if match else name
    setting = SETTINGS_BY_NAME.get(shown)
    if setting is None:
        return
    try:
        value = setting.parse(text)
    except ValueError as error:
        raise DynamicConfigError(f"Invalid value {text} for configuration {shown}: {error}") from None
    if setting.validator is not None and not setting.validator(value):
        raise DynamicConfigError(f"Invalid value {text} for configuration {shown}: expected {setting.allowed()}")


def _refuse(names: list[str], message: str) -> None:
    if names:
        raise DynamicConfigError(f"{message}: Set({', '.join(sorted(names))})")


def _shown(name: str, text: str) -> str:
    """A static setting's value as DescribeConfigs shows it: parsed and written back where it can be."""
    setting = setting_of(name)
    try:
        return setting.format(setting.parse(text)) if setting is not None else text
    except ValueError:
        return text
