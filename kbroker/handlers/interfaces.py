"""What a handler may use of the node it serves, in narrow typed parts (DESIGN.md rule 9).

A handler is ``async def handle(node, context, request)``. On a broker's listeners the node is the
Broker (kbroker/broker.py), a :class:`HandlerNode`; on a controller's listener it is the Controller
(kbroker/controller/controller.py), a :class:`ControllerNode`. The handlers of metadata changes serve
on both and take either: ``forwards`` tells them apart (kbroker/handlers/metadata_change.py).

Each part is a ``typing.Protocol``: the metadata view, the partitions, the coordinators, access (ACLs and
quotas), the admin side and, on a controller, the quorum. A node satisfies a part by having its members;
tests satisfy them with small parts in memory (tests/kbroker/in_memory_parts.py), and
tests/kbroker/test_handler_interfaces.py checks that every member the handlers read is named here, that
nothing here goes unread, and that Broker and Controller have what their listeners' handlers need.

Everything is read-only to a handler, hence properties: a node may hold a member as a plain attribute.
"""

from __future__ import annotations

from typing import Protocol

import trio

from kbroker.config import BrokerConfig
from kbroker.config.dynamic import ConfigLayers
from kbroker.controller.channel import ControllerChannel
from kbroker.fetch_sessions import FetchSessionCache
from kbroker.group.shell import GroupShell
from kbroker.log.append_origin import AppendOrigin
from kbroker.log.manager import LogManager
from kbroker.log.clock import Clock
from kbroker.log.partition_log import AppendResult, Log
from kbroker.log.validator import ValidatedBatches
from kbroker.metadata.answers import EncodedTopics
from kbroker.metadata.image import MetadataImage, TopicImage
from kbroker.producer_ids import ProducerIdBlock
from kbroker.schemas.store import SchemaStore
from kbroker.raft.driver import RaftDriver
from kbroker.security.authorization import Authorization
from kbroker.security.quotas import ClientQuotas
from kbroker.share.manager import SharePartitionManager
from kbroker.share.shell import ShareCoordinatorShell
from kbroker.topics import TopicRequest
from kbroker.txn.remote import VerificationGuards
from kbroker.txn.shell import TxnShell

# -- the metadata view --------------------------------------------------------------------------------------


class MetadataView(Protocol):
    """The cluster as this node sees it, and its own settings."""

    @property
    def image(self) -> MetadataImage:
        """The current image; a handler that holds one sees one consistent cluster."""

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig:
        """The settings in force: the static ones with the image's dynamic ones over them."""

    @property
    def config_layers(self) -> ConfigLayers:
        """The same settings layer by layer (what DescribeConfigs and CreateTopics answer with)."""


class BrokerView(MetadataView, Protocol):
    """What a broker knows of itself beside the image."""

    @property
    def static_config(self) -> BrokerConfig:
        """The settings as started (a change of a broker's configs is checked against them)."""

    @property
    def listener_protocols(self) -> list[tuple[str, str]]:
        """This broker's client listeners as (name, security protocol)."""

    @property
    def metadata_answers(self) -> EncodedTopics:
        """Topics' Metadata answers, encoded once per version while the topic is unchanged."""

    def leads(self, topic: TopicImage, index: int) -> bool: ...

    def min_insync_replicas(self, topic: TopicImage) -> int: ...


# -- the partitions -----------------------------------------------------------------------------------------


class PartitionReplica(Protocol):
    """What handlers use of one partition replica (kbroker/replication/replica.py's Partition)."""

    @property
    def topic(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def log(self) -> Log: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def isr(self) -> tuple[int, ...]: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    def append(self, records: bytes | bytearray | ValidatedBatches, origin: AppendOrigin = ...) -> AppendResult: ...

    def start_flush(self, offset: int) -> None: ...

    def flush_policy_waits(self, offset: int) -> bool: ...

    def visible_once_durable(self, offset: int) -> bool: ...

    async def wait_durable(self, offset: int) -> None: ...

    async def wait_committed(self, offset: int, leader_epoch: int) -> None: ...

    def committed_under(self, offset: int, leader_epoch: int) -> bool: ...

    def follower_fetched(self, replica: int, fetch_offset: int, now_ms: int | None = None) -> None: ...

    def advanced(self) -> trio.Event:
        """Set the next time the high watermark moves (a consumer's long poll)."""

    def appended(self) -> trio.Event:
        """Set the next time the log grows (a follower's long poll)."""


class IsrWake(Protocol):
    """The ISR manager, as far as Fetch goes: woken when a follower may have caught up."""

    @property
    def wake(self) -> trio.Event: ...


class TrafficMetrics(Protocol):
    def produced(self, topic: str, size: int, records: int) -> None: ...

    def fetched(self, topic: str, size: int, records: int) -> None: ...


class Partitions(Protocol):
    """This broker's replicas, their logs, and what counts their traffic."""

    def partition(self, topic: str, index: int) -> PartitionReplica:
        """This broker's replica of a partition the image places here."""

    @property
    def logs(self) -> LogManager:
        """The log directory (DescribeLogDirs)."""

    @property
    def log_dir_offline(self) -> BaseException | None:
        """Why the log directory is offline (an fsync failed), or None: its partitions answer
        KAFKA_STORAGE_ERROR (kbroker/handlers/partition_guard.py)."""

    async def checkpoint_logs(self) -> None:
        """Persist the logs' recovery points and start offsets (DeleteRecords), off the event loop."""

    @property
    def isr(self) -> IsrWake | None: ...

    @property
    def metrics(self) -> TrafficMetrics | None:
        """None unless the broker keeps metrics (metrics.port)."""

    @property
    def fetch_sessions(self) -> FetchSessionCache:
        """Consumers' and followers' fetch sessions (KIP-227)."""

    @property
    def clock(self) -> Clock:
        """What fetch sessions' idle times are read from."""


# -- the coordinators ---------------------------------------------------------------------------------------


class PeerCalls(Protocol):
    """Requests to other brokers (kbroker/peers.py): a partition leader asks a transaction's coordinator."""

    async def call(self, address: tuple[str, int], api_name: str, version: int, body, *, timeout_s: float,
                   client_id: str | None = None, lane: str = ""): ...


class Coordinators(Protocol):
    """The group, transaction and share coordinators, producer ids, and what transactional writes check."""

    @property
    def groups(self) -> GroupShell: ...

    @property
    def transactions(self) -> TxnShell: ...

    @property
    def share_states(self) -> ShareCoordinatorShell:
        """The share coordinator (KIP-932), over ``__share_group_state``."""

    @property
    def share_partitions(self) -> SharePartitionManager:
        """The share-partitions of the partitions this broker leads, and the share sessions of its consumers."""

    @property
    def producer_ids(self) -> ProducerIdBlock:
        """Handed the node itself (``take(node)``): it asks for blocks through the two members below."""

    @property
    def txn_guards(self) -> VerificationGuards:
        """Partitions being verified with a transaction coordinator on another broker (KIP-890)."""

    @property
    def peers(self) -> PeerCalls: ...

    def start_soon(self, function, *args) -> None:
        """Run ``function(*args)`` in the background for as long as the node runs."""

    async def allocate_producer_ids(self) -> tuple[int, int] | None:
        """The next producer-id block from the active controller, as (first, end); None if refused."""

    def schemas(self) -> SchemaStore:
        """The schema registry's state (a produce to a topic that validates schemas checks against it)."""


# -- access: ACLs and quotas --------------------------------------------------------------------------------


class Access(Protocol):
    @property
    def authorization(self) -> Authorization:
        """The ACL authorizer, or none (a controller's: brokers authorize what they forward)."""

    @property
    def quotas(self) -> ClientQuotas | None:
        """The clients' quotas; None on a controller, which meters no clients."""


# -- the admin side -----------------------------------------------------------------------------------------


class ControllerLink(Protocol):
    @property
    def channel(self) -> ControllerChannel:
        """Requests to the active controller (DescribeQuorum is answered by asking it)."""


class Forwarding(Protocol):
    """A broker's admin side: metadata changes go to the active controller."""

    @property
    def forwards(self) -> bool:
        """True: metadata changes are forwarded, never planned here."""

    async def forward(self, context, request):
        """The active controller's answer to a metadata change."""

    async def auto_create(self, wanted: list[TopicRequest]) -> None:
        """Have the active controller create topics; returns once they are in the image, or after a short wait."""

    @property
    def lifecycle(self) -> ControllerLink: ...


class Planning(Protocol):
    """A controller's admin side: metadata changes are planned against the image and committed here."""

    @property
    def forwards(self) -> bool:
        """False: changes are planned here, by the active controller only."""

    @property
    def is_active(self) -> bool: ...

    @property
    def write_lock(self) -> trio.Lock:
        """Held while a change is planned and committed, so that no two plan against one image."""

    async def submit(self, records: list) -> int | None:
        """Commit records through the quorum: None once committed, else an error code (NOT_CONTROLLER)."""


# -- a controller's quorum ----------------------------------------------------------------------------------


class Quorum(Protocol):
    """What the controller listener answers for the quorum and for the brokers."""

    @property
    def cluster_id(self) -> str:
        """The quorum's cluster id, which its requests must carry."""

    @property
    def driver(self) -> RaftDriver: ...

    @property
    def listens(self) -> bool:
        """Whether this controller has a listener of its own (a sole voter in a broker's process has none)."""

    @property
    def listener_name(self) -> str:
        """Its listener's name (controller.listener.names' first), which DescribeQuorum v2 names."""

    async def register_broker(self, request) -> tuple[int, int]: ...

    async def broker_heartbeat(self, request) -> dict: ...

    async def alter_partitions(self, broker_id: int, broker_epoch: int, wanted: list) -> tuple[int, list]: ...

    async def allocate_producer_ids(self, request) -> tuple[int, int, int]:
        """AllocateProducerIds: (error code, first id, count). Not the broker's member of that name."""


# -- the nodes ----------------------------------------------------------------------------------------------


class HandlerNode(BrokerView, Partitions, Coordinators, Access, Forwarding, Protocol):
    """What the handlers on a broker's listeners use of the broker."""


class ControllerNode(MetadataView, Access, Planning, Quorum, Protocol):
    """What the handlers on a controller's listener use of the controller."""
