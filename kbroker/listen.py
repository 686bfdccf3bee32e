"""Bind the client listener first thing, before the slow imports (standard library only).

A client started together with the broker (a test, a container's healthcheck)
then finds the port open at once: its connection waits in the backlog while
the broker finishes starting, instead of being refused and retried after the
client's reconnect backoff (100 ms in librdkafka).
"""

from __future__ import annotations

import socket

_BACKLOG = 1024


def bind_listeners(host: str | None, port: int) -> list[socket.socket]:
    """Listening TCP sockets for every address ``host`` resolves to (all interfaces when empty)."""
    sockets = []
    try:
        for family, kind, protocol, _, address in socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
            sock = socket.socket(family, kind, protocol)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(_BACKLOG)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
