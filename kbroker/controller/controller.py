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

from kbroker.config import BrokerConfig, ConfigError
from kbroker.controller import brokers, partitions
from kbroker.controller.handlers import CONTROLLER_HANDLERS, controller_api_versions
from kbroker.controller.state import MetadataState, encode_change
from kbroker.controller.upgrade import upgrade_single_node_log
from kbroker.config.dynamic import ConfigLayers
from kbroker.metadata import records
from kbroker.producer_ids import BLOCK_SIZE as PRODUCER_ID_BLOCK
from kbroker.security.authorization import Authorization
from kbroker.security.listener import ListenerSecurity
from kbroker.security.peer import PeerSecurity
from kbroker.security.scram import ScramCredential, credential_of
from kbroker.server import ListenerServices, Server, ServerLimits
from kbroker.log.checkpoint import kafka_uuid_string
from kbroker.raft.driver import NotLeader, RaftDriver
from kbroker.raft.node import Leader, RaftConfig
from kbroker.raft.store import RaftStore
from kbroker.wire.errors import ErrorCode

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


def quorum_member(config: BrokerConfig, state: MetadataState, *, directory: str | None = None,
                  voters: dict[int, tuple[str, int]] | None = None) -> tuple[RaftStore, RaftDriver]:
    """This node's metadata log on disk (``directory``, else where its config puts it) and its Raft
    driver applying to ``state``: a voter if the node is one of ``voters`` (else
    ``controller.quorum.voters``), else an observer."""
    store = RaftStore(directory or metadata_directory(config), segment_bytes=config.get("metadata.log.segment.bytes"))
    if voters is None:
        voters = {voter.node_id: (voter.host, voter.port) for voter in config.quorum_voters}
    driver = RaftDriver(config.node_id, voters, store, state, cluster_id=state.cluster_id, config=raft_config(config),
                        snapshot_bytes=config.get("metadata.log.max.record.bytes.between.snapshots"),
                        connect=PeerSecurity.controller(config).connect)
    return store, driver


class Controller:
    def __init__(self, config: BrokerConfig, *, host: str = "127.0.0.1", port: int = 0, sockets=(),
                 limits: ServerLimits | None = None, cluster_id: str | None = None, directory: str | None = None,
                 voters: dict[int, tuple[str, int]] | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = cluster_id or quorum_cluster_id(config)
        self.host, self.port, self.sockets = host, port, sockets
        self.listens = voters is None  # a sole voter (see ``sole_voter``) opens no listener
        self.state = MetadataState(self.cluster_id)
        self.store, self.driver = quorum_member(config, self.state, directory=directory, voters=voters)
        listener = self.listener_name = (config.controller_listener_names or ("CONTROLLER",))[0]
        self.bound: tuple[str, int] | None = None  # the controller listener's address, once serving
        services = ListenerServices(self.scram_credential, log_every_request=config.get("logging.requests"))
        self.server = Server(self, services, limits, handlers=CONTROLLER_HANDLERS, api_versions=controller_api_versions,
                             security=ListenerSecurity.from_config(
                                 config, listener, config.security_protocol_map.get(listener, "PLAINTEXT")))
        self.forwards = False  # the controller plans metadata changes itself (kbroker.handlers.metadata_change)
        self.authorization = Authorization()  # none: brokers authorize what they forward (security/authorization.py)
        self.quotas = None  # a controller meters no clients: brokers do
        self.write_lock = trio.Lock()  # changes are planned against the image and committed one at a time
        self.leases = brokers.BrokerLeases(config.get("broker.session.timeout.ms"))

    @classmethod
    def sole_voter(cls, config: BrokerConfig, data_dir: str, cluster_id: str) -> "Controller":
        """The controller of a single node (no ``controller.quorum.voters``): the only voter of its quorum,
        so it leads at once and commits a change once it is fsynced. Its log is ``__cluster_metadata-0``
        in ``data_dir`` (release 0.1.0's log there is carried over, kbroker/controller/upgrade.py). It
        listens on nothing: the broker in its process reaches it in process (kbroker.peers.InProcessPeers)."""
        directory = os.path.join(config.declared("metadata.log.dir") or data_dir, METADATA_PARTITION)
        upgrade_single_node_log(directory, cluster_id)
        return cls(config, cluster_id=cluster_id, directory=directory, voters={config.node_id: ("in-process", 0)})

    async def wait_active(self, report_every_s: float = 10) -> None:
        """Until this controller is active (a sole voter: once it has replayed its log and its election
        and first entry are fsynced). A large metadata log on a loaded machine takes a while: no deadline,
        a line every ``report_every_s`` instead."""
        waited_s = 0.0
        while not self.is_active:
            with trio.move_on_after(report_every_s):
                while not self.is_active:
                    await trio.sleep(0.001)
            if not self.is_active:
                waited_s += report_every_s
                logger.warning("the metadata quorum is not active yet after %.0f s (replaying its log)", waited_s)

    @property
    def image(self):
        return self.state.image

    @property
    def servers(self) -> tuple[Server, ...]:
        """Its one listener's server (the metrics count its connections)."""
        return (self.server,)

    @property
    def config_layers(self) -> ConfigLayers:
        """This node's settings with the dynamic ones of the image (what CreateTopics answers with), or its
        static ones alone if those do not go together."""
        layers = ConfigLayers.of(self.config, self.image, self.node_id)
        try:
            layers.effective
        except ConfigError:
            return ConfigLayers(self.config)
        return layers

    def scram_credential(self, user: str, mechanism: int) -> ScramCredential | None:
        """For SCRAM on the controller listener: the credential in the quorum's image."""
        return credential_of(self.image.scram_credentials.get((user, mechanism)))

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

    # -- broker membership (kbroker/controller/brokers.py) ----------------------------------------------

    async def register_broker(self, request) -> tuple[int, int]:
        """BrokerRegistration: (error code, broker epoch)."""
        if request.cluster_id != self.cluster_id:
            return ErrorCode.INCONSISTENT_CLUSTER_ID, -1
        if not request.listeners:
            return ErrorCode.INVALID_REQUEST, -1
        async with self.write_lock:
            if not self.is_active:
                return ErrorCode.NOT_CONTROLLER, -1
            broker_epoch = self.driver.node.end_offset  # the offset the registration lands at
            change = brokers.registration_records(request.broker_id, broker_epoch, request.listeners,
                                                  request.rack, request.incarnation_id, self.image)
            error = await self.submit(change)
        if error is not None:
            return error, -1
        self.leases.renew(request.broker_id, self.driver.now_ms())
        return ErrorCode.NONE, broker_epoch

    async def broker_heartbeat(self, request) -> dict:
        """BrokerHeartbeat: the response's fields. Unfences a caught-up broker; fences one shutting down."""
        answer = {"error_code": ErrorCode.NONE, "is_caught_up": False, "is_fenced": True, "should_shut_down": False}
        async with self.write_lock:
            if not self.is_active:
                return {**answer, "error_code": ErrorCode.NOT_CONTROLLER}
            self.leases.start(self.driver.node.epoch, self.image, self.driver.now_ms())
            broker = brokers.broker_by_id(self.image, request.broker_id)
            if broker is None:
                return {**answer, "error_code": ErrorCode.BROKER_ID_NOT_REGISTERED}
            if broker.epoch != request.broker_epoch:
                return {**answer, "error_code": ErrorCode.STALE_BROKER_EPOCH}
            self.leases.renew(broker.node_id, self.driver.now_ms())
            caught_up = request.current_metadata_offset >= broker.epoch
            change = []
            if request.want_shut_down or request.want_fence:
                if not broker.fenced:
                    change = brokers.fence_records(self.image, broker)
            elif broker.fenced and caught_up:
                change = brokers.unfence_records(self.image, broker)
            if change:
                error = await self.submit(change)
                if error is not None:
                    return {**answer, "error_code": error}
            fenced = bool(request.want_shut_down or request.want_fence or not caught_up)
            return {**answer, "is_caught_up": caught_up, "is_fenced": fenced,
                    "should_shut_down": bool(request.want_shut_down)}

    async def alter_partitions(self, broker_id: int, broker_epoch: int, wanted: list) -> tuple[int, list]:
        """AlterPartition: (error code, [(error code, partition after) per IsrRequest in ``wanted``]).
        The accepted changes commit together."""
        async with self.write_lock:
            if not self.is_active:
                return ErrorCode.NOT_CONTROLLER, []
            broker = brokers.broker_by_id(self.image, broker_id)
            if broker is None or broker.epoch != broker_epoch:
                return ErrorCode.STALE_BROKER_EPOCH, []
            checked = [partitions.alter_isr(self.image, broker_id, request) for request in wanted]
            change = [record for _, _, record in checked if record is not None]
            error = await self.submit(change) if change else None
            if error is not None:
                return error, []
            done = partitions.completed_reassignments(self.image) if change else []
            if done:  # the ISR now holds every new replica of a reassignment: drop the old ones
                logger.info("completing %d partition reassignment(s)", len(done))
                await self.submit(done)
            image = self.image
            answers = []
            for request, (code, partition, record) in zip(wanted, checked):
                if record is not None:  # the partition as committed
                    partition = image.topic_by_id(request.topic_id).partitions[request.partition]
                answers.append((code, partition))
            return ErrorCode.NONE, answers

    async def allocate_producer_ids(self, request) -> tuple[int, int, int]:
        """AllocateProducerIds: (error code, first id, count) of a block no one else ever gets."""
        async with self.write_lock:
            if not self.is_active:
                return ErrorCode.NOT_CONTROLLER, -1, 0
            broker = brokers.broker_by_id(self.image, request.broker_id)
            if broker is None or broker.epoch != request.broker_epoch:
                return ErrorCode.STALE_BROKER_EPOCH, -1, 0
            start = self.image.next_producer_id
            record = records.ProducerIdsRecord(broker_id=broker.node_id, broker_epoch=broker.epoch,
                                               next_producer_id=start + PRODUCER_ID_BLOCK)
            error = await self.submit([record])
        return (error, -1, 0) if error is not None else (ErrorCode.NONE, start, PRODUCER_ID_BLOCK)

    async def _fence_expired_brokers(self) -> None:
        """On the active controller: fence each broker whose session ran out."""
        while True:
            await trio.sleep(min(self.leases.session_timeout_ms / 4, 250) / 1000)
            if not self.is_active:
                continue
            async with self.write_lock:
                if not self.is_active:
                    continue
                now = self.driver.now_ms()
                self.leases.start(self.driver.node.epoch, self.image, now)
                for broker in self.leases.expired(self.image, now):
                    logger.info("fencing broker %d: no heartbeat for %d ms", broker.node_id,
                                self.leases.session_timeout_ms)
                    if await self.submit(brokers.fence_records(self.image, broker)) is not None:
                        break

    async def _rebalance_leaders(self) -> None:
        """On the active controller, with auto.leader.rebalance.enable: every
        leader.imbalance.check.interval.seconds, give leaderships back to their preferred replicas
        where a broker holds too few of its own (leader.imbalance.per.broker.percentage)."""
        config = self.config
        while True:
            await trio.sleep(config.get("leader.imbalance.check.interval.seconds"))
            if not (config.get("auto.leader.rebalance.enable") and self.is_active):
                continue
            async with self.write_lock:
                if not self.is_active:
                    continue
                moves = partitions.imbalanced(self.image, config.get("leader.imbalance.per.broker.percentage"))
                change = [partitions.elect(self.image, name, index, partitions.PREFERRED)[1] for name, index in moves]
                if change:
                    logger.info("moving %d leaderships back to their preferred replicas", len(change))
                    await self.submit(change)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.driver.run)
                nursery.start_soon(self._fence_expired_brokers)
                nursery.start_soon(self._rebalance_leaders)
                if not self.listens:
                    task_status.started(None)
                    return
                listeners = await nursery.start(self.server.serve, self.host, self.port, self.sockets)
                host, port = listeners[0].socket.getsockname()[:2]
                self.bound = (host, port)
                task_status.started((host, port))
        finally:
            self.store.close()

    def addresses(self) -> list[str]:
        """What it serves, once running, for the start line: its controller listener."""
        return [f"{self.listener_name}://{self.bound[0]}:{self.bound[1]}"] if self.bound else []

    async def shutdown(self) -> None:
        """Hand leadership over before stopping (EndQuorumEpoch), so that the others need not wait."""
        if len(self.driver.voters) == 1:
            return  # no one to hand it to
        with trio.move_on_after(0.5):
            await self.driver.resign()
            await trio.sleep(0.05)  # let the messages leave
