"""The fault-injection proxy the cluster tests partition brokers with (compat_tests/link_proxy.py).

An echo server behind the proxy; clients connect from 127.0.0.2 and 127.0.0.3 so that the proxy's
``identify`` can tell them apart by address (the cluster tests tell nodes apart by process, which
``owner_of`` is tested for last). Every wait is bounded; what must not happen is watched for a
second, what must happen is given ten.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from testkit.link_proxy import FROM_LISTENER, TOWARDS_LISTENER, LinkProxy, close_connections, owner_of

pytestmark = pytest.mark.timeout(60)

FAULTED, HEALTHY = "127.0.0.2", "127.0.0.3"


class EchoServer:
    """Echoes what it receives; keeps a count of the bytes that reached it."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(connection,), daemon=True).start()

    def _echo(self, connection: socket.socket) -> None:
        try:
            while data := connection.recv(1 << 16):
                self.received += len(data)
                connection.sendall(data)
        except OSError:
            pass
        finally:
            connection.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def proxy():
    server = EchoServer()
    proxy = LinkProxy(server.port, identify=lambda peer, _: peer[0], retransmit_s=0.3)
    proxy.server = server
    yield proxy
    proxy.close()
    server.close()


def connect(proxy: LinkProxy, source: str) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", proxy.port), timeout=10, source_address=(source, 0))
    return connection


def receive(connection: socket.socket, count: int, timeout_s: float) -> bytes:
    """Up to ``count`` bytes, or what arrived within ``timeout_s``; b"" at once if the peer closed."""
    connection.settimeout(timeout_s)
    data = b""
    deadline = time.monotonic() + timeout_s
    try:
        while len(data) < count and time.monotonic() < deadline:
            chunk = connection.recv(count - len(data))
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    return data


def round_trip(connection: socket.socket, payload: bytes, timeout_s: float = 10) -> tuple[bytes, float]:
    started = time.monotonic()
    connection.sendall(payload)
    return receive(connection, len(payload), timeout_s), time.monotonic() - started


def test_bytes_pass_unchanged_without_a_fault(proxy):
    payload = os.urandom(3 << 20)
    with connect(proxy, HEALTHY) as connection:
        sender = threading.Thread(target=connection.sendall, args=(payload,))
        sender.start()
        assert receive(connection, len(payload), 10) == payload
        sender.join(10)


def test_delay_holds_each_direction_back_for_the_chosen_source_only(proxy):
    proxy.delay(FAULTED, seconds=0.4)
    with connect(proxy, FAULTED) as slow, connect(proxy, HEALTHY) as fast:
        echoed, slow_s = round_trip(slow, b"slow")
        assert echoed == b"slow" and slow_s >= 0.8  # 0.4 s on the way there and 0.4 s back
        assert round_trip(fast, b"fast")[0] == b"fast"
    assert proxy.sources_seen == {FAULTED: 1, HEALTHY: 1}
    proxy.heal(FAULTED)
    assert proxy.fault_of(FAULTED).delay_s == 0


def test_drop_loses_chunks_that_come_later_in_order_as_tcp_retransmits(proxy):
    proxy.drop(FAULTED, probability=1.0)
    with connect(proxy, FAULTED) as lossy:
        echoed, took_s = round_trip(lossy, b"lost once each way")
        assert echoed == b"lost once each way" and took_s >= 0.6  # a retransmission (0.3 s) each way
    proxy.drop(FAULTED, probability=0.5)
    payloads = [os.urandom(1000) for _ in range(20)]
    with connect(proxy, FAULTED) as lossy:
        for payload in payloads:  # one chunk at a time: some are lost, every one arrives, in order
            lossy.sendall(payload)
        assert receive(lossy, 20_000, 20) == b"".join(payloads)


def test_blackhole_holds_everything_while_the_connection_stays_open_then_delivers_it(proxy):
    with connect(proxy, FAULTED) as held, connect(proxy, HEALTHY) as free:
        assert round_trip(held, b"before")[0] == b"before"
        proxy.blackhole(FAULTED)
        held.sendall(b"during")
        assert receive(held, 6, 1.0) == b""  # nothing back, and no close either
        assert proxy.server.received == 6  # "before" only: "during" is held on its way there too
        assert round_trip(free, b"others pass")[0] == b"others pass"
        proxy.heal(FAULTED)
        assert receive(held, 6, 10) == b"during"  # held back, not lost: the stream is intact


def test_a_one_way_blackhole_lets_requests_through_and_holds_the_answers(proxy):
    proxy.blackhole(FAULTED, directions=(FROM_LISTENER,))
    with connect(proxy, FAULTED) as connection:
        connection.sendall(b"request")
        assert receive(connection, 7, 1.0) == b""
        assert proxy.server.received == 7  # it reached the listener
        proxy.heal()
        assert receive(connection, 7, 10) == b"request"
    proxy.blackhole(FAULTED, directions=(TOWARDS_LISTENER,))
    with connect(proxy, FAULTED) as connection:
        connection.sendall(b"held")
        assert receive(connection, 4, 1.0) == b"" and proxy.server.received == 7  # it did not reach the listener
        proxy.heal()
        assert receive(connection, 4, 10) == b"held"


def test_sever_closes_the_sources_connections_and_refuses_new_ones_until_healed(proxy):
    with connect(proxy, FAULTED) as cut, connect(proxy, HEALTHY) as kept:
        assert round_trip(cut, b"x")[0] == b"x"
        proxy.sever(FAULTED)
        assert receive(cut, 1, 10) == b""  # closed by the proxy
        assert round_trip(kept, b"still here")[0] == b"still here"
        with connect(proxy, FAULTED) as refused:
            assert receive(refused, 1, 10) == b""
    proxy.heal(FAULTED)
    with connect(proxy, FAULTED) as again:
        assert round_trip(again, b"back")[0] == b"back"


def test_a_fault_for_any_source_applies_to_those_without_their_own(proxy):
    proxy.sever()
    proxy.delay(HEALTHY, seconds=0.01)  # a fault of its own: not cut
    with connect(proxy, FAULTED) as cut, connect(proxy, HEALTHY) as kept:
        assert receive(cut, 1, 10) == b""
        assert round_trip(kept, b"own rule")[0] == b"own rule"
    proxy.heal()
    with connect(proxy, FAULTED) as again:
        assert round_trip(again, b"healed")[0] == b"healed"


def test_owner_of_names_the_process_that_opened_a_connection(proxy):
    opened = []
    proxy.identify = lambda peer, at: opened.append((peer, at)) or None
    child = subprocess.Popen([sys.executable, "-c", "import socket, sys, time\n"
                              f"s = socket.create_connection(('127.0.0.1', {proxy.port}))\n"
                              "print('connected', flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "connected"
        with connect(proxy, HEALTHY) as ours:
            deadline = time.monotonic() + 10
            while len(opened) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            pids = {"child": child.pid, "test": os.getpid()}
            assert owner_of(*opened[0], pids) == "child"
            assert owner_of(*opened[1], pids) == "test"
            assert owner_of(*opened[1], {"child": child.pid}) is None
            close_connections(ours)
    finally:
        child.kill()
        child.wait(10)


def test_owner_of_tells_apart_two_connections_from_one_port(proxy):
    """Linux lets connections to different far ends share a local port: the process is found by both
    ends, not by the port (a node's link was once put down to another process and never faulted)."""
    opened = []
    proxy.identify = lambda peer, at: opened.append((peer, at)) or None
    elsewhere = socket.create_server(("127.0.0.1", 0))
    ours = socket.socket()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ours.bind(("127.0.0.1", 0))
    port = ours.getsockname()[1]
    child = subprocess.Popen([sys.executable, "-c", "import socket, time\n"
                              "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                              f"s.bind(('127.0.0.1', {port})); s.connect(('127.0.0.1', {elsewhere.getsockname()[1]}))\n"
                              "print('connected', flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "connected"  # the child holds port -> elsewhere
        ours.connect(("127.0.0.1", proxy.port))  # and this process port -> the proxy
        deadline = time.monotonic() + 10
        while not opened and time.monotonic() < deadline:
            time.sleep(0.01)
        assert opened[0][0][1] == port
        assert owner_of(*opened[0], {"child": child.pid, "test": os.getpid()}) == "test"
        assert owner_of(*opened[0], {"child": child.pid}) is None
    finally:
        close_connections(ours, elsewhere)
        child.kill()
        child.wait(10)
