"""Frames and headers: the first bytes any peer sends us."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.wire import DecodeError
from kbroker.wire.frame import (
    FrameDecoder,
    FrameTooLarge,
    UnknownApiKey,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from kbroker.wire.schema import API_BY_NAME, Region

API_VERSIONS = API_BY_NAME["ApiVersions"]


def api_versions_request(version, correlation_id=7, client_id="client"):
    body = API_VERSIONS.request_class(client_software_name="kb", client_software_version="1")
    return encode_request(18, version, correlation_id, client_id, body)


@given(chunk_sizes=st.lists(st.integers(1, 40), min_size=1, max_size=50))
@settings(max_examples=50)
def test_frames_survive_any_chunking(chunk_sizes):
    stream = b"".join(api_versions_request(v, correlation_id=v) for v in range(5))
    decoder = FrameDecoder()
    frames = []
    position = 0
    sizes = iter(chunk_sizes * (len(stream) // len(chunk_sizes) + 1))
    while position < len(stream):
        size = next(sizes)
        decoder.feed(stream[position : position + size])
        position += size
        while (frame := decoder.next_frame()) is not None:
            frames.append(frame)
    assert [decode_request_header(frame)[0].correlation_id for frame in frames] == list(range(5))
    assert decoder.buffered_bytes == 0


def test_a_frame_is_a_writable_copy_whatever_was_fed():
    """bytes are kept as fed until their frames are taken (no copy into the buffer); anything else is copied
    at once, so that a caller reusing its buffer changes no frame."""
    first, second, third = (api_versions_request(3, correlation_id=n) for n in (1, 2, 3))
    decoder = FrameDecoder()
    decoder.feed(first + second[:5])  # bytes, ending inside the second frame
    frame = decoder.next_frame()
    assert isinstance(frame, bytearray) and frame == first[4:]
    frame[0:2] = b"\xff\xff"  # a frame is the caller's own (produce stamps batches in place)
    reused = bytearray(second[5:] + third)
    decoder.feed(reused)
    reused[:] = bytes(len(reused))
    assert [decoder.next_frame(), decoder.next_frame(), decoder.next_frame()] == [second[4:], third[4:], None]
    assert decoder.buffered_bytes == 0


def test_oversized_frame_is_refused_from_its_size_alone():
    decoder = FrameDecoder(max_frame_bytes=1024)
    decoder.feed(struct.pack(">i", 2**31 - 1))
    with pytest.raises(FrameTooLarge) as caught:
        decoder.next_frame()
    assert caught.value.size == 2**31 - 1
    assert decoder.buffered_bytes == 4  # nothing of the claimed body was kept


def test_negative_frame_size_is_an_error():
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", -5))
    with pytest.raises(DecodeError):
        decoder.next_frame()


def test_incomplete_frame_waits_and_reports_what_it_needs():
    frame = api_versions_request(3)
    decoder = FrameDecoder()
    decoder.feed(frame[:2])
    assert decoder.next_frame() is None and decoder.needed_bytes() == 2
    decoder.feed(frame[2:10])
    assert decoder.next_frame() is None and decoder.needed_bytes() == len(frame) - 10
    decoder.feed(frame[10:])
    assert decoder.next_frame() == frame[4:]


@pytest.mark.parametrize("version, header_version", [(0, 1), (2, 1), (3, 2), (4, 2)])
def test_request_header_version_follows_flexibility(version, header_version):
    frame = api_versions_request(version, client_id=None)
    header, body_start = decode_request_header(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, version, 7, None)
    assert header.version == header_version
    body = API_VERSIONS.decode_request(version, frame[4 + body_start :])
    assert body.client_software_name == ("kb" if version >= 3 else "")


def test_unsupported_version_of_a_known_api_still_parses_its_header():
    raw = struct.pack(">hhi", 18, 99, 5) + struct.pack(">h", 1) + b"c" + b"\x00"
    header, _ = decode_request_header(raw)
    assert (header.api_version, header.correlation_id, header.client_id) == (99, 5, "c")


def test_unknown_api_key_carries_the_correlation_id():
    with pytest.raises(UnknownApiKey) as caught:
        decode_request_header(struct.pack(">hhi", 9999, 0, 42) + b"\xff\xff")
    assert caught.value.correlation_id == 42


@pytest.mark.parametrize("raw", [b"", b"\x00\x12", b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x05ab"])
def test_truncated_headers_are_decode_errors(raw):
    with pytest.raises(DecodeError):
        decode_request_header(raw)


def test_api_versions_response_uses_header_v0_even_when_flexible():
    body = API_VERSIONS.response_class(api_keys=[API_VERSIONS.response_class.ApiVersion(18, 0, 4)])
    frame = encode_response(18, 4, 11, body)
    assert frame.regions == []
    size, correlation_id = struct.unpack_from(">ii", frame)
    assert (size, correlation_id) == (len(frame) - 4, 11)
    assert decode_response(18, 4, bytes(frame[4:])) == (11, body)


class FakeRegion(Region):
    def __init__(self, length):
        self.length = length


def test_response_regions_are_counted_in_the_size_but_not_copied():
    response = API_BY_NAME["Fetch"].response_class
    topic = response.FetchableTopicResponse(topic="t", partitions=[response.FetchableTopicResponse.PartitionData(records=FakeRegion(1000))])
    frame = encode_response(1, 11, 3, response(responses=[topic]))
    ((offset, region),) = frame.regions
    assert region.length == 1000
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4 + 1000
    assert struct.unpack_from(">i", frame, offset - 4)[0] == 1000


def test_a_partial_large_frame_is_handed_over_once_a_quarter_has_arrived():
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    body = bytes(range(256)) * 400  # 102,400 bytes
    frame = struct.pack(">i", len(body)) + body
    decoder.feed(frame[:20_000])
    assert decoder.take_partial_frame(64 * 1024) is None  # under a quarter: keep buffering as it arrives
    decoder.feed(frame[20_000:40_000])
    assert decoder.take_partial_frame(200_000) is None  # a small frame is never handed over
    partial, arrived = decoder.take_partial_frame(64 * 1024)
    assert (len(partial), arrived) == (len(body), 40_000 - 4)
    assert partial[:arrived] == body[:arrived]
    assert decoder.buffered_bytes == 0 and decoder.next_frame() is None
    decoder.feed(frame[:10])  # the decoder goes on with the stream after the handed-over frame
    assert decoder.buffered_bytes == 10


def test_a_body_encoded_once_goes_out_as_the_value_would():
    from kbroker.handlers.api_versions import api_versions_response
    from kbroker.wire.frame import EncodedBody

    answer = api_versions_response()
    for version in range(0, 5):
        kept = EncodedBody.of(18, version, answer)
        assert bytes(encode_response(18, version, 99, kept)) == bytes(encode_response(18, version, 99, answer))
        assert kept.error_code == 0
