"""The KIP-932 share group core: stories on a fake clock, every refusal, the records, and random
sequences of joins, leaves, heartbeats and expiries checked against invariants (the assignor:
test_share_assignor.py)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from kbroker.effects import CoordinatorError, Persist
from kbroker.group import records
from kbroker.group.consumer import TopicsView
from kbroker.group.share import (
    ASSIGNOR_NAME,
    InitializeShareGroupState,
    ShareGroup,
    ShareGroupConfig,
    ShareGroupState,
    group_not_found,
    not_a_share_group,
    request_error,
)
from kbroker.log.clock import FakeClock
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

HeartbeatRequest = API_BY_NAME["ShareGroupHeartbeat"].request_class

SESSION_TIMEOUT_MS = 45000
HEARTBEAT_INTERVAL_MS = 5000


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def topics_view(**partition_counts: int) -> TopicsView:
    return TopicsView(by_name={name: (topic_id(name), count) for name, count in partition_counts.items()})


ORDERS, PAYMENTS = topic_id("orders"), topic_id("payments")


class Client:
    """A share consumer: it names itself, heartbeats with its epoch, and takes what it is given."""

    def __init__(self, harness: Harness, member_id: str, topics=("orders",)) -> None:
        self.harness, self.member_id, self.topics = harness, member_id, list(topics)
        self.epoch = 0
        self.assigned: dict[uuid.UUID, set[int]] = {}

    def join(self):
        self.epoch, self.assigned = 0, {}
        return self.heartbeat(topics=self.topics)

    def heartbeat(self, topics=None):
        response = self.harness.send(HeartbeatRequest(group_id="group", member_id=self.member_id,
                                                      member_epoch=self.epoch, subscribed_topic_names=topics))
        assert response.error_code == ErrorCode.NONE, response.error_message
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.assigned = {t.topic_id: set(t.partitions) for t in response.assignment.topic_partitions}
        return response

    def subscribe(self, *topics: str):
        self.topics = list(topics)
        return self.heartbeat(topics=self.topics)

    def leave(self):
        response = self.harness.send(HeartbeatRequest(group_id="group", member_id=self.member_id, member_epoch=-1))
        assert response.error_code == ErrorCode.NONE, response.error_message
        self.assigned = {}
        self.harness.clients.remove(self)
        return response

    def partitions(self, topic: uuid.UUID = ORDERS) -> set[int]:
        return set(self.assigned.get(topic, ()))


class Harness:
    """One group on a fake clock, the topics, a share coordinator that initializes what it is asked
    (unless told not to), and every record the group asked to persist."""

    def __init__(self, config: ShareGroupConfig | None = None, *, initialize: bool = True,
                 **partition_counts: int) -> None:
        self.clock = FakeClock()
        self.topics = topics_view(**(partition_counts or {"orders": 6}))
        self.group = ShareGroup("group", config or ShareGroupConfig(), self.now_ms)
        self.initialize = initialize
        self.persisted: list = []
        self.asked: list[InitializeShareGroupState] = []  # initializations asked for
        self.clients: list[Client] = []
        self.write_error: int | None = None  # while set, every write fails with it
        self.held: list[Persist] | None = None  # while a list, writes wait there (their fsync held back)

    @property
    def now_ms(self) -> int:
        return self.clock.wall_ms()

    def client(self, member_id: str, **kwargs) -> Client:
        client = Client(self, member_id, **kwargs)
        self.clients.append(client)
        return client

    def send(self, request):
        response, effects = self.group.heartbeat(request, "client", "/127.0.0.1", self.topics, self.now_ms)
        self.carry_out(effects)
        self.check_epochs()
        return response

    def tick(self) -> list:
        effects = self.group.tick(self.now_ms, self.topics)
        self.carry_out(effects)
        return effects

    def advance(self, ms: int) -> list:
        self.clock.advance(ms)
        return self.tick()

    def carry_out(self, effects: list) -> None:
        """As the shell does: records first; an initialization only once they are durable."""
        failed = False
        for effect in effects:
            if isinstance(effect, InitializeShareGroupState):
                self.asked.append(effect)
                if self.initialize and not failed:
                    self.carry_out(self.group.state_initialized(effect.partitions, self.topics, self.now_ms))
            elif self.held is not None:
                self.held.append(effect)
            elif self.write_error is not None:
                failed = True
                assert effect.on_failure(self.write_error, self.now_ms) == []
            else:
                self.tell_durable(effect)

    def tell_durable(self, effect: Persist) -> None:
        self.persisted += effect.records
        assert effect.on_durable(self.now_ms) == []

    def settle(self, rounds: int = 5) -> None:
        """Everyone heartbeats until nobody's epoch or assignment moves."""
        for _ in range(rounds):
            before = [(client.epoch, client.assigned) for client in self.clients]
            for client in self.clients:
                client.heartbeat()
            if before == [(client.epoch, client.assigned) for client in self.clients]:
                return
        raise AssertionError(f"not settled after {rounds} rounds")

    def check_epochs(self) -> None:
        group = self.group
        assert group.assignment_epoch <= group.group_epoch
        for member in group.members.values():
            assert member.member_epoch <= group.group_epoch
            assert member.member_epoch <= group.assignment_epoch or member.member_epoch == 0


def replayed(persisted, harness: Harness) -> ShareGroup:
    group = ShareGroup("group", harness.group.config, harness.now_ms)
    for key, value in persisted:
        group.replay(key, value)
    return group


def record_kinds(persisted) -> list[str]:
    return [type(key).__name__.removeprefix("ShareGroup").removesuffix("Key") + ("" if value is not None else "-")
            for key, value in persisted]


def settled_group(members: int = 3, **partition_counts: int) -> tuple[Harness, list[Client]]:
    harness = Harness(**partition_counts)
    clients = [harness.client(chr(ord("a") + n)) for n in range(members)]
    for client in clients:
        client.join()
    harness.settle()
    return harness, clients


# -- joining, epochs and the assignment --------------------------------------------------------------------


def test_the_first_member_gets_its_partitions_once_their_state_is_initialized():
    harness = Harness(initialize=False)
    a = harness.client("a")
    response = a.join()
    assert (response.member_id, response.member_epoch) == ("a", 2)  # a new group is at epoch 1, as in Kafka 4.4
    assert response.heartbeat_interval_ms == HEARTBEAT_INTERVAL_MS
    assert response.assignment.topic_partitions == []  # nothing is initialized at the share coordinator yet
    assert record_kinds(harness.persisted) == ["MemberMetadata", "Metadata", "TargetAssignmentMember",
                                               "TargetAssignmentMetadata", "CurrentMemberAssignment",
                                               "StatePartitionMetadata"]
    [asked] = harness.asked
    assert (asked.group_id, asked.state_epoch, dict(asked.partitions)) == ("group", 2, {ORDERS: frozenset(range(6))})
    assert harness.group.persisted_state().initializing[ORDERS].partitions == frozenset(range(6))

    harness.carry_out(harness.group.state_initialized(asked.partitions, harness.topics, harness.now_ms))
    assert harness.group.initialized_partitions == {ORDERS: frozenset(range(6))}
    response = a.heartbeat()
    assert response.member_epoch == 3  # the initialized partitions bump the group epoch
    assert a.partitions() == set(range(6))
    assert harness.group.state is ShareGroupState.STABLE


def test_one_partition_is_shared_by_all_three_members():
    harness, (a, b, c) = settled_group(3, orders=1)
    assert a.partitions() == b.partitions() == c.partitions() == {0}
    assert a.epoch == b.epoch == c.epoch == harness.group.group_epoch == harness.group.assignment_epoch


@pytest.mark.parametrize("partitions, members, owners_each, held", [
    (1, 1, 1, [1]),
    (1, 3, 3, [1, 1, 1]),
    (2, 3, 2, [1, 1, 2]),  # each partition shared by two: four slots among three members
    (3, 2, 1, [1, 2]),
    (4, 4, 1, [1, 1, 1, 1]),
    (6, 3, 1, [2, 2, 2]),
    (7, 3, 1, [2, 2, 3]),
    (3, 7, 3, [1, 1, 1, 1, 1, 2, 2]),  # nine slots among seven
    (5, 10, 2, [1] * 10),
])
def test_n_partitions_among_m_members(partitions, members, owners_each, held):
    harness, clients = settled_group(members, orders=partitions)
    owners = {p: sum(p in client.partitions() for client in clients) for p in range(partitions)}
    assert set(owners.values()) == {owners_each}  # every partition, each as often
    assert sorted(len(client.partitions()) for client in clients) == held


def test_a_newcomer_gets_its_share_at_once_and_the_others_on_their_next_heartbeat():
    harness, (a, b) = settled_group(2, orders=4)
    assert [len(a.partitions()), len(b.partitions())] == [2, 2]
    epoch = harness.group.group_epoch
    c = harness.client("c")
    response = c.join()
    assert response.member_epoch == epoch + 1 == harness.group.group_epoch  # no revocation to wait for
    assert len(c.partitions()) >= 1
    assert a.epoch == epoch and harness.group.members["a"].member_epoch == epoch  # until it heartbeats
    a.heartbeat()
    b.heartbeat()
    assert a.epoch == b.epoch == epoch + 1
    assert sorted(len(client.partitions()) for client in (a, b, c)) == [1, 1, 2]
    assert a.partitions() | b.partitions() | c.partitions() == set(range(4))


def test_a_heartbeat_without_changes_writes_nothing_and_sends_no_assignment():
    harness, (a, b) = settled_group(2)
    count = len(harness.persisted)
    response = a.heartbeat()
    assert response.assignment is None and response.member_epoch == a.epoch
    assert len(harness.persisted) == count
    response = a.heartbeat(topics=["orders"])  # a full request gets the assignment again
    assert response.assignment is not None and len(harness.persisted) == count


def test_a_member_rejoining_with_epoch_zero_gets_its_assignment_without_a_new_epoch():
    harness, (a, b) = settled_group(2)
    epoch, partitions = a.epoch, a.partitions()
    response = a.join()
    assert response.member_epoch == epoch == harness.group.group_epoch
    assert a.partitions() == partitions


def test_a_changed_subscription_bumps_the_epoch_and_keeps_the_member_to_its_topics():
    harness, (a, b) = settled_group(2, orders=2, payments=2)
    epoch = harness.group.group_epoch
    a.subscribe("orders", "payments")
    assert harness.group.group_epoch == epoch + 1
    harness.settle()
    assert a.partitions(PAYMENTS) == {0, 1}  # only a subscribes to payments
    assert b.partitions(PAYMENTS) == set()
    assert a.partitions() | b.partitions() == {0, 1}
    a.subscribe("payments")
    assert a.partitions() == set() and a.partitions(PAYMENTS) == {0, 1}
    harness.settle()
    assert b.partitions() == {0, 1}


def test_new_partitions_are_initialized_then_assigned():
    harness, (a, b) = settled_group(2, orders=2)
    epoch = harness.group.group_epoch
    harness.topics = topics_view(orders=4)
    a.heartbeat()  # the subscribed topic changed: a new epoch, and partitions 2 and 3 are initialized
    assert harness.group.group_epoch > epoch
    assert dict(harness.asked[-1].partitions) == {ORDERS: frozenset({2, 3})}
    harness.settle()
    assert a.partitions() | b.partitions() == {0, 1, 2, 3}
    assert len(a.partitions()) == len(b.partitions()) == 2


def test_a_deleted_topic_is_no_longer_assigned():
    harness, (a, b) = settled_group(2, orders=2, payments=2)
    a.subscribe("orders", "payments")
    harness.settle()
    harness.topics = topics_view(orders=2)
    harness.settle()
    assert a.partitions(PAYMENTS) == set()
    assert a.partitions() | b.partitions() == {0, 1}


def test_an_initialization_that_failed_or_went_unanswered_is_asked_for_again():
    harness = Harness(initialize=False, orders=2)
    a = harness.client("a")
    a.join()
    [asked] = harness.asked
    a.heartbeat()
    assert len(harness.asked) == 1  # still initializing: not asked twice
    harness.carry_out(harness.group.state_initialization_failed(asked.partitions, harness.now_ms))
    a.heartbeat()
    assert len(harness.asked) == 2 and harness.asked[1].partitions == asked.partitions

    harness.clock.advance(30_000 - 1)
    a.heartbeat()
    assert len(harness.asked) == 2
    harness.clock.advance(1)  # group.share.initialize.retry.interval.ms passed without an answer
    a.heartbeat()
    assert len(harness.asked) == 3
    harness.carry_out(harness.group.state_initialized({ORDERS: [0]}, harness.topics, harness.now_ms))
    assert harness.group.persisted_state().initializing[ORDERS].partitions == frozenset({1})
    a.heartbeat()
    assert a.partitions() == {0}  # what is initialized is assigned, the rest waits


# -- leaving and sessions ------------------------------------------------------------------------------------


def test_a_member_that_leaves_is_removed_and_the_others_take_its_partitions():
    harness, (a, b, c) = settled_group(3)
    epoch = harness.group.group_epoch
    count = len(harness.persisted)
    response = c.leave()
    assert (response.member_id, response.member_epoch, response.error_code) == ("c", -1, ErrorCode.NONE)
    assert "c" not in harness.group.members
    assert record_kinds(harness.persisted[count:]) == ["CurrentMemberAssignment-", "TargetAssignmentMember-",
                                                       "MemberMetadata-", "Metadata"]
    assert harness.group.group_epoch == epoch + 1 and harness.group.assignment_epoch == epoch  # computed lazily
    harness.settle()
    assert sorted(len(client.partitions()) for client in (a, b)) == [3, 3]
    assert harness.group.assignment_epoch == harness.group.group_epoch


def test_the_last_member_leaving_empties_the_group():
    harness, (a,) = settled_group(1)
    a.leave()
    assert harness.group.state is ShareGroupState.EMPTY and harness.group.is_empty()
    assert harness.group.next_deadline_ms() is None
    assert harness.group.describe(harness.topics).group_state == "Empty"


def test_a_member_that_stops_heartbeating_is_removed_when_its_session_expires():
    harness, (a, b, c) = settled_group(3)
    harness.clock.advance(10_000)
    a.heartbeat()
    b.heartbeat()
    deadline = harness.group.next_deadline_ms()
    assert deadline == harness.now_ms - 10_000 + SESSION_TIMEOUT_MS  # c's, from its last heartbeat
    assert harness.advance(deadline - 1 - harness.now_ms) == []
    effects = harness.advance(1)
    assert record_kinds(effects[0].records) == ["CurrentMemberAssignment-", "TargetAssignmentMember-",
                                                "MemberMetadata-", "Metadata"]
    assert "c" not in harness.group.members
    harness.clients.remove(c)
    assert harness.group.next_deadline_ms() == deadline + 10_000  # a's and b's
    harness.settle()
    assert a.partitions() | b.partitions() == set(range(6))
    response = harness.send(HeartbeatRequest(group_id="group", member_id="c", member_epoch=c.epoch))
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_heartbeats_keep_a_session_alive():
    harness, (a,) = settled_group(1)
    for _ in range(5):
        harness.advance(SESSION_TIMEOUT_MS - 1)
        a.heartbeat()
    assert harness.group.members.keys() == {"a"}
    assert harness.group.next_deadline_ms() == harness.now_ms + SESSION_TIMEOUT_MS


def test_the_configured_timings_are_used():
    config = ShareGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
    harness = Harness(config)
    a = harness.client("a")
    assert a.join().heartbeat_interval_ms == 1_000
    assert harness.group.next_deadline_ms() == harness.now_ms + 10_000
    harness.advance(10_000)
    assert harness.group.members == {}


# -- refusals --------------------------------------------------------------------------------------------------


def refused(harness: Harness, request) -> tuple[int, str]:
    """The error of a refused heartbeat, which must change nothing and answer the error alone (as Kafka)."""
    count, state = len(harness.persisted), harness.group.persisted_state()
    response = harness.send(request)
    assert len(harness.persisted) == count and harness.group.persisted_state() == state
    assert (response.member_id, response.member_epoch, response.heartbeat_interval_ms, response.assignment) == \
        (None, 0, 0, None)
    return response.error_code, response.error_message


def request(member_id: str = "a", member_epoch: int = 0, **fields):
    fields.setdefault("subscribed_topic_names", ["orders"] if member_epoch == 0 else None)
    return HeartbeatRequest(group_id=fields.pop("group_id", "group"), member_id=member_id, member_epoch=member_epoch,
                            **fields)


@pytest.mark.parametrize("fields, message", [
    (dict(member_id=""), "MemberId can't be empty."),  # v1 clients name themselves: Kafka names no one
    (dict(member_id="  "), "MemberId can't be empty."),
    (dict(group_id=""), "GroupId can't be empty."),
    (dict(rack_id=" \t"), "RackId can't be empty."),
    (dict(subscribed_topic_names=None), "SubscribedTopicNames must be set in first request."),
    (dict(subscribed_topic_names=[]), "SubscribedTopicNames must be set in first request."),
    (dict(member_epoch=-2), "MemberEpoch is invalid."),
])
def test_malformed_requests_are_invalid(fields, message):
    assert refused(Harness(), request(**fields)) == (ErrorCode.INVALID_REQUEST, message)
    assert request_error(request(**fields)) == (ErrorCode.INVALID_REQUEST, message)


def test_well_formed_requests_pass_validation():
    assert request_error(request()) is None
    assert request_error(request(member_epoch=3)) is None
    assert request_error(request(member_epoch=3, subscribed_topic_names=[])) is None  # unsubscribing from all
    assert request_error(request(member_epoch=-1, rack_id="rack-1")) is None
    assert request_error(request(member_id="\u00a0")) is None  # Java's trim() keeps what is above U+0020


def test_member_epochs_are_fenced_but_the_previous_one_is_tolerated():
    harness, (a, b) = settled_group(2)
    harness.client("c").join()
    a.heartbeat()
    member = harness.group.members["a"]
    assert member.previous_member_epoch > 1
    assert refused(harness, request(member_epoch=member.member_epoch + 1))[0] == ErrorCode.FENCED_MEMBER_EPOCH
    stale = member.previous_member_epoch - 1
    code, message = refused(harness, request(member_epoch=stale))
    assert code == ErrorCode.FENCED_MEMBER_EPOCH and "does not match the previous member epoch" in message
    # The answer that moved it to its epoch may have been lost: its previous epoch is still good.
    response = harness.send(request(member_epoch=member.previous_member_epoch))
    assert response.error_code == ErrorCode.NONE and response.member_epoch == member.member_epoch


def test_unknown_members_are_refused():
    harness, _ = settled_group(2)
    assert refused(harness, request("x", member_epoch=3))[0] == ErrorCode.UNKNOWN_MEMBER_ID
    assert refused(harness, request("x", member_epoch=-1)) == (ErrorCode.UNKNOWN_MEMBER_ID,
                                                               "Member x is not a member of group group.")


def test_a_full_group_refuses_newcomers_but_not_its_members():
    harness = Harness(ShareGroupConfig(max_size=2))
    harness.client("a").join()
    b = harness.client("b")
    b.join()
    assert refused(harness, request("c")) == (ErrorCode.GROUP_MAX_SIZE_REACHED,
                                              "The share group has reached its maximum capacity of 2 members.")
    # Kafka checks the size before the member: a stranger's heartbeat is refused so too.
    assert refused(harness, request("c", member_epoch=5))[0] == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert b.heartbeat().error_code == ErrorCode.NONE
    b.leave()
    assert harness.client("c").join().error_code == ErrorCode.NONE


def test_the_defaults_are_kafkas():
    assert ShareGroupConfig() == ShareGroupConfig(session_timeout_ms=45000, heartbeat_interval_ms=5000, max_size=200,
                                                  initialize_retry_interval_ms=30000)


def test_a_deleted_group_is_not_found_until_a_member_joins_again():
    harness, (a,) = settled_group(1)
    a.leave()
    harness.carry_out(harness.group.delete(harness.now_ms))
    assert harness.group.state is ShareGroupState.DEAD
    assert refused(harness, request(member_epoch=3)) == (ErrorCode.GROUP_ID_NOT_FOUND, "Share group group not found.")
    assert refused(harness, request(member_epoch=-1)) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group group not found.")
    described = harness.group.describe(harness.topics)
    assert (described.error_code, described.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group group not found.")
    b = harness.client("b")
    assert b.join().member_epoch == 2  # a new group, from epoch 1
    assert harness.group.state is ShareGroupState.STABLE


def test_only_an_empty_group_is_deleted():
    harness, (a,) = settled_group(1)
    with pytest.raises(CoordinatorError) as refusal:
        harness.group.delete(harness.now_ms)
    assert refusal.value.error_code == ErrorCode.NON_EMPTY_GROUP
    a.leave()
    effects = harness.group.delete(harness.now_ms)
    assert record_kinds(effects[0].records) == ["TargetAssignmentMetadata-", "StatePartitionMetadata-", "Metadata-"]
    assert harness.group.state is ShareGroupState.EMPTY  # until the tombstones are durable
    harness.carry_out(effects)
    assert harness.group.state is ShareGroupState.DEAD and replayed(harness.persisted, harness).state is \
        ShareGroupState.DEAD


def test_what_kafka_answers_for_a_missing_group_or_one_of_another_type():
    assert group_not_found("g", 3) == (ErrorCode.GROUP_ID_NOT_FOUND, "Share group g not found.")
    assert group_not_found("g", -1) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g not found.")
    assert not_a_share_group("g") == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a share group.")


def test_offsets_are_not_a_share_groups_business():
    harness, _ = settled_group(1)
    assert harness.group.validate_offset_commit("a", 2) == ErrorCode.GROUP_ID_NOT_FOUND


# -- durability and replay -----------------------------------------------------------------------------------


def test_changes_are_shown_only_once_their_records_are_durable():
    harness, (a,) = settled_group(1)
    harness.held = []
    b = harness.client("b")
    b.join()
    assert "b" in harness.group.members  # the next request sees it
    assert {m.member_id for m in harness.group.describe(harness.topics).members} == {"a"}  # others do not, yet
    assert harness.group.durable_state().members.keys() == {"a"}
    for effect in harness.held:
        harness.tell_durable(effect)
    harness.held = None
    assert {m.member_id for m in harness.group.describe(harness.topics).members} == {"a", "b"}
    assert harness.group.durable_state() == harness.group.persisted_state()


def test_the_state_listed_is_the_durable_one():
    harness = Harness()
    harness.held = []
    harness.client("a").join()
    assert harness.group.listed() == ("group", "share", "Empty", "share")
    assert not harness.group.is_empty()  # what a deletion would ask
    for effect in harness.held:
        harness.tell_durable(effect)
    assert harness.group.listed() == ("group", "share", "Stable", "share")


def test_a_join_not_written_leaves_the_group_as_its_log_has_it_and_the_retry_joins():
    harness, (a,) = settled_group(1)
    before = harness.group.persisted_state()
    deadline = harness.group.next_deadline_ms()
    harness.write_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    harness.clock.advance(1000)
    b = harness.client("b")
    b.join()  # the core answers; its handler says COORDINATOR_NOT_AVAILABLE, as the write failed
    assert harness.group.persisted_state() == before and "b" not in harness.group.members
    assert harness.group.next_deadline_ms() == deadline  # a's session goes on as it was
    assert harness.group.initialized_partitions == {ORDERS: frozenset(range(6))}  # durable before: kept

    harness.write_error = None
    b.join()
    harness.settle()
    assert sorted(len(client.partitions()) for client in (a, b)) == [3, 3]
    assert harness.group.persisted_state() == replayed(harness.persisted, harness).persisted_state()


def test_a_failed_write_between_others_leaves_what_a_load_of_the_log_would_build():
    harness, (a,) = settled_group(1)
    harness.held = []
    b, c = harness.client("b"), harness.client("c")
    b.join()
    c.join()
    first, second = harness.held[0], harness.held[-1]
    assert len(harness.held) == 2
    harness.held = None
    first.on_failure(ErrorCode.COORDINATOR_NOT_AVAILABLE, harness.now_ms)  # told in append order
    harness.tell_durable(second)
    assert "b" not in harness.group.members and "c" in harness.group.members
    assert harness.group.persisted_state() == replayed(harness.persisted, harness).persisted_state()
    assert harness.group.durable_state() == harness.group.persisted_state()


def test_an_initialization_not_written_is_asked_for_again():
    harness = Harness(initialize=False, orders=2)
    a = harness.client("a")
    a.join()
    [asked] = harness.asked
    harness.write_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    harness.carry_out(harness.group.state_initialized(asked.partitions, harness.topics, harness.now_ms))
    assert harness.group.initialized_partitions == {}
    harness.write_error = None
    harness.carry_out(harness.group.state_initialized(asked.partitions, harness.topics, harness.now_ms))
    a.heartbeat()
    assert a.partitions() == {0, 1}


def test_replaying_the_records_rebuilds_an_equal_group():
    harness, (a, b, c) = settled_group(3, orders=3, payments=2)
    a.subscribe("orders", "payments")
    b.heartbeat()
    c.leave()
    harness.advance(SESSION_TIMEOUT_MS)  # a and b expire too
    d = harness.client("d", topics=("payments",))
    harness.clients[:] = [d]
    d.join()
    rebuilt = replayed(harness.persisted, harness)
    assert rebuilt.persisted_state() == harness.group.persisted_state()
    assert rebuilt.describe(harness.topics) == harness.group.describe(harness.topics)
    # The snapshot of the current state rebuilds it too (what compaction keeps).
    assert replayed(harness.group.records(), harness).persisted_state() == harness.group.persisted_state()


def test_a_replayed_group_carries_on_and_restarts_the_session_timers():
    harness, (a, b) = settled_group(2)
    harness.clock.advance(100_000)
    rebuilt = replayed(harness.persisted, harness)
    assert rebuilt.next_deadline_ms() == harness.now_ms + SESSION_TIMEOUT_MS
    assert rebuilt.state is ShareGroupState.STABLE
    harness.group = rebuilt
    c = harness.client("c")
    c.join()
    harness.settle()
    assert sorted(len(client.partitions()) for client in (a, b, c)) == [2, 2, 2]


def test_every_record_written_survives_the_codec():
    harness, (a, b) = settled_group(2, orders=2, payments=1)
    a.subscribe("orders", "payments")
    b.leave()
    harness.carry_out(harness.group.state_initialization_failed({PAYMENTS: [0]}, harness.now_ms))
    for key, value in harness.persisted:
        decoded_key = records.decode_key(records.encode_key(key))
        assert decoded_key == key and records.group_id_of(decoded_key) == "group"
        encoded = None if value is None else records.encode_value(value)
        assert records.decode_value(decoded_key, encoded) == value


def test_the_records_are_kafkas_share_group_records():
    key_versions = [(records.ShareGroupMemberMetadataKey(group_id="g", member_id="m"), 10),
                    (records.ShareGroupMetadataKey(group_id="g"), 11),
                    (records.ShareGroupTargetAssignmentMetadataKey(group_id="g"), 12),
                    (records.ShareGroupTargetAssignmentMemberKey(group_id="g", member_id="m"), 13),
                    (records.ShareGroupCurrentMemberAssignmentKey(group_id="g", member_id="m"), 14),
                    (records.ShareGroupStatePartitionMetadataKey(group_id="g"), 15)]
    for key, version in key_versions:
        assert records.encode_key(key)[:2] == version.to_bytes(2, "big")
    assert records.encode_key(records.ShareGroupMemberMetadataKey(group_id="g", member_id="m")) == \
        bytes.fromhex("000a" "0001" "67" "0001" "6d")
    # ShareGroupMetadataValue v0, flexible: epoch, metadata hash (Kafka 4.1+), no tagged fields.
    value = records.ShareGroupMetadataValue(epoch=3, metadata_hash=-2)
    assert records.encode_value(value) == bytes.fromhex("0000" "00000003" "fffffffffffffffe" "00")
    member = records.ShareGroupMemberMetadataValue(rack_id=None, client_id="c", client_host="h",
                                                   subscribed_topic_names=["t"])
    assert records.encode_value(member) == bytes.fromhex("0000" "00" "0263" "0268" "02" "0274" "00")


# -- describe and list ------------------------------------------------------------------------------------------


def test_describe_gives_epochs_members_and_assignments_by_topic_name():
    harness, (a, b) = settled_group(2, orders=2)
    described = harness.group.describe(harness.topics)
    assert (described.error_code, described.group_id, described.group_state, described.group_epoch,
            described.assignment_epoch, described.assignor_name) == (ErrorCode.NONE, "group", "Stable", 3, 3, "simple")
    assert ASSIGNOR_NAME == "simple"
    member = described.members[0]
    assert (member.member_id, member.member_epoch, member.client_id, member.client_host, member.rack_id,
            member.subscribed_topic_names) == ("a", 3, "client", "/127.0.0.1", None, ["orders"])
    assert [(t.topic_id, t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == \
        [(ORDERS, "orders", sorted(a.partitions()))]
    # A topic the broker no longer knows is left out.
    assert harness.group.describe(topics_view(other=1)).members[0].assignment.topic_partitions == []


def test_an_empty_group_is_described_and_listed_as_empty():
    group = ShareGroup("group", ShareGroupConfig(), 0)
    assert group.listed() == ("group", "share", "Empty", "share")
    described = group.describe(topics_view())
    assert (described.group_state, described.group_epoch, described.assignment_epoch, described.members) == \
        ("Empty", 1, 1, [])  # Kafka 4.4: a new group is at epoch 1, its target assignment too
    assert (group.kind, group.protocol_type) == ("share", "share")


# -- random sequences ---------------------------------------------------------------------------------------------

MEMBERS = ["m0", "m1", "m2", "m3", "m4"]
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS), st.sampled_from([("orders",), ("payments",),
                                                                           ("orders", "payments")])),
    st.tuples(st.just("heartbeat"), st.sampled_from(MEMBERS), st.none()),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS), st.none()),
    st.tuples(st.just("wait"), st.integers(1, SESSION_TIMEOUT_MS), st.none()),
    st.tuples(st.just("grow"), st.sampled_from(["orders", "payments"]), st.none()),
    st.tuples(st.just("fail next write"), st.none(), st.none()),
), max_size=30)


@settings(max_examples=150, deadline=None)
@given(operations=OPERATIONS)
def test_random_joins_leaves_heartbeats_and_expiries_keep_the_invariants(operations):
    harness = Harness(orders=2, payments=1)
    clients: dict[str, Client] = {}
    counts = {"orders": 2, "payments": 1}
    for operation, argument, topics in operations:
        if operation == "join":
            client = clients.get(argument) or harness.client(argument)
            clients[argument] = client
            client.topics = list(topics)
            client.join()
        elif operation == "heartbeat" and argument in clients and argument in harness.group.members:
            clients[argument].heartbeat()
        elif operation == "leave" and argument in clients and argument in harness.group.members:
            clients.pop(argument).leave()
        elif operation == "wait":
            harness.advance(argument)
            for member_id in [m for m in clients if m not in harness.group.members]:
                harness.clients.remove(clients.pop(member_id))  # expired
        elif operation == "grow":
            counts[argument] += 1
            harness.topics = topics_view(**counts)
        elif operation == "fail next write":
            harness.write_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            member_id = next((m for m in clients if m in harness.group.members), None)
            if member_id is not None:
                before = harness.group.persisted_state()
                harness.send(HeartbeatRequest(group_id="group", member_id=member_id, member_epoch=-1))
                assert harness.group.persisted_state() == before  # the leave was not written: undone
            harness.write_error = None
        check_invariants(harness)

    # Once every member has heartbeated, every subscribed partition is held by someone.
    harness.settle()
    check_invariants(harness)
    subscribed = {name for client in harness.clients for name in client.topics}
    held = {(topic, p) for client in harness.clients for topic, ps in client.assigned.items() for p in ps}
    assert held == {(topic_id(name), p) for name in subscribed for p in range(counts[name])}
    for client in harness.clients:
        assert client.epoch == harness.group.assignment_epoch == harness.group.group_epoch


def check_invariants(harness: Harness) -> None:
    group = harness.group
    harness.check_epochs()
    assert group.durable_state() == group.persisted_state()  # every write told durable or failed
    rebuilt = replayed(harness.persisted, harness)
    assert rebuilt.persisted_state() == group.persisted_state()
    assert replayed(group.records(), harness).persisted_state() == group.persisted_state()
    assert group.next_deadline_ms() is None if not group.members else group.next_deadline_ms() > harness.now_ms
    # Whenever the target is current, it holds only initialized partitions members subscribe to (and all of
    # them once settled, checked at the end: one initialized meanwhile waits for the next heartbeat).
    if group.members and group.assignment_epoch == group.group_epoch:
        subscribed = group.subscribed_topic_names()
        targeted = {(t, p) for assignment in group.target_assignment.values() for t, ps in assignment.items()
                    for p in ps}
        expected = {(t, p) for t, ps in group.initialized_partitions.items()
                    if harness.topics.names_by_id.get(t) in subscribed
                    for p in ps if p < harness.topics.by_name[harness.topics.names_by_id[t]][1]}
        assert targeted <= expected


def test_member_ids_generated_by_clients_are_kept_as_given():
    harness = Harness()
    ids = [str(uuid.uuid4()) for _ in range(3)]
    for member_id in ids:
        assert harness.client(member_id).join().member_id == member_id
    assert sorted(harness.group.members) == sorted(ids)

