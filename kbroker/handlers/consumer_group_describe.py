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
    def find(group_id: str):
        broker.groups.coordinator.check(group_id)
        group = broker.groups.coordinator.groups.get(group_id)
        if group is None or group.kind != "consumer":
            what = "not found" if group is None else "is not a consumer group"
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} {what}.")
        return group

    return ConsumerGroupDescribeResponse(groups=describe_each(broker, context, request, find, DescribedGroup))


def describe_each(broker, context, request, find, described_class) -> list:
    """ConsumerGroupDescribe's and ShareGroupDescribe's groups: each group ``find`` returns, described, or the
    error it raised (DESCRIBE on the group first), with the authorized operations when asked (KIP-430)."""
    described = []
    for group_id in request.group_ids:
        try:
            require_group(broker, context, AclOperation.DESCRIBE, group_id)
            group = find(group_id)
        except CoordinatorError as error:
            # As Kafka's getErrorDescribedGroupList: the error, every other field at its default.
            described.append(described_class(error_code=error.error_code, error_message=str(error), group_id=group_id,
                                             group_state="", group_epoch=0, assignment_epoch=0,
                                             assignor_name="", members=[]))
            continue
        described.append(group.describe(broker.groups.topics_view()))
    if request.include_authorized_operations:
        for group in described:
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = authorized_operations(broker, context, ResourceType.GROUP,
                                                                    group.group_id)
    return described
