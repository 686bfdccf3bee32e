"""How partition leaders and the group coordinator reach the share coordinator (KIP-932): Kafka's
DefaultStatePersister.

Each share-partition's state lives in one partition of ``__share_group_state`` (its coordinator key,
``group:topic:partition``, placed as kbroker/share/coordinator.py's ``state_partition`` says), and the
leader of that partition coordinates it. :class:`SharePersister` sends one request per share-partition to
that broker: straight to the share coordinator's shell when it is this broker (kbroker/share/shell.py, no
socket), else the share-state API over the inter-broker listener (kbroker/peers.py). A share-partition
named with others is asked for concurrently with them, a bounded number at a time.

Where the coordinator is not found, is loading, has moved (NOT_COORDINATOR), or cannot be reached, the
request is sent again after a short backoff that doubles, until ``_DEADLINE_S`` after the first try; then
the last error is the answer. Kafka's persister looks the coordinator up with FindCoordinator; the metadata
image here already names every partition's leader, so it is read instead (and the topic is created on first
need, as the lookup creates it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import trio

from kbroker.effects import CoordinatorError
from kbroker.share.persisted import UNINITIALIZED_START_OFFSET, PersistedState, StateBatch
from kbroker.share.shell import state_error_response
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

__all__ = ["SharePersister"]

_DEADLINE_S = 10.0  # how long one share-partition's request is tried
_BACKOFF_S = 0.05  # the first wait before trying again; it doubles ...
_BACKOFF_MAX_S = 1.0  # ... up to this
_CONCURRENT_MAX = 32  # share-partitions of one call asked at once
# The version each share-state API is sent at: v0, which every kbroker serves, but for the summary's v1, whose
# delivery complete count (KIP-1226) DescribeShareGroupOffsets' lag needs.
_VERSIONS = {"ReadShareGroupStateSummary": 1}
_RETRIED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})

# Each API's request class and the name of its class of topic data.
_REQUESTS = {name: (API_BY_NAME[name].request_class, topic_data) for name, topic_data in (
    ("InitializeShareGroupState", "InitializeStateData"), ("ReadShareGroupState", "ReadStateData"),
    ("WriteShareGroupState", "WriteStateData"), ("DeleteShareGroupState", "DeleteStateData"),
    ("ReadShareGroupStateSummary", "ReadStateSummaryData"))}
_WrittenBatch = API_BY_NAME["WriteShareGroupState"].request_class.WriteStateData.PartitionData.StateBatch


class SharePersister:
    """Kafka's DefaultStatePersister, for the share-partition leaders and the group coordinator of ``broker``."""

    def __init__(self, broker) -> None:
        self.broker = broker

    async def initialize(self, group_id: str, state_epoch: int,
                         partitions: Mapping[uuid.UUID, Iterable[int]]) -> dict[tuple[uuid.UUID, int], int]:
        """InitializeShareGroupState: start each share-partition's state at ``state_epoch``, its start offset
        not known yet (-1). An error code per (topic id, partition)."""
        results = await self._each("InitializeShareGroupState", group_id, partitions, lambda partition: {
            "partition": partition, "state_epoch": state_epoch, "start_offset": UNINITIALIZED_START_OFFSET})
        return {key: result.error_code for key, result in results.items()}

    async def initialize_at(self, group_id: str, state_epoch: int,
                            start_offsets: Mapping[uuid.UUID, Mapping[int, int]]) -> dict[tuple[uuid.UUID, int],
                                                                                         tuple[int, str | None]]:
        """InitializeShareGroupState at the given start offsets (AlterShareGroupOffsets): (error code, error
        message) per (topic id, partition)."""
        results: dict[tuple[uuid.UUID, int], tuple[int, str | None]] = {}
        for topic_id, offsets in start_offsets.items():
            answered = await self._each("InitializeShareGroupState", group_id, {topic_id: offsets},
                                        lambda partition, offsets=offsets: {
                                            "partition": partition, "state_epoch": state_epoch,
                                            "start_offset": offsets[partition]})
            results.update({key: (result.error_code, result.error_message) for key, result in answered.items()})
        return results

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> tuple[int, PersistedState | None]:
        """ReadShareGroupState as the leader of ``leader_epoch``, which the coordinator records (fencing older
        leaders' writes): the error code, and the state (None after an error)."""
        result = await self._send("ReadShareGroupState", _request(
            "ReadShareGroupState", group_id, topic_id, {"partition": partition, "leader_epoch": leader_epoch}))
        if result.error_code != ErrorCode.NONE:
            return result.error_code, None
        batches = tuple(StateBatch(batch.first_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)
                        for batch in result.state_batches)
        return ErrorCode.NONE, PersistedState(result.state_epoch, result.start_offset, batches, leader_epoch)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int,
                    state: PersistedState) -> int:
        """WriteShareGroupState: have ``state`` kept, as the leader of ``leader_epoch``. The error code."""
        result = await self._send("WriteShareGroupState", _request("WriteShareGroupState", group_id, topic_id, {
            "partition": partition, "state_epoch": state.state_epoch, "leader_epoch": leader_epoch,
            "start_offset": state.start_offset,
            "state_batches": [_WrittenBatch(first_offset=batch.first_offset, last_offset=batch.last_offset,
                                            delivery_state=batch.delivery_state, delivery_count=batch.delivery_count)
                              for batch in state.state_batches]}))
        return result.error_code

    async def delete(self, group_id: str,
                     partitions: Mapping[uuid.UUID, Iterable[int]]) -> dict[tuple[uuid.UUID, int], int]:
        """DeleteShareGroupState: an error code per (topic id, partition)."""
        results = await self._each("DeleteShareGroupState", group_id, partitions,
                                   lambda partition: {"partition": partition})
        return {key: result.error_code for key, result in results.items()}

    async def read_summary(self, group_id: str, partitions: Mapping[uuid.UUID, Iterable[int]],
                           leader_epoch: int = -1) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
        """ReadShareGroupStateSummary: (error code, start offset) per (topic id, partition); the start offset
        is -1 for a share-partition with no state."""
        results = await self._each("ReadShareGroupStateSummary", group_id, partitions,
                                   lambda partition: {"partition": partition, "leader_epoch": leader_epoch})
        return {key: (result.error_code, result.start_offset) for key, result in results.items()}

    async def summaries(self, group_id: str, partitions: Mapping[uuid.UUID, Iterable[int]]) -> dict[
            tuple[uuid.UUID, int], object]:
        """ReadShareGroupStateSummary v1's partition result per (topic id, partition): error code, start offset,
        leader epoch and delivery complete count (DescribeShareGroupOffsets)."""
        return await self._each("ReadShareGroupStateSummary", group_id, partitions,
                                lambda partition: {"partition": partition, "leader_epoch": -1})

    # -- sending ----------------------------------------------------------------------------------------------

    async def _each(self, api_name: str, group_id: str, partitions: Mapping[uuid.UUID, Iterable[int]],
                    partition_data) -> dict[tuple[uuid.UUID, int], object]:
        """The partition result of a request for each share-partition, whose PartitionData's fields are
        ``partition_data(partition)``; ``_CONCURRENT_MAX`` requests at a time."""
        results: dict[tuple[uuid.UUID, int], object] = {}
        limiter = trio.CapacityLimiter(_CONCURRENT_MAX)

        async def one(topic_id: uuid.UUID, partition: int) -> None:
            async with limiter:
                results[(topic_id, partition)] = await self._send(
                    api_name, _request(api_name, group_id, topic_id, partition_data(partition)))

        async with trio.open_nursery() as nursery:
            for topic_id, indexes in partitions.items():
                for partition in indexes:
                    nursery.start_soon(one, topic_id, partition)
        return results

    async def _send(self, api_name: str, request):
        """The partition result of ``request`` (naming one share-partition), sent again while its coordinator
        is not found, loading, moved or unreachable, until ``_DEADLINE_S`` after the first try."""
        from kbroker.share.coordinator import coordinator_key  # the core, on first use

        topic = request.topics[0]
        key = coordinator_key(request.group_id, topic.topic_id, topic.partitions[0].partition)
        deadline = trio.current_time() + _DEADLINE_S
        backoff_s = _BACKOFF_S
        while True:
            result = await self._send_once(api_name, key, request, deadline)
            if result.error_code not in _RETRIED or trio.current_time() + backoff_s >= deadline:
                return result
            await trio.sleep(backoff_s)
            backoff_s = min(2 * backoff_s, _BACKOFF_MAX_S)

    async def _send_once(self, api_name: str, key: str, request, deadline: float):
        """One try: to this broker's shell if it coordinates ``key`` (the topic created first if need be),
        else to the broker that does; COORDINATOR_NOT_AVAILABLE if none can be asked by the deadline."""
        broker = self.broker
        shell = broker.share_states
        with trio.move_on_at(deadline):
            try:
                await shell.ensure_topic()
            except CoordinatorError:
                return _failed(api_name, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            coordinator = shell.coordinator_node(key)
            if coordinator == broker.node_id:
                return _result_of(api_name, request, await shell.wait_answer(api_name, request))
            address = broker.image.peer_address(coordinator)
            if address is not None:
                try:
                    response = await broker.peers.call(
                        address, api_name, _VERSIONS.get(api_name, 0), request, client_id=f"share-persister-{broker.node_id}",
                        timeout_s=max(0.0, deadline - trio.current_time()))
                except OSError:  # unreachable: tried again
                    return _failed(api_name, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                return _result_of(api_name, request, response)
        return _failed(api_name, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)


def _request(api_name: str, group_id: str, topic_id: uuid.UUID, partition_data: dict):
    """``api_name``'s request naming one share-partition, whose PartitionData's fields are ``partition_data``."""
    request_class, topic_data_name = _REQUESTS[api_name]
    topic_data = getattr(request_class, topic_data_name)
    return request_class(group_id=group_id, topics=[
        topic_data(topic_id=topic_id, partitions=[topic_data.PartitionData(**partition_data)])])


def _result_of(api_name: str, request, response):
    """The result of the request's one share-partition in ``response``; INVALID_REQUEST when the coordinator
    answered none, as it does a request it finds malformed (an empty group id)."""
    topic = request.topics[0]
    partition = topic.partitions[0].partition
    for topic_result in response.results:
        if topic_result.topic_id == topic.topic_id:
            for result in topic_result.partitions:
                if result.partition == partition:
                    return result
    return _failed(api_name, request, ErrorCode.INVALID_REQUEST)


def _failed(api_name: str, request, error_code: int):
    """A result of the request's one share-partition giving ``error_code``."""
    return state_error_response(api_name, request, error_code).results[0].partitions[0]
