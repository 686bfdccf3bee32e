"""SaslAuthenticate (36): one step of the connection's SASL exchange (kbroker/security/session.py).

A failure is answered with SASL_AUTHENTICATION_FAILED and its reason, and the
connection closes once the answer is written. On a connection authenticated
already (and not re-authenticating) it is answered ILLEGAL_SASL_STATE, as Kafka's
KafkaApis answers it, and the connection goes on.
"""

import logging

from kbroker import handlers
from kbroker.security.scram import AuthenticationFailed
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

logger = logging.getLogger("kbroker.security")
SaslAuthenticateResponse = API_BY_NAME["SaslAuthenticate"].response_class


@handlers.handles("SaslAuthenticate", 0, 2)
async def handle(broker, context, request):
    if not context.session.exchanging:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                                        error_message="SaslAuthenticate request received after successful "
                                                      "authentication")
    try:
        token, lifetime_ms = context.session.authenticate(bytes(request.auth_bytes))
    except AuthenticationFailed as failure:
        logger.info("failed authentication from %s on %s: %s", context.client_host, context.listener, failure.detail)
        return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(failure),
                                        auth_bytes=b"")
    return SaslAuthenticateResponse(auth_bytes=token, session_lifetime_ms=lifetime_ms)
