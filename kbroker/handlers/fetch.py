"""Fetch (1): file regions straight from the segments, long-polled on new data.

Each partition's data is a region of a segment file sent with ``os.sendfile``;
nothing is copied through Python. Reads stop at the high watermark (or the
last stable offset for read_committed). When less than ``min_bytes`` is
ready the request waits, up to ``max_wait_ms``, for any of its partitions'
high watermarks to move. Fetch sessions (KIP-227) are not granted: every
answer is sessionless (session id 0), which clients accept by sending full
requests.
"""

from __future__ import annotations

import logging
import time

import trio

from kbroker import handlers
from kbroker.handlers.interfaces import HandlerNode
from kbroker.handlers.leader_hints import hint_leader, node_endpoints
from kbroker.handlers.partition_guard import guard_topic
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster
from kbroker.security.quotas import CONSUMER_BYTE_RATE
from kbroker.log.descriptor_cache import out_of_descriptors
from kbroker.log.partition_log import OffsetOutOfRange
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.records import count_records
from kbroker.wire.schema import API_BY_NAME

FetchResponse = API_BY_NAME["Fetch"].response_class
TopicResult = FetchResponse.FetchableTopicResponse
PartitionResult = TopicResult.PartitionData
AbortedTransaction = PartitionResult.AbortedTransaction

logger = logging.getLogger("kbroker.handlers.fetch")

READ_COMMITTED = 1
_HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH)


@handlers.handles("Fetch", 4, 17)
async def handle(broker: HandlerNode, context, request):
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
    while True:
        response, ready_bytes, partitions = _read(broker, request, context)
        remaining = deadline - time.monotonic()
        if ready_bytes >= request.min_bytes or remaining <= 0 or not partitions:
            return _answered(broker, context, request, response, ready_bytes)
        await wait_for_any(partitions, remaining)
        if time.monotonic() >= deadline:
            response, ready_bytes, _ = _read(broker, request, context)
            return _answered(broker, context, request, response, ready_bytes)


def _answered(broker: HandlerNode, context, request, response, fetched_bytes: int):
    """A consumer's fetched bytes count against its consumer_byte_rate quota (followers have none)
    and, when the broker keeps metrics, in its bytes and records out."""
    if _replica_of(request) < 0:
        response.throttle_time_ms = context.throttle(CONSUMER_BYTE_RATE, fetched_bytes)
        if broker.metrics is not None:
            for topic in response.responses:
                name = topic.topic or broker.image.topic_names.get(topic.topic_id, "")
                for partition in topic.partitions:
                    records = partition.records  # bytes, or a file region of which only batch headers are read
                    if isinstance(records, bytes):
                        broker.metrics.fetched(name, len(records), count_records(records))
                    else:
                        broker.metrics.fetched(name, records.length, records.record_count())
    return response


def _replica_of(request) -> int:
    """The broker id of a follower's fetch (v15+ carries it in replica_state); -1 for a consumer."""
    state = getattr(request, "replica_state", None)
    if state is not None and state.replica_id >= 0:
        return state.replica_id
    return request.replica_id if request.replica_id is not None else -1


def _read(broker: HandlerNode, request, context):
    """The response as of now, the bytes it carries and the events it could wait on."""
    version = context.api_version
    replica = _replica_of(request)
    leaders: set[int] = set()  # of partitions this broker does not lead (KIP-951)
    total = 0
    waitable = []
    topics = []
    replica_allowed = replica < 0 or allowed_on_cluster(broker, context, AclOperation.CLUSTER_ACTION)
    for fetch_topic in request.topics:
        guard = guard_topic(broker, context, AclOperation.READ, name=fetch_topic.topic if version < 13 else None,
                            topic_id=fetch_topic.topic_id if version >= 13 else None,
                            authorized=replica_allowed if replica >= 0 else None)
        topic = guard.topic
        results = []
        for wanted in fetch_topic.partitions:
            result = PartitionResult(partition_index=wanted.partition, records=b"")
            results.append(result)
            partition, result.error_code = guard.partition(wanted.partition, wanted.current_leader_epoch)
            if result.error_code in _HINTED:
                hint_leader(topic, wanted.partition, result, leaders)
            if partition is None:
                continue
            if replica >= 0 and _diverged(partition, wanted, result):
                continue
            if replica >= 0:
                partition.follower_fetched(replica, wanted.fetch_offset)
                if replica not in partition.isr and wanted.fetch_offset >= partition.high_watermark and broker.isr:
                    broker.isr.wake.set()  # caught up: back into the ISR
            total += _read_partition(partition, wanted, request, result, max(0, request.max_bytes - total),
                                     first=total == 0, to_log_end=replica >= 0)
            waitable.append(partition.appended() if replica >= 0 else partition.advanced())
        topics.append(TopicResult(topic=fetch_topic.topic, topic_id=topic.topic_id if topic else fetch_topic.topic_id or ZERO_UUID, partitions=results))
    response = FetchResponse(responses=topics)
    if leaders:
        response.node_endpoints = node_endpoints(broker.image, leaders, FetchResponse, context.listener)
    return response, total, waitable


def _diverged(partition, wanted, result) -> bool:
    """A follower whose last epoch ends earlier here than its log does: tell it where to truncate."""
    log = partition.log
    if wanted.last_fetched_epoch is None or wanted.last_fetched_epoch < 0 or log.leader_epochs is None:
        return False
    epoch, end_offset = log.leader_epochs.end_offset_for(wanted.last_fetched_epoch, log.log_end_offset)
    if epoch < 0:  # an epoch this log never saw, or none at all: the follower keeps no more than this log holds
        epoch, end_offset = wanted.last_fetched_epoch, log.log_end_offset
    if epoch == wanted.last_fetched_epoch and end_offset >= wanted.fetch_offset:
        return False
    result.diverging_epoch = PartitionResult.EpochEndOffset(epoch=epoch, end_offset=min(end_offset, wanted.fetch_offset))
    result.high_watermark = partition.high_watermark
    result.log_start_offset = log.log_start_offset
    return True


def _read_partition(partition, wanted, request, result, budget: int, first: bool, to_log_end: bool = False) -> int:
    log = partition.log
    high_watermark = partition.high_watermark
    upper_bound = partition.last_stable_offset if request.isolation_level == READ_COMMITTED else high_watermark
    if to_log_end:  # a follower copies everything; it learns what is committed from the high watermark
        upper_bound = None
    result.high_watermark = high_watermark
    result.last_stable_offset = partition.last_stable_offset
    result.log_start_offset = log.log_start_offset
    result.records = b""
    if budget <= 0 and not first:
        return 0
    try:
        region = log.read(wanted.fetch_offset, min(budget, wanted.partition_max_bytes), upper_bound, min_one_batch=first)
        if region is not None and request.isolation_level == READ_COMMITTED:
            aborted = log.collect_aborted_transactions(wanted.fetch_offset, upper_bound)
            result.aborted_transactions = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                                           for a in aborted]
    except OffsetOutOfRange:
        result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
        return 0
    except OSError as error:
        if not out_of_descriptors(error):
            raise
        # As Kafka answers an I/O error reading a log (its ReplicaManager.readFromLog); retriable. Unlike
        # Kafka the log directory stays online: a descriptor limit says nothing about the disk.
        logger.warning("%s-%d: fetch answered KAFKA_STORAGE_ERROR: %s", partition.topic, partition.index, error)
        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        return 0
    if region is None:
        return 0
    result.records = region
    return region.length


async def wait_for_any(events, seconds: float) -> None:
    """Return once any of ``events`` is set, or after ``seconds``."""
    events = {id(event): event for event in events}.values()
    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:
            for event in events:
                nursery.start_soon(_wait_then_stop, event, nursery.cancel_scope)


async def _wait_then_stop(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
