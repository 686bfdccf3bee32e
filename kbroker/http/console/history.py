"""The last minutes of the broker's throughput and of its groups' lag, sampled every few seconds while the
console is served, for its live charts and the topics' message rates.

Throughput comes from the counters /metrics exposes (kbroker/metrics.py): the bytes producers appended and
consumers were sent, and the records appended per topic. A group's lag is its total over the partitions
led here, as ``kbroker_consumer_group_lag`` reports it for the groups coordinated here.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import trio

from kbroker.metrics import group_lag

INTERVAL_S = 2.0
KEPT = 150  # samples: five minutes
MAX_GROUPS = 1000  # groups whose lag is kept; past that, the first in name order


class History:
    def __init__(self, node, clock: Callable[[], float] = time.time) -> None:
        self.node = node
        self._clock = clock
        self.rates: deque[tuple[float, float, float]] = deque(maxlen=KEPT)  # (time s, bytes in/s, bytes out/s)
        self.lag: dict[str, deque[tuple[float, int]]] = {}  # group -> (time s, total lag)
        self.topic_rates: dict[str, float] = {}  # topic -> records in/s over the last interval
        self._last: tuple[float, float, float, dict[str, float]] | None = None

    async def run(self) -> None:
        while True:
            self.sample()
            await trio.sleep(INTERVAL_S)

    def sample(self) -> None:
        metrics = self.node.metrics
        now = self._clock()
        bytes_in, bytes_out = metrics.bytes_in.total(), metrics.bytes_out.total()
        per_topic = {topic: count for (topic,), count in metrics.messages_in.values.items()}
        if self._last is not None:
            then, last_in, last_out, last_topics = self._last
            elapsed = max(now - then, 1e-3)
            self.rates.append((now, (bytes_in - last_in) / elapsed, (bytes_out - last_out) / elapsed))
            self.topic_rates = {topic: (count - last_topics.get(topic, 0.0)) / elapsed
                                for topic, count in per_topic.items()}
        self._last = (now, bytes_in, bytes_out, per_topic)
        totals: dict[str, int] = {}
        for group, _topic, _partition, lag in group_lag(self.node):
            totals[group] = totals.get(group, 0) + lag
        for group in sorted(totals)[:MAX_GROUPS]:
            self.lag.setdefault(group, deque(maxlen=KEPT)).append((now, totals[group]))
        for group in [group for group in self.lag if group not in totals]:
            del self.lag[group]

