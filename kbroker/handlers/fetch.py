"""Fetch (1): file regions straight from the segments, long-polled on new data, in fetch sessions.

Each partition's data is a region of a segment file sent with ``os.sendfile``;
nothing is copied through Python. Reads stop at the high watermark (or the
last stable offset for read_committed). When less than ``min_bytes`` is
ready the request waits, up to ``max_wait_ms``, for any of its partitions'
high watermarks to move (a follower's: for any of its logs to grow).

From v7 a request may open or use a fetch session (KIP-227, kbroker/fetch_sessions.py): the broker then
remembers its partitions, and each later request of the session names only what changed and is answered
with only the partitions that have something new (records, an error, a moved high watermark, log start or
last stable offset). The session's partitions are read in its order, which moves partitions that returned
records to the end, so that with ``fetch.max.bytes`` spent the others are read first next time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import trio

from kbroker import handlers
from kbroker.fetch_sessions import (FINAL_EPOCH, INVALID_SESSION_ID, TOPIC_IDS_VERSION, ContextKind, FetchContext,
                                    FetchPartition, PartitionOutcome, partition_key)
from kbroker.handlers.fetch_watch import SessionWatch
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
_HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)  # KIP-951: Kafka's two
# Refusals Kafka makes in its read path (ReplicaManager), whose answers carry null aborted transactions; the
# others (authorization, an unknown topic or id) come before it and keep the empty list.
_READ_PATH_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH)


@handlers.handles("Fetch", 4, 18)
async def handle(broker: HandlerNode, context, request):
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
    follower = _replica_of(request) >= 0
    session = _session_context(broker, context, request, follower)
    if session.kind is ContextKind.ERROR:
        return FetchResponse(error_code=session.error_code, session_id=INVALID_SESSION_ID, responses=[])
    watch = _watch(broker, session, follower)
    incremental = session.kind is ContextKind.INCREMENTAL and watch is not None
    wanted = _to_read(broker, session, watch)
    while True:
        if watch is not None:
            watch.moved = trio.Event()
        reading = _read(broker, request, context, wanted, watch)
        remaining = deadline - time.monotonic()
        # Kafka's ReplicaManager.fetchMessages answers at once on an error or a diverging epoch too.
        if (reading.bytes >= request.min_bytes or remaining <= 0 or reading.errors
                or not (reading.partitions or incremental)):
            break
        if incremental:
            with trio.move_on_after(remaining):
                await watch.moved.wait()
            wanted = _in_session_order(session, {partition.key for partition in wanted} | watch.touched)
        else:
            await wait_for_partitions(reading.partitions, follower, remaining)
        if time.monotonic() >= deadline:
            reading = _read(broker, request, context, wanted, watch)
            break
    return _answered(broker, context, request, session, reading, watch)


def _watch(broker: HandlerNode, session: FetchContext, follower: bool) -> SessionWatch | None:
    """A consumer's session's watch (kbroker/handlers/fetch_watch.py): its own for an incremental request,
    a new one for a full request (kept if the answer opens a session)."""
    if follower or session.kind is ContextKind.SESSIONLESS or broker.fetch_sessions.max_slots == 0:
        return None  # (with no slots a full request never opens a session: nothing to mark)
    if session.kind is ContextKind.FULL:
        return SessionWatch()
    watch = broker.fetch_sessions.attachment(session)
    if watch is None:
        watch = SessionWatch()
        broker.fetch_sessions.attach(session.session_id, watch)
    for key in session.removed:
        watch.forget(key)
    return watch


def _to_read(broker: HandlerNode, session: FetchContext, watch: SessionWatch | None):
    """The partitions a request reads, in the session's order: an incremental consumer request those it
    names and those that may have something new, unless it is time to read them all."""
    if (session.kind is not ContextKind.INCREMENTAL or watch is None
            or watch.reads_all(broker.image, broker.clock.monotonic_ms())):
        return session.partitions
    return _in_session_order(session, set(session.added) | set(session.updated) | watch.touched)


def _in_session_order(session: FetchContext, keys: set) -> list:
    return [partition for partition in session.partitions if partition.key in keys]


def _session_context(broker: HandlerNode, context, request, follower: bool) -> FetchContext:
    """The request's place among the fetch sessions; before v7 every request is sessionless."""
    version = context.api_version
    by_id = version >= TOPIC_IDS_VERSION
    names = broker.image.topic_names
    wanted = [FetchPartition(topic.topic_id if by_id else ZERO_UUID, names.get(topic.topic_id) if by_id else topic.topic,
                             partition.partition, partition.fetch_offset, partition.partition_max_bytes,
                             partition.log_start_offset, partition.current_leader_epoch, partition.last_fetched_epoch)
              for topic in request.topics for partition in topic.partitions]
    if version < 7:
        return broker.fetch_sessions.new_context(INVALID_SESSION_ID, FINAL_EPOCH, wanted, (), version=version,
                                                 follower=follower, now_ms=broker.clock.monotonic_ms())
    forgotten = [partition_key(topic.topic_id if by_id else ZERO_UUID, None if by_id else topic.topic, index)
                 for topic in request.forgotten_topics_data for index in topic.partitions]
    return broker.fetch_sessions.new_context(request.session_id, request.session_epoch, wanted, forgotten,
                                             version=version, follower=follower, now_ms=broker.clock.monotonic_ms(),
                                             topic_names=names if by_id else None)


def _answered(broker: HandlerNode, context, request, session: FetchContext, reading: _Reading,
              watch: SessionWatch | None):
    """The session says which partitions the answer carries. A consumer's fetched bytes count against its
    consumer_byte_rate quota (followers have none) and, when the broker keeps metrics, in its bytes and
    records out."""
    answer = broker.fetch_sessions.answer(session, reading.outcomes, broker.clock.monotonic_ms())
    if session.kind is ContextKind.FULL and watch is not None:
        if answer.session_id != INVALID_SESSION_ID:
            watch.reads_all(broker.image, broker.clock.monotonic_ms())
            broker.fetch_sessions.attach(answer.session_id, watch)
        else:
            watch.release()
    carried = set(answer.partitions)
    response = FetchResponse(error_code=answer.error_code, session_id=answer.session_id,
                             responses=_by_topic(result for result in reading.results if result[0] in carried))
    leaders = {leader for key, leader in reading.leaders if key in carried}
    if leaders:
        response.node_endpoints = node_endpoints(broker.image, leaders, FetchResponse, context.listener)
    if _replica_of(request) < 0:
        response.throttle_time_ms = context.throttle(CONSUMER_BYTE_RATE, reading.bytes)
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


def _by_topic(results) -> list:
    """Partition answers in order, a topic entry for each run of one topic's partitions (as Kafka's
    FetchResponse groups them: a topic whose partitions a session's rotation split appears more than once)."""
    topics = []
    last = None
    for key, topic_id, name, result in results:
        if last is None or last.topic_id != topic_id or last.topic != name:
            last = TopicResult(topic=name, topic_id=topic_id, partitions=[])
            topics.append(last)
        last.partitions.append(result)
    return topics


def _replica_of(request) -> int:
    """The broker id of a follower's fetch (v15+ carries it in replica_state); -1 for a consumer."""
    state = getattr(request, "replica_state", None)
    if state is not None and state.replica_id >= 0:
        return state.replica_id
    return request.replica_id if request.replica_id is not None else -1


@dataclass
class _Reading:
    """One read of a request's partitions: the answer of each, what the session cache is told of each, the
    bytes ready, the partitions a long poll waits on, and the leaders to name (KIP-951)."""

    results: list = field(default_factory=list)  # (key, topic id, topic name, PartitionResult)
    outcomes: list[PartitionOutcome] = field(default_factory=list)
    bytes: int = 0
    errors: bool = False  # a partition answered with an error or a diverging epoch
    partitions: list = field(default_factory=list)
    leaders: list[tuple] = field(default_factory=list)  # (key, leader node id)


def _read(broker: HandlerNode, request, context, wanted, watch: SessionWatch | None = None) -> _Reading:
    """The partitions ``wanted`` as of now, in their order; ``watch`` is told how each read went."""
    version = context.api_version
    replica = _replica_of(request)
    max_bytes = request.max_bytes if replica >= 0 else min(request.max_bytes, broker.config.get("fetch.max.bytes"))
    replica_allowed = replica < 0 or allowed_on_cluster(broker, context, AclOperation.CLUSTER_ACTION)
    reading = _Reading()
    guard = guarded = None
    for partition_wanted in wanted:
        topic_key = (partition_wanted.topic_id, partition_wanted.topic_name)
        if topic_key != guarded:  # one lookup and ACL check per run of one topic's partitions
            guarded = topic_key
            guard = guard_topic(broker, context, AclOperation.READ,
                                name=partition_wanted.topic_name if version < 13 else None,
                                topic_id=partition_wanted.topic_id if version >= 13 else None,
                                authorized=replica_allowed if replica >= 0 else None)
        topic = guard.topic
        result = PartitionResult(partition_index=partition_wanted.partition, high_watermark=-1, records=b"")
        key = partition_wanted.key
        reading.results.append((key, topic.topic_id if topic else partition_wanted.topic_id,
                                partition_wanted.topic_name if version < 13 else None, result))
        partition, result.error_code = guard.partition(partition_wanted.partition, partition_wanted.current_leader_epoch)
        if result.error_code in _READ_PATH_ERRORS:
            result.aborted_transactions = None
        if result.error_code in _HINTED:
            leaders: set[int] = set()
            hint_leader(topic, partition_wanted.partition, result, leaders)
            reading.leaders.extend((key, leader) for leader in leaders)
        diverged = False
        read_bytes = 0
        if partition is not None:
            diverged = replica >= 0 and _diverged(partition, partition_wanted, result)
            if not diverged:
                if replica >= 0:
                    partition.follower_fetched(replica, partition_wanted.fetch_offset)
                    if (replica not in partition.isr and partition_wanted.fetch_offset >= partition.high_watermark
                            and broker.isr):
                        broker.isr.wake.set()  # caught up: back into the ISR
                read_bytes = _read_partition(partition, partition_wanted, request, result,
                                             max(0, max_bytes - reading.bytes), first=reading.bytes == 0,
                                             to_log_end=replica >= 0)
                reading.bytes += read_bytes
                reading.partitions.append(partition)
        reading.outcomes.append(PartitionOutcome(key, read_bytes > 0, result.high_watermark,
                                                 result.log_start_offset, result.last_stable_offset,
                                                 result.error_code, diverging=diverged))
        reading.errors = reading.errors or result.error_code != ErrorCode.NONE or diverged
        if watch is not None:
            bound = result.last_stable_offset if request.isolation_level == READ_COMMITTED else result.high_watermark
            settled = (result.error_code == ErrorCode.NONE and read_bytes == 0
                       and partition_wanted.fetch_offset >= bound)
            watch.read(key, partition, settled)
    return reading


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
    # Kafka's read lists the aborted transactions for read_committed (an empty list where none), null for
    # read_uncommitted (a partition refused before any read keeps the empty list, as Kafka's erroneous ones)
    result.aborted_transactions = [] if request.isolation_level == READ_COMMITTED else None
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
        if not to_log_end:  # a consumer gets Kafka's answer to a partition in error: no offsets at all
            result.high_watermark = result.last_stable_offset = result.log_start_offset = -1
            result.aborted_transactions = None
        # (a follower keeps the leader's log start and high watermark, where kbroker's fetcher truncates to)
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


async def wait_for_partitions(partitions, follower: bool, seconds: float) -> None:
    """Return once any of ``partitions``' high watermarks moves (a follower's: any of their logs grows), or
    after ``seconds``: one event told by every partition (kbroker/replication/replica.py's Watchers)."""
    moved = trio.Event()
    watchers = [partition.append_watchers if follower else partition.advance_watchers for partition in partitions]
    for watching in watchers:
        watching.add(moved)
    try:
        with trio.move_on_after(seconds):
            await moved.wait()
    finally:
        for watching in watchers:
            watching.discard(moved)


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
