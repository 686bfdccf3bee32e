"""RunningBroker.reset() (kbroker/testing/reset.py) and RunningBroker.restart(), through stock clients.

A reset broker must look fresh to every client: no topic, group, committed offset, transaction, ACL,
quota, SCRAM user, dynamic config or schema left, and each coordinator working again from nothing
when a client's first request makes its topic anew. A restarted one keeps its port and everything
acknowledged."""

import json
import time
import urllib.request

import confluent_kafka
import confluent_kafka.admin
import pytest

from kbroker.testing import FIXTURE_SETTINGS, running_broker
from kbroker.tools.client import Client
from kbroker.wire.schema import API_BY_NAME

# ACLs are kept (and reset) only with the authorizer on; the anonymous client may do everything.
SECURED = {**FIXTURE_SETTINGS, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:ANONYMOUS"}
WAIT_S = 30
AlterClientQuotas = API_BY_NAME["AlterClientQuotas"].request_class
DescribeClientQuotas = API_BY_NAME["DescribeClientQuotas"].request_class
AVRO_USER = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})


@pytest.fixture(scope="module")
def secured():
    with running_broker(settings=SECURED) as running:
        yield running


def produce_in_a_transaction(bootstrap: str, transactional_id: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value)
    producer.commit_transaction(WAIT_S)


def read(bootstrap: str, topic: str, group: str, count: int, **config) -> list[bytes]:
    """``count`` values read by a member of ``group`` (committing as it goes), within WAIT_S."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", **config})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, partition, offset)
                             for (topic, partition), offset in offsets.items()], asynchronous=False)
    consumer.close()


def registry(url: str, path: str, body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=WAIT_S) as answer:
        return json.loads(answer.read())


def quotas(bootstrap: str) -> list:
    client = Client(bootstrap, timeout_s=WAIT_S)
    try:
        return client.bootstrap.call("DescribeClientQuotas", components=[], strict=False).entries
    finally:
        client.close()


def test_reset_leaves_nothing_a_client_could_find(secured):
    bootstrap = secured.bootstrap
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    secured.create_topic("orders", partitions=2, config={"retention.ms": 60_000})
    produce_in_a_transaction(bootstrap, "orders-writer", "orders", [b"one", b"two"])
    assert sorted(read(bootstrap, "orders", "billing", 2)) == [b"one", b"two"]  # two partitions: no order between them
    subject = registry(secured.schema_registry_url, "/subjects/users-value/versions", {"schema": AVRO_USER})
    assert subject["id"] >= 1
    acl = confluent_kafka.admin.AclBinding(
        confluent_kafka.admin.ResourceType.TOPIC, "orders", confluent_kafka.admin.ResourcePatternType.LITERAL,
        "User:alice", "*", confluent_kafka.admin.AclOperation.READ, confluent_kafka.admin.AclPermissionType.ALLOW)
    admin.create_acls([acl])[acl].result(WAIT_S)
    scram = confluent_kafka.admin.UserScramCredentialUpsertion(
        "alice", confluent_kafka.admin.ScramCredentialInfo(confluent_kafka.admin.ScramMechanism.SCRAM_SHA_256, 4096),
        b"secret")
    admin.alter_user_scram_credentials([scram])["alice"].result(WAIT_S)
    client = Client(bootstrap, timeout_s=WAIT_S)
    try:
        [entry] = client.bootstrap.call("AlterClientQuotas", validate_only=False, entries=[AlterClientQuotas.EntryData(
            entity=[AlterClientQuotas.EntryData.EntityData(entity_type="client-id", entity_name="greedy")],
            ops=[AlterClientQuotas.EntryData.OpData(key="producer_byte_rate", value=1024.0, remove=False)])]).entries
        assert entry.error_code == 0
    finally:
        client.close()
    broker_config = confluent_kafka.admin.ConfigResource(
        confluent_kafka.admin.ResourceType.BROKER, "1", incremental_configs=[confluent_kafka.admin.ConfigEntry(
            "log.cleaner.backoff.ms", "20000", incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])
    admin.incremental_alter_configs([broker_config])[broker_config].result(WAIT_S)
    assert quotas(bootstrap) and admin.describe_acls(_every_acl()).result(WAIT_S)

    secured.reset()

    assert list(admin.list_topics(timeout=WAIT_S).topics) == []  # the internal topics too
    assert admin.list_consumer_groups().result(WAIT_S).valid == []
    assert admin.describe_acls(_every_acl()).result(WAIT_S) == []
    assert admin.describe_user_scram_credentials().result(WAIT_S) == {}
    assert quotas(bootstrap) == []
    described = admin.describe_configs([confluent_kafka.admin.ConfigResource("broker", "1")])
    [configs] = [future.result(WAIT_S) for future in described.values()]
    assert configs["log.cleaner.backoff.ms"].source != confluent_kafka.admin.ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert registry(secured.schema_registry_url, "/subjects") == []
    assert secured.port == secured.broker.port  # the same broker, on the same port


def _every_acl():
    return confluent_kafka.admin.AclBindingFilter(
        confluent_kafka.admin.ResourceType.ANY, None, confluent_kafka.admin.ResourcePatternType.ANY, None, None,
        confluent_kafka.admin.AclOperation.ANY, confluent_kafka.admin.AclPermissionType.ANY)


def test_after_a_reset_groups_offsets_and_transactions_start_afresh(secured):
    """The coordinators work again on topics made anew: a group's old commit is not found, a
    transactional id begins again, a new registry hands out ids."""
    bootstrap = secured.bootstrap
    secured.create_topic("events")
    produce_in_a_transaction(bootstrap, "events-writer", "events", [b"old-%d" % i for i in range(5)])
    commit(bootstrap, "readers", {("events", 0): 5})
    secured.reset()

    secured.create_topic("events")
    produce_in_a_transaction(bootstrap, "events-writer", "events", [b"new-0", b"new-1"])
    assert read(bootstrap, "events", "readers", 2) == [b"new-0", b"new-1"]  # from 0: the commit of 5 went
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    [listed] = admin.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions("readers")]).values()
    [committed] = listed.result(WAIT_S).topic_partitions
    # past the two records, and past the transaction's commit marker once the consumer has fetched it
    assert (committed.topic, committed.partition) == ("events", 0) and committed.offset in (2, 3)


def test_a_reset_twice_in_a_row_and_of_an_empty_broker_is_quick_to_do_nothing(secured):
    secured.reset()
    secured.reset()
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": secured.bootstrap})
    assert list(admin.list_topics(timeout=WAIT_S).topics) == []


def test_restart_keeps_the_port_and_what_was_acknowledged(kbroker):
    """A producer and a consumer group across a restart: the clients reconnect by themselves to the same
    port; records and the group's committed offset are read back from the data directory."""
    kbroker.create_topic("journal")
    port, data_dir = kbroker.port, kbroker.data_dir
    producer = confluent_kafka.Producer({"bootstrap.servers": kbroker.bootstrap, "acks": "all"})
    for value in (b"a", b"b", b"c"):
        producer.produce("journal", value)
    assert producer.flush(WAIT_S) == 0
    assert read(kbroker.bootstrap, "journal", "auditors", 2) == [b"a", b"b"]  # committed at its close: 2
    assert _committed(kbroker.bootstrap, "auditors") == 2

    kbroker.restart()

    assert (kbroker.port, kbroker.data_dir) == (port, data_dir)
    failures = []
    producer.produce("journal", b"d", on_delivery=lambda error, _: error and failures.append(error))
    assert producer.flush(WAIT_S) == 0 and failures == []  # the same producer, reconnected
    assert _committed(kbroker.bootstrap, "auditors") == 2
    assert read(kbroker.bootstrap, "journal", "auditors", 2) == [b"c", b"d"]


def _committed(bootstrap: str, group: str) -> int:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    [listed] = admin.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(group)]).values()
    [partition] = listed.result(WAIT_S).topic_partitions
    return partition.offset


def test_restart_serves_the_schema_registry_again_at_the_same_address(kbroker):
    url = kbroker.schema_registry_url
    registered = registry(url, "/subjects/users-value/versions", {"schema": AVRO_USER})
    kbroker.restart()
    assert kbroker.schema_registry_url == url
    assert registry(url, "/subjects") == ["users-value"]
    assert registry(url, "/subjects/users-value/versions/1")["id"] == registered["id"]
