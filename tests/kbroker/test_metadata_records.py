"""The KRaft metadata records and their ApiMessageAndVersion framing."""

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.metadata import records
from kbroker.metadata.records import KEY_BY_CLASS, RECORD_BY_KEY, MetadataRecordCodec
from tests.wire.values import value_strategy
from kbroker.wire import DecodeError

CODEC = MetadataRecordCodec()

# Keys and version ranges as in Kafka's metadata/src/main/resources/common/metadata/*.json.
EXPECTED_VERSIONS = {
    0: ("RegisterBrokerRecord", 0, 3),
    2: ("TopicRecord", 0, 0),
    3: ("PartitionRecord", 0, 2),
    4: ("ConfigRecord", 0, 0),
    5: ("PartitionChangeRecord", 0, 2),
    7: ("FenceBrokerRecord", 0, 0),
    8: ("UnfenceBrokerRecord", 0, 0),
    9: ("RemoveTopicRecord", 0, 0),
    11: ("UserScramCredentialRecord", 0, 0),
    12: ("FeatureLevelRecord", 0, 0),
    14: ("ClientQuotaRecord", 0, 0),
    15: ("ProducerIdsRecord", 0, 0),
    18: ("AccessControlEntryRecord", 0, 0),
    19: ("RemoveAccessControlEntryRecord", 0, 0),
    20: ("NoOpRecord", 0, 0),
    22: ("RemoveUserScramCredentialRecord", 0, 0),
}

CASES = [
    pytest.param(spec, version, id=f"{spec.name}-v{version}")
    for spec in RECORD_BY_KEY.values()
    for version in spec.versions
]

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def test_declared_records_match_kafka():
    declared = {key: (spec.name, spec.versions.low, spec.versions.high) for key, spec in RECORD_BY_KEY.items()}
    assert declared == EXPECTED_VERSIONS
    for key, (name, _, _) in EXPECTED_VERSIONS.items():
        value_class = getattr(records, name)
        assert value_class.__name__ == name
        assert KEY_BY_CLASS[value_class] == key
        assert RECORD_BY_KEY[key].is_flexible(0)


@pytest.mark.parametrize("spec, version", CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(spec, version, data):
    value = data.draw(value_strategy(spec.message, version, True))
    encoded = CODEC.encode(value, version)
    assert encoded[:3] == bytes([1, spec.key, version])  # every key and version here fits one varint byte
    assert CODEC.decode_with_version(encoded) == (value, version)
    # Every proper prefix is refused, and so is a byte too many.
    for end in range(len(encoded)):
        with pytest.raises(DecodeError):
            CODEC.decode(encoded[:end])
    with pytest.raises(DecodeError):
        CODEC.decode(encoded + b"\x00")


def test_topic_record_bytes():
    value = records.TopicRecord(name="orders", topic_id=TOPIC_ID)
    expected = (
        b"\x01"  # frame version
        + b"\x02"  # api key: TopicRecord
        + b"\x00"  # record version
        + b"\x07orders"  # compact string: length + 1, then UTF-8
        + TOPIC_ID.bytes  # uuid, 16 bytes big-endian
        + b"\x00"  # no tagged fields
    )
    assert CODEC.encode(value) == expected
    assert CODEC.decode(expected) == value
    assert CODEC.decode(memoryview(expected)) == value


def test_partition_change_writes_only_what_changed():
    value = records.PartitionChangeRecord(partition_id=4, topic_id=TOPIC_ID, leader=3)
    expected = (
        b"\x01\x05\x02"  # frame version, PartitionChangeRecord, v2 (newest)
        + b"\x00\x00\x00\x04"  # partition_id
        + TOPIC_ID.bytes
        + b"\x01"  # one tagged field
        + b"\x01\x04\x00\x00\x00\x03"  # tag 1 (leader), 4 bytes, 3
    )
    assert CODEC.encode(value) == expected
    decoded = CODEC.decode(expected)
    assert decoded == value
    assert decoded.isr is None and decoded.leader_recovery_state == -1


def test_defaults_are_kafkas():
    partition = records.PartitionRecord()
    ids_and_epochs = (partition.partition_id, partition.leader, partition.leader_epoch, partition.partition_epoch)
    assert ids_and_epochs == (-1, -1, -1, -1)
    assert partition.eligible_leader_replicas is None
    assert records.RegisterBrokerRecord().fenced is True
    assert records.ProducerIdsRecord().broker_epoch == -1
    assert records.PartitionChangeRecord().leader == -2


def test_encode_uses_the_newest_version_and_accepts_shared_defaults():
    assert CODEC.encode(records.RegisterBrokerRecord())[:3] == b"\x01\x00\x03"
    assert CODEC.encode(records.NoOpRecord.DEFAULT) == b"\x01\x14\x00\x00"


def test_encode_refuses_other_values_and_versions():
    with pytest.raises(ValueError):
        CODEC.encode(records.TopicRecord(), 1)
    with pytest.raises(ValueError):
        CODEC.encode(object())


def test_unknown_tagged_fields_survive():
    value = records.TopicRecord(name="t", topic_id=TOPIC_ID, unknown_tags={9: b"\xab"})
    decoded = CODEC.decode(CODEC.encode(value))
    assert decoded.unknown_tags == {9: b"\xab"}


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x01\x01\x00\x00", id="key-1-is-not-declared"),
        pytest.param(b"\x01\x7f\x00\x00", id="key-127"),
        pytest.param(b"\x01\x80\x01\x00\x00", id="two-byte-key-128"),
    ],
)
def test_unknown_key_is_a_decode_error(data):
    with pytest.raises(DecodeError, match="unknown metadata record key"):
        CODEC.decode(data)


def test_unknown_version_and_frame_version_are_decode_errors():
    with pytest.raises(DecodeError, match="outside"):
        CODEC.decode(b"\x01\x02\x01" + b"\x01" + bytes(16) + b"\x00")  # TopicRecord v1
    with pytest.raises(DecodeError, match="frame version"):
        CODEC.decode(b"\x00\x14\x00\x00")
    with pytest.raises(DecodeError):
        CODEC.decode(b"")


def test_a_string_running_past_the_end_is_a_decode_error():
    encoded = CODEC.encode(records.ConfigRecord(resource_name="topic", name="retention.ms", value="1"))
    assert encoded[4] == len("topic") + 1  # after frame version, key, version, resource_type
    with pytest.raises(DecodeError):
        CODEC.decode(encoded[:4] + b"\x7f" + encoded[5:])


def test_image_partitions_stay_ordered_whether_appended_or_replaced():
    from kbroker.metadata.image import MetadataImage, apply_record

    topic_id = uuid.uuid4()
    image = apply_record(MetadataImage(cluster_id="c", controller_id=1), records.TopicRecord(name="t", topic_id=topic_id))
    for index in range(3):  # created in order: each one appended
        image = apply_record(image, records.PartitionRecord(partition_id=index, topic_id=topic_id, replicas=[1], isr=[1], leader=1, leader_epoch=0))
    image = apply_record(image, records.PartitionRecord(partition_id=1, topic_id=topic_id, replicas=[1], isr=[1], leader=1, leader_epoch=4))
    partitions = image.topics["t"].partitions
    assert [p.partition for p in partitions] == [0, 1, 2]
    assert [p.leader_epoch for p in partitions] == [0, 4, 0]


_TOPIC_IDS = [uuid.UUID(int=n) for n in (1, 2, 3)]


@st.composite
def _changes(draw):
    """Topic, partition, partition change and removal records over three topics, in any order."""
    made = []
    for _ in range(draw(st.integers(0, 60))):
        topic = draw(st.integers(0, 2))
        topic_id = _TOPIC_IDS[topic]
        kind = draw(st.sampled_from(["topic", "partition", "run", "run", "change", "changes", "remove"]))
        if kind == "run":  # consecutive partitions, as a creation or CreatePartitions writes them
            first = draw(st.integers(0, 4))
            made.extend(records.PartitionRecord(partition_id=index, topic_id=topic_id, replicas=[1], isr=[1], leader=1,
                                                leader_epoch=0) for index in range(first, first + draw(st.integers(1, 5))))
        elif kind == "changes":  # one topic's partitions changed together, as when a broker stops or returns
            made.extend(records.PartitionChangeRecord(partition_id=index, topic_id=topic_id, leader=draw(st.integers(-2, 3)),
                                                      isr=draw(st.none() | st.just([1])))
                        for index in range(draw(st.integers(0, 7))))
        elif kind == "topic":
            made.append(records.TopicRecord(name=f"t{topic}", topic_id=topic_id))
        elif kind == "partition":
            made.append(records.PartitionRecord(partition_id=draw(st.integers(0, 6)), topic_id=topic_id, replicas=[1],
                                                isr=[1], leader=draw(st.integers(1, 3)), leader_epoch=draw(st.integers(0, 3))))
        elif kind == "change":
            made.append(records.PartitionChangeRecord(partition_id=draw(st.integers(0, 6)), topic_id=topic_id,
                                                      leader=draw(st.integers(1, 3))))
        else:
            made.append(records.RemoveTopicRecord(topic_id=topic_id))
    return made


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_changes())
def test_a_change_applied_at_once_is_the_change_applied_record_by_record(change):
    """apply_records applies a topic's run of partition records (next partitions, changes) in one step; the
    image is the same as with
    apply_record one record at a time, or both refuse the change."""
    from kbroker.metadata.image import MetadataImage, apply_record, apply_records

    start = MetadataImage(cluster_id="c", controller_id=1)
    try:
        expected = start
        for record in change:
            expected = apply_record(expected, record)
    except (KeyError, IndexError) as error:
        with pytest.raises(type(error)):
            apply_records(start, change)
        return
    assert apply_records(start, change) == expected
