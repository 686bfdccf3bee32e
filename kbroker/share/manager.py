"""The share-partitions this broker leads (KIP-932): Kafka's SharePartitionManager, the trio shell around
the pure share-partition (kbroker/share/partition.py).

A share-partition is made on first use by a share fetch or acknowledgement at the partition's leader: its
state is read from the share coordinator (ReadShareGroupState through :class:`SharePersister`, which also
fences the previous leader's writes) and resumed with ``SharePartition.from_state``. It belongs to one
leader epoch: once the partition moves on (another leader, or a new epoch here) it is dropped and the next
use reads the state again, as Kafka drops its SharePartition when leadership changes.

Every change a share-partition makes waits for its write (WriteShareGroupState) before it counts (DESIGN.md
rule 11). Writes of one share-partition are sent one at a time, in the order they were made (the
coordinator keeps what the last write says of the start offset), from this manager's nursery, so a client
that hangs up cannot leave a change pending forever; the caller waits for the outcome.

The manager also keeps time for the share-partitions: acquisition locks that run out are released (and
written), and a member's records are released when its share session ends (its final request, or its
connection closing; leaving its group is not enough, as in Kafka). When records become available again, or new
ones arrive, share fetches waiting for records look again (:meth:`SharePartitionManager.wake_on`).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.log.segment import FileRegion
from kbroker.share.persisted import UNINITIALIZED_START_OFFSET, answer_for_write_error
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import iter_batches

if TYPE_CHECKING:  # the cores are imported at first use: a broker nobody asks for share groups pays nothing
    from kbroker.share.partition import AcknowledgementBatch, AcquiredRecords, SharePartition, SharePartitionConfig
    from kbroker.share.persisted import PersistedState, StateWrite, WriteOutcome
    from kbroker.share.sessions import ClosedSession, ShareSessionCache

logger = logging.getLogger(__name__)

ShareKey = tuple[str, uuid.UUID, int]  # group id, topic id, partition
_LOCK_CHECK_S = 0.1  # how often run-out acquisition locks are looked for (and failed writes retried)
_READ_COMMITTED = "read_committed"
_ACQUIRE_READ_BYTES = 1 << 20  # the most of a partition's log one share fetch reads (whole batches, one at least)


@dataclass
class Acquired:
    """What one share fetch took from one share-partition: the records (whole batches covering the acquired
    offsets: a region of the log, sent with sendfile as Fetch sends it, or no bytes) and the offsets acquired."""

    records: FileRegion | bytes
    acquired: list[AcquiredRecords]

    @property
    def size(self) -> int:
        return len(self.records) if isinstance(self.records, bytes) else self.records.length


class _Entry:
    """One share-partition, or its state being read."""

    __slots__ = ("key", "leader_epoch", "partition", "ready", "error", "write_lock", "writing", "idle")

    def __init__(self, key: ShareKey, leader_epoch: int) -> None:
        self.key = key
        self.leader_epoch = leader_epoch
        self.partition: SharePartition | None = None
        self.ready = trio.Event()
        self.error = ErrorCode.NONE
        self.write_lock = trio.Lock()  # FIFO: writes leave in the order they were made
        self.writing = 0  # writes made and not yet settled
        self.idle = trio.Event()  # set while none is
        self.idle.set()


class SharePartitionManager:
    def __init__(self, broker, clock: Clock = SYSTEM_CLOCK) -> None:
        self.broker = broker
        self.clock = clock
        self._sessions: ShareSessionCache | None = None
        self._connections: weakref.WeakSet = weakref.WeakSet()  # those whose close ends share sessions
        self._entries: dict[ShareKey, _Entry] = {}
        self._retired: dict[ShareKey, _Entry] = {}  # dropped with writes still on their way
        self._available = trio.Event()  # set (and replaced) when records become available again
        self._nursery: trio.Nursery | None = None
        self._closed = False

    @property
    def sessions(self) -> ShareSessionCache:
        """The share sessions of the consumers fetching here (kbroker/share/sessions.py)."""
        if self._sessions is None:
            from kbroker.share.sessions import ShareSessionCache

            self._sessions = ShareSessionCache(self.broker.config.group_share_max_share_sessions)
        return self._sessions

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                while True:
                    await trio.sleep(_LOCK_CHECK_S)
                    self._expire_locks()
            finally:
                self._closed = True  # the nursery takes no more tasks

    # -- finding a share-partition --------------------------------------------------------------------------

    async def share_partition(self, group_id: str, topic_id: uuid.UUID, index: int,
                              replica) -> tuple[SharePartition | None, int]:
        """The share-partition of ``group_id`` on this broker's leader ``replica`` of (``topic_id``, ``index``),
        its state read from the share coordinator on first use: (it, NONE) or (None, the error to answer)."""
        key = (group_id, topic_id, index)
        entry = self._entries.get(key)
        if entry is not None and entry.leader_epoch != replica.leader_epoch:
            self._drop(entry)
            entry = None
        if entry is None:
            if self._stopping():
                return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
            entry = self._entries[key] = _Entry(key, replica.leader_epoch)
            self._nursery.start_soon(self._load, entry, replica)
        await entry.ready.wait()
        if entry.partition is None:
            return None, entry.error
        if entry.partition.fenced:
            self._drop(entry)
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return entry.partition, ErrorCode.NONE

    async def _load(self, entry: _Entry, replica) -> None:
        group_id, topic_id, index = entry.key
        from kbroker.share.partition import SharePartition

        retired = self._retired.pop(entry.key, None)
        if retired is not None:
            await retired.idle.wait()  # what it still writes is in the state read next
        try:
            error, state = await self.broker.share_persister.read(group_id, topic_id, index, entry.leader_epoch)
            if error == ErrorCode.NONE:
                if state.start_offset == UNINITIALIZED_START_OFFSET:
                    state = self._reset(group_id, state, replica)
                try:
                    entry.partition = SharePartition.from_state(
                        state, self.partition_config(group_id), leader_epoch=entry.leader_epoch,
                        log_start_offset=replica.log.log_start_offset, log_end_offset=replica.high_watermark)
                except ValueError as problem:
                    logger.error("share group %r, %s-%d: its state cannot be loaded: %s", group_id, replica.topic,
                                 index, problem)
                    error = ErrorCode.UNKNOWN_SERVER_ERROR
            entry.error = _answer_for_read_error(error)
        finally:
            if entry.partition is None and self._entries.get(entry.key) is entry:
                del self._entries[entry.key]  # the next use reads again
            entry.ready.set()

    def _reset(self, group_id: str, state: PersistedState, replica) -> PersistedState:
        """A share-partition with no state yet starts where share.auto.offset.reset says. earliest and latest
        are the share-partition's own; by_duration:<d> is the first record written at or after now - d (the log
        end when there is none), as ListOffsets finds it for Kafka's."""
        from kbroker.config.group_configs import group_config

        reset = group_config(self.broker.image, self.broker.config, group_id).share_auto_offset_reset_strategy
        if reset.strategy != "by_duration":
            return state
        found = replica.log.offset_for_timestamp(reset.list_offsets_timestamp(self.clock.wall_ms()))
        start_offset = replica.high_watermark if found is None else min(found[1], replica.high_watermark)
        return dataclasses.replace(state, start_offset=start_offset)

    def partition_config(self, group_id: str) -> SharePartitionConfig:
        """The share-partition settings of ``group_id``: its group configs over the broker's."""
        from kbroker.config.group_configs import group_config
        from kbroker.share.partition import SharePartitionConfig

        config = group_config(self.broker.image, self.broker.config, group_id)
        reset = config.share_auto_offset_reset_strategy.strategy
        return SharePartitionConfig(record_lock_duration_ms=config.share_record_lock_duration_ms,
                                    delivery_count_limit=config.share_delivery_count_limit,
                                    max_record_locks=self.broker.config.group_share_partition_max_record_locks,
                                    # by_duration's start offset is found at load (_reset)
                                    auto_offset_reset="latest" if reset == "latest" else "earliest")

    def isolation_level(self, group_id: str) -> str:
        from kbroker.config.group_configs import group_config

        return group_config(self.broker.image, self.broker.config, group_id).share_isolation_level

    def topics_deleted(self, topic_ids: set) -> None:
        """Forget the share-partitions of deleted topics, as Kafka's SharePartitionManager does when a partition
        is deleted: their records' locks go with them, and no state is written for them any more (a lock
        running out later would write to the share coordinator, and make its topic again after a reset)."""
        for entries in (self._entries, self._retired):
            for key in [key for key in entries if key[1] in topic_ids]:
                del entries[key]

    def _drop(self, entry: _Entry) -> None:
        """Forget a share-partition (leadership moved on, or no member of its group fetches here any more): its
        records' locks go with it, and the next use reads the state again once the writes still on their way are
        settled, as Kafka's SharePartitionManager drops a SharePartition on a leader change or an empty group."""
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
            if entry.writing:
                self._retired[entry.key] = entry

    # -- acquiring ----------------------------------------------------------------------------------------------

    def acquire(self, group_id: str, share_partition: SharePartition, replica, member_id: str, max_records: int,
                max_bytes: int, *, whole_batches: bool = False, batch_size: int = 0) -> Acquired:
        """Acquire up to ``max_records`` records for ``member_id`` from what the log holds below the high
        watermark (the last stable offset under read_committed), reading at most about ``max_bytes``;
        ``whole_batches`` and ``batch_size`` as :meth:`SharePartition.acquire` takes them."""
        from kbroker.config.group_configs import group_config

        log = replica.log
        if log.log_start_offset > share_partition.start_offset:
            share_partition.move_start_offset(log.log_start_offset)  # retention or DeleteRecords moved it
        settings = group_config(self.broker.image, self.broker.config, group_id)
        if share_partition.config.record_lock_duration_ms != settings.share_record_lock_duration_ms:
            # Kafka reads the group's lock duration at every acquisition: a change counts from the next one
            share_partition.config = dataclasses.replace(
                share_partition.config, record_lock_duration_ms=settings.share_record_lock_duration_ms)
        read_committed = settings.share_isolation_level == _READ_COMMITTED
        upper_bound = replica.last_stable_offset if read_committed else replica.high_watermark
        offset = share_partition.next_fetch_offset()
        if offset >= upper_bound or max_records <= 0:
            return Acquired(b"", [])
        # Read no more than one acquisition can take: at most max.record.locks records are in flight at once.
        region = log.read(offset, max(1, min(max_bytes, _ACQUIRE_READ_BYTES)), upper_bound, min_one_batch=True)
        if region is None:
            return Acquired(b"", [])
        data = region.read()
        batches, skipped = [], []
        positions = []
        aborted_producers = _aborted(log, offset, upper_bound) if read_committed else None
        for position, header in iter_batches(data, allow_partial_tail=True):
            span = (header.base_offset, header.last_offset)
            batches.append(span)
            positions.append((position, position + 12 + header.batch_length, span))
            if header.is_control or (aborted_producers is not None
                                     and _is_aborted(header, aborted_producers)):
                skipped.append(span)  # markers and aborted records are never delivered
        if not batches:
            return Acquired(b"", [])
        now = self.clock.wall_ms()
        acquired = share_partition.acquire(member_id, max_records, batches, now, aborted=skipped,
                                           whole_batches=whole_batches, batch_size=batch_size)
        if not acquired:
            return Acquired(b"", [])
        # The log from the first batch holding an acquired offset to the end of the last one goes out, batches
        # between included, as Kafka slices it (ShareFetchUtils): the client delivers the acquired offsets only.
        lowest, highest = min(run.first_offset for run in acquired), max(run.last_offset for run in acquired)
        holding = [(start, end) for start, end, (first, last) in positions if lowest <= last and first <= highest]
        start, end = holding[0][0], holding[-1][1]
        return Acquired(FileRegion(region.segment, region.position + start, end - start), acquired)

    # -- acknowledging and releasing ---------------------------------------------------------------------------

    async def acknowledge(self, key: ShareKey, share_partition: SharePartition, member_id: str,
                          batches: Sequence[AcknowledgementBatch]) -> int:
        """Apply a member's acknowledgements to the share-partition of ``key``; the error code to answer once
        their write is settled."""
        result = share_partition.acknowledge(member_id, batches, self.clock.wall_ms())
        if result.write is None:
            return result.error_code
        entry = self._entries.get(key)
        if entry is None or entry.partition is not share_partition or self._stopping():
            # dropped meanwhile (the next leader knows nothing of it), or the broker stops: not written
            return share_partition.write_failed(result.write, ErrorCode.NOT_LEADER_OR_FOLLOWER).error_code
        outcome: list[WriteOutcome] = []
        finished = trio.Event()
        self._start_write(entry, result.write, (outcome, finished))
        await finished.wait()
        return outcome[0].error_code

    def connection(self, connection):
        """The id under which a share session opened on this connection (its security Session) is kept: when
        the connection closes, the sessions it opened end and their members' records are released."""
        if connection not in self._connections:
            self._connections.add(connection)

            def closed() -> None:
                for ended in self.sessions.connection_closed(connection):
                    self.session_closed(ended)

            connection.on_close.append(closed)
        return connection

    def session_closed(self, closed: ClosedSession | None) -> None:
        """A member's share session here ended: its acquired records of the session's partitions go back. When it
        was its group's last session here, the group's share-partitions are dropped (Kafka's onGroupEmpty): an
        empty group's offsets may be altered or deleted, or the group deleted, and the next fetch must read that."""
        if closed is None:
            return
        self.release_session(closed.group_id, closed.member_id, closed.partitions)
        if closed.last_in_group:
            for entry in [entry for key, entry in self._entries.items() if key[0] == closed.group_id]:
                self._drop(entry)

    def release_session(self, group_id: str, member_id: str, partitions) -> None:
        """A member's share session on this broker closed: its records of those share-partitions are released."""
        for topic_id, index in partitions:
            entry = self._entries.get((group_id, topic_id, index))
            if entry is not None and entry.partition is not None:
                write = entry.partition.release_member(member_id)
                if write is not None:
                    self._write_soon(entry, write)

    def _write_soon(self, entry: _Entry, write: StateWrite) -> None:
        """Send a write nobody waits for (a release). Once the broker is stopping there is no sending: the records
        stay as the share coordinator has them, and the next leader resumes them as released."""
        if self._stopping():
            entry.partition.write_failed(write, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        else:
            self._start_write(entry, write, None)

    def _start_write(self, entry: _Entry, write: StateWrite, report) -> None:
        entry.writing += 1
        if entry.idle.is_set():
            entry.idle = trio.Event()
        self._nursery.start_soon(self._write, entry, write, report)

    def _stopping(self) -> bool:
        """The broker stops (or never started): the manager's nursery takes no more work."""
        return self._nursery is None or self._closed

    async def expire_locks_now(self, timeout_s: float = 30.0) -> None:
        """Release the records whose acquisition lock ran out by the clock's time now, and return once their
        writes are settled: for a test that moved the clock ahead (kbroker/testing/time_travel.py). Raises
        TimeoutError when that takes over ``timeout_s``."""
        if self._stopping():
            return
        self._expire_locks()
        with trio.move_on_after(timeout_s):
            for entry in [*self._entries.values(), *self._retired.values()]:
                await entry.idle.wait()
            return
        raise TimeoutError(f"share-partition writes not settled within {timeout_s} s")

    def _expire_locks(self) -> None:
        now = self.clock.wall_ms()
        for entry in list(self._entries.values()):
            share_partition = entry.partition
            if share_partition is None:
                continue
            due = share_partition.next_deadline_ms()
            if due is not None and due <= now:
                write = share_partition.expire_locks(now)
                if write is not None:
                    self._write_soon(entry, write)

    async def _write(self, entry: _Entry, write: StateWrite, report) -> None:
        """Send one write and tell the share-partition its fate (in the manager's nursery: always told)."""
        group_id, topic_id, index = entry.key
        error = ErrorCode.UNKNOWN_SERVER_ERROR
        try:
            async with entry.write_lock:
                error = await self.broker.share_persister.write(group_id, topic_id, index, entry.leader_epoch,
                                                                write.state)
        finally:
            share_partition = entry.partition
            if error == ErrorCode.NONE:
                outcome = share_partition.write_durable(write)
            else:
                logger.warning("share group %r, partition %s-%d: state not written: %s", group_id, topic_id, index,
                               ErrorCode(error).name)
                outcome = share_partition.write_failed(write, error)
            if outcome.records_released:
                self._wake()
            entry.writing -= 1
            if not entry.writing:
                entry.idle.set()
            if report is not None:
                report[0].append(outcome)
                report[1].set()

    # -- waiting for records ------------------------------------------------------------------------------

    def wake_on(self) -> trio.Event:
        """An event set when records of some share-partition become available again."""
        return self._available

    def _wake(self) -> None:
        self._available.set()
        self._available = trio.Event()

    # -- views ----------------------------------------------------------------------------------------------

    def share_partitions(self) -> dict[ShareKey, SharePartition]:
        """Every share-partition loaded here (for metrics and describing)."""
        return {key: entry.partition for key, entry in self._entries.items() if entry.partition is not None}


def _answer_for_read_error(error_code: int) -> int:
    """What a share fetch is answered when the state could not be read (Kafka's SharePartition.fetchPersisterError)."""
    return ErrorCode.NONE if error_code == ErrorCode.NONE else answer_for_write_error(error_code)


def _aborted(log, offset: int, upper_bound: int) -> dict[int, list[tuple[int, int]]]:
    """Per producer id, the (first, last) offsets of its aborted transactions met from ``offset`` on."""
    aborted: dict[int, list[tuple[int, int]]] = {}
    for txn in log.collect_aborted_transactions(offset, upper_bound):
        aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return aborted


def _is_aborted(header, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    if not header.is_transactional:
        return False
    return any(first <= header.base_offset <= last for first, last in aborted.get(header.producer_id, ()))
