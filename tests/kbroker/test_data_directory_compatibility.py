"""A data directory written by the last release opens with this code, everything in it intact.

The fixture (tests/fixtures/data_directory_0.1.0.tar.gz) was made by tests/fixtures/make_data_directory.py
with the release whose single node committed its metadata through its own log
(``kbroker/metadata/metadata_log.py``, before the single node became a one-voter Raft quorum): topics
and their configs, records, a compacted topic, a group's committed offsets, an idempotent and a
transactional producer, a SCRAM user and a dynamic broker config. A real broker process opens a copy
and real clients read each back.
"""

from __future__ import annotations

import os
import tarfile

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource  # noqa: E402

from tests.fixtures import make_data_directory as fixture  # noqa: E402
from testkit import raw_client  # noqa: E402
from testkit.broker_process import BrokerProcess, free_port  # noqa: E402

ARCHIVE = os.path.join(os.path.dirname(fixture.__file__), "data_directory_0.1.0.tar.gz")


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory):
    """The release's directory, opened by this code, with a SCRAM listener beside the plaintext one."""
    root = tmp_path_factory.mktemp("upgrade")
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(root, filter="data")
    plain, scram = free_port(), free_port()
    broker = BrokerProcess(
        root / "kbroker-data", plain,
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{scram}",
        "sasl.enabled.mechanisms=SCRAM-SHA-256")
    broker.start()
    broker.scram_port = scram
    yield broker
    broker.kill()


def _read(bootstrap: str, topic: str, partitions: int, expected: int, **config) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", **config})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    for _ in range(200):
        if len(records) >= expected:
            break
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            records.append(message)
    consumer.close()
    return records


def test_topics_and_their_configs(upgraded):
    admin = AdminClient({"bootstrap.servers": upgraded.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[fixture.ORDERS].partitions) == 3 and len(topics[fixture.COMPACTED].partitions) == 1
    resources = [ConfigResource(ConfigResource.Type.TOPIC, fixture.ORDERS),
                 ConfigResource(ConfigResource.Type.TOPIC, fixture.COMPACTED)]
    orders, accounts = (future.result(10) for future in admin.describe_configs(resources).values())
    assert {name: orders[name].value for name in fixture.ORDERS_CONFIGS} == fixture.ORDERS_CONFIGS
    assert accounts["cleanup.policy"].value == "compact"


def test_records_and_the_committed_transaction(upgraded):
    records = _read(upgraded.bootstrap, fixture.ORDERS, 3, fixture.ORDERS_RECORDS + fixture.TRANSACTION_RECORDS)
    values = {record.value().decode() for record in records}
    assert values == {f"v{i}" for i in range(fixture.ORDERS_RECORDS)} | {
        f"txn-{i}" for i in range(fixture.TRANSACTION_RECORDS)}
    for record in records:
        if record.key().startswith(b"k"):
            assert record.partition() == int(record.key()[1:]) % 3
    latest = {record.key(): record.value() for record in _read(upgraded.bootstrap, fixture.COMPACTED, 1, 10)}
    assert latest == {f"a{i}".encode(): f"second-{i}".encode() for i in range(5)}


def test_the_group_s_committed_offsets(upgraded):
    consumer = Consumer({"bootstrap.servers": upgraded.bootstrap, "group.id": fixture.GROUP})
    committed = consumer.committed([TopicPartition(fixture.ORDERS, p) for p in fixture.GROUP_OFFSETS], timeout=10)
    consumer.close()
    assert {tp.partition: (tp.offset, tp.metadata) for tp in committed} == {
        p: (offset, "checkpoint") for p, offset in fixture.GROUP_OFFSETS.items()}


def test_producer_state_the_idempotent_and_the_transactional_producer(upgraded):
    Describe = raw_client.request("DescribeProducers", topics=[
        raw_client.request("DescribeProducers").TopicRequest(name=fixture.ORDERS, partition_indexes=[0, 2])])
    answer = raw_client.call(upgraded.port, "DescribeProducers", 0, Describe)
    by_partition = {p.partition_index: p for p in answer.topics[0].partitions}
    assert all(p.error_code == 0 for p in by_partition.values())
    (idempotent,) = by_partition[0].active_producers  # wrote k0, k3, ... k27 to partition 0: sequences 0-9
    assert idempotent.last_sequence == fixture.ORDERS_RECORDS // 3 - 1
    assert len(by_partition[2].active_producers) == 2  # the idempotent one and the transactional one
    # The transactional id keeps its producer id: a new session of it is fenced in, epoch bumped.
    InitProducerId = raw_client.request("InitProducerId", transactional_id=fixture.TRANSACTIONAL_ID,
                                        transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1)
    coordinator = _transaction_coordinator_port(upgraded)
    session = raw_client.call(coordinator, "InitProducerId", 4, InitProducerId)
    transactional = next(p for p in by_partition[2].active_producers if p.producer_id != idempotent.producer_id)
    assert session.error_code == 0
    assert (session.producer_id, session.producer_epoch) == (transactional.producer_id, transactional.producer_epoch + 1)
    producer = Producer({"bootstrap.servers": upgraded.bootstrap, "transactional.id": fixture.TRANSACTIONAL_ID})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(fixture.ORDERS, key=b"after", value=b"upgrade", partition=2)
    producer.commit_transaction(30)


def _transaction_coordinator_port(broker) -> int:
    FindCoordinator = raw_client.request("FindCoordinator", key_type=1, coordinator_keys=[fixture.TRANSACTIONAL_ID])
    for _ in range(50):
        (found,) = raw_client.call(broker.port, "FindCoordinator", 4, FindCoordinator).coordinators
        if found.error_code == 0:
            return found.port
    raise AssertionError(f"no transaction coordinator: {found}")


def test_the_scram_user_authenticates_and_a_wrong_password_does_not(upgraded):
    def produce(password: str):
        outcome = []
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{upgraded.scram_port}", "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": fixture.SCRAM_USER,
                             "sasl.password": password, "message.timeout.ms": 8000})
        producer.produce(fixture.ORDERS, b"scram", partition=1, on_delivery=lambda error, _: outcome.append(error))
        producer.flush(15)
        return outcome

    assert produce(fixture.SCRAM_PASSWORD) == [None]
    assert produce("not-her-password")[0] is not None


def test_the_dynamic_broker_config(upgraded):
    admin = AdminClient({"bootstrap.servers": upgraded.bootstrap})
    (configs,) = (future.result(10) for future in admin.describe_configs(
        [ConfigResource(ConfigResource.Type.BROKER, "1")]).values())
    name, value = fixture.DYNAMIC_CONFIG
    assert configs[name].value == value and configs[name].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
