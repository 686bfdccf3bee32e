"""Kafka as the oracle: the same scripted session against kbroker and against Apache Kafka, answer by answer.

A *session* is a function of one :class:`Side` (a broker, reached over raw sockets with our own codec): it
sends requests with ``side.call(api, version, body)`` and may build later requests from earlier answers
(a member id, a producer id), so the two brokers get the same requests but for what each of them handed
out. Every exchange is kept in the side's transcript; :func:`compare` then puts the two transcripts side
by side and flattens each answer into its fields (``topics[0].partitions[1].error_code``). Each field is
compared after the named rules of ``RULES`` (below) have said what of it is truly not comparable:

- ``rename``: an id a broker makes up (a topic id, a member id, a producer id, a node's id or port): each
  distinct value becomes ``<rule#n>`` in the order it first appears in that side's session, so the
  answers must still agree on which ids are the same and which differ (sentinels such as -1, 0, "",
  null and the zero uuid stay as they are: whether an id is there at all is compared);
- ``drop``: a value that differs between two runs of Kafka itself (a timestamp taken from a clock);
- ``presence``: only whether it is null, empty or set (prose meant for people, such as error messages);
- ``unordered``: an array whose order is not part of the protocol, compared as a sorted list;
- ``sentinel``: only which sentinel it is (-1, 0, null...), or that it is some other value (how far a log
  has come where each broker writes records of its own; a clock reading that one broker may not take);
- ``omit``: not compared at all, nor whether it is there: a deliberate difference of kbroker's, each one
  written in docs/kafka-differences.md under the rule's name (an array all of whose elements are
  omitted is compared as an empty one).

Everything else is compared as it is. A rule names the fields it applies to by their name (the last part
of the path), by an ``Api.field`` pair, or by a piece of the flattened path (one with a ``[``, such as
``configs[name='x']``, optionally after ``Api:``); ``RULES`` is the only table, and each rule says why. A rule that hides nothing in a whole run is reported by :func:`unused_rules`.
"""

from __future__ import annotations

import os
import socket
import struct
import uuid
from dataclasses import dataclass, field

from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

CLIENT_ID = "differential"
TIMEOUT_S = 30
SENTINELS = (None, -1, 0, "", b"", ZERO_UUID)
# An array of structs with one of these fields is compared element by element under that key (an API, a
# topic, a partition), so that one element more or less on one side is one difference, not a shifted list.
KEYS = ("api_key", "name", "topic", "partition_index", "partition", "index", "group_id", "transactional_id",
        "resource_name")


@dataclass(frozen=True)
class Rule:
    name: str
    action: str  # rename, drop, presence, unordered, omit, sentinel
    fields: tuple[str, ...]  # a field's name in any API ("port"), in one ("Fetch.records"), or a path's piece
    why: str


RULES: list[Rule] = [
    Rule("node", "rename", ("node_id", "leader_id", "controller_id", "coordinator_key_node", "broker_id",
                            "Metadata.leader_id", "replica_nodes", "isr_nodes", "offline_replicas",
                            "voter_id", "replica_id"),
         "Each broker numbers its own nodes; which answers name the same node is still compared."),
    Rule("port", "rename", ("port",), "Each broker listens on a free port of its own."),
    Rule("host", "rename", ("host",), "Both listen on loopback, but a test may name it differently."),
    Rule("cluster", "rename", ("cluster_id",), "A fresh cluster id per run, as Kafka's storage format makes one."),
    Rule("topic_id", "rename", ("topic_id",), "A random uuid per topic (KIP-516)."),
    Rule("producer_id", "rename", ("producer_id", "ongoing_txn_producer_id"),
         "Producer ids come from each cluster's own blocks."),
    Rule("member", "rename", ("member_id", "leader", "group_instance_id_member"),
         "Member ids are made up by the coordinator (a uuid after the client id)."),
    Rule("timestamp", "drop", ("log_append_time_ms", "timestamp", "transaction_start_time_ms",
                               "last_timestamp", "Fetch.records"),
         "Taken from each broker's clock; Fetch's records carry the append time in their batch header."),
    Rule("log_dir", "rename", ("log_dir",), "Each broker's data directory is a temporary one of its own."),
    Rule("disk_bytes", "drop", ("total_bytes", "usable_bytes", "DescribeLogDirs.partition_size"),
         "The file system's own figures, and a partition's bytes on disk (Kafka's segments hold what "
         "kbroker's hold, but each counts its own index files and preallocation)."),
    Rule("features_epoch", "drop", ("finalized_features_epoch",),
         "The metadata log's offset of the last feature change: how many records came before depends on "
         "the quorum's own timing (registrations, elections), run by run."),
    Rule("error_message", "presence", ("error_message",),
         "Prose for people: whether there is a message is compared, not its wording."),
    Rule("quorum_progress", "sentinel", ("DescribeQuorum.high_watermark", "DescribeQuorum.log_end_offset",
                                         "DescribeQuorum.last_fetch_timestamp",
                                         "DescribeQuorum.last_caught_up_timestamp", "DescribeQuorum.leader_epoch"),
         "The metadata log's offsets count each controller's own records (registrations, features, Kafka's "
         "no-op record every 500 ms), its epoch how many elections its voters' timing took, and its voters' "
         "fetch times are clock readings: whether each is there (-1 when not) is compared."),
    Rule("sasl_token", "presence", ("SaslAuthenticate.auth_bytes",),
         "A SCRAM server's first message carries a nonce (and a salt) it drew at random, its last a signature "
         "over them: whether there is a token is compared, not its bytes."),
    Rule("hash_order", "unordered", ("DescribeUserScramCredentials.results", "credential_infos",
                                     "AlterUserScramCredentials.results", "DescribeAcls.resources",
                                     "DescribeAcls.acls", "DeleteAcls.matching_acls",
                                     "DescribeClientQuotas.entries", "DescribeClientQuotas.values",
                                     "DescribeClientQuotas.entity", "AlterClientQuotas.entries",
                                     "AlterClientQuotas.entity"),
         "Kafka lists these from Java hash maps and sets (keyed by enums, whose hash is the object's own, by "
         "random ids, or by strings): their order is not part of the protocol and differs run by run."),
    # Deliberate differences (docs/kafka-differences.md names each rule).
    Rule("documentation", "presence", ("DescribeConfigs.documentation",),
         "A config's documentation is kbroker's own line, not Kafka's text: whether there is one is compared."),
    Rule("schema_validation_configs", "omit", ("configs[name='confluent.key.schema.validation']",
                                               "configs[name='confluent.value.schema.validation']"),
         "kbroker's broker-side schema validation, under Confluent Server's config names, which Apache "
         "Kafka has not."),
    Rule("elr_min_insync", "omit", ("DescribeConfigs:results[resource_name=''].configs[name='min.insync.replicas']",
                                    "configs[name='min.insync.replicas'].config_source"),
         "Kafka 4.4's controller writes a cluster-wide min.insync.replicas (the same value) when eligible "
         "leader replicas (KIP-966) are on; kbroker has no ELR."),
    Rule("root_logger_level", "drop", ("DescribeConfigs:configs[name='root'].value",),
         "The root logger's level is the process's own (a test process sets none; Kafka's log4j2 says INFO)."),
    Rule("auto_create_at_once", "omit", ("Metadata:topics[name='diff-metadata-unknown-v",),
         "A topic Metadata auto-creates: kbroker creates it before answering, Kafka answers "
         "UNKNOWN_TOPIC_OR_PARTITION while it creates it (the session's topics named for this)."),
]


@dataclass
class Exchange:
    api: str
    version: int
    response: object = None
    closed: str | None = None  # the broker closed the connection instead of answering


class Side:
    """One broker under the session: a kept connection (opened again after the broker closes one)."""

    def __init__(self, name: str, host: str, port: int) -> None:
        self.name, self.host, self.port = name, host, port
        self.transcript: list[Exchange] = []
        self._socket: socket.socket | None = None
        self._correlation_id = 0

    def call(self, api_name: str, version: int, body, *, record: bool = True):
        """The decoded answer (kept in the transcript unless ``record`` is false: a wait for the broker to
        be ready, whose number of tries differs); None if the broker closed the connection."""
        api = API_BY_NAME[api_name]
        exchange = Exchange(api_name, version)
        if record:
            self.transcript.append(exchange)
        if self._socket is None:
            self._socket = socket.create_connection((self.host, self.port), timeout=TIMEOUT_S)
        self._correlation_id += 1
        try:
            self._socket.sendall(encode_request(api.key, version, self._correlation_id, CLIENT_ID, body))
            size = struct.unpack(">i", self._receive(4))[0]
            _, exchange.response = decode_response(api.key, version, self._receive(size))
        except (ConnectionError, socket.timeout) as error:
            exchange.closed = type(error).__name__
            self.close()
        return exchange.response

    def send_raw(self, frame: bytes, api_name: str, version: int):
        """A frame as given (a malformed one, say): the answer decoded, or None when the broker closed."""
        exchange = Exchange(api_name, version)
        self.transcript.append(exchange)
        if self._socket is None:
            self._socket = socket.create_connection((self.host, self.port), timeout=TIMEOUT_S)
        try:
            self._socket.sendall(frame)
            size = struct.unpack(">i", self._receive(4))[0]
            _, exchange.response = decode_response(API_BY_NAME[api_name].key, version, self._receive(size))
        except (ConnectionError, socket.timeout) as error:
            exchange.closed = type(error).__name__
            self.close()
        return exchange.response

    def raw_frame(self, payload: bytes) -> bytes | None:
        """A frame that is no request (a SASL token after a v0 SaslHandshake): the body of the frame that
        answers it, or None when the broker closed the connection. Not recorded: a session records what
        follows on the connection instead."""
        if self._socket is None:
            self._socket = socket.create_connection((self.host, self.port), timeout=TIMEOUT_S)
        try:
            self._socket.sendall(struct.pack(">i", len(payload)) + payload)
            return self._receive(struct.unpack(">i", self._receive(4))[0])
        except (ConnectionError, socket.timeout):
            self.close()
            return None

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _receive(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self._socket.recv(size - len(data))
            if not chunk:
                raise ConnectionResetError("the broker closed the connection")
            data += chunk
        return bytes(data)


# -- flattening and normalizing ------------------------------------------------------------------------------

def flatten(value, path: str = "", out: dict | None = None, unordered=None) -> dict:
    """{path: leaf} of a decoded value; arrays of structs by index (``topics[0].name``). ``unordered(path)``
    says whether the array of structs at ``path`` is compared as a sorted list (asked of two or more)."""
    out = {} if out is None else out
    if hasattr(value, "__slots__") and not isinstance(value, (bytes, str, uuid.UUID)):
        for name in _slots(type(value)):
            if name == "unknown_tags":
                continue
            flatten(getattr(value, name), f"{path}.{name}" if path else name, out, unordered)
    elif isinstance(value, list) and value and hasattr(value[0], "__slots__"):
        if len(value) > 1 and unordered is not None and unordered(path):
            contents = [flatten(element, unordered=unordered) for element in value]
            ranked = sorted(range(len(value)), key=lambda index: repr(sorted(contents[index].items())))
            for place, index in enumerate(ranked):
                flatten(value[index], f"{path}[{place}]", out, unordered)
            return out
        key = next((name for name in KEYS if hasattr(value[0], name)), None)
        for index, element in enumerate(value):
            label = index if key is None else f"{key}={getattr(element, key)!r}"
            flatten(element, f"{path}[{label}]", out, unordered)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        out[path] = bytes(value)
    else:
        out[path] = value
    return out


def _slots(cls) -> list[str]:
    names = []
    for klass in reversed(cls.__mro__):
        names += [name for name in getattr(klass, "__slots__", ()) if name not in names]
    return names


def rule_for(api_name: str, path: str) -> Rule | None:
    """The rule for a field: by its name in any API, as ``Api.name`` in one, or by a piece of its path."""
    name = path.rsplit(".", 1)[-1].split("[")[0]
    for rule in sorted(RULES, key=lambda rule: rule.action != "omit"):  # what is omitted is not renamed
        if name in rule.fields or f"{api_name}.{name}" in rule.fields:
            return rule
        if any(_piece_of(spec, api_name, path) is not None for spec in rule.fields if "[" in spec):
            return rule
    return None


def _piece_of(spec: str, api_name: str, path: str) -> int | None:
    """Where the path piece ``spec`` (``[Api:]piece``) occurs in ``path``, or None."""
    api, _, piece = spec.partition(":") if ":" in spec.split("[", 1)[0] else ("", "", spec)
    if api and api != api_name:
        return None
    at = path.find(piece)
    return None if at < 0 else at


def _omitted_array(rule: Rule, api_name: str, path: str) -> str | None:
    """The array whose element an omitted path is in, when the rule's piece names a whole element
    (``results[0].configs`` for the piece ``configs[name='x']``); None for a piece naming a field."""
    for spec in rule.fields:
        at = _piece_of(spec, api_name, path) if spec.endswith("]") else None
        if at is not None:
            piece = spec.partition(":")[2] if ":" in spec.split("[", 1)[0] else spec
            return path[:at] + piece[:piece.rindex("[")]
    return None


class Normalizer:
    """One side's renamings across its whole session (the same id keeps its token)."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict] = {}
        self.used: set[str] = set()  # the rules that changed some value

    def leaf(self, api_name: str, path: str, value):
        rule = rule_for(api_name, path)
        if rule is None:
            return value
        if rule.action == "drop":
            self.used.add(rule.name)
            return "<dropped>"
        if rule.action == "presence":
            self.used.add(rule.name)
            return "<null>" if value is None else "<empty>" if value in ("", b"") else "<set>"
        if rule.action == "rename":
            if isinstance(value, list):
                return [self.leaf(api_name, path, element) for element in value]
            if any(value == sentinel and type(value) is type(sentinel) for sentinel in SENTINELS if sentinel is not None) \
                    or value is None:
                return value
            self.used.add(rule.name)
            tokens = self.tokens.setdefault(rule.name, {})
            return f"<{rule.name}#{tokens.setdefault(value, len(tokens) + 1)}>"
        if rule.action == "unordered" and isinstance(value, list) and len(value) > 1:
            self.used.add(rule.name)
            return sorted(value, key=repr)
        if rule.action == "sentinel":
            if value is None or any(value == sentinel and type(value) is type(sentinel) for sentinel in SENTINELS):
                return value
            self.used.add(rule.name)
            return "<set>"
        return value

    def answer(self, api_name: str, response) -> dict:
        flat = flatten(response, unordered=lambda path: self._unordered(api_name, path))
        out, emptied = {}, set()
        for path, value in flat.items():
            rule = rule_for(api_name, path)
            if rule is not None and rule.action == "omit":
                self.used.add(rule.name)
                emptied.add(_omitted_array(rule, api_name, path))
                continue
            out[path] = self.leaf(api_name, path, value)
        for array in emptied - {None}:  # every element omitted: an empty array, as the other side may send
            if array not in out and not any(path.startswith(f"{array}[") for path in out):
                out[array] = []
        return out

    def _unordered(self, api_name: str, path: str) -> bool:
        rule = rule_for(api_name, path)
        if rule is None or rule.action != "unordered":
            return False
        self.used.add(rule.name)
        return True


@dataclass
class Difference:
    index: int
    api: str
    version: int
    path: str
    kbroker: object
    kafka: object

    def __str__(self) -> str:
        return f"#{self.index} {self.finding()}"

    def finding(self) -> str:
        """The difference as one line of a findings file (without its place in the session)."""
        return f"{self.api} v{self.version} {self.path}: kbroker {self.kbroker!r}, Kafka {self.kafka!r}"


@dataclass
class Comparison:
    exchanges: int = 0
    differences: list[Difference] = field(default_factory=list)
    rules_used: set[str] = field(default_factory=set)
    apis: set[tuple[str, int]] = field(default_factory=set)


def compare(kbroker: Side, kafka: Side) -> Comparison:
    """Every exchange of the two transcripts, field by field after ``RULES``."""
    result = Comparison()
    ours, theirs = Normalizer(), Normalizer()
    if len(kbroker.transcript) != len(kafka.transcript):
        result.differences.append(Difference(-1, "session", 0, "exchanges", len(kbroker.transcript),
                                             len(kafka.transcript)))
    for index, (mine, reference) in enumerate(zip(kbroker.transcript, kafka.transcript)):
        result.exchanges += 1
        result.apis.add((mine.api, mine.version))
        if (mine.api, mine.version) != (reference.api, reference.version):
            raise AssertionError(f"the session diverged at #{index}: {mine.api} v{mine.version} against "
                                 f"{reference.api} v{reference.version}")
        if (mine.closed is None) != (reference.closed is None):
            result.differences.append(Difference(index, mine.api, mine.version, "(connection)",
                                                 mine.closed or "answered", reference.closed or "answered"))
            continue
        if mine.closed is not None:
            continue
        left, right = ours.answer(mine.api, mine.response), theirs.answer(mine.api, reference.response)
        for path in sorted(set(left) | set(right)):
            if left.get(path, "<absent>") != right.get(path, "<absent>"):
                result.differences.append(Difference(index, mine.api, mine.version, path,
                                                     left.get(path, "<absent>"), right.get(path, "<absent>")))
    result.rules_used = ours.used | theirs.used
    return result


def check_findings(findings, result: Comparison) -> None:
    """Fail unless ``result``'s differences are exactly the lines of the findings file ``findings`` (a
    pathlib.Path): a difference not written there, or a line no longer found (fixed: take it out).
    ``KBTEST_DIFFERENTIAL_WRITE=1`` writes the file afresh from ``result`` first, for review in the diff."""
    found = sorted({difference.finding() for difference in result.differences})
    if os.environ.get("KBTEST_DIFFERENTIAL_WRITE") == "1":
        findings.parent.mkdir(exist_ok=True)
        findings.write_text("".join(f"{line}\n" for line in found))
    known = set(findings.read_text().splitlines()) if findings.exists() else set()
    new, gone = [line for line in found if line not in known], sorted(known - set(found))
    assert not new and not gone, (f"{len(new)} differences not in {findings.name}:\n  " + "\n  ".join(new[:40])
                                  + f"\n{len(gone)} lines of {findings.name} no longer found (fixed?):\n  "
                                  + "\n  ".join(gone[:40]))


@dataclass
class Totals:
    """What a module's sessions compared, summed over them, for the line it prints at its end."""
    sessions: int = 0
    exchanges: int = 0
    apis: set[tuple[str, int]] = field(default_factory=set)
    rules: set[str] = field(default_factory=set)

    def add(self, result: Comparison) -> None:
        self.exchanges += result.exchanges
        self.apis |= result.apis
        self.rules |= result.rules_used

    def summary(self, label: str) -> str:
        apis = len({api for api, _ in self.apis})
        never = sorted(rule.name for rule in RULES if rule.name not in self.rules)
        return (f"{label}: {self.sessions} sessions, {self.exchanges} exchanges, {apis} APIs at {len(self.apis)} "
                f"(API, version) pairs; rules that hid something: {sorted(self.rules)}; never: {never}")
