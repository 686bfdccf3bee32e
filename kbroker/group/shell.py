"""The trio shell around the group coordinator, over ``__consumer_offsets``.

Storage, waiters, loading and timers are the shared coordinator runtime
(kbroker/coordinator_runtime.py); here: the group records, offsets written
inside transactions, the groups' timers and offsets' retention, the
metadata image as the KIP-848 and share groups see it, and what share groups
ask of the share coordinator (initializing, reading and deleting their
share-partitions' state) through the share persister.
"""

from __future__ import annotations

import uuid

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

    def make_checks_due(self) -> None:
        self._next_retention_check_ms = 0  # offsets past offsets.retention.minutes

    async def rebalance(self, group_id: str) -> bool:
        """Rebalance ``group_id`` now, through the core's own state change (a test's fault, kbroker/faults.py);
        returns once that is carried out. False when the group is empty, rebalancing already, or a share group.
        CoordinatorError when it is not coordinated here."""
        effects = self.coordinator.rebalance(group_id, self.topics_view(), self.now_ms())
        if effects is None:
            return False
        await self.wait_applied(group_id, effects)
        return True

    async def perform(self, key: str, effect) -> None:
        """A share group's InitializeShareGroupState after a heartbeat: asked of the share coordinator in the
        background (the heartbeat that asked is answered meanwhile)."""
        from kbroker.group.share import InitializeShareGroupState

        if not isinstance(effect, InitializeShareGroupState):
            await super().perform(key, effect)
            return
        self._nursery.start_soon(self.initialize_share_state, effect)

    # -- share groups at the share coordinator (KIP-932): kbroker/share/persister.py --------------------------

    async def initialize_share_state(self, effect) -> dict[tuple[uuid.UUID, int], tuple[int, str | None]]:
        """Have the share coordinator initialize the share-partitions of ``effect`` (an
        InitializeShareGroupState), and tell their group the outcome once it is durable: those done may be
        assigned; after a heartbeat, those that failed are asked for again (see the effect). The error code
        and message per share-partition."""
        from kbroker.effects import CoordinatorError
        from kbroker.group.share import ShareGroup
        from kbroker.wire.errors import ErrorCode

        results = await self._initialized(effect)
        done: dict = {}
        failed: dict = {}
        for (topic_id, partition), (error_code, _) in results.items():
            (done if error_code == ErrorCode.NONE else failed).setdefault(topic_id, set()).add(partition)
        try:
            self.coordinator.check(effect.group_id)
        except CoordinatorError:
            return results  # no longer coordinated here: the new coordinator asks again
        group = self.coordinator.groups.get(effect.group_id)
        if isinstance(group, ShareGroup):
            now = self.now_ms()
            effects = group.state_initialized(done, self.topics_view(), now)
            if effect.start_offsets is None:
                effects += group.state_initialization_failed(failed, now)
            await self.wait_applied(effect.group_id, effects)
        return results

    async def _initialized(self, effect) -> dict[tuple[uuid.UUID, int], tuple[int, str | None]]:
        persister = self.broker.share_persister
        if effect.start_offsets is None:
            errors = await persister.initialize(effect.group_id, effect.state_epoch, effect.partitions)
            return {key: (error_code, None) for key, error_code in errors.items()}
        return await persister.initialize_at(effect.group_id, effect.state_epoch, effect.start_offsets)

    async def share_state_summaries(self, group_id: str, partitions: dict[uuid.UUID, frozenset[int]]) -> dict:
        """ReadShareGroupStateSummary's partition result per share-partition: its error code, start offset,
        leader epoch and delivery complete count."""
        return await self.broker.share_persister.summaries(group_id, partitions)

    async def delete_share_state(self, group_id: str,
                                 partitions: dict[uuid.UUID, frozenset[int]]) -> dict[tuple[uuid.UUID, int], int]:
        """DeleteShareGroupState: an error code per share-partition."""
        return await self.broker.share_persister.delete(group_id, partitions)

    async def delete_share_group_state(self, group_id: str) -> int:
        """DeleteGroups of a share group, first step (Kafka 4.1+): its share-partitions recorded as deleting,
        then their state deleted at the share coordinator. NONE when the group's tombstones may follow (any
        other group's at once), else the error that keeps the group. CoordinatorError as the core raises it."""
        from kbroker.wire.errors import ErrorCode

        begun = self.coordinator.share_group_state_deletion(group_id, self.topics_view(), self.now_ms())
        if begun is None:
            return ErrorCode.NONE
        partitions, effects = begun
        if not await self.wait_applied(group_id, effects):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        errors = await self.delete_share_state(group_id, partitions) if partitions else {}
        return next((error_code for error_code in errors.values() if error_code != ErrorCode.NONE), ErrorCode.NONE)

    def topics_view(self):
        """The image's topics as the consumer-group core sees them (internal ones left out), per image."""
        from kbroker.group.consumer import TopicsView

        image = self.broker.image
        if self._topics_view[0] is not image:
            view = TopicsView(by_name={name: (topic.topic_id, len(topic.partitions)) for name, topic in image.topics.items()
                                       if not topic.is_internal})
            self._topics_view = (image, view)
        return self._topics_view[1]
