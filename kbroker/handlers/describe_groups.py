"""DescribeGroups (15): classic groups' state, protocol and members.

An unknown group is described as Dead; from v6 it is GROUP_ID_NOT_FOUND, as
is a consumer (KIP-848) group, which ConsumerGroupDescribe describes.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import authorized_operations, require_group
from kbroker.effects import CoordinatorError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeGroupsResponse = API_BY_NAME["DescribeGroups"].response_class
DescribedGroup = DescribeGroupsResponse.DescribedGroup
_NOT_FOUND_FROM = 6


@handlers.handles("DescribeGroups", 0, 6)
async def handle(broker, context, request):
    coordinator = broker.groups.coordinator
    described = []
    for group_id in request.groups:
        try:
            require_group(broker, context, AclOperation.DESCRIBE, group_id)
            coordinator.check(group_id)
        except CoordinatorError as error:
            described.append(_empty(group_id, error.error_code, "Dead"))
            continue
        group = coordinator.groups.get(group_id)
        if group is not None and group.kind == "classic":
            described.append(group.describe())
        elif context.api_version >= _NOT_FOUND_FROM:
            message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a classic group."
            described.append(_empty(group_id, ErrorCode.GROUP_ID_NOT_FOUND, "Dead", message))
        else:
            described.append(_empty(group_id, ErrorCode.NONE, "Dead"))
    if getattr(request, "include_authorized_operations", False):  # KIP-430
        for group in described:
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = authorized_operations(broker, context, ResourceType.GROUP,
                                                                    group.group_id)
    return DescribeGroupsResponse(groups=described)


def _empty(group_id: str, error_code: int, state: str, message: str | None = None):
    return DescribedGroup(error_code=error_code, error_message=message, group_id=group_id, group_state=state,
                          protocol_type="", protocol_data="", members=[])
