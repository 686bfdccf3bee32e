"""The trio shell around the transaction coordinator, over ``__transaction_state``.

Storage, waiters, loading and timers are the shared coordinator runtime
(kbroker/coordinator_runtime.py). Here: the transaction records, producer ids
from the metadata log's blocks, and the ``WriteMarkers`` effect, carried out
through the partition leaders' WriteTxnMarkers path (kbroker/txn/markers.py;
on a single node a direct call) before the coordinator completes the
transaction.
"""

from __future__ import annotations

import logging

from kbroker.coordinator_runtime import CoordinatorRuntime, decode_record, encode_record
from kbroker.group.shell import OFFSETS_TOPIC
from kbroker.topics import TopicRequest
from kbroker.txn.remote import write_markers_anywhere
from kbroker.wire.errors import ErrorCode

logger = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
_MARKER_RETRY_S = 0.5
_LOAD_WAIT_S = 0.01
_FENCE_WAIT_S = 10  # fence_producer: the longest wait for a transaction being ended to complete
# As Kafka's marker sender: a partition that is gone needs no marker; one that refuses the
# producer's epoch or this coordinator's has newer markers, and retrying cannot change that.
_MARKER_REFUSED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_MARKER_DONE = _MARKER_REFUSED | {ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def txn_config(config):
    """The coordinator's settings from the broker's (Kafka's names)."""
    from kbroker.txn.coordinator import TxnConfig

    return TxnConfig(
        partition_count=config.transaction_state_log_num_partitions,
        max_timeout_ms=config.transaction_max_timeout_ms,
        abort_timed_out_check_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        remove_expired_check_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms,
        transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        offsets_partition_count=config.offsets_topic_num_partitions,
    )


class TxnShell(CoordinatorRuntime):
    topic = TRANSACTION_STATE_TOPIC

    def make_coordinator(self):
        from kbroker.txn.coordinator import TransactionCoordinator

        return TransactionCoordinator(txn_config(self.broker.config), lambda: self.broker.producer_ids.take(self.broker))

    def begin_load(self, partition: int, leader_epoch: int) -> None:
        self.coordinator.begin_load(partition, coordinator_epoch=leader_epoch)  # Kafka's coordinator epoch

    def topic_request(self) -> TopicRequest:
        config = self.broker.config
        return TopicRequest(TRANSACTION_STATE_TOPIC, config.transaction_state_log_num_partitions,
                            config.transaction_state_log_replication_factor, {},
                            {"cleanup.policy": "compact", "compression.type": "producer",
                             "segment.bytes": str(config.transaction_state_log_segment_bytes),
                             "min.insync.replicas": str(config.transaction_state_log_min_isr)})

    def encode(self, key, value) -> tuple[bytes, bytes | None]:
        from kbroker.txn import records

        return encode_record(records, key, value)

    def replay(self, partition: int, record, producer_id: int | None) -> None:
        from kbroker.txn import records

        decoded = decode_record(records, TRANSACTION_STATE_TOPIC, partition, record)
        if decoded is not None:
            self.coordinator.replay(*decoded, self.now_ms())

    def partition_of(self, transactional_id: str) -> int:
        from kbroker.txn.records import coordinator_partition

        return coordinator_partition(transactional_id, self.broker.config.transaction_state_log_num_partitions)

    def changed(self, key: str, effects: list) -> None:
        """The core keeps its own timers (``next_deadline_ms``)."""

    def loaded(self, partition: int, now: int) -> list[tuple[str, list]]:
        """Transactions found half-ended (PrepareCommit/PrepareAbort) get their markers written again."""
        return _by_transactional_id(self.coordinator.finish_load(partition, now))

    def timer_work(self, now: int) -> list[tuple[str, list]]:
        return _by_transactional_id(self.coordinator.tick(now))

    def make_checks_due(self) -> None:
        self.coordinator.make_checks_due()

    async def fence_producer(self, transactional_id: str) -> int:
        """Fence the producer of ``transactional_id`` (kbroker/faults.py); returns its new epoch once that is
        durable and an open transaction's abort markers are written. Waits (up to 10 s) for a transaction being
        ended to complete first."""
        import trio

        from kbroker.effects import CoordinatorError

        with trio.fail_after(_FENCE_WAIT_S):
            while True:
                try:
                    epoch, effects = self.coordinator.fence_producer(transactional_id, self.now_ms())
                except CoordinatorError as error:
                    if error.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
                        raise
                    await trio.sleep(0.01)
                    continue
                if not await self.wait_applied(transactional_id, effects):
                    raise OSError(f"the fence of {transactional_id!r} was not written")
                return epoch

    async def perform(self, key: str, effect) -> None:
        """``WriteMarkers``, once the decision before it is durable: write them until every
        partition took them (a deleted partition counts as done), then complete the transaction."""
        import trio

        remaining = set(effect.partitions)
        offsets = {index for topic, index in remaining if topic == OFFSETS_TOPIC}
        while offsets and offsets & self.broker.groups.coordinator.loading:
            # A marker must not overtake the group coordinator's loading of the offsets it ends
            # (after a restart): the loader would miss it and keep them pending.
            await trio.sleep(_LOAD_WAIT_S)
        while remaining:
            errors = await write_markers_anywhere(self.broker, effect.producer_id, effect.producer_epoch, effect.commit,
                                         effect.coordinator_epoch, sorted(remaining))
            for partition, code in errors.items():
                if code in _MARKER_REFUSED:
                    logger.error("%r: %s-%d refused the markers of producer %d epoch %d: %s",
                                 effect.transactional_id, *partition, effect.producer_id, effect.producer_epoch,
                                 ErrorCode(code).name)
            remaining = {partition for partition, code in errors.items() if code not in _MARKER_DONE}
            if remaining:
                logger.warning("%r: markers not yet written to %s; retrying", effect.transactional_id,
                               sorted(remaining))
                await trio.sleep(_MARKER_RETRY_S)
        self.apply(key, self.coordinator.markers_written(effect.transactional_id, effect.producer_id,
                                                         effect.producer_epoch, self.now_ms()))


def _by_transactional_id(effects: list) -> list[tuple[str, list]]:
    """Effects of several transactions, each under the transactional id it belongs to."""
    from kbroker.effects import Persist, Respond
    from kbroker.txn.coordinator import WriteMarkers

    grouped: dict[str, list] = {}
    current = None
    for effect in effects:
        if isinstance(effect, WriteMarkers):
            current = effect.transactional_id
        elif isinstance(effect, Persist) and effect.records:
            current = effect.records[0][0].transactional_id
        elif not isinstance(effect, Respond) or current is None:
            raise ValueError(f"cannot tell which transaction {effect!r} belongs to")
        grouped.setdefault(current, []).append(effect)
    return list(grouped.items())
