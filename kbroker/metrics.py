"""The broker's measures for Prometheus, served on ``metrics.port`` with its health and readiness
(kbroker/http/endpoints.py).

Counters and histograms are updated where things happen (produce, fetch, each request, each
fsync, each ISR change); gauges that describe state (partitions, leaders, log sizes, group lag,
connections) are computed from the broker at scrape time. Names follow Kafka's measures
(BytesInPerSec, UnderReplicatedPartitions, ...) in Prometheus' style; each broker has its own
measures, so several in-process brokers (the pytest plugin) do not mix their figures.

Until a scrape they are plain numbers in dicts: an update is a dict lookup and an addition (every
request makes one, DESIGN rule 13), and prometheus_client, a sixth of the broker's start when imported,
is imported at the first scrape.
"""

from __future__ import annotations

import bisect
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import GaugeMetricFamily

logger = logging.getLogger("kbroker.metrics")

_LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Counts:
    """A counter family: a running total per tuple of label values."""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...] = ()) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.values: dict[tuple[str, ...], float] = {}

    def add(self, amount: float = 1, labels: tuple[str, ...] = ()) -> None:
        values = self.values
        values[labels] = values.get(labels, 0) + amount

    def total(self) -> float:
        return sum(self.values.values())

    def family(self):
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.documentation, labels=list(self.labels))
        for labels, value in sorted(self.values.items()):
            family.add_metric(list(labels), value)
        return family


class Latencies:
    """A histogram family of seconds, per tuple of label values: a count per bucket and a sum. ``observe``
    may be called from one other thread (the flusher's) as long as no other thread observes the same
    family."""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...] = ()) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self._counts: dict[tuple[str, ...], list[int]] = {}  # per bucket (le inclusive), then beyond the last
        self._sums: dict[tuple[str, ...], float] = {}

    def observe(self, seconds: float, labels: tuple[str, ...] = ()) -> None:
        counts = self._counts.get(labels)
        if counts is None:
            counts = self._counts[labels] = [0] * (len(_LATENCY_BUCKETS_S) + 1)
            self._sums[labels] = 0.0
        counts[bisect.bisect_left(_LATENCY_BUCKETS_S, seconds)] += 1
        self._sums[labels] += seconds

    def family(self):
        from prometheus_client.core import HistogramMetricFamily

        family = HistogramMetricFamily(self.name, self.documentation, labels=list(self.labels))
        for labels, counts in sorted(self._counts.items()):
            buckets, below = [], 0
            for bound, count in zip((*(str(float(b)) for b in _LATENCY_BUCKETS_S), "+Inf"), counts):
                below += count
                buckets.append((bound, below))
            family.add_metric(list(labels), buckets, self._sums[labels])
        return family


class BrokerMetrics:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.bytes_in = Counts("kbroker_topic_bytes_in", "Record batch bytes producers appended, per topic", ("topic",))
        self.messages_in = Counts("kbroker_topic_messages_in", "Records producers appended, per topic", ("topic",))
        self.bytes_out = Counts("kbroker_topic_bytes_out", "Record batch bytes sent to consumers, per topic",
                                ("topic",))
        self.messages_out = Counts("kbroker_topic_messages_out", "Records in the whole batches sent to consumers, "
                                   "per topic", ("topic",))
        self.request_seconds = Latencies("kbroker_request_latency_seconds", "From a request's arrival to its "
                                         "answer being ready, per API", ("api",))
        self.fsync_seconds = Latencies("kbroker_fsync_seconds", "How long each flush of partitions to disk took")
        self.isr_shrinks = Counts("kbroker_isr_shrinks", "ISR changes this leader asked for that dropped a replica")
        self.isr_expands = Counts("kbroker_isr_expands", "ISR changes this leader asked for that added a replica")
        self._registry = None  # prometheus_client's, made at the first scrape

    def produced(self, topic: str, size: int, records: int) -> None:
        key = (topic,)
        self.bytes_in.add(size, key)
        self.messages_in.add(records, key)

    def fetched(self, topic: str, size: int, records: int) -> None:
        if size:
            key = (topic,)
            self.bytes_out.add(size, key)
            self.messages_out.add(records, key)

    def request_done(self, api_name: str, seconds: float) -> None:
        self.request_seconds.observe(seconds, (api_name,))

    def fsync_done(self, seconds: float) -> None:
        """The flusher thread's report of one round of fsyncs."""
        self.fsync_seconds.observe(seconds)

    def exposition(self) -> bytes:
        from prometheus_client import CollectorRegistry
        from prometheus_client.exposition import generate_latest

        if self._registry is None:
            self._registry = CollectorRegistry(auto_describe=False)
            self._registry.register(_CountsCollector(self))
            self._registry.register(_StateCollector(self.broker))
        return generate_latest(self._registry)


class _CountsCollector:
    """The counters and histograms, as Prometheus families when scraped."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def describe(self):
        return []

    def collect(self):
        metrics = self.metrics
        for measure in (metrics.bytes_in, metrics.messages_in, metrics.bytes_out, metrics.messages_out,
                        metrics.request_seconds, metrics.fsync_seconds, metrics.isr_shrinks, metrics.isr_expands):
            yield measure.family()


class _StateCollector:
    """Gauges computed from the broker when scraped."""

    def __init__(self, broker) -> None:
        self.broker = broker

    def describe(self):
        return []  # computed at collection; nothing to check at registration

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        broker, image = self.broker, self.broker.image
        live = {b.node_id for b in image.live_brokers}
        under_replicated, offline, leaders = 0, 0, 0
        for topic in image.topics.values():
            for state in topic.partitions:
                if state.leader not in live:
                    offline += 1
                if state.leader == broker.node_id:
                    leaders += 1
                    if len(state.isr) < len(state.replicas):
                        under_replicated += 1
        yield _gauge("kbroker_under_replicated_partitions", "Partitions led here with fewer in-sync replicas "
                     "than replicas", under_replicated)
        yield _gauge("kbroker_offline_partitions", "Partitions without a live leader", offline)
        yield _gauge("kbroker_leader_count", "Partitions led by this broker", leaders)
        yield _gauge("kbroker_active_controller", "1 on the active controller", int(_is_active_controller(broker)))
        yield _gauge("kbroker_connections", "Open client connections", sum(s.connections for s in broker.servers))
        yield _gauge("kbroker_log_remaining_logs_to_recover", "Logs found at start and not opened yet (Kafka's "
                     "remainingLogsToRecover, KIP-831): they open on first use or in the background",
                     broker.logs.unopened_count)
        accepted = CounterMetricFamily("kbroker_connections_accepted", "Connections accepted since start, per "
                                       "listener (the controller's too)", labels=["listener"])
        for server in (*broker.servers, *(broker.quorum.servers if broker.quorum is not None else ())):
            accepted.add_metric([server.security.name], server.accepted)
        yield accepted
        sizes = GaugeMetricFamily("kbroker_log_size_bytes", "Bytes of a partition's log on disk",
                                  labels=["topic", "partition"])
        for (topic, index), log in sorted(broker.logs.logs.items()):
            sizes.add_metric([topic, str(index)], log.size_bytes)
        yield sizes
        yield _group_lag(broker)
        yield from _share_partitions(broker)
        yield from _fetch_sessions(broker.fetch_sessions)


def _fetch_sessions(cache):
    """Kafka's FetchSessionCache metrics (NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached,
    IncrementalFetchSessionEvictionsPerSec as a count), and the requests the sessions spared a full answer."""
    from prometheus_client.core import CounterMetricFamily

    yield _gauge("kbroker_fetch_sessions", "Fetch sessions (KIP-227) kept", len(cache))
    yield _gauge("kbroker_fetch_session_partitions", "Partitions over all fetch sessions", cache.partition_count)
    for name, documentation, value in (
            ("kbroker_fetch_sessions_opened", "Fetch sessions opened", cache.opened),
            ("kbroker_fetch_session_evictions", "Fetch sessions evicted for a new one", cache.evictions),
            ("kbroker_incremental_fetches", "Fetch requests served in a session, answered with what changed",
             cache.incremental_requests)):
        yield CounterMetricFamily(name, documentation, value=value)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(name, documentation, value=value)


def _is_active_controller(broker) -> bool:
    return broker.quorum.is_active


def _group_lag(broker) -> GaugeMetricFamily:
    from prometheus_client.core import GaugeMetricFamily

    lag = GaugeMetricFamily("kbroker_consumer_group_lag", "Records between a group's committed offset and the "
                            "partition's high watermark", labels=["group", "topic", "partition"])
    for group_id, topic, index, value in group_lag(broker):
        lag.add_metric([group_id, topic, str(index)], value)
    return lag


def group_lag(broker):
    """(group, topic, partition, lag) for the groups coordinated here and the partitions led here: the high
    watermark minus the committed offset (the console's lag chart too)."""
    coordinator = broker.groups._coordinator
    if coordinator is None:
        return
    offsets = coordinator.offsets
    for group_id in sorted(offsets.groups()):
        for (topic, index), committed in sorted(offsets.of_group(group_id).items()):
            image = broker.image.topics.get(topic)
            if image is None or not 0 <= index < len(image.partitions) or not broker.leads(image, index):
                continue
            high_watermark = broker.partition(topic, index).high_watermark
            yield group_id, topic, index, max(0, high_watermark - committed.offset)


# (name, documentation, SharePartitionCounters field, counter?) of the share-partitions' metrics (KIP-932)
_SHARE_PARTITION_METRICS = (
    ("kbroker_share_partition_in_flight_records", "Records from a share-partition's start offset to its end "
     "offset (acquired, available, acknowledged or archived)", "in_flight_records", False),
    ("kbroker_share_partition_acquired_records", "Records a share group's consumers hold now", "acquired_records",
     False),
    ("kbroker_share_partition_acquired", "Deliveries (acquisitions) of records, first ones and redeliveries",
     "acquired_records_total", True),
    ("kbroker_share_partition_redelivered", "Records delivered again (released, their lock run out, or their "
     "consumer gone)", "redelivered_records_total", True),
    ("kbroker_share_partition_acknowledged", "Records accepted by a consumer", "acknowledged_records_total", True),
    ("kbroker_share_partition_archived", "Records archived: rejected, or past group.share.delivery.count.limit",
     "archived_records_total", True),
)


def _share_partitions(broker):
    """Per share group and partition led here (loaded since this broker leads it): the records in flight and
    held, and the deliveries, redeliveries, acknowledgements and archivings since it was loaded here."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    families = [(CounterMetricFamily if counter else GaugeMetricFamily)(name, documentation,
                                                                        labels=["group", "topic", "partition"])
                for name, documentation, _, counter in _SHARE_PARTITION_METRICS]
    names = broker.image.topic_names
    for (group_id, topic_id, index), share_partition in sorted(broker.share_partitions.share_partitions().items(),
                                                               key=lambda item: (item[0][0], str(item[0][1]), item[0][2])):
        counters = share_partition.counters()
        labels = [group_id, names.get(topic_id, str(topic_id)), str(index)]
        for family, (_, _, field, _) in zip(families, _SHARE_PARTITION_METRICS):
            family.add_metric(labels, getattr(counters, field))
    yield from families
