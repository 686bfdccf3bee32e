"""The record checks of a produced batch (log/validator.py), as Kafka's LogValidator makes them."""

from __future__ import annotations

import pytest

from kbroker.log.config import LogConfig
from kbroker.log.validator import BatchRefused, RecordValidationError, read_produced, validate_produce, validate_records
from kbroker.wire.compression import GZIP, LZ4, NONE, ZSTD
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import HEADER_SIZE, ControlRecordType, Record, build_batch, build_control_batch

NO_KEY = "Compacted topic cannot accept message without key in topic partition facts-3"


def batch(*keys, compression=NONE) -> bytes:
    return build_batch([Record(offset_delta=index, key=key, value=b"value") for index, key in enumerate(keys)],
                       compression=compression)


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact"])
@pytest.mark.parametrize("compression", [NONE, GZIP, LZ4, ZSTD])
def test_a_compacted_topic_refuses_a_batch_naming_each_record_without_a_key(policy, compression):
    with pytest.raises(RecordValidationError) as raised:
        validate_records(batch(b"a", None, b"c", None, compression=compression), LogConfig(cleanup_policy=policy),
                         "facts", 3)
    error = raised.value
    assert error.error_code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.message) for e in error.record_errors] == [(1, NO_KEY), (3, NO_KEY)]
    assert str(error) == ("One or more records have been rejected due to 2 record errors in total, and only showing "
                          f"the first three errors at most: [RecordError(batchIndex=1, message='{NO_KEY}'), "
                          f"RecordError(batchIndex=3, message='{NO_KEY}')]")


@pytest.mark.parametrize("compression", [NONE, LZ4])
def test_a_compacted_topic_takes_keyed_records_an_empty_key_included(compression):
    validate_records(batch(b"a", b"", b"c", compression=compression), LogConfig(cleanup_policy="compact"), "facts", 3)


def test_a_transaction_marker_has_a_key_and_passes():
    marker = build_control_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                                 timestamp_ms=0)
    validate_records(marker, LogConfig(cleanup_policy="compact"), "facts", 3)


def test_records_of_other_topics_are_not_read():
    validate_records(batch(None, None), LogConfig(cleanup_policy="delete"), "facts", 3)
    whole = batch(b"k", b"k")
    header_only = whole[:HEADER_SIZE] + b"\xff" * (len(whole) - HEADER_SIZE)  # its records unreadable
    validate_records(header_only, LogConfig(), "facts", 3)  # within the default bounds by its header alone


def test_at_most_three_errors_are_shown_in_the_message_and_all_are_listed():
    with pytest.raises(RecordValidationError) as raised:
        validate_records(batch(*[None] * 5), LogConfig(cleanup_policy="compact"), "facts", 3)
    assert [e.batch_index for e in raised.value.record_errors] == [0, 1, 2, 3, 4]
    assert str(raised.value).count("RecordError(") == 3


def stamped(*deltas, base_timestamp=1_000_000, compression=NONE) -> bytes:
    return build_batch([Record(offset_delta=index, timestamp_delta=delta, key=b"k", value=b"value")
                        for index, delta in enumerate(deltas)], base_timestamp=base_timestamp, compression=compression)


@pytest.mark.parametrize("compression", [NONE, ZSTD])
def test_create_time_timestamps_out_of_the_topics_bounds_refuse_the_batch(compression):
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=100)
    validate_records(stamped(-1000, 0, 100, compression=compression), config, "facts", 3, now_ms=1_000_000)
    with pytest.raises(RecordValidationError) as refused:
        validate_records(stamped(-1001, 0, 101, compression=compression), config, "facts", 3, now_ms=1_000_000)
    assert refused.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [(e.batch_index, e.message) for e in refused.value.record_errors] == [
        (0, "Timestamp 998999 of message with offset 0 is out of range. The timestamp should be within "
            "[999000, 1000100]"),
        (2, "Timestamp 1000101 of message with offset 2 is out of range. The timestamp should be within "
            "[999000, 1000100]")]


def test_timestamps_are_not_bounded_by_default_nor_on_a_log_append_time_topic():
    far = stamped(0, base_timestamp=1)
    validate_records(far, LogConfig(), "facts", 3, now_ms=10**12)
    bounded = LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=0)
    validate_records(far, bounded, "facts", 3, now_ms=10**12)


# --- validate_produce: a producer's batch for one partition, its headers read once --------------------------------


def refusal(records, config=LogConfig(), version=12) -> tuple[int, str | None, list[int]]:
    with pytest.raises(BatchRefused) as refused:
        validate_produce(read_produced(records), config, "facts", 3, version)
    error = refused.value
    return error.error_code, error.message, [e.batch_index for e in error.record_errors]


def corrupted(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def test_a_produce_is_refused_with_the_code_and_message_its_answer_carries():
    one = batch(b"a")
    assert refusal(None) == (ErrorCode.INVALID_RECORD, None, [])
    assert refusal(corrupted(one)) == (ErrorCode.CORRUPT_MESSAGE, None, [])
    assert refusal(one[:-3])[0] == ErrorCode.CORRUPT_MESSAGE  # truncated
    old_magic = one[:16] + b"\x01" + one[17:]
    assert refusal(old_magic)[0] == ErrorCode.INVALID_RECORD
    assert refusal(one + one) == (ErrorCode.INVALID_RECORD,
                                  "a produce request must carry exactly one record batch per partition", [])
    assert refusal(one, LogConfig(max_message_bytes=len(one) - 1)) == (ErrorCode.MESSAGE_TOO_LARGE, None, [])
    assert refusal(batch(b"a", compression=ZSTD), version=6) == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, None, [])
    code, _, indexes = refusal(batch(b"a", None), LogConfig(cleanup_policy="compact"))
    assert (code, indexes) == (ErrorCode.INVALID_RECORD, [1])


def test_each_batchs_crc_is_checked_before_what_stopped_the_reading_as_the_codec_does():
    assert refusal(corrupted(batch(b"a")) + b"\x00" * 70)[:2] == (ErrorCode.CORRUPT_MESSAGE, None)


def test_the_first_header_is_there_for_the_transaction_before_anything_is_checked():
    transactional = build_batch([Record(key=b"k", value=b"v")], producer_id=9, producer_epoch=2, base_sequence=0,
                                transactional=True)
    for records in (corrupted(transactional), transactional + b"\x00" * 70):
        header = read_produced(records).transactional_header
        assert (header.producer_id, header.producer_epoch) == (9, 2)
    assert read_produced(batch(b"a")).transactional_header is None
    assert read_produced(None).transactional_header is None


def test_zstd_is_taken_from_produce_v7():
    validate_produce(read_produced(batch(b"a", compression=ZSTD)), LogConfig(), "facts", 3, 7)


def test_a_batch_the_topic_recompresses_is_checked_for_size_once_rebuilt():
    values = build_batch([Record(offset_delta=i, key=b"k", value=b"x" * 100) for i in range(20)], compression=GZIP)
    assert refusal(values, LogConfig(compression_type="uncompressed", max_message_bytes=len(values) + 10)) == (
        ErrorCode.MESSAGE_TOO_LARGE, None, [])
