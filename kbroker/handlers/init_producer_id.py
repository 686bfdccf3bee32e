"""InitProducerId (22) for idempotent producers: a cluster-unique producer id
(see kbroker.producer_ids). Transactional ids land with the transactions issue."""

from kbroker import handlers
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

InitProducerIdResponse = API_BY_NAME["InitProducerId"].response_class


@handlers.handles("InitProducerId", 0, 5)
async def handle(broker, context, request):
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    producer_id = broker.producer_ids.take(broker)
    return InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)
