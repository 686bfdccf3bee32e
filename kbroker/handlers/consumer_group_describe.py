"""ConsumerGroupDescribe (69): KIP-848 groups' epochs, members, and their current and target assignments."""

from __future__ import annotations

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import authorized_operations, require_group
from kbroker.effects import CoordinatorError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ConsumerGroupDescribeResponse = API_BY_NAME["ConsumerGroupDescribe"].response_class
DescribedGroup = ConsumerGroupDescribeResponse.DescribedGroup


@handlers.handles("ConsumerGroupDescribe", 0, 1)
async def handle(broker, context, request):
    shell = broker.groups
    described = []
    for group_id in request.group_ids:
        try:
            require_group(broker, context, AclOperation.DESCRIBE, group_id)
            shell.coordinator.check(group_id)
            group = shell.coordinator.groups.get(group_id)
            if group is None or group.kind != "consumer":
                what = "not found" if group is None else "is not a consumer group"
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} {what}.")
        except CoordinatorError as error:
            described.append(DescribedGroup(error_code=error.error_code, error_message=str(error), group_id=group_id,
                                            group_state="Dead", group_epoch=-1, assignment_epoch=-1, assignor_name="",
                                            members=[]))
            continue
        described.append(group.describe(shell.topics_view()))
    if request.include_authorized_operations:  # KIP-430
        for group in described:
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = authorized_operations(broker, context, ResourceType.GROUP,
                                                                    group.group_id)
    return ConsumerGroupDescribeResponse(groups=described)
