"""The network side: trio listeners, one task per connection, responses in order.

A connection is served like Kafka serves it: a request is read, handled and
answered before the next one on the same connection is looked at, so
responses can never be reordered (a long-polling Fetch holds back what the
client pipelined behind it, exactly as on Kafka). Frames are size-checked
before their bodies are buffered; malformed input closes only that
connection.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass

import trio

from kbroker.handlers import HANDLERS, Deferred
from kbroker.handlers.api_versions import api_versions_response
from wire import DecodeError
from wire.errors import ErrorCode
from wire.frame import FrameDecoder, RequestHeader, UnknownApiKey, decode_request_header, encode_response

logger = logging.getLogger("kbroker.server")

_API_VERSIONS_KEY = 18
_RECEIVE_BYTES = 256 * 1024


@dataclass
class RequestContext:
    header: RequestHeader
    client_host: str
    listener: str = "PLAINTEXT"

    @property
    def api_version(self) -> int:
        return self.header.api_version


@dataclass(frozen=True)
class ServerLimits:
    max_frame_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    idle_ms: int = 600_000  # connections.max.idle.ms
    max_connections: int = 10_000  # max.connections
    max_in_flight_per_connection: int = 16  # handled but not yet answered requests on one connection


class Server:
    def __init__(self, broker, limits: ServerLimits | None = None) -> None:
        self.broker = broker
        self.limits = limits or ServerLimits()
        self.connections = 0

    async def serve(self, host: str, port: int, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen on (host, port); reports the listeners through ``task_status``."""
        listeners = await trio.open_tcp_listeners(port, host=host)
        task_status.started(listeners)
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        if self.connections >= self.limits.max_connections:
            await stream.aclose()
            return
        self.connections += 1
        try:
            peer = stream.socket.getpeername()[0]
            stream.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await self._serve_connection(stream, peer)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        except* DecodeError as errors:
            logger.info("closing connection from %s: %s", peer, errors.exceptions[0])
        finally:
            self.connections -= 1
            await stream.aclose()

    async def _serve_connection(self, stream: trio.SocketStream, peer: str) -> None:
        """Handle requests one after another; answers leave in order from a writer task.

        A handler may return a :class:`Deferred` answer (acks=all produce
        waiting for its fsync): the next requests are handled meanwhile, up to
        ``max_in_flight_per_connection`` unanswered ones.
        """
        outbox_send, outbox_receive = trio.open_memory_channel(self.limits.max_in_flight_per_connection)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_in_order, stream, outbox_receive)
            async with outbox_send:
                await self._read_requests(stream, peer, outbox_send, nursery)

    async def _read_requests(self, stream, peer: str, outbox, nursery) -> None:
        decoder = FrameDecoder(self.limits.max_frame_bytes)
        idle_seconds = self.limits.idle_ms / 1000
        while True:
            frame = decoder.next_frame()
            if frame is None:
                with trio.move_on_after(idle_seconds):
                    data = await stream.receive_some(_RECEIVE_BYTES)
                    if not data:
                        return
                    decoder.feed(data)
                    continue
                logger.debug("closing idle connection from %s", peer)
                return
            answer = await self._handle(frame, peer)
            if answer is not None:
                await outbox.send(answer)
                if not answer.done.is_set():
                    nursery.start_soon(answer.complete)

    async def _handle(self, frame: bytes, peer: str):
        """The response frame for one request frame, or None when there is none to send."""
        try:
            header, body_start = decode_request_header(frame)
        except UnknownApiKey as error:
            raise DecodeError(f"unknown api key {error.api_key}") from None
        handler = HANDLERS.get(header.api_key)
        if handler is None or not handler.supports(header.api_version):
            if header.api_key == _API_VERSIONS_KEY:
                # KIP-511: answer in v0 with our versions, so the client can pick one.
                answer = _Answer(RequestHeader(_API_VERSIONS_KEY, 0, header.correlation_id, header.client_id))
                answer.finish(api_versions_response(ErrorCode.UNSUPPORTED_VERSION))
                return answer
            raise DecodeError(f"api key {header.api_key} v{header.api_version} is not supported")
        request = handler.api.decode_request(header.api_version, memoryview(frame)[body_start:], exact=False)
        context = RequestContext(header, peer)
        response = await handler.handle(self.broker, context, request)
        if response is None:
            return None
        answer = _Answer(header)
        if isinstance(response, Deferred):
            answer.deferred = response
        else:
            answer.finish(response)
        return answer


class _Answer:
    """One request's place in its connection's response order."""

    def __init__(self, header: RequestHeader) -> None:
        self.header = header
        self.frame = None
        self.deferred: Deferred | None = None
        self.done = trio.Event()

    def finish(self, response) -> None:
        header = self.header
        self.frame = encode_response(header.api_key, header.api_version, header.correlation_id, response)
        self.done.set()

    async def complete(self) -> None:
        await self.deferred.ready()
        self.finish(self.deferred.response)


async def _write_in_order(stream: trio.SocketStream, outbox) -> None:
    async with outbox:
        async for answer in outbox:
            await answer.done.wait()
            await send_response(stream, answer.frame)


async def send_response(stream: trio.SocketStream, frame) -> None:
    """Write a response frame, sending its file regions straight from the page cache."""
    if not frame.regions:
        await stream.send_all(frame)
        return
    view = memoryview(frame)
    sent = 0
    for offset, region in frame.regions:
        await stream.send_all(view[sent:offset])
        await _sendfile(stream.socket, region.fd, region.position, region.length)
        sent = offset
    await stream.send_all(view[sent:])


async def _sendfile(sock, fd: int, position: int, length: int) -> None:
    end = position + length
    while position < end:
        try:
            sent = os.sendfile(sock.fileno(), fd, position, end - position)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        if sent == 0:
            # The file ended early: the frame's promised size cannot be kept.
            raise trio.BrokenResourceError("file region shorter than announced")
        position += sent
