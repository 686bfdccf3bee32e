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
    from kbroker.group.share import ShareGroupConfig

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
        share=ShareGroupConfig(
            session_timeout_ms=config.group_share_session_timeout_ms,
            heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
            max_size=config.group_share_max_size,
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

    async def perform(self, key: str, effect) -> None:
        """A share group's InitializeShareGroupState: asked of the share coordinator in the background (the
        heartbeat that asked is answered meanwhile); the group hears the outcome per share-partition."""
        from kbroker.group.share import InitializeShareGroupState

        if not isinstance(effect, InitializeShareGroupState):
            await super().perform(key, effect)
            return
        self._nursery.start_soon(self._initialize_share_state, effect)

    async def _initialize_share_state(self, effect) -> None:
        from kbroker.effects import CoordinatorError
        from kbroker.group.share import ShareGroup
        from kbroker.wire.errors import ErrorCode

        errors = await self.broker.share_persister.initialize(effect.group_id, effect.state_epoch, effect.partitions)
        done: dict = {}
        failed: dict = {}
        for (topic_id, partition), error_code in errors.items():
            (done if error_code == ErrorCode.NONE else failed).setdefault(topic_id, set()).add(partition)
        try:
            self.coordinator.check(effect.group_id)
        except CoordinatorError:
            return  # no longer coordinated here: the new coordinator asks again
        group = self.coordinator.groups.get(effect.group_id)
        if not isinstance(group, ShareGroup):
            return
        now = self.now_ms()
        self.apply(effect.group_id, group.state_initialized(done, self.topics_view(), now)
                   + group.state_initialization_failed(failed, now))

    def topics_view(self):
        """The image's topics as the consumer-group core sees them (internal ones left out), per image."""
        from kbroker.group.consumer import TopicsView

        image = self.broker.image
        if self._topics_view[0] is not image:
            view = TopicsView(by_name={name: (topic.topic_id, len(topic.partitions)) for name, topic in image.topics.items()
                                       if not topic.is_internal})
            self._topics_view = (image, view)
        return self._topics_view[1]
