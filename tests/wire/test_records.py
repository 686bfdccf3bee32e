import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kbroker.wire.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import DecodeError
from kbroker.wire.records import (
    count_records,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    ControlRecordType,
    CorruptRecordError,
    Record,
    UnsupportedMagicError,
    build_batch,
    build_control_batch,
    control_record_type,
    decode_records,
    end_txn_marker_coordinator_epoch,
    is_legacy_message_set,
    iter_batches,
    read_magic,
    recompress_batch,
    stamp_base_offset,
    stamp_log_append_time,
    stamp_partition_leader_epoch,
    validate_batch,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
INT32 = struct.Struct(">i")

headers_strategy = st.lists(
    st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=4
)
record_fields = st.tuples(
    st.none() | st.binary(max_size=40),  # key
    st.none() | st.binary(max_size=300),  # value
    headers_strategy,
    st.integers(min_value=-(2**40), max_value=2**40),  # timestamp delta: a varlong
)


def as_records(fields) -> list[Record]:
    return [
        Record(offset_delta=index, timestamp_delta=ts, key=key, value=value, headers=headers)
        for index, (key, value, headers, ts) in enumerate(fields)
    ]


def sample_records(count=5) -> list[Record]:
    return [
        Record(
            offset_delta=i,
            timestamp_delta=i * 10,
            key=None if i % 3 == 0 else b"key-%d" % i,
            value=None if i == 4 else b"value %d " % i * 20,
            headers=[("trace", b"abc"), ("empty", None)] if i % 2 else [],
        )
        for i in range(count)
    ]


def recrc(batch: bytearray, pos: int = 0) -> bytearray:
    """Fix the CRC after editing a batch, so later checks are reached."""
    (length,) = INT32.unpack_from(batch, pos + 8)
    struct.pack_into(">I", batch, pos + 17, crc32c(bytes(batch[pos + 21 : pos + 12 + length])))
    return batch


# --- build, validate, decode -----------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@given(fields=st.lists(record_fields, max_size=12), base_offset=st.integers(0, 2**62))
@settings(max_examples=50, deadline=None)
def test_round_trip(codec, fields, base_offset):
    records = as_records(fields)
    batch = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=77,
        producer_epoch=3,
        base_sequence=1000,
        base_timestamp=1_700_000_000_000,
        partition_leader_epoch=9,
    )
    header = validate_batch(batch)
    assert header.size == len(batch)
    assert header.magic == 2
    assert header.compression == codec
    assert header.base_offset == base_offset
    assert header.record_count == len(records)
    assert header.last_offset_delta == max(len(records) - 1, 0)
    assert header.last_offset == base_offset + header.last_offset_delta
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 1000)
    assert header.partition_leader_epoch == 9
    assert header.base_timestamp == 1_700_000_000_000
    largest_delta = max((r.timestamp_delta for r in records), default=0)
    assert header.max_timestamp == 1_700_000_000_000 + largest_delta
    assert not header.is_transactional and not header.is_control
    decoded_header, decoded = decode_records(batch)
    assert decoded_header == header
    assert decoded == records


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_in_bytearray_and_memoryview_at_an_offset(codec):
    batch = build_batch(sample_records(), compression=codec)
    buffer = bytearray(b"\xee" * 13) + batch + b"\xee" * 7
    for view in (buffer, memoryview(buffer), bytes(buffer)):
        header = validate_batch(view, 13)
        assert header.size == len(batch)
        assert decode_records(view, 13) == (header, sample_records())


def test_header_flags_and_attributes():
    batch = build_batch(
        sample_records(2),
        compression=ZSTD,
        transactional=True,
        timestamp_type=LOG_APPEND_TIME,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        max_timestamp=99,
        delete_horizon=True,
    )
    header = validate_batch(batch)
    assert header.attributes == ZSTD | 0x08 | 0x10 | 0x40
    assert header.timestamp_type == LOG_APPEND_TIME
    assert header.is_transactional and not header.is_control and header.has_delete_horizon
    assert header.max_timestamp == 99


def test_batch_header_read_is_one_unpack_of_61_bytes():
    batch = build_batch(sample_records(), base_offset=40)
    header = BatchHeader.read(batch)
    assert HEADER_SIZE == 61
    assert header == BatchHeader.read(batch[:61])
    assert (header.next_offset, header.size) == (45, len(batch))
    with pytest.raises(CorruptRecordError):
        BatchHeader.read(batch[:60])


def test_last_sequence_wraps_like_kafka():
    header = BatchHeader.read(build_batch(sample_records(4), producer_id=1, producer_epoch=0,
                                          base_sequence=2**31 - 2))
    assert header.last_sequence == 1  # 2**31-2, 2**31-1, 0, 1
    assert BatchHeader.read(build_batch(sample_records(4))).last_sequence == -1


def test_empty_compacted_batch_validates():
    # Compaction can keep a batch with no records (for producer state) whose
    # attributes still name a codec; there is no payload to decompress.
    batch = bytearray(build_batch([], last_offset_delta=9, max_timestamp=-1))
    assert len(batch) == HEADER_SIZE
    struct.pack_into(">h", batch, 21, LZ4)
    header, records = decode_records(recrc(batch))
    assert (header.compression, header.record_count, header.last_offset_delta) == (LZ4, 0, 9)
    assert records == []


def test_record_attributes_are_an_int8():
    records = [Record(attributes=-1, value=b"x"), Record(offset_delta=1, attributes=5)]
    batch = build_batch(records)
    assert batch[HEADER_SIZE + 1] == 0xFF
    assert decode_records(batch)[1] == records


def test_gaps_in_offset_deltas_as_compaction_leaves_them():
    records = [Record(offset_delta=0, value=b"a"), Record(offset_delta=7, value=b"b")]
    header, decoded = decode_records(build_batch(records, base_offset=100))
    assert header.last_offset == 107 and decoded == records


# --- differential against kafka-python, both directions --------------------------------


def kafka_python_records(batch: bytes):
    reader = DefaultRecordBatch(batch)
    assert reader.validate_crc()
    return reader, [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in reader]


@pytest.mark.parametrize("codec", CODECS)
@given(fields=st.lists(record_fields, min_size=1, max_size=10))
@settings(max_examples=40, deadline=None)
def test_kafka_python_reads_ours(codec, fields):
    records = as_records(fields)
    base_timestamp = 1_600_000_000_000
    batch = build_batch(records, base_offset=500, compression=codec, base_timestamp=base_timestamp,
                        producer_id=12, producer_epoch=1, base_sequence=40, transactional=True)
    reader, theirs = kafka_python_records(batch)
    assert reader.compression_type == codec
    assert (reader.producer_id, reader.producer_epoch, reader.base_sequence) == (12, 1, 40)
    assert reader.is_transactional and reader.records_count == len(records)
    assert theirs == [
        (500 + r.offset_delta, base_timestamp + r.timestamp_delta, r.key, r.value, r.headers)
        for r in records
    ]


@pytest.mark.parametrize("codec", CODECS)
@given(
    fields=st.lists(record_fields, min_size=1, max_size=10),
    compressible=st.booleans(),
    transactional=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_we_read_kafka_python(codec, fields, compressible, transactional):
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional,
        producer_id=33, producer_epoch=2, base_sequence=7, batch_size=1 << 20,
    )
    expected = []
    for index, (key, value, headers, ts) in enumerate(fields):
        if compressible:
            # kafka-python sends uncompressed when compression would not help.
            value = (value or b"") + b"padding " * 50
        timestamp = 1_500_000_000_000 + abs(ts) % 10**9
        builder.append(index, timestamp, key, value, headers)
        expected.append((index, timestamp, key, value, headers))
    batch = bytes(builder.build())
    header, records = decode_records(batch)
    if compressible:
        assert header.compression == codec
    assert header.is_transactional == transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (33, 2, 7)
    assert header.record_count == len(expected)
    assert [
        (header.base_offset + r.offset_delta, header.base_timestamp + r.timestamp_delta,
         r.key, r.value, r.headers)
        for r in records
    ] == expected


# --- corruption ---------------------------------------------------------------------------


@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_any_flip_under_the_crc_is_detected(data):
    batch = bytearray(build_batch(sample_records(), compression=data.draw(st.sampled_from(CODECS))))
    position = data.draw(st.integers(min_value=17, max_value=len(batch) - 1))
    batch[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError):
        validate_batch(batch)


@given(position=st.integers(min_value=0, max_value=15), flip=st.integers(1, 255))
def test_base_offset_and_leader_epoch_are_outside_the_crc(position, flip):
    batch = bytearray(build_batch(sample_records()))
    if 8 <= position < 12:
        return  # batchLength: changing it breaks the framing, not the CRC
    batch[position] ^= flip
    validate_batch(batch)


def test_crc_error_maps_to_corrupt_message():
    batch = bytearray(build_batch(sample_records()))
    batch[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC") as caught:
        validate_batch(batch)
    assert isinstance(caught.value, DecodeError)
    assert caught.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda b: INT32.pack_into(b, 8, 48), "too small"),
        (lambda b: INT32.pack_into(b, 8, -1), "too small"),
        (lambda b: INT32.pack_into(b, 8, len(b)), "runs past"),
        (lambda b: INT32.pack_into(b, 57, -1), "negative record count"),
        (lambda b: INT32.pack_into(b, 23, -1), "negative record count"),
        (lambda b: INT32.pack_into(b, 57, 6), "cannot fit"),
        (lambda b: struct.pack_into(">h", b, 21, 5), "unknown compression codec 5"),
        (lambda b: struct.pack_into(">h", b, 21, 7), "unknown compression codec 7"),
    ],
)
def test_header_sanity_checks(edit, message):
    batch = bytearray(build_batch(sample_records()))
    edit(batch)
    with pytest.raises(CorruptRecordError, match=message):
        validate_batch(recrc(batch) if message != "runs past" else batch)


def test_truncated_batches_are_rejected():
    batch = build_batch(sample_records())
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            validate_batch(batch[:cut])


def test_record_count_larger_than_the_records():
    batch = bytearray(build_batch(sample_records(3), last_offset_delta=9))
    INT32.pack_into(batch, 57, 4)
    with pytest.raises(CorruptRecordError):
        decode_records(recrc(batch))


def test_trailing_bytes_after_the_records():
    batch = bytearray(build_batch(sample_records(3)))
    batch += b"\x00\x00"
    INT32.pack_into(batch, 8, len(batch) - 12)
    with pytest.raises(CorruptRecordError, match="left after the last record"):
        decode_records(recrc(batch))


def test_record_length_must_match_its_fields():
    batch = bytearray(build_batch([Record(value=b"abc")]))
    batch[HEADER_SIZE] += 2  # zigzag: the length claims one more byte
    batch += b"\x00"
    INT32.pack_into(batch, 8, len(batch) - 12)
    with pytest.raises(CorruptRecordError):
        decode_records(recrc(batch))


def test_invalid_header_key_is_corrupt():
    batch = bytearray(build_batch([Record(headers=[("\u00e9", b"v")])]))
    index = batch.index("\u00e9".encode())
    batch[index] = 0xFF  # not UTF-8
    with pytest.raises(CorruptRecordError):
        decode_records(recrc(batch))


@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_mangled_records_raise_only_decode_errors(data):
    # Damage the records section and fix the CRC, so record parsing itself
    # meets the garbage.
    codec = data.draw(st.sampled_from(CODECS))
    batch = bytearray(build_batch(sample_records(), compression=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(min_value=HEADER_SIZE, max_value=len(batch) - 1))
        batch[position] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del batch[data.draw(st.integers(HEADER_SIZE, len(batch) - 1)):]
        INT32.pack_into(batch, 8, len(batch) - 12)
    try:
        decode_records(recrc(batch), max_uncompressed_size=1 << 20)
    except DecodeError:
        pass


@given(garbage=st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_garbage_raises_only_decode_errors(garbage):
    for call in (validate_batch, decode_records, lambda b: list(iter_batches(b)),
                 lambda b: list(iter_batches(b, allow_partial_tail=True, verify_crc=True))):
        try:
            call(garbage)
        except DecodeError:
            pass


def test_decompression_is_bounded():
    batch = build_batch([Record(value=bytes(1_000_000))], compression=ZSTD)
    assert len(batch) < 1000
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decode_records(batch, max_uncompressed_size=100_000)
    assert decode_records(batch)[1][0].value == bytes(1_000_000)


# --- several batches, partial tails --------------------------------------------------------


def three_batches() -> tuple[bytes, list[int]]:
    batches = [
        build_batch(sample_records(2), base_offset=0),
        build_batch(sample_records(3), base_offset=2, compression=GZIP),
        build_batch(sample_records(1), base_offset=5, compression=LZ4),
    ]
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    return b"".join(batches), positions


def test_iterates_concatenated_batches():
    data, positions = three_batches()
    found = list(iter_batches(data, verify_crc=True))
    assert [pos for pos, _ in found] == positions
    assert [header.base_offset for _, header in found] == [0, 2, 5]
    assert [header.record_count for _, header in found] == [2, 3, 1]
    assert found[-1][0] + found[-1][1].size == len(data)
    assert list(iter_batches(b"")) == []


def test_iteration_verifies_crc_only_when_asked():
    data, positions = three_batches()
    damaged = bytearray(data)
    damaged[positions[1] + 70] ^= 1
    assert len(list(iter_batches(damaged))) == 3
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(damaged, verify_crc=True))


def test_partial_tail_rejected_for_produce_and_skipped_for_fetch():
    data, positions = three_batches()
    for cut in range(positions[2] + 1, len(data)):
        truncated = data[:cut]
        with pytest.raises(CorruptRecordError, match="truncated|runs past"):
            list(iter_batches(truncated))
        whole = list(iter_batches(truncated, allow_partial_tail=True, verify_crc=True))
        assert [pos for pos, _ in whole] == positions[:2]


def test_record_count_is_of_whole_batches():
    data, positions = three_batches()
    assert count_records(data) == 6
    assert count_records(data[: positions[2] + 1]) == 5
    assert count_records(b"") == 0


def test_partial_tail_must_still_look_like_a_batch():
    data, positions = three_batches()
    damaged = bytearray(data[: positions[2] + 20])
    INT32.pack_into(damaged, positions[2] + 8, 10)
    with pytest.raises(CorruptRecordError, match="too small"):
        list(iter_batches(damaged, allow_partial_tail=True))


# --- legacy message sets ---------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_are_recognised_and_rejected(magic):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 16)
    builder.append(0, timestamp=None if magic == 0 else 1000, key=b"k", value=b"v")
    legacy = bytes(builder.build())
    assert read_magic(legacy) == magic
    assert is_legacy_message_set(legacy)
    for call in (validate_batch, decode_records, lambda b: list(iter_batches(b))):
        expected = f"magic v{magic} message sets are not supported"
        with pytest.raises(UnsupportedMagicError, match=expected) as caught:
            call(legacy)
        assert caught.value.error_code == ErrorCode.INVALID_RECORD


def test_v2_is_not_legacy_and_unknown_magic_is_rejected():
    batch = bytearray(build_batch(sample_records()))
    assert read_magic(batch) == 2 and not is_legacy_message_set(batch)
    batch[16] = 3
    with pytest.raises(UnsupportedMagicError, match="unknown record batch magic 3"):
        validate_batch(batch)
    with pytest.raises(CorruptRecordError):
        read_magic(b"\x00" * 16)


# --- stamping ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_stamping_offset_and_epoch_keeps_the_crc_valid(codec):
    original = build_batch(sample_records(), compression=codec)
    batch = bytearray(original)
    stamp_base_offset(batch, 0, 123_456_789_012)
    stamp_partition_leader_epoch(batch, 0, 17)
    header = validate_batch(batch)
    assert header.base_offset == 123_456_789_012
    assert header.partition_leader_epoch == 17
    assert header.crc == BatchHeader.read(original).crc
    assert batch[12 + 4 :] == original[12 + 4 :]
    reader, theirs = kafka_python_records(bytes(batch))
    assert [offset for offset, *_ in theirs] == [123_456_789_012 + i for i in range(5)]
    assert reader.leader_epoch == 17


def test_stamping_in_place_in_a_larger_buffer_through_a_memoryview():
    data, positions = three_batches()
    buffer = bytearray(data)
    view = memoryview(buffer)
    for index, pos in enumerate(positions):
        stamp_base_offset(view, pos, 1000 * index)
        stamp_log_append_time(view, pos, 5555)
    headers = [header for _, header in iter_batches(buffer, verify_crc=True)]
    assert [h.base_offset for h in headers] == [0, 1000, 2000]
    assert all(h.max_timestamp == 5555 and h.timestamp_type == LOG_APPEND_TIME for h in headers)


@pytest.mark.parametrize("codec", CODECS)
def test_stamp_log_append_time_recomputes_the_crc(codec):
    original = build_batch(sample_records(), compression=codec, base_timestamp=1000)
    batch = bytearray(original)
    stamp_log_append_time(batch, 0, 1_700_000_000_123)
    header = validate_batch(batch)
    assert header.crc != BatchHeader.read(original).crc
    assert header.timestamp_type == LOG_APPEND_TIME
    assert header.max_timestamp == 1_700_000_000_123
    assert header.base_timestamp == 1000  # Kafka leaves it; readers use maxTimestamp
    assert header.compression == codec
    reader, theirs = kafka_python_records(bytes(batch))
    assert {timestamp for _, timestamp, *_ in theirs} == {1_700_000_000_123}
    stamped = bytes(batch)
    stamp_log_append_time(batch, 0, 1_700_000_000_123)
    assert bytes(batch) == stamped


# --- control batches -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_control_batch(kind):
    batch = build_control_batch(kind, producer_id=4000, producer_epoch=6, coordinator_epoch=11,
                                timestamp_ms=1_234_567, base_offset=88, partition_leader_epoch=2)
    header, records = decode_records(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4000, 6, -1)
    assert (header.base_offset, header.partition_leader_epoch) == (88, 2)
    assert (header.base_timestamp, header.max_timestamp) == (1_234_567, 1_234_567)
    assert header.record_count == 1
    (record,) = records
    assert record.key == struct.pack(">hh", 0, kind)
    assert record.value == struct.pack(">hi", 0, 11)
    assert control_record_type(record.key) == kind
    assert end_txn_marker_coordinator_epoch(record.value) == 11
    reader = DefaultRecordBatch(batch)
    assert reader.validate_crc() and reader.is_control_batch
    (theirs,) = list(reader)
    assert theirs.type == kind
    assert theirs.commit == (kind == ControlRecordType.COMMIT)


def test_control_record_parsing_errors():
    assert control_record_type(struct.pack(">hh", 3, 2)) == ControlRecordType.LEADER_CHANGE
    for bad_key in (None, b"\x00\x00\x00", struct.pack(">hh", -1, 0)):
        with pytest.raises(CorruptRecordError):
            control_record_type(bad_key)
    for bad_value in (None, b"\x00" * 5, struct.pack(">hi", -1, 0)):
        with pytest.raises(CorruptRecordError):
            end_txn_marker_coordinator_epoch(bad_value)
    with pytest.raises(ValueError):
        build_control_batch(ControlRecordType.LEADER_CHANGE, 1, 0, 0, 0)


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recompress_keeps_everything_but_the_codec(source, target):
    original = build_batch(
        sample_records(), base_offset=7, compression=source, producer_id=42, producer_epoch=3, base_sequence=100,
        transactional=True, partition_leader_epoch=5, base_timestamp=1_000, timestamp_type=LOG_APPEND_TIME, max_timestamp=2_000,
    )
    rebuilt = recompress_batch(original, target)
    before, after = validate_batch(original), validate_batch(rebuilt)
    assert after.compression == target
    assert after._replace(attributes=0, crc=0, batch_length=0) == before._replace(attributes=0, crc=0, batch_length=0)
    assert after.attributes & ~0x07 == before.attributes & ~0x07
    assert decode_records(rebuilt)[1] == decode_records(original)[1]
