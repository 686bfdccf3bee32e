"""Every message at every declared version survives encode then decode."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.wire import DecodeError
from kbroker.wire.schema import API_BY_KEY, UnsupportedVersion
from tests.wire.values import value_strategy

CASES = [
    pytest.param(api, kind, version, id=f"{api.name}-{kind}-v{version}")
    for api in API_BY_KEY.values()
    for version in api.versions
    for kind in ("request", "response")
]


@pytest.mark.parametrize("api, kind, version", CASES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_round_trip(api, kind, version, data):
    spec = getattr(api.spec, kind)
    value = data.draw(value_strategy(spec, version, api.is_flexible(version)))
    encode = api.encode_request if kind == "request" else api.encode_response
    decode = api.decode_request if kind == "request" else api.decode_response
    encoded = bytes(encode(version, value))
    assert decode(version, encoded) == value
    # Decoding is exact: one byte more or less is an error, never a different value.
    with pytest.raises(DecodeError):
        decode(version, encoded + b"\x00")
    if encoded:
        with pytest.raises(DecodeError):
            decode(version, encoded[:-1])


def test_unknown_tagged_fields_are_preserved():
    api = next(api for api in API_BY_KEY.values() if api.is_flexible(api.max_version))
    version = api.max_version
    value = api.request_class(unknown_tags={7: b"\x01\x02", 42: b""})
    encoded = bytes(api.encode_request(version, value))
    decoded = api.decode_request(version, encoded)
    assert decoded.unknown_tags == {7: b"\x01\x02", 42: b""}
    assert bytes(api.encode_request(version, decoded)) == encoded


def test_versions_outside_the_declaration_are_refused():
    api = API_BY_KEY[18]
    with pytest.raises(UnsupportedVersion):
        api.decode_request(api.max_version + 1, b"")
    with pytest.raises(UnsupportedVersion):
        api.encode_response(-1, api.response_class())


def test_every_api_the_issue_lists_is_declared():
    assert set(API_BY_KEY) >= EXPECTED_KEYS, sorted(EXPECTED_KEYS - set(API_BY_KEY))


EXPECTED_KEYS = {
    0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    30, 31, 32, 33, 35, 36, 37, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 59, 60, 61,
    62, 63, 65, 66, 68, 69, 71, 75,
    76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92,  # share groups (issue 28, KIP-932)
}
