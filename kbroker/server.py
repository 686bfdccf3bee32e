"""The network side: trio listeners, one task per connection, responses in order.

Requests on a connection are handled in the order they arrive and answered
in that order, so responses are never reordered (a long-polling Fetch holds
back what the client pipelined behind it, as on Kafka). A handler may defer
its answer (acks=all produce waiting for fsync); the requests behind it are
handled meanwhile, up to a limit. On plaintext an answer with nothing before
it leaves at once from the task that finished it, the rest from a writer
task. Frames are size-checked before their bodies are buffered; malformed
input closes only that connection.

A listener's security protocol (kbroker/security/listener.py) wraps its
connections in TLS and gates their requests behind SASL authentication
(kbroker/security/session.py). Fetch answers leave with ``os.sendfile`` on
plaintext connections only; TLS encrypts them from buffers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import trio

from kbroker.handlers import HANDLERS, Deferred
from kbroker.handlers.api_versions import api_versions_response
from kbroker.log.descriptor_cache import out_of_descriptors
from kbroker.event_log import log_answer
from kbroker.security.listener import ListenerSecurity, principal_of_certificate
from kbroker.security.quotas import REQUEST_PERCENTAGE, ClientQuotas
from kbroker.security.scram import AuthenticationFailed, ScramCredential
from kbroker.security.session import Session
from kbroker.wire import DecodeError
from kbroker.wire.schema import EncodeBuffer
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import FrameDecoder, RequestHeader, UnknownApiKey, decode_request_header, encode_response

logger = logging.getLogger("kbroker.server")

_API_VERSIONS_KEY = 18
_RECEIVE_BYTES = 256 * 1024
_DIRECT_READ_BYTES = 64 * 1024  # the rest of a frame this large is read straight into its own buffer
_TLS_HANDSHAKE_S = 10
_QUOTA_EXEMPT = {18, 17, 36}  # ApiVersions and SASL: a throttled client must still be able to connect
_TLS_REGION_CHUNK_BYTES = 256 * 1024
_ACCEPT_BACKOFF_S = (0.05, 1.0)  # out of descriptors, accepting again after this, doubling up to that
_ACCEPT_REFUSED_LOG_S = 10.0
_REQUESTS_PER_YIELD = 16  # handled from what was read ahead, before the reader lets other tasks run


@dataclass
class RequestContext:
    header: RequestHeader
    client_host: str
    listener: str = "PLAINTEXT"
    session: Session | None = None  # the connection's security state: its principal
    quota_meter: object = None  # (principal, client id, quota key, value) -> throttle ms; None: no quotas
    throttle_ms: int = 0  # the longest throttle a quota asked for: the connection is muted that long

    @property
    def principal(self) -> str:
        return self.session.principal if self.session is not None else "User:ANONYMOUS"

    def throttle(self, key: str, value: float) -> int:
        """Count ``value`` against the client's ``key`` quota (kbroker/security/quotas.py); the throttle
        time to answer with (KIP-219: the client waits that long, and the broker reads nothing from it)."""
        if self.quota_meter is None:
            return 0
        throttle_ms = self.quota_meter(self.principal, self.header.client_id or "", key, value)
        self.throttle_ms = max(self.throttle_ms, throttle_ms)
        return throttle_ms

    @property
    def api_version(self) -> int:
        return self.header.api_version


@dataclass
class ListenerServices:
    """What a listener's connections use of their node besides the handlers' owner: named and typed here,
    so that the server asks nothing else of the node."""

    credentials: Callable[[str, int], ScramCredential | None]  # (user, SCRAM mechanism) -> the user's credential
    quotas: ClientQuotas | None = None  # a broker's client quotas; a controller's listener meters no one
    log_every_request: bool = False  # logging.requests
    metrics: object = None  # kbroker.metrics.BrokerMetrics, once the broker has made them
    request_memory: RequestMemory | None = None  # queued.max.request.bytes, shared by the node's listeners


class _Lease:
    """What one connection holds of the node's :class:`RequestMemory`: the bytes of its request being read."""

    __slots__ = ("memory", "held")

    def __init__(self, memory: RequestMemory | None) -> None:
        self.memory = memory
        self.held = 0

    @property
    def wanted(self) -> bool:
        """Whether the next large request must take its bytes first (a pool is set, none held yet)."""
        return self.memory is not None and not self.held

    async def take(self, size: int) -> None:
        await self.memory.acquire(size)
        self.held = size

    def give_back(self) -> None:
        if self.held:
            self.memory.release(self.held)
            self.held = 0


class RequestMemory:
    """Kafka's request memory pool (``queued.max.request.bytes``): the bytes of large requests read and not yet
    handled, across every connection of the node's listeners. A connection whose next request would go past the
    bound reads no further until others are handled (as Kafka mutes its channel), so that 200 clients sending
    1 MiB at once cost the bound, not 200 MiB; what waits stays in the kernel's socket buffers. Requests below
    the direct-read size (64 KiB) are not counted: each connection holds at most one such frame and one read
    (256 KiB) of them. A request larger than the whole bound is let in alone, when nothing else holds memory."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self._freed = trio.Event()

    async def acquire(self, size: int) -> None:
        while self.used_bytes and self.used_bytes + size > self.capacity_bytes:
            await self._freed.wait()
        self.used_bytes += size

    def release(self, size: int) -> None:
        self.used_bytes -= size
        self._freed.set()
        self._freed = trio.Event()


@dataclass(frozen=True)
class ServerLimits:
    max_frame_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    idle_ms: int = 600_000  # connections.max.idle.ms
    max_connections: int = 10_000  # max.connections
    max_in_flight_per_connection: int = 500  # queued.max.requests: handled, not yet answered, per connection


class Server:
    def __init__(self, broker, services: ListenerServices, limits: ServerLimits | None = None, *,
                 handlers: dict | None = None, api_versions=api_versions_response,
                 security: ListenerSecurity | None = None) -> None:
        """Serve ``broker`` (what the handlers are given) with ``handlers`` (the broker's registry,
        or another, such as a controller listener's) and ``api_versions`` making their ApiVersions answer,
        on a listener with ``security`` (PLAINTEXT unless told), using the node's ``services``."""
        self.broker = broker
        self.services = services
        self.limits = limits or ServerLimits()
        self.handlers = HANDLERS if handlers is None else handlers
        self.api_versions = api_versions
        self.security = security or ListenerSecurity()
        self.connections = 0
        self.accepted = 0  # connections accepted since start (kbroker_connections_accepted)
        self.open_connections: dict[Session, trio.CancelScope] = {}  # what close_connections cancels
        self.faults = None  # a test's faults on demand (kbroker/faults.py) while any is set: one check a request

    async def serve(self, host: str, port: int, sockets=(), *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen on (host, port), or on ``sockets`` already bound; reports the listeners through ``task_status``."""
        if sockets:
            listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(sock)) for sock in sockets]
        else:
            listeners = await trio.open_tcp_listeners(port, host=host)
        listeners = [_PatientListener(listener) for listener in listeners]
        task_status.started(listeners)
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.accepted += 1
        if self.connections >= self.limits.max_connections:
            await stream.aclose()
            return
        self.connections += 1
        peer = "?"
        try:
            peer = stream.socket.getpeername()[0]
            quotas = self.services.quotas
            if quotas is not None and (throttle_ms := quotas.connection_throttle_ms(peer)):
                logger.debug("closing connection from %s in %d ms: over its connection_creation_rate", peer,
                             throttle_ms)
                await trio.sleep(throttle_ms / 1000)
                return
            stream.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            principal = "User:ANONYMOUS"
            if self.security.ssl_context is not None:
                stream = trio.SSLStream(stream, self.security.ssl_context, server_side=True)
                with trio.fail_after(_TLS_HANDSHAKE_S):
                    await stream.do_handshake()
                principal = principal_of_certificate(stream.getpeercert())
            session = Session(self.security, self.services.credentials, principal)
            try:
                with trio.CancelScope() as scope:
                    self.open_connections[session] = scope
                    await self._serve_connection(stream, peer, session)
            finally:
                self.open_connections.pop(session, None)
                for closed in session.on_close:
                    closed()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as errors:
            if isinstance(stream, trio.SSLStream) and errors.exceptions[0].__cause__ is not None:
                logger.info("closing TLS connection from %s: %s", peer, errors.exceptions[0].__cause__)
        except* trio.TooSlowError:
            logger.info("closing connection from %s: no TLS handshake within %d s", peer, _TLS_HANDSHAKE_S)
        except* DecodeError as errors:
            logger.info("closing connection from %s: %s", peer, errors.exceptions[0])
        except* Exception as errors:  # a bug in a handler: this connection closes, the broker goes on
            logger.error("closing connection from %s after an unexpected error", peer, exc_info=errors.exceptions[0])
        finally:
            self.connections -= 1
            if isinstance(stream, trio.SSLStream):
                # TLS says goodbye with close_notify; a client that reads nothing must not hold us here.
                with trio.move_on_after(1):
                    await stream.aclose()
                stream = stream.transport_stream
            await stream.aclose()

    async def _serve_connection(self, stream, peer: str, session: Session) -> None:
        """Handle requests one after another; answers leave in order.

        A handler may return a :class:`Deferred` answer (acks=all produce
        waiting for its fsync): the next requests are handled meanwhile, up to
        ``max_in_flight_per_connection`` unanswered ones. An answer finished when
        none is waiting before it is written at once by the task that finished it,
        as far as the socket takes it without waiting (plaintext only); the others,
        and what the socket did not take, leave from a writer task.
        """
        outbox = _Outbox(self.limits.max_in_flight_per_connection)
        sink = _TlsSink(stream) if isinstance(stream, trio.SSLStream) else _SocketSink(stream)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_in_order, sink, outbox)
            try:
                await self._read_requests(stream, peer, session, outbox, sink, nursery)
            finally:
                outbox.close()

    async def _read_requests(self, stream, peer: str, session: Session, outbox, sink, nursery) -> None:
        decoder = FrameDecoder(self.limits.max_frame_bytes)
        idle_seconds = self.limits.idle_ms / 1000
        direct_reads = isinstance(stream, trio.SocketStream)
        lease = _Lease(self.services.request_memory)  # the bytes of the request being read, from the pool
        try:
            while not session.closing and await self._read_request(stream, peer, session, outbox, sink, nursery,
                                                                   decoder, lease, idle_seconds, direct_reads):
                pass
        finally:
            lease.give_back()

    async def _read_request(self, stream, peer, session, outbox, sink, nursery, decoder, lease, idle_seconds,
                            direct_reads) -> bool:
        """Read more of the next request, and handle it once whole; False when the connection ends."""
        decoder.max_frame_bytes = session.max_frame_bytes or self.limits.max_frame_bytes
        if lease.wanted and (size := decoder.next_frame_size()) is not None \
                and _DIRECT_READ_BYTES <= size <= decoder.max_frame_bytes:
            await lease.take(size)  # before the body is read: a connection past the bound waits here
        frame = decoder.next_frame()
        if frame is None and direct_reads and (partial := decoder.take_partial_frame(_DIRECT_READ_BYTES)) is not None:
            frame = await _receive_rest(stream, *partial, idle_seconds)
            if frame is None:
                logger.debug("connection from %s closed or idle inside a frame", peer)
                return False
        if frame is None:
            if direct_reads:
                return await _receive_direct(sink.fd, decoder, peer, idle_seconds)
            with trio.move_on_after(idle_seconds):
                data = await stream.receive_some(_RECEIVE_BYTES)
                if not data:
                    return False
                decoder.feed(data)
                return True
            logger.debug("closing idle connection from %s", peer)
            return False
        try:
            if session.raw_tokens:
                answer = _raw_token_answer(session, frame, peer)
            else:
                answer = await self._handle(frame, peer, session)
        finally:
            del frame  # handled: its bytes go back to the pool (a deferred answer keeps only its response)
            lease.give_back()
        if answer is not None:
            more_read = (size := decoder.next_frame_size()) is not None and decoder.buffered_bytes >= 4 + size
            if answer.done and not more_read and outbox.idle and sink.inline:
                outbox.write_now(sink, answer)
            else:
                await outbox.put(answer)
                if not answer.done:
                    nursery.start_soon(answer.complete, outbox, sink)
                elif not more_read:  # the last of the requests read together: their answers leave in one write
                    outbox.finished(sink)
            if answer.throttle_ms:  # muted: nothing more is read from this client until the throttle ends
                await trio.sleep(answer.throttle_ms / 1000)
        outbox.unyielded += 1
        if outbox.unyielded >= _REQUESTS_PER_YIELD:  # requests read ahead are handled without waiting: let
            outbox.unyielded = 0                      # the node's other tasks run between some of them
            await trio.lowlevel.checkpoint()
        return True

    def close_connections(self, client_id: str | None = None) -> int:
        """End this listener's client connections (only those whose ApiVersions request named ``client_id``, when
        given) as a broken network would; how many (kbroker/faults.py)."""
        closing = [scope for session, scope in self.open_connections.items()
                   if client_id is None or session.client_id == client_id]
        for scope in closing:
            scope.cancel()
        return len(closing)

    async def exchange(self, frame: bytes, peer: str) -> bytes:
        """The response frame to one request frame (each with its size), handled as if it came from
        ``peer`` on a connection of this listener, but without one: how a node's broker reaches the
        controller in its own process (kbroker.peers.InProcessPeers). Answered once ready."""
        session = Session(self.security, self.services.credentials, "User:ANONYMOUS")
        answer = await self._handle(memoryview(frame)[4:], peer, session)
        if answer is None:
            raise DecodeError("the request has no answer")
        if answer.deferred is not None:
            await answer.deferred.ready()
            answer.finish(answer.deferred.response)
        if answer.frame.regions:
            raise DecodeError("an answer with file regions cannot be handed over in process")
        return bytes(answer.frame)

    async def _handle(self, frame: bytes, peer: str, session: Session):
        """The response frame for one request frame, or None when there is none to send."""
        try:
            header, body_start = decode_request_header(frame)
        except UnknownApiKey as error:
            raise DecodeError(f"unknown api key {error.api_key}") from None
        if not session.admits(header.api_key):
            state = "an expired session" if session.authenticated else "authentication"
            raise DecodeError(f"unexpected request (api key {header.api_key}) during {state} on listener "
                              f"{self.security.name}")
        handler = self.handlers.get(header.api_key)
        if handler is None or not handler.supports(header.api_version):
            if header.api_key == _API_VERSIONS_KEY:
                # KIP-511: answer in v0 with our versions, so the client can pick one.
                answer = _Answer(RequestHeader(_API_VERSIONS_KEY, 0, header.correlation_id, header.client_id))
                answer.finish(self.api_versions(ErrorCode.UNSUPPORTED_VERSION))
                return answer
            raise DecodeError(f"api key {header.api_key} v{header.api_version} is not supported")
        request = handler.api.decode_request(header.api_version, memoryview(frame)[body_start:], exact=False)
        quotas = self.services.quotas
        context = RequestContext(header, peer, self.security.name, session,
                                 quotas.throttle_ms if quotas is not None else None)
        started = time.perf_counter()
        if self.faults is None:
            response = await handler.handle(self.broker, context, request)
        else:  # a fault a test set may answer instead, or alter or hold back the answer
            response = await self.faults.answer(handler, self.broker, context, request)
        if response is None:
            return None
        if header.api_key not in _QUOTA_EXEMPT:
            # request_percentage (KIP-124): the share of a thread's time the client's requests take.
            percent_seconds = (time.perf_counter() - started) * 100
            throttle_ms = context.throttle(REQUEST_PERCENTAGE, percent_seconds)
            body = response.response if isinstance(response, Deferred) else response
            if throttle_ms and hasattr(body, "throttle_time_ms"):
                body.throttle_time_ms = max(body.throttle_time_ms or 0, throttle_ms)
        answer = _Answer(header)
        answer.throttle_ms = context.throttle_ms
        metrics = self.services.metrics
        answer.observe = (metrics.request_done if metrics is not None else None, handler.api.name, started, peer,
                          context.principal, self.services.log_every_request)
        if isinstance(response, Deferred):
            answer.deferred = response
        else:
            answer.finish(response)
        return answer


async def _receive_direct(fd: int, decoder: FrameDecoder, peer: str, idle_seconds: float) -> bool:
    """Feed ``decoder`` what the plaintext socket ``fd`` holds, waiting (up to ``idle_seconds``) only when it
    holds nothing yet; False when the peer closed or stayed idle. (trio's ``receive_some`` would take a
    scheduling turn after every read, and a cancel scope for each.)"""
    try:
        data = os.read(fd, _RECEIVE_BYTES)
    except BlockingIOError:
        with trio.move_on_after(idle_seconds):
            await trio.lowlevel.wait_readable(fd)
            return True  # read on the next turn
        logger.debug("closing idle connection from %s", peer)
        return False
    except OSError as error:  # as trio's receive_some says it (a reset connection, say)
        raise trio.BrokenResourceError(f"socket connection broken: {error}") from error
    if not data:
        return False
    decoder.feed(data)
    return True


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
        self.throttle_ms = 0
        # (metrics callback or None, API name, perf_counter at arrival, peer, principal, log every request):
        # the answer's latency goes to the metrics and the log (kbroker/event_log.py) when it is ready
        self.observe = None
        self.frame = None
        self.sent = 0  # of the frame's bytes on the wire, those written already
        self.deferred: Deferred | None = None
        self.done = False  # finished: its frame is made

    @property
    def frame_bytes(self) -> int:
        """The frame's size on the wire: its bytes and its file regions."""
        return len(self.frame) + sum(region.length for _, region in self.frame.regions)

    def finish(self, response) -> None:
        header = self.header
        self.frame = encode_response(header.api_key, header.api_version, header.correlation_id, response)
        self.done = True
        if self.observe is not None:
            observe, api_name, started, peer, principal, every_request = self.observe
            seconds = time.perf_counter() - started
            if observe is not None:
                observe(api_name, seconds)
            log_answer(header, api_name, peer, principal, response, seconds, every_request=every_request)

    async def complete(self, outbox: _Outbox, sink) -> None:
        await self.deferred.ready()
        self.finish(self.deferred.response)
        outbox.finished(sink)


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
        self.writing = False  # the writer has taken answers and not written them all yet
        self.unyielded = 0  # requests the reader handled since it last waited or yielded

    @property
    def idle(self) -> bool:
        """Nothing waits to be written: an answer finished now may leave at once, in order."""
        return not self._answers and not self.writing

    async def put(self, answer: _Answer) -> None:
        while len(self._answers) >= self._limit:
            await self._space.park()
        self._answers.append(answer)
        if answer.done:  # (an unfinished one cannot finish the front: the writer sleeps on)
            self._writer.unpark_all()

    def write_now(self, sink, answer: _Answer) -> bool:
        """Write a finished answer while nothing waits before it, as far as the socket takes it without waiting;
        the rest is the writer's, first in line. Whether it was written whole."""
        answer.sent = sink.write_now(answer.frame, answer.sent)
        if answer.sent < answer.frame_bytes:
            self._answers.appendleft(answer)
            self._writer.unpark_all()
            return False
        return True

    def finished(self, sink) -> None:
        """Answers finished (a deferred one, or the last of requests read together): the finished ones at the
        front leave now from this task (small ones together in one write) when the writer is not writing;
        else the writer is woken for them."""
        answers = self._answers
        if self.writing or not sink.inline:
            self._writer.unpark_all()
            return
        taken = False
        while answers and answers[0].done:
            answer = answers.popleft()
            taken = True
            if not answer.frame.regions and not answer.sent:
                small = [answer.frame]
                while answers and answers[0].done and not answers[0].frame.regions \
                        and len(answers[0].frame) <= _COALESCE_BYTES:
                    small.append(answers.popleft().frame)
                if len(small) > 1:
                    answer.frame = EncodeBuffer(b"".join(small))
            if not self.write_now(sink, answer):
                break
        if taken:
            self._space.unpark_all()
        if self._closed:  # the reader is done: the writer ends once nothing is left
            self._writer.unpark_all()

    def close(self) -> None:
        """No more answers will come; the writer ends once the queued ones are written."""
        self._closed = True
        self._writer.unpark_all()

    async def take_finished(self) -> list[_Answer] | None:
        """The finished answers at the front (at least one), or None once closed and empty."""
        while not (self._answers and self._answers[0].done):
            if self._closed and not self._answers:
                return None
            await self._writer.park()
        taken = []
        while self._answers and self._answers[0].done:
            taken.append(self._answers.popleft())
        self._space.unpark_all()
        return taken


_COALESCE_BYTES = 64 * 1024  # answers up to this size that finish together leave in one write


async def _write_in_order(sink, outbox: _Outbox) -> None:
    """Write answers as they finish, in order; small ones that finished together go
    out in one write (one syscall and one wake-up of the client instead of many)."""
    while (answers := await outbox.take_finished()) is not None:
        outbox.writing = True
        try:
            small = []
            for answer in answers:
                frame = answer.frame
                if not frame.regions and len(frame) <= _COALESCE_BYTES and not answer.sent:
                    small.append(frame)
                    continue
                if small:
                    await sink.send_bytes(memoryview(b"".join(small)))
                    small = []
                await send_response(sink, frame, answer.sent)
            if small:
                await sink.send_bytes(memoryview(small[0] if len(small) == 1 else b"".join(small)))
        finally:
            outbox.writing = False
        await trio.lowlevel.checkpoint()


async def send_response(sink, frame, sent: int = 0) -> None:
    """Write a response frame, its file regions straight from the page cache where the sink can; the first
    ``sent`` bytes of it on the wire are already written."""
    for piece in _pieces(frame):
        size = len(piece) if isinstance(piece, memoryview) else piece.length
        if sent >= size:
            sent -= size
            continue
        if isinstance(piece, memoryview):
            await sink.send_bytes(piece[sent:])
        else:
            await sink.send_region(piece, sent)
        sent = 0


def _pieces(frame):
    """A response frame as it goes on the wire: slices of its bytes (memoryviews) and its file regions."""
    view = memoryview(frame)
    at = 0
    for offset, region in frame.regions:
        yield view[at:offset]
        yield region
        at = offset
    yield view[at:]


class _PatientListener(trio.abc.Listener):
    """A listener that waits out a lack of file descriptors (EMFILE, ENFILE) in accept: new connections
    stay in the backlog, the ones served go on, and accepting resumes once descriptors are free. One line
    in the log every ``_ACCEPT_REFUSED_LOG_S`` at most while it lasts (trio's serve_listeners would retry
    every 100 ms, logging a traceback each time)."""

    def __init__(self, listener: trio.SocketListener) -> None:
        self.listener = listener
        self.socket = listener.socket
        self._refused = 0  # accepts refused since the last line in the log
        self._logged_at: float | None = None  # trio's clock when that line was

    async def accept(self) -> trio.SocketStream:
        delay_s, delay_max_s = _ACCEPT_BACKOFF_S
        while True:
            try:
                return await self.listener.accept()
            except OSError as error:
                if not out_of_descriptors(error):
                    raise
                self._refused += 1
                if self._logged_at is None or trio.current_time() - self._logged_at >= _ACCEPT_REFUSED_LOG_S:
                    logger.warning("out of file descriptors (%s): new connections wait until some are free "
                                   "(accept refused %d time(s) since the last such line)",
                                   os.strerror(error.errno), self._refused)
                    self._logged_at, self._refused = trio.current_time(), 0
                await trio.sleep(delay_s)
                delay_s = min(delay_s * 2, delay_max_s)

    async def aclose(self) -> None:
        await self.listener.aclose()


class _SocketSink:
    """A plaintext connection: bytes go straight to the non-blocking socket, file regions by
    ``os.sendfile``, yielding only when the socket is full (a Fetch answer has two pieces per
    partition); the caller takes the scheduling point."""

    inline = True  # answers may be written by whichever task finished them (write_now)

    def __init__(self, stream: trio.SocketStream) -> None:
        self.fd = stream.socket.fileno()

    def write_now(self, frame, sent: int = 0) -> int:
        """Write what the socket takes without waiting of a response frame whose first ``sent`` bytes on the
        wire are written already; how many are written now, all told."""
        fd = self.fd
        if not frame.regions:
            try:
                return sent + os.write(fd, memoryview(frame)[sent:])
            except BlockingIOError:
                return sent
        before = 0  # the wire bytes of the pieces before this one
        for piece in _pieces(frame):
            size = len(piece) if isinstance(piece, memoryview) else piece.length
            if sent < before + size:
                within = sent - before
                if isinstance(piece, memoryview):
                    try:
                        within += os.write(fd, piece[within:])
                    except BlockingIOError:
                        pass
                else:
                    within = self._sendfile_now(piece, within)
                if within < size:
                    return before + within
                sent = before + size
            before += size
        return before

    def _sendfile_now(self, region, sent: int) -> int:
        """Send what the socket takes without waiting of ``region`` from its byte ``sent``; how far it got."""
        with _region_descriptor(region) as source:
            while sent < region.length:
                try:
                    count = os.sendfile(self.fd, source, region.position + sent, region.length - sent)
                except BlockingIOError:
                    break
                if count == 0:
                    raise trio.BrokenResourceError("file region shorter than announced")
                sent += count
        return sent

    async def send_bytes(self, data: memoryview) -> None:
        fd = self.fd
        while data:
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)

    async def send_region(self, region, sent: int = 0) -> None:
        fd, position = self.fd, region.position + sent
        end = region.position + region.length
        with _region_descriptor(region) as source:  # pinned open until sent, even if the socket is slow
            while position < end:
                try:
                    sent = os.sendfile(fd, source, position, end - position)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(fd)
                    continue
                if sent == 0:
                    # The file ended early: the frame's promised size cannot be kept.
                    raise trio.BrokenResourceError("file region shorter than announced")
                position += sent


class _TlsSink:
    """A TLS connection: everything is encrypted from buffers, file regions read in chunks."""

    inline = False  # every answer leaves from the writer task (an SSLStream has one sender at a time)

    def __init__(self, stream: trio.SSLStream) -> None:
        self.stream = stream

    async def send_bytes(self, data: memoryview) -> None:
        if data:
            await self.stream.send_all(data)

    async def send_region(self, region, sent: int = 0) -> None:
        position, end = region.position + sent, region.position + region.length
        while position < end:
            with _region_descriptor(region) as source:  # not held across the send: nothing waits pinned
                chunk = os.pread(source, min(_TLS_REGION_CHUNK_BYTES, end - position), position)
            if not chunk:
                raise trio.BrokenResourceError("file region shorter than announced")
            await self.stream.send_all(chunk)
            position += len(chunk)


@contextlib.contextmanager
def _region_descriptor(region):
    """The region's file descriptor, pinned open for the block. Its segment may have had to reopen the file
    (the descriptor cache closes idle ones): out of descriptors, or with the file gone (its log closed, a
    deleted topic), the answer's promised size cannot be kept and the connection closes."""
    pinned = region.descriptor()
    try:
        source = pinned.__enter__()
    except OSError as error:
        raise trio.BrokenResourceError(f"file region cannot be read: {error}") from error
    try:
        yield source
    finally:
        pinned.__exit__(None, None, None)


def _raw_token_answer(session: Session, token: bytes, peer: str) -> _Answer:
    """After a v0 SaslHandshake a frame is a bare SASL token, answered by a bare one (Kafka's
    original SASL framing); a failure closes the connection without an answer."""
    try:
        reply, _ = session.authenticate(bytes(token))
    except AuthenticationFailed as failure:
        raise DecodeError(f"failed authentication from {peer}: {failure.detail}") from None
    answer = _Answer(None)
    answer.frame = EncodeBuffer(len(reply).to_bytes(4, "big") + reply)
    answer.done = True
    return answer

