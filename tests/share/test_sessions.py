"""Share sessions: ShareFetch's and ShareAcknowledge's session epochs, the partitions a session holds, and how
sessions end (Kafka 4.2's ShareSessionCache and SharePartitionManager.newContext are the reference); then
random sequences of fetches, acknowledgements, closes, leaves and answers for several members, against a
model."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kbroker.share.sessions import (FINAL_EPOCH, INITIAL_EPOCH, FetchKind, PartitionOutcome, ShareSessionCache,
                                    next_epoch)
from kbroker.wire.errors import ErrorCode, error_name

NONE = ErrorCode.NONE
NOT_FOUND, BAD_EPOCH = ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH
LIMIT_REACHED, INVALID_REQUEST = ErrorCode.SHARE_SESSION_LIMIT_REACHED, ErrorCode.INVALID_REQUEST

FOO, BAR, GONE = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
NAMES = {FOO: "foo", BAR: "bar"}  # GONE: a topic id metadata does not know
FOO0, FOO1, BAR0, BAR1 = (FOO, 0), (FOO, 1), (BAR, 0), (BAR, 1)


@pytest.fixture
def cache() -> ShareSessionCache:
    return ShareSessionCache(max_sessions=3)


def fetch(cache: ShareSessionCache, member: str, epoch: int, partitions=(), forgotten=(), *, group: str = "g",
          acks: bool = False, connection: str = "c1"):
    return cache.fetch(group, member, epoch, list(partitions), list(forgotten), acks, connection, topic_names=NAMES)


def held(cache: ShareSessionCache, member: str, group: str = "g") -> list:
    view = cache.session(group, member)
    return None if view is None else [partition.key for partition in view.partitions]


def epoch_of(cache: ShareSessionCache, member: str, group: str = "g") -> int | None:
    view = cache.session(group, member)
    return None if view is None else view.epoch


def outcome(key, records: bool = False, error: int = NONE) -> PartitionOutcome:
    return PartitionOutcome(key[0], key[1], records, error)


# -- epochs ---------------------------------------------------------------------------------


def test_next_epoch_counts_up_wraps_to_one_and_keeps_final():
    assert [next_epoch(epoch) for epoch in (0, 1, 41, 2**31 - 2)] == [1, 2, 42, 2**31 - 1]
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == next_epoch(-7) == FINAL_EPOCH


def test_the_session_epoch_wraps_from_the_largest_int32_to_one(cache):
    fetch(cache, "a", INITIAL_EPOCH, [FOO0])
    cache._sessions[("g", "a")].epoch = 2**31 - 1  # two billion requests later
    assert fetch(cache, "a", 2**31 - 1).error_code == NONE
    assert epoch_of(cache, "a") == 1
    assert cache.acknowledge("g", "a", 1).error_code == NONE
    assert epoch_of(cache, "a") == 2


# -- opening --------------------------------------------------------------------------------


def test_epoch_zero_opens_a_session_with_every_partition_named(cache):
    answer = fetch(cache, "a", INITIAL_EPOCH, [BAR0, FOO1, BAR0, (GONE, 4)], connection="c7")
    assert (answer.error_code, answer.kind, answer.request_epoch) == (NONE, FetchKind.NEW, 0)
    assert answer.partitions == (BAR0, FOO1, (GONE, 4))  # request order, once
    assert answer.added == (BAR0, FOO1, (GONE, 4)) and answer.closed is None
    assert [(p.topic_name, p.partition) for p in answer.to_fetch] == [("bar", 0), ("foo", 1)]
    assert [p.key for p in answer.unknown_topic] == [(GONE, 4)]  # to be answered UNKNOWN_TOPIC_ID
    view = cache.session("g", "a")
    assert (view.epoch, view.connection_id, view.partitions) == (1, "c7", answer.held)
    assert (len(cache), cache.partition_count, cache.group_session_count("g")) == (1, 3, 1)


def test_an_opening_fetch_ignores_forgotten_partitions(cache):
    answer = fetch(cache, "a", INITIAL_EPOCH, [FOO0], forgotten=[FOO0, BAR1])
    assert answer.partitions == (FOO0,) and answer.removed == ()


def test_an_opening_fetch_may_name_no_partition(cache):
    answer = fetch(cache, "a", INITIAL_EPOCH)
    assert (answer.error_code, answer.partitions, epoch_of(cache, "a")) == (NONE, (), 1)


def test_acknowledgements_in_an_opening_fetch_are_an_invalid_request(cache):
    assert fetch(cache, "a", INITIAL_EPOCH, [FOO0], acks=True).error_code == INVALID_REQUEST
    assert cache.session("g", "a") is None
    fetch(cache, "a", INITIAL_EPOCH, [FOO0])
    fetch(cache, "a", 1, [FOO1])
    answer = fetch(cache, "a", INITIAL_EPOCH, [BAR0], acks=True)
    assert (answer.error_code, answer.kind, answer.partitions, answer.full) == (INVALID_REQUEST, None, (), False)
    assert (held(cache, "a"), epoch_of(cache, "a")) == ([FOO0, FOO1], 2)  # the session is left as it was


def test_epoch_zero_replaces_the_members_session_without_releasing_anything(cache):
    fetch(cache, "a", INITIAL_EPOCH, [FOO0, FOO1], connection="c1")
    fetch(cache, "a", 1, [BAR0])
    answer = fetch(cache, "a", INITIAL_EPOCH, [BAR1], connection="c2")
    assert (answer.error_code, answer.kind, answer.closed, answer.full) == (NONE, FetchKind.NEW, None, True)
    assert (held(cache, "a"), epoch_of(cache, "a"), cache.session("g", "a").connection_id) == ([BAR1], 1, "c2")
    assert (len(cache), cache.partition_count, cache.group_session_count("g")) == (1, 1, 1)
    assert fetch(cache, "a", 2).error_code == BAD_EPOCH  # the old session's next epoch means nothing now
    assert cache.connection_closed("c1") == []  # the replaced session's connection no longer ends it
    assert held(cache, "a") == [BAR1]


def test_a_full_cache_refuses_new_sessions_and_evicts_none(cache):
    for member in "abc":
        assert fetch(cache, member, INITIAL_EPOCH, [FOO0]).error_code == NONE
    answer = fetch(cache, "d", INITIAL_EPOCH, [FOO0])
    assert (answer.error_code, answer.kind, answer.partitions) == (LIMIT_REACHED, None, ())
    assert "group.share.max.share.sessions" in answer.error_message
    assert fetch(cache, "d", INITIAL_EPOCH, [FOO0], group="other").error_code == LIMIT_REACHED
    assert {view.member_id for view in cache.sessions()} == {"a", "b", "c"} and cache.session("g", "d") is None
    assert fetch(cache, "b", INITIAL_EPOCH, [BAR0]).error_code == NONE  # replacing one's own session still works
    assert fetch(cache, "c", FINAL_EPOCH).error_code == NONE
    assert fetch(cache, "d", INITIAL_EPOCH, [FOO0]).error_code == NONE


def test_the_default_limit_is_kafkas_and_must_be_positive():
    assert ShareSessionCache().max_sessions == 2000  # group.share.max.share.sessions
    with pytest.raises(ValueError):
        ShareSessionCache(max_sessions=0)


# -- later requests -------------------------------------------------------------------------


def test_a_later_fetch_needs_the_session_and_its_epoch(cache):
    assert fetch(cache, "a", 1, [FOO0]).error_code == NOT_FOUND
    fetch(cache, "a", INITIAL_EPOCH, [FOO0])
    assert fetch(cache, "a", 1, group="other").error_code == NOT_FOUND  # sessions are per group and member
    for wrong in (2, 7, -2):
        answer = fetch(cache, "a", wrong, [FOO1], [FOO0])
        assert (answer.error_code, answer.kind, answer.error_message) == (
            BAD_EPOCH, None, f"the share session expects epoch 1, not {wrong}")
    assert (held(cache, "a"), epoch_of(cache, "a")) == ([FOO0], 1)  # refused requests change nothing
    assert fetch(cache, "b", -2).error_code == NOT_FOUND


def test_a_later_fetch_adds_the_partitions_named_forgets_the_forgotten_and_moves_the_epoch_on(cache):
    fetch(cache, "a", INITIAL_EPOCH, [FOO0, FOO1])
    answer = fetch(cache, "a", 1, [BAR0, FOO0, BAR1], [FOO1, BAR1, (GONE, 9)])
    assert (answer.error_code, answer.kind, answer.request_epoch, answer.full) == (NONE, FetchKind.SUBSEQUENT, 1,
                                                                                      False)
    assert answer.added == (BAR0, BAR1)  # FOO0 was held already
    assert answer.removed == (FOO1, BAR1)  # named and forgotten in one request: forgotten; unknown ones: no-op
    assert list(answer.partitions) == [FOO0, BAR0] == held(cache, "a")
    assert epoch_of(cache, "a") == 2
    answer = fetch(cache, "a", 2)
    assert (answer.added, answer.removed, answer.partitions) == ((), (), (FOO0, BAR0))
    assert epoch_of(cache, "a") == 3 and cache.partition_count == 2


def test_a_topic_unknown_when_its_partition_joined_is_named_once_metadata_knows_it(cache):
    fetch(cache, "a", INITIAL_EPOCH, [(GONE, 0)])
    assert [p.topic_name for p in cache.session("g", "a").partitions] == [None]
    cache.fetch("g", "a", 1, [(GONE, 0)], [], False, "c1", topic_names={GONE: "late"})
    assert [p.topic_name for p in cache.session("g", "a").partitions] == ["late"]


# -- the final fetch ------------------------------------------------------------------------


def test_a_final_fetch_closes_the_session_fetching_nothing(cache):
    assert fetch(cache, "a", FINAL_EPOCH).error_code == NOT_FOUND
    fetch(cache, "a", INITIAL_EPOCH, [FOO0, (GONE, 1)])
    fetch(cache, "a", 1, [FOO1], [(GONE, 1)])
    fetch(cache, "b", INITIAL_EPOCH, [FOO0])
    answer = fetch(cache, "a", FINAL_EPOCH, [BAR0], [FOO0], acks=True)  # its epoch is not checked
    assert (answer.error_code, answer.kind, answer.final, answer.full) == (NONE, FetchKind.FINAL, True, True)
    assert (answer.partitions, answer.to_fetch, answer.unknown_topic) == ((FOO0, FOO1), (), ())  # fetches nothing
    closed = answer.closed
    assert (closed.group_id, closed.member_id, closed.partitions) == ("g", "a", (FOO0, FOO1))  # not BAR0
    assert not closed.last_in_group
    assert cache.session("g", "a") is None and len(cache) == 1
    assert fetch(cache, "a", 2).error_code == NOT_FOUND
    assert fetch(cache, "a", FINAL_EPOCH).error_code == NOT_FOUND
    assert fetch(cache, "b", FINAL_EPOCH).closed.last_in_group
    assert cache.group_session_count("g") == 0


# -- ShareAcknowledge ------------------------------------------------------------------------


def test_acknowledging_at_epoch_zero_is_an_invalid_epoch_session_or_not(cache):
    refused = cache.acknowledge("g", "a", INITIAL_EPOCH)
    assert (refused.error_code, refused.final, refused.partitions) == (BAD_EPOCH, False, ())
    fetch(cache, "a", INITIAL_EPOCH, [FOO0])
    assert cache.acknowledge("g", "a", INITIAL_EPOCH).error_code == BAD_EPOCH
    assert epoch_of(cache, "a") == 1


def test_acknowledging_needs_the_session_and_its_epoch_and_moves_the_epoch_on(cache):
    assert cache.acknowledge("g", "a", 1).error_code == NOT_FOUND
    assert cache.acknowledge("g", "a", FINAL_EPOCH).error_code == NOT_FOUND
    fetch(cache, "a", INITIAL_EPOCH, [FOO0])
    assert cache.acknowledge("g", "a", 2).error_code == BAD_EPOCH
    assert cache.acknowledge("g", "a", -3).error_code == BAD_EPOCH
    assert cache.acknowledge("g", "a", 1) == cache.acknowledge("g", "a", 2)  # NONE, nothing closed
    assert fetch(cache, "a", 2).error_code == BAD_EPOCH  # fetches and acknowledgements share the epochs
    assert fetch(cache, "a", 3, [FOO1]).error_code == NONE
    assert cache.acknowledge("g", "a", 4).error_code == NONE
    assert held(cache, "a") == [FOO0, FOO1]  # acknowledging never changes the partitions


def test_a_final_acknowledgement_closes_the_session(cache):
    fetch(cache, "a", INITIAL_EPOCH, [FOO0, BAR1])
    answer = cache.acknowledge("g", "a", FINAL_EPOCH)
    assert (answer.error_code, answer.final, answer.partitions) == (NONE, True, (FOO0, BAR1))
    assert (answer.closed.member_id, answer.closed.partitions, answer.closed.last_in_group) == ("a", (FOO0, BAR1),
                                                                                                 True)
    assert cache.session("g", "a") is None and cache.acknowledge("g", "a", 2).error_code == NOT_FOUND


# -- sessions ending otherwise ----------------------------------------------------------------


def test_a_closing_connection_ends_the_sessions_it_opened(cache):
    fetch(cache, "a", INITIAL_EPOCH, [FOO0], connection="c1")
    fetch(cache, "b", INITIAL_EPOCH, [FOO1], connection="c1")
    fetch(cache, "c", INITIAL_EPOCH, [BAR0], connection="c2")
    fetch(cache, "a", 1, [BAR1], connection="c3")  # later requests may come on any connection
    closed = cache.connection_closed("c1")
    assert sorted((s.member_id, s.partitions, s.last_in_group) for s in closed) == [
        ("a", (FOO0, BAR1), False), ("b", (FOO1,), False)]
    assert [view.member_id for view in cache.sessions()] == ["c"]
    assert cache.connection_closed("c1") == cache.connection_closed("c3") == []
    assert cache.connection_closed("c2")[0].last_in_group


def test_a_connection_closing_after_the_final_request_ends_nothing_more(cache):
    fetch(cache, "a", INITIAL_EPOCH, [FOO0], connection="c1")
    cache.acknowledge("g", "a", FINAL_EPOCH)
    fetch(cache, "a", INITIAL_EPOCH, [FOO0], connection="c2")
    assert cache.connection_closed("c1") == []
    assert held(cache, "a") == [FOO0]


# -- what answers carry ----------------------------------------------------------------------


def test_the_opening_and_final_answers_carry_every_partition(cache):
    opening = fetch(cache, "a", INITIAL_EPOCH, [FOO0, FOO1, (GONE, 0)])
    outcomes = [outcome(FOO0), outcome(FOO1, records=True), outcome((GONE, 0), error=ErrorCode.UNKNOWN_TOPIC_ID)]
    assert cache.response_partitions(opening, outcomes).partitions == (FOO0, FOO1, (GONE, 0))
    final = fetch(cache, "a", FINAL_EPOCH, [BAR0])
    assert cache.response_partitions(final, [outcome(BAR0)]).partitions == (BAR0,)


def test_a_refused_fetch_answers_its_error_alone(cache):
    refused = fetch(cache, "a", 5)
    assert cache.response_partitions(refused, [outcome(FOO0, records=True)]).error_code == NOT_FOUND
    assert cache.response_partitions(refused, [outcome(FOO0, records=True)]).partitions == ()


def test_later_answers_carry_records_errors_and_news_only(cache):
    fetch(cache, "a", INITIAL_EPOCH, [FOO0, FOO1, BAR0])
    answer = fetch(cache, "a", 1, [BAR1])
    carried = cache.response_partitions(answer, [outcome(FOO0), outcome(FOO1, records=True),
                                                 outcome(BAR0, error=ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                                 outcome(BAR1)])
    assert carried.error_code == NONE
    assert carried.partitions == (FOO1, BAR0, BAR1)  # records, an error, a partition new to the session
    assert held(cache, "a") == [FOO0, BAR0, BAR1, FOO1]  # one that had records waits its turn at the end
    answer = fetch(cache, "a", 2)
    carried = cache.response_partitions(answer, [outcome(key) for key in held(cache, "a")])
    assert carried.partitions == (BAR0,)  # the error went away: said once
    answer = fetch(cache, "a", 3)
    assert cache.response_partitions(answer, [outcome(key) for key in held(cache, "a")]).partitions == ()


def test_an_answer_overtaken_by_a_later_request_is_an_invalid_epoch(cache):
    fetch(cache, "a", INITIAL_EPOCH, [FOO0])
    answer = fetch(cache, "a", 1, [FOO1])
    cache.acknowledge("g", "a", 2)  # a request sent after it, answered first
    carried = cache.response_partitions(answer, [outcome(FOO0, records=True), outcome(FOO1)])
    assert (carried.error_code, carried.partitions) == (BAD_EPOCH, ())
    answer = fetch(cache, "a", 3)
    assert cache.response_partitions(answer, [outcome(FOO1)]).partitions == (FOO1,)  # still news


# -- random sequences against a model -------------------------------------------------------------

MEMBERS = [(group, member) for group in ("g", "h") for member in ("a", "b", "c")]
CONNECTIONS = ("c1", "c2", "c3")
PARTITIONS = [(topic_id, index) for topic_id in (FOO, BAR, GONE) for index in range(2)]
MAX_SESSIONS = 3


class _ModelSession:
    """What a session should be: its partitions in order, each with whether an answer still owes it
    (added since, or failed at, the last answer that carried it)."""

    def __init__(self, connection: str, partitions: list) -> None:
        self.connection = connection
        self.epoch = 1
        self.partitions: dict = {}
        for key in partitions:
            self.partitions.setdefault(key, False)


class ShareSessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cache = ShareSessionCache(max_sessions=MAX_SESSIONS)
        self.live: dict = {}  # (group, member) -> its _ModelSession
        self.answered: list = []  # (SessionFetch, its _ModelSession, request epoch) of accepted later fetches

    def _epoch(self, data, key) -> int:
        session = self.live.get(key)
        choices = [INITIAL_EPOCH, FINAL_EPOCH, data.draw(st.integers(-3, 6))]
        if session is not None:
            choices += [session.epoch] * 8  # mostly what a client would send
        return data.draw(st.sampled_from(choices))

    @rule(key=st.sampled_from(MEMBERS), connection=st.sampled_from(CONNECTIONS),
          acks=st.sampled_from([False, False, True]),
          partitions=st.lists(st.sampled_from(PARTITIONS), max_size=4),
          forgotten=st.lists(st.sampled_from(PARTITIONS), max_size=2), data=st.data())
    def share_fetch(self, key, connection, acks, partitions, forgotten, data) -> None:
        epoch = self._epoch(data, key)
        answer = self.cache.fetch(*key, epoch, partitions, forgotten, acks, connection, topic_names=NAMES)
        session = self.live.get(key)
        if epoch == FINAL_EPOCH:
            if session is not None:
                assert answer.partitions == tuple(session.partitions) and answer.to_fetch == ()
            self._expect_close(answer, key, session)
        elif epoch == INITIAL_EPOCH:
            if acks:
                assert answer.error_code == INVALID_REQUEST
            elif session is None and len(self.live) >= MAX_SESSIONS:
                assert answer.error_code == LIMIT_REACHED
            else:
                assert (answer.error_code, answer.kind) == (NONE, FetchKind.NEW)
                self.live[key] = _ModelSession(connection, partitions)
                assert list(answer.partitions) == list(dict.fromkeys(partitions))
        elif session is None:
            assert answer.error_code == NOT_FOUND
        elif epoch != session.epoch:
            assert answer.error_code == BAD_EPOCH
        else:
            assert (answer.error_code, answer.kind) == (NONE, FetchKind.SUBSEQUENT)
            for partition in partitions:
                session.partitions.setdefault(partition, True)
            for partition in forgotten:
                session.partitions.pop(partition, None)
            session.epoch = next_epoch(session.epoch)
            assert list(answer.partitions) == list(session.partitions)
            self.answered.append((answer, session, epoch))
        if answer.error_code != NONE:
            assert (answer.kind, answer.partitions, answer.closed, answer.final) == (None, (), None, False)
            assert answer.error_message
        event(f"fetch: {error_name(answer.error_code) if answer.error_code else answer.kind.value}")

    @rule(key=st.sampled_from(MEMBERS), data=st.data())
    def share_acknowledge(self, key, data) -> None:
        epoch = self._epoch(data, key)
        answer = self.cache.acknowledge(*key, epoch)
        event(f"acknowledge: {error_name(answer.error_code)}")
        session = self.live.get(key)
        if epoch == INITIAL_EPOCH:
            assert (answer.error_code, answer.closed) == (BAD_EPOCH, None)
        elif epoch == FINAL_EPOCH:
            self._expect_close(answer, key, session)
        elif session is None:
            assert answer.error_code == NOT_FOUND
        elif epoch != session.epoch:
            assert answer.error_code == BAD_EPOCH
        else:
            assert (answer.error_code, answer.closed) == (NONE, None)
            session.epoch = next_epoch(session.epoch)
        assert bool(answer.error_message) == (answer.error_code != NONE)

    def _expect_close(self, answer, key, session) -> None:
        if session is None:
            assert (answer.error_code, answer.closed) == (NOT_FOUND, None)
            return
        assert answer.error_code == NONE
        self._closed(answer.closed, key)

    def _closed(self, closed, key) -> None:
        session = self.live.pop(key)
        assert (closed.group_id, closed.member_id) == key
        assert list(closed.partitions) == list(session.partitions), "the records to release are the session's"
        assert closed.last_in_group == (not any(group == key[0] for group, _ in self.live))

    @rule(connection=st.sampled_from(CONNECTIONS))
    def connection_closes(self, connection) -> None:
        expected = {key for key, session in self.live.items() if session.connection == connection}
        closed = self.cache.connection_closed(connection)
        assert {(session.group_id, session.member_id) for session in closed} == expected
        for session in closed:  # in the order they ended: the last of a group says so
            self._closed(session, (session.group_id, session.member_id))

    @precondition(lambda self: self.answered)
    @rule(data=st.data())
    def fetch_answered(self, data) -> None:
        answer, session, epoch = self.answered.pop(data.draw(st.integers(0, len(self.answered) - 1)))
        keys = answer.partitions
        outcomes = [PartitionOutcome(*key, data.draw(st.booleans()),
                                     data.draw(st.sampled_from([NONE, NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER])))
                    for key in keys]
        response = self.cache.response_partitions(answer, outcomes)
        event(f"answer: {error_name(response.error_code)}")
        if session.epoch != next_epoch(epoch):  # overtaken by a later request of the same session
            assert (response.error_code, response.partitions) == (BAD_EPOCH, ())
            return
        expected = []
        for result in outcomes:
            failed = result.error_code != NONE
            if result.key not in session.partitions:
                if result.has_records or failed:
                    expected.append(result.key)
            elif result.has_records or failed or session.partitions[result.key]:
                expected.append(result.key)
                session.partitions[result.key] = failed
                if result.has_records:
                    session.partitions[result.key] = session.partitions.pop(result.key)
        assert (response.error_code, list(response.partitions)) == (NONE, expected)

    @invariant()
    def the_cache_holds_what_the_model_holds(self) -> None:
        assert len(self.cache) == len(self.live) <= MAX_SESSIONS
        for key, session in self.live.items():
            view = self.cache.session(*key)
            assert (view.epoch, view.connection_id) == (session.epoch, session.connection)
            assert [partition.key for partition in view.partitions] == list(session.partitions)
            assert all(p.topic_name == NAMES.get(p.topic_id) for p in view.partitions)
        assert self.cache.partition_count == sum(len(session.partitions) for session in self.live.values())
        for group in ("g", "h"):
            assert self.cache.group_session_count(group) == sum(1 for g, _ in self.live if g == group)


ShareSessionMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None,
                                                 suppress_health_check=[HealthCheck.too_slow])
TestShareSessionMachine = ShareSessionMachine.TestCase
