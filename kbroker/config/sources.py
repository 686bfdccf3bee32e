"""Where settings come from: defaults, a server.properties file, ``KBROKER_*`` variables and ``--override``
(lowest first), each setting kept with its origin so that an error can say where it came from."""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass
from typing import Iterable, Mapping

from kbroker.config.definitions import SETTINGS_BY_ENVIRONMENT, SETTINGS_BY_NAME, TOPIC_CONFIG_SYNONYMS
from kbroker.config.errors import ConfigError
from kbroker.config.properties import parse_properties

ENVIRONMENT_PREFIX = "KBROKER_"


class Source(enum.Enum):
    DEFAULT = "default"
    FILE = "file"
    ENVIRONMENT = "environment"
    OVERRIDE = "override"
    # Changed at runtime (kbroker/config/dynamic.py): the cluster-wide default, or this broker's own.
    DYNAMIC_DEFAULT = "dynamic default broker config"
    DYNAMIC_BROKER = "dynamic broker config"

    @property
    def kafka_config_source(self) -> int:
        """DescribeConfigs' ConfigSource: DYNAMIC_BROKER_CONFIG (2), DYNAMIC_DEFAULT_BROKER_CONFIG (3),
        STATIC_BROKER_CONFIG (4) or DEFAULT_CONFIG (5)."""
        return {Source.DYNAMIC_BROKER: 2, Source.DYNAMIC_DEFAULT: 3, Source.DEFAULT: 5}.get(self, 4)


@dataclass(frozen=True)
class Origin:
    source: Source
    where: str = ""  # "path:line", the variable's name, or the override as given

    def __str__(self) -> str:
        if self.source is Source.ENVIRONMENT:
            return f"environment variable {self.where}"
        if self.source is Source.OVERRIDE:
            return f"--override {self.where}"
        return self.where or self.source.value


DEFAULT_ORIGIN = Origin(Source.DEFAULT)


@dataclass(frozen=True)
class Original:
    """One setting as a source gave it: name, text and where from."""

    name: str
    text: str
    origin: Origin


def file_originals(path: str) -> list[Original]:
    """The settings of a server.properties file (read as UTF-8, else Latin-1 as Java does)."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    entries = parse_properties(text, path)
    return [Original(key, value, Origin(Source.FILE, f"{path}:{line}")) for key, value, line in entries]


def environment_originals(environ: Mapping[str, str]) -> list[Original]:
    """The settings among ``KBROKER_*`` variables; unknown ones come back under a guessed name, to be refused."""
    originals = []
    for variable, text in sorted(environ.items()):
        if not variable.startswith(ENVIRONMENT_PREFIX):
            continue
        setting = SETTINGS_BY_ENVIRONMENT.get(variable)
        name = setting.name if setting else variable[len(ENVIRONMENT_PREFIX):].lower().replace("_", ".")
        originals.append(Original(name, text, Origin(Source.ENVIRONMENT, variable)))
    return originals


def override_originals(overrides: Iterable[str]) -> list[Original]:
    """The settings of ``--override key=value`` arguments, in order."""
    originals = []
    for override in overrides:
        name, equals, text = override.partition("=")
        if not equals or not name.strip():
            origin = Origin(Source.OVERRIDE, override)
            raise ConfigError(f"--override expects key=value, got {override!r}", origin=origin)
        originals.append(Original(name.strip(), text, Origin(Source.OVERRIDE, override)))
    return originals


def suggestion(name: str, environment: bool = False) -> str:
    """A hint for an unknown setting name: its broker-level synonym, or the closest known name."""
    def shown(known: str) -> str:
        return f"{SETTINGS_BY_NAME[known].environment_variable} ({known})" if environment else known
    if name in TOPIC_CONFIG_SYNONYMS:
        return f"; {name} is a topic config, whose broker-wide default is {shown(TOPIC_CONFIG_SYNONYMS[name][0][0])}"
    if name.startswith("log.") and name[4:] in TOPIC_CONFIG_SYNONYMS:  # log.segment.index.bytes
        broker_name = TOPIC_CONFIG_SYNONYMS[name[4:]][0][0]
        return f"; did you mean {shown(broker_name)}, the broker-wide default of topic config {name[4:]}?"
    close = difflib.get_close_matches(name, SETTINGS_BY_NAME, n=1, cutoff=0.6)
    return f"; did you mean {shown(close[0])}?" if close else ""
