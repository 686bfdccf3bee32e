"""ShareGroupHeartbeat (76): KIP-932 share groups; joining, heartbeating and leaving are heartbeats.

The group coordinator owns the assignment (kbroker/group/share.py); the answer leaves once the records of
any change are durable. Partitions are assigned once the share coordinator has initialized their state:
the heartbeat that first subscribes to them asks for that, and a later one assigns them.

KafkaApis refuses first, with no message: GROUP_AUTHORIZATION_FAILED, then INVALID_REQUEST for a member id
that is empty or longer than a uuid's 36 characters (KIP-1082: the client makes it up). A refusal answers
member epoch 0 and heartbeat interval 0, the response's defaults.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.config.group_configs import apply_group_timings
from kbroker.effects import CoordinatorError
from kbroker.group import client_address
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ShareGroupHeartbeatResponse = API_BY_NAME["ShareGroupHeartbeat"].response_class
MEMBER_ID_MAX_CHARS = 36  # KafkaApis.isMemberIdValid: a uuid's string


@handlers.handles("ShareGroupHeartbeat", 1, 1)
async def handle(broker, context, request):
    from kbroker.group.share import request_error

    if not allowed(broker, context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.member_id or len(request.member_id) > MEMBER_ID_MAX_CHARS:
        return _refused(ErrorCode.INVALID_REQUEST)
    shell = broker.groups
    now = shell.now_ms()
    try:
        if (refusal := request_error(request)) is not None:  # before the group is made: a refusal changes nothing
            raise CoordinatorError(*refusal)
        group = shell.coordinator.share_group(request.group_id, request.member_epoch, now)
        apply_group_timings(group, broker.image, broker.config)
        response, effects = group.heartbeat(request, context.header.client_id or "", client_address(context),
                                            shell.topics_view(), now)
    except CoordinatorError as error:
        return _refused(error.error_code, str(error))
    if not await shell.wait_applied(request.group_id, effects):
        return _refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return response


def _refused(error_code: int, message: str | None = None):
    return ShareGroupHeartbeatResponse(error_code=error_code, error_message=message, member_epoch=0,
                                       heartbeat_interval_ms=0)
