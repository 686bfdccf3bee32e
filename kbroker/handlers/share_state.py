"""What the five share-state APIs (InitializeShareGroupState 83 to ReadShareGroupStateSummary 87) share.

They are inter-broker requests (KIP-932): a share-partition's leader, or the group coordinator, asks the share
coordinator to initialize, read, write or delete the state it keeps in ``__share_group_state``
(kbroker/share/shell.py). As Kafka's KafkaApis, CLUSTER_ACTION on the cluster is required (brokers only), and
a refusal is answered for every share-partition named.
"""

from __future__ import annotations

from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster
from kbroker.share.shell import state_error_response
from kbroker.wire.errors import ErrorCode

_NOT_AUTHORIZED = "Cluster authorization failed."  # Kafka's message for the error


async def answer_share_state(broker, context, api_name: str, request):
    if not allowed_on_cluster(broker, context, AclOperation.CLUSTER_ACTION):
        return state_error_response(api_name, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _NOT_AUTHORIZED)
    return await broker.share_states.answer(api_name, request)
