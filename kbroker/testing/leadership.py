"""Moving a partition's leadership, or a group's or transaction's coordinator, between the nodes of a test
cluster (issue 43: ``RunningCluster.move_leader`` and ``move_coordinator``), the way an operator moves it in
Kafka: the partition's replicas reordered so that the chosen node is its preferred replica
(AlterPartitionReassignments, the node added as a replica first if it is not one), then a preferred leader
election (ElectLeaders). Nothing here acts inside a broker: the controller makes the change in its real code
paths, and a client of the old leader meets what Kafka's clients meet then (NOT_LEADER_OR_FOLLOWER, or
NOT_COORDINATOR from the old coordinator) and finds the new one.
"""

from __future__ import annotations

import time

from kbroker.coordinator_records import coordinator_partition
from kbroker.tools.client import Client, KafkaError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

PREFERRED = 0  # ElectLeaders' election type
_POLL_S = 0.02
Reassignments = API_BY_NAME["AlterPartitionReassignments"].request_class
Elect = API_BY_NAME["ElectLeaders"].request_class
# Answers to the election that leave the chosen node leading: it leads already, or it was elected.
_ELECTED = (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)


def move_leader(bootstrap: str, topic: str, partition: int, node_id: int, timeout_s: float = 30) -> int:
    """Make node ``node_id`` the leader of ``topic``'s ``partition``; returns the partition's new leader epoch
    once the metadata of every node in ``bootstrap`` shows it (a client asking any of them then finds the new
    leader, and the old one refuses). A refusal raises KafkaError naming it; a change not seen everywhere in
    ``timeout_s`` raises TimeoutError."""
    deadline = time.monotonic() + timeout_s
    client = Client(bootstrap, timeout_s=timeout_s)
    try:
        state = _partition(client, topic, partition)
        if state.leader_id == node_id:
            return state.leader_epoch
        replicas = [node_id] + [replica for replica in state.replica_nodes if replica != node_id]
        if list(state.replica_nodes) != replicas:
            _reassign(client, topic, partition, replicas, timeout_s)
            _wait(client, topic, partition, deadline, f"node {node_id} in the in-sync replicas",
                  lambda found: list(found.replica_nodes) == replicas and node_id in found.isr_nodes)
        _elect(client, topic, partition, timeout_s)
    finally:
        client.close()
    epochs = set()
    for address in bootstrap.split(","):  # every node's view, the old leader's included
        node = Client(address.strip(), timeout_s=timeout_s)
        try:
            epochs.add(_wait(node, topic, partition, deadline, f"node {node_id} leading as {address} sees it",
                             lambda found: found.leader_id == node_id).leader_epoch)
        finally:
            node.close()
    return max(epochs)


def move_coordinator(bootstrap: str, node_id: int, *, group: str | None = None,
                     transactional_id: str | None = None, timeout_s: float = 30) -> int:
    """Make node ``node_id`` the coordinator of ``group`` or of ``transactional_id`` (give exactly one): the
    leader of the partition of ``__consumer_offsets`` or ``__transaction_state`` that holds it, which is
    made first if no client asked for it yet. Returns that partition."""
    if (group is None) == (transactional_id is None):
        raise ValueError("move_coordinator: give exactly one of group and transactional_id")
    key, key_type, topic = (group, 0, "__consumer_offsets") if group is not None \
        else (transactional_id, 1, "__transaction_state")
    client = Client(bootstrap, timeout_s=timeout_s)
    try:
        deadline = time.monotonic() + timeout_s
        while True:  # FindCoordinator makes the topic as a client's first would, and says when it is ready
            answer = client.bootstrap.call("FindCoordinator", key=key, key_type=key_type)
            if answer.error_code == ErrorCode.NONE:
                break
            if answer.error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE or time.monotonic() > deadline:
                raise KafkaError(answer.error_code, f"the coordinator of {key!r}", answer.error_message)
            time.sleep(_POLL_S)
        [found] = client.metadata([topic]).topics
        partition = coordinator_partition(key, len(found.partitions))
    finally:
        client.close()
    move_leader(bootstrap, topic, partition, node_id, timeout_s)
    return partition


def _partition(client: Client, topic: str, partition: int):
    [found] = client.metadata([topic]).topics
    if found.error_code:
        raise KafkaError(found.error_code, topic)
    for state in found.partitions:
        if state.partition_index == partition:
            return state
    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")


def _reassign(client: Client, topic: str, partition: int, replicas: list[int], timeout_s: float) -> None:
    answer = client.bootstrap.call("AlterPartitionReassignments", timeout_ms=int(timeout_s * 1000), topics=[
        Reassignments.ReassignableTopic(name=topic, partitions=[
            Reassignments.ReassignableTopic.ReassignablePartition(partition_index=partition, replicas=replicas)])])
    if answer.error_code:
        raise KafkaError(answer.error_code, f"reassigning {topic}-{partition}", answer.error_message)
    [[result]] = [each.partitions for each in answer.responses]
    if result.error_code:
        raise KafkaError(result.error_code, f"reassigning {topic}-{partition} to {replicas}", result.error_message)


def _elect(client: Client, topic: str, partition: int, timeout_s: float) -> None:
    answer = client.bootstrap.call("ElectLeaders", election_type=PREFERRED, timeout_ms=int(timeout_s * 1000),
                                   topic_partitions=[Elect.TopicPartitions(topic=topic, partitions=[partition])])
    if answer.error_code:
        raise KafkaError(answer.error_code, f"electing a leader of {topic}-{partition}")
    [[result]] = [each.partition_result for each in answer.replica_election_results]
    if result.error_code not in _ELECTED:
        raise KafkaError(result.error_code, f"electing a leader of {topic}-{partition}", result.error_message)


def _wait(client: Client, topic: str, partition: int, deadline: float, what: str, done):
    while True:
        state = _partition(client, topic, partition)
        if done(state):
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}-{partition}: not {what} in time (replicas {list(state.replica_nodes)}, "
                               f"in sync {list(state.isr_nodes)}, leader {state.leader_id})")
        time.sleep(_POLL_S)
