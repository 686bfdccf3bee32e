"""The share-partition state the share coordinator keeps: Read/WriteShareGroupState's partition shapes, the
write a share-partition asks for and what became of it, and how a failed write is answered.

A share-partition (kbroker/share/partition.py) changes only once its write is durable (DESIGN.md rule 11):
each change it makes comes out as a :class:`StateWrite` and is settled by the shell with ``write_durable``
or ``write_failed``, which answer with a :class:`WriteOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.wire.errors import ErrorCode

__all__ = ["FENCING_ERRORS", "UNINITIALIZED_START_OFFSET", "PersistedState", "StateBatch", "StateWrite", "WriteOutcome",
           "answer_for_write_error"]

UNINITIALIZED_START_OFFSET = -1  # ReadShareGroupState's start offset of a share-partition never initialized
FENCING_ERRORS = (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH)  # a newer leader or state exists


@dataclass(frozen=True)
class StateBatch:
    """A state batch of Read/WriteShareGroupState: delivery state 0 available, 2 acknowledged, 4 archived."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class PersistedState:
    """A share-partition's state as the share coordinator keeps it (ReadShareGroupState's partition result;
    WriteShareGroupState's partition data, which adds the writer's leader epoch)."""

    state_epoch: int
    start_offset: int  # UNINITIALIZED_START_OFFSET: no state yet
    state_batches: tuple[StateBatch, ...] = ()
    leader_epoch: int = -1


@dataclass(frozen=True, eq=False)
class StateWrite:
    """A change to make durable before it counts: send ``state`` (WriteShareGroupState), then report its fate
    to the share-partition that made it (``write_durable`` or ``write_failed``)."""

    write_id: int
    state: PersistedState


@dataclass(frozen=True)
class WriteOutcome:
    error_code: int  # the answer to the request that caused the write
    records_released: bool  # records became AVAILABLE: a waiting share fetch may now acquire them


def answer_for_write_error(error_code: int) -> int:
    """What a member is answered when its change could not be written (Kafka's SharePartition.fetchPersisterError)."""
    if error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error_code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return error_code
    if error_code in FENCING_ERRORS:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_SERVER_ERROR

