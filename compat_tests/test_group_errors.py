"""Group error codes over a raw socket (requests built with `wire`), checked against Kafka's coordinator.

Issue 7, "What must be shown", point 5. GROUP_AUTHORIZATION_FAILED needs ACLs and
belongs to the security issue: no test here.
"""

import socket
import struct
import time
import uuid

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from testkit.broker_process import BrokerProcess
from kbroker.testing import running_broker
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_response, encode_request
from kbroker.wire.schema import API_BY_NAME

TOPIC = "errors"
SESSION_TIMEOUT_MS = 10000
REBALANCE_TIMEOUT_MS = 20000
CALL_TIMEOUT_S = 10

FindCoordinator = API_BY_NAME["FindCoordinator"].request_class
JoinGroup = API_BY_NAME["JoinGroup"].request_class
SyncGroup = API_BY_NAME["SyncGroup"].request_class
Heartbeat = API_BY_NAME["Heartbeat"].request_class
LeaveGroup = API_BY_NAME["LeaveGroup"].request_class
OffsetCommit = API_BY_NAME["OffsetCommit"].request_class
OffsetFetch = API_BY_NAME["OffsetFetch"].request_class
DescribeGroups = API_BY_NAME["DescribeGroups"].request_class
DeleteGroups = API_BY_NAME["DeleteGroups"].request_class
ConsumerGroupDescribe = API_BY_NAME["ConsumerGroupDescribe"].request_class
Metadata = API_BY_NAME["Metadata"].request_class
MISSING = "no-such-topic"  # never created in this module


class Connection:
    """One client connection: requests may be sent ahead and their answers read later, in order."""

    def __init__(self, port: int) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=CALL_TIMEOUT_S)
        self.correlation_id = 0
        self.pending: list[tuple[str, int, int]] = []

    def send(self, api_name: str, version: int, body) -> None:
        self.correlation_id += 1
        self.socket.sendall(encode_request(API_BY_NAME[api_name].key, version, self.correlation_id, "group-errors", body))
        self.pending.append((api_name, version, self.correlation_id))

    def receive(self, timeout_s: float = CALL_TIMEOUT_S):
        api_name, version, correlation_id = self.pending.pop(0)
        self.socket.settimeout(timeout_s)
        size = struct.unpack(">i", self._read(4))[0]
        answered_id, body = decode_response(API_BY_NAME[api_name].key, version, self._read(size))
        assert answered_id == correlation_id
        return body

    def call(self, api_name: str, version: int, body):
        self.send(api_name, version, body)
        return self.receive()

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.socket.recv(count - len(data))
            if not chunk:
                raise EOFError("connection closed")
            data += chunk
        return data

    def close(self) -> None:
        self.socket.close()


def find_coordinator(connection: Connection, group: str) -> None:
    """As clients do first: the broker creates __consumer_offsets on the first lookup, and answers
    group requests with NOT_COORDINATOR until it leads the group's partition."""
    request = FindCoordinator(key_type=0, coordinator_keys=[group])
    deadline = time.monotonic() + 30
    while True:
        [found] = connection.call("FindCoordinator", 4, request).coordinators
        if found.error_code == ErrorCode.NONE or time.monotonic() > deadline:
            break
        time.sleep(0.05)  # retry pacing, as a client's backoff
    assert found.error_code == ErrorCode.NONE
    probe = OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id=group, topics=None)])
    while connection.call("OffsetFetch", 8, probe).groups[0].error_code != ErrorCode.NONE and time.monotonic() < deadline:
        time.sleep(0.05)  # the same for the partition's loading


def join_request(group: str, member_id: str = ""):
    protocol = JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"")  # opaque to the coordinator
    return JoinGroup(group_id=group, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                     member_id=member_id, protocol_type="consumer", protocols=[protocol])


def first_join(connection: Connection, group: str) -> str:
    """KIP-394: a JoinGroup without a member id is answered MEMBER_ID_REQUIRED with the id to use."""
    find_coordinator(connection, group)
    response = connection.call("JoinGroup", 9, join_request(group))
    assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return response.member_id


def join_alone(connection: Connection, group: str) -> tuple[str, int]:
    """Join an empty group and complete its rebalance alone: (member id, generation), group Stable."""
    member_id = first_join(connection, group)
    joined = connection.call("JoinGroup", 9, join_request(group, member_id))
    assert joined.error_code == ErrorCode.NONE and joined.leader == member_id
    sync(connection, group, member_id, joined.generation_id)
    return member_id, joined.generation_id


def sync(connection: Connection, group: str, member_id: str, generation: int, assignments=()) -> None:
    request = SyncGroup(group_id=group, generation_id=generation, member_id=member_id, protocol_type="consumer", protocol_name="range",
                        assignments=[SyncGroup.SyncGroupRequestAssignment(member_id=m, assignment=b"") for m in assignments])
    assert connection.call("SyncGroup", 5, request).error_code == ErrorCode.NONE


def heartbeat(connection: Connection, group: str, member_id: str, generation: int) -> int:
    return connection.call("Heartbeat", 4, Heartbeat(group_id=group, generation_id=generation, member_id=member_id)).error_code


def commit(connection: Connection, group: str, member_id: str, generation: int, offset: int = 1, version: int = 9, partitions=(0,),
           topic: str = TOPIC, metadata: str | None = None) -> list[int]:
    partition = OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    request = OffsetCommit(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, topics=[
        OffsetCommit.OffsetCommitRequestTopic(name=topic, partitions=[
            partition(partition_index=p, committed_offset=offset, committed_metadata=metadata) for p in partitions])])
    response = connection.call("OffsetCommit", version, request)
    return [p.error_code for t in response.topics for p in t.partitions]


def leave(connection: Connection, group: str, member_id: str) -> None:
    request = LeaveGroup(group_id=group, members=[LeaveGroup.MemberIdentity(member_id=member_id)])
    assert connection.call("LeaveGroup", 5, request).error_code == ErrorCode.NONE


@pytest.fixture(scope="module")
def broker():
    with running_broker() as running:
        client = admin.AdminClient({"bootstrap.servers": running.bootstrap})
        client.create_topics([admin.NewTopic(TOPIC, 2)])[TOPIC].result(timeout=CALL_TIMEOUT_S)
        yield running


@pytest.fixture
def connection(broker):
    opened = Connection(broker.port)
    yield opened
    opened.close()


def test_unknown_member_id(connection):
    """A made-up member in a live group, and any member of a group that does not exist."""
    member_id, generation = join_alone(connection, "unknown-member")
    assert heartbeat(connection, "unknown-member", "made-up-member", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(connection, "unknown-member", "made-up-member", generation) == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert heartbeat(connection, "no-such-group", "made-up-member", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(connection, "unknown-member", member_id, generation) == ErrorCode.NONE
    leave(connection, "unknown-member", member_id)
    # An Empty group has no members to heartbeat.
    assert heartbeat(connection, "unknown-member", member_id, generation) == ErrorCode.UNKNOWN_MEMBER_ID


def test_illegal_generation(connection):
    member_id, generation = join_alone(connection, "generations")
    assert heartbeat(connection, "generations", member_id, generation + 1) == ErrorCode.ILLEGAL_GENERATION
    assert heartbeat(connection, "generations", member_id, generation - 1) == ErrorCode.ILLEGAL_GENERATION
    assert commit(connection, "generations", member_id, generation + 1) == [ErrorCode.ILLEGAL_GENERATION]
    assert commit(connection, "generations", member_id, generation) == [ErrorCode.NONE]
    # A commit with a generation to a group that does not exist: v9+ says so, older versions keep ILLEGAL_GENERATION.
    assert commit(connection, "no-such-group", "someone", 3, version=9) == [ErrorCode.GROUP_ID_NOT_FOUND]
    assert commit(connection, "no-such-group", "someone", 3, version=8) == [ErrorCode.ILLEGAL_GENERATION]
    leave(connection, "generations", member_id)


def test_rebalance_in_progress(broker, connection):
    """While a new member's JoinGroup waits for the old members, their heartbeats say REBALANCE_IN_PROGRESS."""
    old_id, generation = join_alone(connection, "rebalancing")
    newcomer = Connection(broker.port)
    try:
        new_id = first_join(newcomer, "rebalancing")
        newcomer.send("JoinGroup", 9, join_request("rebalancing", new_id))  # parked until the old member rejoins
        deadline = time.monotonic() + CALL_TIMEOUT_S
        error = heartbeat(connection, "rebalancing", old_id, generation)
        while error == ErrorCode.NONE and time.monotonic() < deadline:  # the join may not have reached the group yet
            error = heartbeat(connection, "rebalancing", old_id, generation)
        assert error == ErrorCode.REBALANCE_IN_PROGRESS
        # A commit of the current generation is still accepted while the group prepares the rebalance (as on Kafka).
        assert commit(connection, "rebalancing", old_id, generation) == [ErrorCode.NONE]

        rejoined = connection.call("JoinGroup", 9, join_request("rebalancing", old_id))
        answered = newcomer.receive()
        assert rejoined.error_code == answered.error_code == ErrorCode.NONE
        assert rejoined.generation_id == answered.generation_id == generation + 1
        assert {m.member_id for m in (rejoined if rejoined.leader == old_id else answered).members} == {old_id, new_id}
        # The old generation is over.
        assert heartbeat(connection, "rebalancing", old_id, generation) == ErrorCode.ILLEGAL_GENERATION
    finally:
        newcomer.close()


def test_deleting_an_active_group_is_non_empty_group(broker):
    client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy", "enable.auto.commit": False})
    assigned = []
    consumer.subscribe([TOPIC], on_assign=lambda _c, partitions: assigned.extend(partitions))
    try:
        deadline = time.monotonic() + 30
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert assigned
        with pytest.raises(confluent_kafka.KafkaException) as raised:
            client.delete_consumer_groups(["busy"])["busy"].result(timeout=CALL_TIMEOUT_S)
        assert raised.value.args[0].code() == confluent_kafka.KafkaError.NON_EMPTY_GROUP
    finally:
        consumer.close()
    # Once its only member has left, the group can go.
    client.delete_consumer_groups(["busy"])["busy"].result(timeout=CALL_TIMEOUT_S)
    assert "busy" not in {g.group_id for g in client.list_consumer_groups().result(timeout=CALL_TIMEOUT_S).valid}


def test_unknown_groups_are_group_id_not_found(broker, connection):
    response = connection.call("DeleteGroups", 2, DeleteGroups(groups_names=["never-was"]))
    assert [(r.group_id, r.error_code) for r in response.results] == [("never-was", ErrorCode.GROUP_ID_NOT_FOUND)]
    client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        client.delete_consumer_groups(["never-was"])["never-was"].result(timeout=CALL_TIMEOUT_S)
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND

    # DescribeGroups: from v6 (Kafka 4.0, KIP-1043) GROUP_ID_NOT_FOUND; before it, no error and the state Dead.
    [described] = connection.call("DescribeGroups", 6, DescribeGroups(groups=["never-was"])).groups
    assert (described.error_code, described.group_state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
    [described] = connection.call("DescribeGroups", 5, DescribeGroups(groups=["never-was"])).groups
    assert (described.error_code, described.group_state, described.members) == (ErrorCode.NONE, "Dead", [])
    [described] = connection.call("ConsumerGroupDescribe", 0, ConsumerGroupDescribe(group_ids=["never-was"])).groups
    assert described.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def committed(connection: Connection, group: str) -> dict:
    """Every offset the group holds, by (topic, partition) (OffsetFetch v8 for all topics)."""
    request = OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id=group, topics=None)])
    [answer] = connection.call("OffsetFetch", 8, request).groups
    return {(t.name, p.partition_index): p.committed_offset for t in answer.topics for p in t.partitions}


@pytest.mark.parametrize("version", range(2, 11))
def test_offsets_of_topics_and_partitions_that_do_not_exist_are_refused(connection, version):
    """Kafka (KafkaApis.handleOffsetCommitRequest) answers UNKNOWN_TOPIC_OR_PARTITION for a topic its metadata
    does not have and for a partition the topic does not have, stores nothing for them and commits the rest;
    from v10 topics come by id, and an id it does not know is UNKNOWN_TOPIC_ID."""
    group = f"unknown-topics-v{version}"
    find_coordinator(connection, group)
    [described] = connection.call("Metadata", 12, Metadata(topics=[Metadata.MetadataRequestTopic(name=TOPIC)],
                                                           allow_auto_topic_creation=False)).topics
    topic, partition = OffsetCommit.OffsetCommitRequestTopic, OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    request = OffsetCommit(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        topic(name=TOPIC, topic_id=described.topic_id, partitions=[
            partition(partition_index=index, committed_offset=5) for index in (0, 2, -1)]),
        topic(name=MISSING, topic_id=uuid.uuid4(), partitions=[partition(partition_index=0, committed_offset=5)])])
    response = connection.call("OffsetCommit", version, request)
    missing_topic = ErrorCode.UNKNOWN_TOPIC_ID if version >= 10 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert [[p.error_code for p in t.partitions] for t in response.topics] == [
        [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], [missing_topic]]
    assert committed(connection, group) == {(TOPIC, 0): 5}

    # Only partitions that do not exist: answered without asking the group, so a member it does not know
    # gets the partitions' error and no group is made.
    request.member_id, request.generation_id_or_member_epoch, request.topics[0].partitions[:1] = "someone", 3, []
    response = connection.call("OffsetCommit", version, request)
    assert [[p.error_code for p in t.partitions] for t in response.topics] == [
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], [missing_topic]]
    request.group_id, request.member_id, request.generation_id_or_member_epoch = f"never-made-v{version}", "", -1
    connection.call("OffsetCommit", version, request)
    [described] = connection.call("DescribeGroups", 5, DescribeGroups(groups=[request.group_id])).groups
    assert described.group_state == "Dead"


def test_clients_committing_offsets_of_a_missing_topic_get_unknown_topic_or_partition(broker):
    """The AdminClient's alter_consumer_group_offsets and a consumer's commit() see the error per partition."""
    client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    for group, wanted in (("admin-missing-topic", confluent_kafka.TopicPartition(MISSING, 0, 5)),
                          ("admin-missing-partition", confluent_kafka.TopicPartition(TOPIC, 7, 5))):
        future = client.alter_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(group, [wanted])])[group]
        [answered] = future.result(timeout=CALL_TIMEOUT_S).topic_partitions
        assert answered.error is not None and answered.error.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART

    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "consumer-missing-topic",
                                         "enable.auto.commit": False})
    try:
        with pytest.raises(confluent_kafka.KafkaException) as raised:
            consumer.commit(offsets=[confluent_kafka.TopicPartition(MISSING, 0, 5)], asynchronous=False)
        assert raised.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART, raised.value
    finally:
        consumer.close()


def offset_fetch(connection: Connection, group: str, partitions: int):
    """OffsetFetch v8 for one group: (group error, {partition: committed offset})."""
    request = OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id=group, topics=[
        OffsetFetch.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=list(range(partitions)))])])
    [answer] = connection.call("OffsetFetch", 8, request).groups
    return answer.error_code, {p.partition_index: p.committed_offset for t in answer.topics for p in t.partitions}


def test_coordinator_load_in_progress_after_a_restart(tmp_path):
    """Right after a restart, a big __consumer_offsets partition is still being read: COORDINATOR_LOAD_IN_PROGRESS, never wrong offsets.

    One __consumer_offsets partition, so every commit lands in the one being loaded.
    """
    partitions, commits = 100, 600  # 60,000 offset records with 1 KiB of metadata each
    broker = BrokerProcess(tmp_path / "data", None, "offsets.topic.num.partitions=1")
    broker.start()
    try:
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        client.create_topics([admin.NewTopic(TOPIC, partitions)])[TOPIC].result(timeout=CALL_TIMEOUT_S)
        writer = Connection(broker.port)
        find_coordinator(writer, "loaded")
        started = time.monotonic()
        for round_number in range(commits // 50):  # pipelined, fifty in flight
            for offset in range(round_number * 50, (round_number + 1) * 50):
                writer.send("OffsetCommit", 9, simple_commit(offset, partitions))
            for _ in range(50):
                response = writer.receive(60)
                assert {p.error_code for t in response.topics for p in t.partitions} == {ErrorCode.NONE}
        writer.close()
        write_s = time.monotonic() - started

        broker.kill()
        broker.start()
        reader = Connection(broker.port)
        started = time.monotonic()
        answers = []
        while time.monotonic() - started < 60:
            answers.append(offset_fetch(reader, "loaded", partitions))
            if answers[-1][0] != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
        load_s = time.monotonic() - started
        reader.close()
        *loading, final = answers
        assert final == (ErrorCode.NONE, {p: commits - 1 for p in range(partitions)})
        # Loading yields every 1,000 records, so requests during it are answered, with this error.
        assert loading and all(error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for error, _ in loading)
        observed = f"COORDINATOR_LOAD_IN_PROGRESS {len(loading)} times over {load_s:.2f} s" if loading else "loaded too fast to observe"
        print(f"\n{partitions * commits} offset records written in {write_s:.1f} s; after the restart: {observed}")
    finally:
        broker.kill()


def simple_commit(offset: int, partitions: int):
    """A commit outside group membership (generation -1), as the AdminClient makes: Kafka keeps it for an Empty group."""
    partition = OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    return OffsetCommit(group_id="loaded", generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommit.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            partition(partition_index=p, committed_offset=offset, committed_metadata="m" * 1024) for p in range(partitions)])])
