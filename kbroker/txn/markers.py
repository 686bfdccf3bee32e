"""Transaction markers: COMMIT or ABORT control batches ending a producer's transaction on partitions.

What a partition leader does for WriteTxnMarkers. The coordinator calls it
directly on a single node (the same interface the request serves); each
marker is appended through the log's producer state, which ends the
transaction there (last stable offset, ``.txnindex`` for aborts), and is
answered once fsynced. A marker on a ``__consumer_offsets`` partition also
tells the group coordinator to make that producer's pending offsets visible,
or to drop them. A marker's timestamp is the wall time of the clock of the partition it goes to.
"""

from __future__ import annotations

from kbroker.log.append_origin import AppendOrigin
from kbroker.log.deposed import NotLeaderForEpoch
from kbroker.log.partition_log import ProducerStateError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import ControlRecordType, build_control_batch

OFFSETS_TOPIC = "__consumer_offsets"


async def write_markers(broker, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                        partitions) -> dict[tuple[str, int], int]:
    """Append the marker to every ``(topic, partition)``; an error code for each, once all are durable."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    errors: dict[tuple[str, int], int] = {}
    appended = []
    for topic, index in partitions:
        image = broker.image.topics.get(topic)
        if image is None or not 0 <= index < len(image.partitions):
            errors[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if not broker.leads(image, index):
            errors[(topic, index)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        broker.txn_guards.end(topic, index, producer_id)  # a verification under way is stale now
        partition = broker.partition(topic, index)
        timestamp_ms = partition.clock.wall_ms()
        batch = bytearray(build_control_batch(kind, producer_id, producer_epoch, coordinator_epoch, timestamp_ms))
        try:
            result = partition.append(batch, origin=AppendOrigin.COORDINATOR)
        except ProducerStateError as error:
            errors[(topic, index)] = error.error_code
            continue
        partition.start_flush(result.last_offset)
        appended.append(((topic, index), partition, result))
        if topic == OFFSETS_TOPIC:
            broker.groups.transaction_ended(index, producer_id, commit)
    for key, partition, result in appended:
        try:
            await partition.wait_committed(result.last_offset, result.leader_epoch)
        except NotLeaderForEpoch:  # deposed before the marker was committed: written again at the new leader
            errors[key] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        except OSError:
            errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
        else:
            errors[key] = ErrorCode.NONE
    return errors
