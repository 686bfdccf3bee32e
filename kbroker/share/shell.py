"""The trio shell around the share coordinator (KIP-932), over ``__share_group_state``.

Storage, waiters and loading are the shared coordinator runtime (kbroker/coordinator_runtime.py); the
shards, one per partition loaded here, are kbroker/share/coordinators.py's. Here: the topic as Kafka creates
it, the records (kbroker/share/state_records.py), and the five share-state APIs (InitializeShareGroupState,
Read, Write, Delete, ReadShareGroupStateSummary) carried to the shard of the share-partition they name.

Kafka's persister sends one share-partition per request, and its ShareCoordinatorService splits a request
naming several into one call per share-partition. Here a request goes whole to the shard of its first
share-partition, which answers NOT_COORDINATOR for any other it does not keep (kbroker's SharePersister
never sends more than one).

The topic is Kafka's: ``cleanup.policy=delete`` and ``retention.ms=-1`` (never compacted: a share-partition's
updates after its snapshot have keys of their own), ``share.coordinator.state.topic.*`` settings for its
partitions, replication, min.insync.replicas and segment size. The shards keep no timers.

The core is imported at the first request or load, as the other coordinators' are: the broker starts
without it.
"""

from __future__ import annotations

from kbroker.coordinator_runtime import CoordinatorRuntime, decode_record, encode_record
from kbroker.effects import CoordinatorError
from kbroker.topics import TopicRequest
from kbroker.wire.errors import ErrorCode, error_name
from kbroker.wire.schema import API_BY_NAME

__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareCoordinatorShell", "state_error_response"]

SHARE_GROUP_STATE_TOPIC = "__share_group_state"  # kbroker/share/coordinator.py's, named here without the core

# Each API's call on the shard, the class of its response's topic results, and how Kafka's share coordinator
# (ShareCoordinatorService) begins the message of an error.
_APIS = {
    "InitializeShareGroupState": ("initialize_state", "InitializeStateResult",
                                  "Unable to initialize share group state"),
    "ReadShareGroupState": ("read_state", "ReadStateResult", "Unable to read share group state"),
    "WriteShareGroupState": ("write_state", "WriteStateResult", "Unable to write share group state"),
    "DeleteShareGroupState": ("delete_state", "DeleteStateResult", "Unable to delete share group state"),
    "ReadShareGroupStateSummary": ("read_state_summary", "ReadStateSummaryResult",
                                   "Unable to read share group state summary"),
}


def state_error_response(api_name: str, request, error_code: int, message: str | None = None):
    """``api_name``'s response giving ``error_code`` and ``message`` for every share-partition of ``request``
    (Kafka's toGlobalErrorResponse); by default the message of Kafka's share coordinator ("Unable to read
    share group state: ...") with the error's name."""
    response_class = API_BY_NAME[api_name].response_class
    _, result_name, unable = _APIS[api_name]
    topic_result = getattr(response_class, result_name)
    if message is None:
        message = f"{unable}: {error_name(error_code)}"
    return response_class(results=[
        topic_result(topic_id=topic.topic_id, partitions=[
            topic_result.PartitionResult(partition=data.partition, error_code=error_code, error_message=message)
            for data in topic.partitions])
        for topic in request.topics])


def share_coordinator_config(config, partition_count: int):
    """The core's settings from the broker's (Kafka's names), for a topic of ``partition_count`` partitions."""
    from kbroker.share.coordinator import ShareCoordinatorConfig

    return ShareCoordinatorConfig(
        state_topic_partition_count=partition_count,
        updates_per_snapshot=config.share_coordinator_snapshot_update_records_per_snapshot)


class ShareCoordinatorShell(CoordinatorRuntime):
    topic = SHARE_GROUP_STATE_TOPIC

    def make_coordinator(self):
        """The shards' router, placing keys by the topic's partition count once it exists (as Kafka's
        ShareCoordinatorService.startup takes it from the metadata), else by the setting."""
        from kbroker.share.coordinators import ShareCoordinators

        broker = self.broker
        topic = broker.image.topics.get(SHARE_GROUP_STATE_TOPIC)
        partition_count = (len(topic.partitions) if topic is not None
                           else broker.config.share_coordinator_state_topic_num_partitions)
        return ShareCoordinators(share_coordinator_config(broker.config, partition_count), self._partition_count)

    def _partition_count(self, topic_id) -> int | None:
        topic = self.broker.image.topic_by_id(topic_id)
        return None if topic is None else len(topic.partitions)

    def topic_request(self) -> TopicRequest:
        config = self.broker.config
        return TopicRequest(SHARE_GROUP_STATE_TOPIC, config.share_coordinator_state_topic_num_partitions,
                            config.share_coordinator_state_topic_replication_factor, {},
                            {"cleanup.policy": "delete", "compression.type": "producer", "retention.ms": "-1",
                             "segment.bytes": str(config.share_coordinator_state_topic_segment_bytes),
                             "min.insync.replicas": str(config.share_coordinator_state_topic_min_isr)})

    def encode(self, key, value) -> tuple[bytes, bytes | None]:
        from kbroker.share import state_records

        return encode_record(state_records, key, value)

    def replay(self, partition: int, record, producer_id: int | None) -> None:
        from kbroker.share import state_records

        decoded = decode_record(state_records, SHARE_GROUP_STATE_TOPIC, partition, record)
        if decoded is not None:
            self.coordinator.replay(partition, *decoded)

    def changed(self, key: str, effects: list) -> None:
        """The shards keep no timers."""

    def timer_work(self, now_ms: int) -> list[tuple[str, list]]:
        return []

    # -- the share-state APIs ---------------------------------------------------------------------------------

    async def answer(self, api_name: str, request):
        """A handler's answer to ``request``: the response, or a Deferred one filled in once its records
        (and the writes before them) are durable."""
        refused, key, shard_call = await self._route(api_name, request)
        if refused is not None:
            return refused
        waiter = self.new_waiter()
        _, effects = shard_call(waiter, request, self.now_ms())
        self.apply(key, effects)
        return self.deferred(waiter)

    async def wait_answer(self, api_name: str, request):
        """The response to ``request`` once its records are durable, for a caller in this process (the
        share persister, when this broker coordinates the share-partition). Cancelling the wait leaves
        the writes to finish in the background."""
        refused, key, shard_call = await self._route(api_name, request)
        if refused is not None:
            return refused
        response, effects = shard_call(None, request, self.now_ms())
        await self.wait_applied(key, effects)  # a failed write has set its results' errors
        return response

    async def _route(self, api_name: str, request) -> tuple:
        """(None, coordinator key, the shard's call for the API) of the request's first share-partition, or
        (the response, None, None) when no shard answers it: an empty response to a request naming no
        share-partition (Kafka's), or the error for each when the topic cannot be created or no shard
        here serves the first. Creates the topic on first need."""
        from kbroker.share.coordinator import coordinator_key

        if not request.topics or not request.topics[0].partitions:
            return API_BY_NAME[api_name].response_class(), None, None
        try:
            await self.ensure_topic()
        except CoordinatorError as error:  # the requester finds the coordinator again, or retries
            return state_error_response(api_name, request, ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)), None, None
        topic = request.topics[0]
        key = coordinator_key(request.group_id, topic.topic_id, topic.partitions[0].partition)
        try:
            shard = self.coordinator.check(key)
        except CoordinatorError as error:
            return state_error_response(api_name, request, error.error_code), None, None
        return None, key, getattr(shard, _APIS[api_name][0])
