"""ACL authorization with stock clients (issue 11, point 2).

A broker with the ACL authorizer on, ``super.users=User:admin``, users over SASL_PLAINTEXT/PLAIN and
client certificates over SSL. The admin grants and revokes with confluent-kafka's AdminClient;
alice's producer, consumer and transactional producer feel each change: TOPIC_, GROUP_ and
TRANSACTIONAL_ID_AUTHORIZATION_FAILED until an ALLOW, success after it, failure again when a DENY
overrides it; Metadata leaves out what she may not describe.
"""

from __future__ import annotations

import uuid

import pytest

from testkit.broker_process import BrokerProcess, free_port

confluent_kafka = pytest.importorskip("confluent_kafka")
trustme = pytest.importorskip("trustme", reason="the trustme package (test extra) makes the TLS certificates")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType)
from cryptography import x509  # noqa: E402  (trustme's dependency)

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{user}="{password}"' for user, password in USERS.items()) + ";")


class AclBroker(BrokerProcess):
    def __init__(self, directory) -> None:
        ca = trustme.CA()
        self.ca_path, keystore = str(directory / "ca.pem"), str(directory / "broker.pem")
        self.cert_path, self.key_path = str(directory / "alice.pem"), str(directory / "alice.key")
        ca.cert_pem.write_to_path(self.ca_path)
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(keystore)
        alice = ca.issue_cert("alice@example.com", common_name="alice")
        alice.cert_chain_pems[0].write_to_path(self.cert_path)
        alice.private_key_pem.write_to_path(self.key_path)
        subject = x509.load_pem_x509_certificate(alice.cert_chain_pems[0].bytes()).subject
        self.certificate_principal = "User:" + subject.rfc4514_string()
        self.ports = {"SASL_PLAINTEXT": free_port(), "SSL": free_port(), "INTERNAL": free_port()}
        super().__init__(
            directory / "data", self.ports["INTERNAL"],
            "listeners=" + ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items()),
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
            "inter.broker.listener.name=INTERNAL",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin;User:ANONYMOUS",  # ANONYMOUS: the plaintext INTERNAL listener
            "sasl.enabled.mechanisms=PLAIN", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
            f"ssl.keystore.location={keystore}", f"ssl.truststore.location={self.ca_path}",
            "ssl.client.auth=required")

    def config(self, user: str) -> dict:
        if user == "alice-by-certificate":
            return {"bootstrap.servers": f"127.0.0.1:{self.ports['SSL']}", "security.protocol": "SSL",
                    "ssl.ca.location": self.ca_path, "ssl.certificate.location": self.cert_path,
                    "ssl.key.location": self.key_path}
        return {"bootstrap.servers": f"127.0.0.1:{self.ports['SASL_PLAINTEXT']}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = AclBroker(tmp_path_factory.mktemp("acls"))
    process.start()
    try:
        yield process
    finally:
        process.kill()


def _admin(broker) -> AdminClient:
    """The super user's admin client (kept in a variable while its futures are pending: a client
    that is garbage collected fails them with _DESTROY)."""
    return AdminClient(broker.config("admin"))


def _topic(broker) -> str:
    name, admin = f"acl-{uuid.uuid4().hex[:8]}", _admin(broker)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    return name


def _acl(kind, name, principal, operation, permission=AclPermissionType.ALLOW,
         pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, "*", operation, permission)


def _grant(broker, *bindings) -> None:
    admin = _admin(broker)
    for future in admin.create_acls(list(bindings)).values():
        future.result(timeout=30)


def _produce(broker, user: str, topic: str) -> KafkaError | None:
    """The delivery error of one record (None: acknowledged)."""
    producer = Producer({**broker.config(user), "message.timeout.ms": 5000})
    outcome = []
    producer.produce(topic, b"v", on_delivery=lambda error, _message: outcome.append(error))
    producer.flush(15)
    return outcome[0]


def test_write_needs_an_allow_and_a_deny_overrides_it(broker):
    topic = _topic(broker)
    refused = _produce(broker, "alice", topic)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _grant(broker, _acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE))
    assert _produce(broker, "alice", topic) is None
    _grant(broker, _acl(ResourceType.TOPIC, topic[:6], "User:*", AclOperation.WRITE, AclPermissionType.DENY,
                        ResourcePatternType.PREFIXED))
    refused = _produce(broker, "alice", topic)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = _admin(broker)
    deleted = admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, topic[:6], ResourcePatternType.PREFIXED, None, None, AclOperation.ANY,
        AclPermissionType.DENY)])
    assert [len(future.result(timeout=30)) for future in deleted.values()] == [1]
    assert _produce(broker, "alice", topic) is None


def test_metadata_leaves_out_topics_the_principal_may_not_describe(broker):
    hidden, shown = _topic(broker), _topic(broker)
    _grant(broker, _acl(ResourceType.TOPIC, shown, "User:alice", AclOperation.READ))  # READ implies DESCRIBE
    listed = AdminClient(broker.config("alice")).list_topics(timeout=10).topics
    assert shown in listed and hidden not in listed
    admin = _admin(broker)
    assert hidden in admin.list_topics(timeout=10).topics
    described = admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, shown, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(timeout=30)
    assert [(b.principal, b.operation) for b in described] == [("User:alice", AclOperation.READ)]


def test_offset_for_leader_epoch_needs_describe_on_the_topic(broker):
    """Asked through kbroker's own blocking client, logged in with SASL PLAIN."""
    from kbroker.tools.client import Connection
    from kbroker.config.client import ClientSecurity
    from kbroker.wire.errors import ErrorCode
    from kbroker.wire.schema import API_BY_NAME

    request = API_BY_NAME["OffsetForLeaderEpoch"].request_class
    topic = _topic(broker)

    def end_of_epoch(user: str) -> int:
        connection = Connection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], 10,
                                ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", user, USERS[user]))
        try:
            answer = connection.call("OffsetForLeaderEpoch", replica_id=-1, topics=[request.OffsetForLeaderTopic(
                topic=topic, partitions=[request.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=-1, leader_epoch=0)])])
            return answer.topics[0].partitions[0].error_code
        finally:
            connection.close()

    assert end_of_epoch("alice") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert end_of_epoch("admin") == ErrorCode.NONE
    _grant(broker, _acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.DESCRIBE))
    assert end_of_epoch("alice") == ErrorCode.NONE


def test_consuming_with_a_group_needs_read_on_the_group(broker):
    topic, group = _topic(broker), f"group-{uuid.uuid4().hex[:6]}"
    _grant(broker, _acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.ALL))
    assert _produce(broker, "alice", topic) is None

    def consume() -> tuple[list, set]:
        consumer = Consumer({**broker.config("alice"), "group.id": group, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        values, errors = [], set()
        try:
            for _ in range(30):
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    errors.add(message.error().code())
                    if message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                        break
                else:
                    values.append(message.value())
                    break
        finally:
            consumer.close()
        return values, errors

    values, errors = consume()
    assert not values and KafkaError.GROUP_AUTHORIZATION_FAILED in errors
    _grant(broker, _acl(ResourceType.GROUP, group, "User:alice", AclOperation.READ))
    values, errors = consume()
    assert values == [b"v"]


def test_transactions_need_write_on_the_transactional_id(broker):
    topic, transactional_id = _topic(broker), f"tx-{uuid.uuid4().hex[:6]}"
    _grant(broker, _acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE))
    config = {**broker.config("alice"), "transactional.id": transactional_id}
    with pytest.raises(KafkaException) as refused:
        Producer(config).init_transactions(10)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    _grant(broker, _acl(ResourceType.TRANSACTIONAL_ID, transactional_id, "User:alice", AclOperation.WRITE))
    producer = Producer(config)
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"in a transaction")
    producer.commit_transaction(15)


def test_a_client_certificate_is_its_principal(broker):
    topic = _topic(broker)
    refused = _produce(broker, "alice-by-certificate", topic)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _grant(broker, _acl(ResourceType.TOPIC, topic, broker.certificate_principal, AclOperation.WRITE))
    assert _produce(broker, "alice-by-certificate", topic) is None


def test_admin_apis_need_cluster_permissions(broker):
    alice = AdminClient(broker.config("alice"))
    binding = _acl(ResourceType.TOPIC, "anything", "User:alice", AclOperation.ALL)
    with pytest.raises(KafkaException) as refused:
        alice.create_acls([binding])[binding].result(timeout=30)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        alice.create_topics([NewTopic("made-by-alice", 1, 1)])["made-by-alice"].result(timeout=30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_authorized_operations_are_reported(broker):
    """KIP-430: what alice may do, as her own admin client sees it."""
    from confluent_kafka import TopicCollection

    topic = _topic(broker)
    _grant(broker, _acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ),
           _acl(ResourceType.BROKER, "kafka-cluster", "User:alice", AclOperation.DESCRIBE))
    alice = AdminClient(broker.config("alice"))
    described = alice.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(30)
    assert set(described.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    cluster = alice.describe_cluster(include_authorized_operations=True).result(30)
    assert set(cluster.authorized_operations) == {AclOperation.DESCRIBE}
    admin = _admin(broker)
    everything = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert AclOperation.ALTER in set(everything.authorized_operations)  # a super user
