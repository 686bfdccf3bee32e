"""The classic group state machine, told as stories with a fake clock."""

from __future__ import annotations

import itertools

import pytest

from kbroker.group import records
from kbroker.group.classic import ClassicGroup, ClassicGroupConfig, GroupState
from kbroker.effects import Persist, Respond
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

JoinGroupRequest = API_BY_NAME["JoinGroup"].request_class
Protocol = JoinGroupRequest.JoinGroupRequestProtocol
SyncGroupRequest = API_BY_NAME["SyncGroup"].request_class
Assignment = SyncGroupRequest.SyncGroupRequestAssignment
HeartbeatRequest = API_BY_NAME["Heartbeat"].request_class
LeaveGroupRequest = API_BY_NAME["LeaveGroup"].request_class
Identity = LeaveGroupRequest.MemberIdentity

SESSION_MS, REBALANCE_MS = 10_000, 30_000


class Story:
    """A group, a clock and the answers each waiter got."""

    def __init__(self, *, delay_ms: int = 0, max_size: int = 2**31 - 1) -> None:
        ids = itertools.count(1)
        self.now_ms = 1_000
        self.group = ClassicGroup("g", ClassicGroupConfig(initial_rebalance_delay_ms=delay_ms, max_size=max_size),
                                  self.now_ms, lambda client_id: f"{client_id}-{next(ids)}")
        self.waiters = itertools.count(1)
        self.answers: dict[int, object] = {}
        self.persisted: list = []

    def run(self, effects) -> None:
        for effect in effects:
            if isinstance(effect, Persist):
                self.persisted.extend(effect.records)
            else:
                assert isinstance(effect, Respond)
                assert effect.waiter not in self.answers, "a waiter answered twice"
                self.answers[effect.waiter] = effect.response

    def join(self, member_id="", client="c", protocols=(("range", b"meta"),), instance=None, version=9,
             protocol_type="consumer") -> int:
        waiter = next(self.waiters)
        request = JoinGroupRequest(group_id="g", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
                                   member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
                                   protocols=[Protocol(name=n, metadata=m) for n, m in protocols])
        self.run(self.group.join(waiter, request, version, client, "/127.0.0.1", self.now_ms))
        return waiter

    def new_member(self, client="c", **options) -> str:
        """The KIP-394 handshake: the first join hands out the id, the second joins with it."""
        first = self.answers[self.join(client=client, **options)]
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        return first.member_id

    def sync(self, member_id, generation, assignments=None, instance=None) -> int:
        waiter = next(self.waiters)
        request = SyncGroupRequest(group_id="g", generation_id=generation, member_id=member_id, group_instance_id=instance,
                                   assignments=[Assignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()])
        self.run(self.group.sync(waiter, request, 5, self.now_ms))
        return waiter

    def heartbeat(self, member_id, generation) -> int:
        return self.group.heartbeat(HeartbeatRequest(group_id="g", generation_id=generation, member_id=member_id), 4, self.now_ms)

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.run(self.group.tick(self.now_ms))


def three_stable_members(story: Story) -> tuple[list[str], int]:
    ids = [story.new_member(client=f"c{n}") for n in range(3)]
    waiters = [story.join(member_id) for member_id in ids]
    answers = [story.answers[w] for w in waiters]
    generation = answers[0].generation_id
    leader = answers[0].leader
    story.sync(leader, generation, {m: m.encode() for m in ids})
    for member_id in ids:
        if member_id != leader:
            story.sync(member_id, generation)
    assert story.group.state is GroupState.STABLE
    return ids, generation


def test_three_members_join_one_generation_and_receive_their_assignments():
    story = Story()
    ids = [story.new_member(client=f"c{n}") for n in range(3)]
    waiters = [story.join(member_id) for member_id in ids]
    answers = [story.answers[w] for w in waiters]  # the last join completed the rebalance for all
    assert {a.generation_id for a in answers} == {1}
    assert {a.leader for a in answers} == {ids[0]}
    assert [m.member_id for m in answers[0].members] == ids  # only the leader learns the members
    assert all(not a.members for a in answers[1:])
    assert story.group.state is GroupState.COMPLETING_REBALANCE

    follower_waiter = story.sync(ids[1], 1)
    assert follower_waiter not in story.answers  # waits for the leader
    leader_waiter = story.sync(ids[0], 1, {m: f"part-{m}".encode() for m in ids})
    assert story.persisted and story.persisted[-1][1].generation == 1  # stored before anyone is answered
    assert story.answers[follower_waiter].assignment == f"part-{ids[1]}".encode()
    assert story.answers[leader_waiter].assignment == f"part-{ids[0]}".encode()
    assert story.group.state is GroupState.STABLE
    late = story.sync(ids[2], 1)
    assert story.answers[late].assignment == f"part-{ids[2]}".encode()


def test_a_new_member_makes_the_others_rejoin():
    story = Story()
    ids, generation = three_stable_members(story)
    fourth = story.new_member(client="c3")
    waiter = story.join(fourth)
    assert waiter not in story.answers and story.group.state is GroupState.PREPARING_REBALANCE
    assert story.heartbeat(ids[1], generation) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoins = [story.join(member_id) for member_id in ids]
    assert {story.answers[w].generation_id for w in rejoins + [waiter]} == {generation + 1}


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    story = Story()
    ids, generation = three_stable_members(story)
    story.join(story.new_member(client="c3"))
    story.join(ids[0])
    story.join(ids[1])  # ids[2] stays silent
    story.advance(REBALANCE_MS)
    assert ids[2] not in story.group.members
    assert story.group.generation_id == generation + 1 and story.group.state is GroupState.COMPLETING_REBALANCE


def test_leaving_and_session_expiry_rebalance_the_rest_and_an_empty_group_is_stored():
    story = Story()
    ids, generation = three_stable_members(story)
    response, effects = story.group.leave(LeaveGroupRequest(group_id="g", members=[Identity(member_id=ids[0])]), 5, story.now_ms)
    story.run(effects)
    assert response.members[0].error_code == ErrorCode.NONE
    assert story.group.state is GroupState.PREPARING_REBALANCE
    story.join(ids[1])
    story.join(ids[2])
    assert story.group.generation_id == generation + 1
    story.advance(SESSION_MS + 1)  # nobody syncs or heartbeats: sessions run out
    assert story.group.state is GroupState.EMPTY and not story.group.members
    key, value = story.persisted[-1]
    assert key == records.GroupMetadataKey(group="g") and value.members == []


def test_static_member_returns_without_a_rebalance_and_its_old_id_is_fenced():
    story = Story()
    waiter = story.join(client="s", instance="instance-1")
    static_id = story.answers[waiter].member_id  # static members skip the member id handshake
    story.sync(static_id, 1, {static_id: b"mine"}, instance="instance-1")
    other = story.new_member(client="d")
    story.join(other)
    story.join(static_id, instance="instance-1")
    generation = story.group.generation_id
    story.sync(static_id, generation, {static_id: b"p0", other: b"p1"}, instance="instance-1")
    story.sync(other, generation)
    assert story.group.state is GroupState.STABLE

    rejoin = story.join(client="s", instance="instance-1")  # restarted: unknown member id, same instance
    answer = story.answers[rejoin]
    assert answer.error_code == ErrorCode.NONE and answer.generation_id == generation
    assert story.group.state is GroupState.STABLE  # no rebalance of the others
    new_id = answer.member_id
    assert story.answers[story.sync(new_id, generation, instance="instance-1")].assignment == b"p0"
    assert story.heartbeat(static_id, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    fenced = story.sync(static_id, generation, instance="instance-1")
    assert story.answers[fenced].error_code in (ErrorCode.FENCED_INSTANCE_ID, ErrorCode.UNKNOWN_MEMBER_ID)


def test_errors_are_kafkas():
    story = Story(max_size=3)
    ids, generation = three_stable_members(story)
    assert story.heartbeat("nobody", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert story.heartbeat(ids[0], generation + 7) == ErrorCode.ILLEGAL_GENERATION
    assert story.answers[story.sync(ids[0], generation + 7)].error_code == ErrorCode.ILLEGAL_GENERATION
    assert story.answers[story.join()].error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert story.answers[story.join(protocol_type="connect")].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert story.answers[story.join(protocols=(("other", b""),))].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert story.answers[story.join(member_id="made-up")].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert story.group.validate_offset_commit(ids[0], None, generation) == ErrorCode.NONE
    assert story.group.validate_offset_commit(ids[0], None, generation - 1) == ErrorCode.ILLEGAL_GENERATION
    assert story.group.validate_offset_commit("", None, -1) == ErrorCode.UNKNOWN_MEMBER_ID  # not while it has members


@pytest.mark.parametrize("session_timeout_ms", [1, 10**9])
def test_session_timeouts_outside_the_bounds_are_refused(session_timeout_ms):
    story = Story()
    request = JoinGroupRequest(group_id="g", session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=1000, member_id="",
                               protocol_type="consumer", protocols=[Protocol(name="range", metadata=b"")])
    [answer] = story.group.join(1, request, 9, "c", "h", 0)
    assert answer.response.error_code == ErrorCode.INVALID_SESSION_TIMEOUT


def test_the_initial_delay_waits_for_more_members_of_a_new_group():
    story = Story(delay_ms=3000)
    first = story.join(story.new_member(client="a"))
    story.advance(1000)
    second = story.join(story.new_member(client="b"))
    story.advance(2000)  # the delay passed, but a member came meanwhile: it waits once more
    assert first not in story.answers
    story.advance(3000)
    assert story.answers[first].generation_id == story.answers[second].generation_id == 1


def test_the_most_preferred_common_protocol_is_chosen():
    story = Story()
    a = story.new_member(client="a", protocols=(("cooperative-sticky", b"1"), ("range", b"2")))
    b = story.new_member(client="b", protocols=(("range", b"3"), ("cooperative-sticky", b"4")))
    c = story.new_member(client="c", protocols=(("range", b"5"),))
    story.join(a, protocols=(("cooperative-sticky", b"1"), ("range", b"2")))
    story.join(b, protocols=(("range", b"3"), ("cooperative-sticky", b"4")))
    story.join(c, protocols=(("range", b"5"),))
    assert story.group.protocol_name == "range"  # the only protocol all three support


def test_a_group_rebuilt_from_its_record_is_stable_with_the_same_assignments():
    story = Story()
    ids, generation = three_stable_members(story)
    key, value = story.group.record(story.now_ms)
    rebuilt = ClassicGroup.from_record("g", value, ClassicGroupConfig(), story.now_ms, lambda c: "x")
    assert rebuilt.state is GroupState.STABLE and rebuilt.generation_id == generation
    assert {m: rebuilt.members[m].assignment for m in ids} == {m: m.encode() for m in ids}
    assert rebuilt.leader_id == story.group.leader_id and rebuilt.protocol_name == "range"
