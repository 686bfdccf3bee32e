"""The broker host: a process of its own that runs the ``kbroker`` fixture's per-test brokers, so that neither a
broker's start and stop (some 10 ms of CPU together) nor its serving takes the test's process or its GIL.

    python -m kbroker.testing.broker_host [--settings JSON]

The pytest side (kbroker/testing/remote_broker.py) starts two, the first time a test asks for a broker, and
takes each test's broker from them in turn: while a test uses one host's broker, the other host stops the
broker of the test before and starts the one for the test after, on the machine's other core, at a lower
priority than the test's process (``NICENESS``, below). It prints one line, ``{"control":
"http://127.0.0.1:Q", "pid": N}``, once it serves, then takes commands, a line each, on its standard input
and answers on its standard output:

    take        answered, once a broker serves, with {"id", "bootstrap", "host", "port", "data_dir"}
                (or {"error": "..."}): the broker started ahead, or one started now
    drop ID     no answer: that broker is stopped in the background, its directory removed, and the
                next one started ahead

Each broker's own routes are served over HTTP under ``/brokers/{id}``: the test broker's
(docs/test-broker.md) and these for a RemoteBroker:

    GET    /health                                  {"status": "ok", "brokers": N}
    GET    /brokers/{id}/schema-registry            {"url"}: its schema registry, served from then on
    GET    /brokers/{id}/faults/{fault_id}          a fault as set (fired, remaining, active...)
    POST   /brokers/{id}/faults/{fault_id}/cancel   ends it

Fault routes that set a request fault (fail, delay, move-coordinator, make-unavailable) answer its ``id``
besides, for the two routes after them. The host stops (every broker stopped, every temporary directory
removed) when its standard input reaches its end (the parent closes the pipe, or dies), or on SIGTERM or
SIGINT.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import signal
import sys
import threading

from kbroker.testing.control_http import BadRequest, ControlApi, ControlServer, NotFound, _Fields, fault_json
from kbroker.testing.in_process_broker import BrokerPool, RunningBroker
from kbroker.testing.test_broker import _announce


class HostApi:
    """The host's brokers: taken and dropped by the commands on its input, each one's routes under
    /brokers/{id} over HTTP. One broker is started ahead: at the host's start, then at each drop."""

    def __init__(self, settings: dict | None) -> None:
        self._pool = BrokerPool(settings=settings)
        self._lock = threading.Lock()  # the table below: the HTTP server answers in threads of its own
        self._brokers: dict[str, HostedBrokerApi] = {}
        self._ids = itertools.count(1)
        with contextlib.suppress(Exception):  # settings it refuses: said when the first broker is taken
            self._pool.start_ahead()

    def answer(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, dict]:
        segments = path.strip("/").split("/")
        if segments == ["health"] and method == "GET":
            return 200, {"status": "ok", "brokers": len(self._brokers)}
        if segments[0] != "brokers" or len(segments) < 3:
            raise NotFound(f"no route {method} {path} (kbroker/testing/broker_host.py lists them)")
        return self._api(segments[1]).answer(method, "/" + "/".join(segments[2:]), query, body)

    def take(self) -> dict:
        running = self._pool.take()
        broker_id = str(next(self._ids))
        with self._lock:
            self._brokers[broker_id] = HostedBrokerApi(running)
        return {"id": broker_id, "bootstrap": running.bootstrap, "host": running.host, "port": running.port,
                "data_dir": running.data_dir}

    def drop(self, broker_id: str) -> None:
        with self._lock:
            api = self._brokers.pop(broker_id, None)
        if api is not None:  # an unknown one: dropped before, nothing to do
            self._pool.give_back(api.broker_running)

    def _api(self, broker_id: str) -> HostedBrokerApi:
        api = self._brokers.get(broker_id)
        if api is None:
            raise NotFound(f"no broker {broker_id} on this host (dropped, or never made)")
        return api

    def close(self) -> None:
        """Every broker stopped, the spare too, each waited for (bounded)."""
        with self._lock:
            hosted, self._brokers = list(self._brokers.values()), {}
        for api in hosted:
            self._pool.give_back(api.broker_running, start_next=False)
        self._pool.close()


class _Recorded(threading.local):
    fault = None  # the request fault that the current route's thread set last


class _RecordingFaults:
    """A RunningBroker's faults whose calls that set a request fault keep it (in ``recorded``, per thread)."""

    _SETTING = frozenset({"fail", "delay", "move_coordinator", "make_unavailable"})

    def __init__(self, faults, recorded: _Recorded) -> None:
        self._faults, self._recorded = faults, recorded

    def __getattr__(self, name: str):
        member = getattr(self._faults, name)
        if name not in self._SETTING:
            return member

        def setting(*args, **kwargs):
            self._recorded.fault = fault = member(*args, **kwargs)
            return fault
        return setting


class _RecordingRunning:
    """The RunningBroker as ControlApi's routes see it: itself, but for its faults (above)."""

    def __init__(self, running: RunningBroker, recorded: _Recorded) -> None:
        self._running, self._recorded = running, recorded

    @property
    def faults(self) -> _RecordingFaults:
        return _RecordingFaults(self._running.faults, self._recorded)

    def __getattr__(self, name: str):
        return getattr(self._running, name)


class HostedBrokerApi(ControlApi):
    """The test broker's routes over one hosted broker, and the ones a RemoteBroker needs besides: the schema
    registry's URL, a fault's state read and its cancel (the faults are kept by id)."""

    def __init__(self, running: RunningBroker) -> None:
        self._recorded = _Recorded()
        super().__init__(_RecordingRunning(running, self._recorded))
        self.broker_running = running
        self._faults_by_id: dict[str, object] = {}
        self._fault_ids = itertools.count(1)

    def _routes(self):
        return (*super()._routes(),
                ("GET", ("schema-registry",), self.schema_registry),
                ("GET", ("faults", "{fault_id}"), self.fault),
                ("POST", ("faults", "{fault_id}", "cancel"), self.cancel_fault))

    # The routes that set a request fault answer its id too.
    def fail(self, fields: _Fields) -> dict:
        return self._with_id(super().fail(fields))

    def delay(self, fields: _Fields) -> dict:
        return self._with_id(super().delay(fields))

    def move_coordinator(self, fields: _Fields) -> dict:
        return self._with_id(super().move_coordinator(fields))

    def make_unavailable(self, fields: _Fields) -> dict:
        return self._with_id(super().make_unavailable(fields))

    def _with_id(self, answer: dict) -> dict:
        fault, self._recorded.fault = self._recorded.fault, None
        if fault is not None and answer.get("fault") is not None:
            fault_id = str(next(self._fault_ids))
            self._faults_by_id[fault_id] = fault
            answer["fault"]["id"] = fault_id
        return answer

    # GET /schema-registry
    def schema_registry(self, query: dict) -> dict:
        if query:
            raise BadRequest(f"unknown query parameters {', '.join(sorted(query))}")
        return {"url": self.broker_running.schema_registry_url}

    # GET /faults/{fault_id}, POST /faults/{fault_id}/cancel
    def fault(self, fault_id: str, query: dict) -> dict:
        if query:
            raise BadRequest(f"unknown query parameters {', '.join(sorted(query))}")
        fault = self._fault(fault_id)
        return {"fault": self.broker_running.in_broker(lambda: {**fault_json(fault), "id": fault_id})}

    def cancel_fault(self, fault_id: str, fields: _Fields) -> dict:
        fields.finish()
        fault = self._fault(fault_id)
        self.broker_running.in_broker(fault.cancel)
        return {"ok": True}

    def _fault(self, fault_id: str):
        fault = self._faults_by_id.get(fault_id)
        if fault is None:
            raise NotFound(f"no fault {fault_id} on this broker")
        return fault


# -- the process ---------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbroker.testing.broker_host",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", default="{}", help="the brokers' settings by Kafka's names, as a JSON object")
    args = parser.parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = json.loads(args.settings)
    from kbroker.wire.schema import code_cache

    code_cache.open_cache()  # the codecs a last run compiled, as the kbroker command keeps them
    _lower_priority()
    answers = os.dup(1)  # the commands' answers; standard output itself goes to standard error after the first line
    api = HostApi(settings)
    try:
        control = ControlServer(api=api)
        _announce({"control": control.url, "pid": os.getpid()})
        for line in sys.stdin:
            command, _, argument = line.strip().partition(" ")
            if command == "take":
                os.write(answers, (json.dumps(_taken(api)) + "\n").encode())
            elif command == "drop":
                api.drop(argument)
    except _Stopped:
        pass
    finally:
        api.close()  # every broker stopped and its directory removed
        code_cache.save_cache()
    # Nothing is left to do that the interpreter's own shutdown or the control server's (which waits up to
    # its poll interval) would add to the parent's wait for this process: some 110 ms of a session's end.
    sys.stderr.flush()
    os._exit(0)


# How much lower a host's priority is than the test's process. Each host does its stop and start of a broker
# while the other host's broker serves a test, on a machine whose every core the test may be using (its
# Python thread, its client's threads, its broker): at the same priority that burst slowed the test's
# first requests and made librdkafka lose the race that costs a new client 100 ms (its bootstrap
# connection closed before its first leader query; bench/test_double_bench.py, 100 tests: median +4.6 ms
# over kbroker_session and 49 ms a test for the whole run at the same priority, +3.6 ms and 37 ms at 10).
# A host serves only the test that waits on it, so it runs when the test does not.
NICENESS = 10


def _lower_priority() -> None:
    try:
        os.nice(NICENESS)
    except (AttributeError, OSError):  # no nice (Windows): at the same priority
        pass


class _Stopped(Exception):
    """SIGTERM or SIGINT: the host stops as at the end of its input."""


def _stop(*_) -> None:
    raise _Stopped


def _taken(api: HostApi) -> dict:
    """A broker for the ``take`` command, or why there is none (said on the pytest side)."""
    try:
        return api.take()
    except Exception as error:  # noqa: BLE001 (any failure to start is the test's to see, in one line)
        return {"error": f"{type(error).__name__}: {error}"}


if __name__ == "__main__":
    sys.exit(main())
