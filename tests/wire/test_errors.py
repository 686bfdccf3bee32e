import inspect

import kafka.errors
import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from kbroker.wire.errors import ErrorCode, KafkaError, error_name

# Codes whose Java exception extends RetriableException, read off Kafka's
# clients/src/main/java/org/apache/kafka/common/errors (plus 133, newer than
# that snapshot). An independent statement of the flags in wire.errors.
KAFKA_RETRIABLE_CODES = {
    2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75,
    78, 80, 83, 84, 88, 89, 100, 103, 106, 122, 123, 133,
}


def test_well_known_codes():
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NONE == 0
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1
    assert ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.INVALID_RECORD == 87
    assert ErrorCode.UNKNOWN_TOPIC_ID == 100
    assert ErrorCode.INVALID_REGULAR_EXPRESSION == 128
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133


def test_codes_are_contiguous_and_unique():
    codes = [int(code) for code in ErrorCode]
    assert codes == list(range(-1, 134))


def test_retriable_flags_match_kafka():
    assert {int(code) for code in ErrorCode if code.retriable} == KAFKA_RETRIABLE_CODES
    assert ErrorCode.NOT_COORDINATOR.retriable
    assert not ErrorCode.NONE.retriable
    assert not ErrorCode.UNKNOWN_SERVER_ERROR.retriable
    assert not ErrorCode.TOPIC_AUTHORIZATION_FAILED.retriable


def test_agrees_with_kio_on_every_code():
    for kio_code in KioErrorCode:
        ours = ErrorCode(int(kio_code))
        assert ours.name == kio_code.name.upper()
        assert ours.retriable == kio_code.retriable, ours.name
    assert len(ErrorCode) == len(KioErrorCode)


def test_agrees_with_kafka_python_names_and_flags():
    known = {
        cls.errno: cls
        for _, cls in inspect.getmembers(kafka.errors, inspect.isclass)
        if issubclass(cls, kafka.errors.BrokerResponseError)
        and isinstance(getattr(cls, "errno", None), int)
    }
    assert len(known) > 120
    for code, cls in known.items():
        ours = ErrorCode(code)
        if code == ErrorCode.CORRUPT_MESSAGE:
            # kafka-python deliberately treats CORRUPT_MESSAGE as fatal; Java's
            # CorruptRecordException is a RetriableException, and Java is the reference.
            assert ours.retriable and not cls.retriable
            continue
        assert ours.retriable == bool(cls.retriable), ours.name


def test_error_name():
    assert error_name(0) == "NONE"
    assert error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert error_name(ErrorCode.COORDINATOR_NOT_AVAILABLE) == "COORDINATOR_NOT_AVAILABLE"
    assert error_name(134) == "UNKNOWN_ERROR_CODE_134"
    assert error_name(-2) == "UNKNOWN_ERROR_CODE_-2"


def test_unknown_int_is_not_an_error_code():
    with pytest.raises(ValueError):
        ErrorCode(999)


def test_kafka_error_carries_code_and_message():
    with pytest.raises(KafkaError) as caught:
        raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "2 in sync, 3 required")
    error = caught.value
    assert error.code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert error.message == "2 in sync, 3 required"
    assert error.retriable
    assert str(error) == "NOT_ENOUGH_REPLICAS: 2 in sync, 3 required"
    assert "NOT_ENOUGH_REPLICAS" in repr(error)


def test_kafka_error_from_int_and_without_message():
    error = KafkaError(29)
    assert error.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert error.message is None
    assert not error.retriable
    assert str(error) == "TOPIC_AUTHORIZATION_FAILED"
    with pytest.raises(ValueError):
        KafkaError(12345)
