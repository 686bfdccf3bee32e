"""ApiVersions (18): what this broker speaks, derived from the handler registry."""

from kbroker import handlers
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

ApiVersionsResponse = API_BY_NAME["ApiVersions"].response_class


def api_versions_response(error_code: int = ErrorCode.NONE) -> object:
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=handler.min_version, max_version=handler.max_version)
        for key, handler in sorted(handlers.HANDLERS.items())
    ]
    return ApiVersionsResponse(error_code=error_code, api_keys=keys)


@handlers.handles("ApiVersions", 0, 4)
async def handle(broker, context, request):
    return api_versions_response()
