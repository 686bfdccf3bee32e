"""SyncGroup (14): the leader hands out assignments; every member receives its own.

The leader's assignments are made durable before any member is answered; a
follower that syncs first waits for them.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_group
from kbroker.wire.schema import API_BY_NAME

SyncGroupResponse = API_BY_NAME["SyncGroup"].response_class


@handlers.handles("SyncGroup", 0, 5)
async def handle(broker, context, request):
    shell = broker.groups
    try:
        require_group(broker, context, AclOperation.READ, request.group_id)
        group = shell.coordinator.member_group(request.group_id, shell.now_ms())
    except CoordinatorError as error:
        return SyncGroupResponse(error_code=error.error_code, assignment=b"")
    waiter = shell.new_waiter()
    shell.apply(request.group_id, group.sync(waiter, request, context.api_version, shell.now_ms()))
    return shell.deferred(waiter)
