"""The kept, multiplexed connection to another node (kbroker/peers.py), against in-process trio servers:
answers matched by correlation id in any order, a connection cut mid-request, exponential backoff,
timeouts, the bound on requests in flight, and the connections closing with their nursery."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kbroker.peers import Peers, PeerUnavailable
from kbroker.security.peer import PeerSecurity
from kbroker.wire.frame import FrameDecoder, decode_request_header, encode_response
from kbroker.wire.schema import API_BY_NAME

pytestmark = pytest.mark.trio

ECHO = API_BY_NAME["SaslHandshake"]  # a request with a word in it (mechanism) and an answer with words
VERSION = 1
ADDRESS = ("node-2", 9093)


async def requests_of(stream):
    """(correlation id, mechanism) of each request arriving on ``stream``, until it closes."""
    decoder = FrameDecoder()
    while True:
        frame = decoder.next_frame()
        while frame is None:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            decoder.feed(chunk)
            frame = decoder.next_frame()
        header, position = decode_request_header(frame)
        yield header.correlation_id, ECHO.decode_request(header.api_version, memoryview(frame)[position:])


def answer(correlation_id: int, word: str) -> bytes:
    return bytes(encode_response(ECHO.key, VERSION, correlation_id, ECHO.response_class(error_code=0,
                                                                                        mechanisms=[word])))


def mechanism_of(body) -> str:
    return body.mechanism


async def echo(stream, *, reverse_pairs: bool = False) -> None:
    """Answer each request with its own word; ``reverse_pairs``: two at a time, the second first."""
    held = []
    async for correlation_id, body in requests_of(stream):
        held.append(answer(correlation_id, mechanism_of(body)))
        if not reverse_pairs or len(held) == 2:
            for frame in reversed(held):
                await stream.send_all(frame)
            held.clear()


class InProcess:
    """Stands in for PeerSecurity: each connection is a memory stream whose far end ``serve`` gets."""

    def __init__(self, nursery: trio.Nursery, serve) -> None:
        self.nursery = nursery
        self.serve = serve
        self.refuse = False
        self.attempts: list[float] = []  # trio.current_time() of each connection attempt

    async def connect(self, host: str, port: int, client_id: str = "kbroker"):
        self.attempts.append(trio.current_time())
        if self.refuse:
            raise ConnectionRefusedError(f"{host}:{port} refused")
        client, server = trio.testing.memory_stream_pair()
        self.nursery.start_soon(self.serve, server)
        return client


def call(peers: Peers, word: str, timeout_s: float = 5, address=ADDRESS):
    return peers.call(address, "SaslHandshake", VERSION, ECHO.request_class(mechanism=word), timeout_s=timeout_s)


async def test_pipelined_answers_reach_their_callers_in_any_order_on_one_kept_connection():
    """A real loopback server, plaintext PeerSecurity: the second request is answered first."""
    accepted = []

    async def serve(stream):
        accepted.append(stream)
        await echo(stream, reverse_pairs=True)

    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        nursery.start_soon(trio.serve_listeners, serve, listeners)
        port = listeners[0].socket.getsockname()[1]
        peers = Peers(PeerSecurity())
        await nursery.start(peers.run)
        answers = {}

        async def ask(word):
            answers[word] = (await call(peers, word, address=("127.0.0.1", port))).mechanisms

        async with trio.open_nursery() as callers:
            callers.start_soon(ask, "first")
            await trio.sleep(0.05)
            callers.start_soon(ask, "second")
        assert answers == {"first": ["first"], "second": ["second"]}
        for word in ("third", "fourth"):  # asked one at a time: reverse_pairs holds the first for the second
            nursery.start_soon(ask, word)
        with trio.fail_after(5):
            while len(answers) < 4:
                await trio.sleep(0.01)
        assert answers["fourth"] == ["fourth"] and answers["third"] == ["third"]
        assert len(accepted) == 1 and peers.opened == 1
        nursery.cancel_scope.cancel()


async def test_a_connection_cut_mid_request_fails_its_calls_at_once_and_the_next_call_reconnects(autojump_clock):
    cut = [True]

    async def serve(stream):
        if cut[0]:
            async for _ in requests_of(stream):
                await stream.aclose()  # the request arrived; the node went away before answering
                return
        await echo(stream)

    async with trio.open_nursery() as nursery:
        security = InProcess(nursery, serve)
        peers = Peers(security)
        await nursery.start(peers.run)
        started = trio.current_time()
        with pytest.raises(PeerUnavailable):
            await call(peers, "lost", timeout_s=30)
        assert trio.current_time() - started < 1  # not left to the timeout
        cut[0] = False
        with pytest.raises(OSError, match="backing off"):  # within the backoff: no new connection yet
            await call(peers, "too soon")
        await trio.sleep(0.05)
        assert (await call(peers, "again")).mechanisms == ["again"]
        assert len(security.attempts) == 2 and peers.opened == 2
        nursery.cancel_scope.cancel()


async def test_reconnects_back_off_exponentially_up_to_the_maximum_and_start_over_after_a_success(autojump_clock):
    async with trio.open_nursery() as nursery:
        security = InProcess(nursery, echo)
        security.refuse = True
        peers = Peers(security, backoff_s=0.05, backoff_max_s=1.0)
        await nursery.start(peers.run)
        while len(security.attempts) < 7:
            with pytest.raises(OSError):
                await call(peers, "anyone?")
            await trio.sleep(0.001)  # each caller asks again at once; the connection waits out its backoff
        gaps = [round(later - earlier, 2) for earlier, later in zip(security.attempts, security.attempts[1:])]
        assert gaps == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]
        security.refuse = False
        await trio.sleep(1)
        assert (await call(peers, "back")).mechanisms == ["back"]
        nursery.cancel_scope.cancel()


async def test_an_unanswered_request_times_out_and_fails_the_connection_with_it(autojump_clock):
    async def swallow(stream):
        async for _ in requests_of(stream):
            pass

    async with trio.open_nursery() as nursery:
        security = InProcess(nursery, swallow)
        peers = Peers(security)
        await nursery.start(peers.run)
        outcomes = {}

        async def ask(word, timeout_s):
            started = trio.current_time()
            try:
                await call(peers, word, timeout_s=timeout_s)
            except PeerUnavailable as error:
                outcomes[word] = (round(trio.current_time() - started, 2), str(error))

        async with trio.open_nursery() as callers:
            callers.start_soon(ask, "patient", 30)
            await trio.sleep(0.1)
            callers.start_soon(ask, "hasty", 2)
        assert outcomes["hasty"][0] == 2 and "no answer within 2 s" in outcomes["hasty"][1]
        assert outcomes["patient"][0] == 2.1  # failed with the connection, not left to its own 30 s
        security.serve = echo
        await trio.sleep(0.1)
        assert (await call(peers, "fresh")).mechanisms == ["fresh"]
        assert len(security.attempts) == 2
        nursery.cancel_scope.cancel()


async def test_requests_in_flight_on_a_connection_are_bounded(autojump_clock):
    arrived = []
    release = trio.Event()

    async def hold(stream):
        async for correlation_id, body in requests_of(stream):
            arrived.append(correlation_id)
            await release.wait()
            await stream.send_all(answer(correlation_id, mechanism_of(body)))

    async with trio.open_nursery() as nursery:
        peers = Peers(InProcess(nursery, hold), max_in_flight=2)
        await nursery.start(peers.run)
        async with trio.open_nursery() as callers:
            for index in range(3):
                callers.start_soon(call, peers, f"w{index}", 60)
            await trio.sleep(1)
            assert len(arrived) == 1  # the server holds the first; the second is sent, the third waits
            assert len(peers.connections[(*ADDRESS, "")]._pending) == 2
            release.set()
        assert len(arrived) == 3
        nursery.cancel_scope.cancel()


async def test_lanes_are_separate_connections_and_stopping_closes_them_all(autojump_clock):
    streams = []

    async def serve(stream):
        streams.append(stream)
        async for _ in requests_of(stream):
            pass  # never answers
        streams.remove(stream)

    failures = []
    async with trio.open_nursery() as nursery:
        peers = Peers(InProcess(nursery, serve))
        running = trio.CancelScope()

        async def run_peers():
            with running:
                await peers.run()

        nursery.start_soon(run_peers)
        await trio.sleep(0.01)

        async def ask(lane):
            try:
                await peers.call(ADDRESS, "SaslHandshake", VERSION, ECHO.request_class(mechanism=lane),
                                 timeout_s=60, lane=lane)
            except PeerUnavailable as error:
                failures.append(str(error))

        nursery.start_soon(ask, "fetch")
        nursery.start_soon(ask, "")
        await trio.sleep(1)
        assert len(streams) == 2
        running.cancel()
        await trio.sleep(1)
        assert streams == [] and len(failures) == 2  # the servers saw the connections close; the calls failed
        with pytest.raises(PeerUnavailable, match="not running"):
            await call(peers, "late")
