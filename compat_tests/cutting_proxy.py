"""A loopback TCP proxy that cuts a connection right after the broker answered a produce.

The broker has appended the batch but the client never hears so: it must
retry, and only an idempotent producer's retry is harmless. The proxy reads
Kafka frames in both directions (a size prefix, then the body) so it can tell
which response answers which request.
"""

from __future__ import annotations

import socket
import struct
import threading

from testkit.link_proxy import close_connections as _close

_SIZE = struct.Struct(">i")
_PRODUCE = 0


def _read_frame(connection: socket.socket) -> bytes | None:
    prefix = _read_exactly(connection, 4)
    if prefix is None:
        return None
    (size,) = _SIZE.unpack(prefix)
    body = _read_exactly(connection, size)
    return None if body is None else prefix + body


def _read_exactly(connection: socket.socket, count: int) -> bytes | None:
    data = bytearray()
    while len(data) < count:
        try:
            chunk = connection.recv(min(count - len(data), 1 << 20))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


class CuttingProxy:
    """Forward ``listen port -> upstream``; drop the answer to every ``every``-th produce, ``cuts`` times."""

    def __init__(self, upstream_port: int, *, every: int, cuts: int) -> None:
        self.upstream_port = upstream_port
        self.every = every
        self.cuts_left = cuts
        self.cut = 0  # produce answers dropped so far
        self.produces = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for connection in list(self._sockets):
            _close(connection)

    def __enter__(self) -> CuttingProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._sockets += [client, upstream]
            produce_ids: set[int] = set()
            threading.Thread(target=self._requests, args=(client, upstream, produce_ids), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, produce_ids), daemon=True).start()

    def _requests(self, client, upstream, produce_ids: set[int]) -> None:
        while (frame := _read_frame(client)) is not None:
            api_key, _version, correlation_id = struct.unpack_from(">hhi", frame, 4)
            if api_key == _PRODUCE:
                produce_ids.add(correlation_id)
            try:
                upstream.sendall(frame)
            except OSError:
                break
        _close(client, upstream)

    def _responses(self, upstream, client, produce_ids: set[int]) -> None:
        while (frame := _read_frame(upstream)) is not None:
            (correlation_id,) = struct.unpack_from(">i", frame, 4)
            if correlation_id in produce_ids and self._should_cut():
                break
            try:
                client.sendall(frame)
            except OSError:
                break
        _close(client, upstream)

    def _should_cut(self) -> bool:
        with self._lock:
            self.produces += 1
            if self.cuts_left > 0 and self.produces % self.every == 0:
                self.cuts_left -= 1
                self.cut += 1
                return True
            return False

