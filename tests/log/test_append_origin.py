"""Where an append comes from decides what the log stamps and checks (log/append_origin.py, Kafka's AppendOrigin)."""

from __future__ import annotations

import pytest

from kbroker.log.append_origin import AppendOrigin
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log, ProducerStateError
from kbroker.log.validator import read_produced, validate_produce
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import CorruptRecordError, Record, build_batch, iter_batches

PRODUCE_VERSION = 12


def batch(sequence=0, *, epoch=0, base_offset=0, leader_epoch=-1, count=2) -> bytearray:
    return bytearray(build_batch([Record(offset_delta=i, value=b"v%d" % i) for i in range(count)], producer_id=7,
                                 producer_epoch=epoch, base_sequence=sequence, base_offset=base_offset,
                                 partition_leader_epoch=leader_epoch))


def stored(log: Log) -> list[tuple[int, int]]:
    """(base offset, leader epoch) of each batch in the log, whichever segment holds it."""
    found, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        headers = [header for _, header in iter_batches(log.read_bytes(offset, 1 << 20))]
        found += [(header.base_offset, header.partition_leader_epoch) for header in headers]
        offset = headers[-1].next_offset
    return found


@pytest.fixture
def log(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), now_ms=0)
    yield log
    log.close()


def test_what_each_origin_decides():
    assert [(o.assigns_offsets, o.checks_producer_state, o.checks_sequences) for o in AppendOrigin] == [
        (True, True, True), (True, True, False), (False, False, False)]


def test_a_client_append_gets_offsets_and_the_leaders_epoch_and_its_sequences_checked(log):
    first = log.append(batch(0, base_offset=500), AppendOrigin.CLIENT, leader_epoch=3)
    assert (first.first_offset, first.last_offset) == (0, 1)
    retry = log.append(batch(0), AppendOrigin.CLIENT, leader_epoch=3)
    assert retry.duplicate and retry.first_offset == 0
    with pytest.raises(ProducerStateError) as gap:
        log.append(batch(5), AppendOrigin.CLIENT, leader_epoch=3)
    assert gap.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert stored(log) == [(0, 3)]


def test_a_coordinator_append_gets_offsets_and_epoch_checks_but_no_sequence_checks(log):
    log.append(batch(0, epoch=1), AppendOrigin.COORDINATOR, leader_epoch=2)
    log.append(batch(0, epoch=1), AppendOrigin.COORDINATOR, leader_epoch=2)  # no duplicate: written again
    log.append(batch(40, epoch=1), AppendOrigin.COORDINATOR, leader_epoch=2)  # no gap either
    with pytest.raises(ProducerStateError) as fenced:
        log.append(batch(0, epoch=0), AppendOrigin.COORDINATOR, leader_epoch=2)
    assert fenced.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert stored(log) == [(0, 2), (2, 2), (4, 2)]


def test_a_replicated_append_keeps_offsets_and_epochs_and_asks_no_producer_state(log):
    log.append(batch(0, epoch=1, base_offset=10, leader_epoch=4), AppendOrigin.REPLICATION)
    log.append(batch(0, epoch=0, base_offset=12, leader_epoch=5), AppendOrigin.REPLICATION)  # the leader decided
    assert stored(log) == [(10, 4), (12, 5)]
    assert log.producer_state.producer_entry(7).producer_epoch == 0


@pytest.mark.parametrize("origin", list(AppendOrigin))
def test_every_origins_raw_bytes_have_their_crc_checked(log, origin):
    corrupt = batch(0)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(corrupt, origin)
    assert log.log_end_offset == 0


def test_a_validated_produce_is_appended_with_the_headers_the_validator_parsed(log):
    validated = validate_produce(read_produced(bytes(batch(0, base_offset=99))), log.config, "t", 0, PRODUCE_VERSION)
    assert isinstance(validated.buffer, bytearray)  # read-only bytes are copied, for the log to stamp
    result = log.append(validated, AppendOrigin.CLIENT, leader_epoch=1)
    assert (result.first_offset, result.last_offset) == (0, 1)
    assert stored(log) == [(0, 1)]


def test_a_recompressed_produce_is_appended_with_its_new_header(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), LogConfig(compression_type="gzip"), now_ms=0)
    validated = validate_produce(read_produced(batch(0)), log.config, "t", 0, PRODUCE_VERSION)
    [(_, header)] = validated.batches
    assert header.compression != 0 and header.record_count == 2
    assert log.append(validated).last_offset == 1
    log.close()
