"""LeaveGroup (13): members leave a classic group (one by member id before v3, a batch from v3)."""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_group
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

LeaveGroupResponse = API_BY_NAME["LeaveGroup"].response_class
LeftMember = LeaveGroupResponse.MemberResponse
_BATCHED_FROM = 3  # v3+ names members in a batch, each answered (KIP-345)


@handlers.handles("LeaveGroup", 0, 5)
async def handle(broker, context, request):
    shell = broker.groups
    try:
        require_group(broker, context, AclOperation.READ, request.group_id)
        group = shell.coordinator.member_group(request.group_id, shell.now_ms())
    except CoordinatorError as error:
        if error.error_code == ErrorCode.UNKNOWN_MEMBER_ID and context.api_version >= _BATCHED_FROM:
            # No such group: as Kafka, each member named is unknown, the request itself is not refused.
            return LeaveGroupResponse(error_code=ErrorCode.NONE, members=[
                LeftMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                           error_code=ErrorCode.UNKNOWN_MEMBER_ID) for m in request.members])
        return LeaveGroupResponse(error_code=error.error_code, members=[])
    response, effects = group.leave(request, context.api_version, shell.now_ms())
    await shell.wait_applied(request.group_id, effects)
    return response
