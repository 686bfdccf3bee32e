"""What the handlers of metadata changes share: forwarding to the active controller, the write lock
and cluster authorization (``metadata_change``), and KIP-599's mutation quota (``admit_mutations``)."""

from __future__ import annotations

from kbroker.controller.channel import ControllerUnavailable
from kbroker.security.authorization import allowed_on_cluster
from kbroker.wire.errors import ErrorCode


def metadata_change(refusal, cluster_operation=None):
    """Decorate the handler of an admin request that changes metadata (CreateTopics, DeleteTopics, ...).

    With ``cluster_operation`` (an AclOperation), the principal needs it on the cluster, checked before
    anything else (``refusal(request, CLUSTER_AUTHORIZATION_FAILED)`` otherwise).

    ``refusal(request, code)`` answers every item of the request with ``code``, NOT_CONTROLLER by default.

    A lone broker makes the change itself. In a quorum a broker forwards the request to the
    active controller (``owner.forwards``), and answers REQUEST_TIMED_OUT when none answered in
    controller.socket.timeout.ms; a controller that is not active answers
    ``refusal(request)`` (NOT_CONTROLLER throughout) before planning anything against an image
    that may lag; the active one plans and commits under its write lock, so that two requests
    never plan against the same image (two creations of one name, say).
    """
    def decorate(function):
        async def handle(owner, context, request):
            if cluster_operation is not None and not allowed_on_cluster(owner, context, cluster_operation):
                return refusal(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            if owner.forwards:
                return await _forwarded(owner, context, request, refusal)
            if not owner.is_active:
                return refusal(request)
            async with owner.write_lock:
                return await function(owner, context, request)

        handle.__doc__, handle.__name__ = function.__doc__, function.__name__
        return handle

    return decorate


async def _forwarded(broker, context, request, refusal):
    try:
        return await broker.forward(context, request)
    except ControllerUnavailable:  # as Kafka's ForwardingManager answers a forward that timed out
        return refusal(request, ErrorCode.REQUEST_TIMED_OUT)


THROTTLED = "The throttling quota has been exceeded."


def admit_mutations(broker, context, items: list, permits, strict_from: int) -> tuple[list, list]:
    """KIP-599's ``controller_mutation_rate`` for CreateTopics, CreatePartitions and DeleteTopics.

    ``items`` are the request's topics in order, ``permits(item)`` the partitions each creates or
    deletes. From version ``strict_from`` on, the topics met once the client's bucket is below zero
    are refused (to be answered THROTTLING_QUOTA_EXCEEDED) and the others recorded; older versions
    are recorded whole and only throttled. Either way the answer carries the throttle time and the
    connection is muted that long (``context.throttle_ms``). Returns (admitted, refused).
    """
    quotas = broker.quotas  # None on a controller: brokers meter their clients
    bucket = quotas.mutation_quota(context.principal, context.header.client_id or "") if quotas is not None else None
    if bucket is None:
        return list(items), []
    now_ms = quotas.clock.monotonic_ms()
    admitted, refused = [], []
    for item in items:
        if context.api_version >= strict_from and (refused or bucket.exceeded(now_ms)):
            refused.append(item)
        else:
            bucket.record(permits(item), now_ms)
            admitted.append(item)
    context.throttle_ms = max(context.throttle_ms, bucket.throttle_ms(now_ms))
    return admitted, refused
