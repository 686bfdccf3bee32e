"""Producer ids, unique across the cluster and across restarts.

Ids come in blocks recorded in the metadata log (ProducerIdsRecord); an id
handed out is never handed out again, even if its block was not used up. The
active controller hands them out (AllocateProducerIds): the broker asks for its
first block as soon as it serves, and for the next in the background once a
tenth of the current one is left; while it has none it answers
COORDINATOR_LOAD_IN_PROGRESS, which clients retry, as Kafka's brokers do.
"""

from __future__ import annotations

from kbroker.wire.errors import ErrorCode

BLOCK_SIZE = 1000


class NoProducerIds(Exception):
    """No block in hand yet: the request is answered COORDINATOR_LOAD_IN_PROGRESS."""

    error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class ProducerIdBlock:
    def __init__(self) -> None:
        self.next_id = 0
        self.end = 0  # exclusive
        self.spare: tuple[int, int] | None = None  # the next block, fetched ahead
        self._fetching = False

    def prefetch(self, broker) -> None:
        """Ask for a first block now, so that the first producer need not wait for one."""
        self._fetch_ahead(broker)

    def take(self, broker) -> int:
        if self.next_id >= self.end and self.spare is not None:
            (self.next_id, self.end), self.spare = self.spare, None
        if self.next_id >= self.end:
            self._fetch_ahead(broker)
            raise NoProducerIds()
        if self.end - self.next_id <= BLOCK_SIZE // 10:
            self._fetch_ahead(broker)
        self.next_id += 1
        return self.next_id - 1

    def available(self, broker) -> bool:
        """Whether ``take`` can answer now; if not, a block is being asked for."""
        if self.next_id < self.end or self.spare is not None:
            return True
        self._fetch_ahead(broker)
        return False

    def _fetch_ahead(self, broker) -> None:
        if not self._fetching and self.spare is None:
            self._fetching = True
            broker.start_soon(self._fetch, broker)

    async def _fetch(self, broker) -> None:
        try:
            self.spare = await broker.allocate_producer_ids()  # None: refused or unanswered; asked again later
        finally:
            self._fetching = False
