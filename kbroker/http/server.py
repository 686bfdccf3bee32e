"""Serving an ASGI application on sockets the broker has bound, with hypercorn's trio worker.

The caller binds (kbroker/listen.py) so that it knows the port before anything is served and the start
line can name it; hypercorn takes the listening sockets as they are. Request heads are bounded by
hypercorn (``h11_max_incomplete_size``); bodies by the application, which reads them as a stream.
Connections are kept alive between requests. Serving ends when the caller's scope is cancelled.
Hypercorn and the application framework are imported by the first call, off the broker's start.
"""

from __future__ import annotations

import logging
import socket

import trio

_MAX_HEAD_BYTES = 64 * 1024
_KEEP_ALIVE_S = 30
_GRACEFUL_S = 1


async def serve(app, sockets: list[socket.socket], *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``app`` (ASGI 3) on ``sockets`` (bound and listening) until cancelled; ``task_status`` gets
    the addresses served, as ``http://host:port``."""
    from hypercorn.app_wrappers import ASGIWrapper
    from hypercorn.config import Config, Sockets
    from hypercorn.trio.run import worker_serve

    config = Config()
    config.accesslog = None  # the broker logs what matters itself
    config.errorlog = logging.getLogger("kbroker.http")
    config.h11_max_incomplete_size = _MAX_HEAD_BYTES
    config.keep_alive_timeout = _KEEP_ALIVE_S
    config.graceful_timeout = _GRACEFUL_S
    await worker_serve(ASGIWrapper(app), config, sockets=Sockets([], list(sockets), []), task_status=task_status)
