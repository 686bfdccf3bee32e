"""ShareGroupHeartbeat (76): KIP-932 share groups; joining, heartbeating and leaving are heartbeats.

The group coordinator owns the assignment (kbroker/group/share.py); the answer leaves once the records of
any change are durable. Partitions are assigned once the share coordinator has initialized their state:
the heartbeat that first subscribes to them asks for that, and a later one assigns them.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.config.group_configs import apply_group_timings
from kbroker.effects import CoordinatorError
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_group
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ShareGroupHeartbeatResponse = API_BY_NAME["ShareGroupHeartbeat"].response_class


@handlers.handles("ShareGroupHeartbeat", 1, 1)
async def handle(broker, context, request):
    from kbroker.group.share import request_error

    shell = broker.groups
    now = shell.now_ms()
    try:
        require_group(broker, context, AclOperation.READ, request.group_id)
        if (refusal := request_error(request)) is not None:  # before the group is made: a refusal changes nothing
            raise CoordinatorError(*refusal)
        group = shell.coordinator.share_group(request.group_id, request.member_epoch, now)
        apply_group_timings(group, broker.image, broker.config)
        response, effects = group.heartbeat(request, context.header.client_id or "", context.client_host,
                                            shell.topics_view(), now)
    except CoordinatorError as error:
        return ShareGroupHeartbeatResponse(error_code=error.error_code, error_message=str(error), member_epoch=-1,
                                           heartbeat_interval_ms=0)
    if not await shell.wait_applied(request.group_id, effects):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_epoch=-1,
                                           heartbeat_interval_ms=0)
    if response.error_code == ErrorCode.NONE and request.member_epoch == -1:
        broker.share_partitions.member_left(request.group_id, request.member_id)
    return response
