"""kbroker's pytest plugin: a real broker for your integration tests, on a free loopback port.

    def test_round_trip(kbroker):
        kbroker.create_topic("orders", partitions=3)
        producer = confluent_kafka.Producer({"bootstrap.servers": kbroker.bootstrap})

Fixtures: ``kbroker`` gives each test its own broker and data directory; ``kbroker_session`` shares
one across the session. Outside fixtures, ``running_broker(settings={...})`` is the same broker as a
context manager, with any settings, and ``running_cluster(nodes=3)`` a replicated cluster of real
processes.

Every pytest run in an environment with kbroker installed loads this module, so it imports nothing
heavy: the broker (trio and all) is imported when a test first asks for one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kbroker.testing.in_process_broker import RunningBroker, running_broker
    from kbroker.testing.process_cluster import ClusterNode, RunningCluster, running_cluster

# The names this package offers, each imported from its module on first use (PEP 562).
_MODULE_BY_NAME = {
    "RunningBroker": "kbroker.testing.in_process_broker",
    "running_broker": "kbroker.testing.in_process_broker",
    "ClusterNode": "kbroker.testing.process_cluster",
    "RunningCluster": "kbroker.testing.process_cluster",
    "running_cluster": "kbroker.testing.process_cluster",
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
    log.dirs), .create_topic(name, partitions=1, config=None) (returns once every partition has a
    leader; topics are also auto-created on first use), .schema_registry_url (the broker's schema
    registry, Confluent's REST API, served from the first time it is asked). Other settings: a fixture around
    kbroker.testing.running_broker(settings={...}), as ``pytest --fixtures -v`` shows; a cluster too.

    A broker with settings of its own (Kafka's names), as a fixture you write::

        from kbroker.testing import running_broker, running_cluster

        @pytest.fixture
        def strict_broker():
            with running_broker(settings={"auto.create.topics.enable": False}) as broker:
                yield broker

    A replicated cluster of real processes (KRaft, broker and controller in each), started once per
    module here; it yields .bootstrap (every node's "host:port") and .create_topic()::

        @pytest.fixture(scope="module")
        def cluster():
            with running_cluster(nodes=3) as cluster:
                yield cluster
    """
    yield from _serve_broker()


@pytest.fixture(scope="session")
def kbroker_session():
    """One broker shared by every test of the session: faster to start, but topics, records and
    committed offsets carry over, so give each test its own topic and group names. Yields a
    RunningBroker like ``kbroker``: .bootstrap ("host:port"), .host, .port, .data_dir, .create_topic().
    """
    yield from _serve_broker()


def _serve_broker():
    from kbroker.testing.in_process_broker import running_broker  # here, not above: see the module's docstring

    with running_broker() as running:
        yield running
