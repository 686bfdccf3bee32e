"""A broker's parts in memory, for calling handlers directly: no Broker, no listener, no socket.

``MemoryNode`` is kbroker/handlers/interfaces.py's HandlerNode as far as the handlers under test read it
(and the ``serving`` a GroupShell asks): an image, this node's id, ACLs that refuse what they are told to,
its replicas opened on first use, no quotas and no metrics. Replicas are what ``open_replica`` makes:
``replicas_on_disk`` gives real partitions (kbroker/replication/replica.py) over real logs in a directory,
whose fsyncs a ``MemoryFlusher`` runs in the test's own thread, at once or when the test says.
"""

from __future__ import annotations

import uuid
import errno
from collections.abc import Callable

import trio
import trio.testing

from kbroker.config import BrokerConfig
from kbroker.fetch_sessions import FetchSessionCache
from kbroker.log.clock import FakeClock
from kbroker.handlers import Deferred, metadata
from kbroker.log.partition_log import Log
from kbroker.metadata.answers import EncodedTopics
from kbroker.metadata.image import BrokerEndpoint, MetadataImage, PartitionState, TopicImage
from kbroker.replication.replica import Partition
from kbroker.security.acls import ResourceType
from kbroker.server import RequestContext
from kbroker.wire.frame import RequestHeader
from kbroker.wire.schema import API_BY_NAME

THIS_NODE = 1
HOST, PORT = "127.0.0.1", 9092  # where the image says this node listens (nothing does)


def context(api_name: str = "Metadata", version: int = 0) -> RequestContext:
    """A request's context as a PLAINTEXT listener makes it, for an anonymous client."""
    return RequestContext(RequestHeader(API_BY_NAME[api_name].key, version, 1, "test"), "127.0.0.1")


def topic_led_here(name: str, partitions: int = 1, topic_id: uuid.UUID | None = None, **configs) -> TopicImage:
    """A topic whose every partition has this node as its only replica and leader, at leader epoch 0."""
    states = tuple(PartitionState(index, leader=THIS_NODE, leader_epoch=0, replicas=(THIS_NODE,), isr=(THIS_NODE,))
                   for index in range(partitions))
    return TopicImage(name, topic_id or uuid.uuid4(), states, dict(configs))


class RefusingAuthorization:
    """An authorizer that allows everything but what is refused: topic or group names, and "cluster" for
    the cluster's ACLs. ``asked`` lists every question, in order."""

    enabled = True

    def __init__(self, refused=()) -> None:
        self.refused = set(refused)
        self.asked: list[tuple] = []

    def authorizer(self, acls):
        return self

    def authorize(self, principal, host, operation, resource_type, name) -> bool:
        self.asked.append((operation, resource_type, name))
        return ("cluster" if resource_type == ResourceType.CLUSTER else name) not in self.refused


class MemoryFlusher:
    """kbroker/replication/flusher.py's Flusher in the test's thread: each fsync runs as it is submitted,
    or, while ``held``, when ``release()`` is called. While ``failing`` is set, each fsync reports that
    error instead of running (as an fsync returning EIO)."""

    def __init__(self) -> None:
        self.held = False
        self.failing: OSError | None = None
        self.pending: list = []

    def submit(self, job, done) -> None:
        self.pending.append((job, done))
        if not self.held:
            self.release()

    def release(self) -> None:
        self.held = False
        while self.pending:  # a flush done may ask for the next
            job, done = self.pending.pop(0)
            if self.failing is not None:  # reported from the trio loop, as the flusher thread's reports come
                trio.lowlevel.current_trio_token().run_sync_soon(done, job, self.failing)
                continue
            job.run()
            done(job, None)


class FailingAppends:
    """A partition whose appends raise ``failing`` while it is set (after ``appends_before_failing`` more),
    writing nothing, as a full disk's would; in all else the partition it wraps."""

    def __init__(self, partition) -> None:
        self.partition = partition
        self.failing: OSError | None = None
        self.appends_before_failing = 0

    def append(self, records, **origin):
        if self.failing is not None:
            if self.appends_before_failing <= 0:
                raise self.failing
            self.appends_before_failing -= 1
        return self.partition.append(records, **origin)

    def __getattr__(self, name: str):
        return getattr(self.partition, name)


FULL_DISK = OSError(errno.ENOSPC, "No space left on device")
FSYNC_FAILED = OSError(errno.EIO, "Input/output error")


def fail_writes(node, flusher: MemoryFlusher, topic: str, how: str | None) -> None:
    """From now on, the appends to ``topic``-0 (a FailingAppends) fail ("append"), or every fsync ("fsync"),
    or neither (None). After a failed fsync the partition stays offline (kbroker/replication/replica.py):
    for writes to work again it is reopened as a restart would, on a disk that dropped what was not fsynced."""
    wrapper = node.partition(topic, 0)
    flusher.failing = FSYNC_FAILED if how == "fsync" else None
    if how is None and wrapper.offline is not None:
        wrapper.partition = restarted(node, wrapper.partition)
    wrapper.failing = FULL_DISK if how == "append" else None


def restarted(node, partition: Partition) -> Partition:
    """``partition`` closed and opened again through ``node``'s open_replica, its log cut back to the
    last offset fsynced before (the kernel may have dropped the rest: fsyncgate)."""
    durable = partition.log.recovery_point
    partition.log.close()
    state = node.image.topics[partition.topic].partitions[partition.index]
    reopened = node.open_replica(partition.topic, partition.index, state, node.node_id)
    reopened.log.truncate_to(durable)
    return reopened


async def running(shell, nursery):
    """``shell`` (a coordinator runtime) started in ``nursery`` and done loading its one partition."""
    await nursery.start(shell.run)
    await trio.testing.wait_all_tasks_blocked()
    assert shell.coordinator.loaded == {0}
    return shell


async def answer_of(handler, node, api_name: str, version: int, request):
    """A handler's answer to ``request``, once it is ready to be sent (a Deferred's, once ready)."""
    answer = await handler.handle(node, context(api_name, version), request)
    if isinstance(answer, Deferred):
        await answer.ready()
        return answer.response
    return answer


def replicas_on_disk(directory, flusher: MemoryFlusher) -> Callable:
    """``open_replica`` for a MemoryNode: a real Partition over a real Log under ``directory``."""

    def open_replica(topic: str, index: int, state: PartitionState, node_id: int) -> Partition:
        log = Log.open(str(directory / f"{topic}-{index}"))
        return Partition(topic, index, log, flusher, state.leader_epoch, node_id=node_id, replicas=state.replicas,
                         isr=state.isr, leader=state.leader)

    return open_replica


async def metadata_answer(node, request, version: int = 12):
    """A Metadata answer as a client reads it, encoded and decoded again: topics' parts may come encoded ahead
    (kbroker/metadata/answers.py)."""
    api = API_BY_NAME["Metadata"]
    response = await metadata.handle(node, context("Metadata", version), request)
    return api.decode_response(version, api.encode_response(version, response))


class MemoryNode:
    """The parts of a broker its handlers read, in memory."""

    forwards = True  # a broker's: metadata changes would go to the controller
    serving = True  # what the coordinator runtime asks before it loads its partitions
    quotas = None
    metrics = None
    isr = None

    def __init__(self, *topics: TopicImage, refused=(), open_replica: Callable | None = None,
                 settings: dict | None = None, node_id: int = THIS_NODE) -> None:
        self.node_id = node_id
        self.config = BrokerConfig.from_mapping(settings or {})
        self.image = MetadataImage("in-memory", node_id, brokers=(BrokerEndpoint(node_id, HOST, PORT),),
                                   topics={topic.name: topic for topic in topics},
                                   topic_names={topic.topic_id: topic.name for topic in topics})
        self.authorization = RefusingAuthorization(refused)
        self.open_replica = open_replica
        self.replicas: dict[tuple[str, int], object] = {}
        self.auto_created: list[str] = []  # the topics auto_create was asked for
        self.groups = None  # a GroupShell, where a test makes one over this node
        self.clock = FakeClock()
        self.fetch_sessions = FetchSessionCache(self.config.get("max.incremental.fetch.session.cache.slots"))
        self.metadata_answers = EncodedTopics()

    @property
    def log_dir_offline(self) -> BaseException | None:
        """The one directory of its replicas is offline once an fsync of one of them failed."""
        return next((replica.offline for replica in self.replicas.values() if replica.offline is not None), None)

    def leads(self, topic: TopicImage, index: int) -> bool:
        return topic.partitions[index].leader == self.node_id

    def min_insync_replicas(self, topic: TopicImage) -> int:
        return int(topic.configs.get("min.insync.replicas") or self.config.get("min.insync.replicas"))

    def partition(self, topic: str, index: int):
        state = self.image.topics[topic].partitions[index]
        assert self.node_id in state.replicas, "a broker opens only the replicas the image places on it"
        if (topic, index) not in self.replicas:
            self.replicas[(topic, index)] = self.open_replica(topic, index, state, self.node_id)
        return self.replicas[(topic, index)]

    async def auto_create(self, wanted) -> None:
        """Noted, never made: the image does not change, as while a controller has not answered yet."""
        self.auto_created.extend(request.name for request in wanted)
