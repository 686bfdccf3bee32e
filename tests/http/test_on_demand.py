"""The HTTP stack loaded on demand (kbroker/http/on_demand.py): the wait ends with a first queued connection,
which stays queued for the server to accept."""

from __future__ import annotations

import pytest
import trio

from kbroker.http.on_demand import import_off_the_loop, wait_for_a_connection
from tests.http.loopback_client import loopback_sockets

pytestmark = pytest.mark.trio


async def test_the_wait_lasts_until_a_connection_is_queued_and_leaves_it_queued():
    sockets = loopback_sockets()
    try:
        with trio.move_on_after(0.2) as waited:
            await wait_for_a_connection(sockets)
        assert waited.cancelled_caught, "returned with nobody connecting"
        async with await trio.open_tcp_stream("127.0.0.1", sockets[0].getsockname()[1]) as client:
            with trio.fail_after(5):
                await wait_for_a_connection(sockets)
            accepted, _ = sockets[0].accept()
            with accepted:
                await client.send_all(b"still there")
                assert accepted.recv(64) == b"still there"
    finally:
        for sock in sockets:
            sock.close()


async def test_a_module_is_imported_in_a_worker_thread():
    module = await import_off_the_loop("kbroker.http.endpoints")
    assert module.__name__ == "kbroker.http.endpoints" and callable(module.serve_endpoints)
