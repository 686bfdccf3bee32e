"""The checks before a handler acts on a partition, once, in Kafka's order.

Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch and DescribeProducers name
partitions by topic (name or id) and index. Before one is read or written, Kafka answers, in turn:

1. UNKNOWN_TOPIC_ID: a topic id this broker does not know (there is no name to authorize);
2. TOPIC_AUTHORIZATION_FAILED: the principal may not do the request's operation on the topic, told
   before whether the topic exists;
3. UNKNOWN_TOPIC_OR_PARTITION: no such topic, or no such partition of it;
4. NOT_LEADER_OR_FOLLOWER: the partition exists but has no replica on this broker;
   KAFKA_STORAGE_ERROR: its replica here is on a log directory gone offline (a failed fsync);
5. FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH: the request's current leader epoch is older or newer
   than the partition's (KIP-320), where the API carries one;
6. NOT_LEADER_OR_FOLLOWER: the replica here is a follower, where the API needs the leader.

Steps 1-3 are KafkaApis' (``handleProduceRequest``, ``handleFetchRequest``, ...: the authorization, then
``metadataCache.contains``): :meth:`TopicGuard.find`. Steps 4-6 are ReplicaManager's
``getPartitionOrError`` and Partition's ``getLocalLog`` (``checkCurrentLeaderEpoch`` before
``requireLeader``): :meth:`TopicGuard.local`. Produce checks its acks between the two, as Kafka's
``ReplicaManager.appendRecords`` does; the others call :meth:`TopicGuard.partition`, both at once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kbroker.handlers.interfaces import HandlerNode, PartitionReplica
from kbroker.handlers.leader_hints import leader_epoch_error
from kbroker.metadata.image import TopicImage
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.wire.errors import ErrorCode


@dataclass(frozen=True)
class TopicGuard:
    """One topic of a request, looked up and authorized once for all the partitions it names."""

    broker: HandlerNode
    topic: TopicImage | None  # None when this broker knows no such topic
    error_code: int  # every partition's answer when not NONE: UNKNOWN_TOPIC_ID or TOPIC_AUTHORIZATION_FAILED

    def find(self, index: int) -> int:
        """Steps 1-3: NONE when the topic is known, authorized and has partition ``index``."""
        if self.error_code != ErrorCode.NONE:
            return self.error_code
        if self.topic is None or not 0 <= index < len(self.topic.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NONE

    def local(self, index: int, current_leader_epoch: int | None = None, *,
              require_leader: bool = True) -> tuple[PartitionReplica | None, int]:
        """Steps 4-6 for a partition :meth:`find` passed: (this broker's replica, NONE) or (None, the error).
        ``current_leader_epoch`` None or -1 asks for no epoch check; ``require_leader`` False takes a follower too."""
        state = self.topic.partitions[index]
        if self.broker.node_id not in state.replicas:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.broker.log_dir_offline is not None:  # Kafka's HostedPartition.Offline
            return None, ErrorCode.KAFKA_STORAGE_ERROR
        error_code = leader_epoch_error(state, current_leader_epoch)  # the image's epoch is the replica's
        if error_code != ErrorCode.NONE:
            return None, error_code
        if require_leader and not self.broker.leads(self.topic, index):
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return self.broker.partition(self.topic.name, index), ErrorCode.NONE

    def partition(self, index: int, current_leader_epoch: int | None = None, *,
                  require_leader: bool = True) -> tuple[PartitionReplica | None, int]:
        """Steps 1-6: (the partition to act on, NONE) or (None, Kafka's error code)."""
        error_code = self.find(index)
        if error_code != ErrorCode.NONE:
            return None, error_code
        return self.local(index, current_leader_epoch, require_leader=require_leader)


def guard_topic(broker: HandlerNode, context, operation: AclOperation, *, name: str | None = None,
                topic_id: uuid.UUID | None = None, authorized: bool | None = None) -> TopicGuard:
    """The topic a request names by ``name`` or by ``topic_id``, checked for ``operation`` on it.

    ``authorized`` is a decision the caller took from a cluster ACL (a follower's CLUSTER_ACTION), which
    Kafka takes for the whole request before it looks at any topic; None asks the topic's ACL, which needs
    the topic's name, so that an unknown topic id is told first.
    """
    image = broker.image
    topic = image.topics.get(name) if topic_id is None else image.topic_by_id(topic_id)
    if authorized is False:
        return TopicGuard(broker, topic, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if topic_id is not None and topic is None:
        return TopicGuard(broker, None, ErrorCode.UNKNOWN_TOPIC_ID)
    if authorized is None:
        authorized = allowed(broker, context, operation, ResourceType.TOPIC, topic.name if topic else name)
    return TopicGuard(broker, topic, ErrorCode.NONE if authorized else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
