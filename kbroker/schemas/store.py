"""The schema registry over the ``_schemas`` topic, on the broker's trio loop.

Every node holding a copy of ``_schemas``-0 applies its committed records in order to its own
``Registry`` (kbroker/schemas/registry.py) and answers reads from it, after catching up with what its
copy has committed. The node leading the partition is the one writer: it catches up with everything
in its log (committed first), decides a change against that state, appends the change's records as
one batch and answers once they are committed (fsynced and on every in-sync replica). A leader
that just took over has every record an earlier leader acknowledged, so no id is given twice. Other
nodes pass writes on to the leader (kbroker/schemas/api.py), as do nodes without a copy for reads.

The topic is created by the first write, compacted, with one partition and
``schema.registry.topic.replication.factor`` replicas (1 on a single node, Kafka's 3 for its internal
topics on a node of a cluster). As Kafka does for ``__consumer_offsets``, it is not created with fewer:
until enough brokers are live, writes are refused with 50001 (retriable: a 5xx).
"""

from __future__ import annotations

import logging

import trio

from kbroker.log.append_origin import AppendOrigin
from kbroker.log.deposed import NotLeaderForEpoch
from kbroker.schemas import records
from kbroker.schemas.registry import Registry, RegistryError
from kbroker.topics import TopicRequest
from kbroker.wire import DecodeError
from kbroker.wire.records import Record, build_batch, decode_records, iter_batches

logger = logging.getLogger(__name__)

TOPIC = "_schemas"
STORE_ERROR, TIMED_OUT, FORWARDING_FAILED, UNKNOWN_LEADER = 50001, 50002, 50003, 50004
_READ_BYTES = 1 << 20
_COMMIT_TIMEOUT_S = 10  # Confluent's kafkastore.timeout.ms is 500 ms; a cluster's fsyncs and fetches get more
_CREATE_TIMEOUT_S = 10


class NotWriter(Exception):
    """This node cannot answer: ``leader`` (a node id, -1 if none), which leads ``_schemas``-0, can."""

    def __init__(self, leader: int) -> None:
        super().__init__(f"the registry's writer is node {leader}")
        self.leader = leader


class SchemaStore:
    def __init__(self, broker, check) -> None:
        self.broker = broker
        self.registry = Registry(check)
        self._check = check
        self._next_offset = 0  # the first record of _schemas not applied yet
        self._write_lock = trio.Lock()

    # -- reading ---------------------------------------------------------------------------------

    def _copy(self):
        """This node's replica of _schemas-0, or None where it holds none (or the topic does not exist)."""
        topic = self.broker.image.topics.get(TOPIC)
        if topic is None or self.broker.node_id not in topic.partitions[0].replicas:
            return None
        return self.broker.partition(TOPIC, 0)

    def leader(self) -> int:
        topic = self.broker.image.topics.get(TOPIC)
        return -1 if topic is None else topic.partitions[0].leader

    async def catch_up(self) -> Registry:
        """The registry with every record this node's copy has committed applied. NotWriter where the
        topic exists but this node holds no copy of it (more than three nodes): the leader answers."""
        copy = self._copy()
        if copy is None:
            if self.broker.image.topics.get(TOPIC) is not None:
                raise NotWriter(self.leader())
            if self._next_offset:
                self._restart()  # the topic was deleted
            return self.registry
        log = copy.log
        if self._next_offset < log.log_start_offset:
            self._restart()
            self._next_offset = log.log_start_offset
        end = copy.high_watermark
        while self._next_offset < end:
            region = log.read(self._next_offset, _READ_BYTES, upper_bound=end)
            if region is None:
                break
            data = region.read()
            for position, header in iter_batches(data, allow_partial_tail=True):
                if header.last_offset < self._next_offset:
                    continue
                self._next_offset = header.last_offset + 1
                if header.is_control:
                    continue
                try:
                    _, batch_records = decode_records(data, position)
                except DecodeError as error:
                    logger.warning("%s: skipping an unreadable batch at %d: %s", TOPIC, header.base_offset, error)
                    continue
                for record in batch_records:
                    self._apply(record)
            await trio.lowlevel.checkpoint()
        return self.registry

    async def catch_up_if_held(self) -> Registry:
        """As ``catch_up``, and where this node holds no copy, the registry as it stands (broker-side
        validation on a node of a larger cluster: it refuses ids it has not seen)."""
        try:
            return await self.catch_up()
        except NotWriter:
            return self.registry

    def _apply(self, record: Record) -> None:
        try:
            self.registry.apply(*records.decode(record.key, record.value))
        except records.RecordError as error:  # another writer's record we cannot read: as Confluent's, skipped
            logger.warning("%s: skipping a record: %s", TOPIC, error)

    def _restart(self) -> None:
        self.registry = Registry(self._check)
        self._next_offset = 0

    # -- writing ---------------------------------------------------------------------------------

    async def write(self, decide):
        """``decide(registry) -> (answer, records)`` on the writer's up-to-date state; its records
        committed, then its answer. NotWriter where another node leads the partition."""
        async with self._write_lock:
            await self._ensure_topic()
            leader = self.leader()
            if leader != self.broker.node_id:
                raise NotWriter(leader)
            copy = self._copy()
            try:
                with trio.fail_after(_COMMIT_TIMEOUT_S):
                    if copy.log.log_end_offset:  # an earlier leader's records count before anything is decided
                        await copy.wait_committed(copy.log.log_end_offset - 1, copy.leader_epoch)
                    registry = await self.catch_up()
                    answer, written = decide(registry)
                    if written:
                        batch = build_batch([Record(offset_delta=i, key=key, value=value)
                                             for i, (key, value) in enumerate(written)])
                        appended = copy.append(bytearray(batch), origin=AppendOrigin.COORDINATOR)
                        await copy.wait_committed(appended.last_offset, appended.leader_epoch)
                        await self.catch_up()
            except NotLeaderForEpoch:  # deposed meanwhile: nothing was answered, the new writer decides
                raise NotWriter(self.leader()) from None
            except trio.TooSlowError:
                raise RegistryError(TIMED_OUT, "Write to the Kafka store timed out while waiting for the "
                                    "records to be committed") from None
            except OSError as error:
                raise RegistryError(STORE_ERROR, f"Error while writing to the Kafka store: {error}") from None
            return answer

    async def _ensure_topic(self) -> None:
        broker = self.broker
        if TOPIC in broker.image.topics:
            return
        replication = broker.config.get("schema.registry.topic.replication.factor")
        live = len(broker.image.live_brokers)
        if live < replication:
            raise RegistryError(STORE_ERROR, f"the {TOPIC} topic cannot be created yet: "
                                f"schema.registry.topic.replication.factor is {replication} and {live} "
                                f"broker(s) are live")
        await broker.auto_create([TopicRequest(TOPIC, 1, replication, {}, {"cleanup.policy": "compact"})])
        with trio.move_on_after(_CREATE_TIMEOUT_S):
            while TOPIC not in broker.image.topics or broker.image.topics[TOPIC].partitions[0].leader < 0:
                await trio.sleep(0.05)
        if TOPIC not in broker.image.topics:
            raise RegistryError(STORE_ERROR, f"the {TOPIC} topic could not be created")
