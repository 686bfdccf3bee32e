"""A test bed of hosts in network namespaces, partitioned by the kernel's own firewall (needs root).

    with NetnsBed(3) as bed:                  # hosts "host1", "host2", "host3"
        server = bed.popen("host1", [sys.executable, "-m", "some.server", bed.address("host1")])
        bed.isolate("host1")                  # host1 exchanges nothing with host2 and host3
        bed.heal()

Layout. A bridge in the root namespace holds the first address of a /24 picked for this run
(``client_address``): tests and client libraries run in the root namespace and reach the hosts over it.
Each host is a namespace joined to the bridge by a veth pair (``eth0`` inside), with the next address,
loopback up and no other route: a host can reach the subnet and nothing else, and the root namespace
reaches the subnet only over the bridge (its connected route). Names carry the pid and a random token,
and the subnet is checked against the root namespace's addresses and routes under a lock file, so
concurrent runs do not meet. ``close`` (the context's exit, after a failure too) ends the processes the
bed started, by their pids, and then what still runs in its namespaces (their descendants), and
removes the veths, the namespaces and the bridge.

Faults, each lifted by ``heal()``, are firewall rules in the hosts' own namespaces, so that the root
namespace's firewall is never touched:
- ``isolate``, ``split``, ``cut_one_way``: "cut links" (source, target). A link into a host is cut in
  the target's nftables ``netdev`` table, ingress hook on its ``eth0``: the packet crosses the bridge and
  vanishes, and the sender sees no error, as with a real partition. A link to the clients is cut at
  the host's egress hook (the root namespace is not touched).
- ``loss``: ``numgen random mod 10000 < percent*100 drop`` in the same hooks, both ways.
- ``delay``: the kernel has no netem qdisc here, so the host's packets to and from the other hosts go
  to an NFQUEUE and ``testkit.nfqueue_delay`` (a process in the host's namespace) holds them. The queue
  rule is nftables' ``queue`` statement where the kernel has it (CONFIG_NFT_QUEUE), or else xtables'
  NFQUEUE target loaded through ``iptables-nft`` (nft_compat): both live in the namespace's nftables.
  Rules go to the queue with ``bypass``: when no delayer listens, packets pass.

A kbroker node in a host binds its host's address; every host has its own ports, so each node can use
the same ones:

    address = bed.address("host1")
    settings = ["process.roles=broker,controller", "node.id=1",
                f"listeners=PLAINTEXT://{address}:9092,CONTROLLER://{address}:9093",
                "controller.listener.names=CONTROLLER",
                "controller.quorum.voters=" + ",".join(f"{i}@{bed.address(h)}:9093" for i, h in ...),
                f"log.dirs={data_dir}", *TEST_SETTINGS]
    bed.popen("host1", [sys.executable, "-m", "kbroker.cli", *(p for s in settings for p in ("--override", s))],
              stdout=log_file, stderr=subprocess.STDOUT, env=environment_without_KBROKER_settings)

then wait for "ready on" in its log, as ``testkit.quorum_process.QuorumNode`` does on loopback.

Clients in the root namespace bootstrap from ``f"{bed.address('host1')}:9092"``; the addresses the nodes
advertise (their listeners) are reachable from there too.
"""

from __future__ import annotations

import fcntl
import functools
import ipaddress
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLIENTS = "clients"  # the root namespace's end of a link, where tests and client libraries run
HOST_INTERFACE = "eth0"  # each host's end of its veth pair, inside its namespace
TABLE = "netns_bed"
DELAY_QUEUE = 0  # queue numbers are per namespace, so every host's delayer can use the same one
HOSTS_MAX = 99  # two digits in the veth's name (interface names are at most 15 characters)
COMMAND_TIMEOUT_S = 10
READY_TIMEOUT_S = 10
STOP_TIMEOUT_S = 5
SUBNET_LOCK_TIMEOUT_S = 10
REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
PROBE_RULESET = f"""table netdev {TABLE} {{
  chain arriving {{ type filter hook ingress device probe-veth priority 0; }}
  chain leaving {{ type filter hook egress device probe-veth priority 0; }}
}}
"""


class BedError(RuntimeError):
    pass


def run_command(argv: list[str], stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if check and result.returncode != 0:
        raise BedError(f"{' '.join(argv)}: {(result.stderr or result.stdout).strip()}")
    return result


class NetnsBed:
    def __init__(self, hosts: int | list[str] = 3) -> None:
        self.hosts = [f"host{i}" for i in range(1, hosts + 1)] if isinstance(hosts, int) else list(hosts)
        if not 1 <= len(self.hosts) <= HOSTS_MAX or len(set(self.hosts)) != len(self.hosts):
            raise ValueError(f"between 1 and {HOSTS_MAX} hosts, each named once: {self.hosts}")
        token = os.urandom(2).hex()
        stem = f"nb{_base36(os.getpid())}{token}"  # at most 11 characters
        self.bridge = f"{stem}b"
        self.namespaces = {host: f"nsbed-{os.getpid()}-{token}-h{i}" for i, host in enumerate(self.hosts, 1)}
        self.veths = {host: f"{stem}v{i}" for i, host in enumerate(self.hosts, 1)}
        self.subnet: ipaddress.IPv4Network | None = None
        self.client_address = ""
        self._addresses: dict[str, str] = {}
        self._processes: list[subprocess.Popen] = []
        self._cut_links: set[tuple[str, str]] = set()
        self._loss_percent: dict[str, tuple[float, bool]] = {}  # host -> (percent, with the clients too)
        self._delayers: dict[str, subprocess.Popen] = {}
        self._drop_rules: dict[str, str] = {}  # host -> the ruleset text last loaded there
        self._made: list[tuple[str, str]] = []  # ("bridge" | "veth" | "namespace", name), in order made

    # -- availability -------------------------------------------------------------------------------

    @staticmethod
    @functools.cache
    def available() -> str | None:
        """None where beds can be made here, else one line saying why not."""
        if os.geteuid() != 0:
            return "network namespaces need root"
        for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
            if shutil.which(tool) is None:
                return f"no {tool} command (apt-get install {package})"
        probe = f"nsbed-probe-{os.getpid()}-{os.urandom(2).hex()}"
        try:
            run_command(["ip", "netns", "add", probe])
        except (BedError, subprocess.TimeoutExpired) as error:
            return f"ip netns add fails: {_first_line(error)}"
        try:  # what a bed makes, in the scratch namespace: the root namespace is not touched
            inside = ["ip", "-n", probe, "link", "add"]
            for step, command, stdin in (
                    ("a bridge", [*inside, "probe-bridge", "type", "bridge"], None),
                    ("a veth pair", [*inside, "probe-veth", "type", "veth", "peer", "name", "probe-peer"], None),
                    ("nftables' netdev ingress and egress hooks", ["ip", "netns", "exec", probe, "nft", "-f", "-"],
                     PROBE_RULESET)):
                try:
                    run_command(command, stdin=stdin)
                except (BedError, subprocess.TimeoutExpired) as error:
                    return f"{step} cannot be made in a namespace: {_first_line(error)}"
        finally:
            run_command(["ip", "netns", "del", probe], check=False)
        return None

    @staticmethod
    @functools.cache
    def delay_available() -> str | None:
        """None where ``delay`` works here (a queue rule can be made), else one line saying why not."""
        if reason := NetnsBed.available():
            return reason
        if _queue_rule_maker() is None:
            return "no NFQUEUE: the kernel lacks nft's queue statement and iptables-nft cannot load NFQUEUE"
        return None

    # -- making and unmaking -------------------------------------------------------------------------

    def __enter__(self) -> NetnsBed:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *failure) -> None:
        self.close()

    def start(self) -> None:
        if self._made:
            raise BedError("this bed is already started")
        with _subnet_lock():
            self.subnet = _free_subnet()
            addresses = list(self.subnet.hosts())
            self.client_address = str(addresses[0])
            self._addresses = {host: str(addresses[i]) for i, host in enumerate(self.hosts, 1)}
            run_command(["ip", "link", "add", self.bridge, "type", "bridge", "stp_state", "0"])
            self._made.append(("bridge", self.bridge))
            run_command(["ip", "addr", "add", f"{self.client_address}/{self.subnet.prefixlen}", "dev", self.bridge])
        # No IPv6 link-local addresses (addrgenmode none): no router solicitations or DAD on the bridge.
        run_command(["ip", "link", "set", self.bridge, "addrgenmode", "none", "up"])
        for host in self.hosts:
            namespace, veth = self.namespaces[host], self.veths[host]
            run_command(["ip", "netns", "add", namespace])
            self._made.append(("namespace", namespace))
            run_command(["ip", "link", "add", veth, "type", "veth", "peer", "name", HOST_INTERFACE, "netns", namespace])
            self._made.append(("veth", veth))
            run_command(["ip", "link", "set", veth, "master", self.bridge, "addrgenmode", "none", "up"])
            inside = ["ip", "-n", namespace]
            address = f"{self._addresses[host]}/{self.subnet.prefixlen}"
            run_command([*inside, "addr", "add", address, "dev", HOST_INTERFACE])
            run_command([*inside, "link", "set", HOST_INTERFACE, "addrgenmode", "none", "up"])
            run_command([*inside, "link", "set", "lo", "up"])

    def close(self) -> None:
        """Ends what the bed started and removes what it made; every step is tried, the first failure raised."""
        failures = []
        for step in (self._stop_delayers, self._stop_processes):
            try:
                step()
            except Exception as error:  # go on: the namespaces must still go
                failures.append(error)
        for kind, name in reversed(self._made):
            command = ["ip", "netns", "del", name] if kind == "namespace" else ["ip", "link", "del", name]
            try:
                run_command(command)
            except (BedError, subprocess.TimeoutExpired) as error:
                failures.append(error)
        self._made.clear()
        if failures:
            raise BedError(f"teardown: {failures[0]}")

    # -- hosts ---------------------------------------------------------------------------------------

    def address(self, host: str) -> str:
        return self._addresses[self._known(host)]

    def namespace(self, host: str) -> str:
        return self.namespaces[self._known(host)]

    def popen(self, host: str, argv: list[str], **popen_kwargs) -> subprocess.Popen:
        """Starts ``argv`` in ``host``'s namespace (``ip netns exec`` keeps the environment and execs the
        program, so the pid is the program's). The bed ends it at close if it still runs."""
        process = subprocess.Popen(["ip", "netns", "exec", self.namespace(host), *argv], **popen_kwargs)
        self._processes.append(process)
        return process

    def run(self, host: str, argv: list[str], timeout_s: float = COMMAND_TIMEOUT_S, **run_kwargs):
        """Runs ``argv`` in ``host``'s namespace to its end (at most ``timeout_s``)."""
        return subprocess.run(["ip", "netns", "exec", self.namespace(host), *argv], timeout=timeout_s, **run_kwargs)

    # -- faults --------------------------------------------------------------------------------------

    def isolate(self, host: str, from_clients: bool = False) -> None:
        """``host`` exchanges nothing with the other hosts, nor with the clients if ``from_clients``."""
        host = self._known(host)
        others = [other for other in self.hosts if other != host] + ([CLIENTS] if from_clients else [])
        self._cut({(host, other) for other in others} | {(other, host) for other in others})

    def split(self, group_a: list[str], group_b: list[str]) -> None:
        """No traffic between any host of ``group_a`` and any of ``group_b``."""
        pairs = {(a, b) for a in map(self._known, group_a) for b in map(self._known, group_b) if a != b}
        self._cut(pairs | {(b, a) for a, b in pairs})

    def cut_one_way(self, source: str, target: str) -> None:
        """Packets from ``source`` to ``target`` are lost; from ``target`` to ``source`` they flow."""
        self._cut({(self._known(source), self._known(target))})

    def loss(self, host: str, percent: float, include_clients: bool = False) -> None:
        """Each packet between ``host`` and another host (and the clients, if ``include_clients``) is
        lost with probability ``percent``/100, each way (nftables' own random numbers, not seeded)."""
        if not 0 <= percent <= 100:
            raise ValueError(f"percent {percent} not in 0..100")
        if percent:
            self._loss_percent[self._known(host)] = (percent, include_clients)
        else:
            self._loss_percent.pop(self._known(host), None)
        self._load_drop_rules()

    def delay(self, host: str, delay_ms: float, jitter_ms: float = 0, loss_percent: float = 0, seed: int = 0,
              include_clients: bool = False) -> None:
        """Holds each packet between ``host`` and the other hosts (and the clients, if
        ``include_clients``) for ``delay_ms`` ± up to ``jitter_ms``, both ways (so a round trip through
        ``host`` takes twice as long), in arrival order; ``loss_percent`` of them are lost instead, drawn
        from ``seed``. Replaces the host's previous delay."""
        self._stop_delayer(self._known(host))
        make_rule = _queue_rule_maker()
        if make_rule is None:
            raise BedError(self.delay_available() or "no NFQUEUE")
        delayer = subprocess.Popen(
            ["ip", "netns", "exec", self.namespace(host), sys.executable, "-m", "testkit.nfqueue_delay",
             "--queue", str(DELAY_QUEUE), "--delay-ms", str(delay_ms), "--jitter-ms", str(jitter_ms),
             "--loss-percent", str(loss_percent), "--seed", str(seed)],
            cwd=REPOSITORY_ROOT, stdout=subprocess.PIPE, text=True)
        self._delayers[host] = delayer
        if not wait_for_line(delayer, "ready", READY_TIMEOUT_S):
            self._stop_delayer(host)
            raise BedError(f"the delayer in {host} did not bind its queue")
        make_rule(self.namespace(host), self._peer_addresses(host, include_clients))

    def heal(self) -> None:
        """Lifts every fault: the rules go, the delayers stop (letting what they held go first)."""
        self._cut_links.clear()
        self._loss_percent.clear()
        self._load_drop_rules()
        self._stop_delayers()

    # -- inner workings ------------------------------------------------------------------------------

    def _known(self, host: str) -> str:
        if host not in self._addresses:
            raise KeyError(f"no host {host!r} in this bed (hosts: {', '.join(self.hosts)})")
        return host

    def _peer_addresses(self, host: str, include_clients: bool) -> list[str]:
        peers = [self._addresses[other] for other in self.hosts if other != host]
        return peers + ([self.client_address] if include_clients else [])

    def _endpoint_address(self, endpoint: str) -> str:
        return self.client_address if endpoint == CLIENTS else self._addresses[endpoint]

    def _cut(self, links: set[tuple[str, str]]) -> None:
        self._cut_links |= links
        self._load_drop_rules()

    def _drop_ruleset(self, host: str) -> str:
        """The netdev table of ``host``: what arrives or leaves on its eth0 and is dropped."""
        arriving = sorted(self._endpoint_address(source) for source, target in self._cut_links if target == host)
        leaving = [self.client_address] if (host, CLIENTS) in self._cut_links else []
        arriving_rules = [f"ip saddr {{ {', '.join(arriving)} }} drop"] if arriving else []
        leaving_rules = [f"ip daddr {{ {', '.join(leaving)} }} drop"] if leaving else []
        if host in self._loss_percent:
            percent, include_clients = self._loss_percent[host]
            peers = ", ".join(self._peer_addresses(host, include_clients))
            chance = f"numgen random mod 10000 < {round(percent * 100)} drop"
            arriving_rules.append(f"ip saddr {{ {peers} }} {chance}")
            leaving_rules.append(f"ip daddr {{ {peers} }} {chance}")
        # Declaring then deleting the table makes one transaction that replaces it (or removes it).
        text = f"table netdev {TABLE}\ndelete table netdev {TABLE}\n"
        if not arriving_rules and not leaving_rules:
            return text
        chains = []
        for chain, hook, rules in (("arriving", "ingress", arriving_rules), ("leaving", "egress", leaving_rules)):
            if not rules:
                continue
            body = "".join(f"    {rule}\n" for rule in rules)
            chains.append(f"  chain {chain} {{\n    type filter hook {hook} device {HOST_INTERFACE} priority 0;"
                          f" policy accept;\n{body}  }}\n")
        return text + f"table netdev {TABLE} {{\n{''.join(chains)}}}\n"

    def _load_drop_rules(self) -> None:
        for host in self.hosts:
            ruleset = self._drop_ruleset(host)
            if self._drop_rules.get(host, f"table netdev {TABLE}\ndelete table netdev {TABLE}\n") != ruleset:
                run_command(["ip", "netns", "exec", self.namespaces[host], "nft", "-f", "-"], stdin=ruleset)
                self._drop_rules[host] = ruleset

    def _stop_delayer(self, host: str) -> None:
        """Stops the host's delayer, then removes its queue rules. In that order: the delayer lets what it
        holds go when asked to stop, while the kernel drops what a queue holds when the rule (the hook)
        that queued it goes; and once the delayer is gone the rules' ``bypass`` lets packets pass."""
        delayer = self._delayers.pop(host, None)
        if delayer is None:
            return
        _end_process(delayer)
        if delayer.stdout is not None:
            delayer.stdout.close()
        make_rule = _queue_rule_maker()
        if make_rule is not None:
            make_rule(self.namespaces[host], [])

    def _stop_delayers(self) -> None:
        for host in list(self._delayers):
            self._stop_delayer(host)

    def _stop_processes(self) -> None:
        """Ends each process ``popen`` started, then whatever still runs in the bed's namespaces: their
        descendants (a namespace lives on while a process is in it)."""
        for process in self._processes:
            _end_process(process)
        self._processes.clear()
        for kind, name in self._made:
            if kind != "namespace":
                continue
            pids = run_command(["ip", "netns", "pids", name], check=False).stdout.split()
            for pid in map(int, pids):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _end_process(process: subprocess.Popen) -> None:
    """SIGTERM, a bounded wait, then SIGKILL: the process is gone and reaped on return."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)


def wait_for_line(process: subprocess.Popen, wanted: str, timeout_s: float) -> bool:
    """True once ``process`` (started with ``stdout=PIPE``) prints a line ``wanted``; False if it ends or
    ``timeout_s`` passes first. Reads the pipe's descriptor unbuffered, so that a line that came in one
    chunk with others is not left in a buffer that ``select`` cannot see."""
    deadline = time.monotonic() + timeout_s
    descriptor, received = process.stdout.fileno(), b""
    while (left_s := deadline - time.monotonic()) > 0:
        if not select.select([descriptor], [], [], left_s)[0]:
            return False
        chunk = os.read(descriptor, 1 << 16)
        if not chunk:
            return False
        received += chunk
        if wanted.encode() in (line.strip() for line in received.split(b"\n")[:-1]):
            return True
    return False


@functools.cache
def _queue_rule_maker():
    """The way to send a namespace's packets to the delay queue on this machine, probed once in a
    scratch namespace: nft's own ``queue`` (CONFIG_NFT_QUEUE), else iptables-nft's NFQUEUE; or None."""
    probe = f"nsbed-probe-{os.getpid()}-{os.urandom(2).hex()}"
    run_command(["ip", "netns", "add", probe])
    try:
        for maker in (_nft_queue_rules, _iptables_queue_rules):
            try:
                maker(probe, ["198.51.100.1"])  # a documentation address: nothing is sent from the scratch namespace
                return maker
            except (BedError, OSError, subprocess.TimeoutExpired):
                continue
        return None
    finally:
        run_command(["ip", "netns", "del", probe], check=False)


def _nft_queue_rules(namespace: str, peers: list[str]) -> None:
    """Packets to and from ``peers`` go to the delay queue (none: the rules go)."""
    table = "netns_bed_delay"
    text = f"table inet {table}\ndelete table inet {table}\n"
    if peers:
        addresses = ", ".join(peers)
        text += (f"table inet {table} {{\n"
                 f"  chain arriving {{ type filter hook input priority 0; policy accept;\n"
                 f"    ip saddr {{ {addresses} }} queue num {DELAY_QUEUE} bypass\n  }}\n"
                 f"  chain leaving {{ type filter hook output priority 0; policy accept;\n"
                 f"    ip daddr {{ {addresses} }} queue num {DELAY_QUEUE} bypass\n  }}\n}}\n")
    run_command(["ip", "netns", "exec", namespace, "nft", "-f", "-"], stdin=text)


def _iptables_queue_rules(namespace: str, peers: list[str]) -> None:
    """As ``_nft_queue_rules``, through xtables' NFQUEUE target; iptables-nft-restore replaces the
    namespace's whole ``ip filter`` table, which nothing else in the bed uses."""
    if shutil.which("iptables-nft-restore") is None:
        raise BedError("no iptables-nft-restore (apt-get install iptables)")
    rules = "".join(f"-A INPUT -s {peer} -j NFQUEUE --queue-num {DELAY_QUEUE} --queue-bypass\n"
                    f"-A OUTPUT -d {peer} -j NFQUEUE --queue-num {DELAY_QUEUE} --queue-bypass\n" for peer in peers)
    text = f"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n{rules}COMMIT\n"
    run_command(["ip", "netns", "exec", namespace, "iptables-nft-restore"], stdin=text)


class _subnet_lock:
    """Serializes picking a subnet and claiming it (its address on our bridge) between runs on this
    machine; waits at most SUBNET_LOCK_TIMEOUT_S."""

    def __enter__(self):
        self.file = open(Path(tempfile.gettempdir()) / "kbroker-netns-bed.lock", "w")
        deadline = time.monotonic() + SUBNET_LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self.file.close()
                    raise BedError("another bed holds the subnet lock") from None
                time.sleep(0.05)

    def __exit__(self, *failure) -> None:
        self.file.close()  # closing releases the lock


def _free_subnet() -> ipaddress.IPv4Network:
    """A random 10.x.y.0/24 that no address or route of the root namespace overlaps (default routes
    aside: they overlap everything and carry nothing to the subnet, whose connected route wins)."""
    taken = []
    for command in (["ip", "-4", "-o", "addr", "show"], ["ip", "-4", "route", "show", "table", "all"]):
        for line in run_command(command).stdout.splitlines():
            for word in line.split():
                try:
                    network = ipaddress.ip_network(word, strict=False)
                except ValueError:
                    continue
                if network.version == 4 and network.prefixlen > 0:
                    taken.append(network)
    chooser = random.Random(os.urandom(8))
    for _ in range(100):
        candidate = ipaddress.IPv4Network(f"10.{chooser.randrange(128, 255)}.{chooser.randrange(0, 256)}.0/24")
        if not any(candidate.overlaps(network) for network in taken):
            return candidate
    raise BedError("no free 10.x.y.0/24 subnet found")


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _base36(number: int) -> str:
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
        if not number:
            return digits
