"""Request handlers: one module per API, each registering its key and version range.

A handler is ``async def handle(broker, request_context, request) -> response``.
ApiVersions answers from this registry, so what we advertise is exactly what
has a handler.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import import_module

from kbroker.results import mark_not_made  # noqa: F401  (for the handlers of metadata changes)
from kbroker.security.authorization import allowed_on_cluster
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME, Api


@dataclass(frozen=True)
class Handler:
    api: Api
    min_version: int
    max_version: int
    handle: object  # async (broker, RequestContext, request) -> response

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


@dataclass
class Deferred:
    """A response to send only once ``ready()`` (a coroutine function) has returned.

    The connection goes on reading and handling the requests behind it
    meanwhile, and responses still leave in request order: produce requests
    waiting for their fsync share one instead of taking turns.
    """

    response: object
    ready: object  # async () -> None


HANDLERS: dict[int, Handler] = {}


def handles(api_name: str, min_version: int, max_version: int, registry: dict[int, Handler] = HANDLERS):
    """Register the decorated coroutine function as the handler of ``api_name`` (in the broker's
    registry, or in another listener's)."""
    api = API_BY_NAME[api_name]
    if not (api.min_version <= min_version <= max_version <= api.max_version):
        raise ValueError(f"{api_name} v{min_version}-{max_version} is outside the declared v{api.versions}")

    def register(function):
        if api.key in registry:
            raise ValueError(f"{api_name} has two handlers")
        registry[api.key] = Handler(api, min_version, max_version, function)
        return function

    return register


def metadata_change(refusal, cluster_operation=None):
    """Decorate the handler of an admin request that changes metadata (CreateTopics, DeleteTopics, ...).

    With ``cluster_operation`` (an AclOperation), the principal needs it on the cluster, checked before
    anything else (``refusal(request, CLUSTER_AUTHORIZATION_FAILED)`` otherwise).

    A lone broker makes the change itself. In a quorum a broker forwards the request to the
    active controller (``owner.forwards``); a controller that is not active answers
    ``refusal(request)`` (NOT_CONTROLLER throughout) before planning anything against an image
    that may lag; the active one plans and commits under its write lock, so that two requests
    never plan against the same image (two creations of one name, say).
    """
    def decorate(function):
        async def handle(owner, context, request):
            if cluster_operation is not None and not allowed_on_cluster(owner, context, cluster_operation):
                return refusal(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            if owner.forwards:
                return await owner.forward(context, request)
            if not owner.is_active:
                return refusal(request)
            async with owner.write_lock:
                return await function(owner, context, request)

        handle.__doc__, handle.__name__ = function.__doc__, function.__name__
        return handle

    return decorate


THROTTLED = "The throttling quota has been exceeded."


def admit_mutations(broker, context, items: list, permits, strict_from: int) -> tuple[list, list]:
    """KIP-599's ``controller_mutation_rate`` for CreateTopics, CreatePartitions and DeleteTopics.

    ``items`` are the request's topics in order, ``permits(item)`` the partitions each creates or
    deletes. From version ``strict_from`` on, the topics met once the client's bucket is below zero
    are refused (to be answered THROTTLING_QUOTA_EXCEEDED) and the others recorded; older versions
    are recorded whole and only throttled. Either way the answer carries the throttle time and the
    connection is muted that long (``context.throttle_ms``). Returns (admitted, refused).
    """
    quota = getattr(broker, "mutation_quota", None)  # None on a controller: brokers meter their clients
    bucket = quota(context.principal, context.header.client_id or "") if quota is not None else None
    if bucket is None:
        return list(items), []
    now_ms = int(time.monotonic() * 1000)
    admitted, refused = [], []
    for item in items:
        if context.api_version >= strict_from and (refused or bucket.exceeded(now_ms)):
            refused.append(item)
        else:
            bucket.record(permits(item), now_ms)
            admitted.append(item)
    context.throttle_ms = max(context.throttle_ms, bucket.throttle_ms(now_ms))
    return admitted, refused


_MODULES = ("api_versions", "metadata", "create_topics", "delete_topics", "produce", "fetch", "list_offsets",
            "offset_for_leader_epoch", "init_producer_id",
            "describe_configs", "alter_configs", "incremental_alter_configs",
            "create_partitions", "elect_leaders", "alter_partition_reassignments", "delete_records", "describe_cluster", "describe_log_dirs", "describe_producers",
            "describe_topic_partitions", "get_telemetry_subscriptions", "find_coordinator",
            "join_group", "sync_group", "heartbeat", "leave_group", "offset_commit", "offset_fetch", "offset_delete",
            "list_groups", "describe_groups", "delete_groups",
            "consumer_group_heartbeat", "consumer_group_describe", "write_txn_markers", "txn_offset_commit",
            "add_partitions_to_txn", "add_offsets_to_txn", "end_txn", "describe_transactions", "list_transactions",
            "sasl_handshake", "sasl_authenticate", "describe_user_scram_credentials", "alter_user_scram_credentials",
            "describe_acls", "create_acls", "delete_acls", "describe_client_quotas", "alter_client_quotas",
            "describe_quorum")

for _module in _MODULES:
    import_module(f"kbroker.handlers.{_module}")
