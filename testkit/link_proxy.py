"""A loopback TCP proxy in front of one listener that injects network faults, without root.

Each connection through the proxy is put down to its source: ``identify(peer, proxy)`` (the
connection's two ends, as the proxy sees them) names the node that opened it (``owner_of`` finds the process that holds the client's socket) or None for
a client that is not one of the nodes. Faults apply per source, or to every source without a
fault of its own (``ANY``), so that a test can fail the link from one chosen node to another while
everything else goes through:

    cut        every connection from the source is closed and new ones are closed once accepted
               (a refused or reset link: the peers learn of it at once)
    blackhole  bytes stop moving, in both directions or in one, and connections stay open (a
               dropped route: the peers learn of it only by timing out); what was held back is
               delivered when the fault heals, as TCP would retransmit it
    drop       each chunk is lost with ``probability`` and comes through ``retransmit_s`` later,
               holding back what follows it, as a lost TCP segment does
    delay      each chunk is delivered ``seconds`` after it arrived, in order

``heal(source)`` lifts a source's fault; ``heal()`` lifts them all. The bytes of a stream are never
changed or lost while its connection lives. A bounded queue per direction (``_QUEUED_CHUNKS_MAX``)
holds what is delayed, so a stalled direction pushes back on its sender as a full TCP window does.
"""

from __future__ import annotations

import collections
import os
import queue
import random
import socket
import sys
import threading
import time
from dataclasses import dataclass, replace

ANY = "*"
TOWARDS_LISTENER, FROM_LISTENER = "requests", "responses"  # the two directions of a connection
_CHUNK_BYTES = 1 << 16
_QUEUED_CHUNKS_MAX = 16
_POLL_S = 0.05  # how often a held-back direction looks again for a heal or a close


@dataclass(frozen=True)
class Fault:
    cut: bool = False
    blackholed: frozenset[str] = frozenset()  # the directions held back
    drop_probability: float = 0.0
    delay_s: float = 0.0


NO_FAULT = Fault()


class _Connection:
    def __init__(self, source, client: socket.socket, upstream: socket.socket) -> None:
        self.source = source
        self.client = client
        self.upstream = upstream
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()
        close_connections(self.client, self.upstream)


class LinkProxy:
    def __init__(self, upstream_port: int, *, port: int = 0, identify=lambda peer, proxy: None, retransmit_s: float = 0.2,
                 seed: int = 0) -> None:
        self.upstream_port = upstream_port
        self.identify = identify
        self.retransmit_s = retransmit_s
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        self._faults: dict[object, Fault] = {}
        self.sources_seen: collections.Counter = collections.Counter()  # connections accepted, per source
        self._connections: set[_Connection] = set()
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    # -- faults ---------------------------------------------------------------------------------

    def sever(self, source=ANY) -> None:
        """Cut the link from ``source``: close its connections, and close new ones until healed."""
        self._change(source, cut=True)
        with self._lock:
            doomed = [c for c in self._connections if self.fault_of(c.source).cut]
        for connection in doomed:
            connection.close()

    def blackhole(self, source=ANY, directions=(TOWARDS_LISTENER, FROM_LISTENER)) -> None:
        self._change(source, blackholed=frozenset(directions))

    def drop(self, source=ANY, probability: float = 0.1) -> None:
        self._change(source, drop_probability=probability)

    def delay(self, source=ANY, seconds: float = 0.05) -> None:
        self._change(source, delay_s=seconds)

    def heal(self, source=None) -> None:
        with self._lock:
            if source is None:
                self._faults.clear()
            else:
                self._faults.pop(source, None)

    def fault_of(self, source) -> Fault:
        return self._faults.get(source) or self._faults.get(ANY) or NO_FAULT

    def _change(self, source, **changes) -> None:
        with self._lock:
            self._faults[source] = replace(self._faults.get(source, NO_FAULT), **changes)

    # -- relaying -------------------------------------------------------------------------------

    def close(self) -> None:
        self._closed = True
        with self._lock:
            connections, self._connections = self._connections, set()
        for connection in connections:
            connection.close()
        close_connections(self.listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, peer = self.listener.accept()
            except OSError:
                return
            source = self.identify(peer, client.getsockname())
            self.sources_seen[source] += 1
            if self.fault_of(source).cut:
                close_connections(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                close_connections(client)
                continue
            upstream.settimeout(None)
            connection = _Connection(source, client, upstream)
            with self._lock:
                self._connections.add(connection)
            for direction, reader, writer in ((TOWARDS_LISTENER, client, upstream), (FROM_LISTENER, upstream, client)):
                chunks: queue.Queue = queue.Queue(_QUEUED_CHUNKS_MAX)
                threading.Thread(target=self._receive, args=(connection, direction, reader, chunks), daemon=True).start()
                threading.Thread(target=self._deliver, args=(connection, direction, writer, chunks), daemon=True).start()

    def _receive(self, connection: _Connection, direction: str, reader: socket.socket, chunks: queue.Queue) -> None:
        """Reads one direction and queues each chunk with the time it is due; at the end of the stream,
        a None after them, for the deliverer to close the connection once they are sent."""
        try:
            while self._wait_while_held(connection, direction):
                data = reader.recv(_CHUNK_BYTES)
                if not data:
                    break
                fault = self.fault_of(connection.source)
                due = time.monotonic() + fault.delay_s
                if fault.drop_probability and self._random.random() < fault.drop_probability:
                    due += self.retransmit_s
                if not _enqueue(connection, chunks, (due, data)):
                    return
            _enqueue(connection, chunks, None)
        except OSError:
            self._finished(connection)

    def _deliver(self, connection: _Connection, direction: str, writer: socket.socket, chunks: queue.Queue) -> None:
        """Sends each queued chunk when it is due, in order, holding back while blackholed."""
        try:
            while not connection.closed.is_set():
                try:
                    item = chunks.get(timeout=_POLL_S)
                except queue.Empty:
                    continue
                if item is None:
                    break
                due, data = item
                while (wait_s := due - time.monotonic()) > 0 and not connection.closed.is_set():
                    time.sleep(min(wait_s, _POLL_S))
                if not self._wait_while_held(connection, direction):
                    break
                writer.sendall(data)
        except OSError:
            pass
        finally:
            self._finished(connection)

    def _wait_while_held(self, connection: _Connection, direction: str) -> bool:
        """Waits out a blackhole on ``direction``; False once the connection is closed."""
        while direction in self.fault_of(connection.source).blackholed:
            if connection.closed.wait(_POLL_S):
                return False
        return not connection.closed.is_set()

    def _finished(self, connection: _Connection) -> None:
        connection.close()
        with self._lock:
            self._connections.discard(connection)


def _enqueue(connection: _Connection, chunks: queue.Queue, item) -> bool:
    """Puts ``item`` once there is room (a full queue holds the reader back); False if the connection closed first."""
    while not connection.closed.is_set():
        try:
            chunks.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def owner_of(peer: tuple[str, int], proxy: tuple[str, int], pids: dict[object, int]):
    """The name in ``pids`` of the process holding the loopback socket at ``peer`` connected to ``proxy``
    (a connection's two ends as the proxy sees them), or None: its inode from /proc/net/tcp*, then each
    process's open files. Both ends are matched: Linux gives one ephemeral port to several connections
    when their far ends differ, so a port alone can name another process's socket."""
    inode = _socket_inode(peer, proxy)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for name, pid in pids.items():
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(f"/proc/{pid}/fd/{descriptor}") == target:
                    return name
            except OSError:
                continue
    return None


def _socket_inode(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    wanted = (_proc_address(local), _proc_address(remote))
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows)
                for row in rows:
                    fields = row.split()
                    if (fields[1], fields[2]) == wanted and fields[9] != "0":
                        return int(fields[9])
        except OSError:
            continue
    return None


def _proc_address(address: tuple[str, int]) -> str:
    """An IPv4 address as /proc/net/tcp writes it: the four bytes in host order, then the port, in hex."""
    packed = socket.inet_aton(address[0])
    return f"{int.from_bytes(packed, sys.byteorder):08X}:{address[1]:04X}"


def close_connections(*connections: socket.socket) -> None:
    """Shut down and close, whatever state they are in."""
    for connection in connections:
        try:
            connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        connection.close()
