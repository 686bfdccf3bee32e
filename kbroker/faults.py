"""Faults on demand: what a test makes a broker do wrong, in its real code paths.

    faults = broker.faults  # (a RunningBroker's .faults, from the test's thread)
    faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=3, topic="orders", partition=0)
    faults.delay("Fetch", ms=500, count=2)
    faults.close_connections()
    faults.clear()

Request faults (:meth:`Faults.fail`, :meth:`Faults.delay`, :meth:`Faults.move_coordinator`,
:meth:`Faults.make_unavailable`) act on the requests of the broker's client listeners: while one is set,
each listener's server hands its requests to :meth:`Faults.answer` (kbroker/server.py), which answers the
parts of a request a fault matches with its error, in the shape Kafka sends it (kbroker/fault_answers.py),
and serves the rest through the real handler. With none set the server makes one attribute check a
request. Each returns a :class:`Fault`, whose ``fired`` counts the requests it acted on.

The others act at once through the broker's own parts: ``close_connections`` cancels the connections the
servers hold, ``rebalance`` asks the group coordinator for a rebalance, ``fence_producer`` bumps a
transactional id's epoch at the transaction coordinator, and ``disk_full`` makes ``FreeSpace`` refuse
every append with ENOSPC, which producers hear as KAFKA_STORAGE_ERROR. ``clear()`` ends every request
fault and the full disk (the plugin's fixtures call it when a test ends).

One node: ``move_coordinator`` answers NOT_COORDINATOR to the group's (or transactional id's) requests
until, after at least one such answer, the client asks FindCoordinator for it again (answered as usual:
this node), as clients do after a coordinator moved; then they are served. Moving a coordinator or a
partition's leadership to another node of a cluster (kbroker.testing.running_cluster, processes of their
own) is not done here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import trio

from kbroker.fault_answers import Unit, answerable, shape_of
from kbroker.handlers.deferred import Deferred
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

__all__ = ["Fault", "Faults", "ThreadedFaults"]

# The APIs each coordinator answers, by what names their requests' group or transaction.
GROUP_COORDINATOR_APIS = frozenset({
    "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch", "OffsetDelete",
    "DescribeGroups", "DeleteGroups", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "TxnOffsetCommit",
    "ShareGroupHeartbeat", "ShareGroupDescribe"})
TRANSACTION_COORDINATOR_APIS = frozenset({
    "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "DescribeTransactions"})
# What a partition without a leader answers (make_unavailable): Metadata shows it leaderless.
PARTITION_LEADER_APIS = frozenset({
    "Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch", "DeleteRecords", "DescribeProducers"})


@dataclass(eq=False)
class Fault:
    """A request fault, as set: ``fired`` is how many requests it acted on so far, ``remaining`` how many more
    it will act on (None: until cleared), ``active`` whether it still acts. ``cancel()`` ends it."""

    kind: str  # "fail", "delay", "move_coordinator" or "make_unavailable"
    api: str | None  # the API it acts on (None: the kind says which)
    error: str | None = None  # its error's name
    ms: int = 0  # a delay's
    remaining: int | None = 1
    topic: str | None = None
    partition: int | None = None
    group: str | None = None
    transactional_id: str | None = None
    fired: int = 0
    active: bool = True
    error_code: int = field(default=0, repr=False)

    def cancel(self) -> None:
        self.active = False

    def code_for(self, api: str) -> int | None:
        """The error it answers a request of ``api`` with; None when it does not act on that API."""
        if self.kind in ("fail", "delay"):
            return self.error_code if api == self.api else None
        if self.kind == "move_coordinator":
            apis = GROUP_COORDINATOR_APIS if self.group is not None else TRANSACTION_COORDINATOR_APIS
            return ErrorCode.NOT_COORDINATOR if api in apis else None
        if api == "Metadata":
            return ErrorCode.LEADER_NOT_AVAILABLE
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if api in PARTITION_LEADER_APIS else None

    def matches(self, unit: Unit) -> bool:
        if self.kind == "move_coordinator":  # by what its coordinator keys it by, not by other names it carries
            return unit.group == self.group if self.group is not None else \
                unit.transactional_id == self.transactional_id
        return ((self.topic is None or unit.topic == self.topic)
                and (self.partition is None or unit.partition == self.partition)
                and (self.group is None or unit.group == self.group)
                and (self.transactional_id is None or unit.transactional_id == self.transactional_id))

    def _fire(self) -> None:
        self.fired += 1
        if self.remaining is not None:
            self.remaining -= 1
            if self.remaining <= 0:
                self.active = False


class Faults:
    """A broker's faults on demand. Every method runs in the broker's trio thread (a test's thread goes
    through :class:`ThreadedFaults`)."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self._faults: list[Fault] = []

    # -- request faults -------------------------------------------------------------------------------------

    def fail(self, api: str, error: str | int, count: int | None = 1, *, topic: str | None = None,
             partition: int | None = None, group: str | None = None, transactional_id: str | None = None) -> Fault:
        """Answer the next ``count`` requests of ``api`` (a Kafka API name: "Produce") that match with
        ``error`` (a Kafka error name or number); ``count=None``: until cleared. ``topic`` and ``partition``
        match a request's partitions (or topics), ``group`` its group ids (FindCoordinator's group keys too),
        ``transactional_id`` likewise; the parts of a request that match get the error, the rest is served."""
        code = _error_code(error)
        return self._add(Fault("fail", _api_name(api), ErrorCode(code).name, 0, _count(count), topic, partition,
                               group, transactional_id, error_code=code))

    def delay(self, api: str, ms: int, count: int | None = 1, *, topic: str | None = None,
              partition: int | None = None, group: str | None = None, transactional_id: str | None = None) -> Fault:
        """Hold back the answers to the next ``count`` matching requests of ``api`` by ``ms`` milliseconds: the
        request is handled as usual and its answer waits (the connection's later answers wait behind it, in
        order, as on Kafka; its later requests are read and handled meanwhile)."""
        if ms < 0:
            raise ValueError(f"ms must be at least 0, got {ms}")
        return self._add(Fault("delay", _api_name(api), None, ms, _count(count), topic, partition, group,
                               transactional_id))

    def move_coordinator(self, *, group: str | None = None, transactional_id: str | None = None) -> Fault:
        """As if the coordinator of ``group`` (or ``transactional_id``) had moved: its requests are answered
        NOT_COORDINATOR until, after the first of them, the client asks FindCoordinator for it again (answered
        as usual); then they are served. One node only: see the module's docstring."""
        if (group is None) == (transactional_id is None):
            raise ValueError("give exactly one of group and transactional_id")
        return self._add(Fault("move_coordinator", None, "NOT_COORDINATOR", remaining=None, group=group,
                               transactional_id=transactional_id))

    def make_unavailable(self, topic: str, partition: int) -> Fault:
        """Until cleared, ``topic``-``partition`` has no leader as clients see it: Produce, Fetch, ListOffsets,
        OffsetForLeaderEpoch, DeleteRecords and DescribeProducers answer NOT_LEADER_OR_FOLLOWER for it, and
        Metadata shows it with leader -1 and LEADER_NOT_AVAILABLE."""
        return self._add(Fault("make_unavailable", None, "NOT_LEADER_OR_FOLLOWER", remaining=None, topic=topic,
                               partition=partition))

    def _add(self, fault: Fault) -> Fault:
        self._faults.append(fault)
        for server in self.broker.servers:
            server.faults = self
        return fault

    @property
    def active(self) -> list[Fault]:
        """The request faults still acting, in the order they were set."""
        return [fault for fault in self._faults if fault.active]

    # -- faults acted out at once ----------------------------------------------------------------------------

    def close_connections(self, client_id: str | None = None) -> int:
        """Close every client connection of the broker's listeners (or those whose client id, as its ApiVersions
        request said, is ``client_id``), as a broken network would; how many were closed."""
        return sum(server.close_connections(client_id) for server in self.broker.servers)

    async def rebalance(self, group: str) -> bool:
        """Rebalance ``group`` now through the group coordinator's own state change: a classic group's members
        hear REBALANCE_IN_PROGRESS at their next heartbeat and join again; a consumer group (KIP-848) gets a new
        group epoch and target assignment. False when the group has no members or is rebalancing already."""
        from kbroker.effects import CoordinatorError

        groups = self.broker.groups
        try:
            if group not in groups.coordinator.groups:
                raise LookupError(f"no group {group!r} on this broker")
            return await groups.rebalance(group)
        except CoordinatorError as error:
            raise LookupError(f"group {group!r} is not coordinated here: {ErrorCode(error.error_code).name}") from None

    async def fence_producer(self, transactional_id: str) -> int:
        """Fence the producer of ``transactional_id`` as a new producer with that id would: the transaction
        coordinator bumps its epoch (aborting an open transaction), so that the producer's next request is
        refused PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH). The new epoch, once durable."""
        from kbroker.effects import CoordinatorError

        try:
            await self.broker.transactions.fence_producer(transactional_id)
            # Bumped twice, as a new producer's InitProducerId leaves it (the fence that aborts, then the new
            # producer's own epoch). With transaction version 2 an EndTxn one epoch behind is taken for a retry of
            # the EndTxn that bumped it, so after one bump the old producer's commit would be answered
            # INVALID_TXN_STATE (as at Kafka 4.4 after a transaction timed out: kafka-clients 4.4 throws
            # InvalidTxnStateException) rather than PRODUCER_FENCED.
            return await self.broker.transactions.fence_producer(transactional_id)
        except CoordinatorError as error:
            raise LookupError(f"transactional id {transactional_id!r} is not coordinated here: "
                              f"{ErrorCode(error.error_code).name}") from None

    def disk_full(self, full: bool = True) -> None:
        """Refuse every append to the log directory for space (True), or no longer (False): producers are
        answered KAFKA_STORAGE_ERROR, the directory stays online (kbroker/log/free_space.py)."""
        self.broker.free_space.full = bool(full)

    def clear(self) -> None:
        """End every request fault and a full disk."""
        for fault in self._faults:
            fault.active = False
        self._faults.clear()
        self.broker.free_space.full = False
        for server in self.broker.servers:
            server.faults = None

    # -- the server's hook ----------------------------------------------------------------------------------

    async def answer(self, handler, broker, context, request):
        """A request's answer while faults are set (kbroker/server.py): the handler's, or errors for the parts
        a fault matched with the rest served, held back by a matching delay."""
        api, version = handler.api.name, context.api_version
        session = context.session
        if session is not None and session.client_id is None:
            session.client_id = context.header.client_id  # a client that sent no ApiVersions
        faults = [fault for fault in self._faults if fault.active]
        if len(faults) < len(self._faults):
            self._forget_ended()
        acting = [(fault, code) for fault in faults if (code := fault.code_for(api)) is not None]
        refinding = api == "FindCoordinator" and any(fault.kind == "move_coordinator" for fault in faults)
        if not acting and not refinding:
            return await handler.handle(broker, context, request)
        shape = shape_of(api, version)
        units = shape.units(request, version, broker) if shape is not None else [Unit()]
        errors: dict[Unit, int] = {}
        fired: list[Fault] = []
        delay_ms = 0
        for fault, code in acting:
            if fault.kind == "delay":  # any request of its API, with no filter: one that names nothing too
                if fault.matches(Unit()) or any(fault.matches(unit) for unit in units):
                    delay_ms = max(delay_ms, fault.ms)
                    fired.append(fault)
                continue
            taken = [unit for unit in units if unit not in errors and fault.matches(unit)]
            if taken and shape is not None:  # (no shape: this version of the API has no error to give)
                errors.update(dict.fromkeys(taken, code))
                fired.append(fault)
        for fault in fired:
            fault._fire()
        if refinding:  # the client found its coordinator again: the move is over
            for fault in faults:
                if fault.kind == "move_coordinator" and fault.fired and any(fault.matches(unit) for unit in units):
                    fault.active = False

        async def serve(served_request):
            return await handler.handle(broker, context, served_request)

        if errors:
            response = await shape.answer(serve, request, version, broker, errors)
        else:
            response = await serve(request)
        if delay_ms:
            response = _held_back(response, delay_ms)
        if not any(fault.active for fault in self._faults):
            self._forget_ended()
        return response

    def _forget_ended(self) -> None:
        self._faults = [fault for fault in self._faults if fault.active]
        if not self._faults:
            for server in self.broker.servers:
                server.faults = None


def _held_back(response, delay_ms: int):
    """The answer, sent ``delay_ms`` after it is ready."""
    if response is None:
        return None
    held = Deferred(None, None)

    async def ready() -> None:
        answer = response
        if isinstance(response, Deferred):
            await response.ready()
            answer = response.response
        await trio.sleep(delay_ms / 1000)
        held.response = answer

    held.ready = ready
    return held


def _api_name(api: str) -> str:
    if api not in API_BY_NAME:
        raise LookupError(f"no Kafka API named {api!r} (names as Kafka's: Produce, Fetch, OffsetCommit, ...)")
    if not answerable(api):
        raise ValueError(f"{api} has no error code a fault could answer with")
    return api


def _error_code(error: str | int) -> int:
    try:
        code = ErrorCode[error.upper()] if isinstance(error, str) else ErrorCode(error)
    except (KeyError, ValueError):
        raise LookupError(f"no Kafka error {error!r} (a name such as NOT_LEADER_OR_FOLLOWER, or its number)") from None
    if code == ErrorCode.NONE:
        raise ValueError("NONE is no error")
    return code


def _count(count: int | None) -> int | None:
    if count is not None and count < 1:
        raise ValueError(f"count must be at least 1, or None for until cleared; got {count}")
    return count


class ThreadedFaults:
    """A broker's :class:`Faults` for a test's thread: each call runs in the broker's event loop through
    ``in_broker(function, *args)`` (kbroker/testing/in_process_broker.py) and returns what it returns."""

    def __init__(self, faults: Faults, in_broker) -> None:
        self._faults = faults
        self._in_broker = in_broker

    def _call(self, name: str, *args, **kwargs):
        # The plain function, not a bound method, in the partial: in_broker tells a coroutine function by it.
        return self._in_broker(functools.partial(getattr(Faults, name), self._faults, *args, **kwargs))

    def fail(self, api, error, count=1, *, topic=None, partition=None, group=None, transactional_id=None) -> Fault:
        return self._call("fail", api, error, count, topic=topic, partition=partition, group=group,
                          transactional_id=transactional_id)

    def delay(self, api, ms, count=1, *, topic=None, partition=None, group=None, transactional_id=None) -> Fault:
        return self._call("delay", api, ms, count, topic=topic, partition=partition, group=group,
                          transactional_id=transactional_id)

    def move_coordinator(self, *, group=None, transactional_id=None) -> Fault:
        return self._call("move_coordinator", group=group, transactional_id=transactional_id)

    def make_unavailable(self, topic, partition) -> Fault:
        return self._call("make_unavailable", topic, partition)

    @property
    def active(self) -> list[Fault]:
        return self._in_broker(lambda: self._faults.active)

    def close_connections(self, client_id=None) -> int:
        return self._call("close_connections", client_id)

    def rebalance(self, group) -> bool:
        return self._call("rebalance", group)

    def fence_producer(self, transactional_id) -> int:
        return self._call("fence_producer", transactional_id)

    def disk_full(self, full=True) -> None:
        return self._call("disk_full", full)

    def clear(self) -> None:
        return self._call("clear")
