"""What the share-partition tests share: a small configuration, a clock, and the calls a shell would make."""

from __future__ import annotations

from kbroker.log.clock import FakeClock
from kbroker.share.partition import AcknowledgementBatch, AcknowledgeResult, SharePartition, SharePartitionConfig
from kbroker.share.persisted import StateWrite
from kbroker.wire.errors import ErrorCode

LOCK_MS = 30_000
CONFIG = SharePartitionConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=3, max_record_locks=100)

GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3


def states(partition: SharePartition) -> list[tuple]:
    """(first, last, state, delivery count, member) per range, in offset order."""
    return [(r.first_offset, r.last_offset, r.state.name, r.delivery_count, r.member_id)
            for r in partition.in_flight()]


def acquired(partition: SharePartition, member: str, max_records: int, batches, clock: FakeClock,
             **options) -> list[tuple[int, int, int]]:
    return [(records.first_offset, records.last_offset, records.delivery_count)
            for records in partition.acquire(member, max_records, batches, clock.monotonic_ms(), **options)]


def acknowledge(partition: SharePartition, member: str, clock: FakeClock, *batches: tuple) -> AcknowledgeResult:
    """``batches``: (first, last, type, ...) each."""
    return partition.acknowledge(member, [AcknowledgementBatch(first, last, tuple(types))
                                          for first, last, *types in batches], clock.monotonic_ms())


def acknowledged(partition: SharePartition, member: str, clock: FakeClock, *batches: tuple) -> None:
    """Acknowledges and makes the write durable, as a shell whose write succeeds."""
    result = acknowledge(partition, member, clock, *batches)
    assert result.error_code == ErrorCode.NONE and result.write is not None, result
    assert partition.write_durable(result.write).error_code == ErrorCode.NONE


def durable(partition: SharePartition, write: StateWrite | None) -> None:
    assert write is not None
    partition.write_durable(write)
