"""Every broker setting kbroker knows: Kafka's name, type, default, allowed values, one line of doc.

Names, types and defaults are Kafka's (4.0 line) except the single-node
development defaults below, which make `kbroker` with no arguments a
complete cluster on one machine:

    node.id=1                       Kafka: -1, and KRaft requires it to be set. A lone node needs no choice.
    process.roles=broker,controller Kafka: empty, and 4.0 requires it. One process is a whole cluster.
    listeners=PLAINTEXT://localhost:9092
                                    Kafka: PLAINTEXT://:9092 (every interface). A development broker stays
                                    on loopback unless asked, and `localhost` can be advertised as it is.
    log.dir=./kbroker-data          Kafka: /tmp/kafka-logs. Data survives reboots and sits where you ran it.
                                    (log.dirs stays unset, as in Kafka, so that log.dir supplies it.)
    offsets.topic.replication.factor=1, transaction.state.log.replication.factor=1,
    transaction.state.log.min.isr=1, share.coordinator.state.topic.replication.factor=1,
    share.coordinator.state.topic.min.isr=1
                                    Kafka: 3, 3, 2, 3 and 2, which a single broker cannot satisfy; Kafka's own
                                    sample server.properties sets these to 1 too. A node of a cluster
                                    (controller.quorum.voters set) takes Kafka's values (CLUSTER_DEFAULTS),
                                    so that the coordinators' state is replicated unless asked otherwise.

group.initial.rebalance.delay.ms keeps Kafka's 3000: without it a new group forms
around its first member at once, and kafka-python 3.0.12 then hangs about one
formation in ten (issue 31, and compat_tests/test_group_formation.py). Test brokers
set a short delay instead (compat_tests/broker_process.py).

And one deliberate difference in the KRaft rules (see kbroker.config): with
`controller.quorum.voters` empty, a combined broker+controller runs an
embedded one-voter quorum and needs no controller listener.

Settings marked ``used=False`` are accepted so that Kafka's own
server.properties files load, but have no effect here (kbroker runs on one
trio thread, so Kafka's thread-pool sizes mean nothing; others are not built
yet). Starting with one of them set to anything but its default logs a
warning naming it (BrokerConfig.ignored_settings), as Kafka warns of a
setting it does not know.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
HOUR_MS = 3600 * 1000
MINUTE_MS = 60 * 1000
DAY_MS = 24 * HOUR_MS

# Kafka's ConfigDef types. "password" and "class" are strings here.
TYPES = ("int", "short", "long", "double", "bool", "string", "list", "password", "class")
_INTEGER_BOUNDS = {"short": (-(2**15), 2**15 - 1), "int": (-(2**31), INT_MAX), "long": (-(2**63), LONG_MAX)}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_TYPE_EXPECTED = {
    "int": "a 32-bit integer",
    "short": "a 16-bit integer",
    "long": "a 64-bit integer",
    "double": "a number",
    "bool": "true or false",
}


class AtLeast:
    def __init__(self, minimum: float) -> None:
        self.minimum = minimum

    def __call__(self, value) -> bool:
        return value >= self.minimum

    def __str__(self) -> str:
        return f"a value >= {self.minimum}"


class Between:
    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def __call__(self, value) -> bool:
        return self.low <= value <= self.high

    def __str__(self) -> str:
        return f"a value from {self.low} to {self.high}"


class OneOf:
    """A string among ``options`` (case-sensitive, as Kafka's ValidString)."""

    def __init__(self, *options: str) -> None:
        self.options = options

    def __call__(self, value) -> bool:
        return value in self.options

    def __str__(self) -> str:
        return "one of " + ", ".join(self.options)


class GzipLevel:
    """Kafka's gzip level: 1 to 9, or -1 (the codec's default)."""

    def __call__(self, value) -> bool:
        return value == -1 or 1 <= value <= 9

    def __str__(self) -> str:
        return "a value from 1 to 9, or -1"


class ListOf:
    """A comma-separated list whose items are among ``options``."""

    def __init__(self, *options: str, non_empty: bool = False, unique: bool = False) -> None:
        self.options, self.non_empty, self.unique = options, non_empty, unique

    def __call__(self, value) -> bool:
        if self.non_empty and not value or self.unique and len(set(value)) != len(value):
            return False
        return all(item in self.options for item in value)

    def __str__(self) -> str:
        qualities = ", ".join(word for word, wanted in (("non-empty", self.non_empty), ("duplicate-free", self.unique))
                              if wanted)
        return f"a {qualities + ' ' if qualities else ''}comma-separated list of {', '.join(self.options)}"


@dataclass(frozen=True)
class Setting:
    name: str
    type: str
    default: object
    doc: str
    validator: Callable[[object], bool] | None = None
    used: bool = True  # False: accepted for compatibility with Kafka's files, no effect

    @property
    def attribute(self) -> str:
        return self.name.replace(".", "_")

    @property
    def environment_variable(self) -> str:
        return "KBROKER_" + self.name.upper().replace(".", "_")

    @property
    def sensitive(self) -> bool:
        return self.type == "password"

    def allowed(self) -> str:
        """What a value must look like, for error messages."""
        expected = _TYPE_EXPECTED.get(self.type, "a comma-separated list" if self.type == "list" else "a string")
        return str(self.validator) if self.validator is not None else expected

    def parse(self, text: str):
        """The typed value of ``text`` as Kafka's ConfigDef parses it; ValueError if it is not one."""
        trimmed = text.strip()
        if self.type in _INTEGER_BOUNDS:
            low, high = _INTEGER_BOUNDS[self.type]
            if not _INTEGER.fullmatch(trimmed) or not low <= int(trimmed) <= high:
                raise ValueError(_TYPE_EXPECTED[self.type])
            return int(trimmed)
        if self.type == "double":
            if not _DOUBLE.fullmatch(trimmed):
                raise ValueError(_TYPE_EXPECTED["double"])
            return float(trimmed)
        if self.type == "bool":
            if trimmed.lower() not in ("true", "false"):
                raise ValueError(_TYPE_EXPECTED["bool"])
            return trimmed.lower() == "true"
        if self.type == "list":
            return tuple(_LIST_SEPARATOR.split(trimmed)) if trimmed else ()
        return trimmed

    def format(self, value) -> str | None:
        """``value`` as Kafka writes it (DescribeConfigs, server.properties)."""
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (tuple, list)):
            return ",".join(value)
        return str(value)


_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_S = Setting

SETTINGS: tuple[Setting, ...] = (
    # --- node and KRaft quorum ---
    _S("process.roles", "list", ("broker", "controller"), "Roles of this process: broker, controller, or both.",
       ListOf("broker", "controller", non_empty=True, unique=True)),
    _S("node.id", "int", 1, "This node's id among brokers and controllers.", AtLeast(0)),
    _S("broker.id", "int", -1, "Kafka's older name for node.id; if set, it must equal node.id."),
    _S("controller.quorum.voters", "list", (), "The controller quorum as {id}@{host}:{port} entries; empty: "
       "an embedded one-voter quorum (broker+controller only)."),
    _S("controller.listener.names", "list", (), "Names of the listeners the controller uses."),
    _S("controller.quorum.election.timeout.ms", "int", 1000, "Time without a leader before a new election."),
    _S("controller.quorum.fetch.timeout.ms", "int", 2000, "Time without a successful fetch before a voter stands "
       "for election."),
    _S("controller.quorum.election.backoff.max.ms", "int", 1000, "Longest backoff before starting a new election; "
       "not read: kbroker's quorum backs off by its own rule.", used=False),
    _S("controller.quorum.append.linger.ms", "int", 25, "How long the quorum leader gathers writes before "
       "flushing them; not read: kbroker's quorum does not linger.", used=False),
    _S("controller.quorum.request.timeout.ms", "int", 2000, "Time to wait for a quorum request's response."),
    _S("controller.socket.timeout.ms", "int", 30000, "Time a broker waits for the active controller's answer "
       "to an admin request it forwards (CreateTopics, ...); then the client is answered REQUEST_TIMED_OUT.",
       AtLeast(1)),
    _S("controller.quorum.retry.backoff.ms", "int", 20, "Wait before retrying a failed quorum request."),
    _S("broker.heartbeat.interval.ms", "int", 2000, "Time between a broker's heartbeats to the controller."),
    _S("broker.session.timeout.ms", "int", 9000, "How long a broker's lease lasts without heartbeats."),
    _S("broker.rack", "string", None, "Rack of this broker, for rack-aware replica placement."),
    _S("metadata.log.dir", "string", None, "Directory of the metadata log; unset: the first log directory."),
    _S("metadata.log.segment.bytes", "int", 1024**3, "Largest metadata log segment.", AtLeast(12)),
    _S("metadata.log.max.record.bytes.between.snapshots", "long", 20 * 1024**2, "Metadata log bytes after "
       "which a new snapshot is taken.", AtLeast(1)),
    _S("metadata.log.max.snapshot.interval.ms", "long", HOUR_MS, "Longest time between metadata snapshots "
       "(0: no time limit); not read: snapshots follow the bytes between them only.", AtLeast(0), used=False),
    _S("metadata.max.retention.bytes", "long", 100 * 1024**2, "Metadata log and snapshot bytes kept; not read.",
       used=False),
    _S("metadata.max.retention.ms", "long", 7 * DAY_MS, "How long metadata log files and snapshots are kept; "
       "not read.", used=False),
    _S("logging.format", "string", "text", "kbroker's own: log lines as text or as JSON objects, one event "
       "per line.", OneOf("text", "json")),
    _S("logging.requests", "bool", False, "kbroker's own: log every request (API, correlation id, client, "
       "latency); answers with errors are logged either way."),
    _S("metrics.port", "int", 8080, "kbroker's own: HTTP port of the web console, /metrics (Prometheus), "
       "/health and /ready; 0: a free one; -1: none. A node of a cluster serves none unless told; a lone node "
       "serves it on its first listener's host, and starts without it, with a warning, when the default port "
       "is taken.", Between(-1, 65535)),
    _S("schema.registry.listeners", "string", "http://localhost:8081", "kbroker's own: where this node "
       "serves the Confluent-compatible schema registry, as http://host:port (port 0: a free one); empty: "
       "not at all. A node of a cluster serves none unless told; a lone node whose default address is "
       "taken starts without it, with a warning."),
    _S("schema.registry.topic.replication.factor", "short", 1, "kbroker's own (Confluent's "
       "kafkastore.topic.replication.factor): replication factor of _schemas; the registry refuses writes "
       "until that many brokers are live to create it.", AtLeast(1)),
    # --- listeners and sockets ---
    _S("listeners", "string", "PLAINTEXT://localhost:9092", "Where to listen, as NAME://host:port entries "
       "(empty host: every interface)."),
    _S("advertised.listeners", "string", None, "Addresses given to clients, if not those of listeners."),
    _S("listener.security.protocol.map", "string", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
       "SASL_SSL:SASL_SSL", "Security protocol of each listener name, as NAME:PROTOCOL entries."),
    _S("inter.broker.listener.name", "string", None, "Listener brokers use to reach each other; unset: the one "
       "named after security.inter.broker.protocol."),
    _S("security.inter.broker.protocol", "string", "PLAINTEXT", "Security protocol between brokers (when "
       "inter.broker.listener.name is unset).", OneOf(*_PROTOCOLS)),
    _S("socket.send.buffer.bytes", "int", 100 * 1024, "SO_SNDBUF of client sockets (-1: the OS default); not "
       "read: kbroker leaves the OS's (self-tuning) sizes.", used=False),
    _S("socket.receive.buffer.bytes", "int", 100 * 1024, "SO_RCVBUF of client sockets (-1: the OS default); not "
       "read: kbroker leaves the OS's (self-tuning) sizes.", used=False),
    _S("socket.request.max.bytes", "int", 100 * 1024**2, "Largest request frame accepted.", AtLeast(1)),
    _S("socket.listen.backlog.size", "int", 50, "Pending connections the listen socket queues; not read: "
       "kbroker's listen sockets queue 1024.", AtLeast(1), used=False),
    _S("max.connections", "int", INT_MAX, "Most client connections open at once.", AtLeast(0)),
    _S("connections.max.idle.ms", "long", 10 * MINUTE_MS, "Idle connections are closed after this long."),
    _S("queued.max.request.bytes", "long", 256 * 1024**2, "Bytes of large requests (64 KiB and more) read and "
       "not yet handled, over all connections; past it connections wait before reading more. -1 or 0: no bound. "
       "Kafka's default is -1."),
    _S("queued.max.requests", "int", 500, "Requests read ahead but not yet answered, per connection.",
       AtLeast(1)),
    _S("num.network.threads", "int", 3, "Kafka's network thread count; kbroker is single-threaded.", AtLeast(1),
       used=False),
    _S("num.io.threads", "int", 8, "Kafka's request handler thread count; kbroker is single-threaded.",
       AtLeast(1), used=False),
    _S("background.threads", "int", 10, "Kafka's background thread count; unused here.", AtLeast(1), used=False),
    # --- security (each ssl.* and sasl.* setting may also be given per listener, prefixed with
    #     listener.name.<listener name in lower case>., as in Kafka) ---
    _S("ssl.keystore.type", "string", "PEM", "Format of the key store; kbroker reads PEM.", OneOf("PEM")),
    _S("ssl.keystore.location", "string", None, "PEM file with the listener's certificate chain and private key."),
    _S("ssl.keystore.certificate.chain", "password", None, "The certificate chain in PEM, instead of a file."),
    _S("ssl.keystore.key", "password", None, "The private key in PEM, instead of a file."),
    _S("ssl.keystore.password", "password", None, "Password of the key store (for PEM: of the private key)."),
    _S("ssl.key.password", "password", None, "Password of the private key."),
    _S("ssl.truststore.type", "string", "PEM", "Format of the trust store; kbroker reads PEM.", OneOf("PEM")),
    _S("ssl.truststore.location", "string", None, "PEM file of the certificate authorities trusted for clients' "
       "certificates."),
    _S("ssl.truststore.certificates", "password", None, "The trusted certificates in PEM, instead of a file."),
    _S("ssl.truststore.password", "password", None, "Password of the trust store; PEM trust stores have none.",
       used=False),
    _S("ssl.client.auth", "string", "none", "Whether TLS clients must present a certificate.",
       OneOf("required", "requested", "none")),
    _S("ssl.protocol", "string", "TLSv1.3", "Newest TLS version offered; not read: ssl.enabled.protocols "
       "chooses the versions.", OneOf("TLSv1.2", "TLSv1.3", "TLS"), used=False),
    _S("ssl.enabled.protocols", "list", ("TLSv1.2", "TLSv1.3"), "TLS versions accepted.",
       ListOf("TLSv1.2", "TLSv1.3", non_empty=True, unique=True)),
    _S("ssl.cipher.suites", "list", (), "TLS 1.2 cipher suites (OpenSSL names) allowed; empty: the defaults."),
    _S("ssl.principal.mapping.rules", "string", "DEFAULT", "How a client certificate's subject becomes the "
       "principal; DEFAULT: its distinguished name.", OneOf("DEFAULT")),
    _S("ssl.endpoint.identification.algorithm", "string", "https", "Host name check of other nodes' server "
       "certificates when this node connects to them (https: checked; empty: not).", OneOf("https", "HTTPS", "")),
    _S("sasl.enabled.mechanisms", "list", ("GSSAPI",), "SASL mechanisms the SASL listeners offer.",
       ListOf("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", unique=True)),
    _S("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "SASL mechanism brokers log in to each "
       "other's inter-broker listener with (its JAAS line's username and password)."),
    _S("sasl.mechanism.controller.protocol", "string", "GSSAPI", "SASL mechanism nodes log in to the controller "
       "listener with (its JAAS line's username and password)."),
    _S("sasl.jaas.config", "password", None, "JAAS login context; on a broker only in its listener-prefixed form "
       "(listener.name.<l>.<mechanism>.sasl.jaas.config). PLAIN's users are its user_<name>=\"<password>\" "
       "options."),
    _S("sasl.server.max.receive.size", "int", 512 * 1024, "Largest SASL token accepted before authentication.",
       AtLeast(1)),
    _S("connections.max.reauth.ms", "long", 0, "Longest a SASL session lasts before the client must "
       "re-authenticate (KIP-368); 0: forever.", AtLeast(0)),
    _S("authorizer.class.name", "string", "", "The authorizer; empty: none, everything allowed. "
       "org.apache.kafka.metadata.authorizer.StandardAuthorizer or kbroker.security.Authorizer: ACLs."),
    _S("super.users", "string", "", "Principals allowed everything, as User:name entries separated by ';'."),
    _S("allow.everyone.if.no.acl.found", "bool", False, "Allow what no ACL mentions (the resource has none)."),
    _S("quota.window.num", "int", 11, "Samples a client quota's rate is measured over.", AtLeast(1)),
    _S("quota.window.size.seconds", "int", 1, "Length of a client quota's sample.", AtLeast(1)),
    # --- topics and requests ---
    _S("num.partitions", "int", 1, "Partitions of an auto-created topic.", AtLeast(1)),
    _S("default.replication.factor", "int", 1, "Replication factor of an auto-created topic."),
    _S("min.insync.replicas", "int", 1, "Fewest in-sync replicas an acks=all produce needs.", AtLeast(1)),
    _S("auto.create.topics.enable", "bool", True, "Create unknown topics on Metadata requests."),
    _S("delete.topic.enable", "bool", True, "Allow topics to be deleted; not read: topics can always be deleted "
       "(ACLs restrict who may).", used=False),
    _S("message.max.bytes", "int", 1024 * 1024 + 12, "Largest record batch accepted.", AtLeast(0)),
    _S("fetch.max.bytes", "int", 55 * 1024**2, "Most bytes one fetch answer carries.", AtLeast(1024)),
    _S("compression.type", "string", "producer", "Topic compression; producer: keep the producer's codec.",
       OneOf(*_COMPRESSION)),
    _S("compression.gzip.level", "int", -1, "gzip level of batches the broker compresses (-1: the codec's "
       "default); not read: kbroker compresses at the codecs' default levels.", GzipLevel(), used=False),
    _S("compression.lz4.level", "int", 9, "lz4 level of batches the broker compresses; not read.",
       Between(1, 17), used=False),
    _S("compression.zstd.level", "int", 3, "zstd level of batches the broker compresses; not read.",
       Between(-131072, 22), used=False),
    _S("max.decompressed.message.bytes", "int", 2147483639, "Largest decompressed size of a batch the broker "
       "decompresses; not read.", AtLeast(1), used=False),
    _S("max.incremental.fetch.session.cache.slots", "int", 1000, "Fetch sessions (KIP-227) kept at once; a new "
       "one past it evicts an idle or smaller one, or opens none.", AtLeast(0)),
    _S("unclean.leader.election.enable", "bool", False, "Let an out-of-sync replica become leader, losing data; "
       "not read: kbroker elects leaders from the ISR only.", used=False),
    _S("auto.leader.rebalance.enable", "bool", True, "Move leadership back to preferred replicas."),
    _S("leader.imbalance.check.interval.seconds", "long", 300, "How often the controller looks for leaders to "
       "move back to their preferred replicas.", AtLeast(1)),
    _S("leader.imbalance.per.broker.percentage", "int", 10, "Share of a broker's preferred leaderships held "
       "elsewhere above which they are moved back.", AtLeast(0)),
    _S("replica.lag.time.max.ms", "long", 30000, "A follower that has not caught up for this long leaves the ISR."),
    _S("replica.fetch.wait.max.ms", "int", 500, "Longest wait of a follower's fetch."),
    _S("replica.fetch.max.bytes", "int", 1024**2, "Bytes a follower asks for per partition.", AtLeast(0)),
    _S("replica.fetch.response.max.bytes", "int", 10 * 1024**2, "Bytes a follower asks for per fetch.",
       AtLeast(0)),
    _S("replica.fetch.backoff.ms", "int", 1000, "Follower's wait after a fetch error.", AtLeast(0)),
    _S("producer.id.expiration.ms", "int", DAY_MS, "Idle producer ids are forgotten after this long.", AtLeast(1)),
    # --- internal topics, groups, transactions ---
    _S("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", AtLeast(1)),
    _S("offsets.topic.replication.factor", "short", 1, "Replication factor of __consumer_offsets.", AtLeast(1)),
    _S("offsets.topic.segment.bytes", "int", 100 * 1024**2, "Segment size of __consumer_offsets.", AtLeast(1)),
    _S("offsets.retention.minutes", "int", 7 * 24 * 60, "Committed offsets of an empty group are kept this long.",
       AtLeast(1)),
    _S("offsets.retention.check.interval.ms", "long", 600000, "How often expired offsets are looked for.",
       AtLeast(1)),
    _S("offsets.commit.timeout.ms", "int", 5000, "Longest wait for an offset commit to be replicated; not read.",
       AtLeast(1), used=False),
    _S("offset.metadata.max.bytes", "int", 4096, "Largest metadata string of a committed offset."),
    _S("group.initial.rebalance.delay.ms", "int", 3000, "Wait for more members before a new group's first "
       "rebalance (again for each member that joins meanwhile, up to the rebalance timeout)."),
    _S("group.min.session.timeout.ms", "int", 6000, "Shortest session timeout a classic group member may ask for."),
    _S("group.max.session.timeout.ms", "int", 30 * MINUTE_MS, "Longest session timeout a classic group member "
       "may ask for."),
    _S("group.max.size", "int", INT_MAX, "Most members of a classic group.", AtLeast(1)),
    _S("group.coordinator.rebalance.protocols", "list", ("classic", "consumer"), "Group protocols served; not "
       "read: kbroker serves classic and consumer.", ListOf("classic", "consumer", "share"), used=False),
    _S("group.consumer.session.timeout.ms", "int", 45000, "Session timeout of consumer-protocol (KIP-848) "
       "members.", AtLeast(1)),
    _S("group.consumer.heartbeat.interval.ms", "int", 5000, "Heartbeat interval of consumer-protocol members.",
       AtLeast(1)),
    _S("group.consumer.max.size", "int", INT_MAX, "Most members of a consumer-protocol group.", AtLeast(1)),
    _S("group.share.session.timeout.ms", "int", 45000, "Session timeout of share-group (KIP-932) members.",
       AtLeast(1)),
    _S("group.share.min.session.timeout.ms", "int", 45000, "Shortest share.session.timeout.ms a group may set.",
       AtLeast(1)),
    _S("group.share.max.session.timeout.ms", "int", 60000, "Longest share.session.timeout.ms a group may set.",
       AtLeast(1)),
    _S("group.share.heartbeat.interval.ms", "int", 5000, "Heartbeat interval of share-group members.", AtLeast(1)),
    _S("group.share.min.heartbeat.interval.ms", "int", 5000, "Shortest share.heartbeat.interval.ms a group may "
       "set.", AtLeast(1)),
    _S("group.share.max.heartbeat.interval.ms", "int", 15000, "Longest share.heartbeat.interval.ms a group may "
       "set.", AtLeast(1)),
    _S("group.share.max.size", "int", 200, "Most members of a share group.", Between(1, 1000)),
    _S("group.share.record.lock.duration.ms", "int", 30000, "How long a share consumer holds the records it "
       "acquired before they are released (share.record.lock.duration.ms overrides it per group).", AtLeast(1000)),
    _S("group.share.min.record.lock.duration.ms", "int", 15000, "Shortest share.record.lock.duration.ms a group "
       "may set.", AtLeast(1000)),
    _S("group.share.max.record.lock.duration.ms", "int", 60000, "Longest share.record.lock.duration.ms a group "
       "may set.", Between(30000, 3600000)),
    _S("group.share.delivery.count.limit", "int", 5, "Deliveries of a record after which it is archived, never "
       "delivered again.", Between(2, 10)),
    _S("group.share.partition.max.record.locks", "int", 2000, "Most records of a share-partition acquired or "
       "waiting for acknowledgement at once.", Between(100, 10000)),
    _S("group.share.max.share.sessions", "int", 2000, "Most share sessions a broker keeps (one per share consumer "
       "and broker).", AtLeast(1)),
    _S("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", AtLeast(1)),
    _S("transaction.state.log.replication.factor", "short", 1, "Replication factor of __transaction_state.",
       AtLeast(1)),
    _S("transaction.state.log.min.isr", "int", 1, "min.insync.replicas of __transaction_state.", AtLeast(1)),
    _S("transaction.state.log.segment.bytes", "int", 100 * 1024**2, "Segment size of __transaction_state.",
       AtLeast(1)),
    _S("transaction.max.timeout.ms", "int", 15 * MINUTE_MS, "Longest transaction timeout a producer may ask for.",
       AtLeast(1)),
    _S("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "How often transactions "
       "open past their timeout are looked for (and aborted).", AtLeast(1)),
    _S("transaction.remove.expired.transaction.cleanup.interval.ms", "int", HOUR_MS, "How often transactional "
       "ids idle past transactional.id.expiration.ms are looked for (and forgotten).", AtLeast(1)),
    _S("transactional.id.expiration.ms", "int", 7 * DAY_MS, "Idle transactional ids are forgotten after this "
       "long.", AtLeast(1)),
    _S("share.coordinator.state.topic.num.partitions", "int", 50, "Partitions of __share_group_state (KIP-932).",
       AtLeast(1)),
    _S("share.coordinator.state.topic.replication.factor", "short", 1, "Replication factor of "
       "__share_group_state.", AtLeast(1)),
    _S("share.coordinator.state.topic.min.isr", "short", 1, "min.insync.replicas of __share_group_state.",
       AtLeast(1)),
    _S("share.coordinator.state.topic.segment.bytes", "int", 100 * 1024**2, "Segment size of __share_group_state.",
       AtLeast(1)),
    _S("share.coordinator.snapshot.update.records.per.snapshot", "int", 500, "Update records the share "
       "coordinator writes for a share-partition between two snapshot records.", Between(0, 500)),
    # --- logs (topic defaults: see TOPIC_CONFIG_SYNONYMS) ---
    _S("log.dir", "string", "./kbroker-data", "Data directory, when log.dirs is unset."),
    _S("log.dirs", "string", None, "Comma-separated data directories; unset: log.dir."),
    _S("log.dir.min.free.bytes", "long", 16 * 1024 * 1024, "kbroker's own: data appends are refused "
       "(KAFKA_STORAGE_ERROR) that would leave less free on the log directory's filesystem, kept for the "
       "metadata, checkpoints and a restart's recovery; 0: none kept.", AtLeast(0)),
    _S("log.segment.bytes", "int", 1024**3, "Largest segment file of a partition.", AtLeast(14)),
    _S("log.roll.ms", "long", None, "Roll a new segment after this long; unset: log.roll.hours."),
    _S("log.roll.hours", "int", 168, "Roll a new segment after this many hours, if log.roll.ms is unset.",
       AtLeast(1)),
    _S("log.roll.jitter.ms", "long", None, "Random jitter subtracted from the roll time; unset: "
       "log.roll.jitter.hours."),
    _S("log.roll.jitter.hours", "int", 0, "Roll jitter in hours, if log.roll.jitter.ms is unset.", AtLeast(0)),
    _S("log.retention.ms", "long", None, "Delete segments older than this (-1: never); unset: "
       "log.retention.minutes."),
    _S("log.retention.minutes", "int", None, "Retention in minutes, if log.retention.ms is unset; unset: "
       "log.retention.hours."),
    _S("log.retention.hours", "int", 168, "Retention in hours, if log.retention.ms and .minutes are unset."),
    _S("log.retention.bytes", "long", -1, "Delete old segments beyond this many bytes per partition (-1: no "
       "limit)."),
    _S("log.retention.check.interval.ms", "long", 5 * MINUTE_MS, "How often retention is enforced.", AtLeast(1)),
    _S("log.cleanup.policy", "list", ("delete",), "What happens to old segments: delete, compact or both.",
       ListOf("compact", "delete")),
    _S("log.index.size.max.bytes", "int", 10 * 1024**2, "Largest offset index file.", AtLeast(4)),
    _S("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", AtLeast(0)),
    _S("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many unflushed messages.", AtLeast(1)),
    _S("log.flush.interval.ms", "long", None, "fsync data older than this; unset: "
       "log.flush.scheduler.interval.ms."),
    _S("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often the flusher looks for data to fsync."),
    _S("log.flush.offset.checkpoint.interval.ms", "int", 60000, "How often recovery points are checkpointed; "
       "not read: they are checkpointed at a clean stop and when records or topics are deleted.", AtLeast(0),
       used=False),
    _S("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "How often log start offsets are "
       "checkpointed; not read: as the recovery points.", AtLeast(0), used=False),
    _S("log.segment.delete.delay.ms", "long", 60000, "Wait before deleting a retired segment's files.",
       AtLeast(0)),
    _S("log.message.timestamp.type", "string", "CreateTime", "Record timestamps: the producer's or the broker's "
       "append time.", OneOf("CreateTime", "LogAppendTime")),
    _S("log.message.timestamp.before.max.ms", "long", LONG_MAX, "How far in the past a CreateTime timestamp "
       "may be.", AtLeast(0)),
    _S("log.message.timestamp.after.max.ms", "long", 3_600_000, "How far in the future a CreateTime timestamp "
       "may be.", AtLeast(0)),
    _S("log.cleaner.enable", "bool", True, "Run the compaction cleaner."),
    _S("log.cleaner.threads", "int", 1, "Compaction cleaner threads.", AtLeast(0)),
    _S("log.cleaner.backoff.ms", "long", 15000, "Cleaner's sleep when nothing needs cleaning.", AtLeast(0)),
    _S("log.cleaner.delete.retention.ms", "long", DAY_MS, "How long tombstones survive compaction.", AtLeast(0)),
    _S("log.cleaner.min.compaction.lag.ms", "long", 0, "Records stay uncompacted at least this long.",
       AtLeast(0)),
    _S("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Records become compactable at most this late.",
       AtLeast(1)),
    _S("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty share of a log that makes it worth cleaning.",
       Between(0, 1)),
    _S("confluent.value.schema.validation", "bool", False, "Confluent Server's name: the default of the topic "
       "config that refuses records whose value does not name a schema of the topic's subject in the schema "
       "registry."),
    _S("confluent.key.schema.validation", "bool", False, "Confluent Server's name: the same for record keys."),
    _S("log.preallocate", "bool", False, "Kafka's segment preallocation; not done here.", used=False),
    _S("log.local.retention.ms", "long", -2, "Tiered storage's local retention time (-2: retention.ms); "
       "not read: kbroker has no tiered storage.", AtLeast(-2), used=False),
    _S("log.local.retention.bytes", "long", -2, "Tiered storage's local retention size (-2: retention.bytes); "
       "not read.", AtLeast(-2), used=False),
    _S("log.remote.copy.lag.ms", "long", 0, "Tiered storage's delay before a segment is copied; not read.",
       AtLeast(-1), used=False),
    _S("log.remote.copy.lag.bytes", "long", -1, "Tiered storage's bytes held back from copying; not read.",
       AtLeast(-1), used=False),
    _S("num.recovery.threads.per.data.dir", "int", 2, "Kafka's recovery thread count; unused here.", AtLeast(1),
       used=False),
)

SETTINGS_BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}

SETTINGS_BY_ATTRIBUTE: dict[str, Setting] = {setting.attribute: setting for setting in SETTINGS}
SETTINGS_BY_ENVIRONMENT: dict[str, Setting] = {setting.environment_variable: setting for setting in SETTINGS}
assert len(SETTINGS_BY_NAME) == len(SETTINGS_BY_ATTRIBUTE) == len(SETTINGS_BY_ENVIRONMENT) == len(SETTINGS)

# Kafka's defaults where the single node's differ, for a node of a cluster: the settings not given.
CLUSTER_DEFAULTS: dict[str, object] = {
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
    "schema.registry.topic.replication.factor": 3,
    "schema.registry.listeners": "",  # several nodes on one machine would want the same port
    "metrics.port": -1,  # as the registry's
}
assert all(setting.type in TYPES for setting in SETTINGS)

# Topic config -> the broker settings that supply its default, first set one wins (Kafka's
# ServerTopicConfigSynonyms), each with the factor that turns its unit into the topic's. The topic configs
# themselves (types, rules, the ones with no broker default) are kbroker/config/topic_definitions.py's.
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "compression.type": (("compression.type", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
    "remote.copy.lag.ms": (("log.remote.copy.lag.ms", 1),),
    "remote.copy.lag.bytes": (("log.remote.copy.lag.bytes", 1),),
    "max.decompressed.message.bytes": (("max.decompressed.message.bytes", 1),),
    "confluent.value.schema.validation": (("confluent.value.schema.validation", 1),),
    "confluent.key.schema.validation": (("confluent.key.schema.validation", 1),),
}
assert all(name in SETTINGS_BY_NAME for synonyms in TOPIC_CONFIG_SYNONYMS.values() for name, _ in synonyms)
