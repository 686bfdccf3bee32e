"""SaslHandshake (17): pick the connection's SASL mechanism (kbroker/security/session.py)."""

from kbroker import handlers
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

SaslHandshakeResponse = API_BY_NAME["SaslHandshake"].response_class


@handlers.handles("SaslHandshake", 0, 1)
async def handle(broker, context, request):
    session = context.session
    error_code = session.handshake(request.mechanism, context.api_version)
    # A handshake out of turn is answered as Kafka answers any request it refuses: the error alone.
    mechanisms = [] if error_code == ErrorCode.ILLEGAL_SASL_STATE else list(session.security.mechanisms)
    return SaslHandshakeResponse(error_code=error_code, mechanisms=mechanisms)
