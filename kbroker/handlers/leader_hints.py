"""KIP-951: a NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH) answer carries the partition's
current leader and epoch, and the response the leaders' endpoints, so that a client can go to
the new leader at once instead of asking for metadata first (Produce v10+, Fetch v16+)."""

from __future__ import annotations

from kbroker.wire.errors import ErrorCode


def hint_leader(topic, index: int, result, leaders: set[int]) -> None:
    """Put the partition's leader into ``result.current_leader``; remember it for ``node_endpoints``."""
    state = topic.partitions[index]
    result.current_leader = type(result).LeaderIdAndEpoch(leader_id=state.leader, leader_epoch=state.leader_epoch)
    if state.leader >= 0:
        leaders.add(state.leader)


def node_endpoints(image, leaders: set[int], response_class, listener: str) -> list:
    return [response_class.NodeEndpoint(node_id=broker.node_id, host=host, port=port, rack=broker.rack)
            for broker, host, port in image.live_addresses(listener) if broker.node_id in leaders]


def leader_epoch_error(partition, current_leader_epoch: int | None) -> int:
    """KIP-320: a request naming another leader epoch than this leader's comes from stale metadata:
    FENCED_LEADER_EPOCH when it is older, UNKNOWN_LEADER_EPOCH when it is newer; -1 (or none) skips. Only -1
    means none, as in Kafka (``RequestUtils.getLeaderEpoch``): another negative epoch is older than any."""
    if current_leader_epoch is None or current_leader_epoch == -1 or current_leader_epoch == partition.leader_epoch:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < partition.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
