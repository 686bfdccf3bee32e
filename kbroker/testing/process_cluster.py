"""A replicated cluster for tests: ``nodes`` real ``python -m kbroker.cli`` processes, each broker and
controller at once (KRaft combined roles), on free loopback ports, each with its own data directory.

Each node writes its log to a file beside its data (a pipe nobody reads would fill and stall it).
The cluster is ready when every node answers Metadata listing every broker (registered and
unfenced). It ends by stopping exactly the processes it started: SIGTERM, then SIGKILL for any
still running after ``stop_timeout_s``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kbroker.testing.topic_creation import CreatesTopics, config_text
from kbroker.tools.client import Client, KafkaError

ENVIRONMENT_PREFIX = "KBROKER_"  # the broker reads these as settings; a test cluster takes only its own
# Set for every node: a test's settings may not change them.
NODE_SETTINGS = ("process.roles", "node.id", "listeners", "controller.listener.names", "controller.quorum.voters",
                 "log.dirs")
# Quicker than Kafka's 2 s and 9 s: a broker is unfenced after its second heartbeat, so a cluster serves
# in about 2 s rather than 4; and the last node to stop, whose controlled shutdown no quorum is left to
# approve, waits out its session in 3 s rather than 9.
TEST_TIMINGS = {"broker.heartbeat.interval.ms": 200, "broker.session.timeout.ms": 3000,
                "group.initial.rebalance.delay.ms": 300}  # as running_broker's TEST_DEFAULTS
_LOG_TAIL_LINES = 20


@dataclass
class ClusterNode:
    """One node: its client listener at ``host``:``port``, its controller listener at ``controller_port``,
    its ``data_dir``, the file ``log_path`` holding its output and the ``process`` running it."""

    node_id: int
    host: str
    port: int
    controller_port: int
    data_dir: Path
    log_path: Path
    process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def log_tail(self) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:] \
            if self.log_path.exists() else []
        return "\n".join(f"  node {self.node_id}: {line}" for line in lines)


@dataclass
class RunningCluster(CreatesTopics):
    """A running cluster: ``bootstrap`` (every node's "host:port", comma-separated, for bootstrap.servers)
    and its ``nodes``."""

    nodes: list[ClusterNode]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def move_leader(self, topic: str, partition: int, node_id: int, *, timeout_s: float = 30) -> int:
        """Make node ``node_id`` the leader of ``topic``'s ``partition`` as an operator would (its replicas
        reordered, the node added first if it is not one, then a preferred election); returns the new
        leader epoch. Clients of the old leader get NOT_LEADER_OR_FOLLOWER and find the new one
        (kbroker/testing/leadership.py)."""
        from kbroker.testing.leadership import move_leader

        return move_leader(self.bootstrap, topic, partition, node_id, timeout_s)

    def move_coordinator(self, node_id: int, *, group: str | None = None, transactional_id: str | None = None,
                         timeout_s: float = 30) -> int:
        """Make node ``node_id`` the coordinator of ``group`` or ``transactional_id``: the leader of the
        internal topic's partition that holds it. Clients of the old coordinator get NOT_COORDINATOR and find
        the new one. Returns that partition."""
        from kbroker.testing.leadership import move_coordinator

        return move_coordinator(self.bootstrap, node_id, group=group, transactional_id=transactional_id,
                                timeout_s=timeout_s)


@contextlib.contextmanager
def running_cluster(nodes: int = 3, *, settings: dict | None = None, directory: str | os.PathLike | None = None,
                    host: str = "127.0.0.1", start_timeout_s: float = 60, stop_timeout_s: float = 15):
    """Run a ``nodes``-node cluster until the block ends; yields a :class:`RunningCluster` once every
    broker serves.

    ``settings`` are broker settings by Kafka's names, given to every node as ``--override``
    (``KBROKER_*`` environment variables are not passed on); the node's own (listeners, node.id,
    controller.quorum.voters, ...) are refused. Unless given, heartbeats are quicker than Kafka's
    (``TEST_TIMINGS``) and, with fewer than three nodes, the internal topics replicate to all of them.
    Topics take Kafka's default.replication.factor, 1: ask ``create_topic`` for more. ``directory``
    holds each node's data and log in ``node<id>/`` (default: a temporary directory, removed afterwards).
    """
    settings = dict(settings or {})
    refused = sorted(set(settings) & set(NODE_SETTINGS))
    if refused:
        raise ValueError(f"running_cluster sets {', '.join(refused)} for each node itself")
    if nodes < 1:
        raise ValueError(f"a cluster needs at least one node, not {nodes}")
    settings = TEST_TIMINGS | _internal_topic_replication(nodes) | settings
    with contextlib.ExitStack() as stack:
        root = Path(directory) if directory is not None \
            else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kbroker-cluster-")))
        ports = _free_ports(host, 2 * nodes)
        cluster = RunningCluster([ClusterNode(node_id, host, port, controller_port, root / f"node{node_id}" / "data",
                                              root / f"node{node_id}" / "kbroker.log")
                                  for node_id, port, controller_port in zip(range(1, nodes + 1), ports[::2], ports[1::2])])
        stack.callback(_stop, cluster.nodes, stop_timeout_s)
        voters = ",".join(f"{node.node_id}@{host}:{node.controller_port}" for node in cluster.nodes)
        for node in cluster.nodes:
            _launch(node, voters, settings)
        _wait_until_serving(cluster.nodes, time.monotonic() + start_timeout_s)
        yield cluster


def _internal_topic_replication(nodes: int) -> dict:
    """Below three nodes, what a cluster can satisfy in place of Kafka's replication factors of 3 and
    minimum ISRs of 2."""
    if nodes >= 3:
        return {}
    return {"offsets.topic.replication.factor": nodes, "transaction.state.log.replication.factor": nodes,
            "transaction.state.log.min.isr": min(nodes, 2), "schema.registry.topic.replication.factor": nodes,
            "share.coordinator.state.topic.replication.factor": nodes,
            "share.coordinator.state.topic.min.isr": min(nodes, 2)}


def _free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct ports free on ``host`` now (all probes held open together, so none repeats)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind((host, 0))
        return [probe.getsockname()[1] for probe in probes]


def _launch(node: ClusterNode, voters: str, settings: dict) -> None:
    node_settings = {"process.roles": "broker,controller", "node.id": node.node_id,
                     "listeners": f"PLAINTEXT://{node.host}:{node.port},CONTROLLER://{node.host}:{node.controller_port}",
                     "controller.listener.names": "CONTROLLER", "controller.quorum.voters": voters,
                     "log.dirs": node.data_dir} | settings
    command = [sys.executable, "-m", "kbroker.cli"]
    for name, value in node_settings.items():
        command += ["--override", f"{name}={config_text(value)}"]
    environment = {name: value for name, value in os.environ.items() if not name.startswith(ENVIRONMENT_PREFIX)}
    node.data_dir.mkdir(parents=True, exist_ok=True)
    with open(node.log_path, "ab") as log:
        node.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        env=environment)


def _wait_until_serving(nodes: list[ClusterNode], deadline: float) -> None:
    """Until every node answers Metadata naming every node as a broker; a node that exits, or the
    deadline, raises with the nodes' last log lines."""
    waiting = list(nodes)
    while waiting:
        node = waiting[0]
        if node.process.poll() is not None:
            _fail(nodes, f"node {node.node_id} exited with code {node.process.returncode}")
        if _lists_every_broker(node, len(nodes)):
            waiting.pop(0)
            continue
        if time.monotonic() > deadline:
            _fail(nodes, f"node {node.node_id} did not list all {len(nodes)} brokers in time")
        time.sleep(0.05)


def _lists_every_broker(node: ClusterNode, count: int) -> bool:
    try:
        client = Client(node.bootstrap, timeout_s=2)
    except (OSError, KafkaError):  # not listening yet
        return False
    try:
        return len(client.metadata([]).brokers) == count
    except (OSError, KafkaError):
        return False
    finally:
        client.close()


def _fail(nodes: list[ClusterNode], reason: str) -> None:
    raise RuntimeError(f"the kbroker cluster did not start: {reason}\n" + "\n".join(node.log_tail() for node in nodes))


def _stop(nodes: list[ClusterNode], timeout_s: float) -> None:
    """The processes started here stopped (the last to go may wait out its broker session, ``TEST_TIMINGS``)."""
    stop_processes([node.process for node in nodes if node.process is not None], timeout_s)


def stop_processes(started: list[subprocess.Popen], timeout_s: float) -> None:
    """SIGTERM to each of ``started`` (processes the caller started), all at once, then SIGKILL for any
    still running after ``timeout_s``; each reaped."""
    for process in started:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + timeout_s
    for process in started:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout_s)
