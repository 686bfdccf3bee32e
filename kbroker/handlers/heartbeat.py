"""Heartbeat (12): a classic group member is alive; REBALANCE_IN_PROGRESS asks it to rejoin."""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_group
from kbroker.wire.schema import API_BY_NAME

HeartbeatResponse = API_BY_NAME["Heartbeat"].response_class


@handlers.handles("Heartbeat", 0, 4)
async def handle(broker, context, request):
    shell = broker.groups
    try:
        require_group(broker, context, AclOperation.READ, request.group_id)
        group = shell.coordinator.member_group(request.group_id, shell.now_ms())
    except CoordinatorError as error:
        return HeartbeatResponse(error_code=error.error_code)
    error_code = group.heartbeat(request, context.api_version, shell.now_ms())
    shell.apply(request.group_id, [])  # the session deadline moved
    return HeartbeatResponse(error_code=error_code)
