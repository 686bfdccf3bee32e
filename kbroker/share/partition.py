"""One share-partition (KIP-932): how one share group consumes one topic-partition, kept by that partition's leader.

Kafka's SharePartition (core/src/main/java/kafka/server/share/SharePartition.java) is the reference. Pure:
inputs carry ``now_ms``, answers are values; no I/O, no trio, no clock.

Offsets. The start offset (SPSO) is the first record whose delivery is not over; the end offset (SPEO; here
exclusive: the next offset never met) is where new records begin. Every record in between is in exactly one
state (kbroker/share/in_flight.py keeps them as ranges): AVAILABLE, ACQUIRED by one member until its
acquisition lock runs out, ACKNOWLEDGED or ARCHIVED, each with its delivery count. The start offset moves
past a prefix of finished (acknowledged or archived) records, which are then forgotten. New records are
acquired only while the window holds fewer than ``group.share.partition.max.record.locks`` records.

Transitions (Kafka's):
- acquire: AVAILABLE -> ACQUIRED (released or timed-out records first, then new ones), delivery count + 1,
  lock deadline ``now + config.record_lock_duration_ms`` (the group's share.record.lock.duration.ms, which
  the shell sets in ``config`` before each acquisition, as Kafka reads it at each);
- acknowledge by the member holding the records: accept -> ACKNOWLEDGED; release -> AVAILABLE, or ARCHIVED
  once the delivery count reached ``group.share.delivery.count.limit``; reject and gap -> ARCHIVED. Any
  record not ACQUIRED by that member (or whose lock has run out) refuses the whole call INVALID_RECORD_STATE;
  offsets past the end offset, INVALID_REQUEST; batches below the start offset are done already and skipped;
- a lock running out, a member leaving: its ACQUIRED records are released as above, delivery count kept;
- facts read from the log: offsets with no record (compacted away, between fetched batches) and records of
  aborted transactions (read_committed) are ARCHIVED, never delivered; a log start offset that moved
  (DeleteRecords, retention) drops every record below it.

Durability (DESIGN.md rule 11). An acknowledgement, a member leaving and an expired lock change what the
share coordinator keeps for the next leader, so none of them shows at once. The call returns a
:class:`StateWrite`: WriteShareGroupState's partition data (state epoch, leader epoch, start offset, and
the state batches it changes) and marks those records pending. Pending records stay ACQUIRED by their
member, and nothing else may touch them: they are not acquired, acknowledged or released again, and their
lock does not run out. The shell sends the write and reports its fate:

- ``write_durable(write)``: the change happens (records acknowledged, archived or available again; the start
  offset moves); the outcome's error code, NONE, is the answer to the acknowledgement;
- ``write_failed(write, error_code)``: it never happened: the records are ACQUIRED as before; the outcome
  carries the error to answer (Kafka's mapping of the persister's error). A lock that ran out meanwhile is
  expired by the next ``expire_locks``, which writes again (``next_deadline_ms`` then lies in the past: the
  shell paces such retries); a fencing error marks the partition fenced, and it refuses everything after.

Writes cover disjoint records, so their fates are independent. Each carries the start offset as it stands
when it is made (as Kafka's do: the move that a write causes is carried by the next one), and the
coordinator forgets state below the start offset it is given: send a partition's writes in the order they
were made. Not written: acquisitions (as in Kafka, a new leader redelivers the records that were acquired,
with the delivery count last written) and facts read from the log, which a new leader reads again.
``persisted_state()`` is the whole durable view in the same shape, for a snapshot or a first write, and
``SharePartition.from_state`` resumes from what ReadShareGroupState returns.

Where this differs from Kafka, deliberately: an expired lock waits for its write like every other change
(Kafka releases at once and writes best effort); records delivered again round ``max_records`` up to the
end of their log batch (Kafka's, to the end of the run they were first acquired in); offsets between
fetched batches are archived rather than handed to the client to acknowledge as gaps; records acquired when
their leader goes are resumed as released, so at the delivery count limit they are archived, not delivered
once more.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kbroker.share.in_flight import InFlightRange, InFlightRecords, RecordState
from kbroker.share.persisted import (FENCING_ERRORS, UNINITIALIZED_START_OFFSET, PersistedState, StateBatch, StateWrite,
                                     WriteOutcome, answer_for_write_error)
from kbroker.wire.errors import ErrorCode

__all__ = ["AcknowledgeResult", "AcknowledgeType", "AcknowledgementBatch", "AcquiredRecords", "SharePartition",
           "SharePartitionConfig", "SharePartitionCounters", "validate_acknowledgement_batches"]


class AcknowledgeType(enum.IntEnum):
    """ShareFetch's and ShareAcknowledge's AcknowledgeTypes (Kafka's AcknowledgeType, and GAP for no record)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass(frozen=True)
class SharePartitionConfig:
    """Kafka's settings, with Kafka's defaults (ShareGroupConfig; share.auto.offset.reset is a group config)."""

    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_record_locks: int = 200  # group.share.partition.max.record.locks
    auto_offset_reset: str = "latest"  # share.auto.offset.reset: earliest or latest

    def __post_init__(self) -> None:
        if min(self.record_lock_duration_ms, self.delivery_count_limit, self.max_record_locks) < 1:
            raise ValueError(f"share-partition settings must be positive: {self}")
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(f"share.auto.offset.reset is earliest or latest, not {self.auto_offset_reset!r}")


@dataclass(frozen=True)
class AcquiredRecords:
    """ShareFetch's AcquiredRecords: these offsets are now the member's, delivered for the n-th time."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AcknowledgementBatch:
    """One AcknowledgementBatch of ShareFetch or ShareAcknowledge: one type for every record of the batch,
    or one type per record."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True)
class AcknowledgeResult:
    """Either refused now (``error_code``, nothing changed) or a write whose fate gives the answer."""

    error_code: int = ErrorCode.NONE
    write: StateWrite | None = None


@dataclass(frozen=True)
class SharePartitionCounters:
    in_flight_records: int  # from the start offset to the end offset
    acquired_records: int
    available_records: int
    pending_writes: int
    acquired_records_total: int  # deliveries, first ones and redeliveries
    redelivered_records_total: int
    acknowledged_records_total: int
    archived_records_total: int


def validate_acknowledgement_batches(batches: Sequence[AcknowledgementBatch]) -> int:
    """INVALID_REQUEST for batches Kafka refuses before reading any state (KafkaApis.validateAcknowledgementBatches):
    first offset past the last, out of order, no types, a type count that is neither one nor one per record, an
    unknown type. NONE otherwise."""
    previous_last_offset = -1
    for batch in batches:
        types = batch.acknowledge_types
        if (batch.first_offset > batch.last_offset or batch.first_offset < previous_last_offset or not types
                or (len(types) > 1 and len(types) != batch.last_offset - batch.first_offset + 1)
                or min(types) < AcknowledgeType.GAP or max(types) > AcknowledgeType.REJECT):
            return ErrorCode.INVALID_REQUEST
        previous_last_offset = batch.last_offset
    return ErrorCode.NONE


# One change of a write: records first..last become state with delivery count.
_Change = tuple[int, int, RecordState, int]
_NO_BOUND = 1 << 63  # past every offset


class SharePartition:
    def __init__(self, config: SharePartitionConfig, start_offset: int, *, state_epoch: int = 0,
                 leader_epoch: int = -1) -> None:
        if start_offset < 0:
            raise ValueError(f"a share-partition cannot start at offset {start_offset}")
        self.config = config
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        self.fenced = False  # a write was refused as stale: the coordinator knows a newer leader or state
        self._records = InFlightRecords(start_offset)
        self._pending: dict[int, list[_Change]] = {}  # write id -> its changes, not yet durable
        self._next_write_id = 1
        self._acquired_total = self._redelivered_total = self._acknowledged_total = self._archived_total = 0

    @classmethod
    def from_state(cls, state: PersistedState, config: SharePartitionConfig, *, leader_epoch: int,
                   log_start_offset: int, log_end_offset: int) -> SharePartition:
        """A new leader's share-partition, from what ReadShareGroupState returned: records that were acquired
        are released, delivery counts kept (AVAILABLE, or ARCHIVED at the limit); offsets the state does not
        mention are AVAILABLE, never delivered as far as it knows. Without state, the share-partition starts
        where ``share.auto.offset.reset`` says: at the log's start (earliest) or end (latest). Then records
        below the log start offset are dropped. ValueError for state batches out of order, overlapping, below
        the start offset, or of an unknown delivery state: a state that cannot be loaded."""
        start_offset = state.start_offset
        if start_offset == UNINITIALIZED_START_OFFSET:
            start_offset = log_start_offset if config.auto_offset_reset == "earliest" else log_end_offset
        partition = cls(config, start_offset, state_epoch=state.state_epoch, leader_epoch=leader_epoch)
        partition._load(state.state_batches)
        partition.move_start_offset(max(log_start_offset, partition.start_offset))
        partition._advance_start()
        return partition

    def _load(self, state_batches: Iterable[StateBatch]) -> None:
        records = self._records
        for batch in state_batches:
            if not records.end_offset <= batch.first_offset <= batch.last_offset or batch.delivery_count < 0:
                raise ValueError(f"state batch {batch} is out of order, overlaps, or lies below start offset "
                                 f"{records.start_offset}")
            try:
                state = RecordState(batch.delivery_state)
            except ValueError:
                raise ValueError(f"state batch {batch} has an unknown delivery state") from None
            if batch.first_offset > records.end_offset:
                records.extend(batch.first_offset - 1, RecordState.AVAILABLE, 0)
            if state is RecordState.ACQUIRED:  # its lock did not outlive its leader: released
                state = self._release_state(batch.delivery_count)
            records.extend(batch.last_offset, state, batch.delivery_count)

    # -- views ------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._records.start_offset

    @property
    def end_offset(self) -> int:
        """The next offset never met: new records are fetched from here."""
        return self._records.end_offset

    def in_flight(self) -> list[InFlightRange]:
        """Copies of the ranges from the start offset to the end offset, in offset order."""
        return [dataclasses.replace(in_flight) for in_flight in self._records]

    def next_fetch_offset(self) -> int:
        """Where a fetch for this share-partition reads the log from: the first record available again, or the
        end offset (Kafka's nextFetchOffset)."""
        for in_flight in self._records:
            if in_flight.state is RecordState.AVAILABLE:
                return in_flight.first_offset
        return self._records.end_offset

    def next_deadline_ms(self) -> int | None:
        """When the earliest acquisition lock runs out (records under a write on its way excepted)."""
        return min((in_flight.lock_deadline_ms for in_flight in self._records
                    if in_flight.state is RecordState.ACQUIRED and in_flight.write_id is None), default=None)

    def counters(self) -> SharePartitionCounters:
        acquired = available = 0
        for in_flight in self._records:
            if in_flight.state is RecordState.ACQUIRED:
                acquired += in_flight.record_count
            elif in_flight.state is RecordState.AVAILABLE:
                available += in_flight.record_count
        return SharePartitionCounters(self._records.record_count, acquired, available, len(self._pending),
                                      self._acquired_total, self._redelivered_total, self._acknowledged_total,
                                      self._archived_total)

    def persisted_state(self) -> PersistedState:
        """Everything the share coordinator needs to resume this share-partition, in WriteShareGroupState's shape
        (for a snapshot or a first write): the durable view, so pending changes are not in it, and acquired
        records are written as released (Kafka never writes ACQUIRED): available, or archived once their
        delivery count reached the limit, so that leader after leader cannot deliver a record past it."""
        batches: list[StateBatch] = []
        for in_flight in self._records:
            state = in_flight.state
            if state is RecordState.ACQUIRED:  # what a lock lost with this leader comes to: released
                state = self._release_state(in_flight.delivery_count)
            previous = batches[-1] if batches else None
            if previous and (previous.delivery_state, previous.delivery_count) == (state, in_flight.delivery_count):
                batches[-1] = dataclasses.replace(batches[-1], last_offset=in_flight.last_offset)
            else:
                batches.append(StateBatch(in_flight.first_offset, in_flight.last_offset, int(state),
                                          in_flight.delivery_count))
        return PersistedState(self.state_epoch, self.start_offset, tuple(batches), self.leader_epoch)

    # -- acquisition -------------------------------------------------------------------------

    def acquire(self, member_id: str, max_records: int, fetched_batches: Sequence[tuple[int, int]], now_ms: int, *,
                aborted: Sequence[tuple[int, int]] = (), whole_batches: bool = False,
                batch_size: int = 0) -> list[AcquiredRecords]:
        """Acquires up to ``max_records`` for ``member_id``: records available again first (their bytes are read
        from :meth:`next_fetch_offset`; none past the last of ``fetched_batches``, when given, as their bytes
        were not read), then new ones from ``fetched_batches``, the (base offset, last offset) of the batches
        the log returned, ascending; what they hold below the end offset is in flight already.
        ``aborted``: (first, last) offsets of aborted transactions' records (read_committed), archived and
        never delivered.

        ``whole_batches`` is ShareFetch's batch_optimized acquire mode (Kafka's default, and all that v1 knows):
        ``max_records`` is checked at batch ends, so the fetched batch holding the record that reaches it is
        acquired to its end, its available and new records alike; without it (record_limit) ``max_records`` is
        exact. New records longer than ``batch_size`` (when positive) are answered in runs cut where a fetched
        batch begins ``batch_size`` or more past the run's start (Kafka's SharePartition.createBatches).

        Returns the acquired offsets in order: records available again with runs sharing a delivery count
        joined, then the new ones."""
        batches = _checked_batches(fetched_batches)
        aborted_ranges = _union(aborted)
        if self.fenced or max_records <= 0:
            return []
        lock_deadline_ms = now_ms + self.config.record_lock_duration_ms
        read_up_to = batches[-1][1] if batches else _NO_BOUND
        again = self._acquire_available(member_id, max_records, read_up_to, aborted_ranges, lock_deadline_ms)
        remaining = max_records - _record_count(again)
        new = self._acquire_new(batches, aborted_ranges, member_id, remaining, lock_deadline_ms)
        remaining -= _record_count(new)
        if whole_batches and remaining <= 0:
            last_offset = (new or again)[-1].last_offset
            batch_end = _batch_end(batches, last_offset)
            if batch_end > last_offset:  # the rest of the batch that reached max_records
                again += self._acquire_available(member_id, batch_end - last_offset, batch_end, aborted_ranges,
                                                 lock_deadline_ms)
                new += self._acquire_new(batches, aborted_ranges, member_id, batch_end - last_offset,
                                         lock_deadline_ms, up_to=batch_end)
        self._advance_start()
        return _joined(again) + _in_runs(_joined(new), batches, batch_size)

    def _acquire_available(self, member_id: str, max_records: int, up_to: int, aborted_ranges: list[tuple[int, int]],
                           lock_deadline_ms: int) -> list[AcquiredRecords]:
        """Records available again, up to ``max_records`` of them, none past offset ``up_to``."""
        acquired: list[AcquiredRecords] = []
        remaining = max_records
        available = [(in_flight.first_offset, min(in_flight.last_offset, up_to)) for in_flight in self._records
                     if in_flight.state is RecordState.AVAILABLE and in_flight.first_offset <= up_to]
        for first_offset, last_offset in available:
            if remaining == 0:
                break
            for piece_first, piece_last, is_aborted in _split_by(first_offset, last_offset, aborted_ranges):
                if remaining == 0:
                    break
                if is_aborted:
                    self._archive(piece_first, piece_last)
                    continue
                piece_last = min(piece_last, piece_first + remaining - 1)
                remaining -= piece_last - piece_first + 1
                acquired.extend(self._acquire_in_flight(piece_first, piece_last, member_id, lock_deadline_ms))
        return acquired

    def _acquire_in_flight(self, first_offset: int, last_offset: int, member_id: str,
                           lock_deadline_ms: int) -> list[AcquiredRecords]:
        acquired = []
        for in_flight in self._records.isolate(first_offset, last_offset):
            in_flight.state = RecordState.ACQUIRED
            in_flight.member_id, in_flight.lock_deadline_ms = member_id, lock_deadline_ms
            in_flight.delivery_count += 1
            self._acquired_total += in_flight.record_count
            if in_flight.delivery_count > 1:
                self._redelivered_total += in_flight.record_count
            acquired.append(AcquiredRecords(in_flight.first_offset, in_flight.last_offset, in_flight.delivery_count))
        self._records.coalesce(first_offset, last_offset)
        return acquired

    def _acquire_new(self, batches: list[tuple[int, int]], aborted_ranges: list[tuple[int, int]], member_id: str,
                     remaining: int, lock_deadline_ms: int, *, up_to: int = _NO_BOUND) -> list[AcquiredRecords]:
        """Records past the end offset join the window, within ``remaining``, the record lock limit and offset
        ``up_to``."""
        records = self._records
        capacity = self.config.max_record_locks - records.record_count
        acquired = []
        for base_offset, last_offset in batches:
            if remaining <= 0 or capacity <= 0 or base_offset > up_to:
                break
            last_offset = min(last_offset, up_to)
            if last_offset < records.end_offset:
                continue
            if base_offset > records.end_offset:  # no record there: compacted away, or between batches
                self._archive_new(base_offset - 1)
            for piece_first, piece_last, is_aborted in _split_by(records.end_offset, last_offset, aborted_ranges):
                if remaining <= 0 or capacity <= 0:
                    break
                if is_aborted:
                    self._archive_new(piece_last)
                    continue
                taken = min(piece_last - piece_first + 1, remaining, capacity)
                records.extend(piece_first + taken - 1, RecordState.ACQUIRED, 1, member_id, lock_deadline_ms)
                acquired.append(AcquiredRecords(piece_first, piece_first + taken - 1, 1))
                remaining, capacity = remaining - taken, capacity - taken
                self._acquired_total += taken
        return acquired

    # -- changes that wait for durability ----------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int) -> AcknowledgeResult:
        """A member's acknowledgements for this share-partition, all or nothing (Kafka rolls back every batch of
        the call on the first refusal)."""
        if self.fenced:
            return AcknowledgeResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        error_code = validate_acknowledgement_batches(batches)
        if error_code != ErrorCode.NONE:
            return AcknowledgeResult(error_code)
        records = self._records
        changes: list[_Change] = []
        claimed_up_to = records.start_offset - 1  # a record acknowledged twice in one call: not acquired the 2nd time
        for batch in batches:
            if batch.last_offset < records.start_offset:
                continue  # delivery over and forgotten (Kafka skips such a batch)
            if records.record_count == 0:
                return AcknowledgeResult(ErrorCode.INVALID_RECORD_STATE)
            if batch.last_offset >= records.end_offset:
                return AcknowledgeResult(ErrorCode.INVALID_REQUEST)  # past every record ever acquired
            first_offset = max(batch.first_offset, records.start_offset)
            if first_offset <= claimed_up_to:
                return AcknowledgeResult(ErrorCode.INVALID_RECORD_STATE)
            for in_flight in records.overlapping(first_offset, batch.last_offset):
                if not self._held_by(in_flight, member_id, now_ms):
                    return AcknowledgeResult(ErrorCode.INVALID_RECORD_STATE)
                changes.extend(self._acknowledged(batch, max(in_flight.first_offset, first_offset),
                                                  min(in_flight.last_offset, batch.last_offset),
                                                  in_flight.delivery_count))
            claimed_up_to = batch.last_offset
        return AcknowledgeResult(write=self._begin_write(changes) if changes else None)

    def release_member(self, member_id: str) -> StateWrite | None:
        """The member left the group, or closed its share session: its acquired records go back, AVAILABLE (or
        ARCHIVED at the delivery count limit), delivery counts kept."""
        if self.fenced:
            return None
        changes = [self._released(in_flight) for in_flight in self._records
                   if in_flight.state is RecordState.ACQUIRED and in_flight.member_id == member_id
                   and in_flight.write_id is None]
        return self._begin_write(changes) if changes else None

    def expire_locks(self, now_ms: int) -> StateWrite | None:
        """Acquired records whose lock has run out go back, as at a member leaving."""
        if self.fenced:
            return None
        changes = [self._released(in_flight) for in_flight in self._records
                   if in_flight.state is RecordState.ACQUIRED and in_flight.write_id is None
                   and in_flight.lock_deadline_ms <= now_ms]
        return self._begin_write(changes) if changes else None

    def write_durable(self, write: StateWrite) -> WriteOutcome:
        """The write is durable: its changes happen, and the start offset moves past what they finished."""
        changes = self._pending.pop(write.write_id, None)
        released = False
        for first_offset, last_offset, state, delivery_count in changes or ():
            for in_flight in self._pending_ranges(write.write_id, first_offset, last_offset):
                in_flight.state, in_flight.delivery_count = state, delivery_count
                in_flight.member_id = in_flight.lock_deadline_ms = in_flight.write_id = None
                released |= state is RecordState.AVAILABLE
                if state is RecordState.ACKNOWLEDGED:
                    self._acknowledged_total += in_flight.record_count
                elif state is RecordState.ARCHIVED:
                    self._archived_total += in_flight.record_count
            self._coalesce(first_offset, last_offset)
        self._advance_start()
        return WriteOutcome(ErrorCode.NONE, released)

    def write_failed(self, write: StateWrite, error_code: int) -> WriteOutcome:
        """The write was refused or lost: its changes never happen; the records are ACQUIRED again as before."""
        for first_offset, last_offset, _, _ in self._pending.pop(write.write_id, None) or ():
            for in_flight in self._pending_ranges(write.write_id, first_offset, last_offset):
                in_flight.write_id = None
            self._coalesce(first_offset, last_offset)
        if error_code in FENCING_ERRORS:
            self.fenced = True
        return WriteOutcome(answer_for_write_error(error_code), False)

    def _held_by(self, in_flight: InFlightRange, member_id: str, now_ms: int) -> bool:
        return (in_flight.state is RecordState.ACQUIRED and in_flight.member_id == member_id
                and in_flight.write_id is None and in_flight.lock_deadline_ms > now_ms)

    def _acknowledged(self, batch: AcknowledgementBatch, first_offset: int, last_offset: int,
                      delivery_count: int) -> list[_Change]:
        """The changes acknowledging ``first_offset..last_offset`` of ``batch``, records that were delivered
        ``delivery_count`` times; one per run of records sharing a type."""
        types = batch.acknowledge_types
        if len(types) == 1:
            return [(first_offset, last_offset, self._after(types[0], delivery_count), delivery_count)]
        changes = []
        run_first = first_offset
        for offset in range(first_offset, last_offset + 1):  # bounded: one type per record, from the request
            kind = types[offset - batch.first_offset]
            if offset == last_offset or types[offset + 1 - batch.first_offset] != kind:
                changes.append((run_first, offset, self._after(kind, delivery_count), delivery_count))
                run_first = offset + 1
        return changes

    def _after(self, acknowledge_type: int, delivery_count: int) -> RecordState:
        if acknowledge_type == AcknowledgeType.ACCEPT:
            return RecordState.ACKNOWLEDGED
        if acknowledge_type == AcknowledgeType.RELEASE:
            return self._release_state(delivery_count)
        return RecordState.ARCHIVED  # reject, gap

    def _release_state(self, delivery_count: int) -> RecordState:
        return RecordState.AVAILABLE if delivery_count < self.config.delivery_count_limit else RecordState.ARCHIVED

    def _released(self, in_flight: InFlightRange) -> _Change:
        return (in_flight.first_offset, in_flight.last_offset, self._release_state(in_flight.delivery_count),
                in_flight.delivery_count)

    def _begin_write(self, changes: list[_Change]) -> StateWrite:
        write_id, self._next_write_id = self._next_write_id, self._next_write_id + 1
        changes = _joined_changes(changes)
        for first_offset, last_offset, _, _ in changes:
            for in_flight in self._records.isolate(first_offset, last_offset):
                in_flight.write_id = write_id
            self._records.coalesce(first_offset, last_offset)
        self._pending[write_id] = changes
        batches = tuple(StateBatch(first, last, int(state), count) for first, last, state, count in changes)
        return StateWrite(write_id, PersistedState(self.state_epoch, self.start_offset, batches, self.leader_epoch))

    def _pending_ranges(self, write_id: int, first_offset: int, last_offset: int) -> list[InFlightRange]:
        """The records of ``first_offset..last_offset`` still waiting for this write (the start offset may have
        moved past some), split out of their neighbours."""
        first_offset, last_offset = max(first_offset, self.start_offset), min(last_offset, self.end_offset - 1)
        if first_offset > last_offset:
            return []
        return [in_flight for in_flight in self._records.isolate(first_offset, last_offset)
                if in_flight.write_id == write_id]

    def _coalesce(self, first_offset: int, last_offset: int) -> None:
        if self._records.record_count:
            self._records.coalesce(max(first_offset, self.start_offset), min(last_offset, self.end_offset - 1))

    # -- facts read from the log -------------------------------------------------------------

    def move_start_offset(self, offset: int) -> None:
        """The start offset moves to ``offset``. Forward, as the log start offset moving (DeleteRecords,
        retention) makes it: every record below is forgotten, acquired ones too (their acknowledgements are
        then skipped, as Kafka skips those below the start offset). Backward, as AlterShareGroupOffsets to an
        earlier offset (on an empty group, as Kafka requires): the window starts over there, empty, and writes
        on their way no longer change anything."""
        if offset < 0:
            raise ValueError(f"a share-partition cannot start at offset {offset}")
        if offset < self.start_offset:
            self._records.clear(offset)
            self._pending.clear()
            return
        for in_flight in self._records.drop_below(offset):
            if not in_flight.state.is_terminal:
                self._archived_total += in_flight.record_count
        self._advance_start()

    def _archive(self, first_offset: int, last_offset: int) -> None:
        for in_flight in self._records.isolate(first_offset, last_offset):
            in_flight.state = RecordState.ARCHIVED
            self._archived_total += in_flight.record_count
        self._records.coalesce(first_offset, last_offset)

    def _archive_new(self, last_offset: int) -> None:
        self._archived_total += last_offset - self._records.end_offset + 1
        self._records.extend(last_offset, RecordState.ARCHIVED, 0)

    def _advance_start(self) -> None:
        """The start offset moves past the finished records at the front (Kafka's maybeUpdateCachedStateAndOffsets)."""
        unfinished = next((in_flight.first_offset for in_flight in self._records if not in_flight.state.is_terminal),
                          self._records.end_offset)
        self._records.drop_below(unfinished)


def _record_count(acquired: list[AcquiredRecords]) -> int:
    return sum(records.last_offset - records.first_offset + 1 for records in acquired)


def _batch_end(batches: list[tuple[int, int]], offset: int) -> int:
    """The last offset of the fetched batch holding ``offset`` (``offset`` itself when none does)."""
    index = bisect.bisect_right(batches, (offset, _NO_BOUND)) - 1
    return batches[index][1] if index >= 0 and batches[index][1] >= offset else offset


def _in_runs(acquired: list[AcquiredRecords], batches: list[tuple[int, int]], batch_size: int) -> list[AcquiredRecords]:
    """``acquired`` (new records) with each run longer than ``batch_size`` cut before every fetched batch that
    begins ``batch_size`` or more past the start of the piece it would end (Kafka's createBatches)."""
    if batch_size <= 0:
        return acquired
    runs = []
    for records in acquired:
        first_offset = records.first_offset
        if records.last_offset - first_offset + 1 > batch_size:
            for base_offset, _ in batches[bisect.bisect_right(batches, (first_offset, _NO_BOUND)):]:
                if base_offset > records.last_offset:
                    break
                if base_offset - first_offset >= batch_size:
                    runs.append(AcquiredRecords(first_offset, base_offset - 1, records.delivery_count))
                    first_offset = base_offset
        runs.append(AcquiredRecords(first_offset, records.last_offset, records.delivery_count))
    return runs


def _checked_batches(batches: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    checked = []
    for base_offset, last_offset in batches:
        if base_offset > last_offset or (checked and base_offset <= checked[-1][1]):
            raise ValueError(f"fetched batches must be ascending and disjoint: {list(batches)}")
        checked.append((base_offset, last_offset))
    return checked


def _union(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` (inclusive) sorted, touching ones joined."""
    union: list[tuple[int, int]] = []
    for first_offset, last_offset in sorted(ranges):
        if union and first_offset <= union[-1][1] + 1:
            union[-1] = (union[-1][0], max(union[-1][1], last_offset))
        else:
            union.append((first_offset, last_offset))
    return union


def _split_by(first_offset: int, last_offset: int, ranges: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """``first_offset..last_offset`` cut into pieces inside and outside the sorted, disjoint ``ranges``."""
    pieces = []
    index = max(bisect.bisect_right(ranges, (first_offset, last_offset)) - 1, 0)
    cursor = first_offset
    while cursor <= last_offset and index < len(ranges):
        range_first, range_last = ranges[index]
        if range_last < cursor:
            index += 1
            continue
        if range_first > last_offset:
            break
        if range_first > cursor:
            pieces.append((cursor, range_first - 1, False))
            cursor = range_first
        pieces.append((cursor, min(range_last, last_offset), True))
        cursor = min(range_last, last_offset) + 1
        index += 1
    if cursor <= last_offset:
        pieces.append((cursor, last_offset, False))
    return pieces


def _joined(acquired: list[AcquiredRecords]) -> list[AcquiredRecords]:
    joined: list[AcquiredRecords] = []
    for records in acquired:
        if (joined and joined[-1].last_offset + 1 == records.first_offset
                and joined[-1].delivery_count == records.delivery_count):
            joined[-1] = dataclasses.replace(joined[-1], last_offset=records.last_offset)
        else:
            joined.append(records)
    return joined


def _joined_changes(changes: list[_Change]) -> list[_Change]:
    joined: list[_Change] = []
    for first_offset, last_offset, state, delivery_count in sorted(changes):
        if joined and joined[-1][1] + 1 == first_offset and joined[-1][2:] == (state, delivery_count):
            joined[-1] = (joined[-1][0], last_offset, state, delivery_count)
        else:
            joined.append((first_offset, last_offset, state, delivery_count))
    return joined
