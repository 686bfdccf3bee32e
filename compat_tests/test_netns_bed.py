"""The network-namespace test bed (testkit/netns.py): hosts, the faults the kernel's firewall makes,
the NFQUEUE delayer, and a teardown that leaves nothing behind.

Each host runs ``AGENT serve``: a TCP echo server and a UDP echo server on one port, the UDP one also
counting the datagrams it received per sender (asked with a ``counts?`` datagram from the clients'
namespace, which faults between hosts leave alone). Probes between hosts run ``AGENT`` in the source
host; probes from the clients run here. What must not happen is watched for a second; what must
happen is given several. Skipped, with the bed's one-line reason, where namespaces cannot be made.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import sys
import threading
import time

import pytest

from testkit.netns import CLIENTS, NetnsBed, wait_for_line

UNAVAILABLE = NetnsBed.available()
pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")]

PORT = 7000
PROBE_TIMEOUT_S = 1.0  # a probe that must fail is given this long; one that must pass as long, retried

AGENT = r'''
import collections, json, socket, sys, threading, time

def serve(address, port):
    counts = collections.Counter()  # datagrams received, per sender's address
    listener = socket.create_server((address, port))
    datagrams = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    datagrams.bind((address, port))
    def echo(connection):
        with connection:
            while data := connection.recv(1 << 16):
                connection.sendall(data)
    def accept():
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=echo, args=(connection,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    print("ready", flush=True)
    while True:
        data, peer = datagrams.recvfrom(1 << 16)
        if data == b"counts?":
            datagrams.sendto(json.dumps(counts).encode(), peer)
        else:
            counts[peer[0]] += 1
            datagrams.sendto(data, peer)

def tcp(targets, timeout_s):
    """Whether a TCP round trip to each "address:port" completes within timeout_s (all at once)."""
    results = {}
    def probe(target):
        address, port = target.split(":")
        try:
            with socket.create_connection((address, int(port)), timeout=timeout_s) as connection:
                connection.sendall(b"ping")
                results[target] = connection.recv(4) == b"ping"
        except OSError:
            results[target] = False
    threads = [threading.Thread(target=probe, args=(target,)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout_s * 3)
    print(json.dumps(results))

def udp_send(address, port, count):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for sequence in range(count):
            sender.sendto(str(sequence).encode(), (address, port))
            time.sleep(0.002)  # a steady trickle, not a burst the receiver's buffer would lose

def udp_round_trips(address, port, count, timeout_s):
    """Milliseconds of each datagram's round trip; None for one lost."""
    milliseconds = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        sender.settimeout(timeout_s)
        for sequence in range(count):
            started = time.monotonic()
            sender.sendto(str(sequence).encode(), (address, port))
            try:
                while sender.recv(64) != str(sequence).encode():
                    pass
                milliseconds.append((time.monotonic() - started) * 1000)
            except socket.timeout:
                milliseconds.append(None)
    print(json.dumps(milliseconds))

def udp_burst(address, port, count, timeout_s):
    """Sends count datagrams at once; the sequence numbers echoed back, in the order they came."""
    echoed = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for sequence in range(count):
            sender.sendto(str(sequence).encode(), (address, port))
        sender.settimeout(timeout_s)
        try:
            while len(echoed) < count:
                echoed.append(int(sender.recv(64)))
        except socket.timeout:
            pass
    print(json.dumps(echoed))

command, arguments = sys.argv[1], sys.argv[2:]
if command == "serve":
    serve(arguments[0], int(arguments[1]))
elif command == "tcp":
    tcp(json.loads(arguments[0]), float(arguments[1]))
elif command == "udp-send":
    udp_send(arguments[0], int(arguments[1]), int(arguments[2]))
elif command == "udp-burst":
    udp_burst(arguments[0], int(arguments[1]), int(arguments[2]), float(arguments[3]))
elif command == "udp-round-trips":
    udp_round_trips(arguments[0], int(arguments[1]), int(arguments[2]), float(arguments[3]))
'''


def start_bed(count: int) -> NetnsBed:
    """A bed with an agent serving in each host."""
    bed = NetnsBed(count)
    try:
        bed.start()
        servers = [bed.popen(host, [sys.executable, "-c", AGENT, "serve", bed.address(host), str(PORT)],
                             stdout=subprocess.PIPE, text=True) for host in bed.hosts]
        for host, server in zip(bed.hosts, servers):
            assert wait_for_line(server, "ready", 10), f"the agent in {host} did not start"
    except BaseException:
        bed.close()
        raise
    return bed


@pytest.fixture
def bed():
    bed = start_bed(3)
    yield bed
    bed.close()


def agent(bed: NetnsBed, host: str, *arguments: str, timeout_s: float = 30):
    """Runs the agent in ``host`` and returns what it printed, as JSON."""
    result = bed.run(host, [sys.executable, "-c", AGENT, *arguments], timeout_s=timeout_s, capture_output=True,
                     text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def reached(bed: NetnsBed, source: str, targets: list[str], timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, bool]:
    """Which ``targets`` (hosts) a TCP round trip from ``source`` (a host or CLIENTS) reaches."""
    addresses = {f"{bed.address(target)}:{PORT}": target for target in targets}
    if source == CLIENTS:
        results = {}

        def probe(target):
            try:
                with socket.create_connection((bed.address(target), PORT), timeout=timeout_s) as connection:
                    connection.sendall(b"ping")
                    results[target] = connection.recv(4) == b"ping"
            except OSError:
                results[target] = False
        threads = [threading.Thread(target=probe, args=(target,)) for target in targets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout_s * 3)
        return results
    results = agent(bed, source, "tcp", json.dumps(list(addresses)), str(timeout_s))
    return {addresses[address]: ok for address, ok in results.items()}


def udp_counts(bed: NetnsBed, host: str) -> dict[str, int]:
    """Datagrams ``host``'s agent received, by sender's host name (CLIENTS for the root namespace)."""
    names = {bed.address(other): other for other in bed.hosts} | {bed.client_address: CLIENTS}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as asker:
        asker.settimeout(1)
        for _ in range(5):
            asker.sendto(b"counts?", (bed.address(host), PORT))
            try:
                return {names[address]: count for address, count in json.loads(asker.recv(1 << 16)).items()}
            except socket.timeout:
                continue
    raise AssertionError(f"the agent in {host} does not answer")


def everyone_reaches_everyone(bed: NetnsBed) -> bool:
    for source in bed.hosts + [CLIENTS]:
        targets = [target for target in bed.hosts if target != source]
        if reached(bed, source, targets, timeout_s=5) != dict.fromkeys(targets, True):
            return False
    return True


def test_hosts_reach_each_other_and_the_clients_reach_them(bed):
    assert len({bed.address(host) for host in bed.hosts} | {bed.client_address}) == 4
    assert all(ipaddress.ip_address(bed.address(host)) in bed.subnet for host in bed.hosts)
    assert everyone_reaches_everyone(bed)


def test_a_host_has_no_route_out_of_the_subnet(bed):
    routes = bed.run("host1", ["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    assert "default" not in routes
    forwarding = bed.run("host1", ["cat", "/proc/sys/net/ipv4/ip_forward"], capture_output=True, text=True).stdout
    assert forwarding.strip() == "0"
    probe = bed.run("host1", [sys.executable, "-c", "import socket; socket.create_connection(('192.0.2.1', 9), 1)"],
                    capture_output=True, text=True)
    assert "Network is unreachable" in probe.stderr


def test_isolate_cuts_host_to_host_both_ways_and_leaves_the_clients(bed):
    bed.isolate("host1")
    assert reached(bed, "host1", ["host2", "host3"]) == {"host2": False, "host3": False}
    assert reached(bed, "host2", ["host1", "host3"]) == {"host1": False, "host3": True}
    assert reached(bed, CLIENTS, ["host1"]) == {"host1": True}
    bed.isolate("host1", from_clients=True)
    assert reached(bed, CLIENTS, ["host1", "host2"]) == {"host1": False, "host2": True}
    bed.heal()
    assert everyone_reaches_everyone(bed)


def test_split_separates_a_majority_from_a_minority():
    bed = start_bed(5)
    try:
        bed.split(["host1", "host2", "host3"], ["host4", "host5"])
        assert reached(bed, "host1", ["host2", "host3", "host4", "host5"]) == {
            "host2": True, "host3": True, "host4": False, "host5": False}
        assert reached(bed, "host5", ["host1", "host2", "host3", "host4"]) == {
            "host1": False, "host2": False, "host3": False, "host4": True}
        assert reached(bed, CLIENTS, bed.hosts) == dict.fromkeys(bed.hosts, True)
        bed.heal()
        assert everyone_reaches_everyone(bed)
    finally:
        bed.close()


def test_cut_one_way_loses_the_source_s_datagrams_and_passes_the_target_s(bed):
    bed.cut_one_way("host1", "host2")
    agent(bed, "host1", "udp-send", bed.address("host2"), str(PORT), "20")
    agent(bed, "host2", "udp-send", bed.address("host1"), str(PORT), "20")
    agent(bed, "host1", "udp-send", bed.address("host3"), str(PORT), "20")
    time.sleep(0.2)  # the last datagrams' way across the bridge
    assert udp_counts(bed, "host2").get("host1", 0) == 0
    assert udp_counts(bed, "host1").get("host2") == 20
    assert udp_counts(bed, "host3").get("host1") == 20
    # TCP needs both ways: host1's SYN to host2 is lost, and so is host1's SYN-ACK to host2's SYN.
    assert reached(bed, "host1", ["host2"]) == {"host2": False}
    assert reached(bed, "host2", ["host1"]) == {"host1": False}
    bed.heal()
    agent(bed, "host1", "udp-send", bed.address("host2"), str(PORT), "20")
    time.sleep(0.2)
    assert udp_counts(bed, "host2").get("host1") == 20


def test_loss_at_half_loses_about_half_of_the_datagrams(bed):
    bed.loss("host1", 50)
    agent(bed, "host2", "udp-send", bed.address("host1"), str(PORT), "400")  # to the lossy host
    agent(bed, "host1", "udp-send", bed.address("host3"), str(PORT), "400")  # from it
    agent(bed, "host2", "udp-send", bed.address("host3"), str(PORT), "100")  # between two others
    time.sleep(0.2)
    # 400 draws at one half: 200 expected, 10 the standard deviation; 120..280 is eight of them.
    assert 120 <= udp_counts(bed, "host1").get("host2", 0) <= 280
    counts_at_host3 = udp_counts(bed, "host3")
    assert 120 <= counts_at_host3.get("host1", 0) <= 280
    assert counts_at_host3.get("host2") == 100
    assert reached(bed, CLIENTS, ["host1"], timeout_s=5) == {"host1": True}  # the clients' link is not lossy
    received_while_lossy = udp_counts(bed, "host1").get("host2", 0)
    bed.heal()
    agent(bed, "host2", "udp-send", bed.address("host1"), str(PORT), "100")
    time.sleep(0.2)
    assert udp_counts(bed, "host1").get("host2", 0) - received_while_lossy == 100


@pytest.mark.skipif(NetnsBed.delay_available() is not None, reason=NetnsBed.delay_available() or "")
def test_delay_holds_a_host_s_packets_both_ways_and_heal_lifts_it(bed):
    baseline = agent(bed, "host2", "udp-round-trips", bed.address("host3"), str(PORT), "5", "2")
    assert max(baseline) < 50
    bed.delay("host1", 100)
    delayed = agent(bed, "host2", "udp-round-trips", bed.address("host1"), str(PORT), "5", "2")
    assert None not in delayed and min(delayed) >= 195  # 100 ms on the way in and 100 ms on the way out
    undelayed = agent(bed, "host2", "udp-round-trips", bed.address("host3"), str(PORT), "5", "2")
    assert max(undelayed) < 50
    started = time.monotonic()
    assert reached(bed, "host2", ["host1"], timeout_s=5) == {"host1": True}  # TCP goes through, slowly
    assert time.monotonic() - started >= 0.4  # the handshake's round trip and the echo's
    assert reached(bed, CLIENTS, ["host1"], timeout_s=5) == {"host1": True}
    received_before = udp_counts(bed, "host1").get("host2", 0)
    agent(bed, "host2", "udp-send", bed.address("host1"), str(PORT), "20")
    bed.heal()  # while the last of them are held: they are let go, not lost
    time.sleep(0.2)
    assert udp_counts(bed, "host1").get("host2", 0) - received_before == 20
    healed = agent(bed, "host2", "udp-round-trips", bed.address("host1"), str(PORT), "5", "2")
    assert max(healed) < 50


@pytest.mark.skipif(NetnsBed.delay_available() is not None, reason=NetnsBed.delay_available() or "")
def test_delay_with_jitter_keeps_arrival_order_and_its_seeded_loss_combines(bed):
    bed.delay("host1", 50, jitter_ms=40, seed=7)
    echoed = agent(bed, "host2", "udp-burst", bed.address("host1"), str(PORT), "50", "2")
    assert echoed == list(range(50))  # jitter of up to 40 ms on each, yet none overtakes another
    bed.delay("host1", 20, loss_percent=50, seed=7)  # replaces the delay above
    agent(bed, "host2", "udp-send", bed.address("host1"), str(PORT), "400")
    time.sleep(0.2)
    # 400 draws at one half (the echoes, lost or not, are not counted): 120..280 is eight deviations.
    assert 120 <= udp_counts(bed, "host1").get("host2", 0) - 50 <= 280
    bed.heal()
    assert None not in agent(bed, "host2", "udp-round-trips", bed.address("host1"), str(PORT), "5", "2")


def test_teardown_leaves_no_namespace_interface_or_process_even_after_a_failure():
    with pytest.raises(RuntimeError, match="a failure inside"):
        with NetnsBed(3) as bed:
            names = list(bed.namespaces.values())
            interfaces = [bed.bridge, *bed.veths.values()]
            processes = [bed.popen(host, [sys.executable, "-c", AGENT, "serve", bed.address(host), str(PORT)],
                                   stdout=subprocess.PIPE, text=True) for host in bed.hosts]
            assert all(wait_for_line(process, "ready", 10) for process in processes)
            if NetnsBed.delay_available() is None:
                bed.delay("host2", 10)
                processes.append(bed._delayers["host2"])
            bed.isolate("host1")
            raise RuntimeError("a failure inside")
    namespaces_left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    links_left = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=10).stdout
    assert not [name for name in names if name in namespaces_left]
    assert not [name for name in interfaces if name in links_left]
    assert all(process.poll() is not None for process in processes)
