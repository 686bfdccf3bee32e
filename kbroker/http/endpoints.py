"""The broker's own HTTP endpoints on ``metrics.port``, a Starlette application:

    GET /metrics  the Prometheus text format (kbroker/metrics.py)
    GET /health   200 "ok" while the process serves at all
    GET /ready    200 once the broker is ready, else 503; either way the reason (``Broker.readiness``)

Another path is 404, another method 405. Nothing here is asked for a body, so none longer than a
request head is read.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import trio
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from kbroker.http.server import serve

_MAX_BODY_BYTES = 8192
_PATHS = "/metrics, /health or /ready\n"


def application(exposition: Callable[[], bytes], readiness: Callable[[], tuple[bool, str]]) -> Starlette:
    """The endpoints over the broker's measures (``exposition``) and its ``readiness`` (ready?, reason)."""

    async def metrics(request) -> Response:
        return Response(exposition(), media_type=CONTENT_TYPE_LATEST)

    async def health(request) -> Response:
        return PlainTextResponse("ok\n")

    async def ready(request) -> Response:
        is_ready, reason = readiness()
        return PlainTextResponse(reason + "\n", status_code=200 if is_ready else 503)

    async def not_found(request, error) -> Response:
        return PlainTextResponse(_PATHS, status_code=404)

    routes = [Route("/metrics", metrics, methods=["GET"]), Route("/health", health, methods=["GET"]),
              Route("/ready", ready, methods=["GET"])]
    return Starlette(routes=routes, exception_handlers={404: not_found})


async def serve_endpoints(exposition: Callable[[], bytes], readiness: Callable[[], tuple[bool, str]],
                          sockets: list[socket.socket], *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``application`` on ``sockets`` until cancelled (kbroker/http/server.py)."""
    await serve(application(exposition, readiness), sockets, max_body_bytes=_MAX_BODY_BYTES,
                task_status=task_status)
