"""The pytest plugin's fixtures and hook, offered by kbroker.testing (its docstring says what each gives) when
pytest loads it as its plugin: this module imports pytest, which the package itself does not, so that the
processes that use the package's helpers without pytest (a broker host, ``kbroker test-broker``) start
without it (some 100 ms)."""

from __future__ import annotations

import pytest

from kbroker.testing import FIXTURE_SETTINGS


@pytest.fixture
def kbroker(_kbroker_hosts):
    """A fresh broker for this test, with its own temporary data directory, on a free loopback port. It runs
    in a process of its own (a broker host, kbroker/testing/broker_host.py), started while the test
    before ran and stopped after this one, on another core: a test neither waits for it nor shares its
    process or its GIL with it, and the broker (trio and all) is never imported into the test's process.
    Yields a RemoteBroker (kbroker/testing/remote_broker.py): .bootstrap ("host:port", for
    bootstrap.servers), .host, .port, .data_dir (its log.dirs), .create_topic(name, partitions=1,
    config=None) (returns once every partition has a leader; topics are also auto-created on first use),
    .schema_registry_url (the broker's schema registry, Confluent's REST API, served from the first time
    it is asked), .faults, .advance_time(ms), .records(topic) and other looks inside, .restart() and
    .reset(), each reaching the broker over HTTP. Other settings: a fixture around
    kbroker.testing.running_broker(settings={...}), as ``pytest --fixtures -v`` shows; a cluster too.

    - .faults: errors, delays, closed connections, moved coordinators, rebalances, fenced producers,
      a full disk, on demand (kbroker/faults.py); a request fault comes back as a handle whose .fired,
      .remaining and .active are read from the broker, and .cancel(); they end with the test;
    - .advance_time(ms): the broker's clock moved ahead, what falls due meanwhile done at once;
    - .records(topic), .group(group_id), .committed_offsets(group_id), .transactions(), .schemas():
      what it holds, as plain Python values;
    - .restart(): stopped and started again on the same data directory and port (clients reconnect;
      what was acknowledged stays);
    - .reset(): emptied of every topic, group, committed offset, transaction, schema, ACL, client
      quota, SCRAM user and dynamic config, on the same port.

    Not .broker, the Broker object itself: it is in another process; ``kbroker_session``,
    ``kbroker_clean`` and ``running_broker()`` run theirs in the test's process and give it. Its
    internal topics have one partition each (FIXTURE_SETTINGS). What a broker per test costs a test,
    beside a shared one: bench/test_double_bench.py.

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
    broker = _kbroker_hosts.take()
    try:
        yield broker
    finally:
        _kbroker_hosts.give_back(broker)


@pytest.fixture
def kbroker_clean(_kbroker_clean_session):
    """A broker shared by every test that asks for it, emptied after each one: the test finds no
    topic, group, committed offset, transaction, schema, ACL, client quota, SCRAM user or dynamic
    config that an earlier one left, and no fault still set, on the same port as the test before
    (RunningBroker.reset(), kbroker/testing/reset.py, in a few milliseconds). Yields a RunningBroker,
    in the test's process: ``kbroker``'s members, and .broker, the Broker itself. Close the clients a test opens (or give them fixtures that close them): one
    left running into the next test goes on using the broker, and a consumer rejoining its group
    makes that group again. Kept apart from ``kbroker_session``'s broker, whose contents are kept.
    """
    yield _kbroker_clean_session
    if _kbroker_clean_session.broker.log_dir_offline is not None:  # a failed fsync: only a restart recovers
        _kbroker_clean_session.restart()
    _kbroker_clean_session.reset()


@pytest.fixture(scope="session")
def kbroker_session():
    """One broker shared by every test of the session: faster to start, but topics, records and
    committed offsets carry over, so give each test its own topic and group names. Yields a
    RunningBroker like ``kbroker``: .bootstrap ("host:port"), .host, .port, .data_dir, .create_topic(),
    .faults, .advance_time(), .records() and the other looks inside, .restart(), .reset(). Faults a
    test set on it are cleared when that test ends; time moved ahead stays ahead.
    """
    global _session_broker
    from kbroker.testing.in_process_broker import running_broker  # here, not above: see kbroker.testing's docstring

    with running_broker(settings=FIXTURE_SETTINGS) as running:
        _session_broker = running
        try:
            yield running
        finally:
            _session_broker = None


@pytest.fixture(scope="session")
def _kbroker_hosts():
    """The ``kbroker`` fixture's brokers: two broker host processes, started at the first test that asks for
    a broker and stopped at the session's end (and by themselves if this process dies); each test's broker
    comes from them in turn (kbroker.testing.remote_broker.BrokerHosts)."""
    from kbroker.testing.remote_broker import BrokerHosts

    hosts = BrokerHosts(settings=FIXTURE_SETTINGS)
    try:
        yield hosts
    finally:
        hosts.close()


@pytest.fixture(scope="session")
def _kbroker_clean_session():
    """The broker ``kbroker_clean`` empties after each test."""
    from kbroker.testing.in_process_broker import running_broker

    with running_broker(settings=FIXTURE_SETTINGS) as running:
        yield running


_session_broker = None  # kbroker_session's broker while it runs: its faults are cleared after each test


def pytest_runtest_teardown(item, nextitem):
    """A fault a test set on the shared broker ends with the test (the other fixtures' brokers are
    stopped or reset)."""
    running = _session_broker
    if running is not None and "kbroker_session" in getattr(item, "fixturenames", ()):
        running.faults.clear()
