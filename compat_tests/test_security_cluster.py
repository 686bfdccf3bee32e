"""Security on a cluster. Credentials and ACLs are metadata (issue 11, point 3): made once through
one broker of a three-node cluster, every broker answers for them (each is asked directly), a SCRAM
client authenticates against each, and all of it survives a restart of the whole cluster. And the
nodes themselves reach each other over TLS and SASL: the quorum, registrations and heartbeats over
a controller listener with mutual TLS, replication and transaction markers over a SASL_SSL
inter-broker listener with SCRAM."""

from __future__ import annotations

import pytest

from testkit import raw_client
from testkit.quorum_process import Quorum, add_listener, read_to_end, until
from testkit.secure_broker import make_certificates

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,  # noqa: E402
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

SECURITY = ("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:ANONYMOUS",  # the plaintext listener: brokers, and the test's admin
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT")
TOPIC = "secured"


def _scram(port: int, password: str = "alice-secret") -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": password}


def _produce(config: dict, topic: str, timeout_ms: int = 8000) -> KafkaError | None:
    producer = Producer({**config, "message.timeout.ms": timeout_ms, "acks": "all"})
    outcome = []
    producer.produce(topic, b"v", on_delivery=lambda error, _message: outcome.append(error))
    producer.flush(15)
    return outcome[0] if outcome else KafkaError(KafkaError._MSG_TIMED_OUT)


def _knows(node) -> bool:
    """Whether this broker's own image has alice's credential and her ACL."""
    Users = raw_client.request("DescribeUserScramCredentials", users=None)
    users = raw_client.call(node.client_port, "DescribeUserScramCredentials", 0, Users).results
    Acls = raw_client.request("DescribeAcls", resource_type_filter=2, resource_name_filter=TOPIC,
                              pattern_type_filter=3, principal_filter=None, host_filter=None, operation=1,
                              permission_type=1)
    acls = raw_client.call(node.client_port, "DescribeAcls", 3, Acls).resources
    return ([(u.user, [c.mechanism for c in u.credential_infos]) for u in users] == [("alice", [2])]
            and [(r.resource_name, [a.principal for a in r.acls]) for r in acls] == [(TOPIC, ["User:alice"])])


@pytest.mark.slow
def test_credentials_and_acls_reach_every_broker_and_survive_restarts(tmp_path):
    cluster = Quorum(tmp_path, combined=True, overrides=SECURITY)
    sasl_ports = add_listener(cluster, "SASL_PLAINTEXT")
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.nodes[0].bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3), NewTopic("unlisted", 1, 3)])[TOPIC].result(30)
        upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              b"alice-secret")
        admin.alter_user_scram_credentials([upsert])["alice"].result(30)
        binding = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.WRITE, AclPermissionType.ALLOW)
        admin.create_acls([binding])[binding].result(30)

        for round_ in ("after the change", "after a restart of every node"):
            for node in cluster.nodes:
                until(lambda: _knows(node), 20, f"node {node.node_id} to know alice and her ACL ({round_})")
                config = _scram(sasl_ports[node.node_id])
                assert _produce(config, TOPIC) is None, (round_, node.node_id)
                refused = _produce(config, "unlisted")
                assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                assert _produce(_scram(sasl_ports[node.node_id], "wrong"), TOPIC, timeout_ms=1500) is not None
            for node in cluster.nodes:
                node.kill()
            cluster.start()
    finally:
        cluster.close()


# -- a cluster whose nodes reach each other over secured listeners ------------------------------------------

BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
               'password="broker-secret";')
ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')
CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" '
                   'password="controller-secret" user_controller="controller-secret";')
# How nodes reach each other. Clients always come in on EXTERNAL (SASL_PLAINTEXT, PLAIN, user admin).
LAYOUTS = {
    # replication and transaction markers with SCRAM over TLS; the quorum, registrations and
    # heartbeats over TLS with certificates required
    "scram-internal-mtls-controller": lambda certificate_principal: (
        "listener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SSL",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
        f"listener.name.internal.scram-sha-512.sasl.jaas.config={BROKER_JAAS}",
        "listener.name.controller.ssl.client.auth=required",
        "super.users=User:admin;User:broker"),
    # replication with certificates required (the brokers' principal is their certificate's subject);
    # the controller listener with PLAIN
    "mtls-internal-plain-controller": lambda certificate_principal: (
        "listener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT,INTERNAL:SSL,CONTROLLER:SASL_PLAINTEXT",
        "listener.name.internal.ssl.client.auth=required",
        "sasl.mechanism.controller.protocol=PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.controller.plain.sasl.jaas.config={CONTROLLER_JAAS}",
        f"super.users=User:admin;{certificate_principal}"),
}


def _secured_cluster(tmp_path, layout: str) -> tuple[Quorum, dict[int, int]]:
    """Three combined nodes with listeners EXTERNAL, INTERNAL (inter-broker) and CONTROLLER, secured
    as ``layout`` says, ACLs on."""
    certificates = make_certificates(tmp_path)
    cluster = Quorum(tmp_path, combined=True, overrides=(
        *LAYOUTS[layout](_principal_of(certificates.broker)),
        "inter.broker.listener.name=INTERNAL",
        "listener.name.external.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.external.plain.sasl.jaas.config={ADMIN_JAAS}",
        f"ssl.keystore.location={certificates.broker}", f"ssl.truststore.location={certificates.ca}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=false"))
    return cluster, add_listener(cluster, "INTERNAL", client_listener="EXTERNAL")


def _principal_of(pem_path: str) -> str:
    """User: and the certificate's subject in RFC 2253 order, as Kafka (and kbroker) name a TLS client."""
    from cryptography import x509

    with open(pem_path, "rb") as file:
        certificate = x509.load_pem_x509_certificates(file.read())[0]
    return "User:" + certificate.subject.rfc4514_string()


def _admin_config(node) -> dict:
    return {"bootstrap.servers": node.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "admin", "sasl.password": "admin-secret"}


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_nodes_reach_each_other_over_tls_and_sasl(tmp_path, layout):
    cluster, internal_ports = _secured_cluster(tmp_path, layout)
    try:
        cluster.start()  # the quorum elected, and every broker registered and unfenced, over CONTROLLER
        first = cluster.nodes[0]
        for port in (first.controller_port, internal_ports[1]):  # neither serves an unauthenticated client
            with pytest.raises(OSError):
                raw_client.call(port, "Metadata", 1, raw_client.request("Metadata", topics=None), timeout_s=5)

        admin = AdminClient(_admin_config(first))
        upsert = UserScramCredentialUpsertion("broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              b"broker-secret")
        admin.alter_user_scram_credentials([upsert])["broker"].result(30)  # SCRAM followers can log in from now
        topic = NewTopic("replicated", 3, 3, config={"min.insync.replicas": "3"})
        admin.create_topics([topic])["replicated"].result(30)

        # acks=all with min.insync.replicas=3: each record acknowledged is on all three brokers
        producer = Producer({**_admin_config(first), "acks": "all", "enable.idempotence": True,
                             "message.timeout.ms": 60000})
        errors = []
        for index in range(3000):
            producer.produce("replicated", f"v{index}".encode(), partition=index % 3,
                             on_delivery=lambda error, _message: errors.append(error) if error else None)
            producer.poll(0)
        assert producer.flush(90) == 0 and errors == []

        # a transaction spanning partitions led by different brokers: its markers go over INTERNAL
        transactional = Producer({**_admin_config(first), "transactional.id": "secured-txn"})
        transactional.init_transactions(30)
        for outcome in ("commit", "abort"):
            transactional.begin_transaction()
            for index in range(30):
                transactional.produce("replicated", f"{outcome}{index}".encode(), partition=index % 3)
            getattr(transactional, f"{outcome}_transaction")(30)

        first.kill()  # what the survivors serve, they fetched from the leaders over INTERNAL
        consumer = Consumer({**_admin_config(cluster.nodes[1]), "group.id": "unused", "enable.partition.eof": True,
                             "isolation.level": "read_committed", "enable.auto.commit": False})
        consumer.assign([TopicPartition("replicated", p, 0) for p in range(3)])
        try:
            values = sorted(value.decode() for _, _, value in read_to_end(consumer, 3, timeout_s=60))
        finally:
            consumer.close()
        expected = sorted([f"v{index}" for index in range(3000)] + [f"commit{index}" for index in range(30)])
        assert values == expected
    finally:
        cluster.close()
