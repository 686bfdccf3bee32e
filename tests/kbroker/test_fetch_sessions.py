"""Fetch sessions (KIP-227): the contexts a Fetch request gets, the session errors, which partitions an
incremental answer carries and the order a session's partitions are read in, and Kafka's eviction rules
(Kafka 4.x's FetchManager, FetchSessionCacheShard and FetchContext are the reference; FetchSessionTest's
stories are retold here); then random sequences of requests, answers and time against a model."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kbroker.fetch_sessions import (EVICTION_MS, FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, CachedPartition,
                                    ContextKind, FetchAnswer, FetchPartition, FetchSessionCache, PartitionOutcome,
                                    next_epoch, partition_key)
from kbroker.wire.errors import ErrorCode, error_name
from kbroker.wire.primitives import ZERO_UUID

NONE = ErrorCode.NONE
NOT_FOUND, BAD_EPOCH = ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH
TOPIC_ID_ERROR, NOT_LEADER = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER

FOO, BAR, GONE = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
NAMES = {FOO: "foo", BAR: "bar"}  # GONE: a topic id metadata does not know
IDS, NAMED = 17, 12  # request versions with and without topic ids
EVICTION = 100  # eviction_ms in these tests


def part(topic_id: uuid.UUID, index: int, fetch_offset: int = 0, **values) -> FetchPartition:
    """A v13+ request's partition: by topic id, the name left to metadata."""
    return FetchPartition(topic_id, None, index, fetch_offset, values.pop("partition_max_bytes", 1024), **values)


def by_name(name: str, index: int, fetch_offset: int = 0) -> FetchPartition:
    """A request's partition before v13: by topic name."""
    return FetchPartition(ZERO_UUID, name, index, fetch_offset, 1024)


FOO0, FOO1, FOO2, BAR0, BAR1 = part(FOO, 0), part(FOO, 1), part(FOO, 2), part(BAR, 0), part(BAR, 1)


def outcome(partition, high_watermark: int = 10, *, records: bool = False, log_start: int = 0,
            last_stable: int | None = None, error: int = NONE, preferred: int = -1,
            diverging: bool = False) -> PartitionOutcome:
    key = partition.key if isinstance(partition, FetchPartition) else partition
    return PartitionOutcome(key, records, high_watermark, log_start,
                            high_watermark if last_stable is None else last_stable, error, preferred, diverging)


def new_cache(max_slots: int = 3, **kwargs) -> FetchSessionCache:
    return FetchSessionCache(max_slots, eviction_ms=EVICTION, session_ids=itertools.count(1).__next__, **kwargs)


@pytest.fixture
def cache() -> FetchSessionCache:
    return new_cache()


def context(cache, session_id, epoch, partitions=(), forgotten=(), *, version=IDS, follower=False, now_ms=0,
            names=NAMES):
    return cache.new_context(session_id, epoch, list(partitions), [getattr(p, "key", p) for p in forgotten],
                             version=version, follower=follower, now_ms=now_ms, topic_names=names)


def open_session(cache, partitions, *, now_ms=0, follower=False, version=IDS, high_watermark=10) -> int:
    opening = context(cache, INVALID_SESSION_ID, INITIAL_EPOCH, partitions, version=version, follower=follower,
                      now_ms=now_ms)
    assert opening.kind is ContextKind.FULL
    answer = cache.answer(opening, [outcome(p, high_watermark) for p in opening.partitions], now_ms)
    assert answer.error_code == NONE
    return answer.session_id


def keys(partitions) -> list:
    return [partition.key for partition in partitions]


def held(cache, session_id) -> list:
    return [cached.request.key for cached in cache.session(session_id).partitions]


def epoch_of(cache, session_id) -> int:
    return cache.session(session_id).epoch


def sizes(count: int) -> list[FetchPartition]:
    return [part(FOO, index) for index in range(count)]


# -- epochs and keys ------------------------------------------------------------------------


def test_next_epoch_counts_up_wraps_to_one_and_keeps_final():
    assert [next_epoch(epoch) for epoch in (0, 1, 41, 2**31 - 2)] == [1, 2, 42, 2**31 - 1]
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == next_epoch(-7) == FINAL_EPOCH


def test_partitions_are_told_apart_by_topic_id_else_by_name():
    assert partition_key(FOO, "foo", 3) == partition_key(FOO, None, 3) == (FOO, 3)
    assert partition_key(ZERO_UUID, "foo", 3) == ("foo", 3) != partition_key(ZERO_UUID, "bar", 3)
    assert by_name("foo", 1).key == ("foo", 1) and FOO1.key == (FOO, 1)


# -- sessionless and full requests ----------------------------------------------------------


def test_epoch_minus_one_without_a_session_is_sessionless(cache):
    request = context(cache, INVALID_SESSION_ID, FINAL_EPOCH, [BAR0, FOO1, part(BAR, 0, 99)], forgotten=[FOO0])
    assert (request.kind, request.error_code, request.closed_session_id) == (ContextKind.SESSIONLESS, NONE, 0)
    assert keys(request.partitions) == [BAR0.key, FOO1.key]  # request order, once: first place, last values
    assert [(p.topic_name, p.fetch_offset) for p in request.partitions] == [("bar", 99), ("foo", 0)]
    answer = cache.answer(request, [outcome(FOO1), outcome(BAR0, records=True)], now_ms=5)
    assert (answer.error_code, answer.session_id, answer.partitions) == (NONE, 0, (FOO1.key, BAR0.key))
    assert len(cache) == 0


def test_epoch_minus_one_closes_the_session_it_names_and_answers_sessionless(cache):
    session_id = open_session(cache, [FOO0, FOO1])
    request = context(cache, session_id, FINAL_EPOCH, [BAR0])
    assert (request.kind, request.closed_session_id, keys(request.partitions)) == (
        ContextKind.SESSIONLESS, session_id, [BAR0.key])
    assert cache.session(session_id) is None  # closed at once, before the answer
    assert cache.answer(request, [outcome(BAR0)], 0) == FetchAnswer(NONE, INVALID_SESSION_ID, (BAR0.key,))
    assert len(cache) == 0
    assert context(cache, 12345, FINAL_EPOCH).closed_session_id == 0  # an unknown session: nothing to close


def test_epoch_zero_opens_a_session_when_answered(cache):
    unknown = part(GONE, 4)
    request = context(cache, INVALID_SESSION_ID, INITIAL_EPOCH, [BAR0, FOO1, unknown], [FOO0], follower=True, now_ms=7)
    assert (request.kind, request.request_epoch, request.closed_session_id) == (ContextKind.FULL, 0, 0)
    assert [p.topic_name for p in request.partitions] == ["bar", "foo", None]  # None: answer UNKNOWN_TOPIC_ID
    assert len(cache) == 0  # Kafka's FullFetchContext opens the session with its answer
    found = [outcome(FOO1, 30, log_start=2, last_stable=25), outcome(unknown, -1, error=ErrorCode.UNKNOWN_TOPIC_ID),
             outcome(BAR0, 20, records=True)]
    answer = cache.answer(request, found, now_ms=9)
    assert (answer.error_code, answer.session_id, answer.partitions) == (NONE, 1, (FOO1.key, unknown.key, BAR0.key))
    view = cache.session(1)
    assert (view.epoch, view.privileged, view.uses_topic_ids, view.creation_ms, view.last_used_ms) == (
        1, True, True, 9, 9)
    assert list(view.partitions) == [  # in the answer's order, with what it said
        CachedPartition(replace(FOO1, topic_name="foo"), 30, 2, 25),
        CachedPartition(unknown, -1, 0, -1),
        CachedPartition(replace(BAR0, topic_name="bar"), 20, 0, 20)]
    assert (len(cache), cache.partition_count) == (1, 3)


def test_epoch_zero_closes_the_session_it_names_before_opening_another(cache):
    old = open_session(cache, [FOO0, FOO1])
    request = context(cache, old, INITIAL_EPOCH, [BAR0], forgotten=[BAR0])  # forgotten: ignored in full requests
    assert (request.kind, request.closed_session_id, keys(request.partitions)) == (ContextKind.FULL, old, [BAR0.key])
    assert cache.session(old) is None
    new = cache.answer(request, [outcome(BAR0)], 0).session_id
    assert new != old and held(cache, new) == [BAR0.key] and len(cache) == 1
    assert context(cache, old, 1).error_code == NOT_FOUND


def test_a_request_without_topic_ids_opens_a_session_keyed_by_names(cache):
    session_id = open_session(cache, [by_name("foo", 0), by_name("bar", 1)], version=NAMED)
    assert not cache.session(session_id).uses_topic_ids
    later = context(cache, session_id, 1, [by_name("foo", 0, 40)], forgotten=[("bar", 1)], version=NAMED)
    assert (later.kind, later.updated, later.removed) == (ContextKind.INCREMENTAL, (("foo", 0),), (("bar", 1),))
    assert [(p.topic_name, p.fetch_offset) for p in later.partitions] == [("foo", 40)]


def test_an_empty_full_request_opens_an_empty_session_that_the_next_request_closes(cache):
    session_id = open_session(cache, [])  # as Kafka does (FetchSessionTest.testZeroSizeFetchSession)
    assert held(cache, session_id) == []
    request = context(cache, session_id, 1)
    assert (request.kind, request.closed_session_id, request.partitions) == (ContextKind.SESSIONLESS, session_id, ())
    assert cache.answer(request, [], 0).session_id == INVALID_SESSION_ID and len(cache) == 0


def test_outcomes_for_partitions_not_named_are_left_out(cache):
    for epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        request = context(cache, INVALID_SESSION_ID, epoch, [FOO0])
        answer = cache.answer(request, [outcome(BAR1, records=True), outcome(FOO0)], 0)
        assert answer.partitions == (FOO0.key,)
    session_id = next(view.session_id for view in cache.sessions())
    assert held(cache, session_id) == [FOO0.key]
    later = context(cache, session_id, 1)
    assert cache.answer(later, [outcome(BAR1, records=True)], 0).partitions == ()


def test_a_session_learns_a_topic_name_once_metadata_knows_it_and_keeps_it(cache):
    gone = part(GONE, 0)
    session_id = open_session(cache, [FOO0, gone])
    assert [p.request.topic_name for p in cache.session(session_id).partitions] == ["foo", None]
    still = context(cache, session_id, 1)
    assert [p.topic_name for p in still.partitions] == ["foo", None]
    learnt = context(cache, session_id, 2, names={**NAMES, GONE: "gone"})
    assert [p.topic_name for p in learnt.partitions] == ["foo", "gone"]
    named_again = context(cache, session_id, 3, [part(GONE, 0, 55)], names={})  # metadata lost both topics
    assert [(p.topic_name, p.fetch_offset) for p in named_again.partitions] == [("foo", 0), ("gone", 55)]


# -- incremental requests and session errors -------------------------------------------------


def test_an_incremental_request_adds_updates_forgets_and_reads_the_session_in_order(cache):
    session_id = open_session(cache, [FOO0, FOO1, BAR0])
    request = context(cache, session_id, 1, [BAR1, part(FOO, 1, 70, partition_max_bytes=9, log_start_offset=3,
                                                          current_leader_epoch=4, last_fetched_epoch=2), FOO2],
                      forgotten=[FOO0, FOO2, part(BAR, 7)], now_ms=50)
    assert (request.kind, request.error_code, request.session_id, request.request_epoch) == (
        ContextKind.INCREMENTAL, NONE, session_id, 1)
    assert (request.added, request.updated, request.removed) == (
        (BAR1.key, FOO2.key), (FOO1.key,), (FOO0.key, FOO2.key))  # named and forgotten at once: forgotten
    assert keys(request.partitions) == [FOO1.key, BAR0.key, BAR1.key]  # in place, new ones at the end
    assert request.partitions[0] == FetchPartition(FOO, "foo", 1, 70, 9, 3, 4, 2)
    assert request.partitions[1] == replace(BAR0, topic_name="bar")  # cached values, unnamed this time
    view = cache.session(session_id)
    assert (view.epoch, view.last_used_ms, view.creation_ms) == (2, 50, 0)
    assert [(p.high_watermark, p.log_start_offset) for p in view.partitions] == [(10, 0), (10, 0), (-1, -1)]


@pytest.mark.parametrize("session, epoch, version, error", [
    ("unknown", 1, IDS, NOT_FOUND),
    ("none", 1, IDS, NOT_FOUND),  # session id 0 with an epoch above 0
    ("open", 2, IDS, BAD_EPOCH),
    ("open", -2, IDS, BAD_EPOCH),  # negative, but not FINAL_EPOCH: not a full request
    ("open", 1, NAMED, TOPIC_ID_ERROR),  # the session uses topic ids, v12 cannot
    ("named", 1, IDS, TOPIC_ID_ERROR),  # the session uses names, v13+ cannot
])
def test_session_errors_read_nothing_and_change_nothing(cache, session, epoch, version, error):
    open_id = open_session(cache, [FOO0], now_ms=3)
    named_id = open_session(cache, [by_name("foo", 0)], version=NAMED, now_ms=3)
    session_id = {"unknown": 999, "none": INVALID_SESSION_ID, "open": open_id, "named": named_id}[session]
    before = cache.sessions()
    request = context(cache, session_id, epoch, [FOO1], forgotten=[FOO0], version=version, now_ms=80)
    assert (request.kind, request.error_code, request.partitions) == (ContextKind.ERROR, error, ())
    assert request.error_message
    assert cache.answer(request, [outcome(FOO1, records=True)], 80) == FetchAnswer(error, INVALID_SESSION_ID, ())
    assert cache.throttled(request) == FetchAnswer(error, INVALID_SESSION_ID, ())
    assert cache.sessions() == before  # no epoch moved on, no partition changed, no session used


def test_a_session_emptied_by_forgetting_is_closed_and_answered_sessionless(cache):
    session_id = open_session(cache, [FOO0, FOO1])
    request = context(cache, session_id, 1, [BAR0], forgotten=[FOO0, FOO1, BAR0])
    assert (request.kind, request.closed_session_id, request.removed) == (
        ContextKind.SESSIONLESS, session_id, (FOO0.key, FOO1.key, BAR0.key))
    assert keys(request.partitions) == [BAR0.key]  # Kafka reads what the request named
    answer = cache.answer(request, [outcome(BAR0)], 0)
    assert (answer.session_id, answer.partitions, len(cache)) == (INVALID_SESSION_ID, (BAR0.key,), 0)


def test_sessions_hold_at_most_max_session_partitions():
    cache = new_cache(max_session_partitions=2)
    assert open_session(cache, sizes(3)) == INVALID_SESSION_ID and len(cache) == 0
    session_id = open_session(cache, sizes(2))
    assert context(cache, session_id, 1, [FOO1]).kind is ContextKind.INCREMENTAL  # an update: still 2
    request = context(cache, session_id, 2, [BAR0, BAR1], forgotten=[FOO0])
    assert (request.kind, request.closed_session_id, keys(request.partitions)) == (
        ContextKind.SESSIONLESS, session_id, [BAR0.key, BAR1.key])
    assert len(cache) == 0


def test_the_session_epoch_wraps_from_the_largest_int32_to_one(cache):
    session_id = open_session(cache, [FOO0])
    cache._sessions[session_id].epoch = 2**31 - 1  # two billion requests later
    request = context(cache, session_id, 2**31 - 1)
    assert request.kind is ContextKind.INCREMENTAL and epoch_of(cache, session_id) == 1
    assert cache.answer(request, [], 0).error_code == NONE


def test_an_answer_overtaken_by_a_later_request_of_its_session_is_an_epoch_error(cache):
    session_id = open_session(cache, [FOO0, FOO1])
    first = context(cache, session_id, 1)  # a long poll, still waiting
    second = context(cache, session_id, 2)
    assert context(cache, session_id, 2).error_code == BAD_EPOCH  # a duplicate of the second
    for answer in (cache.answer(first, [outcome(FOO0, 99, records=True)], 0), cache.throttled(first)):
        assert (answer.error_code, answer.session_id, answer.partitions) == (BAD_EPOCH, session_id, ())
    assert held(cache, session_id) == [FOO0.key, FOO1.key]
    assert cache.session(session_id).partitions[0].high_watermark == 10  # nothing remembered
    assert cache.answer(second, [outcome(FOO0, 99)], 0).partitions == (FOO0.key,)


def test_throttled_answers_carry_nothing_remember_nothing_and_open_no_session(cache):
    for epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        answer = cache.throttled(context(cache, INVALID_SESSION_ID, epoch, [FOO0]))
        assert (answer.error_code, answer.session_id, answer.partitions) == (NONE, INVALID_SESSION_ID, ())
    assert len(cache) == 0
    session_id = open_session(cache, [FOO0])
    request = context(cache, session_id, 1)
    answer = cache.throttled(request)
    assert (answer.error_code, answer.session_id, answer.partitions) == (NONE, session_id, ())
    assert cache.session(session_id).partitions[0].high_watermark == 10
    assert cache.answer(context(cache, session_id, 2), [outcome(FOO0, 11)], 0).partitions == (FOO0.key,)


def test_an_answer_after_its_session_was_closed_still_answers_with_the_session_id(cache):
    session_id = open_session(cache, [FOO0])
    request = context(cache, session_id, 1)
    context(cache, session_id, FINAL_EPOCH)  # closed meanwhile: its next request will not find it
    answer = cache.answer(request, [outcome(FOO0, 11)], 0)
    assert (answer.error_code, answer.session_id, answer.partitions) == (NONE, session_id, (FOO0.key,))
    assert context(cache, session_id, 2).error_code == NOT_FOUND


# -- which partitions an incremental answer carries ------------------------------------------


@pytest.mark.parametrize("found, carried, remembered", [
    (outcome(FOO0, 10), False, (10, 0, 10)),
    (outcome(FOO0, 10, records=True), True, (10, 0, 10)),
    (outcome(FOO0, 11), True, (11, 0, 11)),  # the high watermark moved (and the last stable offset with it)
    (outcome(FOO0, 10, last_stable=8), True, (10, 0, 8)),  # the last stable offset alone (not in Kafka's rule)
    (outcome(FOO0, 10, log_start=4), True, (10, 4, 10)),  # the log start offset moved: retention, deleteRecords
    (outcome(FOO0, 10, error=NOT_LEADER), True, (-1, 0, 10)),  # -1: carried again once the error is gone
    (outcome(FOO0, 10, preferred=2), True, (10, 0, 10)),  # a preferred read replica, each time it is named
    (outcome(FOO0, 10, diverging=True), True, (10, 0, 10)),  # a follower must truncate
], ids=["unchanged", "records", "high-watermark", "last-stable-offset", "log-start-offset", "error",
        "preferred-read-replica", "diverging-epoch"])
def test_an_incremental_answer_carries_only_news(cache, found, carried, remembered):
    session_id = open_session(cache, [FOO0])  # answered high watermark 10, log start 0, last stable 10
    answer = cache.answer(context(cache, session_id, 1), [found], 0)
    assert answer.partitions == ((FOO0.key,) if carried else ())
    cached = cache.session(session_id).partitions[0]
    assert (cached.high_watermark, cached.log_start_offset, cached.last_stable_offset) == remembered


def test_a_partition_is_carried_after_it_joins_and_after_an_error_goes(cache):
    session_id = open_session(cache, [FOO0])
    joined = context(cache, session_id, 1, [FOO1])
    assert cache.answer(joined, [outcome(FOO0), outcome(FOO1, 0, log_start=-1, last_stable=-1)], 0).partitions == (
        FOO1.key,)  # it joined remembering -1s: an empty partition's high watermark 0 is news
    failing = [outcome(FOO0, error=NOT_LEADER), outcome(FOO1, 0, log_start=-1, last_stable=-1)]
    assert cache.answer(context(cache, session_id, 2), failing, 0).partitions == (FOO0.key,)
    assert cache.answer(context(cache, session_id, 3), failing, 0).partitions == (FOO0.key,)  # told each time
    assert cache.answer(context(cache, session_id, 4), [outcome(FOO0)], 0).partitions == (FOO0.key,)  # it's gone
    assert cache.answer(context(cache, session_id, 5), [outcome(FOO0)], 0).partitions == ()


def test_an_error_opening_a_session_is_carried_again_once_gone(cache):
    request = context(cache, INVALID_SESSION_ID, INITIAL_EPOCH, [FOO0])
    session_id = cache.answer(request, [outcome(FOO0, 0, error=NOT_LEADER)], 0).session_id
    assert cache.answer(context(cache, session_id, 1), [outcome(FOO0, 0)], 0).partitions == (FOO0.key,)


def test_partitions_that_returned_records_move_to_the_end(cache):
    # FetchSessionTest.testDeprioritizesPartitionsWithRecordsOnly
    session_id = open_session(cache, [FOO1, BAR0, FOO2], high_watermark=50)
    request = context(cache, session_id, 1)
    assert keys(request.partitions) == [FOO1.key, BAR0.key, FOO2.key]
    assert cache.answer(request, [], 0).partitions == ()
    assert keys(context(cache, session_id, 2).partitions) == [FOO1.key, BAR0.key, FOO2.key]
    request = context(cache, session_id, 3)
    found = [outcome(FOO1, 60, last_stable=50), outcome(BAR0, 60, last_stable=50, records=True), outcome(FOO2, 50)]
    assert cache.answer(request, found, 0).partitions == (FOO1.key, BAR0.key)
    assert held(cache, session_id) == [FOO1.key, FOO2.key, BAR0.key]  # carried without records: it stays
    assert keys(context(cache, session_id, 4).partitions) == [FOO1.key, FOO2.key, BAR0.key]


def test_several_partitions_with_records_keep_their_order_at_the_end(cache):
    session_id = open_session(cache, [FOO0, FOO1, FOO2, BAR0])
    request = context(cache, session_id, 1)
    found = [outcome(p, records=p in (FOO2, FOO0)) for p in (FOO2, FOO1, FOO0, BAR0)]  # read in this order
    assert cache.answer(request, found, 0).partitions == (FOO2.key, FOO0.key)
    assert held(cache, session_id) == [FOO1.key, BAR0.key, FOO2.key, FOO0.key]


# -- eviction --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Existing:
    privileged: bool
    size: int
    creation_ms: int = 0
    last_used_ms: int = 0  # when its last incremental request came; its creation when none came


EVICTIONS = [  # sessions in the full cache (ids 1, 2, ...), the newcomer (privileged, size, now), the one evicted
    ("stale: unused for more than eviction_ms", [Existing(True, 50)], (False, 1, 101), 0),
    ("not stale at exactly eviction_ms", [Existing(False, 1)], (False, 5, 100), None),
    ("the least recently used stale one, the lower id first",
     [Existing(False, 1, 0, 150), Existing(False, 9), Existing(False, 9)], (False, 1, 200), 1),
    ("a privileged newcomer evicts a fresh unprivileged session", [Existing(False, 10)], (True, 1, 50), 0),
    ("the smallest unprivileged one", [Existing(False, 10), Existing(False, 5), Existing(True, 1)], (True, 1, 50), 1),
    ("an unprivileged newcomer evicts no fresh session", [Existing(False, 1)], (False, 100, 50), None),
    ("a bigger newcomer evicts a smaller settled session", [Existing(False, 5, 0, 150)], (False, 6, 160), 0),
    ("an equal one does not", [Existing(False, 5, 0, 150)], (False, 5, 160), None),
    ("a smaller one does not", [Existing(False, 5, 0, 150)], (False, 4, 160), None),
    ("settled is as of the last use, not now", [Existing(False, 1, 0, 90)], (False, 100, 150), None),
    ("an unprivileged newcomer never evicts a privileged session", [Existing(True, 1, 0, 150)], (False, 99, 160),
     None),
    ("a bigger privileged newcomer evicts a settled privileged one", [Existing(True, 5, 0, 150)], (True, 6, 160), 0),
    ("but not a fresh one", [Existing(True, 5, 0, 50)], (True, 100, 60), None),
    ("the least worth: unprivileged, then fewer partitions, then the lower id",
     [Existing(True, 1, 0, 150), Existing(False, 9, 0, 150), Existing(False, 9, 0, 150)], (False, 10, 160), 1),
]


@pytest.mark.parametrize("existing, newcomer, evicted", [row[1:] for row in EVICTIONS],
                         ids=[row[0] for row in EVICTIONS])
def test_a_new_session_evicts_as_kafka_does(existing, newcomer, evicted):
    cache = new_cache(max_slots=len(existing))
    ids = [open_session(cache, sizes(session.size), now_ms=session.creation_ms, follower=session.privileged)
           for session in existing]
    for session_id, session in zip(ids, existing):
        if session.last_used_ms != session.creation_ms:
            assert context(cache, session_id, 1, now_ms=session.last_used_ms).kind is ContextKind.INCREMENTAL
    privileged, size, now_ms = newcomer
    new_id = open_session(cache, sizes(size), now_ms=now_ms, follower=privileged)
    if evicted is None:
        assert new_id == INVALID_SESSION_ID and cache.evictions == 0
        assert sorted(view.session_id for view in cache.sessions()) == ids
    else:
        assert new_id != INVALID_SESSION_ID and cache.evictions == 1
        assert sorted(view.session_id for view in cache.sessions()) == sorted(
            [session_id for session_id in ids if session_id != ids[evicted]] + [new_id])


def test_kafkas_session_cache_story():
    # FetchSessionTest.testSessionCache: three slots, eviction after 100 ms
    cache = new_cache(max_slots=3)
    first, second, third = (open_session(cache, sizes(size), now_ms=now)
                             for size, now in ((10, 0), (20, 10), (30, 20)))
    assert open_session(cache, sizes(40), now_ms=30) == INVALID_SESSION_ID
    assert open_session(cache, sizes(5), now_ms=40) == INVALID_SESSION_ID
    context(cache, first, 1, now_ms=200)
    fourth = open_session(cache, sizes(11), now_ms=210)  # the second has gone stale
    assert {view.session_id for view in cache.sessions()} == {first, third, fourth}
    context(cache, first, 2, now_ms=400)
    context(cache, third, 1, now_ms=390)
    context(cache, fourth, 1, now_ms=400)
    fifth = open_session(cache, sizes(50), now_ms=410)  # none stale: the smallest settled one goes
    assert {view.session_id for view in cache.sessions()} == {third, fourth, fifth}
    assert open_session(cache, sizes(5), now_ms=410) == INVALID_SESSION_ID
    sixth = open_session(cache, sizes(5), now_ms=410, follower=True)  # privileged: the smallest unprivileged goes
    assert {view.session_id for view in cache.sessions()} == {third, fifth, sixth}
    assert cache.evictions == 3


def test_an_incremental_request_keeps_its_session_from_going_stale():
    # FetchSessionTest.testFetchSessionExpiration, with eviction after 100 ms
    cache = new_cache(max_slots=2)
    first = open_session(cache, [FOO0, FOO1], now_ms=0)
    second = open_session(cache, [FOO0, FOO1], now_ms=50)
    context(cache, first, 1, now_ms=100)
    third = open_session(cache, [FOO0, FOO1], now_ms=151)
    assert {view.session_id for view in cache.sessions()} == {first, third}  # the second was used longest ago


def test_no_slots_no_sessions_and_slots_must_not_be_negative():
    assert open_session(new_cache(max_slots=0), [FOO0], follower=True, now_ms=10**9) == INVALID_SESSION_ID
    assert FetchSessionCache().max_slots == 1000 and FetchSessionCache().eviction_ms == EVICTION_MS == 120_000
    with pytest.raises(ValueError):
        FetchSessionCache(-1)


def test_session_ids_are_drawn_again_while_in_use_or_zero():
    draws = iter([7, 0, 7, 7, 3])
    cache = FetchSessionCache(3, session_ids=draws.__next__)
    assert [open_session(cache, [FOO0]) for _ in range(2)] == [7, 3]
    broken = FetchSessionCache(3, session_ids=lambda: 5)
    assert open_session(broken, [FOO0]) == 5
    with pytest.raises(RuntimeError):
        open_session(broken, [FOO0])
    with pytest.raises(ValueError):
        open_session(FetchSessionCache(3, session_ids=lambda: 2**31), [FOO0])


def test_default_session_ids_are_random_int32s_above_zero():
    cache = FetchSessionCache(50)
    ids = [open_session(cache, [FOO0]) for _ in range(50)]
    assert len(set(ids)) == 50 and all(0 < session_id < 2**31 for session_id in ids)


# -- against a model -------------------------------------------------------------------------

SLOTS = 3
TOPICS = [(FOO, "foo"), (BAR, "bar"), (GONE, "gone")]  # GONE's name is known only while metadata knows it
NEWS = ["nothing", "nothing", "nothing", "records", "high watermark", "log start", "last stable", "error",
        "preferred replica", "diverging"]


@dataclass
class ModelPartition:
    request: FetchPartition
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1


@dataclass
class ModelSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    partitions: dict


def request_partitions(version: int, names: dict, max_size: int):
    """Strategy: a request's partitions (maybe one twice) as the handler hands them over."""
    def make(topic, index, offset):
        topic_id, name = topic
        if version >= 13:
            return FetchPartition(topic_id, names.get(topic_id), index, offset, 1024)
        return FetchPartition(ZERO_UUID, name, index, offset, 1024)
    return st.lists(st.builds(make, st.sampled_from(TOPICS), st.integers(0, 1), st.integers(0, 3)),
                    max_size=max_size)


class FetchSessionMachine(RuleBasedStateMachine):
    """Requests are answered at once (most of the time) or left pending and answered later, after other requests
    of their session, evictions and closes: Kafka's duplicate requests and long polls."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = FetchSessionCache(SLOTS, eviction_ms=EVICTION, session_ids=itertools.count(1).__next__)
        self.live: dict[int, ModelSession] = {}
        self.next_id = 1
        self.evictions = 0
        self.now_ms = 0
        self.names = dict(NAMES)
        self.pending = []  # (context, what the model needs to answer it, request epoch)

    @initialize(data=st.data(), followers=st.lists(st.booleans(), min_size=1, max_size=SLOTS))
    def sessions_open(self, data, followers) -> None:
        for follower in followers:
            self.full_request(data, INITIAL_EPOCH, follower, now=True)

    @rule(ms=st.sampled_from([0, 1, 30, EVICTION, EVICTION + 1]))
    def time_passes(self, ms) -> None:
        self.now_ms += ms

    @rule(known=st.booleans())
    def metadata_changes(self, known) -> None:
        if known:
            self.names[GONE] = "gone"
        else:
            self.names.pop(GONE, None)

    @rule(data=st.data(), epoch=st.sampled_from([INITIAL_EPOCH, INITIAL_EPOCH, FINAL_EPOCH]),
          follower=st.booleans(), now=st.booleans())
    def full_request(self, data, epoch, follower, now) -> None:
        session_id = data.draw(st.sampled_from([0] * (len(self.live) + 1) + [*self.live, *range(1, self.next_id)]))
        version, partitions, forgotten = self._request(data)
        request = self.cache.new_context(session_id, epoch, partitions, forgotten, version=version,
                                         follower=follower, now_ms=self.now_ms, topic_names=self.names)
        closed = self.live.pop(session_id, None)
        assert request.closed_session_id == (closed.id if closed else 0)
        named = self._named(partitions)
        assert request.kind is (ContextKind.FULL if epoch == INITIAL_EPOCH else ContextKind.SESSIONLESS)
        assert list(request.partitions) == list(named.values())
        self._asked(data, now, (request, (named, follower, version >= 13), epoch))

    @rule(data=st.data())
    def stray_incremental_request(self, data) -> None:
        """An incremental request with an unknown session id or a wrong epoch."""
        session_id = data.draw(st.sampled_from([0, *self.live, *range(1, self.next_id)]))
        session = self.live.get(session_id)
        epoch = data.draw(st.sampled_from([1, 2, -2] if session is None else [session.epoch + 1, -2]))
        version, partitions, forgotten = self._request(data)
        request = self.cache.new_context(session_id, epoch, partitions, forgotten, version=version,
                                         follower=False, now_ms=self.now_ms, topic_names=self.names)
        event(f"incremental: {error_name(request.error_code)}")
        assert request.kind is ContextKind.ERROR and request.partitions == ()
        assert request.error_code == (NOT_FOUND if session is None else BAD_EPOCH)
        self.pending.append((request, None, epoch))

    @precondition(lambda self: self.live)
    @rule(data=st.data(), now=st.booleans())
    def incremental_request(self, data, now) -> None:
        session = self.live[data.draw(st.sampled_from(sorted(self.live)))]
        session_id, epoch = session.id, session.epoch
        version = data.draw(st.sampled_from([IDS if session.uses_topic_ids else NAMED] * 5 + [IDS, NAMED]))
        version, partitions, forgotten = self._request(data, version)
        request = self.cache.new_context(session_id, epoch, partitions, forgotten, version=version,
                                         follower=False, now_ms=self.now_ms, topic_names=self.names)
        event(f"incremental: {request.kind.value} {error_name(request.error_code)}")
        if session.uses_topic_ids != (version >= 13):
            assert (request.kind, request.error_code) == (ContextKind.ERROR, TOPIC_ID_ERROR)
            return self.pending.append((request, None, epoch))
        named = self._named(partitions)
        for key, partition in named.items():
            if key in session.partitions:
                cached = session.partitions[key]
                cached.request = replace(partition, topic_name=cached.request.topic_name or partition.topic_name)
            else:
                session.partitions[key] = ModelPartition(partition)
        for key in forgotten:
            session.partitions.pop(key, None)
        if not session.partitions:
            del self.live[session_id]
            assert (request.kind, request.closed_session_id) == (ContextKind.SESSIONLESS, session_id)
            assert list(request.partitions) == list(named.values())
            return self._asked(data, now, (request, (named, False, False), epoch))
        for cached in session.partitions.values():
            if session.uses_topic_ids and cached.request.topic_name is None:
                cached.request = replace(cached.request, topic_name=self.names.get(cached.request.topic_id))
        session.last_used_ms = self.now_ms
        session.epoch = next_epoch(session.epoch)
        assert (request.kind, request.session_id) == (ContextKind.INCREMENTAL, session_id)
        assert list(request.partitions) == [cached.request for cached in session.partitions.values()]
        self._asked(data, now, (request, session, epoch))

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def pending_request_answered(self, data) -> None:
        self._answer(data, self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1))))

    def _request(self, data, version: int | None = None):
        if version is None:
            version = data.draw(st.sampled_from([IDS, NAMED]))
        partitions = data.draw(request_partitions(version, self.names, 4))
        forgotten = [p.key for p in data.draw(request_partitions(version, self.names, 2))]
        return version, partitions, forgotten

    def _named(self, partitions) -> dict:
        named = {}
        for partition in partitions:
            if partition.topic_name is None and partition.topic_id in self.names:
                partition = replace(partition, topic_name=self.names[partition.topic_id])
            named[partition.key] = partition
        return named

    def _asked(self, data, now: bool, entry) -> None:
        if now:
            self._answer(data, entry)
        else:
            self.pending.append(entry)

    def _answer(self, data, entry) -> None:
        request, state, epoch = entry
        read = data.draw(st.permutations(request.partitions))
        found = [self._found(data, partition.key, state) for partition in read]
        if data.draw(st.booleans()):
            found.append(outcome(part(BAR, 9), records=True))  # never named
        answer = self.cache.answer(request, found, self.now_ms)
        event(f"answer: {request.kind.value} {error_name(answer.error_code)}")
        if request.kind is ContextKind.ERROR:
            assert (answer.error_code, answer.session_id, answer.partitions) == (request.error_code, 0, ())
        elif request.kind is ContextKind.INCREMENTAL:
            assert answer == self._incremental(state, epoch, found)
        else:
            named, privileged, uses_topic_ids = state
            carried = [outcome.key for outcome in found if outcome.key in named]
            session_id = 0
            if request.kind is ContextKind.FULL:
                session_id = self._open(named, privileged, uses_topic_ids, found)
            assert (answer.error_code, answer.session_id, list(answer.partitions)) == (NONE, session_id, carried)

    @staticmethod
    def _found(data, key, state) -> PartitionOutcome:
        """What a read found: what the session last answered (or a default), with at most one thing new."""
        cached = state.partitions.get(key) if isinstance(state, ModelSession) else None
        known = [cached.high_watermark, cached.log_start_offset, cached.last_stable_offset] if cached else []
        high_watermark, log_start, last_stable = [
            value if value >= 0 else default for value, default in zip(known or [-1] * 3, (10, 0, 10))]
        change = data.draw(st.sampled_from(NEWS))
        return PartitionOutcome(key, change == "records", high_watermark + (change == "high watermark"),
                                log_start + (change == "log start"), last_stable - (change == "last stable"),
                                NOT_LEADER if change == "error" else NONE, 2 if change == "preferred replica" else -1,
                                change == "diverging")

    def _incremental(self, session: ModelSession, epoch: int, found):
        if session.epoch != next_epoch(epoch):  # a later request of the session came first
            return FetchAnswer(BAD_EPOCH, session.id)
        carried = []
        event(f"incremental answer carries {'some' if found else 'nothing to tell'}")
        for result in found:
            cached = session.partitions.get(result.key)
            if cached is None:
                continue
            failed = result.error_code != NONE
            changed = (result.high_watermark, result.log_start_offset, result.last_stable_offset) != (
                cached.high_watermark, cached.log_start_offset, cached.last_stable_offset)
            if not (result.has_records or failed or result.diverging or result.preferred_read_replica >= 0
                    or changed):
                continue
            carried.append(result.key)
            cached.high_watermark = -1 if failed else result.high_watermark
            cached.log_start_offset, cached.last_stable_offset = result.log_start_offset, result.last_stable_offset
            if result.has_records:
                session.partitions[result.key] = session.partitions.pop(result.key)
        return FetchAnswer(NONE, session.id, tuple(carried))

    def _open(self, named, privileged, uses_topic_ids, found) -> int:
        found = {result.key: result for result in found if result.key in named}
        if len(self.live) >= SLOTS:
            victim = self._victim(privileged, len(found))
            event(f"open a session in a full cache: {'evicted one' if victim else 'refused'}")
            if victim is None:
                return 0
            del self.live[victim.id]
            self.evictions += 1
        partitions = {}
        for key, result in found.items():
            failed = result.error_code != NONE
            partitions[key] = ModelPartition(named[key], -1 if failed else result.high_watermark,
                                             result.log_start_offset, result.last_stable_offset)
        session = ModelSession(self.next_id, privileged, uses_topic_ids, self.now_ms, self.now_ms, 1, partitions)
        self.live[session.id] = session
        self.next_id += 1
        return session.id

    def _victim(self, privileged: bool, size: int) -> ModelSession | None:
        """Kafka's rules as its tryEvict's comment tells them, in the order it tries them."""
        if not self.live:
            return None
        least_recent = sorted(self.live.values(), key=lambda s: (s.last_used_ms, s.id))[0]
        if self.now_ms - least_recent.last_used_ms > EVICTION:
            return least_recent
        evictable = [s for s in self.live.values()
                     if s.last_used_ms - s.creation_ms > EVICTION or (privileged and not s.privileged)]
        if not evictable:
            return None
        weakest = sorted(evictable, key=lambda s: (s.privileged, len(s.partitions), s.id))[0]
        newcomer_outranks = privileged and not weakest.privileged or (
            privileged == weakest.privileged and size > len(weakest.partitions))
        return weakest if newcomer_outranks else None

    @invariant()
    def the_cache_holds_what_the_model_holds(self) -> None:
        assert len(self.cache) == len(self.live) <= SLOTS
        assert self.cache.evictions == self.evictions
        for session_id, session in self.live.items():
            view = self.cache.session(session_id)
            assert (view.epoch, view.privileged, view.uses_topic_ids, view.creation_ms, view.last_used_ms) == (
                session.epoch, session.privileged, session.uses_topic_ids, session.creation_ms, session.last_used_ms)
            assert list(view.partitions) == [
                CachedPartition(cached.request, cached.high_watermark, cached.log_start_offset,
                                cached.last_stable_offset) for cached in session.partitions.values()]
        assert self.cache.partition_count == sum(len(session.partitions) for session in self.live.values())


FetchSessionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                                 suppress_health_check=[HealthCheck.too_slow])
TestFetchSessionMachine = FetchSessionMachine.TestCase


# -- attachments ----------------------------------------------------------------------------


class Attached:
    def __init__(self) -> None:
        self.released = 0

    def release(self) -> None:
        self.released += 1


def test_an_attachment_is_released_once_when_its_session_closes_empties_or_is_evicted():
    cache = new_cache(max_slots=1)
    closed = open_session(cache, [FOO0, FOO1])
    cache.attach(closed, closing := Attached())
    incremental = context(cache, closed, 1)
    assert cache.attachment(incremental) is closing
    cache.answer(incremental, [], 0)
    context(cache, closed, FINAL_EPOCH)  # closed by a sessionless request
    assert closing.released == 1

    emptied = open_session(cache, [FOO0])
    cache.attach(emptied, emptying := Attached())
    assert context(cache, emptied, 1, forgotten=[FOO0]).kind is ContextKind.SESSIONLESS
    assert emptying.released == 1

    evicted = open_session(cache, [FOO0])
    cache.attach(evicted, evicting := Attached())
    cache.answer(context(cache, evicted, 1), [], EVICTION + 1)  # used after its creation: evictable
    newcomer = open_session(cache, [FOO0, FOO1, FOO2], now_ms=EVICTION + 2)
    assert cache.session(evicted) is None and cache.session(newcomer) is not None
    assert evicting.released == 1
    assert cache.attachment(context(cache, INVALID_SESSION_ID, FINAL_EPOCH)) is None  # a sessionless request
