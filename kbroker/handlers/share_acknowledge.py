"""ShareAcknowledge (79): a share consumer acknowledges records without fetching (KIP-932).

READ on the group, then the member's share session (an acknowledgement never opens one: epoch 0 is
INVALID_SHARE_SESSION_EPOCH; -1 closes it once these acknowledgements are applied), then each named
partition as ShareFetch checks it. Each partition is answered once its write is settled.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.handlers.share_common import (NO_LEADER_HINT, Acknowledged, acknowledge_all,
                                           acknowledgement_batches, find_share_partitions, share_response)
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ShareAcknowledgeResponse = API_BY_NAME["ShareAcknowledge"].response_class
TopicResponse = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
PartitionData = TopicResponse.PartitionData


@handlers.handles("ShareAcknowledge", 1, 2)
async def handle(broker, context, request):
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not allowed(broker, context, AclOperation.READ, ResourceType.GROUP, group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    manager = broker.share_partitions
    session = manager.sessions.acknowledge(group_id, member_id, request.share_session_epoch)
    if session.error_code != ErrorCode.NONE:
        return _refused(session.error_code)
    acknowledgements = {(topic.topic_id, partition.partition_index): acknowledgement_batches(partition)
                        for topic in request.topics for partition in topic.partitions}
    found = await find_share_partitions(broker, context, group_id, acknowledgements)
    acknowledged = await acknowledge_all(broker, group_id, member_id, found, acknowledgements)
    if session.final:
        manager.session_closed(session.closed)
    by_topic: dict = {}
    for key, named in found.partitions.items():
        acknowledge = acknowledged.get(key, Acknowledged(named.error_code))
        by_topic.setdefault(named.topic_id, []).append(PartitionData(
            partition_index=named.index, error_code=acknowledge.error_code, error_message=acknowledge.error_message,
            current_leader=PartitionData.LeaderIdAndEpoch(*(named.leader or NO_LEADER_HINT))))
    return share_response(broker, context, ShareAcknowledgeResponse, TopicResponse, group_id, by_topic, found)


def _refused(error_code: int):
    """A top-level refusal: Kafka's ShareAcknowledgeRequest.getErrorResponse, whose error has no message."""
    return ShareAcknowledgeResponse(error_code=error_code, acquisition_lock_timeout_ms=0, responses=[])
