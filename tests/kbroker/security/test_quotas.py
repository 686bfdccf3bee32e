"""Client quotas (kbroker/security/quotas.py): precedence, describe filters, validation, Kafka's
windowed rate and throttle time, and a simulated client that obeys its throttles."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.log.clock import FakeClock
from kbroker.security.quotas import (CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, ClientQuotas,
                                     QuotaMeters, RateMeter, TokenBucket, describe, entity, ip_quota_for, quota_for,
                                     validate_alteration, validate_describe)
from kbroker.wire.errors import ErrorCode

LEVELS = [  # Kafka's precedence, most specific first
    entity(user="alice", client_id="app"), entity(user="alice", client_id=None), entity(user="alice"),
    entity(user=None, client_id="app"), entity(user=None, client_id=None), entity(user=None),
    entity(client_id="app"), entity(client_id=None),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_quota_wins(level):
    quotas = {candidate: {PRODUCER_BYTE_RATE: 100.0 + index} for index, candidate in enumerate(LEVELS[level:])}
    bound, metered = quota_for(quotas, "alice", "app", PRODUCER_BYTE_RATE)
    assert bound == 100.0
    assert dict(metered).keys() == dict(LEVELS[level]).keys()
    assert quota_for(quotas, "alice", "app", CONSUMER_BYTE_RATE) == (None, ())


def test_clients_share_a_meter_only_when_they_share_the_quota_entity():
    quotas = {entity(user="alice"): {PRODUCER_BYTE_RATE: 10.0}, entity(client_id=None): {PRODUCER_BYTE_RATE: 5.0}}
    assert quota_for(quotas, "alice", "a", PRODUCER_BYTE_RATE)[1] == quota_for(quotas, "alice", "b",
                                                                               PRODUCER_BYTE_RATE)[1]
    # The default client-id quota is each client id's own.
    assert quota_for(quotas, "bob", "a", PRODUCER_BYTE_RATE) == (5.0, entity(client_id="a"))
    assert quota_for(quotas, "bob", "b", PRODUCER_BYTE_RATE) == (5.0, entity(client_id="b"))


QUOTAS = {entity(user="alice"): {PRODUCER_BYTE_RATE: 1.0}, entity(user=None): {PRODUCER_BYTE_RATE: 2.0},
          entity(user="alice", client_id="app"): {CONSUMER_BYTE_RATE: 3.0}, entity(client_id="app"): {"x": 4.0}}


@pytest.mark.parametrize("components, strict, expected", [
    ([("user", 0, "alice")], False, [entity(user="alice"), entity(user="alice", client_id="app")]),
    ([("user", 0, "alice")], True, [entity(user="alice")]),
    ([("user", 1, None)], False, [entity(user=None)]),
    ([("user", 2, None)], True, [entity(user="alice"), entity(user=None)]),
    ([("user", 2, None), ("client-id", 2, None)], True, [entity(user="alice", client_id="app")]),
    ([("client-id", 0, "other")], False, []),
])
def test_describe_filters(components, strict, expected):
    assert sorted(repr(found) for found, _ in describe(QUOTAS, components, strict)) == sorted(map(repr, expected))


@pytest.mark.parametrize("parts, key, value, remove, message", [
    ([("user", "a"), ("user", "b")], PRODUCER_BYTE_RATE, 1.0, False, "twice"),
    ([("group", "a")], PRODUCER_BYTE_RATE, 1.0, False, "group"),
    ([("ip", "1.2.3.4"), ("user", "a")], "connection_creation_rate", 1.0, False, "combined"),
    ([("ip", "not-an-ip")], "connection_creation_rate", 1.0, False, "IP"),
    ([("user", "a")], "connection_creation_rate", 1.0, False, "key"),
    ([("user", "a")], PRODUCER_BYTE_RATE, -5.0, False, "greater than 0"),
    ([("user", "a")], PRODUCER_BYTE_RATE, float("inf"), False, "finite"),
    ([("user", "a")], PRODUCER_BYTE_RATE, 1e20, False, "too large for a LONG"),
    ([("user", "a")], PRODUCER_BYTE_RATE, 1.5, False, "fractional"),
    ([], PRODUCER_BYTE_RATE, 1.0, False, "empty"),
])
def test_alterations_kafka_refuses(parts, key, value, remove, message):
    code, text = validate_alteration(parts, key, value, remove)
    assert code == ErrorCode.INVALID_REQUEST and message in text


def test_valid_alterations_and_describe_filters():
    assert validate_alteration([("user", None), ("client-id", "c")], "request_percentage", 12.5, False) is None
    assert validate_alteration([("ip", None)], "connection_creation_rate", 10.0, False) is None
    assert validate_alteration([("user", "a")], PRODUCER_BYTE_RATE, -1.0, True) is None
    assert validate_describe([("user", 0, None)])[0] == ErrorCode.INVALID_REQUEST
    assert validate_describe([("user", 2, None), ("user", 1, None)])[0] == ErrorCode.INVALID_REQUEST
    assert validate_describe([("user", 0, "a"), ("client-id", 2, None)]) is None
    assert validate_describe([("group", 0, "a")])[0] == ErrorCode.UNSUPPORTED_VERSION  # as Kafka 4.4 answers
    assert validate_describe([("", 0, "a")])[0] == ErrorCode.INVALID_REQUEST


def test_rate_is_kafkas_windowed_rate():
    meter = RateMeter(samples=11, window_ms=1000)
    meter.record(1000, now_ms=0)
    # One sample so far: the window still counts 10 whole windows (Kafka's minimum), plus the elapsed time.
    assert meter.window_size_ms(500) == 10_500
    assert meter.rate(500) == pytest.approx(1000 / 10.5)
    for second in range(1, 20):
        meter.record(1000, now_ms=second * 1000)
    assert meter.rate(19_000) == pytest.approx(11_000 / 10.0)  # 11 samples kept, spanning 10 s
    assert meter.rate(60_000) == 0  # all expired


def test_throttle_time_is_kafkas_and_bounded():
    meters = QuotaMeters(samples=11, window_ms=1000)
    assert meters.record_and_throttle_ms(PRODUCER_BYTE_RATE, (), 1000.0, 5000, 0) == 0  # 5000 B over 10 s
    throttle = meters.record_and_throttle_ms(PRODUCER_BYTE_RATE, (), 1000.0, 10_000, 100)
    # 15000 B over 10.1 s: (1485 - 1000) / 1000 * 10.1 s, capped at one window.
    assert throttle == 1000
    assert meters.record_and_throttle_ms(PRODUCER_BYTE_RATE, ("other",), 1000.0, 10, 100) == 0


def test_a_client_that_obeys_its_throttles_gets_its_quota():
    meters, bound = QuotaMeters(samples=11, window_ms=1000), 1_000_000.0
    now, sent = 0, 0
    while now < 30_000:
        throttle = meters.record_and_throttle_ms(PRODUCER_BYTE_RATE, (), bound, 64 * 1024, now)
        sent += 64 * 1024
        now += max(throttle, 2)  # 2 ms per request when unthrottled: ~32 MB/s wanted
    assert abs(sent / 30 - bound) <= 0.2 * bound


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 10**7)), max_size=40))
def test_throttle_is_never_negative_nor_over_a_window(steps):
    meters, now = QuotaMeters(samples=11, window_ms=1000, limit=4), 0
    for gap, value in steps:
        now += gap
        throttle = meters.record_and_throttle_ms(PRODUCER_BYTE_RATE, (now % 7,), 1000.0, value, now)
        assert 0 <= throttle <= 1000
    assert len(meters._meters) <= 4


def test_a_token_bucket_bursts_overdraws_once_and_refills_at_its_rate():
    bucket = TokenBucket(rate=2, window_s=11, now_ms=0)  # a burst of 22 mutations
    assert not bucket.exceeded(0)
    bucket.record(20, 0)
    assert not bucket.exceeded(0) and bucket.throttle_ms(0) == 0  # 2 left
    bucket.record(10, 0)  # taken although it overdraws: -8
    assert bucket.exceeded(0) and bucket.throttle_ms(0) == 4000
    assert bucket.throttle_ms(3000) == 1000 and bucket.exceeded(3999)
    assert not bucket.exceeded(4001)
    assert bucket.throttle_ms(1_000_000) == 0 and bucket.tokens == 22  # refills no further than the burst


def test_a_token_bucket_follows_an_altered_bound():
    meters = QuotaMeters(samples=11, window_ms=1000)
    bucket = meters.bucket(entity(client_id="c"), 1.0, now_ms=0)
    bucket.record(21, 0)  # 11 - 21 = -10: 10 s at 1/s
    assert meters.bucket(entity(client_id="c"), 1.0, now_ms=0).throttle_ms(0) == 10_000
    assert meters.bucket(entity(client_id="c"), 5.0, now_ms=0).throttle_ms(0) == 2_000  # the same bucket, faster
    assert meters.bucket(entity(client_id="other"), 1.0, now_ms=0).throttle_ms(0) == 0


def test_an_ips_own_connection_rate_comes_before_the_default_and_each_ip_is_metered_apart():
    quotas = {entity(ip=None): {"connection_creation_rate": 10.0},
              entity(ip="10.0.0.1"): {"connection_creation_rate": 2.0}}
    assert ip_quota_for(quotas, "10.0.0.1") == (2.0, entity(ip="10.0.0.1"))
    assert ip_quota_for(quotas, "10.0.0.2") == (10.0, entity(ip="10.0.0.2"))
    assert ip_quota_for({}, "10.0.0.1") == (None, ())


def test_a_refused_connection_is_not_counted():
    meters = QuotaMeters(samples=2, window_ms=1000)  # a rate over at least one whole second
    ip = entity(ip="10.0.0.1")
    assert meters.admit_connection(ip, 3.0, now_ms=0) == 0
    assert [meters.admit_connection(ip, 3.0, now_ms=0) for _ in range(4)] == [0, 0, 333, 333]
    assert meters.admit_connection(ip, 3.0, now_ms=1000) == 333  # still 3 counted in the last second...
    assert meters.admit_connection(ip, 3.0, now_ms=2000) == 0  # ... until they age out


def client_quotas(quotas: dict, samples: int = 11) -> tuple[ClientQuotas, FakeClock]:
    clock = FakeClock(monotonic_ms=50_000)
    return ClientQuotas(lambda: quotas, QuotaMeters(samples=samples, window_ms=1000), clock), clock


def test_client_quotas_meter_by_their_clock_and_follow_an_altered_bound():
    quotas: dict = {}
    limits, clock = client_quotas(quotas)
    assert limits.throttle_ms("User:alice", "app", PRODUCER_BYTE_RATE, 10**9) == 0  # no quota: nothing metered
    assert not limits.meters._meters
    quotas[entity(user="alice")] = {PRODUCER_BYTE_RATE: 1000.0}
    assert limits.throttle_ms("User:alice", "app", PRODUCER_BYTE_RATE, 5000) == 0  # 5000 B over 10 s
    assert limits.throttle_ms("User:bob", "app", PRODUCER_BYTE_RATE, 10**9) == 0  # bob has no quota
    assert limits.throttle_ms("User:alice", "app", PRODUCER_BYTE_RATE, 10_000) == 1000  # at most one window
    clock.advance(10_999)  # the first sample is still counted...
    assert limits.throttle_ms("User:alice", "app", PRODUCER_BYTE_RATE, 0) > 0
    clock.advance(1)  # ... until it ages out
    assert limits.throttle_ms("User:alice", "app", PRODUCER_BYTE_RATE, 5000) == 0
    quotas[entity(user="alice")] = {PRODUCER_BYTE_RATE: 100.0}  # altered: counts at the next request
    assert limits.throttle_ms("User:alice", "app", PRODUCER_BYTE_RATE, 0) == 1000


def test_client_quotas_refuse_connections_over_an_ips_rate_until_the_clock_moves_on():
    limits, clock = client_quotas({entity(ip=None): {"connection_creation_rate": 3.0}}, samples=2)
    assert [limits.connection_throttle_ms("10.0.0.1") for _ in range(4)] == [0, 0, 0, 333]
    assert limits.connection_throttle_ms("10.0.0.2") == 0  # each IP metered apart
    clock.advance(1000)
    assert limits.connection_throttle_ms("10.0.0.1") == 333  # three still counted in the last second
    clock.advance(1000)
    assert limits.connection_throttle_ms("10.0.0.1") == 0
    assert client_quotas({})[0].connection_throttle_ms("10.0.0.1") == 0


def test_client_quotas_mutation_bucket_refills_as_the_clock_moves():
    limits, clock = client_quotas({entity(client_id=None): {CONTROLLER_MUTATION_RATE: 1.0}})
    bucket = limits.mutation_quota("User:alice", "app")
    bucket.record(21, clock.monotonic_ms())  # a burst of 11, overdrawn by 10: 10 s at 1/s
    assert bucket.throttle_ms(clock.monotonic_ms()) == 10_000
    clock.advance(4000)
    assert limits.mutation_quota("User:alice", "app") is bucket  # the client's own bucket, kept
    assert bucket.throttle_ms(clock.monotonic_ms()) == 6000
    assert limits.mutation_quota("User:alice", "other").throttle_ms(clock.monotonic_ms()) == 0  # each client its own
    assert client_quotas({})[0].mutation_quota("User:alice", "app") is None

