"""One kept, multiplexed connection per other node, used by every node-to-node caller.

A node talks to another over one listener (the controllers' or the inter-broker one), secured as
that listener wants (kbroker.security.peer.PeerSecurity: TLS and SASL). :class:`Peers` keeps one
connection per address, opened on the first call and secured once, and pipelines every caller's
requests on it, as Kafka's NetworkClient does:

- each request gets a correlation id; one reader task per connection hands each answer to the call
  with that id (Kafka answers in order on a connection, but the id is what is matched);
- at most ``max_in_flight`` requests wait on a connection; a call waits for a place within its timeout;
- a call gets an answer, or OSError within its ``timeout_s``: :class:`PeerUnreachable` when TLS or
  SASL refused, else :class:`PeerUnavailable` (refused, cut, unreadable, too slow, backing off);
- a connection that fails (a request timed out, the stream broke or sent something unreadable) is
  closed and every call waiting on it fails at once; the next connection is tried only after a
  backoff that doubles with each failure in a row (``reconnect.backoff.ms`` 50 ms up to
  ``reconnect.backoff.max.ms`` 1 s, Kafka's client defaults), and calls in the meantime fail at once.

A caller that must not wait behind others names a ``lane``, a connection of its own to that address:
the replica fetchers' long polls have one per leader, so a transaction marker to that broker does not
queue behind a fetch held for ``replica.fetch.wait.max.ms``, and a broker's heartbeats have one to each
controller, so that they never queue behind a forwarded request (Kafka's fetcher threads and its
broker lifecycle manager own their connections for the same reasons).

The connections' reader tasks live in the nursery of :meth:`Peers.run`; when it is cancelled (the
node stops) every connection closes with it.
"""

from __future__ import annotations

import logging
import math
import struct
from dataclasses import dataclass

import trio

from kbroker.security.peer import PeerSecurity, PeerUnreachable
from kbroker.wire import DecodeError
from kbroker.wire.frame import FrameDecoder, decode_response, encode_request
from kbroker.wire.schema import API_BY_NAME

logger = logging.getLogger("kbroker.peers")

_RESPONSE_ID = struct.Struct(">i")  # every response header starts with the request's correlation id


class PeerUnavailable(ConnectionError):
    """A request to another node got no answer: refused, cut, unreadable, too slow, or the connection is
    backing off after a failure."""


@dataclass
class _Call:
    """One request's place on a connection: the reader leaves its answer (or the connection's error)."""

    done: trio.Event
    frame: bytes | None = None
    error: OSError | None = None


class PeerConnection:
    """One kept connection to one address: see the module's docstring."""

    def __init__(self, address: tuple[str, int], security: PeerSecurity, nursery: trio.Nursery, *, client_id: str,
                 max_in_flight: int, backoff_s: float, backoff_max_s: float, clock=trio.current_time) -> None:
        self.address = address
        self.security = security
        self.client_id = client_id  # the SASL exchange's (each request names its own)
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.clock = clock
        self.opened = 0  # connections made and secured, for tests and debugging
        self._nursery = nursery
        self._places = trio.Semaphore(max_in_flight)
        self._connect_lock = trio.Lock()
        self._send_lock = trio.Lock()  # one frame at a time on the stream
        self._stream: trio.abc.Stream | None = None
        self._reader: trio.CancelScope | None = None
        self._pending: dict[int, _Call] = {}
        self._correlation_id = 0
        self._failures = 0  # in a row: the backoff doubles with each
        self._retry_at = -math.inf
        self._last_error: OSError | None = None

    async def call(self, api_name: str, version: int, body, *, client_id: str, timeout_s: float):
        """The decoded response to one request; OSError (see the module's docstring) if none came."""
        api = API_BY_NAME[api_name]
        where = f"{api_name} to {self.address[0]}:{self.address[1]}"
        stream = call = None
        try:
            with trio.fail_after(timeout_s):
                async with self._places:
                    stream = await self._connected()
                    self._correlation_id = correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
                    call = self._pending[correlation_id] = _Call(trio.Event())
                    try:
                        await self._send(stream, encode_request(api.key, version, correlation_id, client_id, body))
                        await call.done.wait()
                    finally:
                        self._pending.pop(correlation_id, None)
        except trio.TooSlowError:
            error = PeerUnavailable(f"{where}: no answer within {timeout_s} s")
            if call is not None:  # asked and not answered: the connection is stuck (Kafka drops it too)
                self._fail(stream, error)
            raise error from None
        except PeerUnreachable:
            raise
        except OSError as error:
            raise PeerUnavailable(f"{where}: {error}") from error
        if call.error is not None:
            raise PeerUnavailable(f"{where}: {call.error}") from call.error
        try:
            return decode_response(api.key, version, call.frame)[1]
        except DecodeError as error:
            self._fail(stream, PeerUnavailable(f"unreadable answer: {error}"))
            raise PeerUnavailable(f"{where}: unreadable answer: {error}") from error

    async def _connected(self) -> trio.abc.Stream:
        async with self._connect_lock:
            if self._stream is not None:
                return self._stream
            if self.clock() < self._retry_at:
                raise PeerUnavailable(f"backing off for {self._retry_at - self.clock():.2f} s after: "
                                      f"{self._last_error}")
            try:
                stream = await self.security.connect(*self.address, self.client_id)
            except (OSError, trio.TooSlowError, trio.Cancelled) as error:
                self._backoff(error if isinstance(error, OSError) else PeerUnavailable("connecting took too long"))
                raise
            self._stream, self._failures = stream, 0
            self.opened += 1
            self._reader = trio.CancelScope()
            self._nursery.start_soon(self._read, stream, self._reader)
            return stream

    async def _send(self, stream, frame: bytes) -> None:
        async with self._send_lock:
            if stream is not self._stream:
                raise PeerUnavailable("the connection failed before the request left")
            try:
                await stream.send_all(frame)
            except BaseException as error:  # cut, or cancelled half-way through a frame: the stream is done
                self._fail(stream, error if isinstance(error, OSError) else PeerUnavailable(repr(error)))
                if isinstance(error, (trio.BrokenResourceError, trio.ClosedResourceError)):
                    raise PeerUnavailable(f"connection lost: {error!r}") from error
                raise

    async def _read(self, stream, scope: trio.CancelScope) -> None:
        """Hand each answer to the call with its correlation id, until the stream ends or is failed."""
        error: OSError = PeerUnavailable("the connection closed")
        try:
            with scope:
                try:
                    decoder = FrameDecoder()
                    while True:
                        frame = decoder.next_frame()
                        while frame is None:  # answers may arrive several to a read, or one over many
                            chunk = await stream.receive_some(1 << 20)
                            if not chunk:
                                raise EOFError("connection closed")
                            decoder.feed(chunk)
                            frame = decoder.next_frame()
                        if len(frame) < 4:
                            raise DecodeError("a response shorter than its header")
                        call = self._pending.get(_RESPONSE_ID.unpack_from(frame)[0])
                        if call is not None:  # else the answer to a call that gave up waiting
                            call.frame = frame
                            call.done.set()
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, DecodeError,
                        EOFError) as failure:
                    error = failure if isinstance(failure, OSError) else PeerUnavailable(repr(failure))
            self._fail(stream, error)
        finally:
            await trio.aclose_forcefully(stream)

    def _fail(self, stream, error: OSError) -> None:
        """Close ``stream`` if it is still the connection, failing every call waiting on it, and back off."""
        if stream is None or stream is not self._stream:
            return
        logger.debug("connection to %s:%d failed: %r", *self.address, error)
        self._stream = None
        self._reader.cancel()
        for call in self._pending.values():
            if call.frame is None:
                call.error = error
                call.done.set()
        self._backoff(error)

    def _backoff(self, error: OSError) -> None:
        self._last_error = error
        self._failures += 1
        self._retry_at = self.clock() + min(self.backoff_s * 2 ** (self._failures - 1), self.backoff_max_s)

    def close(self) -> None:
        self._fail(self._stream, PeerUnavailable("closed"))


class Peers:
    """The kept connections to other nodes over one listener, secured by ``security``."""

    def __init__(self, security: PeerSecurity, *, client_id: str = "kbroker", max_in_flight: int = 64,
                 backoff_s: float = 0.05, backoff_max_s: float = 1.0) -> None:
        self.security = security
        self.client_id = client_id
        self.max_in_flight = max_in_flight  # requests waiting for answers on one connection
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.connections: dict[tuple[str, int, str], PeerConnection] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Hold the connections' reader tasks until cancelled; then every connection closes."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            for connection in self.connections.values():
                connection.close()
            self.connections.clear()

    async def call(self, address: tuple[str, int], api_name: str, version: int, body, *, timeout_s: float,
                   client_id: str | None = None, lane: str = ""):
        """The decoded response of the node at ``address`` to one request, on the connection kept to it (per
        ``lane``); OSError if none came within ``timeout_s``."""
        if self._nursery is None:
            raise PeerUnavailable("not running: no connections to other nodes")
        key = (address[0], address[1], lane)
        connection = self.connections.get(key)
        if connection is None:
            connection = self.connections[key] = PeerConnection(
                address, self.security, self._nursery, client_id=self.client_id, max_in_flight=self.max_in_flight,
                backoff_s=self.backoff_s, backoff_max_s=self.backoff_max_s)
        return await connection.call(api_name, version, body, client_id=client_id or self.client_id,
                                     timeout_s=timeout_s)

    @property
    def opened(self) -> int:
        """Connections made and secured since start, over every address."""
        return sum(connection.opened for connection in self.connections.values())


class InProcessPeers:
    """The one other node that lives in this process: a single node's broker and the controller of its
    one-voter quorum. The same requests as over :class:`Peers`, encoded and decoded with the same codec
    and answered by the controller's own listener server (``Server.exchange``), without a socket: a
    single node opens no controller port."""

    def __init__(self, server, *, client_id: str = "kbroker") -> None:
        self.server = server  # the controller's listener server
        self.client_id = client_id
        self._correlation_id = 0
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def call(self, address: tuple[str, int], api_name: str, version: int, body, *, timeout_s: float,
                   client_id: str | None = None, lane: str = ""):
        """The controller's decoded answer; PeerUnavailable if it took longer than ``timeout_s``. The
        controller handles the request in a task of its own, as over a socket: a caller that stops
        waiting does not stop the controller halfway (a creation it gave up on is still made)."""
        api = API_BY_NAME[api_name]
        self._correlation_id = correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api.key, version, correlation_id, client_id or self.client_id, body)
        answered = trio.Event()
        answer: list = []

        async def exchange() -> None:
            try:
                answer.append(await self.server.exchange(frame, "in-process"))
            except Exception as error:  # told to the caller as any failed peer call, never to the nursery
                logger.debug("%s to this process's controller failed: %r", api_name, error)
            answered.set()

        if self._nursery is None:
            raise PeerUnavailable(f"{api_name} to this process's controller: not running")
        self._nursery.start_soon(exchange)
        with trio.move_on_after(timeout_s):
            await answered.wait()
            if not answer:
                raise PeerUnavailable(f"{api_name} to this process's controller failed")
            return decode_response(api.key, version, memoryview(answer[0])[4:])[1]
        raise PeerUnavailable(f"{api_name} to this process's controller: no answer within {timeout_s} s")
