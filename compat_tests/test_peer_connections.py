"""Nodes keep their connections to each other (issue 25): on a three-node cluster whose nodes reach each
other over SASL_SSL only (the quorum, registrations and heartbeats on CONTROLLER with PLAIN, replication
on INTERNAL with SCRAM), a minute of light acks=all traffic opens no new node-to-node connections: the
heartbeats, ISR changes and replica fetches travel on connections made, and secured, once."""

from __future__ import annotations

import os
import time

import pytest

from compat_tests.test_metrics import samples
from compat_tests.test_security_cluster import ADMIN_JAAS, BROKER_JAAS, CONTROLLER_JAAS
from testkit.broker_process import free_port
from testkit.quorum_process import Quorum, add_listener
from testkit.secure_broker import make_certificates

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,  # noqa: E402
                                   UserScramCredentialUpsertion)

MEASURED_S = 60
FIRST_LOOK_S = 10
NODE_LISTENERS = ("INTERNAL", "CONTROLLER")  # how nodes reach each other; clients come in on EXTERNAL


def _cluster(tmp_path) -> tuple[Quorum, dict[int, int], dict[int, int]]:
    certificates = make_certificates(tmp_path)
    cluster = Quorum(tmp_path, combined=True, overrides=(
        "listener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name=INTERNAL",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
        f"listener.name.internal.scram-sha-512.sasl.jaas.config={BROKER_JAAS}",
        "sasl.mechanism.controller.protocol=PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.controller.plain.sasl.jaas.config={CONTROLLER_JAAS}",
        "listener.name.external.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.external.plain.sasl.jaas.config={ADMIN_JAAS}",
        f"ssl.keystore.location={certificates.broker}", f"ssl.truststore.location={certificates.ca}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin;User:broker;User:controller", "allow.everyone.if.no.acl.found=false"))
    internal_ports = add_listener(cluster, "INTERNAL", client_listener="EXTERNAL")
    metrics_ports = {node.node_id: free_port() for node in cluster.nodes}
    for node in cluster.nodes:
        node.overrides += (f"metrics.port={metrics_ports[node.node_id]}",)
    return cluster, internal_ports, metrics_ports


def _admin_config(node) -> dict:
    return {"bootstrap.servers": node.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "admin", "sasl.password": "admin-secret"}


def node_to_node_connections(pids: list[int], listening_ports: set[int]) -> int:
    """The established TCP connections that the processes ``pids`` opened to ``listening_ports``: the
    connecting end of each, found by its socket's inode among the processes' open files."""
    inodes = set()
    for pid in pids:
        for descriptor in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{descriptor}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            next(rows)
            for row in rows:
                fields = row.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if fields[3] == "01" and remote_port in listening_ports and int(fields[9]) in inodes:
                    count += 1
    return count


def _accepted(metrics_ports: dict[int, int]) -> int:
    """Connections the nodes' INTERNAL and CONTROLLER listeners accepted since they started."""
    total = 0
    for port in metrics_ports.values():
        for (name, labels), value in samples(port).items():
            if name == "kbroker_connections_accepted_total" and dict(labels)["listener"] in NODE_LISTENERS:
                total += value
    return int(total)


@pytest.mark.slow
def test_node_to_node_connections_stay_constant_over_a_minute(tmp_path):
    cluster, internal_ports, metrics_ports = _cluster(tmp_path)
    try:
        cluster.start()
        first = cluster.nodes[0]
        admin = AdminClient(_admin_config(first))
        upsert = UserScramCredentialUpsertion("broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              b"broker-secret")
        admin.alter_user_scram_credentials([upsert])["broker"].result(30)  # followers can log in to INTERNAL
        admin.create_topics([NewTopic("kept", 3, 3, config={"min.insync.replicas": "2"})])["kept"].result(30)

        producer = Producer({**_admin_config(first), "acks": "all", "message.timeout.ms": 30000})
        errors = []
        pids = [node.process.pid for node in cluster.nodes]
        listening = {*internal_ports.values(), *(node.controller_port for node in cluster.nodes)}
        looks = {}
        started = time.monotonic()
        sent = 0
        while (elapsed := time.monotonic() - started) < MEASURED_S:
            if elapsed >= FIRST_LOOK_S and FIRST_LOOK_S not in looks:
                looks[FIRST_LOOK_S] = (node_to_node_connections(pids, listening), _accepted(metrics_ports))
            producer.produce("kept", f"v{sent}".encode(), partition=sent % 3,
                             on_delivery=lambda error, _message: errors.append(error) if error else None)
            sent += 1
            producer.poll(0)
            time.sleep(0.1)  # about ten records a second
        looks[MEASURED_S] = (node_to_node_connections(pids, listening), _accepted(metrics_ports))
        assert producer.flush(30) == 0 and errors == []
        assert all(node.running for node in cluster.nodes)

        (open_first, accepted_first), (open_last, accepted_last) = looks[FIRST_LOOK_S], looks[MEASURED_S]
        print(f"node-to-node connections open: {open_first} at {FIRST_LOOK_S} s, {open_last} at {MEASURED_S} s; "
              f"accepted by INTERNAL and CONTROLLER: {accepted_first} by {FIRST_LOOK_S} s, {accepted_last} by "
              f"{MEASURED_S} s; {sent} records produced")
        assert open_first > 0
        assert open_last <= open_first
        assert accepted_last - accepted_first <= 3, (accepted_first, accepted_last)
    finally:
        cluster.close()
