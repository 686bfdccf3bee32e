"""One broker process: its metadata image, its logs and its listeners.

Its image is what this process's member of the metadata quorum has applied: a
voter, when the process is a combined ``broker,controller`` node, else an observer
that fetches the metadata log without voting (kbroker/metadata/observer.py). A
single node (no ``controller.quorum.voters``) is a combined node whose quorum has
one voter, itself, reached in process rather than over a listener
(``Controller.sole_voter``). Either way the broker registers and heartbeats with the
active controller (kbroker/lifecycle.py), and the admin requests that change
metadata are forwarded to it, which plans them against the whole truth: one
metadata path for one node and for many.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass, replace

import trio

from kbroker.config import BrokerConfig, ConfigError
from kbroker.config.definitions import LONG_MAX
from kbroker.controller.channel import ControllerChannel, ControllerUnavailable
from kbroker.controller.controller import Controller
from kbroker.data_directories import DataDirectories
from kbroker.log.free_space import FreeSpace
from kbroker.config.dynamic import ConfigLayers
from kbroker.http import on_demand
from kbroker.lifecycle import BrokerLifecycle
from kbroker.listen import bind_listeners
from kbroker.replication.fetcher import ReplicaFetchers
from kbroker.replication.flusher import Flusher, flush_dirty_logs, injected_failure
from kbroker.replication.isr import IsrManager
from kbroker.txn.remote import VerificationGuards
from kbroker.group.shell import GroupShell
from kbroker.replication.log_maintenance import LogMaintenance
from kbroker.share.manager import SharePartitionManager
from kbroker.faults import Faults
from kbroker.fetch_sessions import FetchSessionCache
from kbroker.metadata.answers import EncodedTopics
from kbroker.share.persister import SharePersister
from kbroker.share.shell import ShareCoordinatorShell
from kbroker.txn.shell import TxnShell
from kbroker.metadata.image import BrokerEndpoint, MetadataImage
from kbroker.peers import InProcessPeers, Peers
from kbroker.replication.replica import Partition
from kbroker.producer_ids import ProducerIdBlock
from kbroker.security.authorization import Authorization
from kbroker.security.listener import ListenerSecurity
from kbroker.security.quotas import ClientQuotas, QuotaMeters
from kbroker.security.peer import PeerSecurity
from kbroker.security.scram import ScramCredential, credential_of
from kbroker.server import ListenerServices, RequestMemory, Server, ServerLimits
from kbroker.topics import TopicRequest, topic_log_config
from kbroker.config.sources import Source
from kbroker.http import LISTENER as HTTP_LISTENER
from kbroker.schemas.service import LISTENER as REGISTRY_LISTENER, registry_address, registry_host
from kbroker.log.checkpoint import fsync_file_and_directory, kafka_uuid_string
from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.log.descriptor_cache import DESCRIPTORS, describe_limits, open_files_limits, out_of_descriptors
from kbroker.log.manager import LogManager
from kbroker.log.preparer import LogPreparer
from kbroker.log.segment import SegmentSettings
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_KEY, API_BY_NAME

logger = logging.getLogger("kbroker.broker")
CreateTopicsRequest = API_BY_NAME["CreateTopics"].request_class
AllocateProducerIdsRequest = API_BY_NAME["AllocateProducerIds"].request_class


AUTO_CREATION_WAIT_S = 0.5  # how long a request that auto-creates topics waits for them (Broker.auto_create)
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol
_OPENED_BETWEEN_YIELDS = 50  # logs found at start opened in one go by _open_found_logs before it lets others run


@dataclass(frozen=True)
class ListenerSettings:
    name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    host: str = "localhost"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    sockets: tuple = ()  # listening sockets bound before the broker was built (kbroker.listen); else bind host:port


@dataclass(frozen=True)
class BrokerSettings:
    node_id: int = 1
    listeners: tuple[ListenerSettings, ...] = (ListenerSettings(),)  # the inter-broker listener first
    data_dir: str = "./kbroker-data"
    limits: ServerLimits = ServerLimits()
    registry_sockets: tuple = ()  # the schema registry's, bound (kbroker/schemas/service.py); () : none
    http_sockets: tuple = ()  # metrics.port's, bound by the command (kbroker/cli.py); () : as metrics.port says


def plaintext_listener(host: str, port: int, sockets: tuple = ()) -> tuple[ListenerSettings, ...]:
    """One PLAINTEXT listener (tests and the pytest plugin)."""
    return (ListenerSettings(host=host, port=port, sockets=sockets),)


def settings_from_config(config: BrokerConfig, sockets: dict[str, tuple] | None = None) -> BrokerSettings:
    """What the broker uses from a :class:`kbroker.config.BrokerConfig`; ``sockets`` are listeners already
    bound, by listener name (the schema registry's under ``SCHEMA_REGISTRY``)."""
    inter_broker = config.get("inter.broker.listener.name")
    controllers = config.controller_listener_names
    endpoints = sorted((e for e in config.listener_endpoints if e.listener_name not in controllers),
                       key=lambda e: e.listener_name != inter_broker)
    listeners = []
    for endpoint in endpoints:
        advertised = next((e for e in config.advertised_broker_endpoints
                           if e.listener_name == endpoint.listener_name), None)
        listeners.append(ListenerSettings(
            endpoint.listener_name, endpoint.security_protocol, endpoint.host or "0.0.0.0", endpoint.port,
            advertised_host=advertised.host if advertised else None,
            advertised_port=advertised.port if advertised and advertised.port else None,
            sockets=(sockets or {}).get(endpoint.listener_name, ())))
    return BrokerSettings(
        node_id=config.node_id,
        listeners=tuple(listeners),
        data_dir=config.get("log.dirs")[0],
        limits=ServerLimits(
            max_frame_bytes=config.socket_request_max_bytes,
            idle_ms=config.connections_max_idle_ms,
            max_connections=config.max_connections,
            max_in_flight_per_connection=config.get("queued.max.requests"),
        ),
        registry_sockets=(sockets or {}).get(REGISTRY_LISTENER, ()),
        http_sockets=(sockets or {}).get(HTTP_LISTENER, ()),
    )


def _size_descriptor_cache() -> None:
    """Size the segments' descriptor cache from the soft RLIMIT_NOFILE as the Broker finds it. A Broker
    does not raise the limit itself: it may be a library in someone else's process (a test runner, an
    application), whose limits are not its to change behind the owner's back; the ``kbroker`` command,
    which owns its process, raises it before (kbroker/cli.py), and the cache keeps any limit safe."""
    capacity = DESCRIPTORS.fit_to_limit()
    logger.info("open files limit: %s; segment files open at most %d", describe_limits(*open_files_limits()),
                capacity)


class Broker:
    def __init__(self, settings: BrokerSettings, config: BrokerConfig | None = None, quorum=None,
                 directories: DataDirectories | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        # Claimed first, before anything reads or writes them; the kbroker command claims them
        # itself (before a controller in the same process opens the metadata log) and passes them in.
        self._owns_directories = directories is None
        self.directories = directories or DataDirectories.claim({os.path.abspath(settings.data_dir): "log.dirs"})
        try:
            self._open(settings, config, quorum, clock)
        except BaseException:
            if self._owns_directories:
                self.directories.release()
            raise

    def _open(self, settings: BrokerSettings, config: BrokerConfig | None, quorum, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock  # what the coordinators and the quota meters read time from
        self.node_id = settings.node_id
        # Its settings as started; ``config`` is them with the dynamic ones of the image over them
        # (kbroker/config/dynamic.py), set once the image is read below.
        self.static_config = self.config = config or BrokerConfig.load()
        self.config_layers = ConfigLayers(self.static_config)
        _size_descriptor_cache()
        self.logs = LogManager(settings.data_dir, clock)
        self.free_space = FreeSpace(settings.data_dir, self.config.get("log.dir.min.free.bytes"))
        # This process's member of the metadata quorum: a Controller or a QuorumObserver, given by the
        # kbroker command in a cluster; alone, the sole voter of a quorum of one, made here.
        self.alone = quorum is None
        if quorum is None:
            quorum = Controller.sole_voter(self.config, settings.data_dir,
                                           _cluster_id(settings.data_dir, settings.node_id))
        self.quorum = quorum
        self.forwards = True  # metadata changes go to the active controller
        self.serving = False  # once registered, caught up and unfenced
        self.cluster_id = quorum.cluster_id
        self.image = self._view(quorum.state.image)
        self._image_moved = trio.Event()  # set, and replaced, at each change of the image
        quorum.state.on_change = self._metadata_applied
        if self.alone:  # the controller is in this process and listens on nothing
            voters = {self.node_id: ("in-process", 0)}
            self.controller_peers = InProcessPeers(quorum.server, client_id=f"broker-{self.node_id}")
        else:  # connections kept to the controllers
            voters = {voter.node_id: (voter.host, voter.port) for voter in self.config.quorum_voters}
            self.controller_peers = Peers(PeerSecurity.controller(self.config), client_id=f"broker-{self.node_id}")
        channel = ControllerChannel(f"broker-{self.node_id}", voters, self.controller_peers,
                                    lambda: quorum.driver.node.leader,
                                    request_timeout_s=self.config.get("controller.quorum.request.timeout.ms") / 1000)
        self.lifecycle = BrokerLifecycle(self, channel, interval_ms=self.config.get("broker.heartbeat.interval.ms"),
                                         session_timeout_ms=self.config.get("broker.session.timeout.ms"))
        self._take_dynamic_configs()
        self.log_defaults = self.config.log_config()
        self.maintenance = LogMaintenance(self.logs, self.config, clock, offline=lambda: self.log_dir_offline is not None,
                                          high_watermark=self._high_watermark)
        self.metrics = None  # kbroker.metrics.BrokerMetrics, made by run() when metrics.port is set
        self.http_address: tuple[str, int] | None = None  # where the console and /metrics listen, once bound
        self.history = None  # kbroker.http.console.history.History, the console's charts, with the metrics
        self.schema_registry: tuple[str, int] | None = None  # where its registry is reached, once bound
        self.schema_store = None  # kbroker.schemas.store.SchemaStore: schemas(), on first use
        self._registry_sockets: list = list(settings.registry_sockets)
        self.authorization = Authorization(self.config)  # ACLs, when authorizer.class.name names ours
        self.quotas = ClientQuotas(lambda: self.image.client_quotas, QuotaMeters(
            self.config.quota_window_num, self.config.quota_window_size_seconds * 1000), clock)
        # what the listeners use of this broker (the metrics once run() makes them)
        request_bytes = self.config.get("queued.max.request.bytes")
        self.services = ListenerServices(self.scram_credential, self.quotas, self.config.get("logging.requests"),
                                         request_memory=RequestMemory(request_bytes) if request_bytes > 0 else None)
        # connections kept to the others' inter-broker listeners (a lone broker reaches none)
        self.peers = Peers(PeerSecurity() if self.alone else PeerSecurity.inter_broker(self.config),
                           client_id=f"broker-{self.node_id}")
        limits = _limits(settings.limits, self.static_config, self.config)
        self.servers = [Server(self, self.services, limits, security=self._listener_security(listener))
                        for listener in settings.listeners]
        self.faults = Faults(self)  # a test's faults on demand (kbroker/faults.py), acting on those servers
        self.ports: dict[str, int] = {}  # listener name -> the port it is bound to, once serving
        self.port: int | None = None  # the first listener's
        self._partitions: dict[tuple[str, int], Partition] = {}
        self.log_dir_offline: BaseException | None = None  # why the data directory went offline (storage_failed)
        self.discards_data = False  # its directory is deleted once it stops (a test's): logs closed as they are
        self._nursery: trio.Nursery | None = None
        self.flusher: Flusher | None = None  # started by run()
        self.producer_ids = ProducerIdBlock()
        self.fetchers = ReplicaFetchers(self)
        self.isr = IsrManager(self, clock)
        self.txn_guards = VerificationGuards()  # partitions verified with a coordinator elsewhere (KIP-890)
        self.groups = GroupShell(self, clock)
        self.transactions = TxnShell(self, clock)
        self.share_states = ShareCoordinatorShell(self, clock)
        self.share_persister = SharePersister(self)  # how share-partition leaders reach the share coordinator
        self.share_partitions = SharePartitionManager(self, clock)  # those of the partitions led here
        self.fetch_sessions = FetchSessionCache(self.config.get("max.incremental.fetch.session.cache.slots"))
        self.metadata_answers = EncodedTopics()
        self._checkpoint_lock = trio.Lock()  # checkpoint files are written one at a time, in order
        for topic in self.image.topics.values():
            self._open_logs(topic)

    @property
    def listener_protocols(self) -> list[tuple[str, str]]:
        """This broker's client listeners as (name, security protocol)."""
        return [(listener.name, listener.security_protocol) for listener in self.settings.listeners]

    @property
    def metadata_offset(self) -> int:
        """The offset of the last metadata change this broker has applied (heartbeats report it)."""
        return self.quorum.state.applied_offset

    def min_insync_replicas(self, topic) -> int:
        """The topic's min.insync.replicas (its override, else the broker's)."""
        return int(topic.configs.get("min.insync.replicas") or self.config.get("min.insync.replicas"))

    def leads(self, topic, index: int) -> bool:
        """Whether this broker leads partition ``index`` of ``topic`` (a TopicImage): produce and fetch go here."""
        return topic.partitions[index].leader == self.node_id

    async def forward(self, context, request):
        """Send a metadata change to the active controller and answer with its response (quorum mode).
        Topics it created are awaited in this broker's image: a client that created one here finds it here."""
        api_name = API_BY_KEY[context.header.api_key].name
        # As Kafka's ForwardingManager: one attempt waits controller.socket.timeout.ms and a request that
        # got no answer is not sent again (the controller may have applied it: a creation sent twice is
        # answered TOPIC_ALREADY_EXISTS); ControllerUnavailable is then answered REQUEST_TIMED_OUT.
        waits_s = self.config.get("controller.socket.timeout.ms") / 1000
        response = await self.lifecycle.channel.call(api_name, context.api_version, request, deadline_s=waits_s,
                                                     timeout_s=waits_s, not_controller=_every_result_not_controller)
        if api_name == "CreateTopics" and not request.validate_only:
            created = {result.name for result in response.topics if result.error_code == ErrorCode.NONE}
            await self.await_topics(created, timeout_s=max(request.timeout_ms, 0) / 1000)
        return response

    async def await_topics(self, names: set[str], timeout_s: float) -> None:
        """Wait (bounded) until this broker's image has ``names``: a client that created a topic here
        finds it here next."""
        await self.await_image(lambda image: names <= image.topics.keys(), timeout_s)

    async def await_image(self, condition, timeout_s: float) -> bool:
        """Until ``condition(image)`` holds of this broker's image (at most ``timeout_s``, 30 s); whether it does."""
        with trio.move_on_after(min(timeout_s, 30)):
            while not condition(self.image):
                await self._image_moved.wait()
        return condition(self.image)

    async def auto_create(self, wanted: list[TopicRequest]) -> None:
        """Auto-creation (a Metadata request, an internal topic): the active controller is asked in the
        background, and the caller waits up to AUTO_CREATION_WAIT_S for the topics to reach this broker's
        image, then answers from the image. Those not there yet it answers as Kafka's brokers do meanwhile
        (unknown; the client asks again). Kafka's brokers answer at once; waiting the controller's round
        trip spares clients a retry after their metadata backoff (100 ms and more), and a single node
        creates a topic in a few milliseconds."""
        body = CreateTopicsRequest(timeout_ms=30_000, validate_only=False, topics=[
            CreateTopicsRequest.CreatableTopic(
                name=request.name, num_partitions=request.num_partitions,
                replication_factor=request.replication_factor, assignments=[],
                configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=name, value=value)
                         for name, value in request.configs.items()])
            for request in wanted])
        self.start_soon(self._create_in_background, body)
        await self.await_topics({request.name for request in wanted}, AUTO_CREATION_WAIT_S)

    async def _create_in_background(self, body) -> None:
        try:
            await self.lifecycle.channel.call("CreateTopics", 7, body, not_controller=_every_result_not_controller)
        except ControllerUnavailable as error:
            logger.warning("could not auto-create %s: %s", [t.name for t in body.topics], error)

    def start_soon(self, function, *args) -> None:
        """Run ``function(*args)`` in the background for as long as the broker runs."""
        self._nursery.start_soon(function, *args)

    async def allocate_producer_ids(self) -> tuple[int, int] | None:
        """The next producer-id block from the active controller, as (first, end); None if refused."""
        request = AllocateProducerIdsRequest(broker_id=self.node_id, broker_epoch=self.lifecycle.broker_epoch)
        try:
            response = await self.lifecycle.channel.call("AllocateProducerIds", 0, request)
        except ControllerUnavailable as error:
            logger.warning("no producer-id block: %s", error)
            return None
        if response.error_code != ErrorCode.NONE:
            logger.warning("no producer-id block: %s", ErrorCode(response.error_code).name)
            return None
        return response.producer_id_start, response.producer_id_start + response.producer_id_len

    def _view(self, image: MetadataImage) -> MetadataImage:
        """The quorum's image as this broker serves it: clients see it as their controller, as KRaft
        brokers show themselves (admin requests are forwarded from here)."""
        return replace(image, controller_id=self.node_id)

    def _metadata_applied(self, before: MetadataImage, after: MetadataImage) -> None:
        previous = self.image
        self.image = self._view(after)
        self._image_changed(previous)
        self._image_moved.set()
        self._image_moved = trio.Event()

    def _image_changed(self, before: MetadataImage) -> None:
        """Open, reconfigure and delete logs as the image changed from ``before``; tell this broker's
        replicas of their new leaders, epochs and ISRs, and its fetchers whom to fetch from; apply
        dynamic broker configs."""
        own = str(self.node_id)
        if any(before.broker_configs.get(name) is not self.image.broker_configs.get(name) for name in ("", own)):
            self._reconfigure(reload_listeners=before.broker_configs.get(own) is not self.image.broker_configs.get(own))
        for name, topic in self.image.topics.items():
            if before.topics.get(name) is not topic:  # new topics, new partitions, leader and ISR changes
                self._open_logs(topic)
                for state in topic.partitions:
                    replica = self._partitions.get((name, state.partition))
                    if self.node_id not in state.replicas and self.logs.holds(name, state.partition):
                        logger.info("%s-%d: reassigned away from this broker; deleting its log", name, state.partition)
                        self._delete_log(name, state.partition)
                    elif replica is not None:
                        replica.update(state.leader, state.leader_epoch, state.replicas, state.isr)
        if self.fetchers is not None:
            self.fetchers.update()
        for runtime in (self.groups, self.transactions, self.share_states):
            if before.topics.get(runtime.topic) is not self.image.topics.get(runtime.topic):
                runtime.leadership_changed()
        for name, topic in self.image.topics.items():
            if name in before.topics and before.topics[name].configs != topic.configs:
                self.apply_topic_config(name)
        if deleted := [topic for name, topic in before.topics.items() if name not in self.image.topics]:
            self.share_partitions.topics_deleted({topic.topic_id for topic in deleted})
        for topic in deleted:
            for partition in topic.partitions:
                self._delete_log(topic.name, partition.partition)

    def _delete_log(self, topic: str, index: int) -> None:
        """Stop serving a partition here and delete its log: its files go in a worker thread."""
        self._partitions.pop((topic, index), None)
        renamed = self.logs.forget(topic, index)
        if self._nursery is None:
            self.logs.remove_directory(renamed)
            self.logs.checkpoint()
            return

        async def remove() -> None:
            await trio.to_thread.run_sync(self.logs.remove_directory, renamed)
            try:
                await self.checkpoint_logs()
            except OSError as error:
                if not out_of_descriptors(error):
                    raise
                logger.warning("checkpoint after deleting %s-%d put off to the next one: %s", topic, index, error)

        self._nursery.start_soon(remove)

    async def checkpoint_logs(self) -> None:
        """Persist the logs' recovery points and start offsets, in a worker thread; calls write in the
        order they were made (the values are taken first, the lock is fair)."""
        values = self.logs.checkpoint_values()
        async with self._checkpoint_lock:
            await trio.to_thread.run_sync(self.logs.write_checkpoint, values)

    def _take_dynamic_configs(self) -> bool:
        """Make the image's dynamic configs of this broker and the cluster-wide default part of its config;
        if they do not go with its static settings, log that and keep the config it has (as Kafka does)."""
        layers = ConfigLayers.of(self.static_config, self.image, self.node_id)
        try:
            self.config = layers.effective
        except ConfigError as error:
            logger.error("dynamic broker configs not applied: %s", error)
            return False
        self.config_layers = layers
        return True

    def _reconfigure(self, reload_listeners: bool) -> None:
        """Apply changed dynamic configs without a restart (Kafka's BrokerReconfigurables): the log defaults
        of topics without their own value, the cleaner's backoff, the connection limit, and, for new
        connections, the TLS and SASL listeners' stores and users (reloaded whenever this broker's own
        configs are written, so that a key store replaced in place is read again)."""
        before = self.config
        if not self._take_dynamic_configs():
            return
        self.log_defaults = self.config.log_config()
        for name in self.image.topics:
            self.apply_topic_config(name)
        self.maintenance.reconfigure(self.config)
        for listener, server in zip(self.settings.listeners, self.servers):
            server.limits = _limits(server.limits, before, self.config)
            if reload_listeners and (server.security.uses_tls or server.security.uses_sasl):
                server.security = self._listener_security(listener, server.security)

    def _listener_security(self, listener: ListenerSettings,
                           current: ListenerSecurity | None = None) -> ListenerSecurity:
        """A listener's TLS and SASL settings from this broker's config. If dynamic ones cannot be used (a
        key store that does not load), an error is logged and the listener keeps what it had (at start:
        its static settings); static ones that cannot be used stop the start, naming the setting."""
        try:
            return ListenerSecurity.from_config(self.config, listener.name, listener.security_protocol)
        except ConfigError as error:
            if current is None and self.config is self.static_config:
                raise
            logger.error("listener %s keeps its key store and users: %s", listener.name, error)
            return current or ListenerSecurity.from_config(self.static_config, listener.name,
                                                           listener.security_protocol)

    def partition(self, topic: str, index: int) -> Partition:
        """This broker's replica of a partition (it leads it, or follows its leader)."""
        key = (topic, index)
        partition = self._partitions.get(key)
        if partition is None:
            topic_image = self.image.topics[topic]
            state = topic_image.partitions[index]
            log = self.logs.logs.get(key) or self.logs.open(
                topic, index, topic_log_config(self.log_defaults, topic_image.configs), topic_image.topic_id,
                defer_directory=True)  # a new partition's log opens on its first use (_open_logs)
            partition = self._partitions[key] = Partition(
                topic, index, log, self.flusher, state.leader_epoch, node_id=self.node_id,
                replicas=state.replicas, isr=state.isr, leader=state.leader, clock=self.clock,
                on_storage_failure=self.storage_failed, free_space=self.free_space)
            if self.log_dir_offline is not None:
                partition.go_offline(self.log_dir_offline)
        return partition

    def storage_failed(self, error: BaseException) -> None:
        """An fsync in the data directory failed: the directory goes offline for good, as Kafka's
        LogDirFailureChannel takes a log directory offline. Every partition on it answers
        KAFKA_STORAGE_ERROR (kbroker/handlers/partition_guard.py), what waits for durability gets
        LogDirOffline (kbroker/replication/replica.py), and nothing is fsynced again: a retried fsync
        could succeed over pages the kernel dropped. The process stays up (its metadata, on the quorum's
        own log, still answers); in a cluster it asks the controller to fence it, which moves its
        leaderships to other in-sync replicas (kbroker/lifecycle.py). A restart, which recovers the
        logs from what is on disk, brings the directory back."""
        if self.log_dir_offline is not None:
            return
        self.log_dir_offline = error
        logger.error("log directory %s is offline: %s; its partitions answer KAFKA_STORAGE_ERROR until the broker "
                     "restarts", self.settings.data_dir, error)
        for partition in self.replicas():
            partition.go_offline(error)
        if not self.alone:  # alone there is no other replica to lead: clients are told KAFKA_STORAGE_ERROR
            self.lifecycle.storage_offline()

    def _close_offline_logs(self) -> None:
        """The logs of an offline directory closed as they are: LogManager.close would fsync them and
        checkpoint their recovery points at their log ends, the retried fsync storage_failed refuses. The
        restart recovers them from the last checkpoint written while the directory was online."""
        for key, log in list(self.logs.logs.items()):
            try:
                log.close(snapshot=False)  # a producer snapshot is fsynced
            except OSError as error:
                logger.warning("%s-%d of the offline log directory not closed cleanly: %s", *key, error)
        self.logs.logs.clear()

    def _high_watermark(self, key: tuple[str, int]) -> int | None:
        """A partition replica's high watermark, or None where none is open here (retention asks)."""
        replica = self._partitions.get(key)
        return None if replica is None else replica.high_watermark

    def replicas(self) -> list[Partition]:
        """Every partition replica opened on this broker so far (a copy: safe to iterate across awaits)."""
        return list(self._partitions.values())

    def apply_topic_config(self, name: str) -> None:
        """Give the topic's open logs the settings its current configs make (after AlterConfigs)."""
        topic = self.image.topics[name]
        config = topic_log_config(self.log_defaults, topic.configs)
        for partition in topic.partitions:
            log = self.logs.logs.get((name, partition.partition))
            if log is not None:
                log.config = config
                log.settings = SegmentSettings(config.index_interval_bytes, config.segment_index_bytes)

    def _open_logs(self, topic) -> None:
        """Have the logs of ``topic``'s new partitions placed here made ahead. A log is opened on its first
        use (``partition``): a new partition's directory is made meanwhile in worker threads
        (kbroker/log/preparer.py), or at its first write if that comes first (kbroker/log/partition_log.py,
        Log.open), so creating 2,000 partitions waits for no file and builds no log; one found at start is
        opened by its first use or by ``_open_found_logs`` after the broker serves, so a restart with
        100,000 partitions serves before it has opened them."""
        if self._nursery is None:
            return
        for partition in topic.partitions:
            if self.node_id in partition.replicas and not self.logs.found_at_start(topic.name, partition.partition):
                self.logs.prepare(topic.name, partition.partition, topic.topic_id)

    async def _open_found_logs(self) -> None:
        """Open the logs found at start that no request has opened yet, a few at a time between other work
        (as Kafka loads them at start in num.recovery.threads.per.data.dir threads): retention, the metrics
        and DescribeLogDirs then see every log soon after the start."""
        for opened, (name, index) in enumerate(self.logs.unopened()):
            topic = self.image.topics.get(name)
            if topic is not None and index < len(topic.partitions) and self.node_id in topic.partitions[index].replicas \
                    and self.logs.found_at_start(name, index):
                self.logs.open(name, index, topic_log_config(self.log_defaults, topic.configs), topic.topic_id,
                               sync_metadata=False, defer_directory=True)
            if opened % _OPENED_BETWEEN_YIELDS == _OPENED_BETWEEN_YIELDS - 1:
                await trio.sleep(0)
        # partition.metadata files rewritten for a changed topic id are fsynced together, off the event loop
        await trio.to_thread.run_sync(_fsync_all, self.logs.take_unsynced_metadata())

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; reports the bound (host, port) once listening."""
        # Bound now (not yet served) where not bound before: registration names the ports.
        settings = self.settings = replace(self.settings, listeners=tuple(
            listener if listener.sockets else replace(listener, sockets=tuple(bind_listeners(listener.host, listener.port)))
            for listener in self.settings.listeners))
        http_sockets = list(self.settings.http_sockets)
        if not http_sockets and self.config.metrics_port >= 0 \
                and self.config.source("metrics.port").source is not Source.DEFAULT:
            http_sockets = bind_listeners("0.0.0.0", self.config.metrics_port)
        if http_sockets:  # first: /health and /ready answer while the broker starts
            from kbroker import metrics

            from kbroker.http.console.history import History

            self.metrics = self.services.metrics = metrics.BrokerMetrics(self)
            self.history = History(self)  # sampled from the start: the console's charts show the minutes before it
            self.http_address = http_sockets[0].getsockname()[:2]
        self.flusher = Flusher(self.metrics.fsync_done if self.metrics is not None else None,
                               fails_if=injected_failure(self.settings.data_dir))
        self.logs.preparer = LogPreparer()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if http_sockets:
                    nursery.start_soon(self._serve_http, http_sockets)
                    nursery.start_soon(self.history.run)
                for peers in (self.peers, self.controller_peers):
                    if peers is not None:
                        await nursery.start(peers.run)
                await nursery.start(self.quorum.run)
                if self.alone:
                    await self.quorum.wait_active()
                await nursery.start(self.groups.run)
                await nursery.start(self.transactions.run)
                await nursery.start(self.share_states.run)
                await nursery.start(self.share_partitions.run)
                nursery.start_soon(self.maintenance.run)
                if self.config.log_flush_scheduler_interval_ms < LONG_MAX:  # Kafka's default: never looks
                    nursery.start_soon(flush_dirty_logs, self.replicas, self.config.log_flush_scheduler_interval_ms)
                endpoint = self._advertised_endpoint(settings)
                # As Kafka's brokers: serve clients once the quorum has this broker registered, caught up
                # with the metadata and unfenced (until then it would show clients an empty cluster).
                nursery.start_soon(self.lifecycle.run, endpoint.listeners, self.config.get("broker.rack"))
                await self.lifecycle.unfenced.wait()
                # Caught up with the metadata only now: until then the image read from disk may name
                # this broker leader of what others lead now, so nothing acts on it before.
                self.serving = True
                nursery.start_soon(self._open_found_logs)
                self.producer_ids.prefetch(self)
                await nursery.start(self.fetchers.run)
                await nursery.start(self.isr.run)
                for runtime in (self.groups, self.transactions, self.share_states):
                    runtime.leadership_changed()
                for listener, server in zip(settings.listeners, self.servers):
                    bound = await nursery.start(server.serve, listener.host, listener.port, listener.sockets)
                    self.ports[listener.name] = bound[0].socket.getsockname()[1]
                self.port = self.ports[settings.listeners[0].name]
                if self._registry_sockets:  # its imports and the first read of _schemas follow the start
                    self._start_schema_registry()
                task_status.started((endpoint.host, endpoint.port))
        finally:
            # Off the event loop: the flusher finishes its fsyncs, then the logs take their producer
            # snapshots and checkpoints as they close (an offline directory's, or one to be deleted: no
            # fsync, no checkpoint).
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.flusher.stop)
                await trio.to_thread.run_sync(self.logs.preparer.stop)
                await trio.to_thread.run_sync(self.logs.close if self.log_dir_offline is None and not self.discards_data
                                              else self._close_offline_logs)
            if self._owns_directories:
                self.directories.release()

    async def _serve_http(self, sockets: list) -> None:
        """/metrics, /health and /ready (kbroker/http/endpoints.py) on the bound ``sockets``, the HTTP stack
        loaded once a first connection waits there (kbroker/http/on_demand.py says why)."""
        try:
            await on_demand.wait_for_a_connection(sockets)
            endpoints = await on_demand.import_off_the_loop("kbroker.http.endpoints")
            await endpoints.serve_endpoints(self.metrics.exposition, self.readiness, sockets, self)
        finally:  # closed by serving too; not if the broker stops before anyone asked
            for sock in sockets:
                sock.close()

    def schemas(self):
        """The schema registry's state from ``_schemas`` (kbroker/schemas/store.py), made on first use: by the
        registry's API, or by a produce to a topic that validates schemas."""
        if self.schema_store is None:
            from kbroker.schemas.store import SchemaStore
            from kbroker.schemas.types import check

            self.schema_store = SchemaStore(self, check)
        return self.schema_store

    def _start_schema_registry(self) -> None:
        from kbroker.schemas import service

        self._nursery.start_soon(service.serve, self, self._registry_sockets)

    def serve_schema_registry(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Serve the schema registry now on ``port`` (0: a free one) of ``host``, if it is not served yet (the
        pytest plugin's, on first use); where it is reached. Call in the broker's trio thread."""
        if self.schema_registry is None:
            self._registry_sockets = bind_listeners(host, port)
            self.schema_registry = registry_host((host, 0), self._registry_sockets, host)
            self._start_schema_registry()
        return self.schema_registry

    def addresses(self) -> list[str]:
        """Every address it serves, once running, for the start line: Kafka listeners, the controller's, HTTP."""
        served = [f"{listener.name}://{listener.host or '0.0.0.0'}:{self.ports[listener.name]}"
                  for listener in self.settings.listeners if listener.name in self.ports]
        served += self.quorum.addresses()
        if self.schema_registry is not None:
            served.append(f"http://{self.schema_registry[0]}:{self.schema_registry[1]} (schema registry)")
        if self.http_address is not None:
            host, port = self.http_address
            served.append(f"http://{f'[{host}]' if ':' in host else host}:{port} (console, /metrics, /health, /ready)")
        return served

    def _advertised_endpoint(self, settings: BrokerSettings) -> BrokerEndpoint:
        """Where clients reach this broker on each listener: its advertised address, else the bound one."""
        listeners = []
        for listener in settings.listeners:
            port = listener.advertised_port or self.ports.get(listener.name) or listener.port
            if not port and listener.sockets:
                port = listener.sockets[0].getsockname()[1]
            listeners.append((listener.name, listener.advertised_host or listener.host, port,
                              SECURITY_PROTOCOL_IDS[listener.security_protocol]))
        _, host, port, _ = listeners[0]
        if self._registry_sockets:  # where the other nodes pass registry writes on to
            self.schema_registry = registry_host(registry_address(self.config), self._registry_sockets, host)
            listeners.append((REGISTRY_LISTENER, *self.schema_registry, SECURITY_PROTOCOL_IDS["PLAINTEXT"]))
        return BrokerEndpoint(settings.node_id, host, port, listeners=tuple(listeners))

    def readiness(self) -> tuple[bool, str]:
        """/ready: every listener open and, in a cluster, registered with the quorum and unfenced."""
        if len(self.ports) < len(self.settings.listeners):
            return False, "starting: listeners not open yet"
        if self.log_dir_offline is not None:
            return False, f"log directory offline: {self.log_dir_offline}"
        if self.lifecycle.fenced or self.lifecycle.lease_expired:
            return False, "fenced: not registered, not caught up with the metadata, or cut off from the controller"
        return True, "ready"

    def scram_credential(self, user: str, mechanism: int) -> ScramCredential | None:
        """The user's SCRAM credential for a mechanism (kbroker.security.scram), from the metadata."""
        return credential_of(self.image.scram_credentials.get((user, mechanism)))

    async def shutdown(self) -> None:
        """Stop in order: give up partition leaderships, then the quorum's leadership."""
        await self.lifecycle.shut_down()
        await self.quorum.shutdown()


def _limits(limits: ServerLimits, before: BrokerConfig, after: BrokerConfig) -> ServerLimits:
    """``limits`` with max.connections as ``after`` has it, if it changed from ``before``."""
    if after.max_connections == before.max_connections:
        return limits
    return replace(limits, max_connections=after.max_connections)


def _every_result_not_controller(response) -> bool:
    """A forwarded admin response to retry at another controller: it, or each of its results (however
    deeply nested: topics, then partitions), says NOT_CONTROLLER."""
    if getattr(response, "error_code", None) == ErrorCode.NOT_CONTROLLER:
        return True
    codes = list(_result_codes(response))
    return bool(codes) and all(code == ErrorCode.NOT_CONTROLLER for code in codes)


def _result_codes(value):
    """The error codes of the innermost results in a response's lists."""
    for field in ("topics", "results", "responses", "partitions", "partition_result", "replica_election_results",
                  "filter_results", "entries"):
        for result in getattr(value, field, None) or ():
            inner = list(_result_codes(result))
            if inner:
                yield from inner
            elif hasattr(result, "error_code"):
                yield result.error_code


def _fsync_all(paths: list[str]) -> None:
    for path in paths:
        try:
            fsync_file_and_directory(path)
        except FileNotFoundError:
            pass  # the partition was deleted meanwhile
        except OSError as error:
            if not out_of_descriptors(error):
                raise
            # Not lost: a partition.metadata missing or empty after a crash is written again at the next open.
            logger.warning("%s not fsynced: %s", path, error)


def _cluster_id(data_dir: str, node_id: int) -> str:
    """The cluster id kept in ``meta.properties``, made on first start as Kafka's storage format does."""
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, "meta.properties")
    if os.path.exists(path):
        with open(path) as file:
            for line in file:
                key, _, value = line.strip().partition("=")
                if key == "cluster.id":
                    return value
    cluster_id = kafka_uuid_string(uuid.uuid4())
    with open(path, "w") as file:
        file.write(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    return cluster_id
