"""Record batch compression codecs, by Kafka's attribute id.

A batch's attributes name its codec in bits 0-2: 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd. What we write must be readable by the Java client (the
strictest reader), and what we read must include whatever the clients write:

- gzip: a gzip stream (Java's ``GZIPOutputStream``); level 6 by default, as
  Kafka's ``compression.gzip.level``.
- snappy: the Java client writes snappy-java's "xerial" framing (header
  ``\\x82SNAPPY\\x00``, two int32 versions, then ``[int32 length][raw snappy
  block]`` repeated, 32 KiB of input per block); librdkafka writes a raw snappy
  block. Java reads both, so do we; we write the xerial framing.
- lz4: an LZ4 frame with independent 64 KiB blocks and no content size. Java's
  ``Lz4BlockInputStream`` rejects linked blocks, which ``lz4.frame`` writes by
  default.
- zstd: zstd frames, level 3 by default.

Decompression is bounded by ``max_size``: producers control the input, and a
few kilobytes can claim gigabytes. Every codec decompresses incrementally and
stops at the bound instead of allocating whatever the input asks for.
Malformed input and unknown codec ids raise :class:`DecodeError`.

The codec libraries are imported on first use: most brokers never meet one of
them, and together they would add some 8 ms to every start.
"""

from __future__ import annotations

import struct
import zlib

from kbroker.wire.primitives import DecodeError, read_uvarint

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "MAX_DECOMPRESSED_SIZE",
    "compress",
    "decompress",
]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# Far above any sane batch (Kafka's default max.message.bytes is 1 MiB), far
# below what would hurt the process.
MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

_GZIP_DEFAULT_LEVEL = 6
_ZSTD_DEFAULT_LEVEL = 3
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer, not zlib's

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version, min compatible version
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default, what the Java client writes
_INT32 = struct.Struct(">i")

# Decompressed output is produced in pieces of at most this size, so the
# overshoot past ``max_size`` is bounded too.
_CHUNK_SIZE = 256 * 1024


def compress(codec: int, data, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec``, framed as the Java client frames it.

    ``level`` is on the codec's own scale (Kafka's ``compression.<codec>.level``);
    None means Kafka's default. Snappy has no levels and ignores it.
    """
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        compressor = zlib.compressobj(
            _GZIP_DEFAULT_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS
        )
        return compressor.compress(data) + compressor.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        import lz4.frame

        # Level 0 is lz4's fast mode, what Java uses at its default level.
        return lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        import zstandard

        compressor = zstandard.ZstdCompressor(level=_ZSTD_DEFAULT_LEVEL if level is None else level)
        return compressor.compress(data)
    raise DecodeError(f"unknown compression codec {codec}")


def decompress(codec: int, data, max_size: int = MAX_DECOMPRESSED_SIZE) -> bytes:
    """``data`` decompressed; DecodeError if corrupt or larger than ``max_size`` bytes."""
    if codec == NONE:
        if len(data) > max_size:
            raise _too_large(max_size)
        return bytes(data)
    if codec == GZIP:
        return _gzip_decompress(data, max_size)
    if codec == SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == LZ4:
        return _lz4_decompress(data, max_size)
    if codec == ZSTD:
        return _zstd_decompress(data, max_size)
    raise DecodeError(f"unknown compression codec {codec}")


def _too_large(max_size: int) -> DecodeError:
    return DecodeError(f"decompressed data exceeds {max_size} bytes")


def _gzip_decompress(data, max_size: int) -> bytes:
    # Java's GZIPInputStream reads concatenated members, so we do too.
    out = bytearray()
    pending = data
    try:
        while True:
            decompressor = zlib.decompressobj(_GZIP_WBITS)
            while not decompressor.eof:
                budget = max_size - len(out) + 1
                chunk = decompressor.decompress(pending, min(budget, _CHUNK_SIZE))
                out += chunk
                if len(out) > max_size:
                    raise _too_large(max_size)
                pending = decompressor.unconsumed_tail
                if not chunk and not pending and not decompressor.eof:
                    raise DecodeError("truncated gzip stream")
            pending = decompressor.unused_data
            if not pending:
                return bytes(out)
    except zlib.error as error:
        raise DecodeError(f"corrupt gzip data: {error}") from None


def _lz4_decompress(data, max_size: int) -> bytes:
    import lz4.frame

    out = bytearray()
    pending = data
    try:
        while True:
            decompressor = lz4.frame.LZ4FrameDecompressor()
            while not decompressor.eof:
                budget = max_size - len(out) + 1
                chunk = decompressor.decompress(pending, max_length=min(budget, _CHUNK_SIZE))
                out += chunk
                if len(out) > max_size:
                    raise _too_large(max_size)
                pending = b""
                if not chunk and decompressor.needs_input and not decompressor.eof:
                    raise DecodeError("truncated lz4 frame")
            pending = decompressor.unused_data
            if not pending:
                return bytes(out)
    except RuntimeError as error:  # lz4.frame reports corrupt input as RuntimeError
        raise DecodeError(f"corrupt lz4 data: {error}") from None


def _zstd_decompress(data, max_size: int) -> bytes:
    # zstandard's stream reader honours read sizes but treats input that ends
    # mid-frame as a clean end of stream, so the frame structure is checked
    # first: with every block known to be complete, the reader cannot stop early.
    import zstandard

    _check_zstd_frames(data)
    out = bytearray()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        while True:
            chunk = reader.read(min(max_size - len(out) + 1, _CHUNK_SIZE))
            if not chunk:
                return bytes(out)
            out += chunk
            if len(out) > max_size:
                raise _too_large(max_size)
    except zstandard.ZstdError as error:
        raise DecodeError(f"corrupt zstd data: {error}") from None


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_UINT32_LE = struct.Struct("<I")
_FRAME_CONTENT_SIZE_BYTES = (0, 2, 4, 8)
_DICTIONARY_ID_BYTES = (0, 1, 2, 4)


def _check_zstd_frames(data) -> None:
    """Raise DecodeError unless ``data`` is a sequence of complete zstd frames (RFC 8878)."""
    end = len(data)
    if end == 0:
        raise DecodeError("empty zstd data")
    pos = 0
    try:
        while pos < end:
            (magic,) = _UINT32_LE.unpack_from(data, pos)
            if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
                (skip,) = _UINT32_LE.unpack_from(data, pos + 4)
                pos += 8 + skip
                continue
            if magic != _ZSTD_MAGIC:
                raise DecodeError("not a zstd frame")
            descriptor = data[pos + 4]
            single_segment = descriptor & 0x20
            content_size_flag = descriptor >> 6
            content_size_bytes = _FRAME_CONTENT_SIZE_BYTES[content_size_flag]
            if content_size_flag == 0 and single_segment:
                content_size_bytes = 1
            pos += (
                5
                + (0 if single_segment else 1)  # window descriptor
                + _DICTIONARY_ID_BYTES[descriptor & 0x03]
                + content_size_bytes
            )
            last_block = False
            while not last_block:
                if pos + 3 > end:
                    raise DecodeError("truncated zstd frame")
                header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
                last_block = bool(header & 1)
                block_type = (header >> 1) & 0x03
                if block_type == 3:
                    raise DecodeError("reserved zstd block type")
                pos += 3 + (1 if block_type == 1 else header >> 3)  # an RLE block holds one byte
            if descriptor & 0x04:
                pos += 4  # content checksum
    except (struct.error, IndexError):
        raise DecodeError("truncated zstd frame") from None
    if pos != end:
        raise DecodeError("truncated zstd frame")


def _snappy_decompress(data, max_size: int) -> bytes:
    view = memoryview(data)
    if view[: len(_XERIAL_MAGIC)] != _XERIAL_MAGIC:
        return _snappy_block(view, max_size, max_size)
    out = bytearray()
    pos = 0
    end = len(view)
    while pos < end:
        # snappy-java reads concatenated streams, each with its own header.
        if view[pos : pos + len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
            if pos + len(_XERIAL_HEADER) > end:
                raise DecodeError("truncated xerial snappy header")
            pos += len(_XERIAL_HEADER)
            continue
        if pos + 4 > end:
            raise DecodeError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise DecodeError(f"xerial snappy block length {length} runs past the data")
        out += _snappy_block(view[pos : pos + length], max_size - len(out), max_size)
        pos += length
    return bytes(out)


def _snappy_block(block, budget: int, max_size: int) -> bytes:
    # A raw snappy block starts with its uncompressed length; checking it first
    # keeps the decompressor from allocating what a hostile header claims.
    try:
        claimed, _ = read_uvarint(block, 0)
    except DecodeError:
        raise DecodeError("corrupt snappy block length") from None
    if claimed > budget:
        raise _too_large(max_size)
    import snappy

    try:
        return snappy.uncompress(block)
    except snappy.UncompressError as error:
        raise DecodeError(f"corrupt snappy data: {error.__cause__ or error}") from None


def _xerial_compress(data) -> bytes:
    import snappy

    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = snappy.compress(view[start : start + _XERIAL_BLOCK_SIZE])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)
