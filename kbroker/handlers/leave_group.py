"""LeaveGroup (13): members leave a classic group (one by member id before v3, a batch from v3)."""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_group
from kbroker.wire.schema import API_BY_NAME

LeaveGroupResponse = API_BY_NAME["LeaveGroup"].response_class


@handlers.handles("LeaveGroup", 0, 5)
async def handle(broker, context, request):
    shell = broker.groups
    try:
        require_group(broker, context, AclOperation.READ, request.group_id)
        group = shell.coordinator.member_group(request.group_id, shell.now_ms())
    except CoordinatorError as error:
        return LeaveGroupResponse(error_code=error.error_code, members=[])
    response, effects = group.leave(request, context.api_version, shell.now_ms())
    await shell.wait_applied(request.group_id, effects)
    return response
