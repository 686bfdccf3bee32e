"""The classic group state machine, told as stories with a fake clock."""

from __future__ import annotations

import itertools

import pytest

from kbroker.group import records
from kbroker.group.classic import ClassicGroup, ClassicGroupConfig, GroupState
from kbroker.effects import Persist, Respond
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

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
        self.write_error: int | None = None  # while set, every write fails with it (its records are not kept)
        self.held: list[Persist] | None = None  # while a list, writes wait there (their fsync held back)

    def run(self, effects) -> None:
        """Carry out effects as the shell does: a Persist's records durable (or failed), and the core told."""
        for effect in effects:
            if isinstance(effect, Persist):
                if self.held is not None:
                    self.held.append(effect)
                    continue
                if self.write_error is not None:
                    self.run(effect.on_failure(self.write_error, self.now_ms) if effect.on_failure else [])
                    continue
                self.persisted.extend(effect.records)
                self.run(effect.on_durable(self.now_ms) if effect.on_durable else [])
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

    def heartbeat(self, member_id, generation, instance=None) -> int:
        request = HeartbeatRequest(group_id="g", generation_id=generation, member_id=member_id, group_instance_id=instance)
        return self.group.heartbeat(request, 4, self.now_ms)

    def leave(self, *identities: tuple[str, str | None]) -> list[int]:
        """LeaveGroup v5 for (member id, group instance id) pairs: the error per member."""
        request = LeaveGroupRequest(group_id="g", members=[Identity(member_id=m, group_instance_id=i) for m, i in identities])
        response, effects = self.group.leave(request, 5, self.now_ms)
        self.run(effects)
        return [member.error_code for member in response.members]

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


def test_the_generation_is_stable_only_once_its_assignment_is_durable():
    story = Story()
    ids = [story.new_member(client=f"c{n}") for n in range(2)]
    [story.join(member_id) for member_id in ids]
    story.held = []
    follower = story.sync(ids[1], 1)
    leader = story.sync(ids[0], 1, {m: m.encode() for m in ids})
    [written] = story.held
    assert story.group.state is GroupState.COMPLETING_REBALANCE  # its record is not durable yet
    assert follower not in story.answers and leader not in story.answers
    assert all(member.assignment == b"" for member in story.group.members.values())
    assert story.group.describe().members[0].member_assignment == b""
    story.run(written.on_durable(story.now_ms))
    assert story.group.state is GroupState.STABLE
    assert story.answers[follower].assignment == ids[1].encode()


def test_an_assignment_not_written_is_no_generation_and_the_group_rebalances():
    story = Story()
    ids = [story.new_member(client=f"c{n}") for n in range(2)]
    [story.join(member_id) for member_id in ids]
    follower = story.sync(ids[1], 1)
    story.write_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    leader = story.sync(ids[0], 1, {m: m.encode() for m in ids})
    assert not story.persisted
    # Both hear the error, which clients retry by rejoining; the group never was Stable at generation 1.
    assert story.answers[leader].error_code == story.answers[follower].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert story.group.state is GroupState.PREPARING_REBALANCE
    assert all(member.assignment == b"" for member in story.group.members.values())

    story.write_error = None  # writes work again
    rejoins = [story.join(member_id) for member_id in ids]
    assert {story.answers[waiter].generation_id for waiter in rejoins} == {2}
    follower = story.sync(ids[1], 2)
    story.sync(ids[0], 2, {m: m.encode() for m in ids})
    assert story.group.state is GroupState.STABLE and story.answers[follower].assignment == ids[1].encode()
    assert [value.generation for _, value in story.persisted] == [2]


def test_a_new_member_makes_the_others_rejoin():
    story = Story()
    ids, generation = three_stable_members(story)
    fourth = story.new_member(client="c3")
    waiter = story.join(fourth)
    assert waiter not in story.answers and story.group.state is GroupState.PREPARING_REBALANCE
    assert story.heartbeat(ids[1], generation) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoins = [story.join(member_id) for member_id in ids]
    assert {story.answers[w].generation_id for w in rejoins + [waiter]} == {generation + 1}


def test_a_group_described_while_it_rebalances_keeps_its_members_assignments():
    """As Kafka's describeNoMetadata: no protocol metadata outside Stable, but the assignment a member has."""
    story = Story()
    ids, generation = three_stable_members(story)
    story.join(story.new_member(client="c3"))
    described = story.group.describe()
    assert described.group_state == "PreparingRebalance" and described.protocol_data == ""
    assignments = {m.member_id: m.member_assignment for m in described.members}
    assert {m: assignments[m] for m in ids} == {m: m.encode() for m in ids}
    assert {m.member_metadata for m in described.members} == {b""}


def test_a_refused_sync_names_no_protocol():
    """Kafka's SyncGroup v5 names the protocol type and name only beside an assignment."""
    story = Story()
    ids, generation = three_stable_members(story)
    refused = story.answers[story.sync(ids[0], generation + 7)]
    assert (refused.error_code, refused.protocol_type, refused.protocol_name) == (ErrorCode.ILLEGAL_GENERATION, None, None)
    refused = story.answers[story.sync("nobody", generation)]
    assert (refused.error_code, refused.protocol_type, refused.protocol_name) == (ErrorCode.UNKNOWN_MEMBER_ID, None, None)
    given = story.answers[story.sync(ids[0], generation)]
    assert (given.error_code, given.protocol_type, given.protocol_name) == (ErrorCode.NONE, "consumer", "range")


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


def static_pair_stable(story: Story) -> tuple[str, str, int]:
    """A static member (instance-1) and a dynamic one in a stable group: (static id, dynamic id, generation)."""
    static_id = story.answers[story.join(client="s", instance="instance-1")].member_id
    dynamic_id = story.new_member(client="d")
    story.join(dynamic_id)
    story.join(static_id, instance="instance-1")
    generation = story.group.generation_id
    story.sync(static_id, generation, {static_id: b"p0", dynamic_id: b"p1"}, instance="instance-1")
    story.sync(dynamic_id, generation)
    assert story.group.state is GroupState.STABLE and story.group.leader_id == static_id
    return static_id, dynamic_id, generation


def test_static_member_returns_without_a_rebalance_and_its_old_id_is_fenced():
    story = Story()
    _static_id, _dynamic_id, generation = static_pair_stable(story)
    rejoin = story.join(client="s", instance="instance-1")  # restarted: unknown member id, same instance
    answer = story.answers[rejoin]
    assert answer.error_code == ErrorCode.NONE and answer.generation_id == generation
    assert story.group.state is GroupState.STABLE  # no rebalance of the others
    new_id = answer.member_id
    assert new_id.startswith("instance-1-")  # Kafka names a static member after its instance id
    assert story.answers[story.sync(new_id, generation, instance="instance-1")].assignment == b"p0"
    assert story.heartbeat(new_id, generation, instance="instance-1") == ErrorCode.NONE


def test_a_static_members_new_id_not_written_is_undone_and_the_old_id_is_the_member_again():
    story = Story()
    old_id, _dynamic_id, generation = static_pair_stable(story)
    story.write_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    answer = story.answers[story.join(client="s", instance="instance-1")]
    assert (answer.error_code, answer.member_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, "")  # as Kafka answers it
    assert old_id in story.group.members and story.group.state is GroupState.STABLE
    assert story.heartbeat(old_id, generation, instance="instance-1") == ErrorCode.NONE
    assert story.group.members[old_id].assignment == b"p0"


def test_a_replaced_static_member_is_fenced_before_its_membership_is_checked():
    """Kafka's ClassicGroup.validateMember: a group.instance.id now held by another member id
    answers FENCED_INSTANCE_ID (fatal for the client), not UNKNOWN_MEMBER_ID (which makes it
    rejoin and replace its replacement in turn, KIP-345)."""
    story = Story()
    old_id, dynamic_id, generation = static_pair_stable(story)
    new_id = story.answers[story.join(client="s", instance="instance-1")].member_id  # a second process, same instance

    assert story.heartbeat(old_id, generation, instance="instance-1") == ErrorCode.FENCED_INSTANCE_ID
    assert story.answers[story.sync(old_id, generation, instance="instance-1")].error_code == ErrorCode.FENCED_INSTANCE_ID
    assert story.group.validate_offset_commit(old_id, "instance-1", generation) == ErrorCode.FENCED_INSTANCE_ID
    assert story.answers[story.join(old_id, instance="instance-1")].error_code == ErrorCode.FENCED_INSTANCE_ID
    assert story.leave((old_id, "instance-1")) == [ErrorCode.FENCED_INSTANCE_ID]
    # Without its instance id (Heartbeat before v3) the old id is simply unknown.
    assert story.heartbeat(old_id, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    # An instance id the group does not know: unknown, whatever the member id.
    assert story.heartbeat(new_id, generation, instance="instance-9") == ErrorCode.UNKNOWN_MEMBER_ID
    assert story.group.validate_offset_commit(old_id, "instance-9", generation) == ErrorCode.UNKNOWN_MEMBER_ID

    # None of that disturbed the replacement or the group.
    assert set(story.group.members) == {new_id, dynamic_id}
    assert story.group.state is GroupState.STABLE and story.group.generation_id == generation
    assert story.heartbeat(new_id, generation, instance="instance-1") == ErrorCode.NONE
    assert story.group.validate_offset_commit(new_id, "instance-1", generation) == ErrorCode.NONE
    assert story.leave((new_id, "instance-1")) == [ErrorCode.NONE]
    assert set(story.group.members) == {dynamic_id}


def test_a_replaced_static_members_waiting_join_and_sync_are_fenced():
    """Kafka's replaceStaticMember: the old member's pending JoinGroup and SyncGroup are answered
    FENCED_INSTANCE_ID at once; a replacement during CompletingRebalance starts a new rebalance."""
    story = Story()
    old_id, dynamic_id, generation = static_pair_stable(story)
    story.join(story.new_member(client="e"))  # a third member: everyone must rejoin
    old_join = story.join(old_id, instance="instance-1")
    assert old_join not in story.answers and story.group.state is GroupState.PREPARING_REBALANCE
    new_join = story.join(client="s", instance="instance-1")
    assert story.answers[old_join].error_code == ErrorCode.FENCED_INSTANCE_ID
    assert story.answers[old_join].member_id == old_id
    story.join(dynamic_id)  # the last one: the join completes with the replacement
    new_id = story.answers[new_join].member_id
    assert story.answers[new_join].generation_id == generation + 1 and new_id in story.group.members
    assert old_id not in story.group.members



def test_a_static_member_replaced_while_its_sync_waits_is_fenced_and_the_group_rebalances():
    story = Story()
    dynamic_id = story.new_member(client="d")
    story.join(dynamic_id)  # the leader
    static_join = story.join(client="s", instance="instance-1")
    story.join(dynamic_id)  # the generation with both
    old_id = story.answers[static_join].member_id
    assert story.group.state is GroupState.COMPLETING_REBALANCE and story.group.leader_id == dynamic_id
    old_sync = story.sync(old_id, story.group.generation_id, instance="instance-1")
    assert old_sync not in story.answers  # waits for the leader's assignment

    new_join = story.join(client="s", instance="instance-1")
    assert story.answers[old_sync].error_code == ErrorCode.FENCED_INSTANCE_ID
    # The leader may have assigned to the old id: a new rebalance, as Kafka.
    assert story.group.state is GroupState.PREPARING_REBALANCE and new_join not in story.answers
    story.join(dynamic_id)
    new_id = story.answers[new_join].member_id
    assert set(story.group.members) == {dynamic_id, new_id} and story.group.state is GroupState.COMPLETING_REBALANCE


@pytest.mark.parametrize("version", [5, 8, 9])
def test_a_static_leader_replaced_in_a_stable_group_does_not_reassign(version):
    """Kafka's updateStaticMemberThenRebalanceOrCompleteJoin: no rebalance; from v9 the leader
    learns the members with skip_assignment, before v9 it is named no leader (the old id is)."""
    story = Story()
    old_id, dynamic_id, generation = static_pair_stable(story)
    answer = story.answers[story.join(client="s", instance="instance-1", version=version)]
    assert answer.error_code == ErrorCode.NONE and answer.generation_id == generation
    assert story.group.leader_id == answer.member_id and story.group.state is GroupState.STABLE
    if version >= 9:
        assert answer.leader == answer.member_id and answer.skip_assignment
        assert {m.member_id for m in answer.members} == {answer.member_id, dynamic_id}
    else:
        assert answer.leader == old_id and not answer.members and not answer.skip_assignment


def test_group_instance_id_counts_from_join_group_v5():
    """KIP-345: before JoinGroup v5 there is no group.instance.id; such a join is a dynamic member's."""
    story = Story()
    old_id, _dynamic_id, _generation = static_pair_stable(story)
    answer = story.answers[story.join(client="s", instance="instance-1", version=4)]
    assert answer.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert story.group.members[old_id].group_instance_id == "instance-1"  # not replaced


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
