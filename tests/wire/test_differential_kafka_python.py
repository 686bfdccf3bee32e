"""Byte-for-byte agreement with kafka-python, an independent (pure Python) codec.

kafka-python 3.x builds its message classes from Kafka's JSON definitions. For
every (api, version, kind) that kafka-python knows and we declare: values drawn
for our schema are encoded by both codecs to identical bytes, kafka-python's
bytes decode with ours to the same value, and our bytes decode with
kafka-python to the same message. The conversion rules (renamed and bitfield
fields, zero UUIDs, tagged structs) are in :mod:`tests.wire.kafka_python_bridge`.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wire.kafka_python_bridge import (
    from_kp,
    kp_class,
    kp_classes,
    kp_decode,
    kp_encode,
    kp_versions,
    to_kp,
    unexpected_overrides,
)
from tests.wire.values import value_strategy
from kbroker.wire.schema import API_BY_KEY, API_BY_NAME

# (api name, kind, version) triples that differ from kafka-python on purpose, with the reason.
KNOWN_DIFFERENCES: dict[tuple[str, str, int], str] = {}


def _triples():
    for api in API_BY_KEY.values():
        for version in api.versions:
            for kind in ("request", "response"):
                if kp_class(api.key, version, kind) is not None:
                    yield api, kind, version


TRIPLES = [
    pytest.param(api, kind, version, id=f"{api.name}-{kind}-v{version}")
    for api, kind, version in _triples()
    if (api.name, kind, version) not in KNOWN_DIFFERENCES
]


@pytest.mark.parametrize("api, kind, version", TRIPLES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_same_bytes_as_kafka_python(api, kind, version, data):
    kp_cls = kp_class(api.key, version, kind)
    flexible = api.is_flexible(version)
    assert kp_cls.flexible_version_q(version) == flexible
    spec = getattr(api.spec, kind)
    value = data.draw(value_strategy(spec, version, flexible, narrow=True))
    theirs = kp_encode(to_kp(value, kp_cls, version, flexible), version)
    encode = api.encode_request if kind == "request" else api.encode_response
    decode = api.decode_request if kind == "request" else api.decode_response
    ours = bytes(encode(version, value))
    assert ours == theirs
    assert decode(version, theirs) == value
    decoded, size = kp_decode(kp_cls, version, ours)
    assert size == len(ours)
    assert from_kp(decoded, type(value), kp_cls, version, flexible) == value


def test_kafka_python_overrides_are_all_accounted_for():
    """A message class overriding encode/decode/json_patch we have not reviewed fails here."""
    assert unexpected_overrides() == {}


def test_summary_of_checked_triples(capsys):
    """Every declared (api, version, kind) is checked against kafka-python or has a written reason."""
    checked = {(api.name, kind, version) for api, kind, version in _triples()}
    declared = {(api.name, kind, version) for api in API_BY_KEY.values() for version in api.versions
                for kind in ("request", "response")}
    unknown_apis = sorted({api.name for api in API_BY_KEY.values()
                           if (api.key, "request") not in kp_classes() and (api.key, "response") not in kp_classes()})
    outside = {}
    for api in API_BY_KEY.values():
        for kind in ("request", "response"):
            cls = kp_classes().get((api.key, kind))
            if cls is None:
                continue
            missing = [v for v in api.versions if v not in kp_versions(cls)]
            if missing:
                outside[f"{api.name}-{kind}"] = (
                    f"{missing} (kafka-python: v{kp_versions(cls).start}-{kp_versions(cls).stop - 1})"
                )
    with capsys.disabled():
        print(f"\nkafka-python differential: {len(TRIPLES)} (api, version, kind) triples checked"
              f" ({len(KNOWN_DIFFERENCES)} known differences) out of {len(declared)} declared;"
              f"\n  APIs kafka-python has no classes for: {unknown_apis}"
              f"\n  declared versions outside kafka-python's validVersions: {outside}")
    # What is left unchecked is so for one of two reasons only: kafka-python lacks
    # the API, or its JSON (Kafka 4's) no longer describes the version (Kafka 4
    # dropped versions below new minimums, and with them the fields only those
    # versions had). Both are printed above.
    for name, kind, version in KNOWN_DIFFERENCES:
        assert (name, kind, version) in checked, f"stale KNOWN_DIFFERENCES entry {(name, kind, version)}"


# Produce v0-2 left Kafka with 4.0 (KIP-896), so neither kio nor kafka-python's
# JSON-driven classes know them; kafka-python's older hand-written classes do.
@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("kind", ["request", "response"])
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_produce_v0_to_v2_match_kafka_pythons_legacy_classes(kind, version, data):
    from kafka.protocol.old import produce as legacy

    api = API_BY_NAME["Produce"]
    value = data.draw(value_strategy(getattr(api.spec, kind), version, False))
    legacy_class = getattr(legacy, f"Produce{kind.capitalize()}_v{version}")
    if kind == "request":
        topics = [
            (t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in value.topic_data
        ]
        theirs = legacy_class(acks=value.acks, timeout_ms=value.timeout_ms, topic_data=topics).encode()
        ours = bytes(api.encode_request(version, value))
    else:
        def partitions(topic):
            extra = (lambda p: [p.log_append_time_ms]) if version >= 2 else (lambda p: [])
            return [tuple([p.index, p.error_code, p.base_offset] + extra(p)) for p in topic.partition_responses]

        fields = {"responses": [(t.name, partitions(t)) for t in value.responses]}
        if version >= 1:
            fields["throttle_time_ms"] = value.throttle_time_ms
        theirs = legacy_class(**fields).encode()
        ours = bytes(api.encode_response(version, value))
    assert ours == theirs
