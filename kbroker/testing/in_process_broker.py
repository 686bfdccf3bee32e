"""A broker in this process, on a free loopback port, in a thread of its own, for as long as a block runs.

The pytest plugin's fixtures (kbroker/testing/__init__.py) import this module only when a test asks
for a broker: it brings in trio and the whole broker.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from dataclasses import dataclass, replace

import trio

from kbroker.broker import Broker, BrokerSettings, plaintext_listener, settings_from_config
from kbroker.config import BrokerConfig
from kbroker.listen import bind_listeners
from kbroker.schemas.service import registry_address
from kbroker.testing.topic_creation import CreatesTopics

_START_TIMEOUT_S = 30


@dataclass
class RunningBroker(CreatesTopics):
    """A broker serving in this process: ``bootstrap`` ("host:port", for bootstrap.servers), ``host``,
    ``port``, ``data_dir`` (its log.dirs, removed afterwards unless you gave it), ``schema_registry_url``
    and the ``broker`` itself."""

    host: str
    port: int
    data_dir: str
    broker: Broker
    trio_token: object = None  # the broker's event loop, for calls into it

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def schema_registry_url(self) -> str:
        """The URL of its schema registry (Confluent's REST API), served from the first time this is asked."""
        host, port = trio.from_thread.run_sync(self.broker.serve_schema_registry, self.host,
                                               trio_token=self.trio_token)
        return f"http://{host}:{port}"

    def address(self, listener: str) -> str:
        """host:port of one of its listeners, by name."""
        return f"{self.host}:{self.broker.ports[listener.upper()]}"


# Where a test broker differs from Kafka's defaults, and why. A new group's first rebalance waits
# 300 ms, not Kafka's 3 s, for members that subscribe together: long enough that they form one
# generation (kafka-python 3.0.12 can hang when a lone first member leads; issue 31), short
# enough that a test's first poll is not late.
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": 300}


@contextlib.contextmanager
def running_broker(data_dir: str | None = None, *, host: str = "127.0.0.1", node_id: int = 1, settings: dict | None = None):
    """Run a broker on a free port of ``host`` in a background thread until the block ends; yields a
    :class:`RunningBroker`.

    ``data_dir`` is its log.dirs (default: a temporary directory, removed afterwards); pass the same one
    to a second ``running_broker`` to restart on the data. ``settings`` are broker settings by Kafka's
    names, as ``--override`` takes them, e.g. ``{"auto.create.topics.enable": False}``, over
    ``TEST_DEFAULTS``; ``KBROKER_*``
    environment variables are not read. With ``listeners`` among them, those listeners are served as
    given (port 0: a free one; :meth:`RunningBroker.address` tells which).
    """
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="kbroker-"))
        config = BrokerConfig.from_mapping({**TEST_DEFAULTS, **(settings or {})})
        if "listeners" in (settings or {}):  # the listeners as given (port 0: any free one)
            broker_settings = replace(settings_from_config(config), node_id=node_id, data_dir=data_dir)
        else:
            broker_settings = BrokerSettings(node_id=node_id, listeners=plaintext_listener(host, 0), data_dir=data_dir)
        registry = registry_address(config) if "schema.registry.listeners" in (settings or {}) else None
        if registry is not None:  # as given; else served on a free port when first asked for
            broker_settings = replace(broker_settings, registry_sockets=tuple(bind_listeners(*registry)))
        broker = Broker(broker_settings, config)
        started = threading.Event()
        state: dict = {}

        async def main():
            state["token"] = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                state["cancel"] = nursery.cancel_scope.cancel
                state["address"] = await nursery.start(broker.run)
                started.set()

        def run():
            try:
                trio.run(main)
            except BaseException as error:  # reported to the caller below
                state["error"] = error
            finally:
                started.set()

        thread = threading.Thread(target=run, name="kbroker", daemon=True)
        thread.start()
        if not started.wait(_START_TIMEOUT_S) or "address" not in state:
            raise RuntimeError(f"kbroker did not start: {state.get('error')!r}")
        try:
            yield RunningBroker(state["address"][0], state["address"][1], data_dir, broker, state["token"])
        finally:
            trio.from_thread.run_sync(state["cancel"], trio_token=state["token"])
            thread.join(_START_TIMEOUT_S)
