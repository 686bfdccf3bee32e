"""ShareFetch (78): a share consumer's fetch (KIP-932), with its acknowledgements of earlier records.

In Kafka's order (KafkaApis.handleShareFetchRequest): READ on the group, then the member's share session
(kbroker/share/sessions.py: epoch 0 opens one, -1 closes it, any other must be the next), READ on each
topic; then the acknowledgements the request carries are applied and, together, records are acquired
from the session's partitions (kbroker/share/manager.py). Acquired records are answered with the batches
holding them and their offsets and delivery counts; the client hands out those offsets only.

When nothing is acquired, the request waits up to ``max_wait_ms`` for records to arrive in, or become
available again on, one of its partitions. A fetch at the first epoch answers every partition of the
session; later ones only those with records or an error, as Kafka's ShareSessionContext does.
"""

from __future__ import annotations

import time

import trio

from kbroker import handlers
from kbroker.handlers.fetch import wait_for_any
from kbroker.handlers.share_common import (NO_LEADER_HINT, Acknowledged, acknowledge_all,
                                           acknowledgement_batches, find_share_partitions, share_response)
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

ShareFetchResponse = API_BY_NAME["ShareFetch"].response_class
TopicResponse = ShareFetchResponse.ShareFetchableTopicResponse
PartitionData = TopicResponse.PartitionData
ACCEPTED = Acknowledged(ErrorCode.NONE)  # a partition with no acknowledgements in the request
_RECORD_LIMIT = 1  # ShareAcquireMode record_limit


@handlers.handles("ShareFetch", 1, 2)
async def handle(broker, context, request):
    from kbroker.share.sessions import PartitionOutcome

    manager = broker.share_partitions
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not allowed(broker, context, AclOperation.READ, ResourceType.GROUP, group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    acknowledgements = {(topic.topic_id, partition.partition_index): acknowledgement_batches(partition)
                        for topic in request.topics for partition in topic.partitions
                        if partition.acknowledgement_batches}
    session = manager.sessions.fetch(
        group_id, member_id, request.share_session_epoch,
        [(topic.topic_id, partition.partition_index) for topic in request.topics for partition in topic.partitions],
        [(topic.topic_id, index) for topic in request.forgotten_topics_data for index in topic.partitions],
        bool(acknowledgements), manager.connection(context.session), topic_names=broker.image.topic_names)
    if session.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED:
        await trio.sleep(max(0, request.max_wait_ms) / 1000)  # as Kafka: the client retries after its wait
    if session.error_code != ErrorCode.NONE:
        return _refused(session.error_code)

    found = await find_share_partitions(broker, context, group_id, list(session.partitions) + [
        key for key in acknowledgements if key not in session.partitions])
    acknowledged = await acknowledge_all(broker, group_id, member_id, found, acknowledgements)
    if session.final:  # the session is over: what the member still holds on this broker goes back
        manager.session_closed(session.closed)
        fetched = {}
    else:
        fetched = await _acquire(broker, request, group_id, member_id, found, session.partitions)

    # A final fetch fetches nothing: its answer carries the partitions it acknowledged, no others (Kafka's
    # FinalContext answers only what the request's acknowledgements added).
    outcomes = [] if session.final else [
        PartitionOutcome(*key, has_records=key in fetched, error_code=found.partitions[key].error_code)
        for key in session.partitions]
    answer = manager.sessions.response_partitions(session, outcomes)
    if answer.error_code != ErrorCode.NONE:
        return _refused(answer.error_code)
    carried = list(answer.partitions) + [key for key in acknowledged if key not in answer.partitions]
    by_topic: dict = {}
    for key in carried:
        named, taken, acknowledge = found.partitions[key], fetched.get(key), acknowledged.get(key, ACCEPTED)
        by_topic.setdefault(named.topic_id, []).append(PartitionData(
            partition_index=named.index, error_code=named.error_code,
            acknowledge_error_code=acknowledge.error_code, acknowledge_error_message=acknowledge.error_message,
            current_leader=PartitionData.LeaderIdAndEpoch(*(named.leader or NO_LEADER_HINT)),
            records=taken.records if taken else b"",
            acquired_records=[PartitionData.AcquiredRecords(first_offset=run.first_offset, last_offset=run.last_offset,
                                                            delivery_count=run.delivery_count)
                              for run in (taken.acquired if taken else ())]))
    return share_response(broker, context, ShareFetchResponse, TopicResponse, group_id, by_topic, found)


async def _acquire(broker, request, group_id: str, member_id: str, found, keys) -> dict:
    """Acquire records from the session's partitions, waiting up to max_wait_ms while none can be had."""
    manager = broker.share_partitions
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
    ready = [found.partitions[key] for key in keys if found.partitions[key].share_partition is not None]
    max_records = request.max_records if request.max_records > 0 else request.batch_size
    # ShareAcquireMode (v2, KIP-1206): 0 batch_optimized, the default, rounds max_records up to the end of a
    # batch (kbroker/share/partition.py); 1 record_limit takes exactly max_records
    whole_batches = request.share_acquire_mode != _RECORD_LIMIT
    while True:
        fetched, remaining_records, remaining_bytes = {}, max(1, max_records), max(1, request.max_bytes)
        for named in ready:
            if remaining_records <= 0 or remaining_bytes <= 0:
                break
            taken = manager.acquire(group_id, named.share_partition, named.replica, member_id, remaining_records,
                                    remaining_bytes, whole_batches=whole_batches, batch_size=request.batch_size)
            if taken.acquired:
                fetched[(named.topic_id, named.index)] = taken
                remaining_records -= sum(run.last_offset - run.first_offset + 1 for run in taken.acquired)
                remaining_bytes -= taken.size
        remaining = deadline - time.monotonic()
        if fetched or remaining <= 0 or not ready:
            return fetched
        await wait_for_any([named.replica.advanced() for named in ready] + [manager.wake_on()], remaining)


def _refused(error_code: int):
    """A top-level refusal: Kafka's ShareFetchRequest.getErrorResponse, whose error has no message."""
    return ShareFetchResponse(error_code=error_code, acquisition_lock_timeout_ms=0, responses=[])
