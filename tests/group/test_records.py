"""__consumer_offsets records: Kafka's bytes, every version round trip, and which partition coordinates."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from kbroker.group import records
from kbroker.wire.primitives import DecodeError


def test_offset_commit_key_and_value_are_kafkas_bytes():
    key = records.OffsetCommitKey(group="g", topic="t", partition=3)
    # key version 1, then group, topic (int16 length + bytes) and partition
    assert records.encode_key(key) == bytes.fromhex("0001" "0001" "67" "0001" "74" "00000003")
    value = records.OffsetCommitValue(offset=5, leader_epoch=7, metadata="m", commit_timestamp=10)
    # value version 3: offset, leader epoch, metadata, commit timestamp (no expiry field)
    assert records.encode_value(value) == bytes.fromhex("0003" "0000000000000005" "00000007" "0001" "6d" "000000000000000a")
    expiring = records.OffsetCommitValue(offset=5, metadata="", commit_timestamp=10, expire_timestamp=20)
    assert records.encode_value(expiring)[:2] == b"\x00\x01"  # only v1 keeps an explicit expiry
    assert records.decode_value(key, records.encode_value(expiring)).expire_timestamp == 20


def test_group_metadata_is_written_at_version_3_as_kafka_does():
    key = records.GroupMetadataKey(group="g")
    assert records.encode_key(key) == bytes.fromhex("0002" "0001" "67")
    member = records.GroupMetadataValue.MemberMetadata(member_id="m", group_instance_id=None, client_id="c", client_host="h",
                                                       rebalance_timeout=9, session_timeout=8, subscription=b"s", assignment=b"a")
    value = records.GroupMetadataValue(protocol_type="consumer", generation=2, protocol="range", leader="m",
                                       current_state_timestamp=1, members=[member])
    data = records.encode_value(value)
    assert data == bytes.fromhex(
        "0003" "0008" + b"consumer".hex() + "00000002" "0005" + b"range".hex() + "0001" "6d" "0000000000000001"
        "00000001" "0001" "6d" "ffff" "0001" "63" "0001" "68" "00000009" "00000008" "00000001" "73" "00000001" "61")
    assert records.decode_value(key, data) == value


def test_consumer_group_records_are_flexible_with_their_key_version_naming_them():
    key = records.ConsumerGroupCurrentMemberAssignmentKey(group_id="g", member_id="m")
    assert records.encode_key(key)[:2] == b"\x00\x08"
    topic_id = uuid.uuid4()
    value = records.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=3, previous_member_epoch=2, state=0,
        assigned_partitions=[records.ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions(topic_id=topic_id, partitions=[0, 2])],
        partitions_pending_revocation=[])
    data = records.encode_value(value)
    assert data[:2] == b"\x00\x00" and data[-1] == 0  # flexible: ends with empty tagged fields
    assert records.decode_value(records.decode_key(records.encode_key(key)), data) == value


EVERY_KEY = [
    records.OffsetCommitKey(group="g", topic="t", partition=1),
    records.GroupMetadataKey(group="g"),
    records.ConsumerGroupMetadataKey(group_id="g"),
    records.ConsumerGroupPartitionMetadataKey(group_id="g"),
    records.ConsumerGroupMemberMetadataKey(group_id="g", member_id="m"),
    records.ConsumerGroupTargetAssignmentMetadataKey(group_id="g"),
    records.ConsumerGroupTargetAssignmentMemberKey(group_id="g", member_id="m"),
    records.ConsumerGroupCurrentMemberAssignmentKey(group_id="g", member_id="m"),
]


@pytest.mark.parametrize("key", EVERY_KEY, ids=lambda key: type(key).__name__)
def test_every_key_round_trips_and_names_its_group(key):
    assert records.decode_key(records.encode_key(key)) == key
    assert records.group_id_of(key) == "g"
    assert records.decode_value(key, None) is None  # a tombstone


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_values_of_every_version_round_trip(version):
    key = records.OffsetCommitKey(group="g", topic="t", partition=1)
    value = records.OffsetCommitValue(offset=1, leader_epoch=4 if version >= 3 else -1, metadata="x", commit_timestamp=2,
                                      expire_timestamp=3 if version == 1 else -1)
    assert records.decode_value(key, records.encode_value(value, version)) == value


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_is_a_decode_error_never_a_crash(data):
    for key in EVERY_KEY:
        try:
            records.decode_value(key, data)
        except DecodeError:
            pass
    try:
        records.decode_key(data)
    except DecodeError:
        pass


def test_the_coordinating_partition_is_kafkas():
    # Java's String.hashCode, computed by jshell: "my-group" -1906497762, "test-group" 627841412,
    # "été-😀" -1803456526 (the emoji is two UTF-16 units), "polygenelubricants" Integer.MIN_VALUE.
    assert records.coordinator_partition("", 50) == 0
    assert records.coordinator_partition("a", 50) == 97 % 50
    assert records.coordinator_partition("my-group", 2**31 - 1) == 1906497762
    assert records.coordinator_partition("test-group", 50) == 627841412 % 50
    assert records.coordinator_partition("été-\U0001F600", 1000) == 1803456526 % 1000
    assert records.coordinator_partition("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0


def test_the_coordinators_share_one_record_codec_and_skip_what_they_cannot_read(caplog):
    """Group and transaction shells store and replay through coordinator_runtime's encode/decode_record."""
    from kbroker.coordinator_runtime import decode_record, encode_record
    from kbroker.group import records
    from kbroker.wire.records import Record

    key = records.OffsetCommitKey(group="g", topic="t", partition=0)
    stored_key, tombstone = encode_record(records, key, None)
    assert tombstone is None
    assert decode_record(records, "__consumer_offsets", 3, Record(key=stored_key, value=None))[0] == key
    assert decode_record(records, "__consumer_offsets", 3, Record(key=b"\x7f\x7f", value=b"")) is None
    assert "__consumer_offsets-3: skipping a record" in caplog.text
