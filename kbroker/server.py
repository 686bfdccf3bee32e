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

from kbroker.handlers import HANDLERS
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
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        except DecodeError as error:
            logger.info("closing connection from %s: %s", peer, error)
        finally:
            self.connections -= 1
            await stream.aclose()

    async def _serve_connection(self, stream: trio.SocketStream, peer: str) -> None:
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
            response = await self._handle(frame, peer)
            if response is not None:
                await send_response(stream, response)

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
                return encode_response(_API_VERSIONS_KEY, 0, header.correlation_id, api_versions_response(ErrorCode.UNSUPPORTED_VERSION))
            raise DecodeError(f"api key {header.api_key} v{header.api_version} is not supported")
        request = handler.api.decode_request(header.api_version, memoryview(frame)[body_start:], exact=False)
        context = RequestContext(header, peer)
        response = await handler.handle(self.broker, context, request)
        if response is None:
            return None
        return encode_response(header.api_key, header.api_version, header.correlation_id, response)


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
