"""GROUP config resources (type 32, named by a group id) in DescribeConfigs, IncrementalAlterConfigs and
AlterConfigs, as Kafka 4.2 answers them (ConfigHelper.createGroupConfigEntry, ConfigAdminManager.preprocess,
ControllerConfigurationValidator, ConfigurationControlManager); what the configs are and the values they
take: kbroker/config/group_configs.py.

DescribeConfigs shows every group config: the group's own value (source GROUP_CONFIG, 8), else the
broker's value of its synonym with that synonym's source (DEFAULT_CONFIG, or STATIC_BROKER_CONFIG where
server.properties sets it), else Kafka's default (DEFAULT_CONFIG). Synonyms list the group's value, then the
broker synonym layer by layer. A change is planned into ConfigRecords of the values that change, after the
group's whole set of values is checked; the legacy AlterConfigs replaces that whole set, as Kafka's.
"""

from __future__ import annotations

from kbroker.config import BrokerConfig
from kbroker.config.admin import CONFIG_TYPES, ConfigEntry, ConfigsError, Synonym, check_change_form
from kbroker.config.dynamic import APPEND, DEFAULT_CONFIG, DELETE, SET, SUBTRACT, ConfigLayers
from kbroker.config.group_configs import (GROUP_SETTINGS, InvalidGroupConfig, broker_synonyms, check_group_configs,
                                          default_values, typed_values)
from kbroker.metadata import records
from kbroker.metadata.image import GROUP_RESOURCE, MetadataImage
from kbroker.wire.errors import ErrorCode

GROUP_CONFIG = 8  # DescribeConfigsResponse.ConfigSource of a group's own value


def describe_group(layers: ConfigLayers, image: MetadataImage, group_id: str,
                   keys: list[str] | None) -> list[ConfigEntry]:
    """Every group config of ``group_id`` (or those named in ``keys``), whether or not the group exists."""
    if not group_id:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    texts = image.group_configs.get(group_id, {})
    values = {**default_values(layers.effective), **typed_values(texts)}
    entries = []
    for group in GROUP_SETTINGS:
        if keys and group.name not in keys:
            continue
        value = group.setting.format(values[group.name])
        synonyms = [Synonym(*synonym) for synonym in broker_synonyms(layers, group)]
        if group.name in texts:
            synonyms.insert(0, Synonym(group.name, value, GROUP_CONFIG))
        entries.append(ConfigEntry(
            group.name, value, synonyms[0].source if synonyms else DEFAULT_CONFIG, read_only=False, sensitive=False,
            config_type=CONFIG_TYPES[group.setting.type], documentation=group.setting.doc, synonyms=tuple(synonyms),
        ))
    return entries


def plan_group_change(config: BrokerConfig, image: MetadataImage, group_id: str,
                      changes: list[tuple[str, int, str | None]], legacy: bool) -> list:
    """The ConfigRecords of a change to ``group_id``'s configs: (name, operation, value) changes, or with
    ``legacy`` (AlterConfigs) the group's whole new set as (name, SET, value). ConfigsError, as Kafka
    answers: INVALID_REQUEST for repeated names, a missing value or the empty group name; INVALID_CONFIG
    for APPEND or SUBTRACT (no group config is a list) and for values GroupConfig refuses."""
    check_change_form(changes, legacy)
    if not group_id:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    current = image.group_configs.get(group_id, {})
    wanted = {} if legacy else dict(current)
    for name, operation, value in changes:
        if operation == SET:
            wanted[name] = value
        elif operation == DELETE:
            wanted.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            verb = "APPEND" if operation == APPEND else "SUBTRACT"
            raise ConfigsError(ErrorCode.INVALID_CONFIG, f"Can't {verb} to key {name} because its type is not LIST.")
        else:
            raise ConfigsError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {operation} for {name}")
    try:
        check_group_configs(config, wanted)
    except InvalidGroupConfig as error:
        raise ConfigsError(error.error_code, str(error)) from None
    changed = [(name, value) for name, value in sorted(wanted.items()) if current.get(name) != value]
    changed += [(name, None) for name in sorted(current) if name not in wanted]
    return [records.ConfigRecord(resource_type=GROUP_RESOURCE, resource_name=group_id, name=name, value=value)
            for name, value in changed]
