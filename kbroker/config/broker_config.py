"""The broker's configuration under Kafka's names, from defaults, a file, the environment and overrides.

Precedence, lowest first: the defaults in :mod:`kbroker.config.definitions`,
a server.properties file (``--config``, Java properties syntax), environment
variables ``KBROKER_<NAME>`` (``log.retention.ms`` -> ``KBROKER_LOG_RETENTION_MS``),
then ``--override key=value``. Unlike Kafka, which logs and ignores unknown
names, anything unknown or invalid raises :class:`ConfigError` naming the
setting, the value, where it came from and what is allowed.

Settings that fall back on others resolve as Kafka's do: ``log.retention.ms``
> ``.minutes`` > ``.hours``, ``log.roll.ms`` > ``.hours`` (and the jitter
alike), ``log.flush.interval.ms`` > ``log.flush.scheduler.interval.ms``,
``log.dirs`` > ``log.dir``, ``advertised.listeners`` > ``listeners``,
``node.id`` > ``broker.id``. Attribute access and
:meth:`BrokerConfig.get` give the resolved value, :meth:`BrokerConfig.declared`
the one set (or the table's default).

The listener and quorum rules are Kafka's KRaft rules with one deliberate
difference: with ``controller.quorum.voters`` empty, a combined
``broker,controller`` process runs an embedded one-voter quorum and needs no
controller listener (Kafka would require both).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import ipaddress
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple

from kbroker.config.errors import ConfigError
from kbroker.config.sources import (DEFAULT_ORIGIN, Origin, Original, Source, environment_originals, file_originals,
                                    override_originals, suggestion)
from kbroker.config.definitions import (
    CLUSTER_DEFAULTS,
    SETTINGS_BY_ATTRIBUTE,
    SETTINGS_BY_ENVIRONMENT,
    SETTINGS_BY_NAME,
    TOPIC_CONFIG_SYNONYMS,
    Setting,
)
from kbroker.log.config import LogConfig

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
NON_ROUTABLE_HOST = "0.0.0.0"

_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
_HOST_PORT = re.compile(r"(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)")
# Settings whose value falls back on the next one that is not None, times its factor.
_CHAINS = {synonyms[0][0]: synonyms for synonyms in TOPIC_CONFIG_SYNONYMS.values() if len(synonyms) > 1}


class Endpoint(NamedTuple):
    listener_name: str
    host: str | None  # None: every interface (an empty host, by Kafka's convention)
    port: int
    security_protocol: str


class Voter(NamedTuple):
    node_id: int
    host: str
    port: int


# --- the configuration ---

class BrokerConfig:
    """Typed, validated settings; ``config.log_retention_ms`` is ``config.get("log.retention.ms")``."""

    def __init__(self, originals: Iterable[Original] = ()) -> None:
        self.originals: dict[str, Original] = {}
        for original in originals:
            self.originals.pop(original.name, None)  # a later one wins (and moves to the end)
            self.originals[original.name] = original
        self._values = {name: setting.default for name, setting in SETTINGS_BY_NAME.items()}
        self._listener_values: dict[tuple[str, str], object] = {}  # (LISTENER, setting) -> listener.name.* value
        for original in self.originals.values():
            if original.name.startswith(_LISTENER_PREFIX):
                self._listener_values[_listener_setting(original)] = _parse_listener_setting(original)
            else:
                self._values[original.name] = _parse(original)
        self._resolved: dict[str, object] = {}
        self._resolve_node_id()
        self._resolve_logs()
        self._check_replication()
        self._resolved["controller.listener.names"] = self.controller_listener_names
        self.security_protocol_map = self._parse_security_protocol_map()
        self.listener_endpoints = self._parse_endpoints("listeners", self.declared("listeners"), distinct_ports=True)
        advertised = self.declared("advertised.listeners")
        self.advertised_endpoints = (
            self.listener_endpoints if advertised is None
            else self._parse_endpoints("advertised.listeners", advertised, distinct_ports=False))
        self._resolved["advertised.listeners"] = self.declared("listeners") if advertised is None else advertised
        self.quorum_voters = self._parse_voters()
        self._resolve_cluster_defaults()
        self._check_quorum()
        self._check_broker_listeners()

    @classmethod
    def load(cls, config_file: str | None = None, environ: Mapping[str, str] | None = None,
             overrides: Iterable[str] = ()) -> BrokerConfig:
        """Defaults < ``config_file`` < ``KBROKER_*`` in ``environ`` < ``overrides`` ("key=value")."""
        originals = file_originals(config_file) if config_file else []
        originals += environment_originals(environ or {})
        originals += override_originals(overrides)
        return cls(originals)

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> BrokerConfig:
        """Settings given in code (tests, the pytest plugin) as overrides: ``{"node.id": 2, ...}``."""
        def text(name, value):
            setting = SETTINGS_BY_NAME.get(name)
            return setting.format(value) if setting and not isinstance(value, str) else str(value)
        return cls(Original(name, text(name, value), Origin(Source.OVERRIDE, f"{name}={value}"))
                   for name, value in values.items() if value is not None)

    # --- access ---

    def get(self, name: str):
        """The effective value of setting ``name`` (fallbacks such as log.retention.hours applied)."""
        if name not in SETTINGS_BY_NAME:
            raise KeyError(f"unknown setting {name}{suggestion(name)}")
        return self._resolved.get(name, self._values[name])

    def declared(self, name: str):
        """The value the sources gave ``name``, else its default; no fallback to other settings."""
        if name not in SETTINGS_BY_NAME:
            raise KeyError(f"unknown setting {name}{suggestion(name)}")
        return self._values[name]

    def ignored_settings(self) -> list[str]:
        """Each setting given a value other than its default that kbroker accepts but does not act on
        (``used=False``), as "name=value (where)": worth a warning at start, as Kafka gives a name it
        does not know."""
        return [self._shown(name) for name in self.originals
                if name in SETTINGS_BY_NAME and not SETTINGS_BY_NAME[name].used
                and self.declared(name) != self.default(name)]

    def default(self, name: str):
        """Setting ``name``'s default on this node: Kafka's for a node of a cluster (CLUSTER_DEFAULTS)."""
        if not self.is_embedded_quorum and name in CLUSTER_DEFAULTS:
            return CLUSTER_DEFAULTS[name]
        return SETTINGS_BY_NAME[name].default

    def source(self, name: str) -> Origin:
        original = self.originals.get(name)
        return original.origin if original else DEFAULT_ORIGIN

    def __getattr__(self, attribute: str):
        setting = SETTINGS_BY_ATTRIBUTE.get(attribute)
        if attribute.startswith("_") or setting is None:
            close = difflib.get_close_matches(attribute, SETTINGS_BY_ATTRIBUTE, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise AttributeError(f"{type(self).__name__} has no attribute {attribute!r}{hint}")
        return self.get(setting.name)

    def for_listener(self, listener_name: str, name: str):
        """Setting ``name`` as listener ``listener_name`` sees it: its ``listener.name.<l>.`` form, else the
        plain one. ``<mechanism>.sasl.jaas.config`` exists only in the prefixed form (None when unset)."""
        value = self._listener_values.get((listener_name.upper(), name))
        if value is not None or name.endswith(_JAAS_SUFFIX) and name != "sasl.jaas.config":
            return value
        return self.get(name)

    @property
    def controller_endpoints(self) -> list[Endpoint]:
        names = self.controller_listener_names
        return [endpoint for endpoint in self.listener_endpoints if endpoint.listener_name in names]

    @property
    def client_endpoint(self) -> Endpoint:
        """The listener clients connect to: the first that is not the controller's."""
        names = self.controller_listener_names
        return next(endpoint for endpoint in self.listener_endpoints if endpoint.listener_name not in names)

    @property
    def advertised_broker_endpoints(self) -> list[Endpoint]:
        """What Metadata responses advertise: the advertised listeners that are not the controller's."""
        names = self.controller_listener_names
        return [endpoint for endpoint in self.advertised_endpoints if endpoint.listener_name not in names]

    @property
    def advertised_controller_endpoints(self) -> list[Endpoint]:
        """What this controller tells the quorum: per controller listener, its advertised address or else its own."""
        endpoints = []
        for name in self.controller_listener_names:
            for candidate in (*self.advertised_endpoints, *self.listener_endpoints):
                if candidate.listener_name == name:
                    endpoints.append(candidate)
                    break
        return endpoints

    @property
    def is_embedded_quorum(self) -> bool:
        """One process is the whole cluster: the metadata quorum is this node alone."""
        return not self.quorum_voters

    def log_config_defaults(self) -> dict[str, object]:
        """Topic config name -> the default the broker's settings give it (Kafka's topic/broker synonyms)."""
        return {topic: self.get(synonyms[0][0]) for topic, synonyms in TOPIC_CONFIG_SYNONYMS.items()}

    def topic_default_origin(self, topic_config: str) -> tuple[str | None, Origin]:
        """The broker setting that supplied a topic config's default and where it was set; (None, default)."""
        for name, _factor in TOPIC_CONFIG_SYNONYMS[topic_config]:
            if name in self.originals:
                return name, self.originals[name].origin
        return None, DEFAULT_ORIGIN

    def log_config(self) -> LogConfig:
        """The defaults as the log layer's :class:`log.config.LogConfig`."""
        fields = {field.name for field in dataclasses.fields(LogConfig)}
        values = {topic.replace(".", "_"): value for topic, value in self.log_config_defaults().items()}
        values["cleanup_policy"] = ",".join(values["cleanup_policy"])
        return LogConfig(**{name: value for name, value in values.items() if name in fields})

    # --- resolution and cross-setting rules ---

    def _shown(self, name: str) -> str:
        value = SETTINGS_BY_NAME[name].format(self.declared(name))
        return f"{name}={value} ({self.source(name)})"

    def _fail(self, name: str, message: str):
        value = SETTINGS_BY_NAME[name].format(self.declared(name))
        raise ConfigError(f"{self._shown(name)}: {message}", name, value, self.source(name))

    def _resolve_node_id(self) -> None:
        broker_id = self.declared("broker.id")
        if "broker.id" in self.originals and "node.id" not in self.originals:
            if broker_id < 0:
                self._fail("broker.id", "must be at least 0 (it sets node.id)")
            self._resolved["node.id"] = broker_id
        elif "broker.id" in self.originals and broker_id != self.declared("node.id"):
            self._fail("broker.id", f"must equal node.id, set to {self._shown('node.id')}")
        self._resolved["broker.id"] = self.get("node.id")

    def _resolve_logs(self) -> None:
        for name, chain in _CHAINS.items():
            for synonym, factor in chain:
                if self.declared(synonym) is not None:
                    self._resolved[name] = self.declared(synonym) * factor
                    break
        if self._resolved["log.retention.ms"] < 0:
            self._resolved["log.retention.ms"] = -1
        if self._resolved["log.retention.ms"] == 0:
            self._fail(self._supplier("log.retention.ms"), "retention must be unlimited (-1) or at least 1 ms")
        if self._resolved["log.roll.ms"] < 1:
            self._fail("log.roll.ms", "must be at least 1")
        if self._resolved["log.roll.jitter.ms"] < 0:
            self._fail("log.roll.jitter.ms", "must be at least 0")
        source = "log.dirs" if self.declared("log.dirs") is not None else "log.dir"
        directories = tuple(item for item in _LIST_SEPARATOR.split(self.declared(source)) if item)
        if not directories:
            self._fail(source, "at least one log directory must be given through log.dirs or log.dir")
        self._resolved["log.dirs"] = directories
        self._resolved["metadata.log.dir"] = self.declared("metadata.log.dir") or directories[0]

    def _resolve_cluster_defaults(self) -> None:
        """A node of a cluster replicates the coordinators' topics as Kafka does, unless told otherwise."""
        if self.is_embedded_quorum:
            return
        for name, value in CLUSTER_DEFAULTS.items():
            if name not in self.originals:
                self._values[name] = value

    def _supplier(self, name: str) -> str:
        return next(synonym for synonym, _ in _CHAINS[name] if self.declared(synonym) is not None)

    def _check_replication(self) -> None:
        if self.declared("replica.fetch.wait.max.ms") > self.declared("replica.lag.time.max.ms"):
            self._fail("replica.fetch.wait.max.ms", "must not exceed replica.lag.time.max.ms (or the ISR churns)")

    def _parse_security_protocol_map(self) -> dict[str, str]:
        protocols = {}
        for entry in _csv(self.declared("listener.security.protocol.map")):
            name, colon, protocol = entry.rpartition(":")
            if not colon or not name.strip():
                self._fail("listener.security.protocol.map", f"entry {entry!r} is not NAME:PROTOCOL")
            if protocol.strip().upper() not in SECURITY_PROTOCOLS:
                self._fail("listener.security.protocol.map",
                           f"unknown security protocol {protocol!r}; allowed: {', '.join(SECURITY_PROTOCOLS)}")
            protocols[name.strip().upper()] = protocol.strip().upper()
        if "listener.security.protocol.map" not in self.originals:
            # KRaft's rule: controller listeners default to PLAINTEXT unless SSL or SASL is in use.
            names = [entry.partition(":")[0].upper() for entry in _csv(self.declared("listeners"))]
            names += self.controller_listener_names
            if not any(name in SECURITY_PROTOCOLS[1:] for name in names):
                protocols.update((name, "PLAINTEXT") for name in self.controller_listener_names)
        return protocols

    @property
    def controller_listener_names(self) -> tuple[str, ...]:
        return tuple(name.upper() for name in self.declared("controller.listener.names") if name)

    def _parse_endpoints(self, name: str, text: str, distinct_ports: bool) -> list[Endpoint]:
        endpoints = []
        for entry in _csv(text):
            match = _LISTENER.fullmatch(entry)
            if match is None:
                self._fail(name, f"cannot parse {entry!r} as NAME://host:port")
            listener_name, host, port = match.group(1).upper(), match.group(2) or None, int(match.group(3))
            if not 0 <= port <= 65535:
                self._fail(name, f"port {port} of {entry!r} is not in 0..65535")
            protocol = self.security_protocol_map.get(listener_name)
            if protocol is None:
                mapping = self._shown("listener.security.protocol.map")
                self._fail(name, f"no security protocol for listener {listener_name}; add it to {mapping}")
            endpoints.append(Endpoint(listener_name, host, port, protocol))
        if len({endpoint.listener_name for endpoint in endpoints}) != len(endpoints):
            self._fail(name, "each listener must have a different name")
        if distinct_ports:
            for port in {endpoint.port for endpoint in endpoints if endpoint.port != 0}:
                sharing = [endpoint.host for endpoint in endpoints if endpoint.port == port]
                if len(sharing) > 1 and sorted(_ip_version(host) for host in sharing) != [4, 6]:
                    self._fail(name, f"each listener must have a different port (unless exactly one listener on "
                                     f"an IPv4 address and one on an IPv6 address share it); port {port} repeats")
        return endpoints

    def _parse_voters(self) -> tuple[Voter, ...]:
        voters = []
        for entry in self.declared("controller.quorum.voters"):
            node_id, at, address = entry.partition("@")
            match = _HOST_PORT.fullmatch(address) if at and "@" not in address else None
            if match is None or not match.group(1) or not re.fullmatch(r"[+-]?[0-9]+", node_id):
                self._fail("controller.quorum.voters", f"entry {entry!r} is not {{id}}@{{host}}:{{port}}")
            if match.group(1) == NON_ROUTABLE_HOST:
                self._fail("controller.quorum.voters", f"host {NON_ROUTABLE_HOST} of {entry!r} is not routable")
            voters.append(Voter(int(node_id), match.group(1), int(match.group(2))))
        if len({voter.node_id for voter in voters}) != len(voters):
            self._fail("controller.quorum.voters", "a voter id appears twice")
        return tuple(voters)

    def _check_quorum(self) -> None:
        roles = set(self.declared("process.roles"))
        node_id = self.get("node.id")
        voter_ids = {voter.node_id for voter in self.quorum_voters}
        controller_names = self.controller_listener_names
        listener_names = {endpoint.listener_name for endpoint in self.listener_endpoints}
        if not voter_ids and roles != {"broker", "controller"}:
            self._fail("controller.quorum.voters", f"must list the controller quorum unless process.roles is "
                                                   f"broker,controller; {self._shown('process.roles')}")
        if "controller" in roles:
            if voter_ids and node_id not in voter_ids:
                self._fail("controller.quorum.voters", f"must include this controller's node.id {node_id}")
            if voter_ids and not controller_names:
                self._fail("controller.listener.names", "must name a listener of this controller (from listeners)")
            missing = [name for name in controller_names if name not in listener_names]
            if missing:
                self._fail("controller.listener.names", f"{', '.join(missing)} must appear in listeners, set to "
                                                        f"{self._shown('listeners')}")
        if roles == {"broker"}:
            if node_id in voter_ids:
                self._fail("controller.quorum.voters", f"must not include node.id {node_id} of a broker-only node")
            if not controller_names:
                self._fail("controller.listener.names", "must name the controllers' listener on a broker-only node")
            if set(controller_names) & listener_names:
                self._fail("controller.listener.names", "must not appear in listeners on a broker-only node")
            unmapped = [name for name in controller_names if name not in self.security_protocol_map]
            if unmapped:
                self._fail("listener.security.protocol.map", f"needs a protocol for {', '.join(unmapped)}")
        if roles == {"controller"} and listener_names - set(controller_names):
            self._fail("listeners", "may only hold controller.listener.names listeners when process.roles=controller")

    def _check_broker_listeners(self) -> None:
        inter_broker = self._inter_broker_listener_name()
        self._resolved["inter.broker.listener.name"] = inter_broker
        advertised_names = {endpoint.listener_name for endpoint in self.advertised_broker_endpoints}
        listener_names = {endpoint.listener_name for endpoint in self.listener_endpoints}
        advertising = "advertised.listeners" if "advertised.listeners" in self.originals else "listeners"
        if "broker" in self.declared("process.roles"):
            if not advertised_names:
                self._fail(advertising, "needs at least one broker listener (one not in controller.listener.names)")
            if inter_broker not in advertised_names:
                self._fail(advertising, f"must include the inter-broker listener {inter_broker} (see inter.broker."
                                        f"listener.name); broker listeners: {', '.join(sorted(advertised_names))}")
            if not advertised_names <= listener_names:
                self._fail("advertised.listeners", f"names must be among those of listeners: "
                                                   f"{', '.join(sorted(listener_names))}")
        for endpoint in self.advertised_broker_endpoints + self.advertised_controller_endpoints:
            if endpoint.host == NON_ROUTABLE_HOST:
                self._fail(advertising if endpoint in self.advertised_endpoints else "listeners",
                           f"cannot advertise the non-routable meta-address {NON_ROUTABLE_HOST}; "
                           "set advertised.listeners to a routable address")

    def _inter_broker_listener_name(self) -> str:
        name = self.declared("inter.broker.listener.name")
        if name is None:
            return self.declared("security.inter.broker.protocol")
        if "security.inter.broker.protocol" in self.originals:
            self._fail("inter.broker.listener.name", "only one of inter.broker.listener.name and "
                                                     "security.inter.broker.protocol may be set")
        if name.upper() not in self.security_protocol_map:
            self._fail("inter.broker.listener.name", "is not a listener name of listener.security.protocol.map")
        return name.upper()


def _parse(original: Original):
    setting: Setting | None = SETTINGS_BY_NAME.get(original.name)
    if setting is None:
        environment = original.origin.source is Source.ENVIRONMENT
        shown = f"in {original.origin}" if environment else f"{original.name} ({original.origin})"
        raise ConfigError(f"unknown setting {shown}{suggestion(original.name, environment)}",
                          original.name, original.text, original.origin)
    try:
        value = setting.parse(original.text)
    except ValueError as error:
        value, problem = None, str(error)
    else:
        problem = None if setting.validator is None or setting.validator(value) else setting.allowed()
    if problem is not None:
        message = f"invalid value {original.text!r} for {setting.name} ({original.origin}): expected {problem}"
        raise ConfigError(message, setting.name, original.text, original.origin)
    return value


_LISTENER_PREFIX = "listener.name."
_JAAS_SUFFIX = ".sasl.jaas.config"
_SASL_MECHANISMS = ("plain", "scram-sha-256", "scram-sha-512", "gssapi", "oauthbearer")


def listener_setting(name: str) -> tuple[str, str] | None:
    """``listener.name.<l>.<setting>`` as (L, setting) if the setting may be given per listener, else None."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    listener, _, setting = name[len(_LISTENER_PREFIX):].partition(".")
    mechanism, _, rest = setting.partition(".")
    per_listener = setting.startswith(("ssl.", "sasl.")) or setting == "connections.max.reauth.ms"
    if listener and (per_listener and setting in SETTINGS_BY_NAME
                     or mechanism in _SASL_MECHANISMS and "." + rest == _JAAS_SUFFIX):
        return listener.upper(), setting
    return None


def _listener_setting(original: Original) -> tuple[str, str]:
    """``listener.name.<l>.<setting>`` as (L, setting); ConfigError unless the setting may be per listener."""
    found = listener_setting(original.name)
    if found is not None:
        return found
    raise ConfigError(f"unknown setting {original.name} ({original.origin}): listener.name.<listener>. takes "
                      f"ssl.*, sasl.* and connections.max.reauth.ms settings and <mechanism>{_JAAS_SUFFIX}",
                      original.name, original.text, original.origin)


def _parse_listener_setting(original: Original):
    _, name = _listener_setting(original)
    if name.endswith(_JAAS_SUFFIX) and name not in SETTINGS_BY_NAME:
        return original.text.strip()
    return _parse(dataclasses.replace(original, name=name))


def _csv(text: str | None) -> list[str]:
    return [item for item in _LIST_SEPARATOR.split(text.strip()) if item] if text else []


def _ip_version(host: str | None) -> int:
    try:
        return ipaddress.ip_address(host).version if host else 0
    except ValueError:
        return 0
