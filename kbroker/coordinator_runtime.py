"""What the group and transaction coordinators' trio shells share (Kafka's CoordinatorRuntime).

A coordinator core is pure: it answers calls with effects (``Persist``,
``Respond``; kbroker/effects.py). The runtime carries them out against
an internal compacted topic (``__consumer_offsets``, ``__transaction_state``):

- records are appended at once, in the order the core asked (replay depends
  on it), as one batch per ``Persist``; answers that follow wait until the
  batch is fsynced, and are sent from the runtime's own nursery, so a client
  that hangs up cannot strand the answers of others;
- a state change becomes visible only once its record is durable (DESIGN.md
  rule 11). The cores keep what a ``Persist`` changes pending and are told its
  fate: ``on_durable`` once the batch is committed (fsynced, and on every
  in-sync replica), or ``on_failure`` when the append raised or the fsync
  failed, and then they revert. Each partition's writes are told in append
  order, whatever order their fsyncs are reported in, so the committed state
  is always a prefix of the log, as Kafka's CoordinatorRuntime commits its
  timeline state at the high watermark and reverts a failed batch's snapshot.
  A Persist after a failed one in the same list fails too: one request's
  records stand or fall together. A failed fsync leaves the batch in the file
  as Kafka leaves a failed append's: whether it survives is unknown, so the
  client hears an error, and if the records are read back at the next load
  they count, as any record the log holds (a retry supersedes them);
- a request that cannot be answered at once waits on a ``waiter`` id;
- at start, and when the topic is created, each partition is loaded by
  replaying its records, yielding every 1,000 records so that requests
  meanwhile are answered (COORDINATOR_LOAD_IN_PROGRESS by the core);
- timers: the core's ``next_deadline_ms`` and the subclass's ``timer_work``; a test that moved the
  clock ahead has what is due carried out at once (``run_due_now``);
- time: the wall clock of the ``Clock`` the runtime is given (kbroker/log/clock.py), as
  Kafka's coordinators keep theirs: the times the cores store (a group's state change, a
  transaction's start) and the records' timestamps are wall-clock milliseconds.

A subclass names its topic and says how to make its core, encode and replay
records, create the topic and what its timers do.
"""

from __future__ import annotations

import logging
from collections import deque

import trio

from kbroker.effects import CoordinatorError, Persist, Respond
from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.topics import TopicError, TopicRequest, plan_topic
from kbroker.log.producer_state import read_txn_marker
from kbroker.log.append_origin import AppendOrigin
from kbroker.log.deposed import NotLeaderForEpoch
from kbroker.wire import DecodeError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import ControlRecordType, Record, build_batch, decode_records, iter_batches

logger = logging.getLogger(__name__)


def encode_record(records, key, value) -> tuple[bytes, bytes | None]:
    """A coordinator's record as stored, by its ``records`` module (group or txn): key, and value or
    None for a tombstone."""
    return records.encode_key(key), None if value is None else records.encode_value(value)


def decode_record(records, topic: str, partition: int, record) -> tuple[object, object] | None:
    """A stored coordinator record's (key, value) by its ``records`` module, or None when it cannot be
    read: the coordinator skips it, as Kafka's loaders skip what they do not know, and says so."""
    try:
        key = records.decode_key(record.key)
        return key, records.decode_value(key, record.value)
    except DecodeError as error:
        logger.warning("%s-%d: skipping a record: %s", topic, partition, error)
        return None

_LOAD_READ_BYTES = 1 << 20
_LOAD_RECORDS_PER_TURN = 1000
_WAITER_LIMIT_S = 30 * 60 + 60  # beyond the longest timeout a client may ask a coordinator to wait
_TIMER_IDLE_S = 1.0  # the timer task's longest sleep


# A write that failed is answered COORDINATOR_NOT_AVAILABLE: retriable, the client finds its coordinator
# again and retries. (Kafka says NOT_COORDINATOR for a storage error; the clients treat both alike.)
_WRITE_FAILED = ErrorCode.COORDINATOR_NOT_AVAILABLE


class _Waiter:
    def __init__(self) -> None:
        self.response = None
        self.done = trio.Event()


class _LeadershipLost(Exception):
    """A write's partition was unloaded (another broker leads it now) before the write was committed."""


class _Write:
    """One ``Persist`` on its way: appended (or refused), then durable or failed."""

    __slots__ = ("key", "persist", "previous", "partition", "last_offset", "leader_epoch", "error", "decided",
                 "settled")

    def __init__(self, key: str, persist: Persist, previous: _Write | None) -> None:
        self.key = key
        self.persist = persist
        self.previous = previous  # the Persist before it in the same list of effects
        self.partition = None  # where its batch went (None: nothing to append)
        self.last_offset = -1
        self.leader_epoch = -1  # the epoch the records were appended in, as leader
        self.error: BaseException | None = None
        self.decided = False  # its fate is known
        self.settled = trio.Event()  # the core was told


class CoordinatorRuntime:
    topic: str  # the internal topic, set by the subclass

    def __init__(self, broker, clock: Clock = SYSTEM_CLOCK) -> None:
        self.broker = broker
        self.clock = clock
        self._coordinator = None  # made (and the core imported) at the first request or load
        self._waiters: dict[int, _Waiter] = {}
        self._next_waiter = 0
        self._nursery: trio.Nursery | None = None
        self._timers_changed = trio.Event()
        self._writes: dict[int, deque[_Write]] = {}  # per topic partition, in append order, until told
        self._lost: dict[int, trio.Event] = {}  # per topic partition led here: set when it is unloaded
        self._topic_id = None  # the id of the topic whose partitions the core holds (one made again has another)
        self._carrying_out = 0  # effects handed to _carry_out and not done yet (run_due_now waits for none)
        self._idle = trio.Event()  # set while _carrying_out is 0
        self._idle.set()

    # -- what a subclass provides ---------------------------------------------------

    def make_coordinator(self):
        raise NotImplementedError

    def topic_request(self) -> TopicRequest:
        raise NotImplementedError

    def encode(self, key, value) -> tuple[bytes, bytes | None]:
        raise NotImplementedError

    def replay(self, partition: int, record: Record, producer_id: int | None) -> None:
        """Apply one record read back at load; ``producer_id`` when it was written in a transaction."""
        raise NotImplementedError

    def transaction_ended(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker in the topic's ``partition`` (read at load, or just written)."""

    def timer_work(self, now_ms: int) -> list[tuple[str, list]]:
        """Effects due at ``now_ms``, keyed by the id (group, transactional id) they belong to."""
        return self.coordinator.tick(now_ms)

    def partition_of(self, key: str) -> int:
        """The topic partition that holds ``key``'s records."""
        return self.coordinator.partition_of(key)

    def changed(self, key: str, effects: list) -> None:
        """Called before ``key``'s effects are carried out (the group core re-arms its timers here)."""
        self.coordinator.after(key, effects)

    async def perform(self, key: str, effect) -> None:
        """Carry out an effect of the subclass's own kind, once everything before it is durable."""
        raise TypeError(f"{self.topic}: no way to carry out {effect!r}")

    def loaded(self, partition: int, now_ms: int) -> list[tuple[str, list]]:
        """The partition's records are all replayed; effects the core asks for then."""
        self.coordinator.finish_load(partition, now_ms)
        return []

    def make_checks_due(self) -> None:
        """Have the core's periodic checks (expired offsets, timed-out transactions...) run at the next
        ``fire_timers`` whatever their interval (``run_due_now``)."""

    # -- running ----------------------------------------------------------------------

    def now_ms(self) -> int:
        """The time the core is told (``now_ms`` in its calls): the clock's wall time."""
        return self.clock.wall_ms()

    @property
    def coordinator(self):
        if self._coordinator is None:
            self._coordinator = self.make_coordinator()
        return self._coordinator

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.leadership_changed()
            task_status.started()
            await self._fire_timers()

    async def ensure_topic(self) -> None:
        """Create the internal topic at the first request that needs it, as Kafka does."""
        broker = self.broker
        if self.topic in broker.image.topics:
            return
        request = self.topic_request()
        try:
            plan_topic(broker.image, request, default_partitions=broker.config.num_partitions,
                       default_replication=broker.config.default_replication_factor,
                       known_configs=set(request.configs))
        except TopicError as error:
            raise CoordinatorError(error.error_code, str(error)) from None
        await broker.auto_create([request])
        if self.topic not in broker.image.topics:  # asked of the active controller: the client retries
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{self.topic} is being created")
        self.leadership_changed()

    def coordinator_node(self, key: str) -> int:
        """The broker coordinating ``key``: the leader of the topic partition holding its records (-1: none now)."""
        topic = self.broker.image.topics.get(self.topic)
        return -1 if topic is None else topic.partitions[self.partition_of(key)].leader

    def leadership_changed(self) -> None:
        """Load the partitions of the topic this broker now leads, and drop those it no longer leads
        (their waiters hear NOT_COORDINATOR and find the new coordinator). A deleted topic's partitions are
        all dropped, as Kafka's brokers resign a deleted partition of a coordinator's topic, and the core
        with them: the topic made again starts a fresh one (kbroker/testing/reset.py empties a broker so)."""
        topic = self.broker.image.topics.get(self.topic)
        if self._coordinator is not None and self._topic_id not in (None, getattr(topic, "topic_id", None)):
            for partition in sorted(self._coordinator.loaded | self._coordinator.loading):
                self._unload(partition)
            self._coordinator = self._topic_id = None
        if topic is None or self._nursery is None or not self.broker.serving:
            return
        coordinator = self.coordinator
        self._topic_id = topic.topic_id
        for state in topic.partitions:
            partition = state.partition
            held = partition in coordinator.loaded or partition in coordinator.loading
            if state.leader == self.broker.node_id and not held:
                self.begin_load(partition, state.leader_epoch)
                self._nursery.start_soon(self._load, partition)
            elif state.leader != self.broker.node_id and held:
                logger.debug("%s-%d: no longer led here; unloading", self.topic, partition)
                self._unload(partition)

    def _unload(self, partition: int) -> None:
        if (lost := self._lost.pop(partition, None)) is not None:
            lost.set()  # its writes still waiting fail: the new coordinator loads what was committed
        for step in self._coordinator.unload(partition) or ():
            if isinstance(step, Respond):
                self._respond(step, None)

    def begin_load(self, partition: int, leader_epoch: int) -> None:
        self.coordinator.begin_load(partition)

    async def _load(self, partition: int) -> None:
        """Rebuild the partition's state from its records, yielding between reads."""
        log = self.broker.partition(self.topic, partition).log
        offset, end, count = log.log_start_offset, log.log_end_offset, 0
        started_ms = self.clock.monotonic_ms()
        while offset < end:
            region = log.read(offset, _LOAD_READ_BYTES, upper_bound=end)
            if region is None:
                break
            data = region.read()
            for position, header in iter_batches(data, allow_partial_tail=True):
                offset = header.last_offset + 1
                if header.is_control:
                    marker = read_txn_marker(data, position)
                    if marker is not None:
                        self.transaction_ended(partition, header.producer_id, marker.kind == ControlRecordType.COMMIT)
                    continue
                try:
                    _, batch_records = decode_records(data, position)
                except DecodeError as error:
                    logger.warning("%s-%d: skipping an unreadable batch at %d: %s", self.topic, partition,
                                   header.base_offset, error)
                    continue
                producer_id = header.producer_id if header.is_transactional else None
                for record in batch_records:
                    if record.key is not None:
                        self.replay(partition, record, producer_id)
                    count += 1
                    if count % _LOAD_RECORDS_PER_TURN == 0:  # other requests are served meanwhile
                        await trio.lowlevel.checkpoint()
            await trio.lowlevel.checkpoint()
        if partition not in self.coordinator.loading:
            return  # unloaded meanwhile: leadership moved on
        for key, effects in self.loaded(partition, self.now_ms()):
            self.apply(key, effects)
        self._timers_changed.set()
        if count:
            logger.debug("%s-%d: %d records loaded in %.0f ms", self.topic, partition, count,
                        self.clock.monotonic_ms() - started_ms)

    async def _fire_timers(self) -> None:
        while self._coordinator is None:  # nothing to time before the first request or load
            await self._timers_changed.wait()
            self._timers_changed = trio.Event()
        while True:
            wait_ms = self.fire_timers()
            sleep_s = _TIMER_IDLE_S if wait_ms is None else min(_TIMER_IDLE_S, wait_ms / 1000)
            with trio.move_on_after(sleep_s):
                await self._timers_changed.wait()
            self._timers_changed = trio.Event()

    async def run_due_now(self, timeout_s: float = 30.0) -> None:
        """Carry out every timer and periodic check due by the clock's time now, and return once what they
        led to (records written, transactions' markers, answers) is done: for a test that moved the clock
        ahead (kbroker/testing/time_travel.py). Raises TimeoutError when that takes over ``timeout_s``."""
        if self._coordinator is None or self._nursery is None:
            return  # no request or load yet: nothing to time
        self.make_checks_due()
        self.fire_timers()
        with trio.move_on_after(timeout_s):
            while self._carrying_out:
                await self._idle.wait()
            return
        raise TimeoutError(f"{self.topic}: what fell due was not done within {timeout_s} s")

    def fire_timers(self) -> int | None:
        """Carry out what is due by the clock's time; how long until the next timer is due (None:
        none is set). The timer task calls it, and a test after moving a ``FakeClock``."""
        now = self.now_ms()
        for key, effects in self.timer_work(now):
            self.apply(key, effects)
        due = self.coordinator.next_deadline_ms()
        return None if due is None else max(0, due - now)

    # -- waiters and effects ---------------------------------------------------------------

    def new_waiter(self) -> int:
        self._next_waiter += 1
        self._waiters[self._next_waiter] = _Waiter()
        return self._next_waiter

    def deferred(self, waiter_id: int):
        """The handler's answer: whatever the core gives ``waiter_id``, once it gives it."""
        from kbroker.handlers import Deferred  # the handlers import the runtimes

        waiter = self._waiters[waiter_id]
        answer = Deferred(None, None)

        async def ready() -> None:
            with trio.move_on_after(_WAITER_LIMIT_S):
                await waiter.done.wait()
            self._waiters.pop(waiter_id, None)
            if not waiter.done.is_set():
                raise CoordinatorError(0, "a coordinator request was never answered")  # a core bug: close the connection
            answer.response = waiter.response

        answer.ready = ready
        return answer

    def apply(self, key: str, effects: list) -> None:
        """Carry out ``effects`` in order, in the background."""
        steps = self._stage(key, effects)
        if steps:
            self._start_carrying_out(key, steps, None, None)

    async def wait_applied(self, key: str, effects: list) -> bool:
        """Carry out ``effects`` and wait until done; False if a write failed. (Done in the
        background all the same, so that the caller's cancellation cannot cut the answers
        to others short.)"""
        steps = self._stage(key, effects)
        if not steps:
            return True
        done, failures = trio.Event(), []
        self._start_carrying_out(key, steps, done, failures)
        await done.wait()
        return not failures

    async def wait_settled(self, key: str) -> None:
        """Return once every write to ``key``'s partition appended so far is durable or has failed,
        and the core has been told (Kafka's OffsetFetch with require_stable waits so)."""
        for write in list(self._writes.get(self.partition_of(key), ())):
            await write.settled.wait()

    def _stage(self, key: str, effects: list) -> list:
        """Append the records now, in the order the core asked; what is left to do is
        waiting for their fsync and answering."""
        self.changed(key, effects)
        self._timers_changed.set()
        steps, previous = [], None
        for effect in effects:
            if isinstance(effect, Persist):
                previous = self._append(key, effect, previous)
                steps.append(previous)
            else:
                steps.append(effect)
        return steps

    def _append(self, key: str, persist: Persist, previous: _Write | None) -> _Write:
        """Append ``persist``'s records (if any) as one batch, and watch for their durability."""
        index = self.partition_of(key)
        write = _Write(key, persist, previous)
        if persist.records:
            try:
                encoded = [self.encode(record_key, value) for record_key, value in persist.records]
                producer = persist.producer
                transactional = {} if producer is None else {"producer_id": producer[0], "producer_epoch": producer[1],
                                                             "transactional": True}
                batch = build_batch([Record(offset_delta=i, key=k, value=v) for i, (k, v) in enumerate(encoded)],
                                    base_timestamp=self.now_ms(), **transactional)
                partition = self.broker.partition(self.topic, index)
                appended = partition.append(bytearray(batch), origin=AppendOrigin.COORDINATOR)
            except (OSError, KeyError) as error:
                logger.error("%s-%d: records of %r not written: %s", self.topic, index, key, error)
                write.error = error
            else:
                write.partition, write.last_offset, write.leader_epoch = partition, appended.last_offset, \
                    appended.leader_epoch
        self._writes.setdefault(index, deque()).append(write)
        self._nursery.start_soon(self._watch, index, write, self._lost.setdefault(index, trio.Event()))
        return write

    async def _watch(self, index: int, write: _Write, lost: trio.Event) -> None:
        """Wait for ``write``'s durability; then tell the core about it and every write before it
        in the partition that is decided, in append order."""
        if write.error is None and write.partition is not None:
            async with trio.open_nursery() as race:
                race.start_soon(self._committed, write, race.cancel_scope)
                await lost.wait()  # unloaded first: as Kafka's runtime fails the pending writes of a partition
                write.error = _LeadershipLost(f"{self.topic}-{index} is no longer led here")
                race.cancel_scope.cancel()
        write.decided = True
        queue = self._writes[index]
        while queue and queue[0].decided:
            self._tell(queue.popleft())

    async def _committed(self, write: _Write, race: trio.CancelScope) -> None:
        try:
            await write.partition.wait_committed(write.last_offset, write.leader_epoch)
        except NotLeaderForEpoch as error:  # deposed before the records were committed: they may be gone
            logger.info("%s: records of %r not committed: %s", self.topic, write.key, error)
            write.error = error
        except OSError as error:
            logger.error("%s: records of %r not made durable: %s", self.topic, write.key, error)
            write.error = error
        race.cancel()

    def _tell(self, write: _Write) -> None:
        """The core learns the fate of ``write`` (failed too when a Persist before it in the same
        list failed: one request's records stand or fall together)."""
        if write.error is None and write.previous is not None and write.previous.error is not None:
            write.error = write.previous.error
        persist, now = write.persist, self.now_ms()
        try:
            if isinstance(write.error, _LeadershipLost):
                effects = []  # the core let the partition go: there is nothing of it to put back
            elif write.error is None:
                effects = persist.on_durable(now) if persist.on_durable is not None else []
            else:
                effects = persist.on_failure(_WRITE_FAILED, now) if persist.on_failure is not None else []
        finally:
            write.previous = None  # no chain of writes stays reachable
            write.settled.set()
        if effects:
            self.apply(write.key, effects)

    def _start_carrying_out(self, key: str, steps: list, done: trio.Event | None, failures: list | None) -> None:
        self._carrying_out += 1
        if self._idle.is_set():
            self._idle = trio.Event()
        self._nursery.start_soon(self._carry_out, key, steps, done, failures)

    async def _carry_out(self, key: str, steps: list, done: trio.Event | None, failures: list | None) -> None:
        failed = None
        try:
            for step in steps:
                if isinstance(step, Respond):
                    self._respond(step, failed)
                elif isinstance(step, _Write):
                    await step.settled.wait()
                    failed = failed or step.error
                elif failed is None:
                    await self.perform(key, step)
        except BaseException as error:  # cancelled (the runtime stops): not known to be written, so not a success
            failed = failed or error
            raise
        finally:
            if failures is not None and failed is not None:
                failures.append(failed)
            if done is not None:
                done.set()
            self._carrying_out -= 1
            if not self._carrying_out:
                self._idle.set()

    def _respond(self, step: Respond, failed: BaseException | None) -> None:
        waiter = self._waiters.get(step.waiter)
        if waiter is None or waiter.done.is_set():
            return
        if failed is not None and hasattr(step.response, "error_code"):
            step.response.error_code = _WRITE_FAILED  # what it depends on was not written
        waiter.response = step.response
        waiter.done.set()
