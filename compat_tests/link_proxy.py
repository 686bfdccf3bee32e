"""A loopback TCP proxy in front of one listener, for network partitions without root.

Every byte is relayed as it comes, until the test cuts the link: then every connection through
it is closed, and new ones are closed as soon as they are accepted, until the link heals. A node
whose listeners are all behind cut proxies is unreachable from every other node and client (its
own connections out still go through: a one-way partition, the kind that strands a leader that
still heartbeats). ``delay_s`` holds each chunk back that long in both directions.
"""

from __future__ import annotations

import socket
import threading
import time

_CHUNK = 1 << 16


class LinkProxy:
    def __init__(self, upstream_port: int, *, port: int = 0) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        self.cut = False
        self.delay_s = 0.0
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def sever(self) -> None:
        """Cut the link: close what is open, and refuse what comes until ``heal``."""
        self.cut = True
        with self._lock:
            connections, self._connections = self._connections, set()
        for connection in connections:
            close_connections(connection)

    def heal(self) -> None:
        self.cut = False

    def close(self) -> None:
        self._closed = True
        self.sever()
        close_connections(self.listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.cut:
                close_connections(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                close_connections(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._connections |= {client, upstream}
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._relay, args=(source, target), daemon=True).start()

    def _relay(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while not self.cut:
                data = source.recv(_CHUNK)
                if not data or self.cut:
                    break
                if self.delay_s:
                    time.sleep(self.delay_s)
                target.sendall(data)
        except OSError:
            pass
        finally:
            close_connections(source, target)
            with self._lock:
                self._connections -= {source, target}


def close_connections(*connections: socket.socket) -> None:
    """Shut down and close, whatever state they are in."""
    for connection in connections:
        try:
            connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        connection.close()
