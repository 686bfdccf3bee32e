"""The network side: trio listeners, one task per connection, responses in order.

Requests on a connection are handled in the order they arrive and answered
in that order by a writer task, so responses are never reordered (a
long-polling Fetch holds back what the client pipelined behind it, as on
Kafka). A handler may defer its answer (acks=all produce waiting for fsync);
the requests behind it are handled meanwhile, up to a limit. Frames are
size-checked before their bodies are buffered; malformed input closes only
that connection.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import deque
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
_DIRECT_READ_BYTES = 64 * 1024  # the rest of a frame this large is read straight into its own buffer


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
    max_in_flight_per_connection: int = 500  # queued.max.requests: handled, not yet answered, per connection


class Server:
    def __init__(self, broker, limits: ServerLimits | None = None, *, handlers: dict | None = None,
                 api_versions=api_versions_response) -> None:
        """Serve ``broker`` (what the handlers are given) with ``handlers`` (the broker's registry,
        or another, such as a controller listener's) and ``api_versions`` making their ApiVersions answer."""
        self.broker = broker
        self.limits = limits or ServerLimits()
        self.handlers = HANDLERS if handlers is None else handlers
        self.api_versions = api_versions
        self.connections = 0

    async def serve(self, host: str, port: int, sockets=(), *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen on (host, port), or on ``sockets`` already bound; reports the listeners through ``task_status``."""
        if sockets:
            listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(sock)) for sock in sockets]
        else:
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
        except* Exception as errors:  # a bug in a handler: this connection closes, the broker goes on
            logger.error("closing connection from %s after an unexpected error", peer, exc_info=errors.exceptions[0])
        finally:
            self.connections -= 1
            await stream.aclose()

    async def _serve_connection(self, stream: trio.SocketStream, peer: str) -> None:
        """Handle requests one after another; answers leave in order from a writer task.

        A handler may return a :class:`Deferred` answer (acks=all produce
        waiting for its fsync): the next requests are handled meanwhile, up to
        ``max_in_flight_per_connection`` unanswered ones.
        """
        outbox = _Outbox(self.limits.max_in_flight_per_connection)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_in_order, stream, outbox)
            try:
                await self._read_requests(stream, peer, outbox, nursery)
            finally:
                outbox.close()

    async def _read_requests(self, stream, peer: str, outbox, nursery) -> None:
        decoder = FrameDecoder(self.limits.max_frame_bytes)
        idle_seconds = self.limits.idle_ms / 1000
        while True:
            frame = decoder.next_frame()
            if frame is None and (partial := decoder.take_partial_frame(_DIRECT_READ_BYTES)) is not None:
                frame = await _receive_rest(stream, *partial, idle_seconds)
                if frame is None:
                    logger.debug("connection from %s closed or idle inside a frame", peer)
                    return
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
                await outbox.put(answer)
                if not answer.done.is_set():
                    nursery.start_soon(answer.complete, outbox)

    async def _handle(self, frame: bytes, peer: str):
        """The response frame for one request frame, or None when there is none to send."""
        try:
            header, body_start = decode_request_header(frame)
        except UnknownApiKey as error:
            raise DecodeError(f"unknown api key {error.api_key}") from None
        handler = self.handlers.get(header.api_key)
        if handler is None or not handler.supports(header.api_version):
            if header.api_key == _API_VERSIONS_KEY:
                # KIP-511: answer in v0 with our versions, so the client can pick one.
                answer = _Answer(RequestHeader(_API_VERSIONS_KEY, 0, header.correlation_id, header.client_id))
                answer.finish(self.api_versions(ErrorCode.UNSUPPORTED_VERSION))
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


async def _receive_rest(stream: trio.SocketStream, body: bytearray, filled: int, idle_seconds: float) -> bytearray | None:
    """Fill ``body`` from the socket; None if the peer closes or goes idle first."""
    view = memoryview(body)
    while filled < len(body):
        with trio.move_on_after(idle_seconds):
            received = await stream.socket.recv_into(view[filled:])
            if not received:
                return None
            filled += received
            continue
        return None
    return body


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

    async def complete(self, outbox: _Outbox) -> None:
        await self.deferred.ready()
        self.finish(self.deferred.response)
        outbox.wake_writer()


class _Outbox:
    """A connection's answers in request order, at most ``limit`` unwritten at once.

    The writer takes every finished answer at the front in one go and writes
    them without yielding in between: under load an answer then costs a
    fraction of a pass through the scheduler instead of several.
    """

    def __init__(self, limit: int) -> None:
        self._answers: deque[_Answer] = deque()
        self._limit = limit
        self._closed = False
        self._space = trio.lowlevel.ParkingLot()  # the reader, waiting for room
        self._writer = trio.lowlevel.ParkingLot()  # the writer, waiting for a finished front answer

    async def put(self, answer: _Answer) -> None:
        while len(self._answers) >= self._limit:
            await self._space.park()
        self._answers.append(answer)
        self._writer.unpark_all()
        await trio.lowlevel.checkpoint()

    def wake_writer(self) -> None:
        self._writer.unpark_all()

    def close(self) -> None:
        """No more answers will come; the writer ends once the queued ones are written."""
        self._closed = True
        self._writer.unpark_all()

    async def take_finished(self) -> list[_Answer] | None:
        """The finished answers at the front (at least one), or None once closed and empty."""
        while not (self._answers and self._answers[0].done.is_set()):
            if self._closed and not self._answers:
                return None
            await self._writer.park()
        taken = []
        while self._answers and self._answers[0].done.is_set():
            taken.append(self._answers.popleft())
        self._space.unpark_all()
        return taken


_COALESCE_BYTES = 64 * 1024  # answers up to this size that finish together leave in one write


async def _write_in_order(stream: trio.SocketStream, outbox: _Outbox) -> None:
    """Write answers as they finish, in order; small ones that finished together go
    out in one write (one syscall and one wake-up of the client instead of many)."""
    fd = stream.socket.fileno()
    while (answers := await outbox.take_finished()) is not None:
        small = []
        for answer in answers:
            frame = answer.frame
            if not frame.regions and len(frame) <= _COALESCE_BYTES:
                small.append(frame)
                continue
            if small:
                await _send_bytes(fd, memoryview(b"".join(small)))
                small = []
            await send_response(stream, frame)
        if small:
            await _send_bytes(fd, memoryview(small[0] if len(small) == 1 else b"".join(small)))
        await trio.lowlevel.checkpoint()


async def send_response(stream: trio.SocketStream, frame) -> None:
    """Write a response frame, sending its file regions straight from the page cache.

    The pieces go straight to the non-blocking socket and yield only when it
    is full, not once per piece (a Fetch answer has two pieces per
    partition); the caller takes the scheduling point.
    """
    fd = stream.socket.fileno()
    view = memoryview(frame)
    sent = 0
    for offset, region in frame.regions:
        await _send_bytes(fd, view[sent:offset])
        await _sendfile(fd, region.fd, region.position, region.length)
        sent = offset
    await _send_bytes(fd, view[sent:])


async def _send_bytes(fd: int, data: memoryview) -> None:
    while data:
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)


async def _sendfile(fd: int, file_fd: int, position: int, length: int) -> None:
    end = position + length
    while position < end:
        try:
            sent = os.sendfile(fd, file_fd, position, end - position)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)
            continue
        if sent == 0:
            # The file ended early: the frame's promised size cannot be kept.
            raise trio.BrokenResourceError("file region shorter than announced")
        position += sent
