"""The schema registry on a three-node cluster (issue 27): every node answers, writes reach the one writer
(the leader of _schemas-0) from any node, and when the writer is SIGKILLed another node takes over with
every acknowledged schema and no id given twice."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from compat_tests.test_replication import FAST_FAILOVER
from kbroker.wire.schema import API_BY_NAME
from testkit import raw_client
from testkit.broker_process import free_port
from testkit.quorum_process import Quorum, until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def record(number: int) -> str:
    return json.dumps({"type": "record", "name": f"R{number}", "fields": [{"name": "f", "type": "int"}]})


def register(client: SchemaRegistryClient, subject: str, number: int, deadline_s: float = 60) -> int:
    """The id of record(number) under subject, retrying while the cluster has no writer (a failover)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return client.register_schema(subject, Schema(record(number), "AVRO"))
        except SchemaRegistryError as error:
            if error.http_status_code < 500 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_writes_from_any_node_and_a_failover_of_the_writer(tmp_path):
    cluster = Quorum(tmp_path, combined=True, overrides=FAST_FAILOVER + ("default.replication.factor=3",))
    urls = {}
    for node in cluster.nodes:
        port = free_port()
        node.overrides = (*node.overrides, f"schema.registry.listeners=http://127.0.0.1:{port}")
        urls[node.node_id] = f"http://127.0.0.1:{port}"
    cluster.start()
    try:
        clients = {node_id: SchemaRegistryClient({"url": url}) for node_id, url in urls.items()}
        ids = {}
        for number in range(9):  # through each node in turn: two of three pass their writes on
            node_id = 1 + number % 3
            ids[number] = register(clients[node_id], f"subject-{number}", number)
        assert sorted(ids.values()) == list(range(1, 10))
        assert _replicas(cluster) == 3  # a copy on every node: the writer's death loses nothing
        for client in clients.values():  # every node answers from its own copy (once it has caught up)
            until(lambda client=client: len(client.get_subjects()) == 9, 60, "every subject on every node")

        leader_id = _writer(cluster)
        cluster.node(leader_id).kill()
        survivors = [node_id for node_id in urls if node_id != leader_id]
        started = time.monotonic()
        for number in range(9, 15):
            ids[number] = register(clients[survivors[number % 2]], f"subject-{number}", number)
        failover_s = time.monotonic() - started
        assert len(set(ids.values())) == 15 and sorted(ids.values()) == list(range(1, 16)), ids
        for number in range(15):
            assert json.loads(clients[survivors[0]].get_schema(ids[number]).schema_str) == json.loads(record(number))
        print(f"\nregistry writer (node {leader_id}) SIGKILLed: the next six schemas registered through the "
              f"others in {failover_s:.1f} s, ids 1-15 each given once")
    finally:
        cluster.close()


def _schemas_partition(cluster: Quorum):
    """_schemas-0 as Metadata describes it."""
    request = API_BY_NAME["Metadata"].request_class(topics=[
        API_BY_NAME["Metadata"].request_class.MetadataRequestTopic(name="_schemas")])
    [topic] = raw_client.call(cluster.nodes[0].client_port, "Metadata", 9, request).topics
    return topic.partitions[0]


def _writer(cluster: Quorum) -> int:
    """The node leading _schemas-0."""
    return _schemas_partition(cluster).leader_id


def _replicas(cluster: Quorum) -> int:
    return len(_schemas_partition(cluster).replica_nodes)
