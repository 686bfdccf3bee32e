"""One node's schema registry: its store over ``_schemas``, its REST API, served on
``schema.registry.listeners`` by the broker's HTTP stack once the broker serves.

The ``kbroker`` command binds the address with the Kafka listeners (a lone node's default is
http://localhost:8081; a node of a cluster serves none unless told). The HTTP stack and the
registry's modules are imported only once a first connection waits (kbroker/http/on_demand.py):
a broker whose registry nobody asks pays nothing for it at start.

Each node registers the registry's address with its endpoints under the name ``SCHEMA_REGISTRY`` (a
name no Kafka client connects to), so that every node knows where to pass writes on to.
"""

from __future__ import annotations

import logging
import socket
from urllib.parse import urlsplit

from kbroker.config.errors import ConfigError

logger = logging.getLogger(__name__)

LISTENER = "SCHEMA_REGISTRY"
_MODULES = ("kbroker.http.server", "kbroker.schemas.api", "kbroker.schemas.forward", "kbroker.schemas.types")


def registry_address(config) -> tuple[str, int] | None:
    """(host, port) of ``schema.registry.listeners``; None where it is empty."""
    value = (config.get("schema.registry.listeners") or "").strip()
    if not value:
        return None
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or port is None or parts.path not in ("", "/"):
        raise ConfigError(f"schema.registry.listeners={value}: expected http://host:port")
    return parts.hostname or "", port


def registry_host(address: tuple[str, int], sockets: list[socket.socket], kafka_host: str) -> tuple[str, int]:
    """Where other nodes reach this one's registry: its host (the Kafka listener's, for every interface)."""
    host, _ = address
    port = sockets[0].getsockname()[1]
    return (host if host not in ("", "0.0.0.0", "::") else kafka_host), port


async def serve(broker, sockets: list[socket.socket]) -> None:
    """Serve the registry's API on ``sockets`` until cancelled, from the first connection on."""
    from kbroker.http import on_demand

    try:
        await on_demand.wait_for_a_connection(sockets)
        for name in _MODULES:
            await on_demand.import_off_the_loop(name)
    except BaseException:  # the broker stops before anyone asked
        for sock in sockets:
            sock.close()
        raise
    from kbroker.http.server import serve as serve_app
    from kbroker.schemas.api import application
    from kbroker.schemas.forward import forward
    from kbroker.schemas.types import parse

    store = broker.schemas()

    async def pass_on(leader: int, method: str, target: str, body: bytes) -> tuple[int, bytes]:
        endpoint = next((b for b in broker.image.live_brokers if b.node_id == leader), None)
        address = None if endpoint is None else endpoint.address(LISTENER)
        if address is None:
            raise OSError(f"node {leader} serves no schema registry")
        return await forward(address, method, target, body, [("Content-Type", "application/json"),
                                                              ("X-Kbroker-Forwarded", "1")])

    await serve_app(application(store, parse, pass_on), sockets)
