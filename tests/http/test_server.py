"""kbroker/http/server.py's contract, over a real loopback socket with a bare ASGI application: connections
kept alive, malformed and oversized requests refused cleanly, sockets closed when the serving ends."""

from __future__ import annotations

import pytest
import trio

from kbroker.http.server import MAX_HEAD_BYTES, serve
from tests.http.loopback_client import connect, loopback_sockets

pytestmark = pytest.mark.trio

MAX_BODY_BYTES = 1000


async def echo(scope, receive, send) -> None:
    """Answers the path and the body it reads, whole."""
    if scope["type"] == "lifespan":  # nothing to start or stop
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    answer = scope["path"].encode() + b" " + body
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(answer)).encode())]})
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture
async def served(nursery):
    sockets = loopback_sockets()
    await nursery.start(lambda task_status: serve(echo, sockets, max_body_bytes=MAX_BODY_BYTES,
                                                  task_status=task_status))
    return sockets


async def test_two_requests_are_answered_on_one_kept_connection(served):
    async with connect(served) as client:
        assert (await client.get("/first"))[::2] == (200, b"/first ")
        assert (await client.get("/second"))[::2] == (200, b"/second ")


async def test_a_malformed_request_line_gets_400_and_a_close_and_the_server_goes_on(served):
    async with connect(served) as client:
        await client.send(b"NOT A REQUEST LINE AT ALL\r\n\r\n")
        assert (await client.answer())[0] == 400
        assert await client.closed()
    async with connect(served) as other:
        assert (await other.get("/after"))[0] == 200


async def test_a_request_head_longer_than_the_bound_is_refused_and_closed(served):
    async with connect(served) as client:
        await client.send(b"GET /" + b"a" * (2 * MAX_HEAD_BYTES))  # and more to come, the server would think
        assert (await client.answer())[0] in (400, 431)
        assert await client.closed()


async def test_a_body_within_the_bound_reaches_the_application(served):
    async with connect(served) as client:
        body = b"x" * MAX_BODY_BYTES
        await client.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        assert (await client.answer())[::2] == (200, b"/echo " + body)


async def test_a_declared_body_longer_than_the_bound_is_refused_unread_and_closed(served):
    async with connect(served) as client:
        await client.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 100000000\r\n\r\n" + b"x" * 1000)
        status, headers, _ = await client.answer()
        assert status == 413 and headers["connection"] == "close"
        assert await client.closed()


async def test_a_chunked_body_longer_than_the_bound_is_refused_as_it_arrives(served):
    async with connect(served) as client:
        await client.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 400
        for _ in range(3):  # 1200 bytes: over the bound with the third chunk
            await client.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        assert (await client.answer())[0] == 413
        assert await client.closed()


async def test_serving_ends_with_its_scope_and_closes_the_sockets():
    sockets = loopback_sockets()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve, echo, sockets)
        assert binds == [f"http://127.0.0.1:{sockets[0].getsockname()[1]}"]
        async with connect(sockets) as client:
            assert (await client.get("/"))[0] == 200
        nursery.cancel_scope.cancel()
    assert all(sock.fileno() == -1 for sock in sockets)


async def test_a_body_a_little_over_the_bound_is_read_to_its_end_and_answered_413(served):
    """The client still sending its body reads the 413 rather than a reset connection (a broken pipe)."""
    async with connect(served) as client:
        body = b"x" * (4 * MAX_BODY_BYTES)
        await client.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        status, headers, _ = await client.answer()
        assert status == 413 and headers["connection"] == "close"
        assert await client.closed()
