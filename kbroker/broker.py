"""One broker process: its metadata image, its logs and its listeners.

In this first step the broker is a single node that is also its own
controller: the image holds just this broker and grows topics as they are
created. The metadata log and the handlers that write it come next.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass, replace

import trio

from kbroker.config import BrokerConfig
from kbroker.flusher import Flusher
from kbroker.group.shell import GroupShell
from kbroker.log_maintenance import LogMaintenance
from kbroker.txn.shell import TxnShell
from kbroker.metadata.image import BrokerEndpoint, MetadataImage
from kbroker.metadata.metadata_log import MetadataLog
from kbroker.replica import Partition
from kbroker.producer_ids import ProducerIdBlock
from kbroker.server import Server, ServerLimits
from kbroker.topics import topic_log_config
from log.checkpoint import fsync_file_and_directory, kafka_uuid_string
from log.manager import LogManager
from log.segment import SegmentSettings

logger = logging.getLogger("kbroker.broker")


@dataclass(frozen=True)
class BrokerSettings:
    node_id: int = 1
    host: str = "localhost"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: str = "./kbroker-data"
    limits: ServerLimits = ServerLimits()
    sockets: tuple = ()  # listening sockets bound before the broker was built (kbroker.listen); else bind host:port


def settings_from_config(config: BrokerConfig) -> BrokerSettings:
    """What this step of the broker uses from a :class:`kbroker.config.BrokerConfig`."""
    listener = config.client_endpoint
    advertised = next((e for e in config.advertised_broker_endpoints if e.listener_name == listener.listener_name), None)
    return BrokerSettings(
        node_id=config.node_id,
        host=listener.host or "0.0.0.0",
        port=listener.port,
        advertised_host=advertised.host if advertised else None,
        advertised_port=advertised.port if advertised and advertised.port else None,
        data_dir=config.get("log.dirs")[0],
        limits=ServerLimits(
            max_frame_bytes=config.socket_request_max_bytes,
            idle_ms=config.connections_max_idle_ms,
            max_connections=config.max_connections,
            max_in_flight_per_connection=config.get("queued.max.requests"),
        ),
    )


class Broker:
    def __init__(self, settings: BrokerSettings, config: BrokerConfig | None = None) -> None:
        self.settings = settings
        self.config = config or BrokerConfig.load()
        self.log_defaults = self.config.log_config()
        self.logs = LogManager(settings.data_dir)
        self.cluster_id = _cluster_id(settings.data_dir, settings.node_id)
        self.metadata_log = MetadataLog(settings.data_dir)
        self.image = self.metadata_log.replay(MetadataImage(cluster_id=self.cluster_id, controller_id=settings.node_id))
        self.server = Server(self, settings.limits)
        self.port: int | None = None
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._nursery: trio.Nursery | None = None
        self.flusher: Flusher | None = None  # started by run()
        self.producer_ids = ProducerIdBlock()
        self.groups = GroupShell(self)
        self.transactions = TxnShell(self)
        self.write_lock = trio.Lock()  # admin changes are planned and committed one at a time
        for topic in self.image.topics.values():
            self._open_logs(topic)

    def commit(self, records: list) -> None:
        """Make a metadata change durable, then show it: the new image and its logs."""
        before = self.image
        self.image = self.metadata_log.commit(self.image, records)
        for name, topic in self.image.topics.items():
            if before.topics.get(name) is not topic:  # new topics, and new partitions of existing ones
                self._open_logs(topic)
        for name, topic in self.image.topics.items():
            if name in before.topics and before.topics[name].configs != topic.configs:
                self.apply_topic_config(name)
        for name, topic in before.topics.items():
            if name not in self.image.topics:
                for partition in topic.partitions:
                    self._partitions.pop((name, partition.partition), None)
                    self.logs.delete(name, partition.partition)

    async def submit(self, records: list) -> int | None:
        """Commit a metadata change for a handler; None, or the error code of a change not made."""
        self.commit(records)
        return None

    def partition(self, topic: str, index: int) -> Partition:
        """The partition this broker leads (single node: every partition)."""
        key = (topic, index)
        partition = self._partitions.get(key)
        if partition is None:
            partition = self._partitions[key] = Partition(topic, index, self.logs.logs[key], self.flusher)
        return partition

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
        config = topic_log_config(self.log_defaults, topic.configs)
        running = self._nursery is not None
        for partition in topic.partitions:
            self.logs.open(topic.name, partition.partition, config, topic.topic_id, sync_metadata=not running)
        if running:  # new partitions' metadata files are fsynced together, off the event loop
            self._nursery.start_soon(trio.to_thread.run_sync, _fsync_all, self.logs.take_unsynced_metadata())

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; reports the bound (host, port) once listening."""
        settings = self.settings
        self.flusher = Flusher()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.groups.run)
                await nursery.start(self.transactions.run)
                nursery.start_soon(LogMaintenance(self.logs, self.config).run)
                listeners = await nursery.start(self.server.serve, settings.host, settings.port, settings.sockets)
                self.port = listeners[0].socket.getsockname()[1]
                endpoint = BrokerEndpoint(
                    settings.node_id, settings.advertised_host or settings.host, settings.advertised_port or self.port
                )
                self.image = replace(self.image, brokers=(endpoint,), version=self.image.version + 1)
                task_status.started((endpoint.host, endpoint.port))
        finally:
            self.flusher.stop()
            self.logs.close()
            self.metadata_log.close()


def _fsync_all(paths: list[str]) -> None:
    for path in paths:
        try:
            fsync_file_and_directory(path)
        except FileNotFoundError:
            pass  # the partition was deleted meanwhile


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
