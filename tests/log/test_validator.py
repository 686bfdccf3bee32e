"""The record checks of a produced batch (log/validator.py), as Kafka's LogValidator makes them."""

from __future__ import annotations

import pytest

from kbroker.log.config import LogConfig
from kbroker.log.validator import RecordValidationError, validate_records
from kbroker.wire.compression import GZIP, LZ4, NONE, ZSTD
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import ControlRecordType, Record, build_batch, build_control_batch

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
    validate_records(b"not a batch at all", LogConfig(), "facts", 3)  # never decoded, so never refused here


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
