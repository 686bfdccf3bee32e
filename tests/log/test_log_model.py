"""The partition log against a plain in-memory model, driven by hypothesis.

The model is a list of segments, each a list of batches (offsets, record
timestamps, the exact bytes the log must hold). Rolls, retention and recovery
are modelled from their rules (``segment.bytes``, ``segment.ms``,
``retention.bytes``/``retention.ms``), not read back from the log, so the
segment layout is checked too. After every step the log must equal the model:
start and end offsets, recovery point, segment base offsets and files, and
every batch byte for byte through ``read_bytes``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from itertools import takewhile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kbroker.log.append_origin import AppendOrigin
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
    OffsetOutOfRange,
    OffsetsOutOfOrder,
)
from kbroker.wire.records import Record, build_batch, stamp_base_offset, stamp_partition_leader_epoch

START_CLOCK_MS = 1_000_000


@dataclass
class ModelBatch:
    base_offset: int
    last_offset: int
    max_timestamp: int
    records: list[tuple[int, int]]  # (offset, timestamp) of each record
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass
class ModelSegment:
    base_offset: int
    batches: list[ModelBatch] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(batch.size for batch in self.batches)

    @property
    def max_timestamp(self) -> int:
        return max((batch.max_timestamp for batch in self.batches), default=-1)


class RecoveryWarnings(logging.Handler):
    """Collects what recovery reports; a log that was never damaged must report nothing."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# One batch: 1-4 records, offset deltas possibly sparse (as after compaction),
# timestamps around the batch's base timestamp.
record_specs = st.lists(
    st.tuples(
        st.integers(1, 2),  # offset step from the previous record
        st.integers(-40, 40),  # timestamp delta
        st.one_of(st.none(), st.binary(max_size=6)),  # key
        st.binary(max_size=70),  # value
    ),
    min_size=1,
    max_size=4,
)


def make_records(specs) -> list[Record]:
    records, offset_delta = [], -1
    for step, timestamp_delta, key, value in specs:
        offset_delta += step
        records.append(Record(offset_delta=offset_delta, timestamp_delta=timestamp_delta, key=key, value=value))
    return records


def model_batch(records: list[Record], base_timestamp: int, base_offset: int, leader_epoch: int | None) -> ModelBatch:
    data = bytearray(build_batch(records, base_timestamp=base_timestamp))
    stamp_base_offset(data, 0, base_offset)
    if leader_epoch is not None:
        stamp_partition_leader_epoch(data, 0, leader_epoch)
    timestamps = [(base_offset + r.offset_delta, base_timestamp + r.timestamp_delta) for r in records]
    return ModelBatch(
        base_offset,
        base_offset + records[-1].offset_delta,
        max(timestamp for _, timestamp in timestamps),
        timestamps,
        bytes(data),
    )


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = os.path.join(tempfile.mkdtemp(prefix="log-model-"), "topic-0")
        self.log: Log | None = None
        self.warnings = RecoveryWarnings()
        for name in ("kbroker.log.segment", "kbroker.log.partition_log"):
            logging.getLogger(name).addHandler(self.warnings)

    def teardown(self) -> None:
        for name in ("kbroker.log.segment", "kbroker.log.partition_log"):
            logging.getLogger(name).removeHandler(self.warnings)
        if self.log is not None:
            self.log.close()
        shutil.rmtree(os.path.dirname(self.directory), ignore_errors=True)

    @initialize(
        segment_bytes=st.sampled_from([180, 400, 1200]),
        segment_ms=st.sampled_from([4_000, 30_000]),
        index_interval_bytes=st.sampled_from([1, 70, 300]),
        retention_ms=st.sampled_from([-1, 3_000, 20_000]),
        retention_bytes=st.sampled_from([-1, 350, 1_500]),
    )
    def open_log(self, segment_bytes, segment_ms, index_interval_bytes, retention_ms, retention_bytes):
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            segment_ms=segment_ms,
            index_interval_bytes=index_interval_bytes,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
        )
        self.clock_ms = START_CLOCK_MS
        self.log = Log.open(self.directory, self.config, now_ms=self.clock_ms)
        self.segments = [ModelSegment(0)]
        self.log_start_offset = 0
        self.recovery_point = 0
        self.active_created_ms = self.clock_ms

    # -- the model's derived state ---------------------------------------------

    @property
    def batches(self) -> list[ModelBatch]:
        return [batch for segment in self.segments for batch in segment.batches]

    @property
    def log_end_offset(self) -> int:
        active = self.segments[-1]
        return active.batches[-1].last_offset + 1 if active.batches else active.base_offset

    def _roll_if_needed(self, size: int, first_offset: int) -> None:
        active = self.segments[-1]
        if active.size == 0:
            return
        if active.size + size > self.config.segment_bytes or self.clock_ms - self.active_created_ms >= self.config.segment_ms:
            self.segments.append(ModelSegment(first_offset))
            self.active_created_ms = self.clock_ms

    def _add(self, batches: list[ModelBatch]) -> None:
        self._roll_if_needed(sum(batch.size for batch in batches), batches[0].base_offset)
        self.segments[-1].batches.extend(batches)

    # -- rules -----------------------------------------------------------------

    @rule(milliseconds=st.integers(0, 6_000))
    def advance_clock(self, milliseconds):
        self.clock_ms += milliseconds

    @rule(data=st.data(), leader_epoch=st.one_of(st.none(), st.integers(0, 3)))
    def append_as_leader(self, data, leader_epoch):
        specs = data.draw(st.lists(record_specs, min_size=1, max_size=3), label="batches")
        payload = bytearray()
        expected = []
        offset = self.log_end_offset
        for batch_specs in specs:
            records = make_records(batch_specs)
            base_timestamp = self.clock_ms + data.draw(st.integers(-5_000, 1_000), label="timestamp")
            payload += build_batch(records, base_timestamp=base_timestamp)
            batch = model_batch(records, base_timestamp, offset, leader_epoch)
            expected.append(batch)
            offset = batch.last_offset + 1
        result = self.log.append(payload, leader_epoch=leader_epoch, now_ms=self.clock_ms)
        assert (result.first_offset, result.last_offset) == (expected[0].base_offset, expected[-1].last_offset)
        assert result.batch_count == len(expected)
        assert result.log_append_time == -1
        assert result.max_timestamp == max(batch.max_timestamp for batch in expected)
        assert bytes(payload) == b"".join(batch.data for batch in expected)  # stamped in place
        self._add(expected)

    @rule(data=st.data(), gap=st.integers(0, 3), leader_epoch=st.integers(0, 5))
    def append_as_follower(self, data, gap, leader_epoch):
        specs = data.draw(st.lists(record_specs, min_size=1, max_size=2), label="batches")
        expected = []
        offset = self.log_end_offset + gap
        for batch_specs in specs:
            records = make_records(batch_specs)
            base_timestamp = self.clock_ms + data.draw(st.integers(-5_000, 1_000), label="timestamp")
            batch = model_batch(records, base_timestamp, offset, leader_epoch)
            expected.append(batch)
            offset = batch.last_offset + 1 + data.draw(st.integers(0, 2), label="gap")
        payload = bytearray(b"".join(batch.data for batch in expected))
        result = self.log.append(payload, AppendOrigin.REPLICATION, now_ms=self.clock_ms)
        assert (result.first_offset, result.last_offset) == (expected[0].base_offset, expected[-1].last_offset)
        self._add(expected)

    @precondition(lambda self: self.log_end_offset > 0)
    @rule(data=st.data())
    def follower_append_going_backwards_is_refused(self, data):
        base_offset = data.draw(st.integers(0, self.log_end_offset - 1), label="base offset")
        payload = bytearray(build_batch([Record(value=b"stale")], base_offset=base_offset))
        with pytest.raises(OffsetsOutOfOrder):
            self.log.append(payload, AppendOrigin.REPLICATION, now_ms=self.clock_ms)

    @rule()
    def roll(self):
        self.log.roll(now_ms=self.clock_ms)
        if self.segments[-1].size:
            self.segments.append(ModelSegment(self.log_end_offset))
            self.active_created_ms = self.clock_ms

    @rule(data=st.data())
    def read(self, data):
        start = data.draw(st.integers(max(0, self.log_start_offset - 2), self.log_end_offset + 2), label="start")
        max_bytes = data.draw(st.integers(0, 1_500), label="max_bytes")
        upper_bound = data.draw(
            st.one_of(st.none(), st.integers(self.log_start_offset, self.log_end_offset + 1)), label="upper_bound"
        )
        min_one_batch = data.draw(st.booleans(), label="min_one_batch")
        if start < self.log_start_offset or start > self.log_end_offset:
            with pytest.raises(OffsetOutOfRange):
                self.log.read(start, max_bytes, upper_bound, min_one_batch)
            return
        got = self.log.read_bytes(start, max_bytes, upper_bound, min_one_batch)
        assert got == self._expected_read(start, max_bytes, upper_bound, min_one_batch)
        self._check_kafka_read_rules(got, start, max_bytes, upper_bound, min_one_batch)

    def _expected_read(self, start: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool) -> bytes:
        """One segment's worth at most: from the batch holding ``start`` (or the next one)."""
        if upper_bound is not None and start >= upper_bound:
            return b""
        for segment in self.segments:
            following = [batch for batch in segment.batches if batch.last_offset >= start]
            if not following:
                continue
            visible = list(takewhile(lambda b: upper_bound is None or b.last_offset < upper_bound, following))
            available = b"".join(batch.data for batch in visible)
            length = min(max_bytes, len(available))
            if min_one_batch and visible and length < visible[0].size:
                length = visible[0].size
            return available[:length]
        return b""

    def _check_kafka_read_rules(self, got: bytes, start, max_bytes, upper_bound, min_one_batch) -> None:
        """The same answer stated as Kafka's rules, independently of the model's walk."""
        if not got:
            return
        first = next(batch for batch in self.batches if batch.last_offset >= start)
        assert first.data.startswith(got[: first.size]), "the result does not start with the batch holding the offset"
        if min_one_batch:
            assert len(got) >= first.size
        if len(got) > first.size:
            assert len(got) <= max_bytes
        position = 0
        for batch in self.batches[self.batches.index(first) :]:
            if position >= len(got):
                break
            assert got[position : position + batch.size] == batch.data[: len(got) - position]
            if upper_bound is not None:
                assert batch.last_offset < upper_bound, "a batch at or after the upper bound was returned"
            position += batch.size

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        timestamp = data.draw(
            st.one_of(
                st.sampled_from([EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP]),
                st.integers(self.clock_ms - 6_000, self.clock_ms + 1_100),
            ),
            label="timestamp",
        )
        assert self.log.offset_for_timestamp(timestamp) == self._expected_offset_for(timestamp)

    def _expected_offset_for(self, timestamp: int):
        if timestamp == EARLIEST_TIMESTAMP:
            return -1, self.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return -1, self.log_end_offset
        records = [(t, o) for batch in self.batches for o, t in batch.records if o >= self.log_start_offset]
        if timestamp == MAX_TIMESTAMP:
            if not records:
                return None
            largest = max(t for t, _ in records)
            return next((t, o) for t, o in records if t == largest)
        return next(((t, o) for t, o in records if t >= timestamp), None)

    @rule(data=st.data())
    def truncate_to(self, data):
        boundaries = [batch.base_offset for batch in self.batches]
        offset = data.draw(
            st.one_of(
                st.integers(max(0, self.log_start_offset - 3), self.log_end_offset + 1),
                st.sampled_from(boundaries or [0]),
            ),
            label="offset",
        )
        self.log.truncate_to(offset)
        if offset >= self.log_end_offset:
            return
        if offset <= self.segments[0].base_offset:
            self.segments = [ModelSegment(offset)]
            self.log_start_offset = self.recovery_point = offset
            return
        self.segments = [segment for segment in self.segments if segment.base_offset <= offset]
        self.segments[-1].batches = [batch for batch in self.segments[-1].batches if batch.last_offset < offset]
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)

    @rule(data=st.data())
    def advance_log_start_offset(self, data):
        offset = data.draw(st.integers(max(0, self.log_start_offset - 2), self.log_end_offset + 1), label="offset")
        if offset > self.log_end_offset:
            with pytest.raises(OffsetOutOfRange):
                self.log.advance_log_start_offset(offset)
            return
        self.log.advance_log_start_offset(offset)
        self.log_start_offset = max(self.log_start_offset, offset)

    @rule(later_ms=st.integers(0, 25_000))
    def apply_retention(self, later_ms):
        now_ms = self.clock_ms + later_ms
        deleted = self.log.apply_retention(now_ms)
        assert deleted == self._apply_retention_to_model(now_ms)

    def _apply_retention_to_model(self, now_ms: int) -> list[int]:
        config = self.config
        excess = sum(segment.size for segment in self.segments) - config.retention_bytes
        deleted = []
        while len(self.segments) > 1:
            segment, following = self.segments[0], self.segments[1]
            below_start = following.base_offset <= self.log_start_offset
            expired = config.retention_ms >= 0 and now_ms - segment.max_timestamp > config.retention_ms
            oversized = config.retention_bytes >= 0 and excess >= segment.size > 0
            if not (below_start or expired or oversized):
                break
            excess -= segment.size
            deleted.append(segment.base_offset)
            del self.segments[0]
            self.log_start_offset = max(self.log_start_offset, following.base_offset)
        return deleted

    @rule()
    def flush(self):
        self.log.flush()
        self.recovery_point = self.log_end_offset

    @rule(from_scratch=st.booleans())
    def close_and_reopen(self, from_scratch):
        """With the recovery point from before (only the tail is checked) or 0 (everything is)."""
        recovery_point = 0 if from_scratch else self.log.recovery_point
        self.log.close()
        self.log = None
        self.log = Log.open(
            self.directory,
            self.config,
            recovery_point=recovery_point,
            log_start_offset=self.log_start_offset,
            now_ms=self.clock_ms,
        )
        self.recovery_point = self.log_end_offset
        self.active_created_ms = self.clock_ms

    # -- the log equals the model ----------------------------------------------

    @invariant()
    def offsets_match(self):
        if self.log is None:
            return
        assert self.log.log_start_offset == self.log_start_offset
        assert self.log.log_end_offset == self.log_end_offset
        assert self.log.recovery_point == self.recovery_point
        assert [segment.base_offset for segment in self.log.segments] == [s.base_offset for s in self.segments]
        assert self.log.size_bytes == sum(segment.size for segment in self.segments)
        assert not self.warnings.messages, self.warnings.messages

    @invariant()
    def segment_files_match(self):
        if self.log is None:
            return
        on_disk = sorted(int(name[:-4]) for name in os.listdir(self.directory) if name.endswith(".log"))
        known = [segment.base_offset for segment in self.segments]
        # Every segment with data has its file; a new log's empty segment may have none yet.
        assert on_disk == known or (on_disk == [] and len(self.segments) == 1 and self.segments[0].size == 0)

    @invariant()
    def every_batch_reads_back(self):
        if self.log is None:
            return
        for batch in self.batches:
            if batch.last_offset < self.log_start_offset:
                continue
            start = max(batch.base_offset, self.log_start_offset)
            assert self.log.read_bytes(start, 1, min_one_batch=True) == batch.data
            assert self.log.read_bytes(start, batch.size, upper_bound=batch.last_offset + 1) == batch.data
        assert self.log.read_bytes(self.log_end_offset, 10_000) == b""


LogMachine.TestCase.settings = settings(
    max_examples=400,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestLogModel = LogMachine.TestCase
