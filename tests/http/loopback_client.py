"""A loopback HTTP client for the tests of kbroker/http: raw bytes out, h11's reading of the answers back."""

from __future__ import annotations

import contextlib

import h11
import trio

from kbroker.listen import bind_listeners


class Client:
    """One connection to 127.0.0.1:``port``; answers are (status, headers, body)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.reader = h11.Connection(h11.CLIENT)

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        status, headers, body = None, {}, b""
        with trio.fail_after(5):
            while True:
                event = self.reader.next_event()
                if event is h11.NEED_DATA:
                    self.reader.receive_data(await self.stream.receive_some(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    headers = {name.decode(): value.decode() for name, value in event.headers}
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    return status, headers, body

    async def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        await self.send(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
        self.reader.send(h11.Request(method="GET", target=path, headers=[("Host", "test")]))
        self.reader.send(h11.EndOfMessage())
        answered = await self.answer()
        if self.reader.our_state is h11.DONE and self.reader.their_state is h11.DONE:
            self.reader.start_next_cycle()
        return answered

    async def closed(self) -> bool:
        """Whether the server closes the connection (within 5 s), whatever it sends before."""
        with trio.fail_after(5):
            while True:
                try:
                    if not await self.stream.receive_some(65536):
                        return True
                except trio.BrokenResourceError:
                    return True


def loopback_sockets() -> list:
    """Listening sockets on a free loopback port."""
    return bind_listeners("127.0.0.1", 0)


@contextlib.asynccontextmanager
async def connect(sockets):
    """A ``Client`` of the server listening on ``sockets``, closed on leaving."""
    async with await trio.open_tcp_stream("127.0.0.1", sockets[0].getsockname()[1]) as stream:
        yield Client(stream)
