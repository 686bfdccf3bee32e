"""Random sequences of what members, clocks, logs and share coordinators do to one share-partition, with its
invariants checked after every step: no record held by two members, a finished record never delivered again,
delivery counts never falling, nothing kept below the start offset, every offset of the window in exactly
one state, and the persisted form resuming the same share-partition."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kbroker.log.clock import FakeClock
from kbroker.share.in_flight import RecordState
from kbroker.share.partition import AcknowledgementBatch, SharePartition, SharePartitionConfig
from kbroker.share.persisted import StateWrite
from kbroker.wire.errors import ErrorCode

MEMBERS = ("a", "b", "c")
CONFIG = SharePartitionConfig(record_lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=12)


class SharePartitionMachine(RuleBasedStateMachine):
    @initialize(start=st.integers(0, 5))
    def start(self, start: int) -> None:
        self.clock = FakeClock()
        self.partition = SharePartition(CONFIG, start, state_epoch=1, leader_epoch=1)
        self.log_end_offset = start + 10  # the log holds records up to here
        self.log_start_offset = start
        self.pending: list[StateWrite] = []
        self.finished: set[int] = set()  # offsets seen acknowledged or archived: never delivered again
        self.delivery_counts: dict[int, int] = {}  # the highest delivery count seen per offset

    # -- the log ------------------------------------------------------------------------------

    @rule(records=st.integers(1, 8))
    def produce(self, records: int) -> None:
        self.log_end_offset += records

    @rule(records=st.integers(0, 3))
    def delete_records(self, records: int) -> None:
        self.log_start_offset = min(self.log_start_offset + records, self.log_end_offset)
        if self.log_start_offset > self.partition.start_offset:
            self.partition.move_start_offset(self.log_start_offset)

    # -- members ------------------------------------------------------------------------------

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(0, 10), data=st.data())
    def acquire(self, member: str, max_records: int, data) -> None:
        self._acquire(member, max_records, data)

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 10), data=st.data())
    def acquire_more(self, member: str, max_records: int, data) -> None:
        """Acquisition twice as often as the rest: it feeds every other rule."""
        self._acquire(member, max_records, data)

    def _acquire(self, member: str, max_records: int, data) -> None:
        held = {offset: in_flight.member_id for in_flight in self.partition.in_flight()
                for offset in _offsets(in_flight) if in_flight.state is RecordState.ACQUIRED}
        batches, aborted = data.draw(_fetch(self.partition.end_offset, self.log_end_offset))
        answer = self.partition.acquire(member, max_records, batches, self.clock.monotonic_ms(), aborted=aborted)
        offsets = [offset for records in answer for offset in range(records.first_offset, records.last_offset + 1)]
        assert len(offsets) == len(set(offsets)) <= max_records
        assert offsets == sorted(offsets)
        assert not set(offsets) & set(held), "a record held by one member was handed to another"
        assert not set(offsets) & self.finished, "a finished record was delivered again"
        aborted_offsets = {offset for first, last in aborted for offset in range(first, last + 1)}
        assert not set(offsets) & aborted_offsets, "an aborted record was delivered"

    @rule(data=st.data())
    def acknowledge(self, data) -> None:
        before = self.partition.in_flight()
        holders = sorted({in_flight.member_id for in_flight in before if in_flight.member_id is not None})
        member = data.draw(st.sampled_from(holders) if holders and data.draw(st.integers(0, 4)) else
                           st.sampled_from(MEMBERS))
        batches = data.draw(_acknowledgements(self.partition, member))
        result = self.partition.acknowledge(member, batches, self.clock.monotonic_ms())
        if result.write is None:
            assert self.partition.in_flight() == before, "a refused or empty acknowledgement changed something"
        else:
            assert result.error_code == ErrorCode.NONE
            self.pending.append(result.write)

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        self._written(self.partition.release_member(member))

    @rule(ms=st.one_of(st.integers(1, 300), st.integers(1, 300), st.integers(900, 1500)))
    def time_passes(self, ms: int) -> None:
        self.clock.advance(ms)
        self._written(self.partition.expire_locks(self.clock.monotonic_ms()))

    # -- the share coordinator ----------------------------------------------------------------

    @precondition(lambda self: self.pending)
    @rule(data=st.data(), made_durable=st.booleans())
    def write_completes(self, data, made_durable: bool) -> None:
        write = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        if made_durable:
            assert self.partition.write_durable(write).error_code == ErrorCode.NONE
        else:
            outcome = self.partition.write_failed(write, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            assert (outcome.error_code, outcome.records_released) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, False)

    @precondition(lambda self: not self.pending)
    @rule()
    def new_leader(self) -> None:
        self.partition = _resumed(self.partition, self.log_start_offset, self.log_end_offset)

    def _written(self, write: StateWrite | None) -> None:
        if write is not None:
            self.pending.append(write)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def every_offset_of_the_window_is_in_exactly_one_state(self) -> None:
        ranges = self.partition.in_flight()
        cursor = self.partition.start_offset
        for in_flight in ranges:
            assert in_flight.first_offset == cursor <= in_flight.last_offset, ranges
            cursor = in_flight.last_offset + 1
        assert cursor == self.partition.end_offset
        assert all(not left.agrees_with(right) for left, right in zip(ranges, ranges[1:])), "ranges left unmerged"

    @invariant()
    def only_acquired_records_have_a_holder_a_lock_or_a_write(self) -> None:
        pending_ids = {write.write_id for write in self.pending}
        for in_flight in self.partition.in_flight():
            if in_flight.state is RecordState.ACQUIRED:
                assert in_flight.member_id in MEMBERS and in_flight.lock_deadline_ms is not None
                assert in_flight.write_id is None or in_flight.write_id in pending_ids
            else:
                assert (in_flight.member_id, in_flight.lock_deadline_ms, in_flight.write_id) == (None, None, None)
        assert self.partition.counters().pending_writes == len(self.pending)

    @invariant()
    def finished_records_stay_finished_and_delivery_counts_never_fall(self) -> None:
        start_offset = self.partition.start_offset
        self.finished = {offset for offset in self.finished if offset >= start_offset}
        self.delivery_counts = {offset: count for offset, count in self.delivery_counts.items()
                                if offset >= start_offset}
        for in_flight in self.partition.in_flight():
            assert 0 <= in_flight.delivery_count <= CONFIG.delivery_count_limit
            for offset in _offsets(in_flight):
                if offset in self.finished:
                    assert in_flight.state.is_terminal, f"finished record {offset} is {in_flight.state.name} again"
                assert in_flight.delivery_count >= self.delivery_counts.get(offset, 0)
                self.delivery_counts[offset] = in_flight.delivery_count
                if in_flight.state.is_terminal:
                    self.finished.add(offset)

    @invariant()
    def nothing_is_kept_below_the_start_offset_and_no_finished_record_at_it(self) -> None:
        ranges = self.partition.in_flight()
        assert self.partition.start_offset >= self.log_start_offset
        if ranges:
            assert ranges[0].first_offset == self.partition.start_offset
            assert not ranges[0].state.is_terminal

    @invariant()
    def acquired_records_stay_within_the_record_lock_limit(self) -> None:
        assert self.partition.counters().acquired_records <= CONFIG.max_record_locks

    @invariant()
    def the_persisted_form_resumes_the_same_share_partition(self) -> None:
        """...as if every lock were released: acquired records available, or archived at the delivery limit (and
        then the start offset may move past them)."""
        successor = _resumed(self.partition, self.log_start_offset, self.log_end_offset)
        expected = {offset: (_released(count) if state is RecordState.ACQUIRED else state, count)
                    for offset, (state, count) in _per_offset(self.partition).items()}
        unfinished = [offset for offset, (state, _) in sorted(expected.items()) if not state.is_terminal]
        assert successor.start_offset == (unfinished[0] if unfinished else self.partition.end_offset)
        assert successor.end_offset == self.partition.end_offset
        assert _per_offset(successor) == {offset: value for offset, value in expected.items()
                                          if offset >= successor.start_offset}
        again = _resumed(successor, self.log_start_offset, self.log_end_offset)
        assert again.persisted_state() == dataclasses.replace(successor.persisted_state(),
                                                              leader_epoch=again.leader_epoch)


def _resumed(partition: SharePartition, log_start_offset: int, log_end_offset: int) -> SharePartition:
    return SharePartition.from_state(partition.persisted_state(), CONFIG, leader_epoch=partition.leader_epoch + 1,
                                     log_start_offset=log_start_offset, log_end_offset=log_end_offset)


def _released(delivery_count: int) -> RecordState:
    return RecordState.AVAILABLE if delivery_count < CONFIG.delivery_count_limit else RecordState.ARCHIVED


def _offsets(in_flight) -> range:
    return range(in_flight.first_offset, in_flight.last_offset + 1)


def _per_offset(partition: SharePartition) -> dict[int, tuple[RecordState, int]]:
    return {offset: (in_flight.state, in_flight.delivery_count) for in_flight in partition.in_flight()
            for offset in _offsets(in_flight)}


@st.composite
def _fetch(draw, end_offset: int, log_end_offset: int):
    """The batches a log read from ``end_offset`` might return (some offsets missing, as compaction leaves them),
    and some aborted transactions' records among them."""
    batches, aborted = [], []
    cursor = max(end_offset - draw(st.integers(0, 2)), 0)  # a read may start below the end offset
    while cursor < log_end_offset and len(batches) < 4:
        base_offset = cursor + draw(st.integers(0, 2))
        last_offset = min(base_offset + draw(st.integers(0, 4)), log_end_offset - 1)
        if base_offset > last_offset:
            break
        batches.append((base_offset, last_offset))
        if draw(st.integers(0, 4)) == 0:
            aborted.append((base_offset, last_offset))
        cursor = last_offset + 1
    return batches, aborted


@st.composite
def _acknowledgements(draw, partition: SharePartition, member: str):
    """Mostly the member's own acquired records, sometimes any offsets at all (to be refused, all or nothing)."""
    held = [(in_flight.first_offset, in_flight.last_offset) for in_flight in partition.in_flight()
            if in_flight.state is RecordState.ACQUIRED and in_flight.member_id == member]
    spans = []
    if held and draw(st.integers(0, 4)) > 0:
        for first_offset, last_offset in sorted(draw(st.lists(st.sampled_from(held), max_size=3, unique=True))):
            first = draw(st.integers(first_offset, last_offset))
            spans.append((first, draw(st.integers(first, last_offset))))
    else:
        first = draw(st.integers(max(partition.start_offset - 2, 0), partition.end_offset + 2))
        spans.append((first, first + draw(st.integers(0, 3))))
    batches = []
    for first_offset, last_offset in spans:
        if draw(st.booleans()):
            types = (draw(st.integers(0, 3)),)
        else:
            types = tuple(draw(st.lists(st.integers(0, 3), min_size=last_offset - first_offset + 1,
                                        max_size=last_offset - first_offset + 1)))
        batches.append(AcknowledgementBatch(first_offset, last_offset, types))
    return batches


SharePartitionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                                   suppress_health_check=[HealthCheck.too_slow])
TestSharePartitionMachine = SharePartitionMachine.TestCase
