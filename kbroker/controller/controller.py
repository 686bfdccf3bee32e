"""A controller: one voter of the metadata quorum, serving its controller listener.

It is active (takes admin changes) while it leads the quorum and has applied
everything committed before its epoch began; a change is answered once a
majority has it. Elsewhere it answers NOT_CONTROLLER and the client tries the
others, as with Kafka's controllers.
"""

from __future__ import annotations

import logging
import os
import uuid

import trio

from kbroker.config import BrokerConfig
from kbroker.controller.handlers import CONTROLLER_HANDLERS, controller_api_versions
from kbroker.controller.state import MetadataState, encode_change
from kbroker.server import Server, ServerLimits
from log.checkpoint import kafka_uuid_string
from raft.driver import NotLeader, RaftDriver
from raft.node import Leader, RaftConfig
from raft.store import RaftStore
from wire.errors import ErrorCode

logger = logging.getLogger("kbroker.controller")

METADATA_PARTITION = "__cluster_metadata-0"


def quorum_cluster_id(config: BrokerConfig) -> str:
    """The cluster id every node of a quorum derives alike from ``controller.quorum.voters``.

    Kafka has every node formatted with one id first (``kafka-storage format``);
    kbroker has no format step, so the id is a name-based UUID of the voter set.
    """
    voters = ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in sorted(config.quorum_voters, key=lambda v: v.node_id))
    return kafka_uuid_string(uuid.uuid5(uuid.NAMESPACE_URL, f"kbroker-quorum:{voters}"))


def metadata_directory(config: BrokerConfig) -> str:
    return os.path.join(config.get("metadata.log.dir") or config.get("log.dirs")[0], METADATA_PARTITION)


def raft_config(config: BrokerConfig) -> RaftConfig:
    return RaftConfig(election_timeout_ms=config.get("controller.quorum.election.timeout.ms"),
                      fetch_timeout_ms=config.get("controller.quorum.fetch.timeout.ms"),
                      request_timeout_ms=config.get("controller.quorum.request.timeout.ms"),
                      fetch_interval_ms=config.get("controller.quorum.retry.backoff.ms"))


class Controller:
    def __init__(self, config: BrokerConfig, *, host: str = "127.0.0.1", port: int = 0, sockets=(),
                 limits: ServerLimits | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = quorum_cluster_id(config)
        self.host, self.port, self.sockets = host, port, sockets
        self.state = MetadataState(self.cluster_id)
        self.store = RaftStore(metadata_directory(config), segment_bytes=config.get("metadata.log.segment.bytes"))
        voters = {voter.node_id: (voter.host, voter.port) for voter in config.quorum_voters}
        self.driver = RaftDriver(self.node_id, voters, self.store, self.state, cluster_id=self.cluster_id,
                                 config=raft_config(config),
                                 snapshot_bytes=config.get("metadata.log.max.record.bytes.between.snapshots"))
        self.server = Server(self, limits, handlers=CONTROLLER_HANDLERS, api_versions=controller_api_versions)
        self.write_lock = trio.Lock()

    @property
    def image(self):
        return self.state.image

    @property
    def is_active(self) -> bool:
        """Leading, with every change of earlier epochs applied (so the image is the whole truth)."""
        role = self.driver.node.role
        return isinstance(role, Leader) and self.driver.applied > role.epoch_start

    async def submit(self, records: list) -> int | None:
        """Commit a change through the quorum: None once a majority has it, else NOT_CONTROLLER."""
        if not self.is_active:
            return ErrorCode.NOT_CONTROLLER
        try:
            await self.driver.propose(encode_change(records))
        except NotLeader:
            return ErrorCode.NOT_CONTROLLER
        return None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.driver.run)
                listeners = await nursery.start(self.server.serve, self.host, self.port, self.sockets)
                host, port = listeners[0].socket.getsockname()[:2]
                task_status.started((host, port))
        finally:
            self.store.close()

    async def shutdown(self) -> None:
        """Hand leadership over before stopping (EndQuorumEpoch), so that the others need not wait."""
        with trio.move_on_after(0.5):
            await self.driver.resign()
            await trio.sleep(0.05)  # let the messages leave
