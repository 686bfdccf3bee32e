"""Load the HTTP stack when someone first asks for it (standard library and trio only).

Hypercorn and Starlette take some 100 ms to import, with the GIL held: imported in a worker thread
while the broker starts, they still slow its start by about that much. So the broker binds its HTTP
sockets at once, waits until a first connection is queued on one (left in the backlog, not accepted),
and only then imports the stack off the event loop and serves; a broker nobody scrapes never loads it.
"""

from __future__ import annotations

import importlib
import socket
from types import ModuleType

import trio


async def wait_for_a_connection(sockets: list[socket.socket]) -> None:
    """Return once a connection waits in the backlog of any of the listening ``sockets``."""
    async with trio.open_nursery() as nursery:
        for sock in sockets:
            nursery.start_soon(_wait_readable_then_cancel, sock, nursery.cancel_scope)


async def _wait_readable_then_cancel(sock: socket.socket, scope: trio.CancelScope) -> None:
    await trio.lowlevel.wait_readable(sock)
    scope.cancel()


async def import_off_the_loop(name: str) -> ModuleType:
    """The module ``name``, imported in a worker thread (the event loop goes on meanwhile)."""
    return await trio.to_thread.run_sync(importlib.import_module, name)
