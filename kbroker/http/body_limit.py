"""A bound on request bodies, for any ASGI application (hypercorn bounds request heads, not bodies)."""

from __future__ import annotations

import trio

_REFUSAL = b"request body too large\n"
# A declared body up to this long is read and thrown away before the 413: a server that closes with the
# body unread resets the connection, and the client, still sending, loses the answer (a broken pipe).
# Beyond it the refusal goes at once. Reading costs time, never memory, and at most _DRAIN_S of it: a
# client that stops sending is answered then.
_DRAINED_BYTES_MAX = 16 << 20
_DRAIN_S = 1.0


class BoundedBodies:
    """ASGI middleware: a request whose body is longer than ``max_bytes`` is answered 413 and its
    connection closed. A declared Content-Length is checked before the application is called; a
    chunked body is counted as the application reads it, which then sees the client gone."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and int(declared) > self.max_bytes:  # h11 has checked it is a number
            if int(declared) <= _DRAINED_BYTES_MAX:
                await _drain(receive)
            await _refuse(send)
            return
        received, refused, answered = 0, False, False

        async def bounded_receive():
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    refused = True
                    if not answered:
                        await _refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message) -> None:
            nonlocal answered
            if refused:
                return  # the 413 is the answer
            answered = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, guarded_send)
        except Exception:
            if not refused:
                raise  # else the application only failed at the disconnect this bound told it of


async def _refuse(send) -> None:
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(_REFUSAL)).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": _REFUSAL})


async def _drain(receive) -> None:
    """Read the request's body to its end, keeping none of it, for at most _DRAIN_S."""
    with trio.move_on_after(_DRAIN_S):
        while True:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                return
