"""Producer ids, unique across the cluster and across restarts.

Ids come in blocks recorded in the metadata log (ProducerIdsRecord); an id
handed out is never handed out again, even if its block was not used up.
"""

from kbroker.metadata import records

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
