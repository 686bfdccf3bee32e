"""kbroker's pytest plugin: a real broker for your integration tests, on a free loopback port.

    def test_round_trip(kbroker):
        kbroker.create_topic("orders", partitions=3)
        producer = confluent_kafka.Producer({"bootstrap.servers": kbroker.bootstrap})

Fixtures: ``kbroker`` gives each test its own broker and data directory (in a process of its own,
started while the test before ran, so a test hardly waits for it); ``kbroker_clean`` shares one
broker across the session and empties it after each test (``reset()``); ``kbroker_session`` shares
one across the session as it is. Outside fixtures,
``running_broker(settings={...})`` is the same broker as a context manager, with any settings, and
``running_cluster(nodes=3)`` a replicated cluster of real processes.

Every pytest run in an environment with kbroker installed loads this module, so it imports nothing
heavy: the broker (trio and all) is imported when a test first asks for one. The fixtures are in
kbroker/testing/fixtures.py, imported here only in a process that has imported pytest: a broker host
or ``kbroker test-broker``, which import this package for its helpers, do without pytest.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

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

# The fixtures' brokers make their internal topics with one partition, not Kafka's 50, as Kafka's own
# test harness makes them with few: a broker whose first consumer creates __consumer_offsets then
# makes, and at its stop closes, one log rather than 50 (about 20 ms a test; bench/test_double_bench.py).
FIXTURE_SETTINGS = {"offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1,
                    "share.coordinator.state.topic.num.partitions": 1}


def __getattr__(name: str):
    if name not in _MODULE_BY_NAME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE_BY_NAME[name]), name)


if "pytest" in sys.modules:  # loaded as pytest's plugin: its fixtures and hook, from the module that imports pytest
    from kbroker.testing.fixtures import (_kbroker_clean_session, _kbroker_hosts, kbroker, kbroker_clean,  # noqa: F401
                                          kbroker_session, pytest_runtest_teardown)
