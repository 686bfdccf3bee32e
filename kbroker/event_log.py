"""The broker's log: one event per line, with its level, as text or JSON (``logging.format``).

Every answer that carries a Kafka error is an event naming the API, the correlation id, the
client and each error with where it applies, so that what a client was told can be found in the
log. With ``logging.requests`` every request is an event (Kafka's request logger).
"""

from __future__ import annotations

import json
import logging
import time

from kbroker.wire.errors import ErrorCode

requests_logger = logging.getLogger("kbroker.requests")
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STANDARD_FIELDS = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        event = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
                 "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        event.update({key: value for key, value in vars(record).items() if key not in _STANDARD_FIELDS})
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        return json.dumps(event, default=str)


def configure(output_format: str = "text") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if output_format == "json" else logging.Formatter(_TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def errors_in(response) -> list[str]:
    """``ERROR_NAME`` or ``ERROR_NAME@where`` for each error code a response carries, however nested."""
    found: list[str] = []
    _walk(response, (), found)
    return found


def _walk(value, path: tuple, found: list[str]) -> None:
    """Every error code in ``value`` and below it; ``path`` is the list items above it, from the answer down.
    Only the lists whose structs can hold an error code are entered (ApiVersions' 70 API ranges are not)."""
    code = getattr(value, "error_code", None)
    if code:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = str(code)
        where = _where(path)
        found.append(f"{name}@{where}" if where else name)
    for field in _struct_lists(type(value)):
        for item in getattr(value, field) or ():
            _walk(item, (*path, item), found)


_STRUCT_LISTS: dict[type, tuple[str, ...]] = {}
_HOLDS_ERROR_CODES: dict[int, bool] = {}  # id(StructSpec) -> whether it or a struct below it has error_code


def _struct_lists(value_class: type) -> tuple[str, ...]:
    """The fields of a generated value class that hold lists of structs in which an error code can be (from its
    declaration, once)."""
    fields = _STRUCT_LISTS.get(value_class)
    if fields is None:
        spec = getattr(value_class, "_spec", None)
        fields = tuple(f.name for f in getattr(spec, "fields", ())
                       if f.type.is_array and f.type.element.struct is not None
                       and _holds_error_codes(f.type.element.struct))
        _STRUCT_LISTS[value_class] = fields
    return fields


def _holds_error_codes(spec) -> bool:
    """Whether a struct of ``spec``, or one in its lists of structs however deep, has an ``error_code`` field."""
    holds = _HOLDS_ERROR_CODES.get(id(spec))
    if holds is None:
        _HOLDS_ERROR_CODES[id(spec)] = False  # a struct that held itself would end here
        holds = any(f.name == "error_code" for f in spec.fields) or any(
            _holds_error_codes(f.type.element.struct) for f in spec.fields
            if f.type.is_array and f.type.element.struct is not None)
        _HOLDS_ERROR_CODES[id(spec)] = holds
    return holds


def _where(path: tuple) -> str:
    """Where an error applies: each list item above it named by its first naming field (``orders-0``)."""
    where = ""
    for item in path:
        where = _label(item, where)
    return where


def _label(item, parent: str) -> str:
    for field in ("name", "topic", "group_id", "transactional_id", "partition_index", "index", "partition",
                  "resource_name", "user", "key"):
        value = getattr(item, field, None)
        if value is not None and not isinstance(value, (bytes, list)):
            return f"{parent}-{value}" if parent else str(value)
    return parent


# Answers that are steps of the protocol, not problems: a client or a node meets them in normal work
# (a first JoinGroup, a rebalance, a quorum electing or moving its leader, a coordinator loading,
# leadership moving, a topic created twice) and retries or follows on by itself. They are logged at
# DEBUG; any other error is logged at INFO, where a person reads it.
PROTOCOL_STEPS = frozenset({
    ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.NOT_CONTROLLER,
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.UNSTABLE_OFFSET_COMMIT, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.OFFSET_NOT_AVAILABLE,
})
# Per API, answers that are steps there only: a Metadata request is how clients ask whether a topic exists.
PROTOCOL_STEPS_OF_API = {"Metadata": frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})}


def is_protocol_step(api_name: str, error_name: str) -> bool:
    code = ErrorCode.__members__.get(error_name.partition("@")[0])
    return code is not None and (code in PROTOCOL_STEPS or code in PROTOCOL_STEPS_OF_API.get(api_name, ()))


def log_answer(header, api_name: str, peer: str, principal: str, response, seconds: float, *,
               every_request: bool) -> None:
    """The answer's event: when it carries errors (at DEBUG if each is a protocol step), and for every
    request with ``logging.requests``. Nothing is looked for when the log would take neither level."""
    if not requests_logger.isEnabledFor(logging.INFO):  # (nor DEBUG, which is below it)
        return
    errors = errors_in(response)
    if not errors and not every_request:
        return
    routine = all(is_protocol_step(api_name, error) for error in errors)
    level = logging.INFO if every_request or not routine else logging.DEBUG
    if not requests_logger.isEnabledFor(level):
        return
    fields = {"api": api_name, "api_version": header.api_version, "correlation_id": header.correlation_id,
              "client_id": header.client_id, "client_host": peer, "principal": principal,
              "latency_ms": round(seconds * 1000, 3)}
    if errors:
        fields["errors"] = errors
    requests_logger.log(level, "%s v%d correlation_id=%d client_id=%s from %s (%s) in %.2f ms%s", api_name,
                         header.api_version, header.correlation_id, header.client_id, peer, principal,
                         seconds * 1000, (": " + ", ".join(errors)) if errors else "", extra=fields)


class RepeatedWarning:
    """A warning for a fault that repeats on every request while it lasts (each produce to a full disk):
    logged the first time for a key, then at most once per ``interval_s`` with how often it recurred."""

    def __init__(self, logger: logging.Logger, message: str, interval_s: float = 30.0, clock=time.monotonic) -> None:
        self.logger = logger
        self.message = message  # formatted with the key and the error
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[str, tuple[float, int]] = {}  # key -> (when last logged, recurrences since)

    def warn(self, key: str, error: BaseException) -> None:
        now = self.clock()
        logged_at, since = self._last.get(key, (None, 0))
        if logged_at is not None and now - logged_at < self.interval_s:
            self._last[key] = (logged_at, since + 1)
            return
        if len(self._last) >= 10_000:  # bounded, whatever the number of partitions
            self._last.clear()
        self._last[key] = (now, 0)
        again = f" ({since} more since the last report)" if since else ""
        self.logger.warning(self.message + again, key, error)
