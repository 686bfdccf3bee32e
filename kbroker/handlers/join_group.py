"""JoinGroup (11): a classic group member joins, or rejoins for a rebalance.

The answer waits until the rebalance completes (kbroker.group.classic); the
connection goes on serving the requests behind it meanwhile.
"""

from __future__ import annotations

from kbroker import handlers
from kbroker.effects import CoordinatorError
from kbroker.group import client_address
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import require_group
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

JoinGroupResponse = API_BY_NAME["JoinGroup"].response_class


@handlers.handles("JoinGroup", 0, 9)
async def handle(broker, context, request):
    shell = broker.groups
    try:
        require_group(broker, context, AclOperation.READ, request.group_id)
        if not request.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        # A known member id names a group that must exist; an empty one may create it.
        group = shell.coordinator.classic_group(request.group_id, shell.now_ms(), create=not request.member_id)
    except CoordinatorError as error:
        code = ErrorCode.UNKNOWN_MEMBER_ID if error.error_code == ErrorCode.GROUP_ID_NOT_FOUND else error.error_code
        return _as_kafka_sends(JoinGroupResponse(error_code=code, member_id=request.member_id, leader="", protocol_name="",
                                                 members=[]), context.api_version)
    waiter = shell.new_waiter()
    effects = group.join(waiter, request, context.api_version, context.header.client_id or "", client_address(context), shell.now_ms())
    shell.apply(request.group_id, effects)
    answer = shell.deferred(waiter)
    answered = answer.ready

    async def ready() -> None:
        await answered()
        _as_kafka_sends(answer.response, context.api_version)

    answer.ready = ready
    return answer


def _as_kafka_sends(response, api_version: int):
    """Kafka's JoinGroupResponse constructor: no protocol name is an empty string before v7
    and null from v7, where the field became nullable (KIP-559); an error answer has none."""
    if api_version >= 7 and response.protocol_name == "":
        response.protocol_name = None
    elif api_version < 7 and response.protocol_name is None:
        response.protocol_name = ""
    return response
