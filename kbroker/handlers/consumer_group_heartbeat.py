"""ConsumerGroupHeartbeat (68): the KIP-848 protocol; joining, reconciling and leaving are heartbeats.

The broker owns the assignment (kbroker.group.consumer); the answer leaves
once the records of any change are durable.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.config.group_configs import apply_group_timings
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_group
from kbroker.effects import CoordinatorError
from kbroker.group import client_address
from kbroker.group.consumer import refusal
from kbroker.wire.errors import ErrorCode


@handlers.handles("ConsumerGroupHeartbeat", 0, 1)
async def handle(broker, context, request):
    shell = broker.groups
    now = shell.now_ms()
    try:
        require_group(broker, context, AclOperation.READ, request.group_id)
        if not request.group_id:
            raise CoordinatorError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        previous = shell.coordinator.groups.get(request.group_id)
        group, conversion = shell.coordinator.consumer_group(request.group_id, now, create=request.member_epoch == 0)
        apply_group_timings(group, broker.image, broker.config)
        response, effects = group.heartbeat(request, context.api_version, context.header.client_id or "",
                                            client_address(context), shell.topics_view(), now)
    except CoordinatorError as error:
        return refusal(error.error_code, str(error))
    if response.error_code != ErrorCode.NONE and group is not previous:
        # A refused join leaves no group behind (Kafka drops what a failed request made with it).
        shell.coordinator.restore_group(request.group_id, previous)
        return response
    if not await shell.wait_applied(request.group_id, conversion + effects):
        return refusal(ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
    return response
