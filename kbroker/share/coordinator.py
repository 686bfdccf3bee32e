"""The share coordinator (KIP-932): the state of share-partitions, kept in ``__share_group_state``.

Kafka's ShareCoordinatorShard (share-coordinator/.../ShareCoordinatorShard.java) is the reference, at 4.2
with the fixes trunk made since (noted where they apply). One :class:`ShareCoordinatorShard` serves one
partition of ``__share_group_state``; a share-partition (group id, topic id, partition) belongs to the
partition :func:`state_partition` names. Pure: calls take ``now_ms`` and a wire request value and return
the response value and the effects (kbroker/effects.py) that a shell carries out.

What it keeps per share-partition (a StoredShareState, kbroker/share/state_records.py): the state epoch,
the start offset, the state batches (offset ranges AVAILABLE, ACKNOWLEDGED or ARCHIVED, each with its
delivery count), the leader epoch, and KIP-1226's delivery complete count. Its APIs:

- InitializeShareGroupState writes a ShareSnapshot with the state epoch and start offset (and nothing
  else: a fresh start). A lower state epoch than the last one is FENCED_STATE_EPOCH; the same state epoch
  and start offset again is answered without a record (trunk's idempotent initialize).
- WriteShareGroupState checks the state and leader epochs (lower than the last ones: FENCED_STATE_EPOCH,
  FENCED_LEADER_EPOCH) and records the write as a ShareUpdate, or as a ShareSnapshot once
  ``share.coordinator.snapshot.update.records.per.snapshot`` updates followed the last snapshot. A write
  sets neither epoch (Kafka 4.1+). Its start offset never moves the state's backwards, and the delivery
  complete count follows the start offsets (trunk: a write made before another that moved the start
  offset cannot undo it).
- ReadShareGroupState answers the state; a reader with a newer leader epoch has it recorded (a record
  with no batches), which fences the older leader's writes.
- ReadShareGroupStateSummary answers start offset, epochs and delivery complete count; start offset -1
  for a share-partition with no state.
- DeleteShareGroupState writes a tombstone.

Batches combine as Kafka's PersisterStateBatchCombiner does (state_records.combine_state_batches): where
batches overlap, the higher delivery count wins, and at the same count the higher state; ranges below the
start offset are dropped; touching equal ranges are joined.

Durability (DESIGN.md rule 11). A request's records go out as one ``Persist``, then its ``Respond``. What
requests are checked against is the state with every write on its way applied (Kafka's latest timeline
state); what answers show is the durable state: an answer that reads the state (Read, ReadSummary, a
repeated Initialize) is filled in once the writes before it are settled, from what is durable then. A
write that fails is dropped: the durable state never had it, and the writes still on their way are
applied again on top. The durable state is, at every moment, the replay of the records known durable, in
log order: :meth:`ShareCoordinatorShard.replay` rebuilds it at load.

Deliberate differences: a write whose batch ends before it begins is refused INVALID_REQUEST (Kafka fails
it with UNKNOWN_SERVER_ERROR); the cold-partition snapshots and the pruning of redundant records
(ShareCoordinatorOffsetsManager, DeleteRecords) are not done here.
"""

from __future__ import annotations

import base64
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kbroker.coordinator_records import coordinator_partition
from kbroker.effects import Persist, Respond
from kbroker.share.persisted import UNINITIALIZED_START_OFFSET, StateBatch
from kbroker.share.state_records import (DEFAULT_EPOCH, UNINITIALIZED_DELIVERY_COMPLETE_COUNT, ShareSnapshotKey,
                                         ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue, StoredShareState,
                                         apply_record, combine_state_batches, key_fields)
from kbroker.wire.errors import ErrorCode, error_name
from kbroker.wire.schema import API_BY_NAME

__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareCoordinatorConfig", "ShareCoordinatorShard", "coordinator_key",
           "state_partition"]

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
UPDATES_PER_SNAPSHOT_MAX = 500  # the top of Kafka's range for the setting

InitializeResponse = API_BY_NAME["InitializeShareGroupState"].response_class
ReadResponse = API_BY_NAME["ReadShareGroupState"].response_class
WriteResponse = API_BY_NAME["WriteShareGroupState"].response_class
DeleteResponse = API_BY_NAME["DeleteShareGroupState"].response_class
SummaryResponse = API_BY_NAME["ReadShareGroupStateSummary"].response_class
_ReadBatch = ReadResponse.ReadStateResult.PartitionResult.StateBatch

# Kafka's messages (ShareCoordinatorShard, Errors).
_NEGATIVE_PARTITION = "The partition id cannot be a negative number."
_NEGATIVE_LEADER_EPOCH = "The leader epoch cannot be a negative number."
_NEGATIVE_STATE_EPOCH = "The state epoch cannot be a negative number."
_WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
_READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
_FENCED_LEADER_EPOCH = "The leader epoch in the request is older than the epoch on the broker."
_FENCED_STATE_EPOCH = "The coordinator rejected the request because the state epoch did not match."
_UNKNOWN_PARTITION = "This server does not host this topic-partition."
_INVERTED_BATCH = "A state batch's last offset is below its first offset."

ShareKey = tuple[str, uuid.UUID, int]  # group id, topic id, partition


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    """Kafka's settings (ShareCoordinatorConfig), with its defaults."""

    # share.coordinator.state.topic.num.partitions; give the topic's actual count once it exists
    state_topic_partition_count: int = 50
    updates_per_snapshot: int = 500  # share.coordinator.snapshot.update.records.per.snapshot, 0..500

    def __post_init__(self) -> None:
        if self.state_topic_partition_count < 1:
            raise ValueError(f"__share_group_state needs a partition: {self}")
        if not 0 <= self.updates_per_snapshot <= UPDATES_PER_SNAPSHOT_MAX:
            raise ValueError(f"share.coordinator.snapshot.update.records.per.snapshot is 0..500: {self}")


# -- where a share-partition's state lives -----------------------------------------------------------------


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: ``group:topic:partition``, the topic id as Kafka prints
    a Uuid (URL-safe base64, unpadded)."""
    topic = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")
    return f"{group_id}:{topic}:{partition}"


def state_partition(group_id: str, topic_id: uuid.UUID, partition: int, partition_count: int) -> int:
    """The ``__share_group_state`` partition of a share-partition (ShareCoordinatorService.partitionFor)."""
    return coordinator_partition(coordinator_key(group_id, topic_id, partition), partition_count)


def _record_batches(value_class, batches: Sequence[StateBatch]) -> list:
    return [value_class.StateBatch(first_offset=batch.first_offset, last_offset=batch.last_offset,
                                   delivery_state=batch.delivery_state, delivery_count=batch.delivery_count)
            for batch in batches]


# -- the shard ---------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Write:
    """One request's records, appended and not yet durable."""

    records: list[tuple[object, object | None]]
    keys: set[ShareKey]


@dataclass(eq=False)
class _Handling:
    """What handling one request gathers: its records, and what to do with its answer once they, and the
    writes before them, are settled."""

    records: list[tuple[object, object | None]] = field(default_factory=list)
    unsettled: list = field(default_factory=list)  # partition results whose answer waits
    fills: list[Callable[[], None]] = field(default_factory=list)  # fill answers in from the durable state
    waits: bool = False  # an answer reads a share-partition that writes on their way change


class ShareCoordinatorShard:
    """The share-partition states of one ``__share_group_state`` partition (Kafka's ShareCoordinatorShard).
    ``topic_partition_count(topic_id)`` is the metadata's partition count of a topic, None for no such topic."""

    def __init__(self, partition: int, config: ShareCoordinatorConfig,
                 topic_partition_count: Callable[[uuid.UUID], int | None]) -> None:
        if not 0 <= partition < config.state_topic_partition_count:
            raise ValueError(f"{SHARE_GROUP_STATE_TOPIC} has no partition {partition}: {config}")
        self.partition = partition
        self.config = config
        self._topic_partition_count = topic_partition_count
        self._durable: dict[ShareKey, StoredShareState] = {}
        self._overlay: dict[ShareKey, StoredShareState | None] = {}  # durable + writes on their way, where they differ
        self._unwritten: list[_Write] = []  # in append order
        self._pending_keys: Counter[ShareKey] = Counter()  # share-partition -> writes on their way that change it

    # -- what is kept ---------------------------------------------------------------------------------------

    def state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StoredShareState | None:
        """The durable state of a share-partition (None: none)."""
        return self._durable.get((group_id, topic_id, partition))

    def states(self) -> dict[ShareKey, StoredShareState]:
        """Every durable share-partition state."""
        return dict(self._durable)

    @property
    def writes_in_flight(self) -> int:
        return len(self._unwritten)

    def replay(self, key, value) -> None:
        """A record read back from the partition at load (``value`` None for a tombstone)."""
        share_key = key_fields(key)
        self._put(self._durable, share_key, apply_record(self._durable.get(share_key), key, value,
                                                         self.config.updates_per_snapshot))
        if self._unwritten:
            self._rebuild_overlay()

    # -- the APIs -------------------------------------------------------------------------------------------

    def initialize_state(self, waiter: int | None, request, now_ms: int) -> tuple[object, list]:
        """InitializeShareGroupState: (response, effects)."""
        def answer(group_id, topic_id, data, handling):
            result = InitializeResponse.InitializeStateResult.PartitionResult(partition=data.partition)
            key = (group_id, topic_id, data.partition)
            refused = (self._refusal(key) or _negative(data.partition, _NEGATIVE_PARTITION)
                       or _negative(data.state_epoch, _NEGATIVE_STATE_EPOCH))
            current = self._current(key)
            if (refused is None and current is not None and current.state_epoch_seen is not None
                    and current.state_epoch_seen > data.state_epoch):
                refused = ErrorCode.FENCED_STATE_EPOCH, _FENCED_STATE_EPOCH
            refused = refused or self._unknown_partition(key)
            if refused is not None:
                return _refuse(result, refused)
            if (current is not None and current.state_epoch_seen == data.state_epoch
                    and current.persisted.start_offset == data.start_offset):
                if key in self._pending_keys:  # it says so once the writes that made it so are durable
                    handling.waits = True
                    handling.fills.append(lambda: self._confirm_initialized(result, key, data))
                    return _unsettled(result, handling)
                return result  # done already (trunk's idempotent initialize)
            self._stage(handling, ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=data.partition),
                        self._initialized(current, data, now_ms))
            return _unsettled(result, handling)

        return self._handle(waiter, request, InitializeResponse(), InitializeResponse.InitializeStateResult,
                            answer)

    def write_state(self, waiter: int | None, request, now_ms: int) -> tuple[object, list]:
        """WriteShareGroupState v0-1: (response, effects)."""
        def answer(group_id, topic_id, data, handling):
            result = WriteResponse.WriteStateResult.PartitionResult(partition=data.partition)
            key = (group_id, topic_id, data.partition)
            refused = (self._refusal(key) or _negative(data.partition, _NEGATIVE_PARTITION)
                       or _negative(data.leader_epoch, _NEGATIVE_LEADER_EPOCH)
                       or _negative(data.state_epoch, _NEGATIVE_STATE_EPOCH))
            if refused is None and any(batch.first_offset > batch.last_offset for batch in data.state_batches):
                refused = ErrorCode.INVALID_REQUEST, _INVERTED_BATCH
            current = self._current(key)
            if refused is None:
                refused = self._stale(current, data.leader_epoch, data.state_epoch, _WRITE_UNINITIALIZED)
            refused = refused or self._unknown_partition(key)
            if refused is not None:
                return _refuse(result, refused)
            batches = tuple(StateBatch(batch.first_offset, batch.last_offset, batch.delivery_state,
                                       batch.delivery_count) for batch in data.state_batches)
            self._stage(handling, *self._state_record(key, current, data.start_offset, data.delivery_complete_count,
                                                      batches, current.persisted.leader_epoch, now_ms))
            return _unsettled(result, handling)

        return self._handle(waiter, request, WriteResponse(), WriteResponse.WriteStateResult, answer)

    def read_state(self, waiter: int | None, request, now_ms: int) -> tuple[object, list]:
        """ReadShareGroupState: (response, effects). A newer leader epoch is recorded first."""
        def answer(group_id, topic_id, data, handling):
            result = ReadResponse.ReadStateResult.PartitionResult(partition=data.partition)
            key = (group_id, topic_id, data.partition)
            refused = (self._refusal(key) or _negative(data.partition, _NEGATIVE_PARTITION)
                       or _negative(data.leader_epoch, _NEGATIVE_LEADER_EPOCH))
            current = self._current(key)
            if refused is None:
                refused = self._stale(current, data.leader_epoch, None, _READ_UNINITIALIZED)
            refused = refused or self._unknown_partition(key)
            if refused is not None:
                return _refuse(result, refused)
            handling.waits |= key in self._pending_keys
            if current.leader_epoch_seen != data.leader_epoch:
                persisted = current.persisted
                self._stage(handling, *self._state_record(key, current, persisted.start_offset,
                                                          current.delivery_complete_count, (), data.leader_epoch,
                                                          now_ms))
            handling.fills.append(lambda: self._fill_read(result, key))
            return _unsettled(result, handling)

        return self._handle(waiter, request, ReadResponse(), ReadResponse.ReadStateResult, answer)

    def read_state_summary(self, waiter: int | None, request, now_ms: int) -> tuple[object, list]:
        """ReadShareGroupStateSummary v0-1: (response, effects); v1 answers the delivery complete count."""
        def answer(group_id, topic_id, data, handling):
            result = SummaryResponse.ReadStateSummaryResult.PartitionResult(partition=data.partition)
            key = (group_id, topic_id, data.partition)
            refused = (self._refusal(key) or _negative(data.partition, _NEGATIVE_PARTITION)
                       or self._unknown_partition(key))
            if refused is not None:
                return _refuse(result, refused)
            handling.waits |= key in self._pending_keys
            handling.fills.append(lambda: self._fill_summary(result, key))
            return _unsettled(result, handling)

        return self._handle(waiter, request, SummaryResponse(), SummaryResponse.ReadStateSummaryResult, answer)

    def delete_state(self, waiter: int | None, request, now_ms: int) -> tuple[object, list]:
        """DeleteShareGroupState: (response, effects); deleting what is not there is done already."""
        def answer(group_id, topic_id, data, handling):
            result = DeleteResponse.DeleteStateResult.PartitionResult(partition=data.partition)
            key = (group_id, topic_id, data.partition)
            refused = (self._refusal(key) or _negative(data.partition, _NEGATIVE_PARTITION)
                       or self._unknown_partition(key))
            if refused is not None:
                return _refuse(result, refused)
            if self._current(key) is None and self._durable.get(key) is None:
                return result
            self._stage(handling, ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=data.partition),
                        None)
            return _unsettled(result, handling)

        return self._handle(waiter, request, DeleteResponse(), DeleteResponse.DeleteStateResult, answer)

    # -- checks ---------------------------------------------------------------------------------------------

    def _refusal(self, key: ShareKey) -> tuple[int, str | None] | None:
        """NOT_COORDINATOR for a share-partition whose state another partition keeps (Kafka's runtime)."""
        group_id, topic_id, partition = key
        if partition >= 0 and state_partition(group_id, topic_id, partition,
                                              self.config.state_topic_partition_count) != self.partition:
            return ErrorCode.NOT_COORDINATOR, None
        return None

    def _unknown_partition(self, key: ShareKey) -> tuple[int, str] | None:
        partition_count = self._topic_partition_count(key[1])
        if partition_count is None or key[2] >= partition_count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_PARTITION
        return None

    @staticmethod
    def _stale(current: StoredShareState | None, leader_epoch: int, state_epoch: int | None,
               uninitialized: str) -> tuple[int, str] | None:
        if current is None:
            return ErrorCode.INVALID_REQUEST, uninitialized
        if current.leader_epoch_seen > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, _FENCED_LEADER_EPOCH
        if state_epoch is not None and current.state_epoch_seen is not None and current.state_epoch_seen > state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH, _FENCED_STATE_EPOCH
        return None

    # -- the records ----------------------------------------------------------------------------------------

    @staticmethod
    def _initialized(current: StoredShareState | None, data, now_ms: int):
        """A fresh start (Kafka's ShareGroupOffset.fromRequest): no batches, leader epoch 0; a delivery
        complete count of 0 once the start offset is known (KAFKA-20034)."""
        return ShareSnapshotValue(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1, state_epoch=data.state_epoch,
            leader_epoch=DEFAULT_EPOCH, start_offset=data.start_offset,
            delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT
            if data.start_offset == UNINITIALIZED_START_OFFSET else 0,
            create_timestamp=now_ms, write_timestamp=now_ms, state_batches=[])

    def _state_record(self, key: ShareKey, current: StoredShareState, start_offset: int, delivery_complete_count: int,
                      batches: tuple[StateBatch, ...], leader_epoch: int, now_ms: int) -> tuple[object, object]:
        """A write (or a reader's leader epoch) as a ShareUpdate, or as a ShareSnapshot once enough updates
        followed the last one (Kafka's generateShareStateRecord)."""
        before = current.persisted
        new_start_offset = max(start_offset, before.start_offset)  # never backwards (trunk)
        if start_offset < before.start_offset:  # a write older than the one that moved it (trunk)
            delivery_complete_count = current.delivery_complete_count
        elif start_offset == before.start_offset:
            delivery_complete_count = max(delivery_complete_count, current.delivery_complete_count)
        group_id, topic_id, partition = key
        if current.updates_since_snapshot >= self.config.updates_per_snapshot:
            return ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=partition), ShareSnapshotValue(
                snapshot_epoch=current.snapshot_epoch + 1, state_epoch=before.state_epoch, leader_epoch=leader_epoch,
                start_offset=new_start_offset, delivery_complete_count=delivery_complete_count,
                create_timestamp=now_ms, write_timestamp=now_ms,
                state_batches=_record_batches(ShareSnapshotValue, combine_state_batches(
                    before.state_batches, batches, new_start_offset)))
        return ShareUpdateKey(group_id=group_id, topic_id=topic_id, partition=partition), ShareUpdateValue(
            snapshot_epoch=current.snapshot_epoch, leader_epoch=leader_epoch, start_offset=new_start_offset,
            delivery_complete_count=delivery_complete_count,
            state_batches=_record_batches(ShareUpdateValue, combine_state_batches((), batches, new_start_offset)))

    # -- answering ------------------------------------------------------------------------------------------

    def _handle(self, waiter: int | None, request, response, topic_result_class, answer) -> tuple[object, list]:
        """Answer every share-partition of ``request``; Kafka answers an empty response to a request
        without a group id, topics, or partitions of a topic."""
        handling = _Handling()
        if request.group_id and request.topics and all(topic.partitions for topic in request.topics):
            response.results = [
                topic_result_class(topic_id=topic.topic_id,
                                   partitions=[answer(request.group_id, topic.topic_id, data, handling)
                                               for data in topic.partitions])
                for topic in request.topics]
        return response, self._effects(waiter, response, handling)

    def _effects(self, waiter: int | None, response, handling: _Handling) -> list:
        respond = [] if waiter is None else [Respond(waiter, response)]
        if not handling.records and not handling.waits:
            _answer_settled(handling)  # nothing on its way touches what it reads
            return respond
        write = None
        if handling.records:
            write = _Write(handling.records, {key_fields(key) for key, _ in handling.records})
            self._unwritten.append(write)
            self._pending_keys.update(write.keys)

        def durable(now_ms: int) -> list:
            if write is not None:
                self._write_durable(write)
            _answer_settled(handling)
            return []

        def failed(error_code: int, now_ms: int) -> list:
            if write is not None:
                self._write_failed(write)
            for result in handling.unsettled:
                result.error_code = error_code
                result.error_message = f"Unable to write share group state: {error_name(error_code)}"
            return []

        # An empty Persist waits for the writes before it: the shell settles a partition's writes in order.
        return [Persist(tuple(handling.records), on_durable=durable, on_failure=failed), *respond]

    def _fill_read(self, result, key: ShareKey) -> None:
        stored = self._durable.get(key)
        if stored is None:  # the write that initialized it failed
            _refuse(result, (ErrorCode.INVALID_REQUEST, _READ_UNINITIALIZED))
            return
        persisted = stored.persisted
        result.state_epoch, result.start_offset = persisted.state_epoch, persisted.start_offset
        result.state_batches = [_ReadBatch(first_offset=batch.first_offset, last_offset=batch.last_offset,
                                           delivery_state=batch.delivery_state, delivery_count=batch.delivery_count)
                                for batch in persisted.state_batches]

    def _fill_summary(self, result, key: ShareKey) -> None:
        stored = self._durable.get(key)
        if stored is None:
            result.state_epoch, result.leader_epoch = DEFAULT_EPOCH, DEFAULT_EPOCH
            result.start_offset = UNINITIALIZED_START_OFFSET
            result.delivery_complete_count = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
            return
        persisted = stored.persisted
        result.state_epoch, result.leader_epoch = persisted.state_epoch, persisted.leader_epoch
        result.start_offset, result.delivery_complete_count = persisted.start_offset, stored.delivery_complete_count

    def _confirm_initialized(self, result, key: ShareKey, data) -> None:
        """A repeated initialize: done if the writes it repeated are durable, else retriable."""
        stored = self._durable.get(key)
        if (stored is None or stored.state_epoch_seen != data.state_epoch
                or stored.persisted.start_offset != data.start_offset):
            _refuse(result, (ErrorCode.COORDINATOR_NOT_AVAILABLE, None))

    # -- the two layers -------------------------------------------------------------------------------------

    def _current(self, key: ShareKey) -> StoredShareState | None:
        """The state with every write on its way applied: what requests are checked against."""
        if key in self._overlay:
            return self._overlay[key]
        return self._durable.get(key)

    def _stage(self, handling: _Handling, key, value) -> None:
        share_key = key_fields(key)
        self._overlay[share_key] = apply_record(self._current(share_key), key, value,
                                                self.config.updates_per_snapshot)
        handling.records.append((key, value))

    def _write_durable(self, write: _Write) -> None:
        if write not in self._unwritten:
            return
        for key, value in write.records:
            share_key = key_fields(key)
            self._put(self._durable, share_key, apply_record(self._durable.get(share_key), key, value,
                                                             self.config.updates_per_snapshot))
        in_order = self._unwritten[0] is write
        self._settle(write)
        if not in_order:
            self._rebuild_overlay()
            return
        for share_key in write.keys:
            if share_key not in self._pending_keys:
                self._overlay.pop(share_key, None)  # the durable state is what it says now

    def _write_failed(self, write: _Write) -> None:
        if write in self._unwritten:
            self._settle(write)
            self._rebuild_overlay()

    def _settle(self, write: _Write) -> None:
        self._unwritten.remove(write)
        self._pending_keys.subtract(write.keys)
        for share_key in write.keys:
            if self._pending_keys[share_key] <= 0:
                del self._pending_keys[share_key]

    def _rebuild_overlay(self) -> None:
        """The durable state with the writes still on their way applied again, in append order."""
        self._overlay = {}
        for write in self._unwritten:
            for key, value in write.records:
                share_key = key_fields(key)
                self._overlay[share_key] = apply_record(self._current(share_key), key, value,
                                                        self.config.updates_per_snapshot)

    @staticmethod
    def _put(states: dict[ShareKey, StoredShareState], key: ShareKey, stored: StoredShareState | None) -> None:
        if stored is None:
            states.pop(key, None)
        else:
            states[key] = stored


def _negative(value: int, message: str) -> tuple[int, str] | None:
    return (ErrorCode.INVALID_REQUEST, message) if value < 0 else None


def _refuse(result, refusal: tuple[int, str | None]):
    result.error_code, result.error_message = refusal
    return result


def _answer_settled(handling: _Handling) -> None:
    """The request's records and the writes before them are durable: its answers are given."""
    for result in handling.unsettled:
        result.error_code, result.error_message = ErrorCode.NONE, None
    for fill in handling.fills:
        fill()


def _unsettled(result, handling: _Handling):
    """A result answered once its records are durable; NOT_COORDINATOR until then, which is what the
    requester hears if the partition moves to another broker before they are."""
    result.error_code = ErrorCode.NOT_COORDINATOR
    handling.unsettled.append(result)
    return result
