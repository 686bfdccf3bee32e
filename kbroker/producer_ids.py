"""Producer ids, unique across the cluster and across restarts.

Ids come in blocks recorded in the metadata log (ProducerIdsRecord); an id
handed out is never handed out again, even if its block was not used up. A
lone broker records its blocks itself. In a quorum the active controller hands
them out (AllocateProducerIds): the broker asks for the next block in the
background once a tenth of the current one is left, and while it has none it
answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry, as Kafka's brokers do.
"""

from __future__ import annotations

from kbroker.metadata import records
from kbroker.wire.errors import ErrorCode

BLOCK_SIZE = 1000


class NoProducerIds(Exception):
    """No block in hand yet (quorum mode): the request is answered COORDINATOR_LOAD_IN_PROGRESS."""

    error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class ProducerIdBlock:
    def __init__(self) -> None:
        self.next_id = 0
        self.end = 0  # exclusive
        self.spare: tuple[int, int] | None = None  # the next block, fetched ahead (quorum mode)
        self._fetching = False

    def take(self, broker) -> int:
        if broker.forwards:
            return self._take_from_controller(broker)
        if self.next_id >= self.end:
            start = broker.image.next_producer_id
            broker.commit([records.ProducerIdsRecord(broker_id=broker.node_id, next_producer_id=start + BLOCK_SIZE)])
            self.next_id, self.end = start, start + BLOCK_SIZE
        self.next_id += 1
        return self.next_id - 1

    def available(self, broker) -> bool:
        """Whether ``take`` can answer now; if not, a block is being asked for."""
        if not broker.forwards or self.next_id < self.end or self.spare is not None:
            return True
        self._fetch_ahead(broker)
        return False

    def _take_from_controller(self, broker) -> int:
        if self.next_id >= self.end and self.spare is not None:
            (self.next_id, self.end), self.spare = self.spare, None
        if self.next_id >= self.end:
            self._fetch_ahead(broker)
            raise NoProducerIds()
        if self.end - self.next_id <= BLOCK_SIZE // 10:
            self._fetch_ahead(broker)
        self.next_id += 1
        return self.next_id - 1

    def _fetch_ahead(self, broker) -> None:
        if not self._fetching and self.spare is None:
            self._fetching = True
            broker.start_soon(self._fetch, broker)

    async def _fetch(self, broker) -> None:
        try:
            self.spare = await broker.allocate_producer_ids()  # None: refused or unanswered; asked again later
        finally:
            self._fetching = False
