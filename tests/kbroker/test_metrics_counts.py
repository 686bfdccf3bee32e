"""The broker's counters and histograms: plain numbers until scraped, then Prometheus' text as
prometheus_client's own Counter and Histogram would write it."""

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kbroker.metrics import Counts, Latencies


class _Collector:
    def __init__(self, *measures) -> None:
        self.measures = measures

    def collect(self):
        for measure in self.measures:
            yield measure.family()


def _samples(*measures) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(*measures))
    text = generate_latest(registry).decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_a_counter_totals_per_label_and_overall():
    counts = Counts("kbroker_topic_bytes_in", "bytes", ("topic",))
    counts.add(10, ("a",))
    counts.add(5, ("b",))
    counts.add(1, ("a",))
    assert counts.total() == 16
    samples = _samples(counts)
    assert samples[("kbroker_topic_bytes_in_total", (("topic", "a"),))] == 11
    assert samples[("kbroker_topic_bytes_in_total", (("topic", "b"),))] == 5


def test_a_histogram_counts_a_value_on_a_bound_in_that_bucket_and_sums():
    latencies = Latencies("kbroker_request_latency_seconds", "seconds", ("api",))
    for seconds in (0.0001, 0.0005, 0.0007, 0.01, 100.0):
        latencies.observe(seconds, ("Produce",))
    samples = _samples(latencies)
    bucket = lambda le: samples[("kbroker_request_latency_seconds_bucket", (("api", "Produce"), ("le", le)))]  # noqa: E731
    assert bucket("0.0005") == 2  # le is inclusive, as in prometheus_client's Histogram
    assert bucket("0.001") == 3
    assert bucket("0.01") == 4
    assert bucket("30.0") == 4
    assert bucket("+Inf") == 5
    assert samples[("kbroker_request_latency_seconds_count", (("api", "Produce"),))] == 5
    assert abs(samples[("kbroker_request_latency_seconds_sum", (("api", "Produce"),))] - 100.0113) < 1e-9


def test_an_unlabelled_counter_and_an_empty_histogram():
    shrinks = Counts("kbroker_isr_shrinks", "shrinks")
    shrinks.add()
    shrinks.add()
    samples = _samples(shrinks, Latencies("kbroker_fsync_seconds", "seconds"))
    assert samples[("kbroker_isr_shrinks_total", ())] == 2
    assert not any(name.startswith("kbroker_fsync_seconds") for name, _ in samples)
