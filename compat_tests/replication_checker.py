"""Jepsen-style checks of a replicated partition's history: what the producer was told against
what the replicas hold.

- ``acknowledged``: (partition, offset, value) for every write the producer was told succeeded; the
  offset is None where the producer was told so without one (librdkafka's idempotent producer reports
  as delivered, offset unknown, the messages a later acknowledgement shows the broker already has);
- ``read``: (partition, offset, value) for everything a consumer read back, below the high watermark;
- ``replicas``: per broker, per partition, the log's batches as bytes (read from the stopped brokers).

A value is ``"<partition>:<sequence>"``, written in sequence order to its partition.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from kbroker.log.partition_log import Log


@dataclass
class Verdict:
    acknowledged: int = 0
    read: int = 0
    lost: list = field(default_factory=list)  # acknowledged, then missing or at another offset
    duplicated: list = field(default_factory=list)  # one value at two offsets
    conflicting: list = field(default_factory=list)  # one offset read with two values
    reordered: list = field(default_factory=list)  # a partition's sequences out of order
    diverged: list = field(default_factory=list)  # replicas whose logs differ

    @property
    def anomalies(self) -> int:
        return len(self.lost) + len(self.duplicated) + len(self.conflicting) + len(self.reordered) + len(self.diverged)

    def __str__(self) -> str:
        return (f"{self.acknowledged} acknowledged, {self.read} read back: {len(self.lost)} lost, "
                f"{len(self.duplicated)} duplicated, {len(self.conflicting)} conflicting offsets, "
                f"{len(self.reordered)} out of order, {len(self.diverged)} diverged replicas")


def check(acknowledged, read, replicas: dict | None = None) -> Verdict:
    verdict = Verdict(acknowledged=len(acknowledged), read=len(read))
    at: dict[tuple[int, int], set] = defaultdict(set)
    where: dict[str, set] = defaultdict(set)
    for partition, offset, value in read:
        at[(partition, offset)].add(value)
        where[value].add((partition, offset))
    verdict.conflicting = [(key, sorted(values)) for key, values in at.items() if len(values) > 1]
    verdict.duplicated = [(value, sorted(places)) for value, places in where.items() if len(places) > 1]
    for partition, offset, value in acknowledged:
        if offset is None:  # acknowledged without an offset (librdkafka's idempotent producer, below): anywhere
            if not any(place[0] == partition for place in where.get(value, ())):
                verdict.lost.append((partition, offset, value))
        elif value not in at.get((partition, offset), ()):
            verdict.lost.append((partition, offset, value))
    by_partition: dict[int, list] = defaultdict(list)
    for partition, offset, value in sorted(set(read)):
        by_partition[partition].append(int(value.split(":")[1]))
    for partition, sequences in by_partition.items():
        verdict.reordered += [(partition, a, b) for a, b in zip(sequences, sequences[1:]) if b <= a]
    for partition, copies in (replicas or {}).items():
        distinct = {data for data in copies.values()}
        if len(distinct) > 1:
            verdict.diverged.append((partition, {broker: len(data) for broker, data in copies.items()}))
    return verdict


def replica_logs(nodes, topic: str, partitions: int) -> dict:
    """Per partition, per node: the bytes of every batch in the replica's log, read from the stopped
    ``nodes``' data directories (``node.data_dir``), for ``check``'s ``replicas``."""
    copies: dict = {}
    for node in nodes:
        for partition in range(partitions):
            log = Log.open(str(node.data_dir / f"{topic}-{partition}"))
            try:
                copies.setdefault(partition, {})[node.node_id] = log.read_bytes(0, 1 << 30, min_one_batch=True)
            finally:
                log.close()
    return copies
