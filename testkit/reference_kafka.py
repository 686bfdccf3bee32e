"""Apache Kafka itself, the reference kbroker is compared with (DESIGN.md, rule 6): one node, or a
three-node cluster, in KRaft combined mode (process.roles=broker,controller) on loopback.

The jars come from Maven Central through testkit/maven.py (the pom's ``kafka`` profile). Each node is
formatted with a fresh cluster id by Kafka's own storage tool (``kafka.tools.StorageTool format``) and
started as ``java -cp <jars> kafka.Kafka server.properties``, in a directory of its own under the one
given: ``node-<id>/server.properties``, ``data/`` (its log.dirs, metadata log included), ``server.log``
(INFO, written by log4j2 through ``log4j2.xml`` beside the nodes, never to the console) and
``stdout.log`` (what the JVM itself prints, normally nothing).

Settings are Kafka's defaults except:
- what a node needs to exist: node.id, process.roles, listeners on free loopback ports (PLAINTEXT for
  clients, CONTROLLER for the quorum), advertised.listeners, controller.listener.names, the quorum
  (controller.quorum.voters, or controller.quorum.bootstrap.servers for ``quorum="dynamic"``),
  listener.security.protocol.map (Kafka's default map plus CONTROLLER:PLAINTEXT, as Kafka's
  config/server.properties has it) and log.dirs;
- on a single node, the internal topics' replication factors and minimum ISRs Kafka's default of 3
  and 2 cannot satisfy: offsets.topic.replication.factor, transaction.state.log.replication.factor,
  transaction.state.log.min.isr, share.coordinator.state.topic.replication.factor and
  share.coordinator.state.topic.min.isr, all 1 (as in Kafka's config/server.properties);
- with ``sasl_users``, a SASL_PLAINTEXT listener on another free port (``KafkaNode.sasl_port``) offering
  PLAIN and SCRAM-SHA-256 (sasl.enabled.mechanisms), PLAIN's users in the listener's JAAS config and each
  user's SCRAM-SHA-256 credential written at format time (the storage tool's ``--add-scram``, 4096
  iterations, Kafka's default);
- whatever the caller's ``overrides`` say (group.initial.rebalance.delay.ms, for one, stays Kafka's
  3000 ms unless a caller says otherwise).
No Kafka setting is changed to start sooner: with Kafka's own timings (election timeout, heartbeats) one
node serves 2-4 s after its format begins and three nodes 5-6 s (10 s while other tests load this 2-core
machine), well within the 20 s allowed. Only the JVM is told to start quickly (``QUICK_START_JVM_OPTIONS``),
which changes nothing a client sees but how fast the broker's code runs; a benchmark passes
``KAFKA_SCRIPT_JVM_OPTIONS`` (what bin/kafka-server-start.sh uses) instead.

A start is ready when every node answers ApiVersions and a Metadata request listing every node as a
broker (registered and unfenced). It ends by stopping exactly the processes it started: SIGTERM (a
controlled shutdown), then SIGKILL after ``STOP_TIMEOUT_S``.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

from kbroker.testing.process_cluster import stop_processes
from kbroker.testing.topic_creation import CreatesTopics, config_text
from kbroker.wire.schema import API_BY_NAME
from testkit import raw_client
from testkit.maven import Unavailable, classpath

KAFKA_PROFILE = "kafka"  # in testkit/jvm/pom.xml
BROKER_MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL_MAIN_CLASS = "kafka.tools.StorageTool"  # Scala, in kafka_2.13 (bin/kafka-storage.sh runs it)
HEAP_MB = 512
# A JVM that starts fast (measured: kafka.Kafka serves in 1.5 s rather than 2.2 s): the serial collector
# (no GC threads to start; the heap is small), the C1 compiler only (quick to compile, slower code),
# class data sharing when the JDK has its archive, and no hsperfdata file in /tmp.
QUICK_START_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:-UsePerfData",
                           "-Djava.awt.headless=true")
# Kafka's own (bin/kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS), for measuring Kafka at its speed.
KAFKA_SCRIPT_JVM_OPTIONS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                            "-Djava.awt.headless=true")
SINGLE_NODE_SETTINGS = {"offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
                        "transaction.state.log.min.isr": 1, "share.coordinator.state.topic.replication.factor": 1,
                        "share.coordinator.state.topic.min.isr": 1}
# Written for each node here: an override of one would break the node or the readiness check.
NODE_SETTINGS = ("process.roles", "node.id", "listeners", "advertised.listeners", "controller.listener.names",
                 "controller.quorum.voters", "controller.quorum.bootstrap.servers", "log.dirs", "log.dir",
                 "metadata.log.dir")
PROTOCOL_MAP = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
FORMAT_TIMEOUT_S = 60
STOP_TIMEOUT_S = 15
_PROBE_TIMEOUT_S = 1.0
_POLL_INTERVAL_S = 0.05
_LOG_TAIL_LINES = 15
LOG4J2_CONFIG = """<?xml version="1.0" encoding="UTF-8"?>
<!-- The reference Kafka's logging (testkit/reference_kafka.py): INFO and above to server.log in each node's
     directory (kafka.logs.dir), nothing to the console. -->
<Configuration status="WARN">
  <Appenders>
    <File name="server" fileName="${sys:kafka.logs.dir}/server.log">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="server"/></Root>
  </Loggers>
</Configuration>
"""

ApiVersionsRequest = API_BY_NAME["ApiVersions"].request_class
MetadataRequest = API_BY_NAME["Metadata"].request_class


class KafkaNode:
    """One combined node: clients reach it at 127.0.0.1:``port``, the quorum at ``controller_port``."""

    def __init__(self, node_id: int, directory: Path, port: int, controller_port: int) -> None:
        self.node_id = node_id
        self.directory = directory
        self.port = port
        self.controller_port = controller_port
        self.sasl_port = 0  # its SASL_PLAINTEXT listener's, when the cluster has one
        self.directory_id = random_kafka_uuid()  # its metadata directory's id (a dynamic quorum names it)
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def stdout_path(self) -> Path:
        return self.directory / "stdout.log"

    def log_tail(self) -> str:
        lines = []
        for path in (self.stdout_path, self.log_path):
            if path.exists():
                lines += path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
        return "\n".join(f"  node {self.node_id}: {line}" for line in lines)


class ReferenceKafka(CreatesTopics):
    """Apache Kafka on loopback: ``nodes`` combined broker+controller nodes forming one quorum, data and
    logs under ``directory``.

    ``overrides``: server.properties settings by Kafka's names, for every node (``NODE_SETTINGS`` are
    refused: they are the node's own). With ``nodes=1`` the internal topics' replication settings are 1
    (``SINGLE_NODE_SETTINGS``) unless overridden. ``quorum``: ``"static"`` (controller.quorum.voters,
    kraft.version 0, as kbroker's clusters) or ``"dynamic"`` (KIP-853: controller.quorum.bootstrap.servers,
    formatted ``--standalone`` or with ``--initial-controllers``, kraft.version 1, as Kafka 4's quickstart).
    ``jvm_options``: ``QUICK_START_JVM_OPTIONS`` or ``KAFKA_SCRIPT_JVM_OPTIONS``; the heap is bounded by
    ``heap_mb``. ``sasl_users``: {user: password} for an added SASL_PLAINTEXT listener (PLAIN and
    SCRAM-SHA-256; the module's docstring says how). Use it as a context manager, or ``start()`` then
    ``stop()``.
    """

    def __init__(self, directory: str | os.PathLike, overrides: dict[str, object] | None = None, nodes: int = 1, *,
                 quorum: str = "static", heap_mb: int = HEAP_MB,
                 jvm_options: tuple[str, ...] = QUICK_START_JVM_OPTIONS,
                 sasl_users: dict[str, str] | None = None) -> None:
        overrides = dict(overrides or {})
        refused = sorted(set(overrides) & set(NODE_SETTINGS))
        if refused:
            raise ValueError(f"ReferenceKafka sets {', '.join(refused)} for each node itself")
        if nodes < 1:
            raise ValueError(f"a cluster needs at least one node, not {nodes}")
        if quorum not in ("static", "dynamic"):
            raise ValueError(f"quorum is 'static' or 'dynamic', not {quorum!r}")
        self.directory = Path(directory)
        self.sasl_users = dict(sasl_users or {})
        self.settings = ((SINGLE_NODE_SETTINGS if nodes == 1 else {}) | _sasl_settings(self.sasl_users)
                         | overrides)
        self.quorum = quorum
        self.heap_mb = heap_mb
        self.jvm_options = tuple(jvm_options)
        self.cluster_id = random_kafka_uuid()
        self.nodes: list[KafkaNode] = []
        self.start_seconds: float | None = None  # from the first format to ready, once started
        self._node_count = nodes

    @property
    def bootstrap(self) -> str:
        """Every node's "127.0.0.1:port", comma-separated, for bootstrap.servers."""
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def start(self, timeout_s: float = 20, ports: list[int] | None = None) -> float:
        """Format and start every node; return once all serve (the seconds it took, also in
        ``start_seconds``). Raises :class:`Unavailable` when java or the jars cannot be had, and
        RuntimeError (with the nodes' last log lines) when Kafka does not serve within ``timeout_s``.
        ``ports``: each node's client port then controller port, for a caller that must know them before
        the start (a benchmark's client waiting for the first answer); free ones otherwise."""
        if self.nodes:
            raise RuntimeError("this ReferenceKafka was started already")
        if ports is not None and len(set(ports)) != 2 * self._node_count:
            raise ValueError(f"{self._node_count} node(s) take {2 * self._node_count} distinct ports, not {ports}")
        java = shutil.which("java")
        if java is None:
            raise Unavailable("java not found on PATH (the reference Kafka needs a JDK, 17 or newer)")
        jars = os.pathsep.join(map(str, classpath(KAFKA_PROFILE)))
        started = time.monotonic()
        deadline = started + timeout_s
        ports = list(ports) if ports is not None else free_ports(2 * self._node_count)
        node_ids = range(1, self._node_count + 1)
        self.nodes = [KafkaNode(node_id, self.directory / f"node-{node_id}", port, controller_port)
                      for node_id, port, controller_port in zip(node_ids, ports[::2], ports[1::2])]
        if self.sasl_users:
            drawn = [port for port in free_ports(len(ports) + self._node_count) if port not in ports]
            for node, sasl_port in zip(self.nodes, drawn):
                node.sasl_port = sasl_port
        try:
            self._write_configs()
            self._format([java, *self._jvm_arguments(), "-cp", jars], deadline)
            for node in self.nodes:
                self._launch(node, [java, *self._jvm_arguments(node), "-cp", jars])
            self._wait_until_serving(deadline)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        print(f"reference Kafka {kafka_version()}: {len(self.nodes)} node(s) serving at {self.bootstrap} "
              f"after {self.start_seconds:.1f} s")
        return self.start_seconds

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM to every process started here, all at once; SIGKILL for any still running after
        ``timeout_s``; each reaped. Safe to call twice."""
        stop_processes([node.process for node in self.nodes if node.process is not None], timeout_s)
        for node in self.nodes:
            node.process = None

    def __enter__(self) -> ReferenceKafka:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _jvm_arguments(self, node: KafkaNode | None = None) -> list[str]:
        logs_dir = node.directory if node is not None else self.directory
        return [f"-Xmx{self.heap_mb}m", *self.jvm_options,
                f"-Dlog4j2.configurationFile={self.directory / 'log4j2.xml'}", f"-Dkafka.logs.dir={logs_dir}"]

    def _write_configs(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "log4j2.xml").write_text(LOG4J2_CONFIG)
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            lines = [f"{name}={_properties_value(config_text(value))}"
                     for name, value in (self._node_settings(node) | self.settings).items()]
            node.config_path.write_text("\n".join(lines) + "\n")

    def _node_settings(self, node: KafkaNode) -> dict[str, object]:
        controllers = ",".join(f"127.0.0.1:{other.controller_port}" for other in self.nodes)
        quorum = ({"controller.quorum.voters": ",".join(f"{other.node_id}@127.0.0.1:{other.controller_port}"
                                                        for other in self.nodes)}
                  if self.quorum == "static" else {"controller.quorum.bootstrap.servers": controllers})
        listeners = f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}"
        if node.sasl_port:
            listeners += f",SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}"
        return {"process.roles": "broker,controller", "node.id": node.node_id, "listeners": listeners,
                "advertised.listeners": listeners, "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": PROTOCOL_MAP, **quorum, "log.dirs": node.data_dir}

    def _format_arguments(self, node: KafkaNode) -> list[str]:
        """Kafka 4.4's ``kafka-storage format``: a static quorum needs no more; a dynamic one is one
        ``--standalone`` controller, or the same ``--initial-controllers`` list (id@host:port:directory-id)
        on every node."""
        arguments = ["format", "--cluster-id", self.cluster_id, "--config", str(node.config_path)]
        if self.quorum == "dynamic" and len(self.nodes) == 1:
            arguments.append("--standalone")
        elif self.quorum == "dynamic":
            arguments += ["--initial-controllers", ",".join(
                f"{other.node_id}@127.0.0.1:{other.controller_port}:{other.directory_id}" for other in self.nodes)]
        for user, password in self.sasl_users.items():
            arguments += ["--add-scram", f'SCRAM-SHA-256=[name={user},password="{password}"]']
        return arguments

    def _format(self, java_command: list[str], deadline: float) -> None:
        """Every node's storage formatted, all at once."""
        running = []
        for node in self.nodes:
            output = open(node.directory / "format.log", "wb")
            running.append((node, output, subprocess.Popen(
                [*java_command, STORAGE_TOOL_MAIN_CLASS, *self._format_arguments(node)],
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)))
        failed = []
        for node, output, process in running:
            try:
                code = process.wait(min(FORMAT_TIMEOUT_S, max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
            output.close()
            if code != 0:
                tail = (node.directory / "format.log").read_text(errors="replace").strip().splitlines()[-5:]
                failed.append(f"node {node.node_id} (exit {code}): " + " | ".join(tail))
        if failed:
            raise RuntimeError(f"Kafka's storage tool could not format: {'; '.join(failed)}")

    def _launch(self, node: KafkaNode, java_command: list[str]) -> None:
        with open(node.stdout_path, "ab") as output:
            node.process = subprocess.Popen([*java_command, BROKER_MAIN_CLASS, str(node.config_path)],
                                            stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)

    def _wait_until_serving(self, deadline: float) -> None:
        """Until every node answers ApiVersions and lists every node as a broker in Metadata."""
        waiting = list(self.nodes)
        while waiting:
            node = waiting[0]
            if node.process.poll() is not None:
                self._fail(f"node {node.node_id} exited with code {node.process.returncode}")
            if _serves(node, len(self.nodes)):
                waiting.pop(0)
                continue
            if time.monotonic() > deadline:
                self._fail(f"node {node.node_id} did not list all {len(self.nodes)} brokers in time")
            time.sleep(_POLL_INTERVAL_S)

    def _fail(self, reason: str) -> None:
        raise RuntimeError(f"the reference Kafka did not start: {reason}\n"
                           + "\n".join(node.log_tail() for node in self.nodes))


def _sasl_settings(users: dict[str, str]) -> dict[str, str]:
    """The SASL_PLAINTEXT listener's mechanisms and JAAS configs (none without users)."""
    if not users:
        return {}
    plain_users = " ".join(f'user_{user}="{password}"' for user, password in users.items())
    return {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"}


def _serves(node: KafkaNode, brokers: int) -> bool:
    try:
        versions = raw_client.call(node.port, "ApiVersions", 3, ApiVersionsRequest(
            client_software_name="kbroker-testkit", client_software_version="0"), timeout_s=_PROBE_TIMEOUT_S)
        if versions.error_code != 0:
            return False
        metadata = raw_client.call(node.port, "Metadata", 12, MetadataRequest(
            topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False),
            timeout_s=_PROBE_TIMEOUT_S)
    except OSError:  # not listening yet, or closed the connection while starting
        return False
    return len(metadata.brokers) == brokers


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free now (all probes held open together, so none repeats)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def random_kafka_uuid() -> str:
    """A Kafka Uuid as Kafka writes it: URL-safe base64 without padding, never starting with "-" (which
    a command line would take for an option; Kafka's Uuid.randomUuid draws again too)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def kafka_version() -> str:
    """The Apache Kafka release the ``kafka`` profile resolves (from kafka_2.13-<version>.jar)."""
    for jar in classpath(KAFKA_PROFILE):
        if jar.name.startswith("kafka_2.13-") and jar.name.endswith(".jar"):
            return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")
    return "unknown"


def _properties_value(text: str) -> str:
    """``text`` as a java.util.Properties value (a backslash escapes; leading blanks would be dropped)."""
    escaped = text.replace("\\", "\\\\").replace("\n", "\\n")
    return "\\" + escaped if escaped[:1] in (" ", "\t") else escaped
