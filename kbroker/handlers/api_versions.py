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
from kbroker.wire.schema import API_BY_NAME

ApiVersionsResponse = API_BY_NAME["ApiVersions"].response_class
TRANSACTION_VERSION = 2
_SUPPORTED = [ApiVersionsResponse.SupportedFeatureKey(name="transaction.version", min_version=0,
                                                      max_version=TRANSACTION_VERSION)]
_FINALIZED = [ApiVersionsResponse.FinalizedFeatureKey(name="transaction.version", min_version_level=TRANSACTION_VERSION,
                                                      max_version_level=TRANSACTION_VERSION)]
_FEATURES_EPOCH = 1  # fixed: a single node finalizes its features once
_API_VERSIONS_KEY = API_BY_NAME["ApiVersions"].key


def api_versions_response(error_code: int = ErrorCode.NONE, registry: dict | None = None) -> object:
    """The answer listing every API in ``registry`` (the broker's handlers unless told); to a version it does
    not serve (UNSUPPORTED_VERSION), only ApiVersions' own range, as Kafka answers (KIP-511)."""
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=handler.min_version, max_version=handler.max_version)
        for key, handler in sorted((handlers.HANDLERS if registry is None else registry).items())
        if error_code != ErrorCode.UNSUPPORTED_VERSION or key == _API_VERSIONS_KEY
    ]
    return ApiVersionsResponse(error_code=error_code, api_keys=keys, supported_features=_SUPPORTED,
                               finalized_features_epoch=_FEATURES_EPOCH, finalized_features=_FINALIZED)


@handlers.handles("ApiVersions", 0, 4)
async def handle(broker, context, request):
    return api_versions_response()
