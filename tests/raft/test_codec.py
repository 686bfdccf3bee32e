"""raft/codec.py: every core message survives the trip through Kafka's wire bytes, both ways."""

from __future__ import annotations

import pytest

from kbroker.raft import codec
from kbroker.raft.messages import (BeginQuorumEpoch, EndQuorumEpoch, Entry, FetchRequest, FetchResponse, FetchSnapshotRequest,
                           FetchSnapshotResponse, SnapshotId, VoteRequest, VoteResponse)
from kbroker.raft.node import LEADER_CHANGE
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_request_header, decode_response, encode_request, encode_response
from kbroker.wire.schema import API_BY_KEY, API_BY_NAME

CLUSTER = "q-5Xb2RyG7kW1cJ0tN8hWg"
NAMES = {VoteRequest: "Vote", BeginQuorumEpoch: "BeginQuorumEpoch", EndQuorumEpoch: "EndQuorumEpoch",
         FetchRequest: "Fetch", FetchSnapshotRequest: "FetchSnapshot"}


def over_the_wire(message, cluster_id=CLUSTER):
    """``message`` as a request frame, decoded the way the controller listener decodes it."""
    key, version = codec.api_of(message)
    frame = encode_request(key, version, 7, "raft-1", codec.encode_request(message, cluster_id, 2))
    header, start = decode_request_header(memoryview(frame)[4:])
    return API_BY_KEY[key].decode_request(version, memoryview(frame)[4 + start:], exact=True)


def answer_over_the_wire(request_message, answer, error_code=ErrorCode.NONE):
    name = NAMES[type(request_message)]
    key, version = API_BY_NAME[name].key, codec.VERSIONS[name]
    body = codec.encode_response(name, answer, request_message, error_code=error_code)
    frame = bytes(encode_response(key, version, 7, body))
    _, response = decode_response(key, version, frame[4:])
    return codec.decode_response(request_message, response)


@pytest.mark.parametrize("message", [
    VoteRequest(epoch=4, candidate=1, last_epoch=3, end_offset=17),
    VoteRequest(epoch=5, candidate=1, last_epoch=3, end_offset=17, pre_vote=True),
    BeginQuorumEpoch(epoch=4, leader=1),
    EndQuorumEpoch(epoch=4, leader=1, preferred_successors=(3, 2)),
    FetchRequest(epoch=4, replica=1, fetch_offset=17, last_fetched_epoch=3),
    FetchSnapshotRequest(epoch=4, replica=1, snapshot_id=SnapshotId(100, 3), position=4096),
], ids=lambda m: type(m).__name__)
def test_a_request_decodes_to_what_was_sent(message):
    source, decoded = codec.decode_request(NAMES[type(message)], over_the_wire(message), CLUSTER)
    assert decoded == message
    assert source == getattr(message, "candidate", getattr(message, "leader", getattr(message, "replica", None)))


def test_a_request_of_another_cluster_never_reaches_the_core():
    request = over_the_wire(VoteRequest(epoch=4, candidate=1, last_epoch=3, end_offset=17), cluster_id="other")
    with pytest.raises(codec.NotForThisQuorum) as error:
        codec.decode_request("Vote", request, CLUSTER)
    assert error.value.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID


FETCH = FetchRequest(epoch=4, replica=2, fetch_offset=3, last_fetched_epoch=2)


@pytest.mark.parametrize("request_message, answer", [
    (VoteRequest(4, 1, 3, 17), VoteResponse(epoch=4, granted=True, leader=None)),
    (VoteRequest(5, 1, 3, 17, pre_vote=True), VoteResponse(epoch=4, granted=False, pre_vote=True, leader=3)),
    (FETCH, FetchResponse(epoch=4, leader=1, fetch_offset=3, last_fetched_epoch=2, high_watermark=5,
                          entries=(Entry(2, b"a"), Entry(4, LEADER_CHANGE), Entry(4, b"b"), Entry(4, b"c")))),
    (FETCH, FetchResponse(epoch=4, leader=1, fetch_offset=3, last_fetched_epoch=2, high_watermark=5)),
    (FETCH, FetchResponse(epoch=4, leader=1, fetch_offset=3, last_fetched_epoch=2, high_watermark=2,
                          diverging_end_offset=2)),
    (FETCH, FetchResponse(epoch=4, leader=1, fetch_offset=3, last_fetched_epoch=2, high_watermark=90,
                          snapshot_id=SnapshotId(80, 4))),
    (FETCH, FetchResponse(epoch=5, leader=3, fetch_offset=3, last_fetched_epoch=2, not_leader=True)),
    (FetchSnapshotRequest(4, 2, SnapshotId(80, 4), 1024),
     FetchSnapshotResponse(epoch=4, leader=1, snapshot_id=SnapshotId(80, 4), position=1024, size=5000,
                           chunk=b"x" * 1024)),
    (FetchSnapshotRequest(4, 2, SnapshotId(80, 4), 0),
     FetchSnapshotResponse(epoch=4, leader=1, snapshot_id=SnapshotId(80, 4), position=0, not_found=True)),
], ids=lambda v: type(v).__name__)
def test_an_answer_decodes_to_what_the_core_said(request_message, answer):
    assert answer_over_the_wire(request_message, answer) == answer


def test_an_acknowledgement_or_an_error_carries_nothing_for_the_core():
    assert answer_over_the_wire(BeginQuorumEpoch(4, 1), None) is None
    assert answer_over_the_wire(FETCH, None, error_code=ErrorCode.INCONSISTENT_CLUSTER_ID) is None
    assert answer_over_the_wire(VoteRequest(4, 1, 3, 17), None, error_code=ErrorCode.INCONSISTENT_CLUSTER_ID) is None


def test_entries_keep_their_epochs_and_offsets_as_batches():
    entries = [Entry(1, LEADER_CHANGE), Entry(1, b"a"), Entry(1, b"b"), Entry(2, LEADER_CHANGE), Entry(2, b"c")]
    data = codec.entries_to_batches(entries, base_offset=10)
    assert codec.batches_to_entries(data, 10) == entries
    assert codec.batches_to_entries(data, 12, stop=14) == entries[2:4]
