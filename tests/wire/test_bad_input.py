"""Malformed bytes raise DecodeError and nothing else, quickly, in bounded memory."""

import random
import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.wire import DecodeError
from kbroker.wire.frame import FrameDecoder, decode_request_header
from kbroker.wire.schema import API_BY_KEY
from tests.wire.values import value_strategy

MESSAGES = [
    pytest.param(api, kind, id=f"{api.name}-{kind}") for api in API_BY_KEY.values() for kind in ("request", "response")
]


def decoder(api, kind):
    return api.decode_request if kind == "request" else api.decode_response


def decode_or_reject(decode, version, data) -> None:
    try:
        decode(version, data)
    except DecodeError:
        pass


@pytest.mark.parametrize("api, kind", MESSAGES)
@settings(max_examples=40, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), raw=st.binary(max_size=200))
def test_random_bytes(api, kind, data, raw):
    version = data.draw(st.sampled_from(list(api.versions)))
    decode_or_reject(decoder(api, kind), version, raw)


@pytest.mark.parametrize("api, kind", MESSAGES)
@settings(max_examples=25, deadline=2000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_mutated_valid_messages(api, kind, data, seed):
    version = data.draw(st.sampled_from(list(api.versions)))
    spec = getattr(api.spec, kind)
    value = data.draw(value_strategy(spec, version, api.is_flexible(version)))
    encode = api.encode_request if kind == "request" else api.encode_response
    encoded = bytearray(encode(version, value))
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 4)):
        mutation = rng.choice(("flip", "truncate", "insert", "huge"))
        if mutation == "flip" and encoded:
            encoded[rng.randrange(len(encoded))] = rng.randrange(256)
        elif mutation == "truncate":
            del encoded[rng.randrange(len(encoded) + 1) :]
        elif mutation == "insert":
            at = rng.randrange(len(encoded) + 1)
            encoded[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif mutation == "huge" and len(encoded) >= 4:
            at = rng.randrange(len(encoded) - 3)
            encoded[at : at + 4] = rng.choice((b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\xff\xff\xff\x7f"))
    decode_or_reject(decoder(api, kind), version, bytes(encoded))


@pytest.mark.parametrize(
    "claim",
    [
        struct.pack(">i", 2**31 - 1),  # classic array or bytes count
        b"\xff\xff\xff\xff\x07",  # compact count near 2**32
        b"\xff\xff\xff\xff\xff\xff",  # varint longer than allowed
    ],
)
def test_huge_counts_allocate_nothing(claim):
    """A count claiming billions of elements is refused before anything is allocated."""
    payload = claim * 8 + b"\x00" * 64
    tracemalloc.start()
    try:
        for api in API_BY_KEY.values():
            for version in api.versions:
                decode_or_reject(api.decode_request, version, payload)
                decode_or_reject(api.decode_response, version, payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, peak


def test_header_decoding_rejects_garbage():
    rng = random.Random(1)
    for _ in range(2000):
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        try:
            decode_request_header(raw)
        except DecodeError:
            pass


def test_frame_decoder_on_random_streams_keeps_memory_bounded():
    rng = random.Random(2)
    for _ in range(200):
        decoder = FrameDecoder(max_frame_bytes=4096)
        try:
            for _ in range(20):
                decoder.feed(bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))
                while decoder.next_frame() is not None:
                    pass
                assert decoder.buffered_bytes <= 4096 + 4 + 300
        except DecodeError:
            pass
