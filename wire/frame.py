"""Size-prefixed frames and the request/response headers.

Every Kafka message travels as ``int32 size`` + ``size`` bytes. Request
headers are v1 (api key, version, correlation id, client id) or, for flexible
versions, v2 (v1 plus tagged fields); response headers v0 (correlation id) or
v1 (plus tagged fields). :class:`FrameDecoder` is the sans-IO reader a server
feeds with whatever the socket returned; it checks the size against its limit
before keeping a single byte of the body.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kbroker.wire.primitives import DecodeError, read_nullable_string, read_uvarint, write_nullable_string
from kbroker.wire.schema import API_BY_KEY, EncodeBuffer

_SIZE = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhi")

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class FrameTooLarge(DecodeError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class UnknownApiKey(DecodeError):
    def __init__(self, api_key: int, correlation_id: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key
        self.correlation_id = correlation_id


class FrameDecoder:
    """Splits a byte stream into frames, refusing any over ``max_frame_bytes``.

    Each frame's body is copied once, out of what was fed: ``bytes`` fed while nothing is buffered (a
    socket's read, mostly) are kept as they are, not copied into the buffer first; only a partial frame
    left at their end is, once more bytes come.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer: bytearray | bytes = bytearray()  # bytes: a read kept as it came (immutable, not ours to change)
        self._start = 0

    def feed(self, data) -> None:
        if self._start == len(self._buffer):  # nothing buffered
            if type(data) is bytes:
                self._buffer = data
                self._start = 0
                return
            if type(self._buffer) is bytes:
                self._buffer = bytearray()
            else:
                self._buffer.clear()
            self._start = 0
        elif type(self._buffer) is bytes:  # a partial frame at the end of a kept read: now ours to grow
            self._buffer = bytearray(memoryview(self._buffer)[self._start:])
            self._start = 0
        self._buffer += data

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer) - self._start

    def needed_bytes(self) -> int:
        """How many more bytes complete the next frame (at least 1)."""
        available = len(self._buffer) - self._start
        if available < 4:
            return 4 - available
        size = _SIZE.unpack_from(self._buffer, self._start)[0]
        return max(1, 4 + size - available)

    def next_frame_size(self) -> int | None:
        """The size of the next frame's body, once its size prefix has arrived (whole or not)."""
        if len(self._buffer) - self._start < 4:
            return None
        return _SIZE.unpack_from(self._buffer, self._start)[0]

    def take_partial_frame(self, min_size: int) -> tuple[bytearray, int] | None:
        """Hand over an incomplete frame of at least ``min_size`` bytes, to be read straight into.

        Returns a buffer the size of the frame's body holding the bytes that
        have arrived, and how many those are; the decoder forgets them, and
        the caller fills the rest (``socket.recv_into``) with no further
        copies. None when the next frame is small, complete or not yet sized,
        or while less than a quarter of it has arrived: a peer that claims a
        large frame and sends little never makes us allocate more than four
        times what it sent.
        """
        start = self._start
        available = len(self._buffer) - start
        if available < 4:
            return None
        size = _SIZE.unpack_from(self._buffer, start)[0]
        if size < min_size or available >= 4 + size or (available - 4) * 4 < size:
            return None
        if size > self.max_frame_bytes:
            raise FrameTooLarge(size, self.max_frame_bytes)
        body = bytearray(size)
        arrived = available - 4
        body[:arrived] = memoryview(self._buffer)[start + 4 :]
        self._buffer = bytearray()
        self._start = 0
        return body, arrived

    def next_frame(self) -> bytearray | None:
        """The next whole frame's body (a fresh, writable copy), or None until more bytes arrive."""
        start = self._start
        available = len(self._buffer) - start
        if available < 4:
            return None
        size = _SIZE.unpack_from(self._buffer, start)[0]
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(size, self.max_frame_bytes) if size >= 0 else DecodeError(f"negative frame size {size}")
        if available < 4 + size:
            return None
        with memoryview(self._buffer) as buffer:  # one copy, into a writable body: produce stamps batches in place
            body = bytearray(buffer[start + 4 : start + 4 + size])
        self._start = start + 4 + size
        if self._start > 65536 and self._start * 2 > len(self._buffer) and type(self._buffer) is bytearray:
            del self._buffer[: self._start]
            self._start = 0
        return body


@dataclass
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    unknown_tags: dict[int, bytes] | None = field(default=None, compare=True)

    @property
    def version(self) -> int:
        """The header's own version (1 or 2) for this api key and version."""
        return API_BY_KEY[self.api_key].request_header_version(self.api_version)


def decode_request_header(buf) -> tuple[RequestHeader, int]:
    """Parse a request frame's header; returns it and where the body starts.

    An unknown api key raises :class:`UnknownApiKey` (carrying the correlation
    id); a known key with an unsupported version still parses, since the
    header layout only depends on whether the version is flexible.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(view, 0)
    except struct.error:
        raise DecodeError("request header truncated") from None
    api = API_BY_KEY.get(api_key)
    if api is None:
        raise UnknownApiKey(api_key, correlation_id)
    client_id, pos = read_nullable_string(view, 8)
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    tagged = _TAGGED_REQUEST_HEADERS.get((api_key, api_version))
    if tagged is None:
        tagged = api.request_header_version(api_version) >= 2
        if api.min_version <= api_version <= api.max_version:  # (a client chooses the version: bounded)
            _TAGGED_REQUEST_HEADERS[(api_key, api_version)] = tagged
    if tagged:
        header.unknown_tags, pos = _read_unknown_tags(view, pos)
    return header, pos


_TAGGED_REQUEST_HEADERS: dict[tuple[int, int], bool] = {}  # (key, version) -> header v2, for every request


def _read_unknown_tags(view, pos: int):
    count, pos = read_uvarint(view, pos)
    if count > len(view) - pos:
        raise DecodeError("tagged field count runs past the end of the header")
    tags = None
    for _ in range(count):
        tag, pos = read_uvarint(view, pos)
        size, pos = read_uvarint(view, pos)
        if pos + size > len(view):
            raise DecodeError("tagged field runs past the end of the header")
        tags = tags or {}
        tags[tag] = bytes(view[pos : pos + size])
        pos += size
    return tags, pos


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body) -> bytes:
    """A whole request frame (size, header, body) for a value of the request class."""
    api = API_BY_KEY[api_key]
    out = bytearray(b"\0\0\0\0")
    out += _HEADER_FIXED.pack(api_key, api_version, correlation_id)
    write_nullable_string(out, client_id)
    if api.request_header_version(api_version) >= 2:
        out.append(0)
    api.encode_request(api_version, body, out)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


_RESPONSE_WRITERS: dict[tuple[int, int], tuple[bool, object]] = {}  # (key, version) -> (header v1, writer)


class EncodedBody:
    """A response body encoded already, for the version it was encoded for: written as it is. A constant
    answer (ApiVersions') is encoded once per version instead of once per request; ``error_code`` is the
    answer's own, for whoever looks at the answer rather than its bytes."""

    __slots__ = ("data", "error_code")

    def __init__(self, data: bytes, error_code: int = 0) -> None:
        self.data = data
        self.error_code = error_code

    @classmethod
    def of(cls, api_key: int, api_version: int, body) -> EncodedBody:
        """``body`` (an answer value) encoded for ``api_version``."""
        out = EncodeBuffer()
        API_BY_KEY[api_key].response_writer(api_version)(out, body)
        if out.regions:
            raise ValueError("an answer with file regions cannot be kept encoded")
        return cls(bytes(out), getattr(body, "error_code", 0) or 0)


def encode_response(api_key: int, api_version: int, correlation_id: int, body) -> EncodeBuffer:
    """A whole response frame; file regions in ``records`` fields stay in ``.regions``.

    The size prefix counts the regions' lengths, so the frame on the wire is
    ``out`` with each region's bytes spliced in at its recorded offset.
    """
    writing = _RESPONSE_WRITERS.get((api_key, api_version))
    if writing is None:  # looked up once per API and version: this runs for every answer
        api = API_BY_KEY[api_key]
        writing = _RESPONSE_WRITERS[(api_key, api_version)] = (api.response_header_version(api_version) >= 1,
                                                               api.response_writer(api_version))
    tagged, write = writing
    out = EncodeBuffer(_SIZE.pack(0) + _SIZE.pack(correlation_id))
    if tagged:
        out.append(0)
    if type(body) is EncodedBody:
        out += body.data
    else:
        write(out, body)
    regions = out.regions
    _SIZE.pack_into(out, 0, len(out) - 4 + (sum(region.length for _, region in regions) if regions else 0))
    return out


def decode_response(api_key: int, api_version: int, frame_body) -> tuple[int, object]:
    """(correlation id, response value) from a response frame's body."""
    api = API_BY_KEY[api_key]
    view = frame_body if isinstance(frame_body, memoryview) else memoryview(frame_body)
    try:
        (correlation_id,) = _SIZE.unpack_from(view, 0)
    except struct.error:
        raise DecodeError("response header truncated") from None
    pos = 4
    if api.response_header_version(api_version) >= 1:
        _, pos = _read_unknown_tags(view, pos)
    return correlation_id, api.decode_response(api_version, view[pos:])



async def read_frame(stream) -> bytes:
    """The body of the next whole frame (after its size) from a stream with ``receive_some``
    (a trio stream); EOFError if the connection closes first."""
    data = bytearray()
    while len(data) < 4 or len(data) < 4 + _SIZE.unpack_from(data)[0]:
        chunk = await stream.receive_some(1 << 20)
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return bytes(data[4:])
