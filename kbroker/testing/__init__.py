"""kbroker's pytest plugin: a real broker for your integration tests, on a free loopback port.

    def test_round_trip(kbroker):
        producer = confluent_kafka.Producer({"bootstrap.servers": kbroker.bootstrap})

Fixtures: ``kbroker`` gives each test its own broker and data directory; ``kbroker_session`` shares
one across the session. Outside fixtures, ``running_broker(settings={...})`` is the same broker as a
context manager, with any settings.

Every pytest run in an environment with kbroker installed loads this module, so it imports nothing
heavy: the broker (trio and all) is imported when a test first asks for one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kbroker.testing.in_process_broker import RunningBroker, running_broker

# The names this package offers, each imported from its module on first use (PEP 562).
_MODULE_BY_NAME = {
    "RunningBroker": "kbroker.testing.in_process_broker",
    "running_broker": "kbroker.testing.in_process_broker",
}
__all__ = list(_MODULE_BY_NAME)


def __getattr__(name: str):
    if name not in _MODULE_BY_NAME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE_BY_NAME[name]), name)


@pytest.fixture
def kbroker():
    """A fresh broker for this test, in this process, with its own temporary data directory. Yields a
    RunningBroker: .bootstrap ("host:port", for bootstrap.servers), .host, .port, .data_dir (its
    log.dirs). Other settings: a fixture around kbroker.testing.running_broker(settings={...}).
    """
    yield from _serve_broker()


@pytest.fixture(scope="session")
def kbroker_session():
    """One broker shared by every test of the session: faster to start, but topics, records and
    committed offsets carry over, so give each test its own topic and group names. Yields a
    RunningBroker like ``kbroker``: .bootstrap ("host:port"), .host, .port, .data_dir.
    """
    yield from _serve_broker()


def _serve_broker():
    from kbroker.testing.in_process_broker import running_broker  # here, not above: see the module's docstring

    with running_broker() as running:
        yield running
