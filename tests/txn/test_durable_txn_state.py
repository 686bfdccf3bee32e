"""The transaction coordinator over a real __transaction_state partition whose writes fail or wait (issue 26):
a transaction's move (InitProducerId's epoch, AddPartitionsToTxn, EndTxn's decision, the completion) counts only
once its record is durable; a failed write is answered COORDINATOR_NOT_AVAILABLE, the state stays as the log
holds it, and no marker is written for a decision that was not.

The handlers are called directly over tests/kbroker/in_memory_parts.py: a real TxnShell, real Partitions over
real Logs in tmp_path, fsyncs run by a MemoryFlusher the test holds back or makes fail, and appends that raise
while the test says so (as a full disk's would).
"""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing

from kbroker.handlers import add_partitions_to_txn, describe_transactions, end_txn, init_producer_id
from kbroker.log.clock import FakeClock
from kbroker.txn.remote import VerificationGuards
from kbroker.txn.shell import TRANSACTION_STATE_TOPIC, TxnShell
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME
from tests.kbroker.in_memory_parts import (FailingAppends, MemoryFlusher, MemoryNode, answer_of, fail_writes,
                                           replicas_on_disk, running, topic_led_here)

pytestmark = pytest.mark.trio

InitProducerIdRequest = API_BY_NAME["InitProducerId"].request_class
AddPartitionsToTxnRequest = API_BY_NAME["AddPartitionsToTxn"].request_class
EndTxnRequest = API_BY_NAME["EndTxn"].request_class
DescribeTransactionsRequest = API_BY_NAME["DescribeTransactions"].request_class

TID = "payments"


class ProducerIds:
    """The node's producer ids, without a controller to hand out blocks."""

    def __init__(self) -> None:
        self._ids = itertools.count(7000)

    def available(self, broker) -> bool:
        return True

    def take(self, broker) -> int:
        return next(self._ids)


@pytest.fixture
def flusher() -> MemoryFlusher:
    return MemoryFlusher()


@pytest.fixture
async def node(tmp_path, flusher, nursery) -> MemoryNode:
    """A node leading "events" and the one __transaction_state partition (appends failing at will), its shell running."""
    node = MemoryNode(topic_led_here("events", 2), topic_led_here(TRANSACTION_STATE_TOPIC),
                      open_replica=replicas_on_disk(tmp_path, flusher),
                      settings={"transaction.state.log.num.partitions": 1})
    node.producer_ids = ProducerIds()
    node.txn_guards = VerificationGuards()
    node.replicas[(TRANSACTION_STATE_TOPIC, 0)] = FailingAppends(node.partition(TRANSACTION_STATE_TOPIC, 0))
    await start_shell(node, nursery)
    return node


async def start_shell(node: MemoryNode, nursery) -> None:
    """A new coordinator, rebuilt from the __transaction_state partition's records."""
    node.transactions = await running(TxnShell(node, FakeClock()), nursery)


def fail(node, flusher, how: str | None) -> None:
    fail_writes(node, flusher, TRANSACTION_STATE_TOPIC, how)


async def init(node, producer=(-1, -1)):
    request = InitProducerIdRequest(transactional_id=TID, transaction_timeout_ms=60_000, producer_id=producer[0],
                                    producer_epoch=producer[1])
    return await answer_of(init_producer_id, node, "InitProducerId", 4, request)


async def add(node, producer, *indexes) -> list[int]:
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    request = AddPartitionsToTxnRequest(v3_and_below_transactional_id=TID, v3_and_below_producer_id=producer[0],
                                        v3_and_below_producer_epoch=producer[1],
                                        v3_and_below_topics=[topic(name="events", partitions=list(indexes))])
    answer = await answer_of(add_partitions_to_txn, node, "AddPartitionsToTxn", 3, request)
    return [result.partition_error_code for topic in answer.results_by_topic_v3_and_below
            for result in topic.results_by_partition]


async def end(node, producer, commit: bool) -> int:
    request = EndTxnRequest(transactional_id=TID, producer_id=producer[0], producer_epoch=producer[1],
                            committed=commit)
    return (await answer_of(end_txn, node, "EndTxn", 3, request)).error_code


async def state(node) -> str:
    request = DescribeTransactionsRequest(transactional_ids=[TID])
    [described] = (await answer_of(describe_transactions, node, "DescribeTransactions", 0, request)).transaction_states
    return described.transaction_state


def markers(node) -> list[int]:
    """How many records (markers: nothing else is written) each "events" partition holds."""
    return [node.partition("events", index).log.log_end_offset for index in range(2)]


async def ongoing(node) -> tuple[int, int]:
    answer = await init(node)
    assert answer.error_code == ErrorCode.NONE
    producer = answer.producer_id, answer.producer_epoch
    assert await add(node, producer, 0, 1) == [ErrorCode.NONE, ErrorCode.NONE]
    return producer


@pytest.mark.parametrize("how", ["append", "fsync"])
async def test_an_end_txn_not_written_is_refused_writes_no_marker_and_its_retry_decides(node, flusher, nursery, how):
    producer = await ongoing(node)
    fail(node, flusher, how)
    assert await end(node, producer, True) == ErrorCode.COORDINATOR_NOT_AVAILABLE  # retriable: the client retries
    await trio.testing.wait_all_tasks_blocked()
    assert await state(node) == "Ongoing" and markers(node) == [0, 0]
    fail(node, flusher, None)
    if how == "append":  # nothing of it reached the log: a coordinator loaded from it has the transaction open
        await start_shell(node, nursery)
        assert await state(node) == "Ongoing"
    assert await end(node, producer, True) == ErrorCode.NONE
    await trio.testing.wait_all_tasks_blocked()
    assert await state(node) == "CompleteCommit" and markers(node) == [1, 1]
    await start_shell(node, nursery)
    assert await state(node) == "CompleteCommit"


async def test_a_decision_waits_for_its_fsync_and_the_id_answers_concurrent_transactions_meanwhile(node, flusher,
                                                                                                 nursery):
    producer = await ongoing(node)
    flusher.held = True
    answers = {}

    async def ask(name, call):
        answers[name] = await call

    nursery.start_soon(ask, "end", end(node, producer, False))
    await trio.testing.wait_all_tasks_blocked()
    assert not answers and await state(node) == "Ongoing" and markers(node) == [0, 0]
    assert await end(node, producer, False) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert (await init(node, producer)).error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    flusher.release()
    await trio.testing.wait_all_tasks_blocked()
    assert answers == {"end": ErrorCode.NONE}
    assert await state(node) == "CompleteAbort" and markers(node) == [1, 1]


async def test_an_epoch_bump_not_written_leaves_the_producers_epoch(node, flusher, nursery):
    first = await init(node)
    producer = first.producer_id, first.producer_epoch
    fail(node, flusher, "append")
    assert (await init(node, producer)).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    fail(node, flusher, None)
    again = await init(node, producer)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (ErrorCode.NONE, producer[0], producer[1] + 1)


async def test_partitions_whose_addition_is_not_written_are_not_in_the_transaction(node, flusher, nursery):
    first = await init(node)
    producer = first.producer_id, first.producer_epoch
    fail(node, flusher, "append")
    assert await add(node, producer, 0) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
    assert await state(node) == "Empty"
    fail(node, flusher, None)
    assert await end(node, producer, True) == ErrorCode.INVALID_TXN_STATE  # nothing to commit


async def test_a_completion_not_written_is_written_again_and_the_transaction_stays_decided(node, flusher, nursery):
    producer = await ongoing(node)
    wrapper = node.partition(TRANSACTION_STATE_TOPIC, 0)
    wrapper.failing, wrapper.appends_before_failing = OSError(28, "No space left on device"), 1  # the decision only
    assert await end(node, producer, True) == ErrorCode.NONE
    await trio.testing.wait_all_tasks_blocked()
    assert await state(node) == "PrepareCommit" and markers(node) == [1, 1]
    assert await end(node, producer, True) == ErrorCode.CONCURRENT_TRANSACTIONS
    fail(node, flusher, None)
    node.transactions.clock.advance(500)
    node.transactions.fire_timers()
    await trio.testing.wait_all_tasks_blocked()
    assert await state(node) == "CompleteCommit" and markers(node) == [1, 1]
    await start_shell(node, nursery)
    assert await state(node) == "CompleteCommit"
