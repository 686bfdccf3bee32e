"""Passing a registry write on to the node that writes (Confluent's followers forward to their leader).

One HTTP/1.1 request over a new loopback-or-cluster connection, spoken with h11 (the HTTP library
hypercorn is built on), bounded in time and in the size of the answer.
"""

from __future__ import annotations

import h11
import trio

_TIMEOUT_S = 30
_MAX_ANSWER_BYTES = 64 << 20


async def forward(address: tuple[str, int], method: str, target: str, body: bytes,
                  headers: list[tuple[str, str]]) -> tuple[int, bytes]:
    """The writer's (status, body) for ``method target`` with ``body``; OSError if it cannot be had."""
    host, port = address
    connection = h11.Connection(our_role=h11.CLIENT)
    request = h11.Request(method=method, target=target, headers=[
        ("Host", f"{host}:{port}"), ("Content-Length", str(len(body))), ("Connection", "close"), *headers])
    try:
        with trio.fail_after(_TIMEOUT_S):
            stream = await trio.open_tcp_stream(host, port)
            async with stream:
                await stream.send_all(connection.send(request) + connection.send(h11.Data(data=body))
                                      + connection.send(h11.EndOfMessage()))
                status, received = 0, bytearray()
                while True:
                    event = connection.next_event()
                    if event is h11.NEED_DATA:
                        connection.receive_data(await stream.receive_some(65536))
                    elif isinstance(event, h11.Response):
                        status = event.status_code
                    elif isinstance(event, h11.Data):
                        received += event.data
                        if len(received) > _MAX_ANSWER_BYTES:
                            raise OSError(f"the writer's answer is larger than {_MAX_ANSWER_BYTES} bytes")
                    elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                        return status, bytes(received)
    except trio.TooSlowError:
        raise OSError(f"no answer from {host}:{port} in {_TIMEOUT_S} s") from None
    except (h11.RemoteProtocolError, trio.BrokenResourceError) as error:
        raise OSError(f"{host}:{port}: {error}") from None
