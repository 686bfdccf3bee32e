import gzip
import os
import struct
import tracemalloc

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from kbroker.wire.compression import (
    GZIP,
    LZ4,
    MAX_DECOMPRESSED_SIZE,
    NONE,
    SNAPPY,
    ZSTD,
    compress,
    decompress,
)
from kbroker.wire.primitives import DecodeError

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSING = [GZIP, SNAPPY, LZ4, ZSTD]
XERIAL_MAGIC = b"\x82SNAPPY\x00"

# Compressible but not trivial: repeated text with random bytes sprinkled in.
SAMPLE = b"".join(b"record %d " % i + os.urandom(i % 7) for i in range(20_000))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", SAMPLE], ids=["empty", "one-byte", "sample"])
def test_round_trip(codec, data):
    compressed = compress(codec, data)
    assert decompress(codec, compressed) == data
    assert decompress(codec, memoryview(compressed)) == data
    if codec != NONE and len(data) > 1000:
        assert len(compressed) < len(data)


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=5000))
@settings(max_examples=60, deadline=None)
def test_round_trip_property(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec,level", [(GZIP, 1), (GZIP, 9), (LZ4, 9), (ZSTD, 1), (ZSTD, 19)])
def test_levels(codec, level):
    assert decompress(codec, compress(codec, SAMPLE, level)) == SAMPLE


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec):
    with pytest.raises(DecodeError, match="unknown compression codec"):
        compress(codec, b"data")
    with pytest.raises(DecodeError, match="unknown compression codec"):
        decompress(codec, b"data")


# --- framing details the Java client depends on ---------------------------------


def test_snappy_writes_xerial_framing_in_32k_blocks():
    data = SAMPLE[:100 * 1024]
    framed = compress(SNAPPY, data)
    assert framed[:8] == XERIAL_MAGIC
    assert struct.unpack_from(">ii", framed, 8) == (1, 1)
    pos, blocks = 16, []
    while pos < len(framed):
        (length,) = struct.unpack_from(">i", framed, pos)
        blocks.append(snappy.uncompress(framed[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    assert pos == len(framed)
    assert [len(block) for block in blocks] == [32768, 32768, 32768, 4096]
    assert b"".join(blocks) == data


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them():
    assert decompress(SNAPPY, snappy.compress(SAMPLE)) == SAMPLE
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(b"hello"))) == b"hello"


def test_snappy_reads_concatenated_xerial_streams():
    first, second = SAMPLE[:40000], SAMPLE[40000:90000]
    assert decompress(SNAPPY, compress(SNAPPY, first) + compress(SNAPPY, second)) == first + second


def test_lz4_frame_is_what_java_accepts():
    frame = compress(LZ4, SAMPLE)
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian
    flags, block_descriptor = frame[4], frame[5]
    assert flags >> 6 == 1  # version 1
    assert flags & 0x20  # independent blocks: Java rejects linked ones
    assert not flags & 0x08  # no content size
    assert not flags & 0x04  # no content checksum
    assert (block_descriptor >> 4) & 0x07 == 4  # 64 KiB blocks
    info = lz4.frame.get_frame_info(frame)
    assert info["block_linked"] is False


def test_gzip_writes_gzip_and_reads_concatenated_members():
    compressed = compress(GZIP, SAMPLE)
    assert compressed[:2] == b"\x1f\x8b"
    assert gzip.decompress(compressed) == SAMPLE
    assert decompress(GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


def test_zstd_reads_multiple_frames_skippable_frames_and_checksums():
    with_checksum = zstandard.ZstdCompressor(write_checksum=True).compress(b"first ")
    without_size = zstandard.ZstdCompressor(write_content_size=False).compress(b"second ")
    skippable = struct.pack("<II", 0x184D2A5E, 5) + b"12345"
    plain = zstandard.ZstdCompressor().compress(SAMPLE)
    data = with_checksum + skippable + without_size + plain
    assert decompress(ZSTD, data) == b"first second " + SAMPLE


# --- interoperability with kafka-python's codecs ------------------------------------

KAFKA_PYTHON_ENCODERS = {
    GZIP: kafka_codec.gzip_encode,
    SNAPPY: kafka_codec.snappy_encode,
    LZ4: kafka_codec.lz4_encode,
    ZSTD: kafka_codec.zstd_encode,
}
KAFKA_PYTHON_DECODERS = {
    GZIP: kafka_codec.gzip_decode,
    SNAPPY: kafka_codec.snappy_decode,
    LZ4: kafka_codec.lz4_decode,
    ZSTD: kafka_codec.zstd_decode,
}


@pytest.mark.parametrize("codec", COMPRESSING)
@given(data=st.binary(max_size=3000) | st.sampled_from([SAMPLE, b""]))
@settings(max_examples=40, deadline=None)
def test_interop_with_kafka_python(codec, data):
    assert decompress(codec, KAFKA_PYTHON_ENCODERS[codec](data)) == data
    if codec == SNAPPY and not data:
        # kafka-python only recognises xerial framing longer than its 16-byte
        # header, so it misreads the header-only stream that is empty input.
        return
    assert KAFKA_PYTHON_DECODERS[codec](compress(codec, data)) == data


def test_reads_kafka_python_raw_snappy():
    raw = kafka_codec.snappy_encode(SAMPLE, xerial_compatible=False)
    assert raw[:8] != XERIAL_MAGIC
    assert decompress(SNAPPY, raw) == SAMPLE


# --- malformed input ------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSING)
def test_truncated_input_is_rejected(codec):
    compressed = compress(codec, SAMPLE)
    for cut in (1, 3, len(compressed) // 2, len(compressed) - 5):
        with pytest.raises(DecodeError):
            decompress(codec, compressed[: len(compressed) - cut])


@pytest.mark.parametrize("codec", COMPRESSING)
def test_empty_input_is_rejected(codec):
    with pytest.raises(DecodeError):
        decompress(codec, b"")


@pytest.mark.parametrize("codec", COMPRESSING)
def test_corrupt_input_is_rejected(codec):
    compressed = bytearray(compress(codec, SAMPLE))
    for i in range(24, len(compressed) - 8, 97):  # past the frame headers
        compressed[i] ^= 0xFF
    with pytest.raises(DecodeError):
        decompress(codec, bytes(compressed))


@pytest.mark.parametrize("codec", COMPRESSING)
@given(garbage=st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_garbage_raises_only_decode_error(codec, garbage):
    # Random bytes may happen to be a valid raw snappy block; anything else must
    # be DecodeError, never a library exception.
    try:
        result = decompress(codec, garbage, max_size=1 << 20)
    except DecodeError:
        return
    assert isinstance(result, bytes) and len(result) <= 1 << 20


@pytest.mark.parametrize("codec", COMPRESSING)
@given(
    data=st.binary(min_size=1, max_size=2000),
    position=st.integers(min_value=0),
    flip=st.integers(1, 255),
)
@settings(max_examples=100, deadline=None)
def test_bit_flips_raise_only_decode_error(codec, data, position, flip):
    damaged = bytearray(compress(codec, data * 3))
    damaged[position % len(damaged)] ^= flip
    try:
        decompress(codec, bytes(damaged))
    except DecodeError:
        pass


# --- decompression bombs ---------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_output_bound_is_exact(codec):
    compressed = compress(codec, SAMPLE)
    assert decompress(codec, compressed, max_size=len(SAMPLE)) == SAMPLE
    with pytest.raises(DecodeError, match="exceeds"):
        decompress(codec, compressed, max_size=len(SAMPLE) - 1)


@pytest.mark.parametrize("codec", COMPRESSING)
def test_bomb_is_stopped_without_allocating_its_size(codec):
    bomb = compress(codec, bytes(32 * 1024 * 1024))
    assert len(bomb) < 2 * 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match="exceeds"):
            decompress(codec, bomb, max_size=1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def zstd_rle_bomb(blocks: int) -> bytes:
    """A zstd frame of RLE blocks: 4 bytes of input for every 128 KiB of output."""
    block_size = 128 * 1024
    frame = bytearray(struct.pack("<I", 0xFD2FB528))
    frame.append(0x00)  # no content size, not single-segment, no checksum, no dictionary
    frame.append(7 << 3)  # window of 2**(10+7) = 128 KiB
    for index in range(blocks):
        last = index == blocks - 1
        header = block_size << 3 | 1 << 1 | last  # block type 1: RLE
        frame += header.to_bytes(3, "little") + b"\x00"
    return bytes(frame)


def test_zstd_rle_bomb_hits_the_default_bound():
    bomb = zstd_rle_bomb(1024)  # 128 MiB from 4 KiB
    assert decompress(ZSTD, zstd_rle_bomb(3)) == bytes(3 * 128 * 1024)
    with pytest.raises(DecodeError, match="exceeds"):
        decompress(ZSTD, bomb)
    assert MAX_DECOMPRESSED_SIZE < 128 * 1024 * 1024


def test_zstd_truncated_frame_is_not_a_short_read():
    # zstandard's stream reader alone returns whatever it decoded, without
    # error, when the input stops mid-frame.
    frame = zstd_rle_bomb(3)
    with pytest.raises(DecodeError, match="truncated"):
        decompress(ZSTD, frame[:-4])
    with pytest.raises(DecodeError, match="truncated"):
        decompress(ZSTD, frame + frame[:7])


def test_snappy_length_header_is_checked_before_decompressing():
    claims_4_gib = b"\xff\xff\xff\xff\x0f" + b"\x00" * 20
    with pytest.raises(DecodeError, match="exceeds"):
        decompress(SNAPPY, claims_4_gib)
    framed = XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(claims_4_gib)) + claims_4_gib
    with pytest.raises(DecodeError, match="exceeds"):
        decompress(SNAPPY, framed)
    # The bound covers the sum of the blocks, not each block alone.
    many_blocks = compress(SNAPPY, SAMPLE[:200_000])
    with pytest.raises(DecodeError, match="exceeds"):
        decompress(SNAPPY, many_blocks, max_size=100_000)


def test_snappy_length_header_must_match_content():
    block = bytearray(snappy.compress(b"hello world " * 10))
    block[0] -= 1  # claims one byte fewer than the block produces
    with pytest.raises(DecodeError):
        decompress(SNAPPY, bytes(block))


def test_xerial_block_length_is_checked():
    for framed in (
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", -1),
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 100) + b"short",
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"\x00\x00",
        XERIAL_MAGIC + b"\x00\x00\x00",
    ):
        with pytest.raises(DecodeError):
            decompress(SNAPPY, framed)
    assert decompress(SNAPPY, XERIAL_MAGIC + struct.pack(">ii", 1, 1)) == b""
