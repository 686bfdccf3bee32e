"""The ``kbroker`` fixture's brokers as a test sees them: each runs in a broker host (kbroker/testing/broker_host.py),
a process of its own, and is reached here as a :class:`RemoteBroker`, with the members of a RunningBroker
that can be reached over HTTP.

A broker per test in the test's own process costs the test its start and its stop (some 10 ms of CPU
together, under the test's GIL even when done in a thread). :class:`BrokerHosts` keeps two hosts and takes
each test's broker from them in turn, so that while a test uses one host's broker the other host stops
the last test's broker and starts the next test's, on another core: a test pays for reading one line
from a pipe and writing one to it (bench/test_double_bench.py measures what it costs). This module
imports only the standard library and the blocking client ``create_topic`` uses (kbroker/tools/client.py):
the broker itself (trio and all) is never imported into the test's process.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import quote, urlencode, urlsplit

from kbroker.testing.topic_creation import CreatesTopics

_START_TIMEOUT_S = 60  # the host's first line: Python importing the broker, on a loaded machine
_STOP_TIMEOUT_S = 60  # every broker it holds stopped
_REQUEST_TIMEOUT_S = 90  # one control request (its routes wait on the broker for up to 60 s)


class BrokerHostError(RuntimeError):
    """The broker host failed, or answered a request with a failure of its own (a 5xx)."""


class BrokerHost:
    """A broker host process started by this one, until ``close()``. ``ask()`` has it make a broker ready (the
    one it started ahead, once it serves) and ``receive()`` takes that broker; ``drop()`` has it stop one in
    the background and start the next. It stops by itself when this process ends (its standard input, a
    pipe from here, closes)."""

    def __init__(self, settings: dict | None = None) -> None:
        self._log = tempfile.NamedTemporaryFile(prefix="kbroker-host-", suffix=".log", delete=False)  # its stderr
        self._process = subprocess.Popen(
            [sys.executable, "-m", "kbroker.testing.broker_host", "--settings", json.dumps(settings or {})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, close_fds=True)
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()  # one request at a time on the kept-alive connection
        self._address: tuple[str, int] | None = None
        self._asked = False
        self._unread = b""  # its output read and not yet taken as lines

    @property
    def pid(self) -> int:
        return self._process.pid

    def started(self) -> BrokerHost:
        """Once it serves (its first line read); raises BrokerHostError if it did not start."""
        if self._address is None:
            try:
                self.control = json.loads(self._line(_START_TIMEOUT_S, "start"))["control"]
            except BaseException:
                self.close()
                raise
            split = urlsplit(self.control)
            self._address = (split.hostname, split.port)
        return self

    def _line(self, timeout_s: float, waiting_for: str) -> str:
        """Its next line of output, read from the pipe here (a buffered reader could hold a second line
        where the wait for the pipe would not see it)."""
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            while b"\n" not in self._unread:
                if not selector.select(max(0.0, deadline - time.monotonic())):
                    raise BrokerHostError(f"the broker host did not {waiting_for} within {timeout_s} s{self._said()}")
                chunk = os.read(self._process.stdout.fileno(), 65536)
                if not chunk:
                    self._process.wait(_STOP_TIMEOUT_S)
                    raise BrokerHostError(f"the broker host exited with status {self._process.returncode}"
                                          f"{self._said()}")
                self._unread += chunk
        line, _, self._unread = self._unread.partition(b"\n")
        return line.decode()

    def _said(self) -> str:
        try:
            with open(self._log.name, errors="replace") as log:
                text = log.read()[-2000:]
        except OSError:
            return ""
        return f"; it said:\n{text}" if text.strip() else ""

    def _command(self, line: str) -> None:
        try:
            self._process.stdin.write(line.encode() + b"\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise BrokerHostError(f"the broker host is gone{self._said()}") from None

    def ask(self) -> None:
        """Have it make a broker ready for ``receive()`` (a start ahead of the test that will take it)."""
        if not self._asked:
            self._command("take")
            self._asked = True

    def receive(self) -> RemoteBroker:
        """The broker asked for (asked now if it was not), once it serves."""
        self.ask()
        self._asked = False
        made = json.loads(self._line(_START_TIMEOUT_S, "start a broker"))
        if "error" in made:
            raise BrokerHostError(f"the broker host could not start a broker: {made['error']}")
        return RemoteBroker(self, made["id"], made["host"], made["port"], made["data_dir"])

    def drop(self, broker: RemoteBroker) -> None:
        """Have it stop ``broker`` in the background, remove its directory and start the next one ahead."""
        self._command(f"drop {broker.id}")

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        """One request to the host; its JSON answer. A 400 raises ValueError, a 404 KeyError, else
        BrokerHostError, each with the host's one line."""
        payload = b"" if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(payload))}
        with self._lock:
            for attempt in (1, 2):  # a kept-alive connection the host closed meanwhile: once more, on a new one
                if self._connection is None:
                    self._connection = http.client.HTTPConnection(*self._address, timeout=_REQUEST_TIMEOUT_S)
                try:
                    self._connection.request(method, path, payload, headers)
                    response = self._connection.getresponse()
                    status, text = response.status, response.read()
                    break
                except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                    self._connection.close()
                    self._connection = None
                    if attempt == 2 or self._process.poll() is not None:
                        raise BrokerHostError(f"the broker host is gone{self._said()}") from None
        answer = json.loads(text) if text else {}
        if status == 200:
            return answer
        message = answer.get("error", f"status {status}")
        if status == 400:
            raise ValueError(message)
        if status == 404:
            raise KeyError(message)
        raise BrokerHostError(f"{method} {path}: {message}")

    def close(self) -> None:
        """Stop the host and every broker it holds (its input closed, then waited for, bounded)."""
        self.end_input()
        if self._process.stdout.closed:  # closed before
            return
        try:
            self._process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(_STOP_TIMEOUT_S)
        finally:
            self._process.stdout.close()
            self._log.close()
            os.unlink(self._log.name)

    def end_input(self) -> None:
        """Close its input: it begins to stop (``close()`` waits for it)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._process.stdin is not None and not self._process.stdin.closed:
            try:
                self._process.stdin.close()
            except OSError:  # it is gone already
                pass


class BrokerHosts:
    """The ``kbroker`` fixture's brokers: ``take()`` gives a broker that serves, from each of ``count`` hosts in
    turn, and ``give_back()`` has its host stop it and start that host's next one, while the other host's
    broker serves the next test. Both hosts start at once, in parallel; ``close()`` stops them."""

    def __init__(self, settings: dict | None = None, count: int = 2) -> None:
        self._hosts: list[BrokerHost] = []
        try:
            for _ in range(count):
                self._hosts.append(BrokerHost(settings))
            for host in self._hosts:
                host.started().ask()
        except BaseException:
            self.close()
            raise
        self._turn = 0

    def take(self) -> RemoteBroker:
        host = self._hosts[self._turn]
        self._turn = (self._turn + 1) % len(self._hosts)
        return host.receive()

    def give_back(self, broker: RemoteBroker) -> None:
        broker.host_process.drop(broker)
        broker.host_process.ask()

    def close(self) -> None:
        for host in self._hosts:  # both stop at once
            host.end_input()
        for host in self._hosts:
            host.close()
        self._hosts = []


class RemoteBroker(CreatesTopics):
    """A broker in a broker host, as a test uses it: ``bootstrap`` ("host:port", for bootstrap.servers),
    ``host``, ``port``, ``data_dir`` (in the host's file system: the same machine), ``create_topic``
    (from here, as a client), ``faults``, ``advance_time``, ``records``, ``group``, ``committed_offsets``,
    ``transactions``, ``schemas``, ``reset``, ``restart`` and ``schema_registry_url``, as a RunningBroker
    has them. What a RunningBroker hands out of the broker itself (``broker``, ``in_broker``) is not
    here: the broker is in another process."""

    def __init__(self, host_process: BrokerHost, broker_id: str, host: str, port: int, data_dir: str) -> None:
        self.host_process, self.id = host_process, broker_id
        self.host, self.port, self.data_dir = host, port, data_dir
        self._prefix = f"/brokers/{quote(broker_id, safe='')}"

    def __repr__(self) -> str:
        return f"RemoteBroker(id={self.id!r}, bootstrap={self.bootstrap!r}, data_dir={self.data_dir!r})"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _call(self, method: str, path: str, body: dict | None = None, query: dict | None = None) -> dict:
        if query:
            path += "?" + urlencode(query)
        return self.host_process.request(method, self._prefix + path, body)

    # -- what it cannot give -----------------------------------------------------------------------------------

    @property
    def broker(self):
        raise AttributeError(_IN_ANOTHER_PROCESS.format("broker"))

    @property
    def in_broker(self):
        raise AttributeError(_IN_ANOTHER_PROCESS.format("in_broker"))

    # -- as a RunningBroker --------------------------------------------------------------------------------------

    @property
    def schema_registry_url(self) -> str:
        """The URL of its schema registry (Confluent's REST API), served from the first time this is asked."""
        return self._call("GET", "/schema-registry")["url"]

    @property
    def faults(self) -> RemoteFaults:
        """Its faults on demand, as kbroker.faults.Faults takes them; each call is one request to the host."""
        return RemoteFaults(self)

    def advance_time(self, ms: int) -> None:
        """Move the broker's clock ``ms`` ahead; what falls due meanwhile happens before this returns."""
        self._call("POST", "/time/advance", {"ms": ms})

    def records(self, topic: str, partition: int | None = None, *, from_offset: int = 0,
                max_records: int = 10_000) -> list[dict]:
        """What ``topic`` (or one partition) holds up to its high watermark, as a read_committed consumer sees it."""
        query = {"from_offset": from_offset, "max_records": max_records}
        if partition is not None:
            query["partition"] = partition
        answer = self._call("GET", f"/topics/{quote(topic, safe='')}/records", query=query)
        return [_record(record) for record in answer["records"]]

    def group(self, group_id: str) -> dict:
        """A group's type, state, members with their assignments, and committed offsets."""
        answer = self._call("GET", f"/groups/{quote(group_id, safe='')}")
        answer["committed"] = _offsets(answer["committed"])
        return answer

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """A group's committed offsets by (topic, partition)."""
        return _offsets(self._call("GET", f"/groups/{quote(group_id, safe='')}/offsets")["offsets"])

    def transactions(self) -> list[dict]:
        """The transactions the coordinator knows: id, producer id and epoch, state, partitions."""
        found = self._call("GET", "/transactions")["transactions"]
        for transaction in found:
            transaction["partitions"] = [(each["topic"], each["partition"]) for each in transaction["partitions"]]
        return found

    def schemas(self) -> dict[str, list[dict]]:
        """The schema registry's subjects and their versions."""
        return self._call("GET", "/schemas")["subjects"]

    def reset(self) -> None:
        """Empty the broker for the next test, on the same port (kbroker/testing/reset.py)."""
        self._call("POST", "/reset", {})

    def restart(self) -> None:
        """Stop the broker and start it again on the same data directory and ports; returns once it serves."""
        self._call("POST", "/restart", {})


_IN_ANOTHER_PROCESS = ("RemoteBroker.{}: the kbroker fixture's broker runs in another process (the broker host); "
                       "for the broker object itself use kbroker_session, kbroker_clean or kbroker.testing.running_broker()")


class RemoteFaults:
    """A hosted broker's faults (kbroker/faults.py's Faults), each call one request to the host; the request
    faults set come back as :class:`RemoteFault` handles."""

    def __init__(self, broker: RemoteBroker) -> None:
        self._broker = broker

    def _post(self, route: str, body: dict) -> dict:
        return self._broker._call("POST", f"/faults/{route}", body)

    def _fault(self, answer: dict) -> RemoteFault:
        return RemoteFault(self._broker, answer["fault"])

    def fail(self, api: str, error: str | int, count: int | None = 1, *, topic: str | None = None,
             partition: int | None = None, group: str | None = None,
             transactional_id: str | None = None) -> RemoteFault:
        body = {"api": api, "error": error, "count": count,
                **_given(topic=topic, partition=partition, group=group, transactional_id=transactional_id)}
        return self._fault(self._post("fail", body))

    def delay(self, api: str, ms: int, count: int | None = 1, *, topic: str | None = None,
              partition: int | None = None, group: str | None = None,
              transactional_id: str | None = None) -> RemoteFault:
        body = {"api": api, "ms": ms, "count": count,
                **_given(topic=topic, partition=partition, group=group, transactional_id=transactional_id)}
        return self._fault(self._post("delay", body))

    def move_coordinator(self, *, group: str | None = None, transactional_id: str | None = None) -> RemoteFault:
        return self._fault(self._post("move-coordinator", _given(group=group, transactional_id=transactional_id)))

    def make_unavailable(self, topic: str, partition: int) -> RemoteFault:
        return self._fault(self._post("make-unavailable", {"topic": topic, "partition": partition}))

    @property
    def active(self) -> list[dict]:
        """The request faults still acting, each as a dict (kind, api, error, remaining, fired...)."""
        return self._broker._call("GET", "/faults")["faults"]

    def close_connections(self, client_id: str | None = None) -> int:
        return self._post("close-connections", {"client_id": client_id})["closed"]

    def rebalance(self, group: str) -> bool:
        return self._post("rebalance", {"group": group})["rebalanced"]

    def fence_producer(self, transactional_id: str) -> int:
        return self._post("fence-producer", {"transactional_id": transactional_id})["producer_epoch"]

    def disk_full(self, full: bool = True) -> None:
        self._post("disk-full", {"full": full})

    def clear(self) -> None:
        self._post("clear", {})


class RemoteFault:
    """A request fault set on a hosted broker: what it acts on as attributes (kind, api, error, ms, topic,
    partition, group, transactional_id), and ``fired``, ``remaining`` and ``active`` read from the broker
    each time they are asked; ``cancel()`` ends it."""

    def __init__(self, broker: RemoteBroker, state: dict) -> None:
        self._broker, self.id = broker, state["id"]
        for name in ("kind", "api", "error", "ms", "topic", "partition", "group", "transactional_id"):
            setattr(self, name, state.get(name))

    def __repr__(self) -> str:
        return f"RemoteFault(id={self.id!r}, kind={self.kind!r}, api={self.api!r}, error={self.error!r})"

    def _state(self) -> dict:
        return self._broker._call("GET", f"/faults/{self.id}")["fault"]

    @property
    def fired(self) -> int:
        return self._state()["fired"]

    @property
    def remaining(self) -> int | None:
        return self._state()["remaining"]

    @property
    def active(self) -> bool:
        return self._state()["active"]

    def cancel(self) -> None:
        self._broker._call("POST", f"/faults/{self.id}/cancel", {})


def _given(**values) -> dict:
    return {name: value for name, value in values.items() if value is not None}


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _record(record: dict) -> dict:
    """A record of the records route, as RunningBroker.records gives it: key, value and headers as bytes."""
    return {**record, "key": _bytes(record["key"]), "value": _bytes(record["value"]),
            "headers": [(header["key"], _bytes(header["value"])) for header in record["headers"]]}


def _offsets(listed: list[dict]) -> dict[tuple[str, int], int]:
    return {(each["topic"], each["partition"]): each["offset"] for each in listed}

