"""The KIP-848 consumer group core: stories with a fake clock, then every refusal."""

from __future__ import annotations

import copy
import itertools
import uuid

import pytest

from kbroker.group import records
from kbroker.group.consumer import ConsumerGroup, ConsumerGroupConfig, ConsumerGroupState, TopicsView
from kbroker.group.consumer_writes import ConsumerGroupWrites
from kbroker.effects import Persist
from kbroker.group.reconciliation import MemberState
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

HeartbeatRequest = API_BY_NAME["ConsumerGroupHeartbeat"].request_class
OwnedPartitions = HeartbeatRequest.TopicPartitions

SESSION_TIMEOUT_MS = 45000
REBALANCE_TIMEOUT_MS = 30000
HEARTBEAT_INTERVAL_MS = 5000


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def topics_view(**partition_counts: int) -> TopicsView:
    return TopicsView(by_name={name.replace("_", "-"): (topic_id(name.replace("_", "-")), count)
                               for name, count in partition_counts.items()})


ORDERS = topic_id("orders")


class Client:
    """A well-behaved KIP-848 consumer: it sends what it owns, and takes what it is given."""

    def __init__(self, harness: Harness, member_id: str, topics=("orders",), regex=None, instance_id=None,
                 assignor=None) -> None:
        self.harness = harness
        self.member_id = member_id
        self.topics, self.regex, self.instance_id, self.assignor = topics, regex, instance_id, assignor
        self.epoch = 0
        self.owned: dict[uuid.UUID, set[int]] = {}

    def join(self):
        self.epoch, self.owned = 0, {}
        return self.heartbeat(full=True)

    def heartbeat(self, *, full: bool = False, owned=None):
        """One heartbeat; ``owned`` overrides what the client says it owns (a slow revocation)."""
        said = self.owned if owned is None else owned
        request = HeartbeatRequest(
            group_id="group", member_id=self.member_id, member_epoch=self.epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if full else -1,
            subscribed_topic_names=list(self.topics) if full and self.topics is not None else None,
            subscribed_topic_regex=self.regex if full else None,
            server_assignor=self.assignor if full else None,
            topic_partitions=[OwnedPartitions(topic_id=t, partitions=sorted(p)) for t, p in said.items()])
        response = self.harness.send(request)
        assert response.error_code == ErrorCode.NONE, response.error_message
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.owned = {t.topic_id: set(t.partitions) for t in response.assignment.topic_partitions if t.partitions}
        return response

    def partitions(self, topic: uuid.UUID = ORDERS) -> set[int]:
        return set(self.owned.get(topic, ()))

    def leave(self, epoch: int = -1):
        response = self.harness.send(HeartbeatRequest(group_id="group", member_id=self.member_id, member_epoch=epoch,
                                                      instance_id=self.instance_id))
        assert response.error_code == ErrorCode.NONE, response.error_message
        self.owned = {}
        return response


class Harness:
    """One group, a fake clock, the topics, and every record the group asked to persist."""

    def __init__(self, config: ConsumerGroupConfig | None = None, **partition_counts: int) -> None:
        self.now_ms = 1_000
        self.topics = topics_view(**(partition_counts or {"orders": 6}))
        generated = itertools.count(1)
        self.group = ConsumerGroup("group", config or ConsumerGroupConfig(), self.now_ms,
                                   lambda: f"generated-{next(generated)}")
        self.persisted: list = []
        self.clients: list[Client] = []
        self.write_error: int | None = None  # while set, every write fails with it (its records are not kept)
        self.held: list[Persist] | None = None  # while a list, writes wait there (their fsync held back)

    def client(self, member_id: str, **kwargs) -> Client:
        client = Client(self, member_id, **kwargs)
        self.clients.append(client)
        return client

    def send(self, request, api_version: int = 1):
        response, effects = self.group.heartbeat(request, api_version, "client", "/127.0.0.1", self.topics, self.now_ms)
        self._keep(effects)
        self.check_no_partition_is_owned_twice()
        return response

    def tick(self, now_ms: int) -> list:
        self.now_ms = now_ms
        effects = self.group.tick(now_ms, self.topics)
        self._keep(effects)
        return effects

    def set_topics(self, **partition_counts: int) -> list:
        self.topics = topics_view(**partition_counts)
        effects = self.group.topics_changed(self.topics, self.now_ms)
        self._keep(effects)
        return effects

    def _keep(self, effects: list) -> None:
        for effect in effects:
            assert isinstance(effect, Persist)
            if self.held is not None:
                self.held.append(effect)
            elif self.write_error is not None:
                assert effect.on_failure is None or effect.on_failure(self.write_error, self.now_ms) == []
            else:
                self.tell_durable(effect)

    def tell_durable(self, effect: Persist) -> None:
        self.persisted += effect.records
        assert effect.on_durable is None or effect.on_durable(self.now_ms) == []

    def check_no_partition_is_owned_twice(self) -> None:
        seen: set[tuple[uuid.UUID, int]] = set()
        for client in self.clients:
            for topic, partitions in client.owned.items():
                for partition in partitions:
                    assert (topic, partition) not in seen, f"{topic}-{partition} is owned twice"
                    seen.add((topic, partition))

    def settle(self, clients=None, rounds: int = 10) -> None:
        """Heartbeat everyone until the group is Stable."""
        for _ in range(rounds):
            for client in clients or self.clients:
                client.heartbeat()
            if self.group.state is ConsumerGroupState.STABLE:
                return
        raise AssertionError(f"not stable after {rounds} rounds: {self.group.state}")


def three_stable_members() -> tuple[Harness, Client, Client, Client]:
    harness = Harness()
    a, b, c = harness.client("a"), harness.client("b"), harness.client("c")
    for client in (a, b, c):
        client.join()
    harness.settle()
    return harness, a, b, c


def record_kinds(persisted) -> list[str]:
    return [type(key).__name__.removeprefix("ConsumerGroup").removesuffix("Key") + ("" if value is not None else "-")
            for key, value in persisted]


# -- joining and reconciling ------------------------------------------------------------------


def test_first_member_joins_gets_every_partition_and_the_heartbeat_interval():
    harness = Harness()
    response = harness.client("a").join()
    assert response.member_id == "a"
    assert response.member_epoch == 2  # a new group is at epoch 1 (Kafka 4.4's ModernGroup): its first bump is 2
    assert response.heartbeat_interval_ms == HEARTBEAT_INTERVAL_MS
    assert [(t.topic_id, t.partitions) for t in response.assignment.topic_partitions] == [(ORDERS, [0, 1, 2, 3, 4, 5])]
    group = harness.group
    assert (group.group_epoch, group.assignment_epoch, group.state) == (2, 2, ConsumerGroupState.STABLE)
    # Member metadata, the subscribed topics, the epoch bump, the target, its epoch, then the member's assignment.
    assert record_kinds(harness.persisted) == ["MemberMetadata", "PartitionMetadata", "Metadata",
                                               "TargetAssignmentMember", "TargetAssignmentMetadata",
                                               "CurrentMemberAssignment"]


def test_three_members_on_six_partitions_end_with_two_each():
    harness, a, b, c = three_stable_members()
    assert [len(client.partitions()) for client in (a, b, c)] == [2, 2, 2]
    assert a.partitions() | b.partitions() | c.partitions() == set(range(6))
    assert a.epoch == b.epoch == c.epoch == harness.group.group_epoch == 4
    assert harness.group.state is ConsumerGroupState.STABLE


def test_a_fourth_member_gets_partitions_only_after_their_owner_revoked_them():
    harness, a, b, c = three_stable_members()
    d = harness.client("d")
    response = d.join()
    assert response.member_epoch == 5
    assert d.partitions() == set()  # its target partitions are still owned by others
    assert harness.group.members["d"].state is MemberState.UNRELEASED_PARTITIONS
    target_d = harness.group.target_assignment["d"][ORDERS]
    assert len(target_d) == 1
    previous_owner = next(client for client in (a, b, c) if target_d <= client.partitions())
    kept = previous_owner.partitions() - target_d

    # The owner is asked to revoke, and stays at its epoch meanwhile.
    before = previous_owner.partitions()
    response = previous_owner.heartbeat(owned={ORDERS: before})
    assert response.member_epoch == 4
    assert previous_owner.partitions() == kept
    assert harness.group.members[previous_owner.member_id].state is MemberState.UNREVOKED_PARTITIONS
    assert harness.group.state is ConsumerGroupState.RECONCILING

    # Until it says it let go, the newcomer waits.
    previous_owner.heartbeat(owned={ORDERS: before})
    assert previous_owner.epoch == 4
    d.heartbeat()
    assert d.partitions() == set()

    # Revoked: the owner moves to the new epoch and the partition goes to the newcomer.
    assert previous_owner.heartbeat().member_epoch == 5
    d.heartbeat()
    assert d.partitions() == target_d
    harness.settle()
    assert sorted(len(client.partitions()) for client in (a, b, c, d)) == [1, 1, 2, 2]
    assert set().union(*(client.partitions() for client in (a, b, c, d))) == set(range(6))


def test_a_member_whose_session_expires_is_fenced_and_its_partitions_go_to_the_others():
    harness, a, b, c = three_stable_members()
    harness.now_ms += 10_000
    a.heartbeat()
    b.heartbeat()
    c_deadline = harness.group.next_deadline_ms()
    assert c_deadline == 1_000 + SESSION_TIMEOUT_MS  # c's last heartbeat was at the start
    assert harness.tick(c_deadline - 1) == []

    effects = harness.tick(c_deadline)
    assert "c" not in harness.group.members
    assert harness.group.group_epoch == 5 == harness.group.assignment_epoch
    assert record_kinds(effects[0].records)[:4] == ["CurrentMemberAssignment-", "TargetAssignmentMember-",
                                                    "MemberMetadata-", "Metadata"]
    harness.clients.remove(c)
    harness.settle()
    assert a.partitions() | b.partitions() == set(range(6))
    assert len(a.partitions()) == len(b.partitions()) == 3


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    harness, a, b, c = three_stable_members()
    d = harness.client("d")
    d.join()
    stubborn = next(client for client in (a, b, c)
                    if harness.group.target_assignment[client.member_id][ORDERS] < client.partitions())
    held = stubborn.partitions()
    stubborn.heartbeat(owned={ORDERS: held})
    assert harness.group.members[stubborn.member_id].state is MemberState.UNREVOKED_PARTITIONS
    for client in (a, b, c, d):
        if client is not stubborn:
            client.heartbeat()
    due = harness.group.next_deadline_ms()
    assert due == harness.now_ms + REBALANCE_TIMEOUT_MS
    harness.tick(due)
    assert stubborn.member_id not in harness.group.members
    harness.clients.remove(stubborn)
    harness.settle()
    assert set().union(*(client.partitions() for client in harness.clients)) == set(range(6))


def test_a_member_that_leaves_hands_its_partitions_over():
    harness, a, b, c = three_stable_members()
    response = c.leave()
    assert (response.member_id, response.member_epoch) == ("c", -1)
    assert response.heartbeat_interval_ms == 0  # Kafka's leave answer names no interval
    assert "c" not in harness.group.members and harness.group.group_epoch == 5
    harness.clients.remove(c)
    harness.settle()
    assert a.partitions() | b.partitions() == set(range(6))


def test_the_last_member_leaving_empties_the_group():
    harness = Harness()
    a = harness.client("a")
    a.join()
    a.leave()
    assert harness.group.state is ConsumerGroupState.EMPTY and harness.group.is_empty()
    assert harness.group.next_deadline_ms() is None
    # As Kafka's consumerGroupFenceMembers: the last member gone, the empty target is at the new epoch.
    assert harness.group.group_epoch == harness.group.assignment_epoch == 3
    assert record_kinds(harness.persisted)[-2:] == ["Metadata", "TargetAssignmentMetadata"]


def test_a_heartbeat_sends_only_what_changed_and_changes_nothing_when_nothing_changed():
    harness, a, b, c = three_stable_members()
    count = len(harness.persisted)
    response = a.heartbeat()
    assert response.assignment is None  # null: unchanged
    assert response.member_epoch == 4
    assert len(harness.persisted) == count
    # Changing only the subscription (other fields null) bumps the group epoch.
    harness.topics = topics_view(orders=6, payments=3)
    harness.send(HeartbeatRequest(group_id="group", member_id="a", member_epoch=4,
                                  subscribed_topic_names=["orders", "payments"]))
    assert harness.group.group_epoch == 5
    assert harness.group.members["a"].subscribed_topic_names == {"orders", "payments"}
    assert harness.group.members["a"].rebalance_timeout_ms == REBALANCE_TIMEOUT_MS  # kept


def test_a_lost_answer_is_tolerated_with_the_previous_epoch_and_a_subset():
    harness, a, b, c = three_stable_members()
    previous = harness.group.members["a"].previous_member_epoch
    response = harness.send(HeartbeatRequest(group_id="group", member_id="a", member_epoch=previous,
                                             topic_partitions=[]))
    assert response.error_code == ErrorCode.NONE
    assert response.member_epoch == 4


def test_the_server_assignor_is_the_one_members_ask_for(monkeypatch):
    from kbroker.group import consumer

    used = []
    real_assign = consumer.assignors.assign

    def spying_assign(name, *args):
        used.append(name)
        return real_assign(name, *args)

    monkeypatch.setattr(consumer.assignors, "assign", spying_assign)
    harness = Harness()
    harness.client("a").join()
    harness.client("b", assignor="range").join()
    assert used == ["uniform", "range"]
    assert harness.group.describe(harness.topics).assignor_name == "range"


# -- subscriptions by regex and topic changes -----------------------------------------------------


def test_a_regex_subscription_picks_up_a_new_topic():
    harness = Harness(orders_us=2, payments=2)
    a = harness.client("a", topics=None, regex="orders-.*")
    a.join()
    assert set(a.owned) == {topic_id("orders-us")}
    epoch = harness.group.group_epoch

    # A topic the regex does not match changes nothing.
    assert harness.set_topics(orders_us=2, payments=2, audit=1) == []
    assert harness.group.group_epoch == epoch

    effects = harness.set_topics(orders_us=2, payments=2, audit=1, orders_eu=3)
    assert effects and harness.group.group_epoch == epoch + 1 == harness.group.assignment_epoch
    assert set(harness.group.subscription_metadata) == {"orders-us", "orders-eu"}
    a.heartbeat()
    assert a.owned == {topic_id("orders-us"): {0, 1}, topic_id("orders-eu"): {0, 1, 2}}


def test_added_partitions_are_assigned():
    harness, a, b, c = three_stable_members()
    harness.set_topics(orders=9)
    harness.settle()
    assert a.partitions() | b.partitions() | c.partitions() == set(range(9))


def test_a_deleted_topic_is_revoked():
    harness = Harness(orders=2, payments=2)
    a = harness.client("a", topics=("orders", "payments"))
    a.join()
    harness.set_topics(orders=2)
    a.heartbeat()
    assert set(a.owned) == {ORDERS}


# -- static membership ------------------------------------------------------------------------------


def test_a_static_member_that_leaves_for_now_gets_its_partitions_back_without_a_rebalance():
    harness = Harness()
    a, b = harness.client("a", instance_id="instance-a"), harness.client("b", instance_id="instance-b")
    a.join()
    b.join()
    harness.settle()
    a_partitions, epoch = a.partitions(), harness.group.group_epoch

    assert a.leave(epoch=-2).member_epoch == -2
    assert harness.group.members["a"].member_epoch == -2
    b.heartbeat()
    assert b.partitions() == set(range(6)) - a_partitions  # nothing moved to b

    # The restarted instance comes back under a new member id and takes over.
    harness.clients.remove(a)
    restarted = harness.client("a-restarted", instance_id="instance-a")
    response = restarted.join()
    assert response.member_epoch == epoch
    assert restarted.partitions() == a_partitions
    assert harness.group.group_epoch == epoch
    assert "a" not in harness.group.members
    assert harness.group.state is ConsumerGroupState.STABLE


def test_a_static_member_away_longer_than_its_session_loses_its_partitions():
    harness = Harness()
    a, b = harness.client("a", instance_id="instance-a"), harness.client("b", instance_id="instance-b")
    a.join()
    b.join()
    harness.settle()
    a.leave(epoch=-2)
    harness.clients.remove(a)
    harness.now_ms += SESSION_TIMEOUT_MS - 1
    b.heartbeat()
    harness.tick(harness.group.next_deadline_ms())
    assert "a" not in harness.group.members
    harness.settle()
    assert b.partitions() == set(range(6))


def test_static_member_errors():
    harness = Harness()
    a = harness.client("a", instance_id="instance-a")
    a.join()
    # The instance is still in use by a live member.
    response = harness.send(join_request("intruder", instance_id="instance-a"))
    assert response.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    # A heartbeat for the instance from another member id.
    response = harness.send(HeartbeatRequest(group_id="group", member_id="intruder", member_epoch=1,
                                             instance_id="instance-a"))
    assert response.error_code == ErrorCode.FENCED_INSTANCE_ID
    response = harness.send(HeartbeatRequest(group_id="group", member_id="intruder", member_epoch=-2,
                                             instance_id="instance-a"))
    assert response.error_code == ErrorCode.FENCED_INSTANCE_ID
    response = harness.send(HeartbeatRequest(group_id="group", member_id="x", member_epoch=1, instance_id="unknown"))
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID


# -- replay -------------------------------------------------------------------------------------------


def replayed(persisted, harness: Harness) -> ConsumerGroup:
    group = ConsumerGroup("group", ConsumerGroupConfig(), harness.now_ms, lambda: "unused")
    for key, value in persisted:
        # Through the bytes on disk, as a load reads them.
        key = records.decode_key(records.encode_key(key))
        value = records.decode_value(key, None if value is None else records.encode_value(value))
        group.replay(key, value)
    return group


def test_replaying_the_records_rebuilds_an_equal_group():
    harness, a, b, c = three_stable_members()
    d = harness.client("d", instance_id="instance-d", regex="ord.*", topics=())
    d.join()
    a.heartbeat()  # a partial reconciliation: some revoke, d waits for what they release
    b.heartbeat()
    c.leave()
    harness.clients.remove(c)
    d.leave(epoch=-2)
    assert harness.group.state is ConsumerGroupState.RECONCILING
    states = {member.state for member in harness.group.members.values()}
    assert MemberState.UNREVOKED_PARTITIONS in states or MemberState.UNRELEASED_PARTITIONS in states

    rebuilt = replayed(harness.persisted, harness)
    assert rebuilt.persisted_state() == harness.group.persisted_state()
    assert rebuilt.describe(harness.topics) == harness.group.describe(harness.topics)
    # The snapshot of the current state rebuilds it too (what compaction keeps).
    assert replayed(harness.group.records(), harness).persisted_state() == harness.group.persisted_state()


def test_a_replayed_group_carries_on_and_restarts_the_session_timers():
    harness, a, b, c = three_stable_members()
    harness.now_ms += 100_000
    rebuilt = replayed(harness.persisted, harness)
    assert rebuilt.next_deadline_ms() == harness.now_ms + SESSION_TIMEOUT_MS
    harness.group = rebuilt
    d = harness.client("d")
    d.join()
    harness.settle()
    assert sorted(len(client.partitions()) for client in (a, b, c, d)) == [1, 1, 2, 2]


def test_a_join_not_written_leaves_the_group_as_its_log_has_it_and_the_retry_joins():
    harness = Harness()
    harness.group.writes = ConsumerGroupWrites()  # as the coordinator gives every consumer group
    a, b = harness.client("a"), harness.client("b")
    a.join()
    harness.settle([a])
    before = copy.deepcopy(harness.group.persisted_state())
    deadline = harness.group.next_deadline_ms()

    harness.write_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    harness.now_ms += 1000
    b.join()  # the core answers; its handler says COORDINATOR_NOT_AVAILABLE, as the write failed
    assert harness.group.persisted_state() == before and "b" not in harness.group.members
    assert harness.group.persisted_state() == replayed(harness.persisted, harness).persisted_state()
    assert harness.group.next_deadline_ms() == deadline  # a's session goes on as it was

    harness.write_error = None
    harness.clients = [a, b]
    b.join()
    harness.settle()
    assert sorted(len(client.partitions()) for client in (a, b)) == [3, 3]
    assert harness.group.persisted_state() == replayed(harness.persisted, harness).persisted_state()


def test_a_failed_write_between_others_leaves_what_a_load_of_the_log_would_build():
    harness = Harness()
    harness.group.writes = ConsumerGroupWrites()
    a, b, c = harness.client("a"), harness.client("b"), harness.client("c")
    a.join()
    harness.settle([a])
    harness.held = []
    b.join()
    c.join()
    first, second = harness.held
    harness.held = None
    first.on_failure(ErrorCode.COORDINATOR_NOT_AVAILABLE, harness.now_ms)  # told in append order
    harness.tell_durable(second)
    assert "b" not in harness.group.members and "c" in harness.group.members
    assert harness.group.persisted_state() == replayed(harness.persisted, harness).persisted_state()


def test_deleting_the_group_records_leaves_it_dead():
    harness = Harness()
    group = harness.group
    group.replay(records.ConsumerGroupMetadataKey(group_id="group"), records.ConsumerGroupMetadataValue(epoch=3))
    assert group.state is ConsumerGroupState.EMPTY and group.group_epoch == 3
    group.replay(records.ConsumerGroupMetadataKey(group_id="group"), None)
    assert group.state is ConsumerGroupState.DEAD and group.is_empty()


# -- describe and offsets -------------------------------------------------------------------------------


def test_describe_gives_epochs_members_and_assignments_by_topic_name():
    harness, a, b, c = three_stable_members()
    described = harness.group.describe(harness.topics)
    assert (described.group_id, described.group_state, described.group_epoch, described.assignment_epoch,
            described.assignor_name) == ("group", "Stable", 4, 4, "uniform")
    member = next(m for m in described.members if m.member_id == "a")
    assert member.subscribed_topic_names == ["orders"]
    assert member.client_id == "client" and member.client_host == "/127.0.0.1"
    assert member.subscribed_topic_regex == ""  # Kafka's member keeps "" when it subscribed by names
    assigned = [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions]
    assert assigned == [("orders", sorted(a.partitions()))]
    assert member.target_assignment == member.assignment


def test_offset_commits_are_checked_against_the_member_epoch():
    harness = Harness()
    assert harness.group.validate_offset_commit("", -1) == ErrorCode.NONE  # an admin, on an empty group
    a = harness.client("a")
    a.join()
    assert harness.group.validate_offset_commit("a", 2) == ErrorCode.NONE
    assert harness.group.validate_offset_commit("a", 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert harness.group.validate_offset_commit("a", 3) == ErrorCode.STALE_MEMBER_EPOCH  # ahead is stale too
    # OffsetCommit below v9 carries no member epoch: Kafka refuses it to a KIP-848 member.
    assert harness.group.validate_offset_commit("a", 2, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert harness.group.validate_offset_commit("a", 2, 9) == ErrorCode.NONE
    assert harness.group.validate_offset_commit("stranger", 2, 8) == ErrorCode.UNKNOWN_MEMBER_ID
    assert harness.group.validate_offset_commit("stranger", 2) == ErrorCode.UNKNOWN_MEMBER_ID
    assert harness.group.validate_offset_commit("", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # not while it has members


# -- refusals ----------------------------------------------------------------------------------------------


def join_request(member_id: str = "a", **changes):
    fields = dict(group_id="group", member_id=member_id, member_epoch=0, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                  subscribed_topic_names=["orders"], topic_partitions=[])
    fields.update(changes)
    return HeartbeatRequest(**fields)


def refused(harness: Harness, request, api_version: int = 1) -> int:
    count = len(harness.persisted)
    response = harness.send(request, api_version)
    assert len(harness.persisted) == count, "a refusal must change nothing"
    assert (response.member_epoch, response.heartbeat_interval_ms) == (0, 0)  # Kafka sets only the error
    return response.error_code


def test_member_epochs_are_fenced():
    harness, a, b, c = three_stable_members()
    assert refused(harness, HeartbeatRequest(group_id="group", member_id="a", member_epoch=5)) == \
        ErrorCode.FENCED_MEMBER_EPOCH
    assert refused(harness, HeartbeatRequest(group_id="group", member_id="a", member_epoch=2)) == \
        ErrorCode.FENCED_MEMBER_EPOCH
    # The previous epoch, but claiming partitions the member does not have.
    others = sorted(b.partitions())
    assert refused(harness, HeartbeatRequest(group_id="group", member_id="a", member_epoch=3, topic_partitions=[
        OwnedPartitions(topic_id=ORDERS, partitions=others)])) == ErrorCode.FENCED_MEMBER_EPOCH


def test_unknown_members_are_refused():
    harness, a, b, c = three_stable_members()
    assert refused(harness, HeartbeatRequest(group_id="group", member_id="x", member_epoch=4)) == \
        ErrorCode.UNKNOWN_MEMBER_ID
    assert refused(harness, HeartbeatRequest(group_id="group", member_id="x", member_epoch=-1)) == \
        ErrorCode.UNKNOWN_MEMBER_ID


def test_unknown_assignor_and_bad_regex_are_refused():
    harness = Harness()
    assert refused(harness, join_request(server_assignor="sticky")) == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert refused(harness, join_request(subscribed_topic_names=None, subscribed_topic_regex="orders-(")) == \
        ErrorCode.INVALID_REGULAR_EXPRESSION


def test_a_full_group_refuses_newcomers_but_not_its_members():
    harness = Harness(ConsumerGroupConfig(max_size=2))
    harness.client("a").join()
    b = harness.client("b")
    b.join()
    assert refused(harness, join_request("c")) == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert b.heartbeat().error_code == ErrorCode.NONE


@pytest.mark.parametrize("request_fields, api_version", [
    (dict(member_id=""), 1),  # v1: the client names itself
    (dict(rebalance_timeout_ms=-1), 1),
    (dict(topic_partitions=None), 1),
    (dict(topic_partitions=[OwnedPartitions(topic_id=ORDERS, partitions=[0])]), 1),
    (dict(subscribed_topic_names=None), 1),
    (dict(instance_id="  "), 1),
    (dict(rack_id=""), 1),
    (dict(member_epoch=-2), 1),  # a static leave without an instance id
    (dict(member_epoch=-3), 1),
    (dict(member_id="", member_epoch=1), 0),
])
def test_malformed_requests_are_invalid(request_fields, api_version):
    assert refused(Harness(), join_request(**request_fields), api_version) == ErrorCode.INVALID_REQUEST


def test_v0_members_get_their_id_from_the_broker():
    harness = Harness()
    response = harness.send(join_request(""), api_version=0)
    assert response.error_code == ErrorCode.NONE
    assert response.member_id == "generated-1"
    assert "generated-1" in harness.group.members
