"""The log with idempotent and transactional producers: duplicates, fencing, LSO, aborted index."""

import pytest

from kbroker.log.partition_log import Log, ProducerStateError
from kbroker.log.config import LogConfig
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import ControlRecordType, Record, build_batch, build_control_batch


def records(count, tag=b"v"):
    return [Record(offset_delta=i, value=tag + b"%d" % i) for i in range(count)]


def idempotent(sequence, count=2, producer_id=7, epoch=0, transactional=False):
    return bytearray(
        build_batch(records(count), producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, transactional=transactional)
    )


def marker(kind, producer_id=7, epoch=0):
    return bytearray(build_control_batch(kind, producer_id, epoch, coordinator_epoch=1, timestamp_ms=0))


def test_retried_batch_gets_its_original_offsets_and_is_not_written_twice(tmp_path):
    log = Log.open(str(tmp_path / "t-0"))
    first = log.append(idempotent(0))
    log.append(idempotent(2))
    retry = log.append(idempotent(0))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 4


def test_sequence_gaps_and_stale_epochs_are_refused_with_kafka_codes(tmp_path):
    log = Log.open(str(tmp_path / "t-0"))
    log.append(idempotent(0))
    with pytest.raises(ProducerStateError) as gap:
        log.append(idempotent(5))
    assert gap.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.append(idempotent(0, epoch=1))
    with pytest.raises(ProducerStateError) as stale:
        log.append(idempotent(2, epoch=0))
    assert stale.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 4


def test_duplicates_are_recognised_after_a_restart(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log.open(directory, LogConfig(segment_bytes=200))
    results = [log.append(idempotent(sequence)) for sequence in range(0, 20, 2)]
    log.flush()
    log.close()
    for recovery_point in (0, results[-1].last_offset + 1):
        reopened = Log.open(directory, LogConfig(segment_bytes=200), recovery_point=recovery_point)
        retry = reopened.append(idempotent(16))
        assert retry.duplicate and retry.first_offset == results[-2].first_offset
        reopened.close()


def test_aborted_transactions_are_indexed_and_bound_the_last_stable_offset(tmp_path):
    log = Log.open(str(tmp_path / "t-0"))
    log.append(bytearray(build_batch(records(1))))
    begun = log.append(idempotent(0, transactional=True))
    assert log.last_stable_offset == begun.first_offset
    log.append(idempotent(2, transactional=True))
    aborted_marker = log.append(marker(ControlRecordType.ABORT))
    assert log.last_stable_offset == log.log_end_offset
    [aborted] = log.collect_aborted_transactions(0, log.log_end_offset)
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset) == (7, begun.first_offset, aborted_marker.last_offset)

    log.append(idempotent(4, transactional=True))
    log.append(marker(ControlRecordType.COMMIT))
    assert len(log.collect_aborted_transactions(0, log.log_end_offset)) == 1
    with pytest.raises(ProducerStateError) as outside:
        log.append(idempotent(6, transactional=True))
        log.append(idempotent(8, transactional=False))
    assert outside.value.error_code == ErrorCode.INVALID_TXN_STATE


def test_open_transaction_survives_restart_and_truncation_rewinds_state(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log.open(directory)
    log.append(idempotent(0))
    begun = log.append(idempotent(2, transactional=True))
    log.flush()
    log.close()
    log = Log.open(directory)
    assert log.last_stable_offset == begun.first_offset
    log.truncate_to(begun.first_offset)
    assert log.last_stable_offset == log.log_end_offset == begun.first_offset
    assert log.append(idempotent(2)).first_offset == begun.first_offset
