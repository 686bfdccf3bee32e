"""The transaction coordinator over a real __transaction_state partition whose writes fail or wait (DESIGN.md
rule 11): a decision counts only once its record is durable; one whose append or fsync fails is no decision,
the producer hears a retriable error, and its retry decides once writes work again.

The handlers are called directly over tests/kbroker/in_memory_parts.py (as tests/group/test_durable_group_state.py
does for groups): a real TxnShell, real partitions over real logs in tmp_path, and the markers written to them.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kbroker.group.shell import GroupShell
from kbroker.handlers import add_partitions_to_txn, describe_transactions, end_txn, init_producer_id
from kbroker.log.clock import FakeClock
from kbroker.producer_ids import ProducerIdBlock
from kbroker.txn.remote import VerificationGuards
from kbroker.txn.shell import TRANSACTION_STATE_TOPIC, TxnShell
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import iter_batches
from kbroker.wire.schema import API_BY_NAME
from tests.kbroker.in_memory_parts import (FULL_DISK, FailingAppends, MemoryFlusher, MemoryNode, answer_of,
                                           fail_writes, replicas_on_disk, running, topic_led_here)

pytestmark = pytest.mark.trio

InitProducerIdRequest = API_BY_NAME["InitProducerId"].request_class
AddPartitionsToTxnRequest = API_BY_NAME["AddPartitionsToTxn"].request_class
EndTxnRequest = API_BY_NAME["EndTxn"].request_class
DescribeTransactionsRequest = API_BY_NAME["DescribeTransactions"].request_class


@pytest.fixture
def flusher() -> MemoryFlusher:
    return MemoryFlusher()


@pytest.fixture
async def node(tmp_path, flusher, nursery) -> MemoryNode:
    """A node leading "events" and the one __transaction_state partition (appends failing at will), its
    transaction shell running, producer ids in hand."""
    node = MemoryNode(topic_led_here("events"), topic_led_here(TRANSACTION_STATE_TOPIC),
                      open_replica=replicas_on_disk(tmp_path, flusher),
                      settings={"transaction.state.log.num.partitions": 1})
    node.replicas[(TRANSACTION_STATE_TOPIC, 0)] = FailingAppends(node.partition(TRANSACTION_STATE_TOPIC, 0))
    node.producer_ids = ProducerIdBlock()
    node.producer_ids.next_id, node.producer_ids.end = 1000, 2000
    node.txn_guards = VerificationGuards()
    node.groups = GroupShell(node, FakeClock())  # no offsets in these transactions: never loaded
    await start_shell(node, nursery)
    return node


async def start_shell(node: MemoryNode, nursery) -> None:
    """A new coordinator, rebuilt from the __transaction_state partition's records."""
    node.transactions = await running(TxnShell(node, FakeClock()), nursery)


def fail(node: MemoryNode, flusher: MemoryFlusher, how: str | None) -> None:
    fail_writes(node, flusher, TRANSACTION_STATE_TOPIC, how)


async def begin(node) -> tuple[int, int]:
    """A producer of "tx" with events-0 in its open transaction: (producer id, epoch)."""
    init = await answer_of(init_producer_id, node, "InitProducerId", 4, InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1))
    assert init.error_code == ErrorCode.NONE
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="events", partitions=[0])
    added = await answer_of(add_partitions_to_txn, node, "AddPartitionsToTxn", 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx", v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch, v3_and_below_topics=[topic]))
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.NONE
    return init.producer_id, init.producer_epoch


async def end(node, producer: tuple[int, int]) -> int:
    """EndTxn v4 committing the producer's transaction: its error code."""
    request = EndTxnRequest(transactional_id="tx", producer_id=producer[0], producer_epoch=producer[1], committed=True)
    return (await answer_of(end_txn, node, "EndTxn", 4, request)).error_code


async def state(node) -> str:
    [described] = (await answer_of(describe_transactions, node, "DescribeTransactions", 0,
                                   DescribeTransactionsRequest(transactional_ids=["tx"]))).transaction_states
    return described.transaction_state


def markers_in_events(node) -> int:
    log = node.partition("events", 0).log
    data = log.read(log.log_start_offset, 1 << 20, upper_bound=log.log_end_offset)
    return 0 if data is None else sum(header.is_control for _, header in iter_batches(data.read()))


@pytest.mark.parametrize("how", ["append", "fsync"])
async def test_a_commit_decision_not_written_is_no_decision_and_the_retry_commits(node, flusher, nursery, how):
    producer = await begin(node)
    fail(node, flusher, how)
    assert await end(node, producer) == ErrorCode.COORDINATOR_NOT_AVAILABLE  # the client retries it
    await trio.testing.wait_all_tasks_blocked()
    assert await state(node) == "Ongoing"  # not PrepareCommit, not CompleteCommit
    assert markers_in_events(node) == 0
    if how == "append":  # nothing of it reached the log: a coordinator loaded from it sees the transaction open
        await start_shell(node, nursery)
        assert await state(node) == "Ongoing"

    fail(node, flusher, None)
    assert await end(node, producer) == ErrorCode.NONE
    await trio.testing.wait_all_tasks_blocked()  # the markers, then the completion
    assert await state(node) == "CompleteCommit" and markers_in_events(node) == 1
    await start_shell(node, nursery)
    assert await state(node) == "CompleteCommit"


async def test_a_decision_is_shown_and_answered_only_once_durable(node, flusher, nursery):
    producer = await begin(node)
    flusher.held = True
    answers = []

    async def commit():
        answers.append(await end(node, producer))

    nursery.start_soon(commit)
    await trio.testing.wait_all_tasks_blocked()
    assert not answers and await state(node) == "Ongoing" and markers_in_events(node) == 0
    assert await end(node, producer) == ErrorCode.CONCURRENT_TRANSACTIONS  # a retry meanwhile: retried again
    flusher.release()
    await trio.testing.wait_all_tasks_blocked()
    assert answers == [ErrorCode.NONE]
    assert await state(node) == "CompleteCommit" and markers_in_events(node) == 1


async def test_a_completion_not_written_is_written_again(node, flusher, autojump_clock):
    producer = await begin(node)
    failing = node.partition(TRANSACTION_STATE_TOPIC, 0)
    failing.failing, failing.appends_before_failing = FULL_DISK, 1  # the decision is written, the completion not
    assert await end(node, producer) == ErrorCode.NONE
    await trio.testing.wait_all_tasks_blocked()
    assert await state(node) == "PrepareCommit" and markers_in_events(node) == 1  # the producer waits, retrying
    fail(node, flusher, None)
    await trio.sleep(1)  # the coordinator writes the completion again (Kafka's marker channel retries it)
    assert await state(node) == "CompleteCommit" and markers_in_events(node) == 1
