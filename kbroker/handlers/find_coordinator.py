"""FindCoordinator (10): which broker coordinates a consumer group, a transactional id or a share-partition's
state.

The coordinator is the leader of the key's partition of the coordinator's topic; the first lookup creates
``__consumer_offsets`` (groups), ``__transaction_state`` (transactional ids) or ``__share_group_state``
(share-partitions, KIP-932: key type 2 from v6, keyed ``groupId:topicId:partition``, asked by brokers only,
so CLUSTER_ACTION is required, as Kafka's KafkaApis.getCoordinator does). Besides group clients, librdkafka
needs this API advertised before it will compress with lz4 (it takes FindCoordinator v0 as the sign of a
broker that understands lz4).
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.handlers.interfaces import HandlerNode
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import REFUSAL_MESSAGES, allowed, allowed_on_cluster
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

FindCoordinatorResponse = API_BY_NAME["FindCoordinator"].response_class
Coordinator = FindCoordinatorResponse.Coordinator

GROUP, TRANSACTION, SHARE = 0, 1, 2
_BATCHED_FROM = 4  # v4+ asks for many keys at once (KIP-699)
_SHARE_FROM = 6  # v6+ may ask for a share coordinator (KIP-932)


@handlers.handles("FindCoordinator", 0, 6)
async def handle(broker: HandlerNode, context, request):
    keys = request.coordinator_keys if context.api_version >= _BATCHED_FROM else [request.key]
    found = [await _find(broker, context, request.key_type, key) for key in keys]
    if context.api_version >= _BATCHED_FROM:
        return FindCoordinatorResponse(coordinators=found)
    [one] = found
    # Before v4 Kafka's answer carries Errors.message(): the error's name when there is no error.
    message = ("NONE" if one.error_code == ErrorCode.NONE else one.error_message
               or REFUSAL_MESSAGES.get(one.error_code, one.error_message))
    return FindCoordinatorResponse(error_code=one.error_code, error_message=message, node_id=one.node_id, host=one.host, port=one.port)


async def _find(broker: HandlerNode, context, key_type: int, key: str) -> Coordinator:
    if key_type not in (GROUP, TRANSACTION, SHARE):
        return _refused(key, ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}")
    if key_type == SHARE and context.api_version < _SHARE_FROM:
        return _refused(key, ErrorCode.INVALID_REQUEST, f"A share coordinator is found from v{_SHARE_FROM}")
    if key_type == GROUP and not allowed(broker, context, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return _refused(key, ErrorCode.GROUP_AUTHORIZATION_FAILED, "")
    if key_type == TRANSACTION and not allowed(broker, context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return _refused(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "")
    if key_type == SHARE and not allowed_on_cluster(broker, context, AclOperation.CLUSTER_ACTION):
        return _refused(key, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "")
    placed = key
    if key_type == SHARE:
        from kbroker.share.coordinators import normalized_coordinator_key  # the share coordinator's core: on first use

        try:
            placed = normalized_coordinator_key(key)
        except ValueError as error:
            return _refused(key, ErrorCode.INVALID_REQUEST, str(error))
    shell = (broker.groups if key_type == GROUP else broker.transactions if key_type == TRANSACTION
             else broker.share_states)
    try:  # the internal topic is created at the first lookup, as Kafka does
        await shell.ensure_topic()
    except CoordinatorError as error:
        return _refused(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error))
    node_id = shell.coordinator_node(placed)
    address = next(((host, port) for b, host, port in broker.image.live_addresses(context.listener) if b.node_id == node_id),
                   None)
    if address is None:
        return _refused(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available now")
    return Coordinator(key=key, node_id=node_id, host=address[0], port=address[1])


def _refused(key: str, code: int, message: str | None) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)
