"""The broker's measures for Prometheus, served on ``metrics.port`` with its health and readiness
(kbroker/http/endpoints.py).

Counters and histograms are updated where things happen (produce, fetch, each request, each
fsync, each ISR change); gauges that describe state (partitions, leaders, log sizes, group lag,
connections) are computed from the broker at scrape time. Names follow Kafka's measures
(BytesInPerSec, UnderReplicatedPartitions, ...) in Prometheus' style; each registry belongs to one
broker, so several in-process brokers (the pytest plugin) do not mix their figures.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import generate_latest

logger = logging.getLogger("kbroker.metrics")

_LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class BrokerMetrics:
    def __init__(self, broker) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.bytes_in = Counter("kbroker_topic_bytes_in", "Record batch bytes producers appended, per topic",
                                ["topic"], registry=registry)
        self.messages_in = Counter("kbroker_topic_messages_in", "Records producers appended, per topic", ["topic"],
                                   registry=registry)
        self.bytes_out = Counter("kbroker_topic_bytes_out", "Record batch bytes sent to consumers, per topic",
                                 ["topic"], registry=registry)
        self.messages_out = Counter("kbroker_topic_messages_out", "Records in the whole batches sent to consumers, "
                                    "per topic", ["topic"], registry=registry)
        self.request_seconds = Histogram("kbroker_request_latency_seconds", "From a request's arrival to its "
                                         "answer being ready, per API", ["api"], buckets=_LATENCY_BUCKETS_S,
                                         registry=registry)
        self.request_errors = Counter("kbroker_request_errors", "Answers with a top-level error, per API and error",
                                      ["api", "error"], registry=registry)
        self.fsync_seconds = Histogram("kbroker_fsync_seconds", "How long each flush of partitions to disk took",
                                       buckets=_LATENCY_BUCKETS_S, registry=registry)
        self.isr_shrinks = Counter("kbroker_isr_shrinks", "ISR changes this leader asked for that dropped a replica",
                                   registry=registry)
        self.isr_expands = Counter("kbroker_isr_expands", "ISR changes this leader asked for that added a replica",
                                   registry=registry)
        registry.register(_StateCollector(broker))

    def produced(self, topic: str, size: int, records: int) -> None:
        self.bytes_in.labels(topic).inc(size)
        self.messages_in.labels(topic).inc(records)

    def fetched(self, topic: str, size: int, records: int) -> None:
        if size:
            self.bytes_out.labels(topic).inc(size)
            self.messages_out.labels(topic).inc(records)

    def request_done(self, api_name: str, seconds: float) -> None:
        self.request_seconds.labels(api_name).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector:
    """Gauges computed from the broker when scraped."""

    def __init__(self, broker) -> None:
        self.broker = broker

    def describe(self):
        return []  # computed at collection; nothing to check at registration

    def collect(self):
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
    yield _gauge("kbroker_fetch_sessions", "Fetch sessions (KIP-227) kept", len(cache))
    yield _gauge("kbroker_fetch_session_partitions", "Partitions over all fetch sessions", cache.partition_count)
    for name, documentation, value in (
            ("kbroker_fetch_sessions_opened", "Fetch sessions opened", cache.opened),
            ("kbroker_fetch_session_evictions", "Fetch sessions evicted for a new one", cache.evictions),
            ("kbroker_incremental_fetches", "Fetch requests served in a session, answered with what changed",
             cache.incremental_requests)):
        yield CounterMetricFamily(name, documentation, value=value)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _is_active_controller(broker) -> bool:
    return broker.quorum.is_active


def _group_lag(broker) -> GaugeMetricFamily:
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
