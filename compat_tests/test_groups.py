"""Classic consumer groups with stock clients, each member a process of its own (compat_tests/group_member.py).

Issue 7, "What must be shown", points 1-4: three members share six partitions,
a closing member hands over in the rebalance, a SIGKILLed one is evicted after
its session timeout, a restarted one resumes at the committed offsets; churn;
offsets and groups survive a broker SIGKILL; static membership.
Durations and duplicates are printed (pytest -s shows them).
"""

import random
import time

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from testkit.broker_process import BrokerProcess
from testkit.group_member import (
    BackgroundProducer, Member, balanced, check_everything_processed, check_resumed_at_committed, committed_offsets, wait_until,
)

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000  # the broker's group.min.session.timeout.ms, Kafka's default too
HEARTBEAT_INTERVAL_MS = 500
# The same timing for KIP-848 members, whose session and heartbeat the broker owns.
BROKER_OVERRIDES = (f"group.consumer.session.timeout.ms={SESSION_TIMEOUT_MS}", f"group.consumer.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}")
SETTLE_TIMEOUT_S = 60
CALL_TIMEOUT_S = 10


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("groups-broker"), None, *BROKER_OVERRIDES)
    process.start()
    yield process
    process.kill()


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([admin.NewTopic(name, partitions)])[name].result(timeout=CALL_TIMEOUT_S)


def owners(members) -> list[str]:
    return [member.describe() for member in members]


def three_members_share_and_hand_over(bootstrap: str, client: str, log_dir, session_timeout_ms: int = SESSION_TIMEOUT_MS) -> None:
    """Issue 7 point 1 for one client: share, close, SIGKILL, restart, then everything processed and committed."""
    topic = group = f"six-{client}"
    create_topic(bootstrap, topic)
    producer = BackgroundProducer(bootstrap, topic, PARTITIONS).start()

    def member(name: str) -> Member:
        return Member(client, bootstrap, group, topic, f"{client}-{name}", log_dir,
                      session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS).start()

    members = [member(str(i)) for i in range(3)]
    everyone = list(members)
    try:
        assert wait_until(lambda: balanced(members, PARTITIONS), SETTLE_TIMEOUT_S), owners(everyone)
        assert [len(m.partitions) for m in members] == [2, 2, 2]

        leaving = members.pop(0)
        started = time.monotonic()
        assert leaving.close() == 0
        assert wait_until(lambda: balanced(members, PARTITIONS), SETTLE_TIMEOUT_S), owners(everyone)
        handover_s = time.monotonic() - started
        # A member that leaves is replaced within the rebalance it starts, not after a session timeout.
        assert handover_s < session_timeout_ms / 1000, f"handover took {handover_s:.1f} s"

        killed = members.pop(0)
        killed_partitions = set(killed.partitions)
        started = time.monotonic()
        killed.kill()
        assert wait_until(lambda: balanced(members, PARTITIONS), session_timeout_ms / 1000 + 30), owners(everyone)
        eviction_s = time.monotonic() - started
        # Its partitions stay with the dead member until the session times out (less the last heartbeat's age).
        assert eviction_s >= session_timeout_ms / 1000 / 2, f"evicted after only {eviction_s:.1f} s"
        assert killed_partitions <= members[0].partitions

        restarted = member("restarted")
        members.append(restarted)
        everyone.append(restarted)
        assert wait_until(lambda: balanced(members, PARTITIONS), SETTLE_TIMEOUT_S), owners(everyone)
        assert wait_until(lambda: {e["partition"] for e in restarted.resumed} >= restarted.partitions, SETTLE_TIMEOUT_S), restarted.resumed

        end_offsets = producer.stop()
        expected = dict(enumerate(end_offsets))
        assert wait_until(lambda: committed_offsets(bootstrap, group, topic, PARTITIONS) == expected, SETTLE_TIMEOUT_S, 0.5), \
            (committed_offsets(bootstrap, group, topic, PARTITIONS), expected)
        for survivor in members:
            assert survivor.close() == 0
        assert not [e for m in everyone for e in m.errors()]
        duplicates = check_everything_processed(everyone, end_offsets)
        resumptions = check_resumed_at_committed(everyone)
        print(f"\n{client}: {sum(end_offsets)} records, {duplicates} processed twice, {resumptions} resumptions at the committed offset, "
              f"close handover {handover_s:.1f} s, SIGKILL eviction {eviction_s:.1f} s")
    finally:
        producer.stopping.set()
        for each in everyone:
            each.kill()


@pytest.mark.parametrize("client", ["confluent-classic", "kafka-python", "aiokafka"])
def test_three_members_share_six_partitions_and_hand_over(broker, tmp_path, client):
    three_members_share_and_hand_over(broker.bootstrap, client, tmp_path)


def churn(bootstrap: str, client: str, log_dir, seed: int = 7, rounds: int = 10) -> None:
    """Issue 7 point 2: members join and leave at random (seeded) while a producer writes.

    After every round the group settles with the live members; at the end every
    record was processed at least once and the committed offsets are the log ends.
    """
    rng = random.Random(seed)
    topic = group = f"churn-{client}"
    create_topic(bootstrap, topic)
    producer = BackgroundProducer(bootstrap, topic, PARTITIONS).start()
    joined = 0

    def join() -> Member:
        nonlocal joined
        joined += 1
        return Member(client, bootstrap, group, topic, f"{group}-{joined}", log_dir,
                      session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS).start()

    live = [join(), join()]
    everyone = list(live)
    changes = []
    try:
        assert wait_until(lambda: balanced(live, PARTITIONS), SETTLE_TIMEOUT_S), owners(everyone)
        for round_number in range(rounds):
            if len(live) == 1 or (len(live) < 4 and rng.random() < 0.5):
                live.append(join())
                everyone.append(live[-1])
                changes.append("+")
            else:
                assert live.pop(rng.randrange(len(live))).close() == 0
                changes.append("-")
            assert wait_until(lambda: balanced(live, PARTITIONS), SETTLE_TIMEOUT_S), (round_number, owners(everyone))
        end_offsets = producer.stop()
        expected = dict(enumerate(end_offsets))
        assert wait_until(lambda: committed_offsets(bootstrap, group, topic, PARTITIONS) == expected, SETTLE_TIMEOUT_S, 0.5), \
            (committed_offsets(bootstrap, group, topic, PARTITIONS), expected)
        for member in live:
            assert member.close() == 0
        assert not [e for m in everyone for e in m.errors()]
        duplicates = check_everything_processed(everyone, end_offsets)
        check_resumed_at_committed(everyone)
        print(f"\n{client} churn {''.join(changes)}: {len(everyone)} members, {sum(end_offsets)} records, {duplicates} processed twice")
    finally:
        producer.stopping.set()
        for member in everyone:
            member.kill()


def test_churn_every_record_is_processed_and_committed(broker, tmp_path):
    churn(broker.bootstrap, "confluent-classic", tmp_path)


def group_snapshot(bootstrap: str, groups: list[str], topic: str, partitions: int) -> dict:
    """What ListGroups, DescribeGroups and OffsetFetch say about ``groups``, through the AdminClient."""
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    listed = client.list_consumer_groups().result(timeout=CALL_TIMEOUT_S)
    listings = {g.group_id: (str(g.state), str(g.type), g.is_simple_consumer_group) for g in listed.valid if g.group_id in groups}
    described = {}
    for group_id, future in client.describe_consumer_groups(groups).items():
        description = future.result(timeout=CALL_TIMEOUT_S)
        described[group_id] = (str(description.state), str(description.type), description.partition_assignor, sorted(
            (m.member_id, m.group_instance_id, sorted(tp.partition for tp in m.assignment.topic_partitions)) for m in description.members))
    offsets = {}
    for group_id in groups:
        wanted = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
        request = [confluent_kafka.ConsumerGroupTopicPartitions(group_id, wanted)]
        result = client.list_consumer_group_offsets(request)[group_id].result(timeout=CALL_TIMEOUT_S)
        offsets[group_id] = [(tp.partition, tp.offset, tp.metadata) for tp in result.topic_partitions]
    return {"listed": listings, "described": described, "offsets": offsets}


def commit_in_group(bootstrap: str, group: str, topic: str, protocol: str, offsets: dict[int, int]) -> None:
    """Join ``group`` with one consumer, commit ``offsets`` (with a metadata string each) and leave."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                                         "enable.auto.commit": False})
    assigned = []
    consumer.subscribe([topic], on_assign=lambda _c, partitions: assigned.extend(partitions))

    def polled_until_assigned() -> bool:
        consumer.poll(0.1)  # the group protocol runs inside poll
        return len(assigned) == len(offsets)

    assert wait_until(polled_until_assigned, SETTLE_TIMEOUT_S, 0), assigned
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, p, o, metadata=f"{group}/{p}") for p, o in offsets.items()],
                    asynchronous=False)
    consumer.close()


def test_offsets_and_groups_survive_a_broker_sigkill(tmp_path):
    topic, partitions = "kept", 3
    broker = BrokerProcess(tmp_path / "data", None, *BROKER_OVERRIDES)
    broker.start()
    active = None
    try:
        create_topic(broker.bootstrap, topic, partitions)
        commit_in_group(broker.bootstrap, "kept-classic", topic, "classic", {0: 3, 1: 4, 2: 5})
        commit_in_group(broker.bootstrap, "kept-consumer", topic, "consumer", {0: 6, 1: 7, 2: 8})
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        simple = confluent_kafka.ConsumerGroupTopicPartitions("kept-simple", [confluent_kafka.TopicPartition(topic, p, 9 + p) for p in range(partitions)])
        client.alter_consumer_group_offsets([simple])["kept-simple"].result(timeout=CALL_TIMEOUT_S)
        # A live member across the restart: Kafka stores members with the group, so it stays in, under the same member id.
        active = Member("confluent-classic", broker.bootstrap, "kept-active", topic, "kept-active", tmp_path, session_timeout_ms=30000,
                        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS).start()
        assert wait_until(lambda: len(active.partitions) == partitions, SETTLE_TIMEOUT_S), active.describe()
        groups = ["kept-classic", "kept-consumer", "kept-simple", "kept-active"]
        before = group_snapshot(broker.bootstrap, groups, topic, partitions)
        assert set(before["listed"]) == set(groups), before["listed"]
        assert before["offsets"]["kept-classic"] == [(p, 3 + p, f"kept-classic/{p}") for p in range(partitions)]
        callbacks_before = active.assignments

        broker.kill()
        broker.start()

        def snapshot_or_none():
            try:
                return group_snapshot(broker.bootstrap, groups, topic, partitions)
            except confluent_kafka.KafkaException:
                return None  # still loading; the AdminClient gives up on some retriable errors

        assert wait_until(lambda: snapshot_or_none() == before, SETTLE_TIMEOUT_S, 0.5), (before, snapshot_or_none())
        assert active.assignments == callbacks_before  # the live member went on heartbeating: no rebalance
        states = ", ".join(f"{group} {state.split('.')[-1]}" for group, (state, _type, _simple) in sorted(before["listed"].items()))
        print(f"\nafter a SIGKILL and restart, the same listing, descriptions and offsets: {states}")
    finally:
        if active is not None:
            active.kill()
        broker.kill()


def test_static_member_restarted_within_its_session_timeout_gets_its_partitions_back(broker, tmp_path):
    """KIP-345: the same group.instance.id rejoining takes its old member's place; the others do not rebalance."""
    topic = group = "static"
    create_topic(broker.bootstrap, topic)
    producer = BackgroundProducer(broker.bootstrap, topic, PARTITIONS).start()

    def member(index: int, name: str) -> Member:
        # A long session timeout: the restart must happen within it.
        return Member("confluent-classic", broker.bootstrap, group, topic, name, tmp_path, instance_id=f"static-{index}",
                      session_timeout_ms=30000, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS).start()

    members = [member(i, f"static-{i}") for i in range(3)]
    everyone = list(members)
    try:
        assert wait_until(lambda: balanced(members, PARTITIONS), SETTLE_TIMEOUT_S), owners(everyone)
        assert wait_until(lambda: all(m.last("assigned") and m.processed for m in members), SETTLE_TIMEOUT_S)
        generation = members[0].last("assigned")["generation"]
        assert generation is not None and all(m.last("assigned")["generation"] == generation for m in members)
        callbacks_before = [m.assignments for m in members]
        describe_before = describe_members(broker.bootstrap, group)

        victim = members[1]
        victim_partitions = set(victim.partitions)
        victim.kill()
        replacement = member(1, "static-1-restarted")
        everyone.append(replacement)
        members[1] = replacement
        assert wait_until(lambda: replacement.partitions, SETTLE_TIMEOUT_S), replacement.describe()
        assert replacement.partitions == victim_partitions
        assert replacement.last("assigned")["generation"] == generation
        assert wait_until(lambda: {e["partition"] for e in replacement.resumed} >= victim_partitions, SETTLE_TIMEOUT_S)

        # Several heartbeat intervals during which the others would have been told to rejoin.
        others_moved = wait_until(lambda: [members[0].assignments, members[2].assignments] != [callbacks_before[0], callbacks_before[2]], 3)
        assert not others_moved, owners(everyone)
        describe_after = describe_members(broker.bootstrap, group)
        assert describe_after["static-0"] == describe_before["static-0"] and describe_after["static-2"] == describe_before["static-2"]
        assert describe_after["static-1"][0] != describe_before["static-1"][0]  # a new member id for the new process
        assert describe_after["static-1"][1] == describe_before["static-1"][1]  # with the same partitions

        end_offsets = producer.stop()
        assert wait_until(lambda: committed_offsets(broker.bootstrap, group, topic, PARTITIONS) == dict(enumerate(end_offsets)),
                          SETTLE_TIMEOUT_S, 0.5)
        duplicates = check_everything_processed(everyone, end_offsets)
        check_resumed_at_committed(everyone)
        print(f"\nstatic: generation {generation} kept across the restart, {duplicates} processed twice")
    finally:
        producer.stopping.set()
        for each in everyone:
            each.kill()


def test_a_static_member_whose_instance_id_a_second_process_takes_is_fenced(broker, tmp_path):
    """KIP-345 (issue 24): the second consumer with a group.instance.id replaces the first, which
    learns it is fenced (FENCED_INSTANCE_ID, fatal in librdkafka) at its next heartbeat instead of
    rejoining and replacing the second in turn, again and again."""
    topic = group = "static-fenced"
    create_topic(broker.bootstrap, topic)

    def member(name: str) -> Member:
        return Member("confluent-classic", broker.bootstrap, group, topic, name, tmp_path, instance_id="shared",
                      session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS).start()

    everything = set(range(PARTITIONS))
    first = member("shared-first")
    second = None
    try:
        assert wait_until(lambda: first.partitions == everything, SETTLE_TIMEOUT_S), first.describe()
        generation = first.last("assigned")["generation"]
        second = member("shared-second")
        assert wait_until(lambda: first.last("fatal") is not None, SETTLE_TIMEOUT_S), [first.describe(), second.describe()]
        # librdkafka's words for FENCED_INSTANCE_ID, inside its _FATAL error.
        assert "Static consumer fenced by other consumer with same group.instance.id" in first.last("fatal")["reason"]
        assert wait_until(lambda: second.partitions == everything, SETTLE_TIMEOUT_S), second.describe()
        assert wait_until(lambda: not first.alive, CALL_TIMEOUT_S), first.describe()

        # Nothing ping-pongs: over many heartbeat intervals the second keeps its member id, its
        # partitions and the generation, with no further JoinGroup (a rejoin would take a new id).
        settled = second.last("assigned")
        callbacks = second.assignments
        window_s = 8 * HEARTBEAT_INTERVAL_MS / 1000
        assert describe_members(broker.bootstrap, group) == {"shared": (settled["member_id"], sorted(everything))}
        assert not wait_until(lambda: second.assignments != callbacks, window_s), second.events[-5:]
        assert describe_members(broker.bootstrap, group) == {"shared": (settled["member_id"], sorted(everything))}
        assert settled["generation"] == generation  # a static member's return is no rebalance
        assert second.alive and not second.errors() and second.last("fatal") is None
    finally:
        for each in (first, second):
            if each is not None:
                each.kill()


def describe_members(bootstrap: str, group: str) -> dict[str, tuple[str, list[int]]]:
    """group.instance.id -> (member id, assigned partitions), from DescribeGroups."""
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    description = client.describe_consumer_groups([group])[group].result(timeout=CALL_TIMEOUT_S)
    assert str(description.state).endswith("STABLE"), description.state
    return {m.group_instance_id: (m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions)) for m in description.members}
