"""SaslHandshake (17): pick the connection's SASL mechanism (kbroker/security/session.py)."""

from kbroker import handlers
from kbroker.wire.schema import API_BY_NAME

SaslHandshakeResponse = API_BY_NAME["SaslHandshake"].response_class


@handlers.handles("SaslHandshake", 0, 1)
async def handle(broker, context, request):
    session = context.session
    error_code = session.handshake(request.mechanism, context.api_version)
    return SaslHandshakeResponse(error_code=error_code, mechanisms=list(session.security.mechanisms))
