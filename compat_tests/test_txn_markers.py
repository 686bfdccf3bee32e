"""The partition side of transactions over a raw socket: markers, the last stable offset,
aborted transactions for read_committed, and transactional offset commits.

The producer is registered with the transaction coordinator (InitProducerId,
AddPartitionsToTxn), so that the partition takes its transactional batches
(KIP-890 part 1); the markers are written by the test through WriteTxnMarkers,
playing the coordinator's part towards the partition.
"""

from __future__ import annotations

import tempfile
import uuid

from compat_tests.test_errors import call
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME

CreateTopics = API_BY_NAME["CreateTopics"].request_class
InitProducerId = API_BY_NAME["InitProducerId"].request_class
Produce = API_BY_NAME["Produce"].request_class
Fetch = API_BY_NAME["Fetch"].request_class
WriteTxnMarkers = API_BY_NAME["WriteTxnMarkers"].request_class
TxnOffsetCommit = API_BY_NAME["TxnOffsetCommit"].request_class
OffsetFetch = API_BY_NAME["OffsetFetch"].request_class
FindCoordinator = API_BY_NAME["FindCoordinator"].request_class
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


AddPartitionsToTxn = API_BY_NAME["AddPartitionsToTxn"].request_class
AddOffsetsToTxn = API_BY_NAME["AddOffsetsToTxn"].request_class


def begin(port, transactional_id, partitions=None):
    """A transactional producer whose transaction includes ``partitions`` (by topic; txn-0 if
    not given); its id and epoch."""
    call(port, "FindCoordinator", 4, FindCoordinator(key_type=1, coordinator_keys=[transactional_id]))
    for _ in range(100):  # the coordinator loads its new partitions first, as a client would retry
        init = call(port, "InitProducerId", 4, InitProducerId(transactional_id=transactional_id,
                                                             transaction_timeout_ms=60000))
        if init.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            break
    assert init.error_code == ErrorCode.NONE
    topics = [AddPartitionsToTxn.AddPartitionsToTxnTopic(name=name, partitions=indexes)
              for name, indexes in ({"txn": [0]} if partitions is None else partitions).items()]
    add = AddPartitionsToTxn(v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=init.producer_id,
                             v3_and_below_producer_epoch=init.producer_epoch, v3_and_below_topics=topics)
    for topic in call(port, "AddPartitionsToTxn", 3, add).results_by_topic_v3_and_below:
        assert [result.partition_error_code for result in topic.results_by_partition] == [ErrorCode.NONE]
    return init.producer_id, init.producer_epoch


def produce_transactional(port, producer_id, epoch, sequence, values):
    batch = build_batch([Record(offset_delta=i, value=v) for i, v in enumerate(values)], producer_id=producer_id,
                        producer_epoch=epoch, base_sequence=sequence, transactional=True)
    data = Produce.TopicProduceData
    body = Produce(transactional_id="t", acks=-1, timeout_ms=5000, topic_data=[
        data(name="txn", partition_data=[data.PartitionProduceData(index=0, records=batch)])])
    [result] = call(port, "Produce", 9, body).responses[0].partition_responses
    assert result.error_code == ErrorCode.NONE
    return result.base_offset


def end(port, producer_id, epoch, commit, topic="txn", partition=0):
    marker = WriteTxnMarkers.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=0,
        topics=[WriteTxnMarkers.WritableTxnMarker.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])
    [result] = call(port, "WriteTxnMarkers", 1, WriteTxnMarkers(markers=[marker])).markers
    assert result.topics[0].partitions[0].error_code == ErrorCode.NONE


def fetch(port, isolation_level):
    wanted = Fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    body = Fetch(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation_level,
                 topics=[Fetch.FetchTopic(topic="txn", topic_id=uuid.UUID(int=0), partitions=[wanted])])
    return call(port, "Fetch", 12, body).responses[0].partitions[0]


def committed_offset(port, group, require_stable=False):
    request = OffsetFetch.OffsetFetchRequestGroup(group_id=group, topics=[
        OffsetFetch.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="txn", partition_indexes=[0])])
    [group] = call(port, "OffsetFetch", 8, OffsetFetch(groups=[request], require_stable=require_stable)).groups
    [partition] = group.topics[0].partitions
    return partition.committed_offset, partition.error_code


def test_markers_move_the_last_stable_offset_and_list_aborted_transactions():
    with running_broker() as broker:
        port = broker.port
        call(port, "CreateTopics", 7, CreateTopics(timeout_ms=5000, topics=[
            CreateTopics.CreatableTopic(name="txn", num_partitions=1, replication_factor=1)]))
        pid, epoch = begin(port, "t")

        produce_transactional(port, pid, epoch, 0, [b"a0", b"a1", b"a2"])
        open_txn = fetch(port, READ_COMMITTED)
        assert (open_txn.high_watermark, open_txn.last_stable_offset) == (3, 0)
        assert not open_txn.records  # nothing is decided yet
        end(port, pid, epoch, commit=False)
        aborted = fetch(port, READ_COMMITTED)
        assert aborted.last_stable_offset == 4  # three records and the marker
        assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(pid, 0)]

        produce_transactional(port, pid, epoch, 3, [b"c0", b"c1"])
        end(port, pid, epoch, commit=True)
        committed = fetch(port, READ_COMMITTED)
        assert committed.last_stable_offset == committed.high_watermark == 7
        assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(pid, 0)]
        assert fetch(port, READ_UNCOMMITTED).aborted_transactions in (None, [])


def test_transactional_offset_commits_count_only_after_the_commit_marker_and_survive_a_restart():
    data_dir = tempfile.mkdtemp(prefix="kbroker-txn-")
    with running_broker(data_dir, settings={"offsets.topic.num.partitions": 1}) as broker:
        port = broker.port
        call(port, "CreateTopics", 7, CreateTopics(timeout_ms=5000, topics=[  # offsets are kept only for topics that exist
            CreateTopics.CreatableTopic(name="txn", num_partitions=1, replication_factor=1)]))
        call(port, "FindCoordinator", 4, FindCoordinator(key_type=0, coordinator_keys=["g"]))
        pid, epoch = begin(port, "t", partitions={})
        add_offsets = AddOffsetsToTxn(transactional_id="t", producer_id=pid, producer_epoch=epoch, group_id="g")
        assert call(port, "AddOffsetsToTxn", 3, add_offsets).error_code == ErrorCode.NONE

        def commit_in_transaction(offset):
            partition = TxnOffsetCommit.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset)
            body = TxnOffsetCommit(transactional_id="t", group_id="g", producer_id=pid, producer_epoch=epoch, topics=[
                TxnOffsetCommit.TxnOffsetCommitRequestTopic(name="txn", partitions=[partition])])
            assert call(port, "TxnOffsetCommit", 3, body).topics[0].partitions[0].error_code == ErrorCode.NONE

        commit_in_transaction(5)
        assert committed_offset(port, "g") == (-1, ErrorCode.NONE)
        assert committed_offset(port, "g", require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        end(port, pid, epoch, commit=False, topic="__consumer_offsets")
        assert committed_offset(port, "g", require_stable=True) == (-1, ErrorCode.NONE)  # aborted: gone

        commit_in_transaction(9)
        end(port, pid, epoch, commit=True, topic="__consumer_offsets")
        assert committed_offset(port, "g") == (9, ErrorCode.NONE)
        # Undecided over a committed offset: Kafka tells the error with no offset (INVALID_OFFSET), not the old one.
        commit_in_transaction(12)
        assert committed_offset(port, "g", require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert committed_offset(port, "g") == (9, ErrorCode.NONE)
        end(port, pid, epoch, commit=False, topic="__consumer_offsets")
    with running_broker(data_dir, settings={"offsets.topic.num.partitions": 1}) as broker:
        # Rebuilt from __consumer_offsets: the aborted commit stays out, the committed one is back.
        answers = [committed_offset(broker.port, "g") for _ in range(50)]
        assert (9, ErrorCode.NONE) in answers
