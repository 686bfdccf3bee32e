"""InitProducerId (22) for idempotent producers: a cluster-unique producer id.

Ids come in blocks recorded in the metadata log (ProducerIdsRecord), so they
stay unique across restarts; an id handed out is never handed out again, even
if the block it came from was not used up. Transactional ids land with the
transactions issue.
"""

from kbroker import handlers
from kbroker.metadata import records
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

InitProducerIdResponse = API_BY_NAME["InitProducerId"].response_class

BLOCK_SIZE = 1000


class ProducerIdBlock:
    def __init__(self) -> None:
        self.next_id = 0
        self.end = 0  # exclusive

    def take(self, broker) -> int:
        if self.next_id >= self.end:
            start = broker.image.next_producer_id
            broker.commit([records.ProducerIdsRecord(broker_id=broker.settings.node_id, next_producer_id=start + BLOCK_SIZE)])
            self.next_id, self.end = start, start + BLOCK_SIZE
        self.next_id += 1
        return self.next_id - 1


@handlers.handles("InitProducerId", 0, 5)
async def handle(broker, context, request):
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    producer_id = broker.producer_ids.take(broker)
    return InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)
