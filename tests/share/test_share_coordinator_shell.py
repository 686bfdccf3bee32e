"""The share coordinator served by a live broker (kbroker/share/shell.py): the five share-state APIs over the
wire, FindCoordinator's share keys, the state rebuilt from ``__share_group_state`` after a restart, and the
SharePersister (kbroker/share/persister.py) reaching it in process and, in a cluster, on another node.
The core's answers in detail are tests/share/test_share_coordinator.py's."""

from __future__ import annotations

import time
import uuid

import pytest
import trio

from kbroker.share.coordinator import SHARE_GROUP_STATE_TOPIC, coordinator_key, state_partition
from kbroker.share.persisted import PersistedState, StateBatch
from kbroker.share.persister import SharePersister
from kbroker.share.shell import SHARE_GROUP_STATE_TOPIC as SHELL_TOPIC
from kbroker.testing import running_broker, running_cluster
from kbroker.tools.client import Client
from kbroker.wire.errors import ErrorCode
from testkit import raw_client
from tests.share.coordinator_calls import ACKNOWLEDGED, AVAILABLE, delete, initialize, only, read, summary, write

STATE_PARTITIONS = 3  # share.coordinator.state.topic.num.partitions: quick to create and load
SETTINGS = {"share.coordinator.state.topic.num.partitions": STATE_PARTITIONS}
RETRIED = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
SERVED_WITHIN_S = 15
SHARE_KEY_TYPE = 2


def served(port: int, api_name: str, request, version: int = 0):
    """The response once the coordinator serves the request's first share-partition: at first use the topic is
    created and its partitions load."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    while True:
        response = raw_client.call(port, api_name, version, request)
        if response.results[0].partitions[0].error_code not in RETRIED or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def topic_id(running, name: str = "events") -> uuid.UUID:
    return running.broker.image.topics[name].topic_id


@pytest.fixture(scope="module")
def running():
    with running_broker(settings=SETTINGS) as broker:
        broker.create_topic("events", partitions=4)
        yield broker


def test_the_topic_is_created_at_first_use_as_kafka_creates_it(running):
    assert SHELL_TOPIC == SHARE_GROUP_STATE_TOPIC  # named by the shell without importing the core
    served(running.port, "ReadShareGroupStateSummary", summary((topic_id(running), 0), group="creates-topic"))
    topic = running.broker.image.topics[SHARE_GROUP_STATE_TOPIC]
    assert len(topic.partitions) == STATE_PARTITIONS
    assert {name: topic.configs.get(name) for name in ("cleanup.policy", "retention.ms", "min.insync.replicas",
                                                       "segment.bytes")} == {
        "cleanup.policy": "delete", "retention.ms": "-1", "min.insync.replicas": "1", "segment.bytes": "104857600"}


def test_initialize_write_read_summary_and_delete_over_the_wire(running):
    events, group = topic_id(running), "wire"
    answer = only(served(running.port, "InitializeShareGroupState", initialize((events, 0, 1, 10), group=group)))
    assert answer.error_code == ErrorCode.NONE
    state = only(served(running.port, "ReadShareGroupState", read((events, 0, 1), group=group)))
    assert (state.error_code, state.state_epoch, state.start_offset, state.state_batches) == (ErrorCode.NONE, 1, 10, [])

    written = served(running.port, "WriteShareGroupState", write(
        10, (10, 14, ACKNOWLEDGED, 1), (15, 19, AVAILABLE, 2), topic=events, leader_epoch=1, group=group), version=1)
    assert only(written).error_code == ErrorCode.NONE
    state = only(served(running.port, "ReadShareGroupState", read((events, 0, 1), group=group)))
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches] == [
        (10, 14, ACKNOWLEDGED, 1), (15, 19, AVAILABLE, 2)]

    described = only(served(running.port, "ReadShareGroupStateSummary", summary((events, 0), group=group), version=1))
    assert (described.error_code, described.state_epoch, described.leader_epoch, described.start_offset) == (
        ErrorCode.NONE, 1, 1, 10)

    assert only(served(running.port, "DeleteShareGroupState", delete((events, 0), group=group))).error_code == 0
    described = only(served(running.port, "ReadShareGroupStateSummary", summary((events, 0), group=group)))
    assert (described.error_code, described.start_offset) == (ErrorCode.NONE, -1)
    assert only(served(running.port, "ReadShareGroupState", read((events, 0, 1), group=group))).error_code == \
        ErrorCode.INVALID_REQUEST  # not initialized


def test_a_lower_state_epoch_is_fenced(running):
    events, group = topic_id(running), "fenced"
    served(running.port, "InitializeShareGroupState", initialize((events, 1, 5, 0), group=group))
    again = only(served(running.port, "InitializeShareGroupState", initialize((events, 1, 4, 0), group=group)))
    assert again.error_code == ErrorCode.FENCED_STATE_EPOCH
    stale = only(served(running.port, "WriteShareGroupState", write(0, topic=events, partition=1, state_epoch=4,
                                                                            group=group)))
    assert stale.error_code == ErrorCode.FENCED_STATE_EPOCH


def test_a_request_goes_whole_to_the_shard_of_its_first_share_partition(running):
    """Kafka's persister sends one share-partition a request; one naming others that another partition of
    __share_group_state keeps is answered NOT_COORDINATOR for them."""
    events, group = topic_id(running), "several"
    first, elsewhere = _in_different_state_partitions(group, events)
    response = served(running.port, "ReadShareGroupStateSummary", summary((events, first), (events, elsewhere),
                                                                          group=group))
    assert [topic.partitions[0].error_code for topic in response.results] == [
        ErrorCode.NONE, ErrorCode.NOT_COORDINATOR]


def _in_different_state_partitions(group: str, topic: uuid.UUID) -> tuple[int, int]:
    placed = {}
    for partition in range(4):
        placed.setdefault(state_partition(group, topic, partition, STATE_PARTITIONS), partition)
    assert len(placed) >= 2, placed
    return tuple(sorted(placed.values()))[:2]


def test_find_coordinator_names_this_broker_for_a_share_key(running):
    key = coordinator_key("finds", topic_id(running), 2)
    request = raw_client.request("FindCoordinator", key_type=SHARE_KEY_TYPE, coordinator_keys=[key, "no:such:key"])
    found, malformed = raw_client.call(running.port, "FindCoordinator", 6, request).coordinators
    assert (found.error_code, found.node_id, found.port) == (ErrorCode.NONE, 1, running.port)
    assert (malformed.key, malformed.error_code) == ("no:such:key", ErrorCode.INVALID_REQUEST)
    [before_v6] = raw_client.call(running.port, "FindCoordinator", 5, raw_client.request(
        "FindCoordinator", key_type=SHARE_KEY_TYPE, coordinator_keys=[key])).coordinators
    assert before_v6.error_code == ErrorCode.INVALID_REQUEST  # share keys came with v6 (KIP-932)


def test_the_persister_in_process(running):
    events, group = topic_id(running), "persisted"
    persister = SharePersister(running.broker)

    def run(method, *args):
        return trio.from_thread.run(getattr(persister, method), *args, trio_token=running.trio_token)

    assert run("initialize", group, 3, {events: [0, 1]}) == {(events, 0): ErrorCode.NONE, (events, 1): ErrorCode.NONE}
    assert run("read", group, events, 0, 2) == (ErrorCode.NONE, PersistedState(3, -1, (), 2))
    state = PersistedState(3, 7, (StateBatch(7, 9, ACKNOWLEDGED, 1),), 2)
    assert run("write", group, events, 0, 2, state) == ErrorCode.NONE
    assert run("read", group, events, 0, 2) == (ErrorCode.NONE, state)
    assert run("write", group, events, 0, 1, state) == ErrorCode.FENCED_LEADER_EPOCH  # a reader at 2 fenced 1
    assert run("read_summary", group, {events: [0, 1, 3]}) == {
        (events, 0): (ErrorCode.NONE, 7), (events, 1): (ErrorCode.NONE, -1), (events, 3): (ErrorCode.NONE, -1)}
    assert run("delete", group, {events: [0]}) == {(events, 0): ErrorCode.NONE}
    assert run("read", group, events, 0, 2) == (ErrorCode.INVALID_REQUEST, None)  # no longer initialized
    missing = uuid.uuid4()
    assert run("read_summary", group, {missing: [0]}) == {(missing, 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)}


def test_the_state_is_rebuilt_from_its_records_after_a_restart(tmp_path):
    group = "restarted"
    with running_broker(str(tmp_path), settings=SETTINGS) as first:
        first.create_topic("events", partitions=1)
        events = topic_id(first)
        served(first.port, "InitializeShareGroupState", initialize((events, 0, 2, 0), group=group))
        for start in range(0, 30, 10):  # a snapshot, then updates
            served(first.port, "WriteShareGroupState", write(
                start, (start, start + 9, ACKNOWLEDGED, 1), topic=events, state_epoch=2, group=group))
        before = only(served(first.port, "ReadShareGroupState", read((events, 0, 0), group=group)))
    with running_broker(str(tmp_path), settings=SETTINGS) as second:
        after = only(served(second.port, "ReadShareGroupState", read((events, 0, 0), group=group)))
    assert (after.error_code, after.state_epoch, after.start_offset) == (ErrorCode.NONE, 2, 20)
    assert after.state_batches == before.state_batches != []


# -- in a cluster -------------------------------------------------------------------------------------------------


class _Elsewhere:
    """A node of no partition of ``__share_group_state``, as a SharePersister sees it: every share-partition's
    coordinator (found with FindCoordinator, as Kafka's persister finds it) is another node, reached over
    ``peers`` at the brokers' listener addresses."""

    node_id = 0

    def __init__(self, peers, brokers, coordinators: dict[str, int]) -> None:
        self.peers = peers
        self.image = self
        self.live_brokers = brokers
        self.share_states = self
        self._coordinators = coordinators

    def peer_address(self, node_id: int) -> tuple[str, int] | None:
        return next(((broker.host, broker.port) for broker in self.live_brokers if broker.node_id == node_id), None)

    async def ensure_topic(self) -> None:
        """Created by the FindCoordinator lookups."""

    def coordinator_node(self, key: str) -> int:
        return self._coordinators[key]


@pytest.mark.slow
def test_the_persister_reaches_coordinators_on_other_nodes():
    from kbroker.metadata.image import BrokerEndpoint
    from kbroker.peers import Peers
    from kbroker.security.peer import PeerSecurity

    with running_cluster(nodes=3, settings=SETTINGS) as cluster:
        cluster.create_topic("events", partitions=4)
        client = Client(cluster.bootstrap, timeout_s=10)
        try:
            events = next(topic.topic_id for topic in client.metadata(["events"]).topics)
            brokers = tuple(BrokerEndpoint(broker.node_id, broker.host, broker.port)
                            for broker in client.metadata([]).brokers)
            keys = {partition: coordinator_key("across", events, partition) for partition in range(4)}
            coordinators = _find_share_coordinators(cluster, list(keys.values()))
        finally:
            client.close()
        assert len(set(coordinators.values())) > 1  # the state partitions are led across the nodes

        state = PersistedState(1, 5, (StateBatch(5, 8, ACKNOWLEDGED, 1),), 0)

        async def main():
            async with trio.open_nursery() as nursery:
                peers = Peers(PeerSecurity(), client_id="share-persister-test")
                await nursery.start(peers.run)
                persister = SharePersister(_Elsewhere(peers, brokers, coordinators))
                initialized = await persister.initialize("across", 1, {events: range(4)})
                written = [await persister.write("across", events, partition, 0, state) for partition in range(4)]
                read_back = [await persister.read("across", events, partition, 0) for partition in range(4)]
                nursery.cancel_scope.cancel()
            return initialized, written, read_back

        initialized, written, read_back = trio.run(main)
    assert set(initialized.values()) == {ErrorCode.NONE} and set(written) == {ErrorCode.NONE}
    assert read_back == [(ErrorCode.NONE, state)] * 4


def _find_share_coordinators(cluster, keys: list[str]) -> dict[str, int]:
    """FindCoordinator v6 for share keys, asked until each names its coordinator (the first lookup creates
    __share_group_state, whose leaders are then elected)."""
    host, port = cluster.nodes[0].host, cluster.nodes[0].port
    deadline = time.monotonic() + SERVED_WITHIN_S
    while True:
        request = raw_client.request("FindCoordinator", key_type=SHARE_KEY_TYPE, coordinator_keys=keys)
        found = raw_client.call(port, "FindCoordinator", 6, request, host=host).coordinators
        if all(coordinator.error_code == ErrorCode.NONE for coordinator in found) or time.monotonic() > deadline:
            assert [coordinator.error_code for coordinator in found] == [ErrorCode.NONE] * len(keys)
            return {coordinator.key: coordinator.node_id for coordinator in found}
        time.sleep(0.1)
