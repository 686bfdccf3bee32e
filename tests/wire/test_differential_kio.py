"""Byte-for-byte agreement with kio, an independent (compiled) codec.

For every (api, version, kind) that kio knows and we declare: values drawn for
our schema are encoded by both codecs to identical bytes, kio's bytes decode
with ours to the same value, and our bytes decode with kio to the same entity.
"""

import io

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer

from testkit.kio_bridge import NotComparable, from_kio, kio_class, to_kio
from tests.wire.values import value_strategy
from kbroker.wire.schema import API_BY_KEY

# (api name, kind, version) pairs that differ from kio on purpose, with the reason.
KNOWN_DIFFERENCES: dict[tuple[str, str, int], str] = {}


def _pairs():
    for api in API_BY_KEY.values():
        for version in api.versions:
            for kind in ("request", "response"):
                if kio_class(api.name, version, kind) is not None:
                    yield api, kind, version


PAIRS = [
    pytest.param(api, kind, version, id=f"{api.name}-{kind}-v{version}")
    for api, kind, version in _pairs()
    if (api.name, kind, version) not in KNOWN_DIFFERENCES
]


@pytest.mark.parametrize("api, kind, version", PAIRS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_same_bytes_as_kio(api, kind, version, data):
    kio_cls = kio_class(api.name, version, kind)
    spec = getattr(api.spec, kind)
    value = data.draw(value_strategy(spec, version, api.is_flexible(version), narrow=True))
    try:
        entity = to_kio(value, kio_cls)
    except NotComparable:
        assume(False)
    theirs = io.BytesIO()
    entity_writer(kio_cls)(theirs, entity)
    theirs = theirs.getvalue()
    encode = api.encode_request if kind == "request" else api.encode_response
    decode = api.decode_request if kind == "request" else api.decode_response
    ours = bytes(encode(version, value))
    assert ours == theirs
    assert decode(version, theirs) == value
    decoded, size = entity_reader(kio_cls)(ours, 0)
    assert size == len(ours)
    assert from_kio(decoded, type(value)) == value


def test_summary_of_checked_pairs(capsys):
    """Every (api, version) we declare is checked against kio or has a written reason."""
    checked = {(api.name, version) for api, kind, version in _pairs()}
    declared = {(api.name, version) for api in API_BY_KEY.values() for version in api.versions}
    unchecked = sorted(declared - checked)
    with capsys.disabled():
        print(f"\nkio differential: {len(PAIRS)} (api, version, kind) triples over {len(checked)} (api, version) pairs;"
              f" {len(unchecked)} declared pairs kio does not know: {unchecked}")
    assert all(pair in REASONS_KIO_CANNOT_CHECK for pair in unchecked), unchecked


# Declared (api, version) pairs kio has no class for, and why that is acceptable.
_PRODUCE_LEGACY = (
    "removed from Kafka in 4.0 (KIP-896) so kio has no class; advertised for librdkafka and answered"
    " with UNSUPPORTED_VERSION; checked byte for byte against kafka-python's legacy classes in"
    " test_differential_kafka_python.py"
)
_NEWER_THAN_KIO = ("added in Kafka 4.4, newer than the kio release installed; compared with Apache Kafka 4.4 itself "
                   "by compat_tests/test_differential.py")
REASONS_KIO_CANNOT_CHECK: dict[tuple[str, int], str] = {("Produce", version): _PRODUCE_LEGACY for version in (0, 1, 2)} | {
    pair: _NEWER_THAN_KIO for pair in (("ApiVersions", 5), ("DeleteGroups", 3), ("TxnOffsetCommit", 6))}
