"""Client quotas as Kafka keeps and enforces them (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546).

Quotas are set per entity (a user, a client id, both, or their ``<default>``:
a None name) with AlterClientQuotas and kept as ClientQuotaRecords in the
metadata. A request is metered under the most specific entity that has the
quota in question, in Kafka's order of precedence; clients that share that
entity share one meter. A meter is Kafka's windowed rate: ``quota.window.num``
samples of ``quota.window.size.seconds``. Over the bound, the answer carries
Kafka's throttle time, ``(rate - bound) / bound * window``, at most one
sample window, and the broker stops reading the connection that long.
The meters are sans-IO: time comes in as ``now_ms``. ``ClientQuotas`` is the
broker's side: the bounds in the metadata image, the meters, and the injected
clock whose monotonic time it meters by.
"""

from __future__ import annotations

import ipaddress
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.wire.errors import ErrorCode

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"  # KIP-599: partitions created or deleted per second
CONNECTION_CREATION_RATE = "connection_creation_rate"  # KIP-612: connections accepted per second, per IP
KEYS = {USER: {PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE},
        CLIENT_ID: {PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE},
        IP: {CONNECTION_CREATION_RATE}}
# The whole-number quotas and their bounds, as Kafka's QuotaConfig types them (LONG, INT); Java compares a
# double with the bound made a double.
_INTEGRAL = {PRODUCER_BYTE_RATE: ("a LONG", float(2**63 - 1)), CONSUMER_BYTE_RATE: ("a LONG", float(2**63 - 1)),
             CONNECTION_CREATION_RATE: ("an INT", float(2**31 - 1))}
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

Entity = tuple  # sorted ((entity type, name or None for <default>), ...)


def entity(**names) -> Entity:
    """``entity(user="alice", client_id=None)``: an entity key as the metadata image keeps it."""
    return tuple(sorted((kind.replace("_", "-"), name) for kind, name in names.items()))


def validate_entity(parts: list[tuple[str, str | None]]) -> tuple[int, str] | None:
    kinds = [kind for kind, _ in parts]
    if not parts:
        return ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"
    if len(set(kinds)) != len(kinds):
        return ErrorCode.INVALID_REQUEST, "Invalid client quota entity: an entity type appears twice"
    for kind, name in parts:
        if kind not in KEYS:
            return ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}"
        if name == "":
            return ErrorCode.INVALID_REQUEST, f"Empty {kind} name in client quota entity"
        if kind == IP and name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                return ErrorCode.INVALID_REQUEST, f"{name} is not a valid IP address"
    if IP in kinds and len(kinds) > 1:
        return ErrorCode.INVALID_REQUEST, "Invalid quota entity combination: ip cannot be combined with user or client-id"
    return None


def validate_alteration(parts: list[tuple[str, str | None]], key: str, value: float, remove: bool) -> tuple[int, str] | None:
    """What AlterClientQuotas refuses for one op on an entity, as Kafka's ClientQuotaControlManager, in its
    order (a removal names any key: what is there goes)."""
    problem = validate_entity(parts)
    if problem is not None or remove:
        return problem
    allowed = set.intersection(*(KEYS[kind] for kind, _ in parts))
    if key not in allowed:
        return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}"
    if not math.isfinite(value):
        return ErrorCode.INVALID_REQUEST, f"Quota {key} must be a finite number"
    if value <= 0:
        return ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0"
    if key in _INTEGRAL:
        kind, largest = _INTEGRAL[key]
        if value > largest:
            return ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for {kind}."
        if abs(math.fmod(value, 1.0)) > 1e-6:
            return ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value."
    return None


def describe(quotas: dict[Entity, dict[str, float]], components: list[tuple[str, int, str | None]],
             strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    """DescribeClientQuotas: the entities every component matches (EXACT name, DEFAULT entity, ANY of the
    type); ``strict`` leaves out entities with types no component names."""
    found = []
    for key, values in sorted(quotas.items(), key=lambda item: repr(item[0])):
        names = dict(key)
        if strict and set(names) != {kind for kind, _, _ in components}:
            continue
        if all(_component_matches(names, kind, match_type, match) for kind, match_type, match in components):
            found.append((key, values))
    return found


def _component_matches(names: dict, kind: str, match_type: int, match: str | None) -> bool:
    if kind not in names:
        return False
    if match_type == MATCH_EXACT:
        return names[kind] == match
    if match_type == MATCH_DEFAULT:
        return names[kind] is None
    return True


def validate_describe(components: list[tuple[str, int, str | None]]) -> tuple[int, str] | None:
    """What DescribeClientQuotas refuses, component by component in Kafka's order (ClientQuotasImage)."""
    seen = set()
    for kind, match_type, match in components:
        if not kind:
            return ErrorCode.INVALID_REQUEST, "Invalid empty entity type."
        if kind in seen:
            return ErrorCode.INVALID_REQUEST, f"Entity type {kind} cannot appear more than once in the filter."
        if kind not in KEYS:
            return ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}"
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}"
        if match_type == MATCH_EXACT and match is None:
            return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
        if match_type != MATCH_EXACT and match is not None:
            return ErrorCode.INVALID_REQUEST, "Only MATCH_TYPE_EXACT takes a match string."
        seen.add(kind)
    if IP in seen and len(seen) > 1:
        return ErrorCode.INVALID_REQUEST, ("Invalid entity filter component combination. IP filter component should "
                                           "not be used with user or clientId filter component.")
    return None


def quota_for(quotas: dict[Entity, dict[str, float]], user: str, client_id: str,
              key: str) -> tuple[float | None, Entity]:
    """The bound on ``key`` for this user and client id, and the entity its usage is metered under:
    Kafka's order, most specific first (None and () when no quota applies)."""
    for candidate in (entity(user=user, client_id=client_id), entity(user=user, client_id=None),
                      entity(user=user), entity(user=None, client_id=client_id),
                      entity(user=None, client_id=None), entity(user=None), entity(client_id=client_id),
                      entity(client_id=None)):
        bound = quotas.get(candidate, {}).get(key)
        if bound is not None:
            # A default entity's quota is each user's (client id's) own: meter by the real names.
            names = dict(candidate)
            metered = entity(**{kind.replace("-", "_"): user if kind == USER else client_id for kind in names})
            return bound, metered
    return None, ()


def ip_quota_for(quotas: dict[Entity, dict[str, float]], ip: str) -> tuple[float | None, Entity]:
    """The connection_creation_rate bound of ``ip``: its own, else the IPs' default (each IP metered
    apart); None and () when neither is set."""
    for candidate in (entity(ip=ip), entity(ip=None)):
        bound = quotas.get(candidate, {}).get(CONNECTION_CREATION_RATE)
        if bound is not None:
            return bound, entity(ip=ip)
    return None, ()


@dataclass
class _Sample:
    start_ms: int
    total: float = 0.0


class RateMeter:
    """Kafka's Rate over SampledStat: ``samples`` windows of ``window_ms``; a measured rate per second."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.samples, self.window_ms = samples, window_ms
        self._samples: list[_Sample] = []

    def record(self, value: float, now_ms: int) -> None:
        current = self._samples[-1] if self._samples else None
        if current is None or now_ms >= current.start_ms + self.window_ms:
            current = _Sample(now_ms)
            self._samples.append(current)
            del self._samples[:-self.samples]
        current.total += value

    def window_size_ms(self, now_ms: int) -> int:
        """Kafka's Rate.windowSize: the time the kept samples span, and at least samples - 1 full windows."""
        self._purge(now_ms)
        oldest = self._samples[0].start_ms if self._samples else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(sample.total for sample in self._samples) * 1000 / self.window_size_ms(now_ms)

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        self._samples = [sample for sample in self._samples if now_ms - sample.start_ms < expire]


class TokenBucket:
    """Kafka's TokenBucket for ``controller_mutation_rate`` (KIP-599): credits come back at ``rate``
    per second up to a burst of ``rate`` x the whole quota window; each partition created or deleted
    takes one. Below zero the quota is exceeded, for as long as the credits take to come back."""

    def __init__(self, rate: float, window_s: float, now_ms: int) -> None:
        self.rate, self.window_s = rate, window_s
        self.tokens = rate * window_s
        self._at_ms = now_ms

    def exceeded(self, now_ms: int) -> bool:
        self._refill(now_ms)
        return self.tokens < 0

    def record(self, permits: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.tokens -= permits

    def throttle_ms(self, now_ms: int) -> int:
        """How long until the bucket is no longer below zero."""
        self._refill(now_ms)
        return math.ceil(-self.tokens / self.rate * 1000) if self.tokens < 0 else 0

    def _refill(self, now_ms: int) -> None:
        elapsed_s = max(now_ms - self._at_ms, 0) / 1000
        self.tokens = min(self.rate * self.window_s, self.tokens + self.rate * elapsed_s)
        self._at_ms = now_ms


class QuotaMeters:
    """One meter per (quota, entity), at most ``limit`` of them (the least recently used go first)."""

    def __init__(self, samples: int = 11, window_ms: int = 1000, limit: int = 10_000) -> None:
        self.samples, self.window_ms, self.limit = samples, window_ms, limit
        self._meters: OrderedDict[tuple, RateMeter | TokenBucket] = OrderedDict()

    def bucket(self, metered: Entity, bound: float, now_ms: int) -> TokenBucket:
        """The entity's controller_mutation_rate bucket, following the bound if it was altered."""
        bucket = self._kept((CONTROLLER_MUTATION_RATE, metered),
                            lambda: TokenBucket(bound, self.samples * self.window_ms / 1000, now_ms))
        bucket.rate = bound
        return bucket

    def _kept(self, key: tuple, make):
        meter = self._meters.pop(key, None) or make()
        self._meters[key] = meter
        while len(self._meters) > self.limit:
            self._meters.popitem(last=False)
        return meter

    def admit_connection(self, metered: Entity, bound: float, now_ms: int) -> int:
        """Count a new connection from an IP (KIP-612): 0 when it is within the IP's rate, else the
        throttle time after which it is to be closed; a refused connection is not counted."""
        throttle_ms = self.record_and_throttle_ms(CONNECTION_CREATION_RATE, metered, bound, 1, now_ms)
        if throttle_ms:
            self._meters[(CONNECTION_CREATION_RATE, metered)].record(-1, now_ms)
        return throttle_ms

    def record_and_throttle_ms(self, key: str, metered: Entity, bound: float, value: float, now_ms: int) -> int:
        meter = self._kept((key, metered), lambda: RateMeter(self.samples, self.window_ms))
        meter.record(value, now_ms)
        rate = meter.rate(now_ms)
        if rate <= bound:
            return 0
        throttle_ms = (rate - bound) / bound * meter.window_size_ms(now_ms)
        return int(min(throttle_ms, self.window_ms))


class ClientQuotas:
    """The quotas a broker enforces on its clients: the bounds from the metadata (``quotas_of()``, the
    image's ``client_quotas``, read at every call so that an altered quota counts at once), metered in
    ``meters`` at the ``clock``'s monotonic time."""

    def __init__(self, quotas_of: Callable[[], dict[Entity, dict[str, float]]], meters: QuotaMeters,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._quotas_of, self.meters, self.clock = quotas_of, meters, clock

    def throttle_ms(self, principal: str, client_id: str, key: str, value: float) -> int:
        """Count a client's usage against its quota ``key``; the throttle time Kafka would answer with."""
        quotas = self._quotas_of()
        if not quotas:
            return 0
        bound, metered = quota_for(quotas, principal.partition(":")[2], client_id, key)
        if bound is None:
            return 0
        return self.meters.record_and_throttle_ms(key, metered, bound, value, self.clock.monotonic_ms())

    def connection_throttle_ms(self, ip: str) -> int:
        """0 to serve a new connection from ``ip``; else it exceeds the IP's connection_creation_rate
        (KIP-612) and is closed after that many milliseconds, as Kafka's acceptor does."""
        quotas = self._quotas_of()
        if not quotas:
            return 0
        bound, metered = ip_quota_for(quotas, ip)
        if bound is None:
            return 0
        return self.meters.admit_connection(metered, bound, self.clock.monotonic_ms())

    def mutation_quota(self, principal: str, client_id: str) -> TokenBucket | None:
        """The client's controller_mutation_rate bucket (KIP-599), None without that quota; its callers
        tell it ``clock.monotonic_ms()``. Metered by the broker the client sends its CreateTopics,
        CreatePartitions and DeleteTopics to."""
        quotas = self._quotas_of()
        if not quotas:
            return None
        bound, metered = quota_for(quotas, principal.partition(":")[2], client_id, CONTROLLER_MUTATION_RATE)
        if bound is None:
            return None
        return self.meters.bucket(metered, bound, self.clock.monotonic_ms())
