"""The transaction APIs over a raw socket, with the error codes Kafka gives.

The client-level behaviour (confluent-kafka, kafka-python, the Java client)
is in test_transactions.py and test_exactly_once.py; here each request is
made by hand, so that every answer a client could meet is checked: the
produce-side verification of KIP-890 part 1, AddPartitionsToTxn in its
producer (v3) and broker (v4+, batched, verify-only) forms, EndTxn's retries,
DescribeTransactions and ListTransactions.
"""

from __future__ import annotations

import time
import uuid

import pytest

from compat_tests.test_errors import call
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME

CreateTopics = API_BY_NAME["CreateTopics"].request_class
FindCoordinator = API_BY_NAME["FindCoordinator"].request_class
InitProducerId = API_BY_NAME["InitProducerId"].request_class
AddPartitionsToTxn = API_BY_NAME["AddPartitionsToTxn"].request_class
EndTxn = API_BY_NAME["EndTxn"].request_class
Produce = API_BY_NAME["Produce"].request_class
Fetch = API_BY_NAME["Fetch"].request_class
DescribeTransactions = API_BY_NAME["DescribeTransactions"].request_class
ListTransactions = API_BY_NAME["ListTransactions"].request_class
TOPIC = "orders"
READ_COMMITTED = 1


@pytest.fixture(scope="module")
def broker():
    with running_broker(settings={"transaction.state.log.num.partitions": 3}) as broker:
        call(broker.port, "CreateTopics", 7, CreateTopics(timeout_ms=5000, topics=[
            CreateTopics.CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)]))
        call(broker.port, "FindCoordinator", 4, FindCoordinator(key_type=1, coordinator_keys=["any"]))
        yield broker


def init(port, transactional_id, timeout_ms=60000):
    deadline = time.monotonic() + 10
    while True:  # the coordinator may still be loading its partitions; a client retries
        answer = call(port, "InitProducerId", 4, InitProducerId(transactional_id=transactional_id,
                                                               transaction_timeout_ms=timeout_ms))
        if answer.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS) \
                or time.monotonic() > deadline:
            return answer


def begin(port, transactional_id, partitions=(0,)):
    answer = init(port, transactional_id)
    assert answer.error_code == ErrorCode.NONE
    producer = (answer.producer_id, answer.producer_epoch)
    assert add(port, transactional_id, producer, {TOPIC: list(partitions)}) == {
        (TOPIC, index): ErrorCode.NONE for index in partitions}
    return producer


def add(port, transactional_id, producer, topics, version=3):
    request = AddPartitionsToTxn(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer[0],
        v3_and_below_producer_epoch=producer[1],
        v3_and_below_topics=[AddPartitionsToTxn.AddPartitionsToTxnTopic(name=name, partitions=indexes)
                             for name, indexes in topics.items()])
    answer = call(port, "AddPartitionsToTxn", version, request)
    return {(topic.name, result.partition_index): result.partition_error_code
            for topic in answer.results_by_topic_v3_and_below for result in topic.results_by_partition}


def produce(port, transactional_id, producer, sequence, values, partition=0, version=9):
    batch = build_batch([Record(offset_delta=i, value=v) for i, v in enumerate(values)], producer_id=producer[0],
                        producer_epoch=producer[1], base_sequence=sequence, transactional=True)
    data = Produce.TopicProduceData
    body = Produce(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
        data(name=TOPIC, partition_data=[data.PartitionProduceData(index=partition, records=batch)])])
    [result] = call(port, "Produce", version, body).responses[0].partition_responses
    return result.error_code


def end(port, transactional_id, producer, commit, version=3):
    return call(port, "EndTxn", version, EndTxn(transactional_id=transactional_id, producer_id=producer[0],
                                               producer_epoch=producer[1], committed=commit))


def end_and_wait(port, transactional_id, producer, commit):
    """EndTxn, then wait until the markers are written (the coordinator completes in the background)."""
    assert end(port, transactional_id, producer, commit).error_code == ErrorCode.NONE
    wanted = "CompleteCommit" if commit else "CompleteAbort"
    deadline = time.monotonic() + 10
    while describe(port, transactional_id).transaction_state != wanted:
        assert time.monotonic() < deadline, describe(port, transactional_id)
        time.sleep(0.01)


def describe(port, transactional_id):
    [state] = call(port, "DescribeTransactions", 0,
                   DescribeTransactions(transactional_ids=[transactional_id])).transaction_states
    return state


def read_committed(port, partition=0):
    """A read_committed Fetch of the partition from offset 0: its answer for that partition."""
    wanted = Fetch.FetchTopic.FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)
    body = Fetch(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=READ_COMMITTED,
                 topics=[Fetch.FetchTopic(topic=TOPIC, topic_id=uuid.UUID(int=0), partitions=[wanted])])
    return call(port, "Fetch", 12, body).responses[0].partitions[0]


def unique(name):
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_a_transactional_batch_for_a_partition_not_in_the_transaction_is_refused(broker):
    tid = unique("verify")
    producer = begin(broker.port, tid, partitions=(0,))
    assert produce(broker.port, tid, producer, 0, [b"x"], partition=1, version=10) == ErrorCode.INVALID_TXN_STATE
    assert produce(broker.port, tid, producer, 0, [b"x"], partition=1, version=11) == ErrorCode.TRANSACTION_ABORTABLE
    assert produce(broker.port, tid, producer, 0, [b"x"], partition=0) == ErrorCode.NONE


def test_a_transactional_batch_without_a_transactional_id_is_refused(broker):
    tid = unique("anonymous")
    producer = begin(broker.port, tid)
    assert produce(broker.port, None, producer, 0, [b"x"]) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_fenced_producers_batch_is_refused_with_invalid_producer_epoch(broker):
    tid = unique("zombie")
    zombie = begin(broker.port, tid)
    assert init(broker.port, tid).error_code == ErrorCode.NONE  # a new producer: the zombie's epoch is old
    assert produce(broker.port, tid, zombie, 0, [b"late"]) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_batch_after_the_transaction_ended_needs_the_partition_added_again(broker):
    tid = unique("late")
    producer = begin(broker.port, tid)
    assert produce(broker.port, tid, producer, 0, [b"in"]) == ErrorCode.NONE
    end_and_wait(broker.port, tid, producer, commit=True)
    # A late batch of the finished transaction must not open a transaction no marker would end.
    end_offset = read_committed(broker.port).high_watermark
    assert produce(broker.port, tid, producer, 1, [b"late"]) == ErrorCode.INVALID_TXN_STATE
    assert read_committed(broker.port).high_watermark == end_offset


def test_adding_an_unknown_partition_adds_nothing_and_says_which(broker):
    tid = unique("unknown")
    answer = init(broker.port, tid)
    producer = (answer.producer_id, answer.producer_epoch)
    assert add(broker.port, tid, producer, {TOPIC: [0, 7], "no-such-topic": [0]}) == {
        (TOPIC, 0): ErrorCode.OPERATION_NOT_ATTEMPTED, (TOPIC, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert describe(broker.port, tid).transaction_state == "Empty"


def test_the_brokers_batched_form_adds_or_only_verifies(broker):
    tid_a, tid_b = unique("batched-a"), unique("batched-b")
    a = begin(broker.port, tid_a, partitions=(0,))
    answer = init(broker.port, tid_b)
    b = (answer.producer_id, answer.producer_epoch)
    topic = AddPartitionsToTxn.AddPartitionsToTxnTopic
    request = AddPartitionsToTxn(transactions=[
        AddPartitionsToTxn.AddPartitionsToTxnTransaction(transactional_id=tid_a, producer_id=a[0], producer_epoch=a[1],
                                                         verify_only=True, topics=[topic(name=TOPIC, partitions=[0, 1])]),
        AddPartitionsToTxn.AddPartitionsToTxnTransaction(transactional_id=tid_b, producer_id=b[0], producer_epoch=b[1],
                                                         verify_only=False, topics=[topic(name=TOPIC, partitions=[1])])])
    answer = call(broker.port, "AddPartitionsToTxn", 5, request)
    found = {(result.transactional_id, topic.name, partition.partition_index): partition.partition_error_code
             for result in answer.results_by_transaction for topic in result.topic_results
             for partition in topic.results_by_partition}
    assert found == {(tid_a, TOPIC, 0): ErrorCode.NONE, (tid_a, TOPIC, 1): ErrorCode.TRANSACTION_ABORTABLE,
                     (tid_b, TOPIC, 1): ErrorCode.NONE}
    assert [t.partitions for t in describe(broker.port, tid_a).topics] == [[0]]  # verifying added nothing
    assert [t.partitions for t in describe(broker.port, tid_b).topics] == [[1]]


def test_end_txn_is_answered_for_retries_and_refused_out_of_order(broker):
    tid = unique("end")
    producer = begin(broker.port, tid)
    assert produce(broker.port, tid, producer, 0, [b"v"]) == ErrorCode.NONE
    end_and_wait(broker.port, tid, producer, commit=True)
    assert end(broker.port, tid, producer, commit=True).error_code == ErrorCode.NONE  # a retry
    assert end(broker.port, tid, producer, commit=False).error_code == ErrorCode.INVALID_TXN_STATE
    assert end(broker.port, tid, (producer[0], producer[1] + 1), commit=True).error_code == ErrorCode.PRODUCER_FENCED
    assert end(broker.port, unique("never"), producer, commit=True).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_end_txn_v5_bumps_the_epoch_and_the_next_transaction_uses_it(broker):
    tid = unique("tv2")
    producer = begin(broker.port, tid, partitions=(1,))
    assert produce(broker.port, tid, producer, 0, [b"first"], partition=1) == ErrorCode.NONE
    answer = end(broker.port, tid, producer, commit=True, version=5)
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (0, producer[0], producer[1] + 1)
    bumped = (producer[0], producer[1] + 1)
    deadline = time.monotonic() + 10
    while describe(broker.port, tid).transaction_state != "CompleteCommit":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert add(broker.port, tid, producer, {TOPIC: [1]}) == {(TOPIC, 1): ErrorCode.PRODUCER_FENCED}
    assert add(broker.port, tid, bumped, {TOPIC: [1]}) == {(TOPIC, 1): ErrorCode.NONE}
    assert produce(broker.port, tid, bumped, 0, [b"second"], partition=1) == ErrorCode.NONE


def test_invalid_init_producer_id_requests(broker):
    assert init(broker.port, unique("long"), timeout_ms=15 * 60 * 1000 + 1).error_code == \
        ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert init(broker.port, "").error_code == ErrorCode.INVALID_REQUEST


def test_describe_transactions_shows_the_open_transaction(broker):
    tid = unique("described")
    producer = begin(broker.port, tid, partitions=(1, 0))
    state = describe(broker.port, tid)
    assert (state.error_code, state.transaction_state, state.producer_id, state.producer_epoch,
            state.transaction_timeout_ms) == (0, "Ongoing", producer[0], producer[1], 60000)
    assert [(t.topic, t.partitions) for t in state.topics] == [(TOPIC, [0, 1])]
    assert describe(broker.port, unique("nobody")).error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_list_transactions_filters_by_state_producer_duration_and_pattern(broker):
    tid = unique("listed")
    producer = begin(broker.port, tid)

    def listed(version=1, **filters):
        answer = call(broker.port, "ListTransactions", version, ListTransactions(**filters))
        return answer.error_code, answer.unknown_state_filters, {t.transactional_id: t.transaction_state
                                                                  for t in answer.transaction_states}

    code, unknown, states = listed(state_filters=["Ongoing", "Bogus"])
    assert (code, unknown, states[tid]) == (0, ["Bogus"], "Ongoing")
    assert all(state == "Ongoing" for state in states.values())
    assert listed(state_filters=["Bogus"])[2] == {}
    assert listed(producer_id_filters=[producer[0]])[2] == {tid: "Ongoing"}
    assert tid not in listed(duration_filter=3_600_000)[2]
    assert listed(version=2, transactional_id_pattern=tid.replace("-", "."))[2] == {tid: "Ongoing"}
    assert listed(version=2, transactional_id_pattern="(")[0] == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_transactional_offsets_need_the_groups_partition_in_the_transaction(broker):
    TxnOffsetCommit = API_BY_NAME["TxnOffsetCommit"].request_class
    AddOffsetsToTxn = API_BY_NAME["AddOffsetsToTxn"].request_class
    call(broker.port, "FindCoordinator", 4, FindCoordinator(key_type=0, coordinator_keys=["offsets-group"]))
    tid = unique("offsets")
    producer = begin(broker.port, tid)

    def commit(version):
        partition = TxnOffsetCommit.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=1)
        body = TxnOffsetCommit(transactional_id=tid, group_id="offsets-group", producer_id=producer[0],
                               producer_epoch=producer[1],
                               topics=[TxnOffsetCommit.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[partition])])
        return call(broker.port, "TxnOffsetCommit", version, body).topics[0].partitions[0].error_code

    assert commit(3) == ErrorCode.INVALID_TXN_STATE
    assert commit(4) == ErrorCode.TRANSACTION_ABORTABLE
    added = call(broker.port, "AddOffsetsToTxn", 3, AddOffsetsToTxn(
        transactional_id=tid, producer_id=producer[0], producer_epoch=producer[1], group_id="offsets-group"))
    assert added.error_code == ErrorCode.NONE
    assert commit(3) == ErrorCode.NONE


@pytest.mark.parametrize("version", range(0, 6))
def test_transactional_offsets_of_topics_and_partitions_that_do_not_exist_are_refused(broker, version):
    """Kafka (KafkaApis.handleTxnOffsetCommitRequest): a topic its metadata does not have, or a partition the
    topic does not have, is UNKNOWN_TOPIC_OR_PARTITION and kept out of the transaction; the rest is committed."""
    TxnOffsetCommit = API_BY_NAME["TxnOffsetCommit"].request_class
    AddOffsetsToTxn = API_BY_NAME["AddOffsetsToTxn"].request_class
    OffsetFetch = API_BY_NAME["OffsetFetch"].request_class
    group, tid = unique("txn-unknown-topics"), unique("txn-unknown-topics")
    call(broker.port, "FindCoordinator", 4, FindCoordinator(key_type=0, coordinator_keys=[group]))
    answer = init(broker.port, tid)
    producer = (answer.producer_id, answer.producer_epoch)
    if version < 5:  # from v5 (transaction version 2) the commit adds the group's partition itself
        assert call(broker.port, "AddOffsetsToTxn", 3, AddOffsetsToTxn(transactional_id=tid, producer_id=producer[0],
                                                                        producer_epoch=producer[1], group_id=group)
                    ).error_code == ErrorCode.NONE
    topic, partition = TxnOffsetCommit.TxnOffsetCommitRequestTopic, \
        TxnOffsetCommit.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition
    body = TxnOffsetCommit(transactional_id=tid, group_id=group, producer_id=producer[0], producer_epoch=producer[1], topics=[
        topic(name=TOPIC, partitions=[partition(partition_index=index, committed_offset=5) for index in (0, 2)]),
        topic(name="no-such-topic", partitions=[partition(partition_index=0, committed_offset=5)])])
    answer = call(broker.port, "TxnOffsetCommit", version, body)
    assert [[p.error_code for p in t.partitions] for t in answer.topics] == [
        [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]]
    end_and_wait(broker.port, tid, producer, commit=True)
    fetch = OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id=group, topics=None)])
    [held] = call(broker.port, "OffsetFetch", 8, fetch).groups
    assert [(t.name, p.partition_index, p.committed_offset) for t in held.topics for p in t.partitions] == [(TOPIC, 0, 5)]


def test_the_broker_finalizes_transaction_version_2(broker):
    answer = call(broker.port, "ApiVersions", 3, API_BY_NAME["ApiVersions"].request_class(
        client_software_name="test", client_software_version="1"))
    assert [(f.name, f.min_version_level, f.max_version_level) for f in answer.finalized_features] == [
        ("transaction.version", 2, 2)]
    assert answer.finalized_features_epoch >= 0


def test_transaction_version_2_writes_add_their_partitions_themselves(broker):
    TxnOffsetCommit = API_BY_NAME["TxnOffsetCommit"].request_class
    call(broker.port, "FindCoordinator", 4, FindCoordinator(key_type=0, coordinator_keys=["tv2-group"]))
    tid = unique("implicit")
    answer = init(broker.port, tid)
    producer = (answer.producer_id, answer.producer_epoch)
    assert produce(broker.port, tid, producer, 0, [b"v"], partition=1, version=11) == ErrorCode.TRANSACTION_ABORTABLE
    assert produce(broker.port, tid, producer, 0, [b"v"], partition=1, version=12) == ErrorCode.NONE
    partition = TxnOffsetCommit.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
        partition_index=1, committed_offset=1)
    body = TxnOffsetCommit(transactional_id=tid, group_id="tv2-group", producer_id=producer[0],
                           producer_epoch=producer[1],
                           topics=[TxnOffsetCommit.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[partition])])
    assert call(broker.port, "TxnOffsetCommit", 5, body).topics[0].partitions[0].error_code == ErrorCode.NONE
    state = describe(broker.port, tid)
    assert state.transaction_state == "Ongoing"
    assert sorted(t.topic for t in state.topics) == ["__consumer_offsets", TOPIC]
    answer = end(broker.port, tid, producer, commit=True, version=5)
    assert (answer.error_code, answer.producer_epoch) == (ErrorCode.NONE, producer[1] + 1)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_fenced_producer_is_told_in_the_code_its_request_version_knows(broker, version):
    """KIP-588: PRODUCER_FENCED (90) to versions that know it, INVALID_PRODUCER_EPOCH (47) to older ones, per
    API as Kafka's KafkaApis: InitProducerId below v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn below v2."""
    AddOffsetsToTxn = API_BY_NAME["AddOffsetsToTxn"].request_class
    tid = unique(f"fenced-v{version}")
    old = begin(broker.port, tid)
    current = init(broker.port, tid)  # a new producer of the same id fences the first (and aborts its transaction)
    while current.error_code == ErrorCode.CONCURRENT_TRANSACTIONS:
        current = init(broker.port, tid)
    assert current.error_code == ErrorCode.NONE and current.producer_epoch > old[1]
    stale = (current.producer_id, old[1])

    def told(api: str) -> int:
        return ErrorCode.PRODUCER_FENCED if version >= {"InitProducerId": 4}.get(api, 2) else \
            ErrorCode.INVALID_PRODUCER_EPOCH

    assert add(broker.port, tid, stale, {TOPIC: [1]}, version=version) == {(TOPIC, 1): told("AddPartitionsToTxn")}
    assert call(broker.port, "AddOffsetsToTxn", version, AddOffsetsToTxn(
        transactional_id=tid, producer_id=stale[0], producer_epoch=stale[1],
        group_id="fenced")).error_code == told("AddOffsetsToTxn")
    assert end(broker.port, tid, stale, commit=True, version=version).error_code == told("EndTxn")
    for init_version in (version, version + 2):  # InitProducerId naming an epoch not its own (v3+ carries one)
        if init_version >= 3:
            answer = call(broker.port, "InitProducerId", init_version, InitProducerId(
                transactional_id=tid, transaction_timeout_ms=60000, producer_id=current.producer_id,
                producer_epoch=current.producer_epoch + 5))
            assert answer.error_code == (ErrorCode.PRODUCER_FENCED if init_version >= 4
                                         else ErrorCode.INVALID_PRODUCER_EPOCH)


def test_describe_producers_tells_a_topic_it_does_not_know_with_kafkas_message(broker):
    """Kafka's KafkaApis refuses an unknown topic with ApiError's message; a partition past the topic's count
    is the replica manager's answer, without one."""
    DescribeProducers = API_BY_NAME["DescribeProducers"].request_class
    answer = call(broker.port, "DescribeProducers", 0, DescribeProducers(topics=[
        DescribeProducers.TopicRequest(name=TOPIC, partition_indexes=[0, 9]),
        DescribeProducers.TopicRequest(name="never-made", partition_indexes=[0])]))
    known, unknown = answer.topics
    assert [(p.error_code, p.error_message) for p in known.partitions] == [
        (ErrorCode.NONE, None), (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)]
    assert [(p.error_code, p.error_message) for p in unknown.partitions] == [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]
