"""The test broker's control API: faults, time, reset and a look inside, as JSON over HTTP, for tests
written in any language (``kbroker test-broker``, kbroker/testing/test_broker.py; docs/test-broker.md
documents every route).

Each route calls one member of a :class:`~kbroker.testing.in_process_broker.RunningBroker`, the same
members a Python test calls, from the thread that serves the request. Those members are made for calls
from a thread other than the broker's (each reaches the broker's trio loop with ``trio.from_thread``),
so the server is the standard library's ``ThreadingHTTPServer`` in a thread of its own: it imports in a
few milliseconds, where the broker's HTTP stack (hypercorn and Starlette, kbroker/http/) costs some
100 ms of a start and serves on the broker's loop, from which those members cannot be called.

Bad input is a 400 with one JSON line ``{"error": "..."}``; an unknown path a 404, another method a
405; a failure inside the broker a 500 naming it, and a call that outlasts its bound a 504. Nothing a
client sends stops the server. It listens on loopback only.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit

BODY_BYTES_MAX = 64 * 1024
CONNECTIONS_MAX = 32  # served at once; one more is answered 503 and closed
IDLE_CONNECTION_S = 30  # a kept-alive connection silent this long is closed
CALL_TIMEOUT_S = 60  # the longest a route waits on the broker (a restart, a reset of a large broker)


class BadRequest(Exception):
    """What the client sent is wrong; the message says what (a 400)."""


class NotFound(Exception):
    """No such route or no such thing (a 404)."""


class _Answer(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# -- reading a request's JSON --------------------------------------------------------------------------------

class _Fields:
    """A request's JSON object, read field by field; what is left unread at the end is an unknown field."""

    def __init__(self, route: str, values: dict) -> None:
        self.route = route
        self.values = dict(values)

    def required(self, name: str, kind, describe: str):
        if name not in self.values:
            raise BadRequest(f"{self.route}: {name} is required ({describe})")
        return self._checked(name, self.values.pop(name), kind, describe)

    def optional(self, name: str, kind, describe: str, *, nullable: bool = False):
        """The field's value, or ``_ABSENT`` when it was not sent (null is a value where ``nullable``)."""
        if name not in self.values:
            return _ABSENT
        value = self.values.pop(name)
        if value is None and nullable:
            return None
        return self._checked(name, value, kind, describe)

    def _checked(self, name: str, value, kind, describe: str):
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise BadRequest(f"{self.route}: {name} must be an integer ({describe}), got {json.dumps(value)}")
        if kind is not int and not isinstance(value, kind):
            raise BadRequest(f"{self.route}: {name} must be {describe}, got {json.dumps(value)}")
        return value

    def finish(self) -> None:
        if self.values:
            raise BadRequest(f"{self.route}: unknown field{'s' if len(self.values) > 1 else ''} "
                             f"{', '.join(sorted(self.values))}")


_ABSENT = object()

# The fields that narrow a fault to part of the requests of its API (as ``Faults.fail`` takes them).
_MATCHING = (("topic", str, "a topic name"), ("partition", int, "a partition number"),
             ("group", str, "a group id"), ("transactional_id", str, "a transactional id"))


def _matching(fields: _Fields) -> dict:
    found = {}
    for name, kind, describe in _MATCHING:
        value = fields.optional(name, kind, describe)
        if value is not _ABSENT:
            found[name] = value
    return found


def _count(fields: _Fields) -> dict:
    """``count``: absent is the fault's default (1), null is until cleared, else at least 1."""
    count = fields.optional("count", int, "how many requests, or null for until cleared", nullable=True)
    if count is _ABSENT:
        return {}
    if count is not None and count < 1:
        raise BadRequest(f"{fields.route}: count must be at least 1, or null for until cleared")
    return {"count": count}


def _query_int(query: dict, name: str, default, minimum: int):
    text = query.pop(name, None)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {text!r}") from None
    if value < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {value}")
    return value


# -- what the broker returns, as JSON ------------------------------------------------------------------------

def _base64(value):
    return None if value is None else base64.b64encode(bytes(value)).decode("ascii")


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray, memoryview)) else value


def record_json(record: dict) -> dict:
    """One record of ``RunningBroker.records``: key, value and header values as base64 (null stays null)."""
    return {"topic": record["topic"], "partition": record["partition"], "offset": record["offset"],
            "timestamp": record["timestamp"], "key": _base64(record["key"]), "value": _base64(record["value"]),
            "headers": [{"key": _text(key), "value": _base64(value)} for key, value in record.get("headers", ())],
            "transactional": bool(record.get("transactional", False))}


def offsets_json(committed: dict) -> list[dict]:
    """``{(topic, partition): offset}`` as a list sorted by topic and partition."""
    return [{"topic": topic, "partition": partition, "offset": offset}
            for (topic, partition), offset in sorted(committed.items())]


def group_json(group: dict) -> dict:
    answer = {key: plain(value) for key, value in group.items() if key != "committed"}
    answer["committed"] = offsets_json(group.get("committed") or {})
    return answer


def transaction_json(transaction: dict) -> dict:
    answer = {key: plain(value) for key, value in transaction.items() if key != "partitions"}
    answer["partitions"] = [{"topic": topic, "partition": partition}
                            for topic, partition in transaction.get("partitions") or ()]
    return answer


_FAULT_FIELDS = ("kind", "api", "error", "ms", "remaining", "topic", "partition", "group", "transactional_id",
                 "fired", "active")


def fault_json(fault) -> dict | None:
    """A request fault as set (kbroker.faults.Fault): what it acts on, how many more times (``remaining``, null:
    until cleared), how many times it acted so far (``fired``)."""
    if fault is None:
        return None
    return {name: plain(getattr(fault, name)) for name in _FAULT_FIELDS if hasattr(fault, name)}


def plain(value):
    """``value`` as JSON can carry it: bytes as base64, tuples as lists, enums by name, dataclasses as objects,
    mapping keys as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _base64(value)
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {(key if isinstance(key, str) else str(plain(key))): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(item) for item in value]
    return str(value)


# -- the routes ----------------------------------------------------------------------------------------------

class ControlApi:
    """The routes over one RunningBroker: ``answer(method, path, query, body) -> (status, JSON object)``."""

    def __init__(self, running) -> None:
        self.running = running

    def answer(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, dict]:
        segments = [unquote(segment) for segment in path.strip("/").split("/")] if path.strip("/") else []
        for route_method, pattern, handler in self._routes():
            arguments = _match(pattern, segments)
            if arguments is None:
                continue
            if route_method != method:
                allowed = [m for m, p, _ in self._routes() if _match(p, segments) is not None]
                raise _Answer(405, f"{method} {path}: use {' or '.join(allowed)}")
            route = f"{method} /{'/'.join(pattern)}"
            if method == "GET":
                return 200, handler(*arguments, dict(query))
            return 200, handler(*arguments, _Fields(route, body or {}))
        raise NotFound(f"no route {method} {path} (kbroker's docs/test-broker.md lists them)")

    def _routes(self):
        return (
            ("GET", ("health",), self.health),
            ("GET", ("faults",), self.active_faults),
            ("POST", ("faults", "fail"), self.fail),
            ("POST", ("faults", "delay"), self.delay),
            ("POST", ("faults", "close-connections"), self.close_connections),
            ("POST", ("faults", "move-coordinator"), self.move_coordinator),
            ("POST", ("faults", "make-unavailable"), self.make_unavailable),
            ("POST", ("faults", "rebalance"), self.rebalance),
            ("POST", ("faults", "fence-producer"), self.fence_producer),
            ("POST", ("faults", "disk-full"), self.disk_full),
            ("POST", ("faults", "clear"), self.clear),
            ("POST", ("time", "advance"), self.advance_time),
            ("POST", ("reset",), self.reset),
            ("POST", ("restart",), self.restart),
            ("GET", ("topics", "{topic}", "records"), self.records),
            ("GET", ("groups", "{group_id}"), self.group),
            ("GET", ("groups", "{group_id}", "offsets"), self.committed_offsets),
            ("GET", ("transactions",), self.transactions),
            ("GET", ("schemas",), self.schemas),
        )

    # GET /health
    def health(self, query: dict) -> dict:
        _no_query(query)
        return {"status": "ok", "bootstrap": self.running.bootstrap}

    # POST /faults/...
    def fail(self, fields: _Fields) -> dict:
        api = fields.required("api", str, "an API name, e.g. Produce")
        error = fields.required("error", (str, int), "an error name or number, e.g. NOT_LEADER_OR_FOLLOWER")
        if isinstance(error, bool):
            raise BadRequest(f"{fields.route}: error must be an error name or number")
        options = {**_count(fields), **_matching(fields)}
        fields.finish()
        return {"ok": True, "fault": fault_json(self.running.faults.fail(api, error, **options))}

    def delay(self, fields: _Fields) -> dict:
        api = fields.required("api", str, "an API name, e.g. Fetch")
        ms = fields.required("ms", int, "milliseconds to hold each answer back")
        if ms < 0:
            raise BadRequest(f"{fields.route}: ms must be at least 0")
        options = {**_count(fields), **_matching(fields)}
        fields.finish()
        return {"ok": True, "fault": fault_json(self.running.faults.delay(api, ms=ms, **options))}

    def close_connections(self, fields: _Fields) -> dict:
        client_id = fields.optional("client_id", str, "a client id", nullable=True)
        fields.finish()
        closed = self.running.faults.close_connections(client_id=None if client_id is _ABSENT else client_id)
        return {"ok": True, "closed": closed if isinstance(closed, int) else plain(closed)}

    def move_coordinator(self, fields: _Fields) -> dict:
        group = fields.optional("group", str, "a group id")
        transactional_id = fields.optional("transactional_id", str, "a transactional id")
        fields.finish()
        if (group is _ABSENT) == (transactional_id is _ABSENT):
            raise BadRequest(f"{fields.route}: give exactly one of group and transactional_id")
        if group is not _ABSENT:
            fault = self.running.faults.move_coordinator(group=group)
        else:
            fault = self.running.faults.move_coordinator(transactional_id=transactional_id)
        return {"ok": True, "fault": fault_json(fault)}

    def make_unavailable(self, fields: _Fields) -> dict:
        topic = fields.required("topic", str, "a topic name")
        partition = fields.required("partition", int, "a partition number")
        fields.finish()
        return {"ok": True, "fault": fault_json(self.running.faults.make_unavailable(topic, partition))}

    def rebalance(self, fields: _Fields) -> dict:
        group = fields.required("group", str, "a group id")
        fields.finish()
        return {"ok": True, "rebalanced": bool(self.running.faults.rebalance(group))}

    def fence_producer(self, fields: _Fields) -> dict:
        transactional_id = fields.required("transactional_id", str, "a transactional id")
        fields.finish()
        return {"ok": True, "producer_epoch": plain(self.running.faults.fence_producer(transactional_id))}

    def disk_full(self, fields: _Fields) -> dict:
        full = fields.required("full", bool, "true or false")
        fields.finish()
        self.running.faults.disk_full(full)
        return {"ok": True}

    def clear(self, fields: _Fields) -> dict:
        fields.finish()
        self.running.faults.clear()
        return {"ok": True}

    # GET /faults
    def active_faults(self, query: dict) -> dict:
        _no_query(query)
        return {"faults": [fault_json(fault) for fault in self.running.faults.active]}

    # POST /time/advance, /reset, /restart
    def advance_time(self, fields: _Fields) -> dict:
        ms = fields.required("ms", int, "milliseconds")
        fields.finish()
        if ms < 0:
            raise BadRequest(f"{fields.route}: ms must be at least 0 (the clock only moves forward)")
        self.running.advance_time(ms)
        return {"ok": True}

    def reset(self, fields: _Fields) -> dict:
        fields.finish()
        self.running.reset()
        return {"ok": True}

    def restart(self, fields: _Fields) -> dict:
        fields.finish()
        self.running.restart()
        return {"ok": True, "bootstrap": self.running.bootstrap}

    # GET: a look inside
    def records(self, topic: str, query: dict) -> dict:
        partition = _query_int(query, "partition", None, 0)
        from_offset = _query_int(query, "from_offset", 0, 0)
        max_records = _query_int(query, "max_records", 10_000, 1)
        _no_query(query)
        found = self.running.records(topic, partition, from_offset=from_offset, max_records=max_records)
        return {"records": [record_json(record) for record in found]}

    def group(self, group_id: str, query: dict) -> dict:
        _no_query(query)
        return group_json(self.running.group(group_id))

    def committed_offsets(self, group_id: str, query: dict) -> dict:
        _no_query(query)
        return {"offsets": offsets_json(self.running.committed_offsets(group_id))}

    def transactions(self, query: dict) -> dict:
        _no_query(query)
        return {"transactions": [transaction_json(transaction) for transaction in self.running.transactions()]}

    def schemas(self, query: dict) -> dict:
        _no_query(query)
        return {"subjects": plain(self.running.schemas())}


def _match(pattern: tuple, segments: list[str]) -> list[str] | None:
    """The values of the pattern's ``{name}`` segments (a topic, a group id) where ``segments`` fit it, else None."""
    if len(pattern) != len(segments):
        return None
    values = []
    for expected, segment in zip(pattern, segments):
        if expected.startswith("{"):
            if not segment:
                return None
            values.append(segment)
        elif expected != segment:
            return None
    return values


def _no_query(query: dict) -> None:
    if query:
        raise BadRequest(f"unknown query parameter{'s' if len(query) > 1 else ''} {', '.join(sorted(query))}")


# -- HTTP ----------------------------------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive: a test's client sends many small requests
    timeout = IDLE_CONNECTION_S
    disable_nagle_algorithm = True  # the head and the body leave in two writes: no 40 ms wait for an ACK between
    server_version = "kbroker-test-broker"
    api: ControlApi  # set on the subclass made per server

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        try:
            body = self._read_body()
            split = urlsplit(self.path)
            query = _query(split.query)
            status, answer = _bounded(lambda: self.api.answer(method, split.path, query, body))
        except BadRequest as error:
            status, answer = 400, {"error": str(error)}
        except NotFound as error:
            status, answer = 404, {"error": str(error)}
        except _Answer as error:
            status, answer = error.status, {"error": str(error)}
        except LookupError as error:  # no such topic to look at; an unknown API, error or group in a fault
            status, answer = 404 if method == "GET" else 400, {"error": _message(error)}
        except (ValueError, TypeError) as error:  # the broker refused what was asked
            status, answer = 400, {"error": _message(error)}
        except Exception as error:  # a failure inside the broker: said, never the server's end
            status, answer = 500, {"error": _describe(error)}
        self._send(status, answer)

    def _read_body(self) -> dict | None:
        if self.headers.get("Transfer-Encoding", "").lower() not in ("", "identity"):
            self.close_connection = True
            raise BadRequest("send the body with a Content-Length (no chunked encoding)")
        length_text = self.headers.get("Content-Length") or "0"
        try:
            length = int(length_text)
        except ValueError:
            self.close_connection = True
            raise BadRequest(f"Content-Length is not a number: {length_text!r}") from None
        if length < 0 or length > BODY_BYTES_MAX:
            self.close_connection = True
            raise BadRequest(f"a body of {length} bytes: at most {BODY_BYTES_MAX}")
        if length == 0:
            return None
        raw = self.rfile.read(length)
        if len(raw) != length:
            self.close_connection = True
            raise BadRequest("the body ended before its Content-Length")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as error:
            raise BadRequest(f"the body is not JSON: {error}") from None
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body

    def _send(self, status: int, answer: dict) -> None:
        payload = (json.dumps(answer, separators=(",", ":")) + "\n").encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client went away
            self.close_connection = True

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass  # stderr is the test's; the routes say what they did in their answers


def _query(text: str) -> dict:
    query = {}
    for name, value in parse_qsl(text, keep_blank_values=True):
        if name in query:
            raise BadRequest(f"query parameter {name} given twice")
        query[name] = value
    return query


def _message(error: BaseException) -> str:
    """What the broker said (a KeyError's text without the quotes ``str`` gives it)."""
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    return text or type(error).__name__


def _describe(error: BaseException) -> str:
    """A failure inside the broker, named by its type."""
    text = _message(error)
    return f"{type(error).__name__}: {text}" if text != type(error).__name__ else text


def _bounded(call):
    """``call()`` in a thread of its own, waited on for at most CALL_TIMEOUT_S (then a 504; the call goes on)."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the waiting thread
            outcome["error"] = error

    thread = threading.Thread(target=run, name="kbroker-control-call", daemon=True)
    thread.start()
    thread.join(CALL_TIMEOUT_S)
    if thread.is_alive():
        raise _Answer(504, f"the broker did not answer within {CALL_TIMEOUT_S} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


_TOO_MANY_BODY = b'{"error":"too many connections at once"}\n'
_TOO_MANY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
             b"Content-Length: %d\r\n\r\n%s" % (len(_TOO_MANY_BODY), _TOO_MANY_BODY))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, address, handler) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(CONNECTIONS_MAX)

    def process_request(self, request, client_address) -> None:
        if not self.slots.acquire(blocking=False):
            try:
                request.sendall(_TOO_MANY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class ControlServer:
    """The control API of ``running`` on a free port of ``host``, served by a thread until ``close``. Another
    set of routes in its place with ``api``: anything with ControlApi's ``answer`` (the broker host's,
    kbroker/testing/broker_host.py, which serves many brokers' routes under /brokers/{id})."""

    def __init__(self, running=None, host: str = "127.0.0.1", port: int = 0, *, api=None) -> None:
        handler = type("ControlHandler", (_Handler,), {"api": api if api is not None else ControlApi(running)})
        self._server = _Server((host, port), handler)
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="kbroker-control", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        self._server.shutdown()  # returns within serve_forever's poll interval (50 ms)
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> ControlServer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
