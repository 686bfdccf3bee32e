"""Transactions across brokers: the coordinator's markers to partition leaders elsewhere, and a
partition leader's KIP-890 verification with a coordinator elsewhere.

Markers: the coordinator writes those for the partitions this broker leads itself and sends
WriteTxnMarkers to the leaders of the others; a partition whose leader is unknown or
unreachable answers NOT_LEADER_OR_FOLLOWER and is tried again (kbroker/txn/shell.py).

Verification: before a producer's first transactional write to a partition, its leader asks the
producer's coordinator (AddPartitionsToTxn v4+, ``verify_only`` unless the client left adding to
the broker, transaction version 2) whether the partition is in the transaction. The answer comes
back over the network, so a marker could land between it and the append: a guard per
(partition, producer) is set before asking, a marker for that producer clears it, and the append
goes ahead only if it still stands (Kafka's verification guard).
"""

from __future__ import annotations

from collections import defaultdict

from kbroker.txn.markers import write_markers
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

WriteTxnMarkersRequest = API_BY_NAME["WriteTxnMarkers"].request_class
AddPartitionsToTxnRequest = API_BY_NAME["AddPartitionsToTxn"].request_class
_TIMEOUT_S = 10
_MARKERS_VERSION = 1
_ADD_PARTITIONS_VERSION = 4  # broker to coordinator, batched, with verify_only


async def write_markers_anywhere(broker, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                                 partitions) -> dict[tuple[str, int], int]:
    """``write_markers`` for partitions led anywhere: an error code for each."""
    errors: dict[tuple[str, int], int] = {}
    by_leader: dict[int, list] = defaultdict(list)
    for topic, index in partitions:
        image = broker.image.topics.get(topic)
        if image is None or not 0 <= index < len(image.partitions):
            errors[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            by_leader[image.partitions[index].leader].append((topic, index))
    for leader, wanted in by_leader.items():
        if leader == broker.node_id:
            errors.update(await write_markers(broker, producer_id, producer_epoch, commit, coordinator_epoch, wanted))
        else:
            errors.update(await _send_markers(broker, leader, producer_id, producer_epoch, commit, coordinator_epoch,
                                              wanted))
    return errors


async def _send_markers(broker, leader: int, producer_id: int, producer_epoch: int, commit: bool,
                        coordinator_epoch: int, partitions) -> dict[tuple[str, int], int]:
    retry = {key: ErrorCode.NOT_LEADER_OR_FOLLOWER for key in partitions}
    address = broker.image.peer_address(leader)
    if address is None:
        return retry
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, index in partitions:
        topics[topic].append(index)
    marker = WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
        topics=[WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(name=name, partition_indexes=indexes)
                for name, indexes in topics.items()],
        coordinator_epoch=coordinator_epoch)
    try:
        response = await broker.peers.call(address, "WriteTxnMarkers", _MARKERS_VERSION, WriteTxnMarkersRequest(
            markers=[marker]), client_id=f"txn-coordinator-{broker.node_id}", timeout_s=_TIMEOUT_S)
    except OSError:
        return retry
    errors = dict(retry)
    for result in response.markers:
        for topic in result.topics:
            for partition in topic.partitions:
                code = partition.error_code
                # The leader's metadata may be behind this coordinator's (a broker just restarted): the
                # marker is retried, as Kafka's marker sender does; only this coordinator's own metadata
                # says a partition is gone (write_markers_anywhere).
                errors[(topic.name, partition.partition_index)] = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else code)
    return errors


class VerificationGuards:
    """Guards of partitions being verified with a coordinator on another broker."""

    def __init__(self) -> None:
        self._guards: dict[tuple[str, int, int], object] = {}

    def begin(self, topic: str, index: int, producer_id: int) -> object:
        token = object()
        self._guards[(topic, index, producer_id)] = token
        return token

    def holds(self, topic: str, index: int, producer_id: int, token: object) -> bool:
        return self._guards.get((topic, index, producer_id)) is token

    def end(self, topic: str, index: int, producer_id: int) -> None:
        """The verification is used, or a marker for this producer landed: the guard goes."""
        self._guards.pop((topic, index, producer_id), None)


async def verify_with_coordinator(broker, coordinator: int, transactional_id: str, producer_id: int,
                                  producer_epoch: int, topic: str, index: int, *, add: bool) -> int:
    """Ask the producer's coordinator on broker ``coordinator`` whether ``topic``-``index`` is in the
    producer's transaction (``add``: add it first). Its error code; a retriable one if it cannot be asked."""
    address = broker.image.peer_address(coordinator)
    if address is None:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, verify_only=not add,
        topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(
            name=topic, partitions=[index])])
    try:
        response = await broker.peers.call(address, "AddPartitionsToTxn", _ADD_PARTITIONS_VERSION,
                                           AddPartitionsToTxnRequest(transactions=[transaction]),
                                           client_id=f"partition-leader-{broker.node_id}", timeout_s=_TIMEOUT_S)
    except OSError:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if response.error_code != ErrorCode.NONE:
        return response.error_code
    for result in response.results_by_transaction:
        for topic_result in result.topic_results:
            for partition in topic_result.results_by_partition:
                return partition.partition_error_code
    return ErrorCode.NOT_ENOUGH_REPLICAS
