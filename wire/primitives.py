"""Kafka's primitive types.

Readers take a buffer (``bytes`` or ``memoryview``) and an offset and return
``(value, next_offset)``; they never copy more than the value itself. Writers
append to a ``bytearray``. Any malformed input raises :class:`DecodeError` and
nothing else, so callers have one exception to turn into a Kafka error code or
a closed connection.

The schema code generator inlines the fixed-width cases with ``struct``; the
functions here cover the variable-length ones and serve hand-written codecs
(frames, record batches).
"""

from __future__ import annotations

import struct
import uuid

__all__ = [
    "DecodeError",
    "read_uvarint",
    "read_varint",
    "read_varlong",
    "write_uvarint",
    "write_varint",
    "write_varlong",
    "uvarint_size",
    "varint_size",
    "read_string",
    "read_nullable_string",
    "read_compact_string",
    "read_compact_nullable_string",
    "read_bytes",
    "read_nullable_bytes",
    "read_compact_bytes",
    "read_compact_nullable_bytes",
    "read_uuid",
    "write_string",
    "write_nullable_string",
    "write_compact_string",
    "write_compact_nullable_string",
    "write_bytes",
    "write_nullable_bytes",
    "write_compact_bytes",
    "write_compact_nullable_bytes",
    "write_uuid",
    "ZERO_UUID",
]


class DecodeError(ValueError):
    """The bytes are not a valid encoding of what was expected.

    The single exception type for malformed input anywhere in ``wire``.
    """


INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)

# An unsigned varint of a 32-bit quantity has at most 5 bytes, of 64 bits 10.
_UVARINT_MAX_BYTES = 5
_UVARLONG_MAX_BYTES = 10


def _read_unsigned(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    try:
        byte = buf[pos]
    except IndexError:
        raise DecodeError("truncated varint") from None
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    for index in range(1, max_bytes):
        try:
            byte = buf[pos + index]
        except IndexError:
            raise DecodeError("truncated varint") from None
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + index + 1
        shift += 7
    raise DecodeError(f"varint longer than {max_bytes} bytes")


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 32 bits."""
    # Lengths up to 2 MiB take at most three bytes: unrolled, as they are on every hot path.
    try:
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
        value = byte & 0x7F
        byte = buf[pos + 1]
        if byte < 0x80:
            return value | byte << 7, pos + 2
        value |= (byte & 0x7F) << 7
        byte = buf[pos + 2]
        if byte < 0x80:
            return value | byte << 14, pos + 3
    except IndexError:
        raise DecodeError("truncated varint") from None
    value, pos = _read_unsigned(buf, pos, _UVARINT_MAX_BYTES)
    if value > 0xFFFFFFFF:
        raise DecodeError("unsigned varint overflows 32 bits")
    return value, pos


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    value, pos = _read_unsigned(buf, pos, _UVARLONG_MAX_BYTES)
    if value > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError("unsigned varlong overflows 64 bits")
    return value, pos


def read_varint(buf, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed 32-bit varint."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed 64-bit varint."""
    raw, pos = read_uvarlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0x80:
        out.append(value)
        return
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def varint_size(value: int) -> int:
    return uvarint_size(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _take(buf, pos: int, length: int) -> int:
    end = pos + length
    if length < 0 or end > len(buf):
        raise DecodeError(f"length {length} runs past the end of the buffer")
    return end


def _int16_length(buf, pos: int) -> tuple[int, int]:
    try:
        return INT16.unpack_from(buf, pos)[0], pos + 2
    except struct.error:
        raise DecodeError("truncated length") from None


def _int32_length(buf, pos: int) -> tuple[int, int]:
    try:
        return INT32.unpack_from(buf, pos)[0], pos + 4
    except struct.error:
        raise DecodeError("truncated length") from None


def _text(buf, pos: int, end: int) -> str:
    try:
        return str(buf[pos:end], "utf-8")
    except UnicodeDecodeError as error:
        raise DecodeError(f"string is not UTF-8: {error}") from None


def read_string(buf, pos: int) -> tuple[str, int]:
    length, pos = _int16_length(buf, pos)
    if length < 0:
        raise DecodeError("null where a non-nullable string is required")
    end = _take(buf, pos, length)
    return _text(buf, pos, end), end


def read_nullable_string(buf, pos: int) -> tuple[str | None, int]:
    length, pos = _int16_length(buf, pos)
    if length == -1:
        return None, pos
    end = _take(buf, pos, length)
    return _text(buf, pos, end), end


def read_compact_nullable_string(buf, pos: int) -> tuple[str | None, int]:
    length, pos = read_uvarint(buf, pos)
    if length == 0:
        return None, pos
    end = _take(buf, pos, length - 1)
    return _text(buf, pos, end), end


def read_compact_string(buf, pos: int) -> tuple[str, int]:
    value, pos = read_compact_nullable_string(buf, pos)
    if value is None:
        raise DecodeError("null where a non-nullable string is required")
    return value, pos


def read_nullable_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    length, pos = _int32_length(buf, pos)
    if length == -1:
        return None, pos
    end = _take(buf, pos, length)
    return bytes(buf[pos:end]), end


def read_bytes(buf, pos: int) -> tuple[bytes, int]:
    value, pos = read_nullable_bytes(buf, pos)
    if value is None:
        raise DecodeError("null where non-nullable bytes are required")
    return value, pos


def read_compact_nullable_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_uvarint(buf, pos)
    if length == 0:
        return None, pos
    end = _take(buf, pos, length - 1)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf, pos: int) -> tuple[bytes, int]:
    value, pos = read_compact_nullable_bytes(buf, pos)
    if value is None:
        raise DecodeError("null where non-nullable bytes are required")
    return value, pos


def read_uuid(buf, pos: int) -> tuple[uuid.UUID, int]:
    end = _take(buf, pos, 16)
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_string(out: bytearray, value: str) -> None:
    data = value.encode()
    out += INT16.pack(len(data))
    out += data


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
    else:
        write_string(out, value)


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode()
    write_uvarint(out, len(data) + 1)
    out += data


write_compact_string = write_compact_nullable_string


def write_nullable_bytes(out: bytearray, value) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(value))
    out += value


write_bytes = write_nullable_bytes


def write_compact_nullable_bytes(out: bytearray, value) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    out += value


write_compact_bytes = write_compact_nullable_bytes


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes
