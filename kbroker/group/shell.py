"""The trio shell around the group coordinator, over ``__consumer_offsets``.

Storage, waiters, loading and timers are the shared coordinator runtime
(kbroker/coordinator_runtime.py); here: the group records, offsets written
inside transactions, the groups' timers and offsets' retention, and the
metadata image as the KIP-848 groups see it.
"""

from __future__ import annotations

from kbroker.coordinator_runtime import CoordinatorRuntime, decode_record, encode_record
from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.topics import TopicRequest

OFFSETS_TOPIC = "__consumer_offsets"

__all__ = ["GroupShell", "OFFSETS_TOPIC", "coordinator_config"]


def coordinator_config(config):
    """The coordinator's settings from the broker's (Kafka's names)."""
    from kbroker.group.classic import ClassicGroupConfig
    from kbroker.group.consumer import ConsumerGroupConfig
    from kbroker.group.coordinator import CoordinatorConfig

    return CoordinatorConfig(
        partition_count=config.offsets_topic_num_partitions,
        classic=ClassicGroupConfig(
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            max_size=config.group_max_size,
        ),
        consumer=ConsumerGroupConfig(
            session_timeout_ms=config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            max_size=config.group_consumer_max_size,
        ),
        offsets_retention_ms=config.offsets_retention_minutes * 60_000,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
    )


class GroupShell(CoordinatorRuntime):
    topic = OFFSETS_TOPIC

    def __init__(self, broker, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(broker, clock)
        self._retention_check_ms = broker.config.offsets_retention_check_interval_ms
        self._next_retention_check_ms = 0
        self._topics_view: tuple[object, object] = (None, None)

    def make_coordinator(self):
        from kbroker.group.coordinator import GroupCoordinator

        return GroupCoordinator(coordinator_config(self.broker.config))

    def topic_request(self) -> TopicRequest:
        config = self.broker.config
        return TopicRequest(OFFSETS_TOPIC, config.offsets_topic_num_partitions, config.offsets_topic_replication_factor, {},
                            {"cleanup.policy": "compact", "compression.type": "producer",
                             "segment.bytes": str(config.offsets_topic_segment_bytes)})

    def encode(self, key, value) -> tuple[bytes, bytes | None]:
        from kbroker.group import records

        return encode_record(records, key, value)

    def replay(self, partition: int, record, producer_id: int | None) -> None:
        from kbroker.group import records

        decoded = decode_record(records, OFFSETS_TOPIC, partition, record)
        if decoded is None:
            return
        key, value = decoded
        if producer_id is not None and isinstance(key, records.OffsetCommitKey):
            self.coordinator.offsets.replay_transactional(producer_id, key, value)
        else:
            self.coordinator.replay(key, value, self.now_ms())

    def transaction_ended(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker in offsets partition ``partition``: that producer's offsets count, or not."""
        self.coordinator.transaction_ended(partition, producer_id, commit)

    def timer_work(self, now: int) -> list[tuple[str, list]]:
        work = []
        if self._topics_view[0] is not self.broker.image:
            work += self.coordinator.topics_changed(self.topics_view(), now)
        work += self.coordinator.tick(now, self.topics_view())
        if now >= self._next_retention_check_ms:
            self._next_retention_check_ms = now + self._retention_check_ms
            work += self.coordinator.expire_offsets(now)
        return work

    def topics_view(self):
        """The image's topics as the consumer-group core sees them (internal ones left out), per image."""
        from kbroker.group.consumer import TopicsView

        image = self.broker.image
        if self._topics_view[0] is not image:
            view = TopicsView(by_name={name: (topic.topic_id, len(topic.partitions)) for name, topic in image.topics.items()
                                       if not topic.is_internal})
            self._topics_view = (image, view)
        return self._topics_view[1]
