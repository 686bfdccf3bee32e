"""A broker in this process, on a free loopback port, in a thread of its own, for as long as a block runs.

The pytest plugin's fixtures (kbroker/testing/__init__.py) import this module only when a test asks
for a broker: it brings in trio and the whole broker.

Each broker is built and run in a thread of its own (``_BrokerThread``), so that one can be started
while the caller does something else, and stopped without waiting: ``BrokerPool`` starts the next
broker before it is asked for and stops the last one behind it (the broker host's, for the ``kbroker``
fixture: kbroker/testing/broker_host.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field, replace

import trio

from kbroker.broker import Broker, BrokerSettings, plaintext_listener, settings_from_config
from kbroker.config import BrokerConfig
from kbroker.listen import bind_listeners
from kbroker.log.clock import OffsetClock
from kbroker.schemas.service import registry_address
from kbroker.testing.topic_creation import CreatesTopics

_START_TIMEOUT_S = 30
_STOP_TIMEOUT_S = 30


@dataclass
class RunningBroker(CreatesTopics):
    """A broker serving in this process: ``bootstrap`` ("host:port", for bootstrap.servers), ``host``,
    ``port``, ``data_dir`` (its log.dirs, removed afterwards unless you gave it), ``schema_registry_url``
    and the ``broker`` itself (after ``restart()``, the new one)."""

    host: str
    port: int
    data_dir: str
    broker: Broker
    trio_token: object = None  # the broker's event loop, for calls into it
    _thread: _BrokerThread | None = field(default=None, repr=False)  # what runs it (restart, stop)

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

    # -- what a test can ask of it (issue 43): faults, time, a look inside, a reset -------------------------

    def in_broker(self, function, *args):
        """``function(*args)`` run in the broker's event loop (a coroutine function is awaited); its result."""
        import inspect as _inspect

        if _inspect.iscoroutinefunction(function):
            return trio.from_thread.run(function, *args, trio_token=self.trio_token)
        return trio.from_thread.run_sync(function, *args, trio_token=self.trio_token)

    @property
    def faults(self):
        """The broker's faults on demand (kbroker/faults.py), callable from the test's thread."""
        from kbroker.faults import ThreadedFaults

        return ThreadedFaults(self.broker.faults, self.in_broker)

    def advance_time(self, ms: int) -> None:
        """Move the broker's clock ``ms`` ahead; what falls due meanwhile (session and transaction timeouts,
        producer-id expiry, retention, delayed deletes, share-record locks) happens before this returns."""
        from kbroker.testing.time_travel import advance

        self.in_broker(advance, self.broker, ms)

    def records(self, topic: str, partition: int | None = None, *, from_offset: int = 0,
                max_records: int = 10_000) -> list[dict]:
        """What ``topic`` (or one partition of it) holds up to its high watermark, as a read_committed
        consumer would see it: dicts of topic, partition, offset, timestamp, key, value, headers."""
        from kbroker.testing.inspect import records

        return self.in_broker(records, self.broker, topic, partition, from_offset, max_records)

    def group(self, group_id: str) -> dict:
        """A group's type, state, members with their assignments, and committed offsets."""
        from kbroker.testing.inspect import group

        return self.in_broker(group, self.broker, group_id)

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """A group's committed offsets by (topic, partition)."""
        from kbroker.testing.inspect import committed_offsets

        return self.in_broker(committed_offsets, self.broker, group_id)

    def transactions(self) -> list[dict]:
        """The transactions the coordinator knows: id, producer id and epoch, state, partitions."""
        from kbroker.testing.inspect import transactions

        return self.in_broker(transactions, self.broker)

    def schemas(self) -> dict[str, list[dict]]:
        """The schema registry's subjects and their versions."""
        from kbroker.testing.inspect import schemas

        return self.in_broker(schemas, self.broker)

    def reset(self) -> None:
        """Empty the broker (topics, groups, offsets, transactions, ACLs, quotas, SCRAM users, dynamic
        configs, schemas, faults) for the next test, keeping it running on the same port; what stays,
        and why no client can tell, is in kbroker/testing/reset.py."""
        from kbroker.testing.reset import reset

        self.in_broker(reset, self.broker)

    def restart(self) -> None:
        """Stop the broker (its logs flushed and checkpointed, as at the end of its block) and start a new
        one in its place: the same data directory, the same ports (Kafka listeners, and a schema registry
        already served), the same settings and clock (time a test moved ahead stays ahead). Returns once
        the new one serves. Clients reconnect by themselves; what was acknowledged (records, committed
        offsets, groups, transactions, topics and every other metadata) is read back from the directory.
        ``broker`` and ``trio_token`` then name the new broker."""
        old = self._thread
        ports = dict(self.broker.ports)
        registry = self.broker.schema_registry
        served_on_demand = registry is not None and not old.settings.registry_sockets
        old.stop(keep_data=True)
        # Bound again at once: a client reconnecting meanwhile waits in the backlog (kbroker/listen.py).
        settings = replace(old.settings, listeners=tuple(
            replace(listener, port=(port := ports[listener.name]), sockets=tuple(bind_listeners(listener.host, port)))
            for listener in old.settings.listeners))
        if registry is not None and not served_on_demand:
            host = old.settings.registry_sockets[0].getsockname()[0]
            settings = replace(settings, registry_sockets=tuple(bind_listeners(host, registry[1])))
        thread = _BrokerThread(settings, old.config, old.clock, owns_data_dir=old.owns_data_dir).start()
        restarted = thread.running()
        self.broker, self.trio_token, self._thread = restarted.broker, restarted.trio_token, thread
        if served_on_demand:
            self.in_broker(self.broker.serve_schema_registry, registry[0], registry[1])

    def stop(self, *, wait: bool = True) -> None:
        """Stop the broker and, unless it was given, remove its data directory; with ``wait=False``,
        return at once and let that finish in its thread (``BrokerPool`` joins it later)."""
        self._thread.stop(wait=wait)

    @property
    def stopped(self) -> bool:
        """Whether its thread has ended (the broker stopped, its temporary directory removed)."""
        return self._thread.done


# Where a test broker differs from Kafka's defaults, and why. A new group's first rebalance waits
# 300 ms, not Kafka's 3 s, for members that subscribe together: long enough that they form one
# generation (kafka-python 3.0.12 can hang when a lone first member leads; issue 31), short
# enough that a test's first poll is not late.
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": 300}


@contextlib.contextmanager
def running_broker(data_dir: str | None = None, *, host: str = "127.0.0.1", node_id: int = 1, settings: dict | None = None):
    """Run a broker on a free port of ``host`` in a background thread until the block ends; yields a
    :class:`RunningBroker`.

    ``data_dir`` is its log.dirs (default: a temporary directory, removed afterwards, in memory-backed storage
    where the machine has it: ``memory_backed_directory()``); pass the same one
    to a second ``running_broker`` to restart on the data, or call :meth:`RunningBroker.restart`.
    ``settings`` are broker settings by Kafka's names, as ``--override`` takes them, e.g.
    ``{"auto.create.topics.enable": False}``, over ``TEST_DEFAULTS``; ``KBROKER_*``
    environment variables are not read. With ``listeners`` among them, those listeners are served as
    given (port 0: a free one; :meth:`RunningBroker.address` tells which).
    """
    running = start_broker(data_dir, host=host, node_id=node_id, settings=settings).running()
    try:
        yield running
    finally:
        running.stop()


# Where a test broker's temporary data directory goes when the machine has memory-backed storage with room
# (Linux's tmpfs at /dev/shm): its files and fsyncs are real, but an fsync there waits for no disk, and a
# broker per test does several (its metadata log's, each topic's, each acknowledged produce's: 0.3-2 ms each
# on a VM's disk). Less room than this (a container's 64 MiB /dev/shm) and the usual temporary directory is
# taken instead, so a test that writes much never runs out of it.
MEMORY_BACKED = "/dev/shm"
MEMORY_BACKED_ROOM = 1 << 30


def memory_backed_directory() -> str | None:
    """``MEMORY_BACKED`` if it is there with ``MEMORY_BACKED_ROOM`` free, else None (the usual temporary
    directory)."""
    try:
        room = os.statvfs(MEMORY_BACKED)
    except (OSError, AttributeError):  # no such directory; no statvfs (Windows)
        return None
    return MEMORY_BACKED if room.f_bavail * room.f_frsize >= MEMORY_BACKED_ROOM and os.access(MEMORY_BACKED, os.W_OK) \
        else None


def start_broker(data_dir: str | None = None, *, host: str = "127.0.0.1", node_id: int = 1,
                 settings: dict | None = None) -> _BrokerThread:
    """Begin starting a broker as :func:`running_broker` does and return at once; its ``running()`` waits
    until it serves and gives the :class:`RunningBroker`, to be stopped with ``stop()``."""
    owns_data_dir = data_dir is None
    if data_dir is None:
        data_dir = tempfile.mkdtemp(prefix="kbroker-", dir=memory_backed_directory())
    try:
        config = BrokerConfig.from_mapping({**TEST_DEFAULTS, **(settings or {})})
        if "listeners" in (settings or {}):  # the listeners as given (port 0: any free one)
            broker_settings = replace(settings_from_config(config), node_id=node_id, data_dir=data_dir)
        else:
            broker_settings = BrokerSettings(node_id=node_id, listeners=plaintext_listener(host, 0), data_dir=data_dir)
        registry = registry_address(config) if "schema.registry.listeners" in (settings or {}) else None
        if registry is not None:  # as given; else served on a free port when first asked for
            broker_settings = replace(broker_settings, registry_sockets=tuple(bind_listeners(*registry)))
    except BaseException:
        if owns_data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
        raise
    return _BrokerThread(broker_settings, config, OffsetClock(), owns_data_dir=owns_data_dir).start()


class _BrokerThread:
    """One :class:`Broker` built and served in a thread of its own, until stopped. The thread removes the
    temporary data directory it was given once the broker has stopped (unless told to keep it, for a
    restart), so that a stop need not be waited for."""

    def __init__(self, settings: BrokerSettings, config: BrokerConfig, clock: OffsetClock, *,
                 owns_data_dir: bool) -> None:
        self.settings, self.config, self.clock = settings, config, clock
        self.owns_data_dir = owns_data_dir  # a temporary directory: removed when the broker stops for good
        self._keep_data = False
        self._started = threading.Event()
        self._state: dict = {}
        self._thread = threading.Thread(target=self._run, name="kbroker", daemon=True)

    def start(self) -> _BrokerThread:
        self._thread.start()
        return self

    def running(self) -> RunningBroker:
        """Once the broker serves: it, as a RunningBroker. The broker's own error if it refused to start (a
        ConfigError: its data directory in use, say), else RuntimeError if it did not start in time."""
        if not self._started.wait(_START_TIMEOUT_S) or "address" not in self._state:
            self.stop()
            if isinstance(error := self._state.get("error"), Exception):
                raise error
            raise RuntimeError(f"kbroker did not start: {error!r}")
        host, port = self._state["address"]
        return RunningBroker(host, port, self.settings.data_dir, self._state["broker"], self._state["token"], self)

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def stop(self, *, wait: bool = True, keep_data: bool = False) -> None:
        """Cancel the broker's run (one still starting, once it serves); with ``wait``, return once its
        thread has ended."""
        self._keep_data = keep_data  # read by the thread only after the broker stopped
        self._state["stop"] = True  # before "cancel" is read: _serve sets that before it reads this
        if (broker := self._state.get("broker")) is not None:
            broker.discards_data = self._discards_data
        cancel = self._state.get("cancel")
        if cancel is not None:
            with contextlib.suppress(trio.RunFinishedError):
                self._state["token"].run_sync_soon(cancel)
        if wait:
            self.join(_STOP_TIMEOUT_S)

    @property
    def _discards_data(self) -> bool:
        """The directory goes once the broker stops: nothing need be flushed or checkpointed at the stop."""
        return self.owns_data_dir and not self._keep_data

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise RuntimeError(f"kbroker on {self.settings.data_dir} did not stop within {timeout_s} s")

    def _run(self) -> None:
        try:
            broker = self._state["broker"] = Broker(self.settings, self.config, clock=self.clock)
            broker.discards_data = self._state.get("stop", False) and self._discards_data  # stopped meanwhile
            trio.run(self._serve, broker)
        except BaseException as error:  # reported by running()
            self._state["error"] = error
        finally:
            self._started.set()
            if self.owns_data_dir and not self._keep_data:
                shutil.rmtree(self.settings.data_dir, ignore_errors=True)

    async def _serve(self, broker: Broker) -> None:
        self._state["token"] = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._state["cancel"] = nursery.cancel_scope.cancel
            if self._state.get("stop"):
                nursery.cancel_scope.cancel()
            self._state["address"] = await nursery.start(broker.run)
            self._started.set()


class BrokerPool:
    """Brokers one at a time, each started before it is asked for: the first at ``start_ahead()``, the
    next when the last is given back. ``take()`` gives the broker started ahead (or starts one and waits
    for it); ``give_back()`` stops a broker without waiting for it and starts the next; ``close()`` stops
    the spare and waits for every stop (bounded). ``settings`` as :func:`running_broker` takes them.

    The broker host (kbroker/testing/broker_host.py) keeps one: the next test's broker starts while the
    other host's broker serves the test, so that its start never competes with a broker in use here."""

    def __init__(self, settings: dict | None = None) -> None:
        self.settings = settings
        self._spare: _BrokerThread | None = None
        self._stopping: list[RunningBroker] = []

    def start_ahead(self) -> None:
        """Start the next broker now, if none is started yet."""
        if self._spare is None:
            self._spare = start_broker(settings=self.settings)

    def take(self) -> RunningBroker:
        starting, self._spare = self._spare, None
        return (starting or start_broker(settings=self.settings)).running()

    def give_back(self, running: RunningBroker, *, start_next: bool = True) -> None:
        running.stop(wait=False)
        self._stopping = [stopping for stopping in self._stopping if not stopping.stopped] + [running]
        if start_next:
            self.start_ahead()

    def close(self) -> None:
        if self._spare is not None:
            self._spare.stop(wait=False)
            self._spare.join(_START_TIMEOUT_S + _STOP_TIMEOUT_S)  # it may still be starting
            self._spare = None
        for running in self._stopping:
            running._thread.join(_STOP_TIMEOUT_S)
        self._stopping = []
