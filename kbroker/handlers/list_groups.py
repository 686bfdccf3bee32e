"""ListGroups (16): the groups this broker coordinates, filtered by state (v4+) and type (v5+).

Filters match case-insensitively, as Kafka's do.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed, allowed_on_cluster
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ListGroupsResponse = API_BY_NAME["ListGroups"].response_class
ListedGroup = ListGroupsResponse.ListedGroup


@handlers.handles("ListGroups", 0, 5)
async def handle(broker, context, request):
    coordinator = broker.groups.coordinator
    states = {state.lower() for state in (request.states_filter or [])}
    types = {kind.lower() for kind in (request.types_filter or [])}
    listed = []
    # DESCRIBE on the cluster lists every group; without it, those the principal may describe (as Kafka).
    everything = allowed_on_cluster(broker, context, AclOperation.DESCRIBE)
    for group_id, group in coordinator.listed():
        if not everything and not allowed(broker, context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            continue
        kind = group.kind
        state = group.state.value
        if (states and state.lower() not in states) or (types and kind not in types):
            continue
        protocol_type = (group.protocol_type or "") if kind == "classic" else kind  # "consumer" or "share"
        listed.append(ListedGroup(group_id=group_id, protocol_type=protocol_type, group_state=state, group_type=kind))
    return ListGroupsResponse(error_code=ErrorCode.NONE, groups=listed)
