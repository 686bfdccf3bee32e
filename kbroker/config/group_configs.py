"""Per-group configs (KIP-848, KIP-932, KIP-1071): what each is, the values it may take, and what a
group's settings are once its own values are laid over the broker's.

Kafka 4.2 is the reference (GroupConfig, ShareGroupAutoOffsetResetStrategy, GroupConfigManager). An
admin sets a group's values with IncrementalAlterConfigs or AlterConfigs on a GROUP resource (type 32,
named by the group id; the group need not exist) and reads them with DescribeConfigs
(kbroker/config/group_config_admin.py). They are ConfigRecords of resource type 32 in the metadata log
(``MetadataImage.group_configs``), so every node sees them. A config the group does not set takes the
broker's value of its synonym, ``group.`` before its name (share.record.lock.duration.ms:
group.share.record.lock.duration.ms), or Kafka's own default where the broker has none
(share.auto.offset.reset, share.isolation.level).

A value the group sets must lie within the broker's bounds (group.share.min.record.lock.duration.ms and
its max, ...), and a session timeout must exceed its heartbeat interval. Should the bounds change later, a
group's value is brought within them where it is read (as Kafka's GroupConfig.evaluate), so coordinators
never see one outside. Coordinators read a group's settings with :func:`group_config`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Mapping

from kbroker.config import BrokerConfig
from kbroker.config.definitions import LONG_MAX, SETTINGS_BY_NAME, AtLeast, OneOf, Setting
from kbroker.config.dynamic import DEFAULT_CONFIG, ConfigLayers
from kbroker.log.partition_log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kbroker.metadata.image import MetadataImage
from kbroker.wire.errors import ErrorCode

# Kafka's defaults of the broker settings that group configs fall back on or are bounded by. A setting
# kbroker/config/definitions.py does not define takes its value here (broker_group_setting).
KAFKA_GROUP_SETTING_DEFAULTS: dict[str, int] = {
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.min.session.timeout.ms": 45000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.min.heartbeat.interval.ms": 5000,
    "group.consumer.max.heartbeat.interval.ms": 15000,
    "group.share.session.timeout.ms": 45000,
    "group.share.min.session.timeout.ms": 45000,
    "group.share.max.session.timeout.ms": 60000,
    "group.share.heartbeat.interval.ms": 5000,
    "group.share.min.heartbeat.interval.ms": 5000,
    "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.record.lock.duration.ms": 30000,
    "group.share.min.record.lock.duration.ms": 15000,
    "group.share.max.record.lock.duration.ms": 60000,
    "group.share.delivery.count.limit": 5,
    "group.streams.session.timeout.ms": 45000,
    "group.streams.min.session.timeout.ms": 45000,
    "group.streams.max.session.timeout.ms": 60000,
    "group.streams.heartbeat.interval.ms": 5000,
    "group.streams.min.heartbeat.interval.ms": 5000,
    "group.streams.max.heartbeat.interval.ms": 15000,
    "group.streams.num.standby.replicas": 0,
    "group.streams.max.standby.replicas": 2,
    "group.streams.initial.rebalance.delay.ms": 3000,
}


def broker_group_setting(config: BrokerConfig, name: str) -> int:
    """The broker's value of group setting ``name`` (one of KAFKA_GROUP_SETTING_DEFAULTS): ``config``'s where
    kbroker defines the setting, else Kafka's default."""
    if name in SETTINGS_BY_NAME:
        return config.get(name)
    return KAFKA_GROUP_SETTING_DEFAULTS[name]


# -- share.auto.offset.reset -------------------------------------------------------------------------------

# Java's Duration.parse: PnDTnHnMn.nS, each number signed, letters in either case, a fraction on seconds only.
_ISO_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                           r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)
_BY_DURATION = "by_duration:"


def iso_duration_ns(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it, in nanoseconds; ValueError if it is not one."""
    match = _ISO_DURATION.fullmatch(text)
    if match is None or match.group(3) in ("T", "t") or not any(match.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    days, hours, minutes, seconds = (int(match.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = int((match.group(7) or "").ljust(9, "0"))
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if abs(total) > LONG_MAX:
        raise ValueError(f"duration out of range: {text!r}")
    nanos = total * 10**9 + (-fraction if (match.group(6) or "").startswith("-") else fraction)
    return -nanos if match.group(1) == "-" else nanos


@dataclass(frozen=True)
class ShareAutoOffsetReset:
    """Where a share-partition with no state starts (Kafka's ShareGroupAutoOffsetResetStrategy)."""

    strategy: str  # "earliest", "latest" or "by_duration"
    duration_ns: int = 0  # by_duration's: how long before now

    @classmethod
    def parse(cls, text: str) -> ShareAutoOffsetReset:
        """``earliest``, ``latest`` or ``by_duration:<ISO-8601 duration>`` (not negative), as Kafka's, case
        and all; ValueError otherwise (``none`` too: it is a consumer's, not a share group's)."""
        if text in ("earliest", "latest"):
            return cls(text)
        if text.startswith(_BY_DURATION):
            duration_ns = iso_duration_ns(text[len(_BY_DURATION):])
            if duration_ns >= 0:
                return cls("by_duration", duration_ns)
        raise ValueError(f"not earliest, latest or by_duration:<duration>: {text!r}")

    def list_offsets_timestamp(self, now_ms: int) -> int:
        """The timestamp ListOffsets finds the start offset by: EARLIEST_TIMESTAMP (-2), LATEST_TIMESTAMP (-1),
        or ``now_ms`` less the duration (Kafka's AutoOffsetResetStrategy.timestamp)."""
        if self.strategy == "earliest":
            return EARLIEST_TIMESTAMP
        if self.strategy == "latest":
            return LATEST_TIMESTAMP
        return (now_ms * 10**6 - self.duration_ns) // 10**6


class _AutoOffsetResetRule:
    def __call__(self, value) -> bool:
        try:
            ShareAutoOffsetReset.parse(value)
        except ValueError:
            return False
        return True

    def __str__(self) -> str:
        return "earliest, latest or by_duration:<ISO-8601 duration, PnDTnHnMn.nS, not negative>"


# -- the group configs -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupSetting:
    """A group config: ``setting`` has its name, type, Kafka's default (used where ``synonym`` is None), doc
    and rule; ``synonym`` the broker setting that gives its default; ``low`` and ``high`` the broker
    settings that bound the values a group may set."""

    setting: Setting
    synonym: str | None = None
    low: str | None = None
    high: str | None = None

    @property
    def name(self) -> str:
        return self.setting.name


def _bounded(name: str, default: int, doc: str, minimum: int, kind: str, bounded: bool = True) -> GroupSetting:
    """A group config whose broker synonym is ``group.<name>``, bounded by ``group.<kind>.min|max.<rest>``."""
    rest = name.split(".", 1)[1]
    low, high = (f"group.{kind}.min.{rest}", f"group.{kind}.max.{rest}") if bounded else (None, None)
    return GroupSetting(Setting(name, "int", default, doc, AtLeast(minimum)), f"group.{name}", low, high)


# Kafka 4.2's GroupConfig, by name (the order DescribeConfigs lists them in).
GROUP_SETTINGS: tuple[GroupSetting, ...] = (
    _bounded("consumer.heartbeat.interval.ms", 5000, "Heartbeat interval given to the members of a "
             "consumer-protocol (KIP-848) group.", 1, "consumer"),
    _bounded("consumer.session.timeout.ms", 45000, "How long a consumer-protocol group member may go without "
             "a heartbeat before it is removed.", 1, "consumer"),
    GroupSetting(Setting("share.auto.offset.reset", "string", "latest", "Where a share-partition with no state "
                         "starts: earliest, latest, or by_duration:<ISO-8601 duration> (the first record at or "
                         "after that long ago).", _AutoOffsetResetRule())),
    _bounded("share.heartbeat.interval.ms", 5000, "Heartbeat interval given to the members of a share group.",
             1, "share"),
    GroupSetting(Setting("share.isolation.level", "string", "read_uncommitted", "Whether a share group is "
                         "delivered only committed transactional records (read_committed) or all records "
                         "(read_uncommitted); records outside transactions are delivered either way.",
                         OneOf("read_committed", "read_uncommitted"))),
    _bounded("share.record.lock.duration.ms", 30000, "How long a share group member holds the records it "
             "acquired before they may be delivered again.", 1000, "share"),
    _bounded("share.session.timeout.ms", 45000, "How long a share group member may go without a heartbeat "
             "before it is removed.", 1, "share"),
    _bounded("streams.heartbeat.interval.ms", 5000, "Heartbeat interval given to the members of a streams "
             "group.", 1, "streams"),
    _bounded("streams.initial.rebalance.delay.ms", 3000, "How long a streams group waits for more members "
             "before its first assignment.", 0, "streams", bounded=False),
    GroupSetting(Setting("streams.num.standby.replicas", "int", 0, "Standby replicas of each task of a streams "
                         "group.", AtLeast(0)), "group.streams.num.standby.replicas",
                 high="group.streams.max.standby.replicas"),
    _bounded("streams.session.timeout.ms", 45000, "How long a streams group member may go without a heartbeat "
             "before it is removed.", 1, "streams"),
)
GROUP_SETTINGS_BY_NAME: dict[str, GroupSetting] = {group.name: group for group in GROUP_SETTINGS}
# (session timeout, heartbeat interval): the first must exceed the second.
SESSION_OVER_HEARTBEAT = tuple((f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms")
                               for kind in ("consumer", "share", "streams"))
assert all(group.synonym is None or group.synonym in KAFKA_GROUP_SETTING_DEFAULTS for group in GROUP_SETTINGS)
assert all(bound is None or bound in KAFKA_GROUP_SETTING_DEFAULTS
           for group in GROUP_SETTINGS for bound in (group.low, group.high))


@dataclass(frozen=True)
class GroupConfig:
    """A group's settings: each group config (Kafka's name, dots as underscores), its own value or the
    broker's; and, for share-partitions, the broker's delivery count limit (a broker setting only, in 4.2)."""

    consumer_heartbeat_interval_ms: int
    consumer_session_timeout_ms: int
    share_auto_offset_reset: str  # as set: earliest, latest or by_duration:<duration>
    share_heartbeat_interval_ms: int
    share_isolation_level: str  # read_uncommitted or read_committed
    share_record_lock_duration_ms: int
    share_session_timeout_ms: int
    streams_heartbeat_interval_ms: int
    streams_initial_rebalance_delay_ms: int
    streams_num_standby_replicas: int
    streams_session_timeout_ms: int
    share_delivery_count_limit: int  # group.share.delivery.count.limit

    @property
    def share_auto_offset_reset_strategy(self) -> ShareAutoOffsetReset:
        return ShareAutoOffsetReset.parse(self.share_auto_offset_reset)


assert [field.name for field in fields(GroupConfig)][:-1] == [
    group.setting.attribute for group in GROUP_SETTINGS]


def group_config(image: MetadataImage, config: BrokerConfig, group_id: str) -> GroupConfig:
    """Group ``group_id``'s settings: the values the image gives it over ``config``'s (the broker's settings
    in force), each it sets brought within the broker's bounds."""
    values = default_values(config)
    for name, value in typed_values(image.group_configs.get(group_id, {})).items():
        group = GROUP_SETTINGS_BY_NAME[name]
        if group.low is not None:
            value = max(value, broker_group_setting(config, group.low))
        if group.high is not None:
            value = min(value, broker_group_setting(config, group.high))
        values[name] = value
    return GroupConfig(**{name.replace(".", "_"): value for name, value in values.items()},
                       share_delivery_count_limit=broker_group_setting(config, "group.share.delivery.count.limit"))


def default_values(config: BrokerConfig) -> dict[str, object]:
    """Each group config's value where a group sets none: the broker's, else Kafka's default."""
    return {group.name: group.setting.default if group.synonym is None else broker_group_setting(config, group.synonym)
            for group in GROUP_SETTINGS}


def typed_values(texts: Mapping[str, str]) -> dict[str, object]:
    """A group's own values, parsed; one that is not a group config or does not parse (not written by this
    version, which checks what it writes) is left out."""
    values = {}
    for name, text in texts.items():
        group = GROUP_SETTINGS_BY_NAME.get(name)
        if group is not None:
            try:
                values[name] = group.setting.parse(text)
            except ValueError:
                continue
    return values


def broker_synonyms(layers: ConfigLayers, group: GroupSetting) -> list[tuple[str, str | None, int]]:
    """(name, value, source) of what gives ``group``'s default, as DescribeConfigs lists them: its broker
    synonym layer by layer, else Kafka's own default."""
    if group.synonym is None:
        return [(group.name, group.setting.format(group.setting.default), DEFAULT_CONFIG)]
    if group.synonym in SETTINGS_BY_NAME:
        return layers.synonyms(group.synonym)
    return [(group.synonym, str(KAFKA_GROUP_SETTING_DEFAULTS[group.synonym]), DEFAULT_CONFIG)]


class InvalidGroupConfig(ValueError):
    """A group's values Kafka refuses (INVALID_CONFIG), with the reason."""

    error_code = ErrorCode.INVALID_CONFIG


def check_group_configs(config: BrokerConfig, texts: Mapping[str, str]) -> None:
    """Kafka's GroupConfig.validate of ``texts``, a group's whole set of values, on a broker with settings
    ``config``: InvalidGroupConfig for a name that is not a group config, a value its type or rule refuses,
    one outside the broker's bounds, or a session timeout not above its heartbeat interval. Only what the
    group sets is held to the bounds: the broker's own values are the broker's concern."""
    unknown = [name for name in texts if name not in GROUP_SETTINGS_BY_NAME]
    if unknown:
        raise InvalidGroupConfig(f"Unknown group config name: {unknown[0]}")
    values = default_values(config)
    for name, text in texts.items():
        setting = GROUP_SETTINGS_BY_NAME[name].setting
        try:
            values[name] = setting.parse(text)
        except ValueError as error:
            raise InvalidGroupConfig(f"Invalid value {text} for configuration {name}: {error}") from None
        if setting.validator is not None and not setting.validator(values[name]):
            raise InvalidGroupConfig(f"Invalid value {text} for configuration {name}: expected {setting.allowed()}")
    for group in GROUP_SETTINGS:
        if group.name not in texts:
            continue
        if group.low is not None and values[group.name] < broker_group_setting(config, group.low):
            raise InvalidGroupConfig(f"{group.name} must be greater than or equal to {group.low}")
        if group.high is not None and values[group.name] > broker_group_setting(config, group.high):
            raise InvalidGroupConfig(f"{group.name} must be less than or equal to {group.high}")
    for session, heartbeat in SESSION_OVER_HEARTBEAT:
        if (session in texts or heartbeat in texts) and values[session] <= values[heartbeat]:
            raise InvalidGroupConfig(f"{session} must be greater than {heartbeat}")


def apply_group_timings(group, image: MetadataImage, config: BrokerConfig) -> None:
    """Give a KIP-848 or share group (its ``kind``, ``group_id`` and frozen ``config``) its own session timeout
    and heartbeat interval: the group configs consumer.* or share.*, else the broker's group.* settings, read at
    each heartbeat as Kafka's GroupMetadataManager reads them."""
    configs = group_config(image, config, group.group_id)
    if group.kind == "share":
        timings = configs.share_session_timeout_ms, configs.share_heartbeat_interval_ms
    else:
        timings = configs.consumer_session_timeout_ms, configs.consumer_heartbeat_interval_ms
    if (group.config.session_timeout_ms, group.config.heartbeat_interval_ms) != timings:
        group.config = replace(group.config, session_timeout_ms=timings[0],
                                heartbeat_interval_ms=timings[1])
