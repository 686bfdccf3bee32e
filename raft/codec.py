"""Raft's messages (raft/messages.py) as the Kafka requests and responses that carry them.

KRaft's RPCs on the wire: Vote (52, v2 for pre-vote), BeginQuorumEpoch (53),
EndQuorumEpoch (54), Fetch (1, v13: by topic id, with the diverging epoch, the
current leader and the snapshot id in tagged fields) and FetchSnapshot (59), all
for partition 0 of ``__cluster_metadata``. The pure core speaks small values; this
module is the only place that knows both.
"""

from __future__ import annotations

import struct
import uuid

from kbroker.raft.messages import (BeginQuorumEpoch, EndQuorumEpoch, Entry, FetchRequest, FetchResponse, FetchSnapshotRequest,
                           FetchSnapshotResponse, SnapshotId, VoteRequest, VoteResponse)
from kbroker.raft.node import LEADER_CHANGE
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch, decode_records, iter_batches
from kbroker.wire.schema import API_BY_NAME

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's fixed id of the metadata topic
NO_DIRECTORY = uuid.UUID(int=0)
_LEADER_CHANGE_KEY = struct.pack(">hh", 0, 2)  # control record: version 0, type 2 (LEADER_CHANGE)

VERSIONS = {"Vote": 2, "BeginQuorumEpoch": 0, "EndQuorumEpoch": 0, "Fetch": 13, "FetchSnapshot": 0}
_API = {name: API_BY_NAME[name] for name in VERSIONS}
_REQUEST_API = {VoteRequest: "Vote", BeginQuorumEpoch: "BeginQuorumEpoch", EndQuorumEpoch: "EndQuorumEpoch",
                FetchRequest: "Fetch", FetchSnapshotRequest: "FetchSnapshot"}


def api_of(message) -> tuple[int, int] | None:
    """(api key, version) of the Kafka request carrying ``message``; None for a response."""
    name = _REQUEST_API.get(type(message))
    return None if name is None else (_API[name].key, VERSIONS[name])


# -- entries as record batches ---------------------------------------------------------------------------


def entries_to_batches(entries, base_offset: int) -> bytes:
    """Each run of entries of one epoch as one batch (a LEADER_CHANGE alone, as a control batch)."""
    out = bytearray()
    run: list[Entry] = []
    offset = base_offset
    for entry in list(entries) + [None]:
        if run and (entry is None or entry.epoch != run[0].epoch or entry.data is LEADER_CHANGE
                    or run[0].data is LEADER_CHANGE):
            out += _batch(run, offset)
            offset += len(run)
            run = []
        if entry is not None:
            run.append(entry)
    return bytes(out)


def _batch(entries: list[Entry], base_offset: int) -> bytes:
    epoch = entries[0].epoch
    if entries[0].data is LEADER_CHANGE:
        return build_batch([Record(key=_LEADER_CHANGE_KEY, value=b"")], base_offset=base_offset, control=True,
                           partition_leader_epoch=epoch)
    records = [Record(offset_delta=i, value=entry.data) for i, entry in enumerate(entries)]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)


def batches_to_entries(data, start: int, stop: int | None = None) -> list[Entry]:
    """The entries at offsets from ``start`` (before ``stop``) in ``data``'s whole batches."""
    entries: list[Entry] = []
    for position, header in iter_batches(memoryview(data), allow_partial_tail=True):
        _, records = decode_records(data, position)
        for record in records:
            offset = header.base_offset + record.offset_delta
            if offset >= start + len(entries) and (stop is None or offset < stop):
                if offset != start + len(entries):
                    return entries  # a gap: stop at what continues
                entries.append(Entry(header.partition_leader_epoch, LEADER_CHANGE if header.is_control else record.value))
    return entries


# -- requests ---------------------------------------------------------------------------------------------------


def encode_request(message, cluster_id: str, destination: int):
    """The Kafka request body carrying a core request ``message``."""
    if isinstance(message, VoteRequest):
        request = _API["Vote"].request_class
        partition = request.TopicData.PartitionData(
            partition_index=0, replica_epoch=message.epoch, replica_id=message.candidate,
            replica_directory_id=NO_DIRECTORY, voter_directory_id=NO_DIRECTORY,
            last_offset_epoch=message.last_epoch, last_offset=message.end_offset, pre_vote=message.pre_vote)
        return request(cluster_id=cluster_id, voter_id=destination,
                       topics=[request.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])])
    if isinstance(message, BeginQuorumEpoch):
        request = _API["BeginQuorumEpoch"].request_class
        partition = request.TopicData.PartitionData(partition_index=0, voter_directory_id=NO_DIRECTORY,
                                                    leader_id=message.leader, leader_epoch=message.epoch)
        return request(cluster_id=cluster_id, topics=[request.TopicData(topic_name=METADATA_TOPIC,
                                                                        partitions=[partition])])
    if isinstance(message, EndQuorumEpoch):
        request = _API["EndQuorumEpoch"].request_class
        partition = request.TopicData.PartitionData(partition_index=0, leader_id=message.leader,
                                                    leader_epoch=message.epoch,
                                                    preferred_successors=list(message.preferred_successors))
        return request(cluster_id=cluster_id, topics=[request.TopicData(topic_name=METADATA_TOPIC,
                                                                        partitions=[partition])])
    if isinstance(message, FetchRequest):
        request = _API["Fetch"].request_class
        partition = request.FetchTopic.FetchPartition(
            partition=0, current_leader_epoch=message.epoch, fetch_offset=message.fetch_offset,
            last_fetched_epoch=message.last_fetched_epoch, log_start_offset=-1, partition_max_bytes=8 * 1024 * 1024)
        return request(cluster_id=cluster_id, replica_id=message.replica, max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1,
                       topics=[request.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[partition])],
                       forgotten_topics_data=[])
    if isinstance(message, FetchSnapshotRequest):
        request = _API["FetchSnapshot"].request_class
        snapshot_id = request.TopicSnapshot.PartitionSnapshot.SnapshotId(end_offset=message.snapshot_id.end_offset,
                                                                         epoch=message.snapshot_id.epoch)
        partition = request.TopicSnapshot.PartitionSnapshot(partition=0, current_leader_epoch=message.epoch,
                                                            snapshot_id=snapshot_id, position=message.position)
        return request(cluster_id=cluster_id, replica_id=message.replica, max_bytes=SNAPSHOT_CHUNK_BYTES,
                       topics=[request.TopicSnapshot(name=METADATA_TOPIC, partitions=[partition])])
    raise TypeError(f"not a Raft request: {message!r}")


FETCH_MAX_WAIT_MS = 500  # a fetch with nothing new waits this long at the leader (long polling)
SNAPSHOT_CHUNK_BYTES = 1 << 20


class NotForThisQuorum(ValueError):
    """A request for another cluster, topic or partition: answered with an error, never given to the core."""

    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


def decode_request(api_name: str, request, cluster_id: str):
    """(source node, core message) from a Kafka request; NotForThisQuorum if it is not ours."""
    if request.cluster_id not in (None, cluster_id):
        raise NotForThisQuorum(ErrorCode.INCONSISTENT_CLUSTER_ID)
    if api_name == "Fetch":
        [topic] = request.topics or [None]
        if topic is None or topic.topic_id != METADATA_TOPIC_ID or len(topic.partitions) != 1:
            raise NotForThisQuorum(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        partition = topic.partitions[0]
        replica = request.replica_id if request.replica_id >= 0 else request.replica_state.replica_id
        return replica, FetchRequest(partition.current_leader_epoch, replica, partition.fetch_offset,
                                     max(partition.last_fetched_epoch, 0))
    partition = _only_partition(request.topics, "name" if api_name == "FetchSnapshot" else "topic_name")
    if api_name == "Vote":
        return partition.replica_id, VoteRequest(partition.replica_epoch, partition.replica_id,
                                                 partition.last_offset_epoch, partition.last_offset,
                                                 pre_vote=partition.pre_vote)
    if api_name == "BeginQuorumEpoch":
        return partition.leader_id, BeginQuorumEpoch(partition.leader_epoch, partition.leader_id)
    if api_name == "EndQuorumEpoch":
        return partition.leader_id, EndQuorumEpoch(partition.leader_epoch, partition.leader_id,
                                                   tuple(partition.preferred_successors or ()))
    if api_name == "FetchSnapshot":
        snapshot_id = SnapshotId(partition.snapshot_id.end_offset, partition.snapshot_id.epoch)
        return request.replica_id, FetchSnapshotRequest(partition.current_leader_epoch, request.replica_id,
                                                        snapshot_id, partition.position)
    raise ValueError(api_name)


def _only_partition(topics, name_field: str):
    if len(topics or ()) != 1 or getattr(topics[0], name_field) != METADATA_TOPIC or len(topics[0].partitions) != 1:
        raise NotForThisQuorum(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    partition = topics[0].partitions[0]
    if getattr(partition, "partition_index", getattr(partition, "partition", 0)) != 0:
        raise NotForThisQuorum(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return partition


# -- responses ---------------------------------------------------------------------------------------------------


def encode_response(api_name: str, message, request_message=None, error_code: int = ErrorCode.NONE):
    """The Kafka response body for ``api_name`` carrying the core's answer ``message`` (None: a bare
    acknowledgement, or ``error_code`` for a request that never reached the core)."""
    response = _API[api_name].response_class
    if api_name == "Fetch":
        return _fetch_response(response, message, error_code)
    if api_name == "FetchSnapshot":
        return _fetch_snapshot_response(response, message, request_message, error_code)
    partition = response.TopicData.PartitionData
    if isinstance(message, VoteResponse):
        body = partition(partition_index=0, error_code=ErrorCode.NONE,
                         leader_id=-1 if message.leader is None else message.leader, leader_epoch=message.epoch,
                         vote_granted=message.granted)
        return response(error_code=ErrorCode.NONE, topics=[response.TopicData(topic_name=METADATA_TOPIC,
                                                                                 partitions=[body])])
    epoch = getattr(request_message, "epoch", -1)
    body = partition(partition_index=0, error_code=error_code, leader_id=-1, leader_epoch=epoch)
    if api_name == "Vote":
        body.vote_granted = False
    if error_code != ErrorCode.NONE:
        return response(error_code=error_code, topics=[])
    return response(error_code=ErrorCode.NONE, topics=[response.TopicData(topic_name=METADATA_TOPIC,
                                                                             partitions=[body])])


def _fetch_response(response, message: FetchResponse | None, error_code: int):
    partition_class = response.FetchableTopicResponse.PartitionData
    if message is None:
        return response(error_code=error_code, responses=[])
    partition = partition_class(partition_index=0, error_code=ErrorCode.NONE, high_watermark=message.high_watermark,
                                last_stable_offset=message.high_watermark, log_start_offset=-1,
                                aborted_transactions=None, records=None)
    partition.current_leader = partition_class.LeaderIdAndEpoch(
        leader_id=-1 if message.leader is None else message.leader, leader_epoch=message.epoch)
    if message.not_leader:
        partition.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    elif message.diverging_end_offset >= 0:
        partition.diverging_epoch = partition_class.EpochEndOffset(epoch=message.last_fetched_epoch,
                                                                   end_offset=message.diverging_end_offset)
    elif message.snapshot_id is not None:
        partition.snapshot_id = partition_class.SnapshotId(end_offset=message.snapshot_id.end_offset,
                                                           epoch=message.snapshot_id.epoch)
    elif message.entries:
        partition.records = entries_to_batches(message.entries, message.fetch_offset)
    return response(error_code=ErrorCode.NONE, responses=[
        response.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[partition])])


def _fetch_snapshot_response(response, message: FetchSnapshotResponse | None, request_message, error_code: int):
    if message is None:
        return response(error_code=error_code, topics=[])
    partition_class = response.TopicSnapshot.PartitionSnapshot
    partition = partition_class(
        index=0, error_code=ErrorCode.NONE,
        snapshot_id=partition_class.SnapshotId(end_offset=message.snapshot_id.end_offset,
                                               epoch=message.snapshot_id.epoch),
        size=message.size, position=message.position, unaligned_records=message.chunk)
    partition.current_leader = partition_class.LeaderIdAndEpoch(
        leader_id=-1 if message.leader is None else message.leader, leader_epoch=message.epoch)
    if message.not_leader:
        partition.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    elif message.not_found:
        partition.error_code = ErrorCode.SNAPSHOT_NOT_FOUND
    return response(error_code=ErrorCode.NONE, topics=[response.TopicSnapshot(name=METADATA_TOPIC,
                                                                              partitions=[partition])])


def decode_response(request_message, response):
    """The core's answer to ``request_message`` from the Kafka response; None if it carries none
    (an acknowledgement, or an error the core learns nothing from: its timers retry)."""
    if isinstance(request_message, VoteRequest):
        partition = _response_partition(response, "topics")
        if partition is None or partition.error_code != ErrorCode.NONE:
            return None
        return VoteResponse(partition.leader_epoch, partition.vote_granted, pre_vote=request_message.pre_vote,
                            leader=None if partition.leader_id < 0 else partition.leader_id)
    if isinstance(request_message, FetchRequest):
        partition = _response_partition(response, "responses")
        if partition is None:
            return None
        leader = partition.current_leader
        if leader is None or leader.leader_epoch < 0:
            return None
        common = dict(epoch=leader.leader_epoch, leader=None if leader.leader_id < 0 else leader.leader_id,
                      fetch_offset=request_message.fetch_offset, last_fetched_epoch=request_message.last_fetched_epoch,
                      high_watermark=partition.high_watermark)
        if partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return FetchResponse(**common, not_leader=True)
        if partition.error_code != ErrorCode.NONE:
            return None
        if partition.diverging_epoch is not None and partition.diverging_epoch.end_offset >= 0:
            return FetchResponse(**common, diverging_end_offset=partition.diverging_epoch.end_offset)
        if partition.snapshot_id is not None and partition.snapshot_id.end_offset >= 0:
            return FetchResponse(**common, snapshot_id=SnapshotId(partition.snapshot_id.end_offset,
                                                                  partition.snapshot_id.epoch))
        entries = batches_to_entries(partition.records, request_message.fetch_offset) if partition.records else []
        return FetchResponse(**common, entries=tuple(entries))
    if isinstance(request_message, FetchSnapshotRequest):
        partition = _response_partition(response, "topics")
        if partition is None or partition.current_leader is None:
            return None
        leader = partition.current_leader
        common = dict(epoch=leader.leader_epoch, leader=None if leader.leader_id < 0 else leader.leader_id,
                      snapshot_id=request_message.snapshot_id, position=request_message.position)
        if partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return FetchSnapshotResponse(**common, not_leader=True)
        if partition.error_code == ErrorCode.SNAPSHOT_NOT_FOUND:
            return FetchSnapshotResponse(**common, not_found=True)
        if partition.error_code != ErrorCode.NONE:
            return None
        return FetchSnapshotResponse(**common, size=partition.size, chunk=bytes(partition.unaligned_records or b""))
    return None  # BeginQuorumEpoch, EndQuorumEpoch: acknowledgements


def _response_partition(response, topics_field: str):
    topics = getattr(response, topics_field) or []
    if response.error_code != ErrorCode.NONE or len(topics) != 1 or len(topics[0].partitions) != 1:
        return None
    return topics[0].partitions[0]
