"""ApiVersions (18): what this broker speaks, derived from the handler registry,
and (v3+) its feature levels (KIP-584).

The one feature clients act on here is ``transaction.version``: at level 2
the Java client (4.x) speaks transaction version 2 (KIP-890 part 2): EndTxn
v5 with an epoch bump per transaction, and no AddPartitionsToTxn or
AddOffsetsToTxn; the partition (Produce v12) and the group coordinator
(TxnOffsetCommit v5) add themselves to the transaction.
"""

from kbroker import handlers
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import EncodedBody
from kbroker.wire.schema import API_BY_NAME

ApiVersionsResponse = API_BY_NAME["ApiVersions"].response_class
TRANSACTION_VERSION = 2
_SUPPORTED = [ApiVersionsResponse.SupportedFeatureKey(name="transaction.version", min_version=0,
                                                      max_version=TRANSACTION_VERSION)]
_FINALIZED = [ApiVersionsResponse.FinalizedFeatureKey(name="transaction.version", min_version_level=TRANSACTION_VERSION,
                                                      max_version_level=TRANSACTION_VERSION)]
_FEATURES_EPOCH = 1  # fixed: a single node finalizes its features once
_API_VERSIONS_KEY = API_BY_NAME["ApiVersions"].key


# (id(registry), error code) -> (the registry, its size then, the answer); holding the registry keeps its id its own
_ANSWERS: dict[tuple[int, int], tuple[dict, int, object]] = {}


def api_versions_response(error_code: int = ErrorCode.NONE, registry: dict | None = None) -> object:
    """The answer listing every API in ``registry`` (the broker's handlers unless told); to a version it does
    not serve (UNSUPPORTED_VERSION), only ApiVersions' own range, as Kafka answers (KIP-511).

    Built once per registry and error code, and the same value returned after: nothing changes an answer
    once made (ApiVersions is exempt from the throttles the server writes into answers). Registries are
    filled as the handler modules are imported; one that grew since is answered anew."""
    registry = handlers.HANDLERS if registry is None else registry
    kept = _ANSWERS.get((id(registry), error_code))
    if kept is not None and kept[0] is registry and kept[1] == len(registry):
        return kept[2]
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=handler.min_version, max_version=handler.max_version)
        for key, handler in sorted(registry.items())
        if error_code != ErrorCode.UNSUPPORTED_VERSION or key == _API_VERSIONS_KEY
    ]
    answer = ApiVersionsResponse(error_code=error_code, api_keys=keys, supported_features=_SUPPORTED,
                                 finalized_features_epoch=_FEATURES_EPOCH, finalized_features=_FINALIZED)
    _ANSWERS[(id(registry), error_code)] = (registry, len(registry), answer)
    return answer


# (answer's id, version) -> (the answer, its bytes): the broker's answer encoded once per version
_ENCODED: dict[tuple[int, int], tuple[object, EncodedBody]] = {}


def _encoded(answer, version: int) -> EncodedBody:
    kept = _ENCODED.get((id(answer), version))
    if kept is None or kept[0] is not answer:
        kept = _ENCODED[(id(answer), version)] = (answer, EncodedBody.of(_API_VERSIONS_KEY, version, answer))
    return kept[1]


@handlers.handles("ApiVersions", 0, 5)
async def handle(broker, context, request):
    if context.session is not None:  # the connection's client, as Kafka learns it here (KIP-511)
        context.session.client_id = context.header.client_id
    return _misdirected(broker, request) or _encoded(api_versions_response(), context.api_version)


def _misdirected(broker, request):
    """v5 (KIP-1242): a client names the cluster and node it means to reach, both or neither; this node
    is not the one named -> REBOOTSTRAP_REQUIRED (the client starts again from its bootstrap servers),
    one named without the other -> INVALID_REQUEST. Either way no APIs are listed, as Kafka answers."""
    named = request.cluster_id is not None, request.node_id != -1
    if not any(named):
        return None
    if not all(named):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
    if (request.cluster_id, request.node_id) != (broker.image.cluster_id, broker.node_id):
        return ApiVersionsResponse(error_code=ErrorCode.REBOOTSTRAP_REQUIRED, api_keys=[])
    return None
