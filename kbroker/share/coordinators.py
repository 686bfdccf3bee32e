"""The share coordinator of one broker: a :class:`ShareCoordinatorShard` per ``__share_group_state``
partition it leads, behind the one coordinator the shared runtime (kbroker/coordinator_runtime.py) drives.

Kafka's CoordinatorRuntime keeps a shard per partition and ShareCoordinatorService sends each share-partition's
request to the shard of ``partitionFor(key)``. Here :class:`ShareCoordinators` does both for the runtime: it
places a coordinator key (``group:topic:partition``, kbroker/share/coordinator.py's ``coordinator_key``),
makes a shard when a partition starts loading, feeds it the records read back, and drops it when leadership
moves on. Pure, as the shards are: the shell (kbroker/share/shell.py) does the I/O.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable

from kbroker.coordinator_records import coordinator_partition
from kbroker.effects import CoordinatorError
from kbroker.share.coordinator import ShareCoordinatorConfig, ShareCoordinatorShard, coordinator_key
from kbroker.wire.errors import ErrorCode

__all__ = ["ShareCoordinators", "normalized_coordinator_key"]

_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}(==)?")  # a Uuid as Kafka prints it: 16 bytes, URL-safe base64
_PARTITION = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.parseInt reads
_INT32 = range(-(2**31), 2**31)


def normalized_coordinator_key(key: str) -> str:
    """A FindCoordinator share key (``groupId:topicId:partition``) as the persister writes it, which is what
    places it (Kafka's SharePartitionKey.getInstance(key).asCoordinatorKey()); ValueError with Kafka's
    message when it is malformed (SharePartitionKey.validate: a group id with a colon is, too)."""
    if not key:
        raise ValueError("Share partition key cannot be empty")
    tokens = key.split(":")
    if len(tokens) != 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, found -  {key}")
    group_id, topic_id, partition = tokens
    if not group_id.strip():
        raise ValueError("GroupId must be alphanumeric string")
    if not _TOPIC_ID.fullmatch(topic_id):
        raise ValueError(f"Invalid topic ID: {topic_id}")
    if not _PARTITION.fullmatch(partition) or int(partition) not in _INT32:
        raise ValueError(f"Invalid partition: {partition}")
    topic_bytes = base64.urlsafe_b64decode(topic_id[:22] + "==")
    return coordinator_key(group_id.strip(), uuid.UUID(bytes=topic_bytes), int(partition))


class ShareCoordinators:
    """The shards of the ``__share_group_state`` partitions loaded (or loading) here.
    ``topic_partition_count(topic_id)`` is the metadata's partition count of a topic, None for no such topic."""

    def __init__(self, config: ShareCoordinatorConfig,
                 topic_partition_count: Callable[[uuid.UUID], int | None]) -> None:
        self.config = config
        self._topic_partition_count = topic_partition_count
        self.shards: dict[int, ShareCoordinatorShard] = {}
        self.loaded: set[int] = set()
        self.loading: set[int] = set()

    def partition_of(self, key: str) -> int:
        """The partition keeping the state of the share-partition a coordinator key names."""
        return coordinator_partition(key, self.config.state_topic_partition_count)

    def check(self, key: str) -> ShareCoordinatorShard:
        """The shard serving ``key`` now; CoordinatorError if none does here (yet)."""
        partition = self.partition_of(key)
        if partition in self.loading:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if partition not in self.loaded:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        return self.shards[partition]

    def begin_load(self, partition: int) -> None:
        self.shards[partition] = ShareCoordinatorShard(partition, self.config, self._topic_partition_count)
        self.loading.add(partition)

    def replay(self, partition: int, key, value) -> None:
        """A record read back from ``partition`` while it loads (none once it is unloaded: the runtime's
        load reads on to the end of what it started reading)."""
        shard = self.shards.get(partition)
        if shard is not None:
            shard.replay(key, value)

    def finish_load(self, partition: int, now_ms: int) -> None:
        self.loading.discard(partition)
        self.loaded.add(partition)

    def unload(self, partition: int) -> None:
        """Leadership moved on: the shard goes. Its writes still on their way are failed by the runtime,
        whose waiting answers say NOT_COORDINATOR (the shard's answer until a write is durable)."""
        self.shards.pop(partition, None)
        self.loaded.discard(partition)
        self.loading.discard(partition)

    def next_deadline_ms(self) -> None:
        """No timers: Kafka's cold-partition snapshots and record pruning are not done here."""
        return None
