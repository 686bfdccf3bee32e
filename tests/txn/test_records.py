"""__transaction_state records, byte for byte as Kafka writes them."""

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from kbroker.txn import records
from kbroker.txn.records import PartitionsSchema, TransactionLogKey, TransactionLogValue
from kbroker.wire import DecodeError


def ongoing(**changes):
    fields = dict(producer_id=5, producer_epoch=1, transaction_timeout_ms=60000, transaction_status=1,
                  transaction_partitions=[PartitionsSchema(topic="a", partition_ids=[0, 1])],
                  transaction_last_update_timestamp_ms=10, transaction_start_timestamp_ms=9)
    return TransactionLogValue(**{**fields, **changes})


def test_key_is_version_zero_and_the_transactional_id():
    assert records.encode_key(TransactionLogKey(transactional_id="t1")) == bytes.fromhex("0000" "0002") + b"t1"


def test_value_of_a_transaction_version_1_client_is_written_as_version_0():
    encoded = records.encode_value(ongoing())
    assert encoded.hex() == ("0000" "0000000000000005" "0001" "0000ea60" "01"
                             "00000001" "0001" "61" "00000002" "00000000" "00000001"
                             "000000000000000a" "0000000000000009")


def test_value_of_a_transaction_version_2_client_is_flexible_with_tagged_producer_ids():
    value = ongoing(client_transaction_version=2, next_producer_id=7)
    encoded = records.encode_value(value)
    assert encoded[:2] == b"\x00\x01"
    # tagged fields at the end: two of them (tag 1 next producer id, tag 2 client version); -1 is the default
    assert encoded.endswith(bytes.fromhex("02" "01" "08" "0000000000000007" "02" "02" "0002"))
    key = TransactionLogKey(transactional_id="t1")
    assert records.decode_value(key, encoded) == value


def test_empty_state_has_no_partition_list_and_a_tombstone_decodes_to_none():
    key = TransactionLogKey(transactional_id="t1")
    empty = ongoing(transaction_status=0, transaction_partitions=None)
    assert records.decode_value(key, records.encode_value(empty)).transaction_partitions is None
    assert records.decode_value(key, None) is None


def test_coordinator_partition_is_javas_hash_code_as_for_groups():
    # "txn".hashCode() == 115306 in Java; 115306 % 50 == 6
    assert records.coordinator_partition("txn", 50) == 6


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x05abc", b"\x00\x00\x00\x09ab", b"\x00\x00\x00\x01ab"])
def test_garbage_keys_are_decode_errors(data):
    with pytest.raises(DecodeError):
        records.decode_key(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_arbitrary_value_bytes_decode_or_raise_decode_error(data):
    key = TransactionLogKey(transactional_id="t")
    try:
        value = records.decode_value(key, data)
    except DecodeError:
        return
    again = records.decode_value(key, records.encode_value(value))
    untagged = ("producer_id", "producer_epoch", "transaction_timeout_ms", "transaction_status",
                "transaction_partitions", "transaction_last_update_timestamp_ms", "transaction_start_timestamp_ms")
    assert [getattr(again, name) for name in untagged] == [getattr(value, name) for name in untagged]
