"""kbroker processes forming a controller quorum on loopback: controllers only, or combined
broker+controller nodes. Each logs to a file beside its data (a pipe nobody reads would
fill and stall it); a test ends only the processes it started, by their PIDs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from testkit import raw_client
from testkit.broker_process import TEST_SETTINGS, BrokerProcess, free_port
from testkit.link_proxy import LinkProxy, owner_of
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeQuorumRequest = API_BY_NAME["DescribeQuorum"].request_class
Registration = API_BY_NAME["BrokerRegistration"].request_class
Heartbeat = API_BY_NAME["BrokerHeartbeat"].request_class
FindCoordinatorRequest = API_BY_NAME["FindCoordinator"].request_class

QUICK_QUORUM = ("controller.quorum.election.timeout.ms=1000", "controller.quorum.fetch.timeout.ms=1000",
                "controller.quorum.request.timeout.ms=1000", "broker.heartbeat.interval.ms=200",
                "broker.session.timeout.ms=3000", "replica.lag.time.max.ms=2000")


class QuorumNode(BrokerProcess):
    """One node; ``kill`` (SIGKILL) and ``stop`` (SIGTERM: controlled shutdown, leadership handed
    over) as for a lone broker."""

    def __init__(self, node_id: int, directory: Path, controller_port: int | None, client_port: int | None,
                 overrides: tuple[str, ...], *, host: str = "127.0.0.1", spawn=subprocess.Popen) -> None:
        """``host``: the address its listeners bind; ``spawn``: how its process starts (``subprocess.Popen``,
        or a network namespace's, testkit/netns.py)."""
        self.node_id = node_id
        self.host = host
        self.spawn = spawn
        self.directory = directory
        self.data_dir = directory / "data"
        self.log_path = directory / "kbroker.log"
        self.controller_port = controller_port
        self.client_port = client_port  # None: a controller only (controller_port None: a broker only)
        self.overrides = overrides
        self.process: subprocess.Popen | None = None
        self.proxies: dict[str, LinkProxy] = {}  # listener -> the proxy others reach it through (proxied quorums)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.reachable_port('broker')}"

    def reachable_port(self, role: str) -> int:
        """The port others reach this node's broker or controller listener on (its proxy, if proxied)."""
        port = self.client_port if role == "broker" else self.controller_port
        return self.proxies[role].port if role in self.proxies else port

    def isolate(self) -> None:
        """Cut every link into this node (a one-way partition: its own requests out still go)."""
        for proxy in self.proxies.values():
            proxy.sever()

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()

    def start(self, voters: str, timeout_s: float = 30) -> None:
        self.launch(voters)
        self.wait_ready(timeout_s)

    def launch(self, voters: str) -> None:
        """Start the process without waiting: a broker of a quorum serves once the quorum has unfenced it,
        so the nodes of a cluster start together."""
        listeners = [f"PLAINTEXT://{self.host}:{self.client_port}"] if self.client_port is not None else []
        listeners += [f"CONTROLLER://{self.host}:{self.controller_port}"] if self.controller_port is not None else []
        roles = ",".join(role for role, port in (("broker", self.client_port), ("controller", self.controller_port))
                         if port is not None)
        advertised = [f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.proxies['broker'].port}"] \
            if "broker" in self.proxies else []
        settings = [f"process.roles={roles}", f"node.id={self.node_id}", f"listeners={','.join(listeners)}",
                    "controller.listener.names=CONTROLLER", f"controller.quorum.voters={voters}",
                    f"log.dirs={self.data_dir}", *advertised, *self.overrides]
        command = [sys.executable, "-m", "kbroker.cli", *(part for s in settings for part in ("--override", s))]
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "a") as log:
            self.process = self.spawn(command, stdout=log, stderr=subprocess.STDOUT, text=True,
                                      env=_without_settings(os.environ))

    def wait_ready(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with open(self.log_path) as log:
                log.seek(self._log_start)
                if "ready on" in log.read():
                    return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"node {self.node_id} did not start: {self.log_tail()}")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return "".join(open(self.log_path).readlines()[-lines:]) if self.log_path.exists() else ""

    def call(self, api_name: str, version: int, body, timeout_s: float = 5):
        """A request to this node's controller listener."""
        return raw_client.call(self.controller_port, api_name, version, body, timeout_s=timeout_s, host=self.host)


class Quorum:
    """``count`` voters (``combined``: each also a broker with a client listener), then ``brokers``
    broker-only nodes (observers of the quorum)."""

    def __init__(self, root: Path, count: int = 3, *, combined: bool = False, brokers: int = 0,
                 overrides: tuple[str, ...] = (), proxied: bool = False) -> None:
        overrides = QUICK_QUORUM + TEST_SETTINGS + tuple(overrides)
        self.nodes = [QuorumNode(i, root / f"node{i}", free_port(), free_port() if combined else None, overrides)
                      for i in range(1, count + 1)]
        self.brokers = [QuorumNode(i, root / f"node{i}", None, free_port(), overrides)
                        for i in range(count + 1, count + brokers + 1)]
        if proxied:  # every listener behind a LinkProxy: nodes and clients reach each other only through them
            for node in self.nodes + self.brokers:
                for role, port in (("broker", node.client_port), ("controller", node.controller_port)):
                    if port is not None:
                        node.proxies[role] = LinkProxy(port, identify=self._node_of)
        self.voters = ",".join(f"{n.node_id}@127.0.0.1:{n.reachable_port('controller')}" for n in self.nodes)

    def start(self) -> None:
        for node in self.nodes + self.brokers:
            node.launch(self.voters)
        for node in self.nodes + self.brokers:
            node.wait_ready()

    def node(self, node_id: int) -> QuorumNode:
        return self.nodes[node_id - 1]

    def _node_of(self, peer: tuple[str, int], proxy: tuple[str, int]) -> int | None:
        """The id of the node that opened a connection to a proxy, or None for a client."""
        return owner_of(peer, proxy, {n.node_id: n.process.pid for n in self.nodes + self.brokers if n.running})

    def fail_links(self, first: QuorumNode, second: QuorumNode, fault: str, **options) -> None:
        """Fails the links between two nodes both ways (a proxied quorum): ``fault`` is a LinkProxy fault
        (sever, blackhole, drop, delay) applied by each node's proxies to what the other opens."""
        for target, source in ((first, second), (second, first)):
            for proxy in target.proxies.values():
                getattr(proxy, fault)(source.node_id, **options)

    def heal_links(self) -> None:
        for node in self.nodes + self.brokers:
            for proxy in node.proxies.values():
                proxy.heal()

    def close(self) -> None:
        for node in self.nodes + self.brokers:
            node.kill()
            for proxy in node.proxies.values():
                proxy.close()

    def describe(self, node: QuorumNode):
        """DescribeQuorum's partition at ``node`` (a NOT_LEADER_OR_FOLLOWER one names the leader)."""
        request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
            topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])
        return node.call("DescribeQuorum", 1, request).topics[0].partitions[0]

    def leader(self, timeout_s: float = 15, among=None) -> QuorumNode:
        """The node that says it leads the quorum, asked of the running nodes (bounded in time)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node in among or self.nodes:
                if not node.running:
                    continue
                try:
                    partition = self.describe(node)
                except OSError:
                    continue
                if partition.error_code == 0 and partition.leader_id == node.node_id:
                    return node
            time.sleep(0.05)
        raise AssertionError("no quorum leader: " + " | ".join(n.log_tail(5) for n in self.nodes))



def add_listener(cluster: Quorum, name: str, client_listener: str = "PLAINTEXT") -> dict[int, int]:
    """Gives each node a listener ``name`` on a new port, beside its client listener (on its client port,
    what ``bootstrap`` reaches, named ``client_listener``) and CONTROLLER; the new ports by node id."""
    ports = {}
    for node in cluster.nodes:
        ports[node.node_id] = free_port()
        node.overrides += (f"listeners={client_listener}://127.0.0.1:{node.client_port},"
                           f"{name}://127.0.0.1:{ports[node.node_id]},"
                           f"CONTROLLER://127.0.0.1:{node.controller_port}",)
    return ports


def until(condition, timeout_s: float, what: str):
    """``condition()``'s first true value, asked every 50 ms for at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _without_settings(environ) -> dict:
    """The environment for a node without KBROKER_* settings: every setting a node gets is an --override."""
    return {name: value for name, value in environ.items() if not name.startswith("KBROKER_")}


def find_coordinator(cluster: Quorum, key: str, key_type: int) -> int:
    """The broker a running node names as coordinator of ``key`` (0: group, 1: transactional id); -1: none."""
    for node in cluster.nodes + cluster.brokers:
        if not node.running or node.client_port is None:
            continue
        try:
            response = raw_client.call(node.client_port, "FindCoordinator", 3,
                                       FindCoordinatorRequest(key=key, key_type=key_type))
        except OSError:
            continue
        if response.error_code == 0:
            return response.node_id
    return -1


def read_to_end(consumer, partitions: int, timeout_s: float = 120) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of everything an assigned consumer (enable.partition.eof on) reads
    until each of its ``partitions`` reports its end."""
    read, finished = [], set()
    deadline = time.monotonic() + timeout_s
    while len(finished) < partitions and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is None:
            continue
        if message.error():
            if message.error().code() == -191:  # _PARTITION_EOF
                finished.add(message.partition())
            continue
        read.append((message.partition(), message.offset(), message.value()))
    return read


def register_broker(quorum: Quorum, broker_id: int) -> None:
    """A broker as the controllers see one: registered, then unfenced by a caught-up heartbeat."""
    cluster_id = dump_cluster_id(quorum)
    listener = Registration.Listener(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id, security_protocol=0)
    registration = Registration(broker_id=broker_id, cluster_id=cluster_id, incarnation_id=uuid.uuid4(),
                                listeners=[listener], features=[], rack=None)

    def registered():  # the leader takes it once it has applied its predecessors' changes (is active)
        leader = quorum.leader()
        response = leader.call("BrokerRegistration", 0, registration)
        assert response.error_code in (ErrorCode.NONE, ErrorCode.NOT_CONTROLLER), response
        return (leader, response) if response.error_code == ErrorCode.NONE else None
    leader, response = until(registered, 10, "a registration")
    beat = leader.call("BrokerHeartbeat", 0, Heartbeat(broker_id=broker_id, broker_epoch=response.broker_epoch,
                                                       current_metadata_offset=1 << 40, want_fence=False,
                                                       want_shut_down=False))
    assert (beat.error_code, beat.is_fenced) == (ErrorCode.NONE, False), beat


def dump_cluster_id(quorum: Quorum) -> str:
    from kbroker.controller.controller import quorum_cluster_id
    from kbroker.config import BrokerConfig

    return quorum_cluster_id(BrokerConfig.from_mapping({
        "process.roles": "controller", "node.id": 1, "controller.listener.names": "CONTROLLER",
        "listeners": f"CONTROLLER://127.0.0.1:{quorum.node(1).controller_port}",
        "controller.quorum.voters": quorum.voters}))
