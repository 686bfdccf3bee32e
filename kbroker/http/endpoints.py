"""The broker's own HTTP endpoints on ``metrics.port``, a Starlette application:

    GET /metrics  the Prometheus text format (kbroker/metrics.py)
    GET /health   200 "ok" while the process serves at all
    GET /ready    200 once the broker is ready, else 503; either way the reason (``Broker.readiness``)
    /             the web console, where the broker serves one (kbroker/http/console/app.py)

Another path is 404, another method 405. A body longer than a request head is refused, or than the
console's largest form (a message produced from its page) where it is served.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import trio
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from kbroker.http.server import serve

_MAX_BODY_BYTES = 8192  # nothing but the console reads a body
_CONSOLE_BODY_BYTES = 1 << 20  # its largest form: a message produced from its page


def application(exposition: Callable[[], bytes], readiness: Callable[[], tuple[bool, str]],
                console=None) -> Starlette:
    """The endpoints over the broker's measures (``exposition``) and its ``readiness`` (ready?, reason), and
    the ``console``'s pages (a kbroker.http.console.app.Console) where given."""

    async def metrics(request) -> Response:
        from prometheus_client.exposition import CONTENT_TYPE_LATEST  # imported at the first scrape, as the measures'

        return Response(exposition(), media_type=CONTENT_TYPE_LATEST)

    async def health(request) -> Response:
        return PlainTextResponse("ok\n")

    async def ready(request) -> Response:
        is_ready, reason = readiness()
        return PlainTextResponse(reason + "\n", status_code=200 if is_ready else 503)

    paths = "/metrics, /health or /ready\n" if console is None else "/metrics, /health, /ready or the console at /\n"

    async def not_found(request, error) -> Response:
        return PlainTextResponse(paths, status_code=404)

    routes = [Route("/metrics", metrics, methods=["GET"]), Route("/health", health, methods=["GET"]),
              Route("/ready", ready, methods=["GET"])]
    if console is not None:
        routes += console.routes()
    return Starlette(routes=routes, exception_handlers={404: not_found})


async def serve_endpoints(exposition: Callable[[], bytes], readiness: Callable[[], tuple[bool, str]],
                          sockets: list[socket.socket], node=None, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``application`` on ``sockets`` until cancelled (kbroker/http/server.py), with the console of the
    broker ``node`` where given."""
    from kbroker.http.console.app import Console

    console = Console(node) if node is not None else None
    await serve(application(exposition, readiness, console), sockets, task_status=task_status,
                max_body_bytes=_MAX_BODY_BYTES if console is None else _CONSOLE_BODY_BYTES)
