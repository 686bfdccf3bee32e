"""/metrics, /health and /ready (kbroker/http/endpoints.py) served over a real loopback socket."""

from __future__ import annotations

import pytest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kbroker.http.endpoints import serve_endpoints
from tests.http.loopback_client import connect, loopback_sockets

pytestmark = pytest.mark.trio

EXPOSITION = b"# TYPE kbroker_test gauge\nkbroker_test 1.0\n"


class Readiness:
    def __init__(self) -> None:
        self.state = (False, "starting: listeners not open yet")

    def __call__(self) -> tuple[bool, str]:
        return self.state


@pytest.fixture
async def endpoints(nursery):
    sockets, readiness = loopback_sockets(), Readiness()
    await nursery.start(lambda task_status: serve_endpoints(lambda: EXPOSITION, readiness, sockets,
                                                            task_status=task_status))
    async with connect(sockets) as client:
        yield client, readiness


async def test_metrics_are_the_exposition_with_prometheus_content_type(endpoints):
    client, _ = endpoints
    status, headers, body = await client.get("/metrics")
    assert (status, headers["content-type"], body) == (200, CONTENT_TYPE_LATEST, EXPOSITION)


async def test_health_is_ok_and_ready_says_why_not_then_ready_on_the_same_connection(endpoints):
    client, readiness = endpoints
    assert (await client.get("/health"))[::2] == (200, b"ok\n")
    assert (await client.get("/ready"))[::2] == (503, b"starting: listeners not open yet\n")
    readiness.state = (True, "ready")
    assert (await client.get("/ready"))[::2] == (200, b"ready\n")


async def test_another_path_is_404_and_another_method_405(endpoints):
    client, _ = endpoints
    assert (await client.get("/nothing"))[::2] == (404, b"/metrics, /health or /ready\n")
    await client.send(b"POST /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n")
    status, headers, _ = await client.answer()
    assert status == 405 and "GET" in headers["allow"]


async def test_a_body_is_refused_beyond_a_request_heads_size(endpoints):
    client, _ = endpoints
    await client.send(b"POST /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 1048576\r\n\r\n")
    assert (await client.answer())[0] == 413
    assert await client.closed()


class StartingBroker:
    """A broker whose client listener is not open yet: the console has nothing to log in on."""

    def __init__(self, readiness) -> None:
        from kbroker.broker import BrokerSettings

        self.settings, self.ports, self.servers, self.history = BrokerSettings(), {}, [], None
        self.readiness = readiness


async def test_the_console_answers_503_with_the_reason_until_the_listeners_are_open(nursery):
    sockets, readiness = loopback_sockets(), Readiness()
    await nursery.start(lambda task_status: serve_endpoints(lambda: EXPOSITION, readiness, sockets,
                                                            StartingBroker(readiness), task_status=task_status))
    async with connect(sockets) as client:
        for path in ("/", "/topics", "/login"):
            status, _, body = await client.get(path)
            assert status == 503 and b"starting: listeners not open yet: reload in a moment." in body
        assert (await client.get("/health"))[::2] == (200, b"ok\n")
        assert (await client.get("/nothing"))[::2] == (404, b"/metrics, /health, /ready or the console at /\n")
