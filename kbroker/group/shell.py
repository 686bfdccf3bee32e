"""The trio shell around the group coordinator: storage, waiters, timers and loading.

Records the cores ask for are appended to their ``__consumer_offsets``
partition as one batch and answered only once fsynced; answers that depend on
them (a SyncGroup, an OffsetCommit) leave after that. Effects run in the
shell's own nursery, so a client that hangs up in the middle cannot strand
the answers of the other members.
"""

from __future__ import annotations

import logging
import time

import trio

from kbroker.group.effects import GroupError, Persist, Respond
from kbroker.topics import TopicError, TopicRequest, plan_topic
from log.producer_state import read_txn_marker
from wire import DecodeError
from wire.errors import ErrorCode
from wire.records import ControlRecordType, Record, build_batch, decode_records, iter_batches

logger = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_LOAD_READ_BYTES = 1 << 20
_LOAD_RECORDS_PER_TURN = 1000
_WAITER_LIMIT_S = 30 * 60 + 60  # beyond the longest rebalance timeout a client may ask for
_TIMER_IDLE_S = 1.0  # the timer task's longest sleep: also how often offsets' retention is checked at most


def now_ms() -> int:
    return int(time.time() * 1000)


def coordinator_config(config):
    """The coordinator's settings from the broker's (Kafka's names)."""
    from kbroker.group.classic import ClassicGroupConfig
    from kbroker.group.consumer import ConsumerGroupConfig
    from kbroker.group.coordinator import CoordinatorConfig

    return CoordinatorConfig(
        partition_count=config.offsets_topic_num_partitions,
        classic=ClassicGroupConfig(
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            max_size=config.group_max_size,
        ),
        consumer=ConsumerGroupConfig(
            session_timeout_ms=config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            max_size=config.group_consumer_max_size,
        ),
        offsets_retention_ms=config.offsets_retention_minutes * 60_000,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
    )


class _Waiter:
    def __init__(self) -> None:
        self.response = None
        self.done = trio.Event()


class GroupShell:
    def __init__(self, broker) -> None:
        self.broker = broker
        self._coordinator = None  # made, and the group cores imported, at the first group request or load
        self._waiters: dict[int, _Waiter] = {}
        self._next_waiter = 0
        self._nursery: trio.Nursery | None = None
        self._timers_changed = trio.Event()
        self._retention_check_ms = broker.config.offsets_retention_check_interval_ms
        self._next_retention_check_ms = 0
        self._topics_view: tuple[object, object] = (None, None)

    @property
    def coordinator(self):
        if self._coordinator is None:
            from kbroker.group.coordinator import GroupCoordinator

            self._coordinator = GroupCoordinator(coordinator_config(self.broker.config))
        return self._coordinator

    # -- running ----------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if OFFSETS_TOPIC in self.broker.image.topics:
                self._load_all()
            task_status.started()
            await self._fire_timers()

    def _load_all(self) -> None:
        for partition in range(len(self.broker.image.topics[OFFSETS_TOPIC].partitions)):
            if partition not in self.coordinator.loaded and partition not in self.coordinator.loading:
                self.coordinator.begin_load(partition)
                self._nursery.start_soon(self._load, partition)

    async def _load(self, partition: int) -> None:
        """Rebuild the partition's groups from its records, yielding between reads."""
        log = self.broker.partition(OFFSETS_TOPIC, partition).log
        offset, end, count = log.log_start_offset, log.log_end_offset, 0
        started = time.monotonic()
        while offset < end:
            region = log.read(offset, _LOAD_READ_BYTES, upper_bound=end)
            if region is None:
                break
            data = region.read()
            for position, header in iter_batches(data, allow_partial_tail=True):
                offset = header.last_offset + 1
                if header.is_control:  # a transaction's end: its offset commits count, or not
                    marker = read_txn_marker(data, position)
                    if marker is not None:
                        self.coordinator.transaction_ended(partition, header.producer_id,
                                                           marker.kind == ControlRecordType.COMMIT)
                    continue
                try:
                    _, batch_records = decode_records(data, position)
                except DecodeError as error:
                    logger.warning("%s-%d: skipping an unreadable batch at %d: %s", OFFSETS_TOPIC, partition, header.base_offset, error)
                    continue
                producer_id = header.producer_id if header.is_transactional else None
                for record in batch_records:
                    self._replay(partition, record, producer_id)
                    count += 1
                    if count % _LOAD_RECORDS_PER_TURN == 0:  # other requests are served meanwhile
                        await trio.lowlevel.checkpoint()
            await trio.lowlevel.checkpoint()
        self.coordinator.finish_load(partition, now_ms())
        self._timers_changed.set()
        if count:
            logger.info("%s-%d: %d group records loaded in %.0f ms", OFFSETS_TOPIC, partition, count,
                        (time.monotonic() - started) * 1000)

    def _replay(self, partition: int, record: Record, producer_id: int | None = None) -> None:
        from kbroker.group import records

        if record.key is None:
            return
        try:
            key = records.decode_key(record.key)
            value = records.decode_value(key, record.value)
        except DecodeError as error:
            logger.warning("%s-%d: skipping a record: %s", OFFSETS_TOPIC, partition, error)
            return
        if producer_id is not None and isinstance(key, records.OffsetCommitKey):
            self.coordinator.offsets.replay_transactional(producer_id, key, value)
        else:
            self.coordinator.replay(key, value, now_ms())

    async def _fire_timers(self) -> None:
        while self._coordinator is None:  # nothing to time before the first group request or load
            await self._timers_changed.wait()
            self._timers_changed = trio.Event()
        while True:
            now = now_ms()
            if self._topics_view[0] is not self.broker.image:
                for group_id, effects in self.coordinator.topics_changed(self.topics_view(), now):
                    self.apply(group_id, effects)
            for group_id, effects in self.coordinator.tick(now, self.topics_view()):
                self.apply(group_id, effects)
            if now >= self._next_retention_check_ms:
                self._next_retention_check_ms = now + self._retention_check_ms
                for group_id, effects in self.coordinator.expire_offsets(now):
                    self.apply(group_id, effects)
            due = self.coordinator.next_deadline_ms()
            sleep_s = _TIMER_IDLE_S if due is None else min(_TIMER_IDLE_S, max(0, due - now) / 1000)
            with trio.move_on_after(sleep_s):
                await self._timers_changed.wait()
            self._timers_changed = trio.Event()

    # -- what handlers use ----------------------------------------------------------

    def transaction_ended(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written to offsets partition ``partition`` (kbroker/txn/markers.py)."""
        self.coordinator.transaction_ended(partition, producer_id, commit)

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` at the first group request, as Kafka does."""
        broker = self.broker
        if OFFSETS_TOPIC in broker.image.topics:
            return
        config = broker.config
        request = TopicRequest(OFFSETS_TOPIC, config.offsets_topic_num_partitions, config.offsets_topic_replication_factor, {},
                               {"cleanup.policy": "compact", "compression.type": "producer",
                                "segment.bytes": str(config.offsets_topic_segment_bytes)})
        try:
            plans = plan_topic(broker.image, request, default_partitions=config.num_partitions,
                               default_replication=config.default_replication_factor, known_configs={"cleanup.policy",
                               "compression.type", "segment.bytes"})
        except TopicError as error:
            raise GroupError(error.error_code, str(error)) from None
        broker.commit(plans)
        self._load_all()

    def new_waiter(self) -> int:
        self._next_waiter += 1
        self._waiters[self._next_waiter] = _Waiter()
        return self._next_waiter

    def deferred(self, waiter_id: int):
        """The handler's answer: whatever the cores give ``waiter_id``, once they give it."""
        from kbroker.handlers import Deferred  # the handlers import this module

        waiter = self._waiters[waiter_id]
        answer = Deferred(None, None)

        async def ready() -> None:
            with trio.move_on_after(_WAITER_LIMIT_S):
                await waiter.done.wait()
            self._waiters.pop(waiter_id, None)
            if not waiter.done.is_set():
                raise GroupError(0, "a group request was never answered")  # a core bug: close the connection
            answer.response = waiter.response

        answer.ready = ready
        return answer

    def apply(self, group_id: str, effects: list) -> None:
        """Carry out ``effects`` in order, in the background."""
        steps = self._stage(group_id, effects)
        if steps:
            self._nursery.start_soon(self._carry_out, group_id, steps, None, None)

    async def wait_applied(self, group_id: str, effects: list) -> bool:
        """Carry out ``effects`` and wait until done; False if a write failed. (Done in the
        background all the same, so that the caller's cancellation cannot cut the answers
        to other members short.)"""
        steps = self._stage(group_id, effects)
        if not steps:
            return True
        done, failures = trio.Event(), []
        self._nursery.start_soon(self._carry_out, group_id, steps, done, failures)
        await done.wait()
        return not failures

    def _stage(self, group_id: str, effects: list) -> list:
        """Append the records now, in the order the cores asked (replay depends on it);
        what is left to do is waiting for their fsync and answering."""
        self.coordinator.after(group_id, effects)
        self._timers_changed.set()
        steps = []
        for effect in effects:
            if isinstance(effect, Persist):
                if effect.records:
                    steps.append(self._append(group_id, effect.records, effect.producer))
            else:
                steps.append(effect)
        return steps

    def _append(self, group_id: str, pairs, producer: tuple[int, int] | None = None):
        """``(partition, last offset)`` of the appended batch, or the error that stopped it."""
        from kbroker.group import records

        index = self.coordinator.partition_of(group_id)
        try:
            batch = build_batch(
                [Record(offset_delta=i, key=records.encode_key(key),
                        value=None if value is None else records.encode_value(value))
                 for i, (key, value) in enumerate(pairs)],
                base_timestamp=now_ms(),
                **({} if producer is None else {"producer_id": producer[0], "producer_epoch": producer[1], "transactional": True}),
            )
            partition = self.broker.partition(OFFSETS_TOPIC, index)
            appended = partition.log.append(bytearray(batch), leader_epoch=partition.leader_epoch, origin="coordinator")
        except (OSError, KeyError) as error:
            logger.error("%s-%d: group %r records not written: %s", OFFSETS_TOPIC, index, group_id, error)
            return error
        return partition, appended.last_offset

    async def _carry_out(self, group_id: str, steps: list, done: trio.Event | None, failures: list | None) -> None:
        failed = None
        try:
            for step in steps:
                if isinstance(step, Respond):
                    self._respond(step, failed)
                elif failed is not None:
                    continue
                elif isinstance(step, BaseException):
                    failed = step
                else:
                    partition, last_offset = step
                    try:
                        await partition.wait_durable(last_offset)
                    except OSError as error:
                        logger.error("group %r records not made durable: %s", group_id, error)
                        failed = error
        finally:
            if failures is not None and failed is not None:
                failures.append(failed)
            if done is not None:
                done.set()

    def _respond(self, step: Respond, failed: BaseException | None) -> None:
        waiter = self._waiters.get(step.waiter)
        if waiter is None or waiter.done.is_set():
            return
        if failed is not None and hasattr(step.response, "error_code"):
            step.response.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE  # what it depends on was not written
        waiter.response = step.response
        waiter.done.set()

    def topics_view(self):
        """The image's topics as the consumer-group core sees them (internal ones left out), per image."""
        from kbroker.group.consumer import TopicsView

        image = self.broker.image
        if self._topics_view[0] is not image:
            view = TopicsView(by_name={name: (topic.topic_id, len(topic.partitions)) for name, topic in image.topics.items()
                                       if not topic.is_internal})
            self._topics_view = (image, view)
        return self._topics_view[1]
