"""Serving an ASGI application on sockets the caller has bound, with hypercorn's trio worker.

The contract of ``serve``, for every application the broker serves (metrics and health, the schema
registry, ...):

- the caller binds and listens (kbroker/listen.py), so it knows the port before anything is served and
  the start line can name it; a client connecting early waits in the backlog. ``serve`` closes the
  sockets when it returns.
- the application answers ASGI's lifespan messages (Starlette's do), or raises at them.
- it runs on the caller's trio loop until the caller's scope is cancelled; cancelling ends it at once,
  connections and all.
- HTTP/1.1 with keep-alive (idle connections close after ``KEEP_ALIVE_S``); a request head is at most
  ``MAX_HEAD_BYTES`` (hypercorn's h11 limit, else 400 and close), a body at most ``max_body_bytes``
  (``BoundedBodies``: else 413 and close); a malformed request gets 400 and the connection is closed.
- no access log; hypercorn's own lines go to the ``kbroker.http`` logger at WARNING and above.

This module imports hypercorn, some 100 ms: the broker imports it in a worker thread beside its start
(kbroker/broker.py). Hypercorn's documented ``serve`` binds from its ``bind`` setting only (``fd://N``
would have it wrap a descriptor the caller also owns, and mark it inheritable), so ``worker_serve``,
which it calls, is given the caller's sockets as they are.
"""

from __future__ import annotations

import logging
import socket

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config, Sockets
from hypercorn.trio.run import worker_serve

from kbroker.http.body_limit import BoundedBodies

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 << 20  # hypercorn's own bound for WSGI bodies; an application may ask for less
KEEP_ALIVE_S = 30  # longer than a Prometheus scrape interval, so a scraper keeps its connection
_READ_TIMEOUT_S = 30  # a request arriving more slowly than this, byte by byte, is dropped

_hypercorn_logger = logging.getLogger("kbroker.http")
_hypercorn_logger.setLevel(logging.WARNING)  # its INFO lines ("Running on ...") repeat the start line


async def serve(app, sockets: list[socket.socket], *, max_body_bytes: int = MAX_BODY_BYTES,
                task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``app`` (ASGI 3) on ``sockets`` (bound and listening) until cancelled; ``task_status`` gets
    the addresses served, as ``http://host:port``."""
    config = Config()
    config.accesslog = None
    config.errorlog = _hypercorn_logger
    config.h11_max_incomplete_size = MAX_HEAD_BYTES
    config.keep_alive_timeout = KEEP_ALIVE_S
    config.read_timeout = _READ_TIMEOUT_S
    config.include_server_header = False
    bounded = ASGIWrapper(BoundedBodies(app, max_body_bytes))
    try:
        await worker_serve(bounded, config, sockets=Sockets([], list(sockets), []), task_status=task_status)
    finally:
        for sock in sockets:
            sock.close()
