"""DeleteGroups (42): remove empty groups and their committed offsets (NON_EMPTY_GROUP otherwise).

A share group's share-partitions lose their state at the share coordinator first (Kafka 4.1+'s
GroupCoordinatorService.deleteGroups: DeleteShareGroupState through the persister), so that a group made
later under the same id starts afresh; if that fails, the group stays and answers the error.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_group
from kbroker.effects import CoordinatorError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DeleteGroupsResponse = API_BY_NAME["DeleteGroups"].response_class
Result = DeleteGroupsResponse.DeletableGroupResult


@handlers.handles("DeleteGroups", 0, 3)
async def handle(broker, context, request):
    shell = broker.groups
    results = []
    for group_id in request.groups_names:
        try:
            require_group(broker, context, AclOperation.DELETE, group_id)
            error_code = await shell.delete_share_group_state(group_id)
            if error_code != ErrorCode.NONE:
                raise CoordinatorError(error_code)
            effects = shell.coordinator.delete_group(group_id)
        except CoordinatorError as error:
            results.append(Result(group_id=group_id, error_code=error.error_code))
            continue
        written = await shell.wait_applied(group_id, effects)
        results.append(Result(group_id=group_id, error_code=ErrorCode.NONE if written else ErrorCode.COORDINATOR_NOT_AVAILABLE))
    return DeleteGroupsResponse(results=results)
