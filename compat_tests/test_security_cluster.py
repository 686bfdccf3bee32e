"""Credentials and ACLs are metadata (issue 11, point 3): made once through one broker of a
three-node cluster, every broker answers for them (each is asked directly), a SCRAM client
authenticates against each, and all of it survives a restart of the whole cluster."""

from __future__ import annotations

import pytest

from compat_tests import raw_client
from compat_tests.broker_process import free_port
from compat_tests.quorum_process import Quorum, until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, Producer  # noqa: E402
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


def test_credentials_and_acls_reach_every_broker_and_survive_restarts(tmp_path):
    cluster = Quorum(tmp_path, combined=True, overrides=SECURITY)
    sasl_ports = {}
    for node in cluster.nodes:
        sasl_ports[node.node_id] = free_port()
        node.overrides += (f"listeners=PLAINTEXT://127.0.0.1:{node.client_port},"
                           f"CONTROLLER://127.0.0.1:{node.controller_port},"
                           f"SASL_PLAINTEXT://127.0.0.1:{sasl_ports[node.node_id]}",)
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
