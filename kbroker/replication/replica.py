"""A partition replica on this broker: its log, durability, the high watermark and, as leader, its ISR.

A batch is committed once every in-sync replica has it on disk; the high
watermark is the end of what is committed, and consumers read below it
(DESIGN.md, rule 5). The leader's own part is its fsynced end: many producers
share each fsync (kbroker/replication/flusher.py, group commit). A follower fsyncs what it
fetched before it fetches again, so the offset it fetches from is what it holds
durably; the leader's high watermark is the least of those offsets over the ISR
and its own. With no other replica in the ISR (a single node, say) the high
watermark is simply the durable end of the log.

As leader it also keeps the ISR honest (Kafka's rules): a follower that has not
caught up with the log end for ``replica.lag.time.max.ms`` is dropped from it, one
that reaches the high watermark is added back, each through AlterPartition at the
controller (kbroker/replication/isr.py); the image then says what the ISR is.

Time comes from the ``Clock`` it is given (kbroker/log/clock.py): its monotonic reading for when
followers last caught up (the ISR manager must read the same clock), its wall reading for what the
log stamps and compares (LogAppendTime, segment.ms, flush.ms from its last flush).

A failed fsync is never tried again (issue 26): after an fsync error the kernel may already have dropped
the dirty pages and marked them clean, so a second fsync could succeed and acknowledge data that is gone
(PostgreSQL's "fsyncgate"). The partition goes offline instead, as Kafka takes a log directory offline
on an IOException: whoever waits for its durability gets :class:`LogDirOffline`, nothing is appended
or flushed again, and ``on_storage_failure`` tells the broker, which takes its whole log directory
offline (kbroker/broker.py). Only a restart, which recovers the log from what is on disk, brings it back.
A flush whose fsync never ran is not such a failure: its file could not be opened (no descriptor left) or
is gone (the partition was deleted meanwhile). The pages are still dirty in the cache; the waiters of that
flush get the error, and the next flush is a first fsync of them, not a retry.

A write waits for replication under the leader epoch it was appended in (issue 44). A leader cut off from
its followers goes on taking writes it cannot commit; meanwhile another replica is elected and takes
writes of its own. When the old leader learns of it, it truncates its log to the new leader's and follows
the new leader's high watermark past offsets whose records it threw away. So a write is committed only if
the high watermark passed it while this replica still led in that epoch; once the replica stops leading or
its epoch changes, every write still waiting fails at once with NotLeaderForEpoch (kbroker/log/deposed.py),
as Kafka completes its delayed produces with NOT_LEADER_OR_FOLLOWER when leadership moves.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

import trio

from kbroker.replication.flusher import Flusher
from kbroker.log.append_origin import AppendOrigin
from kbroker.log.deposed import NotLeaderForEpoch
from kbroker.log.free_space import FreeSpace
from kbroker.log.offline import LogDirOffline
from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.log.partition_log import AppendResult, Log, WriteBeforeFsyncFailed
from kbroker.log.validator import ValidatedBatches

# A flush failing with one of these never reached fsync (an open failed): see the module's docstring.
FSYNC_NOT_RUN = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOENT})
# How many of its latest leaderships a replica remembers the high watermark of, for the writes woken by a
# high watermark that passed them whose answer comes after the next leadership change (one is enough in
# practice: waiters run within a scheduler round of the wake).
_LEADERSHIPS_KEPT = 4



class Watchers:
    """Events to set at a partition's next change. A fetch long-polling many partitions gives each the same
    event (as Kafka's purgatory watches a delayed fetch under each partition's key) instead of waiting on
    each partition's own event in a task of its own: 2,000 partitions cost 2,000 set insertions, not 2,000
    tasks."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: set[trio.Event] = set()

    def add(self, event: trio.Event) -> None:
        self._events.add(event)

    def discard(self, event: trio.Event) -> None:
        self._events.discard(event)

    def fire(self) -> None:
        if self._events:
            events, self._events = self._events, set()
            for event in events:
                event.set()


class Partition:
    def __init__(self, topic: str, index: int, log: Log, flusher: Flusher, leader_epoch: int = 0, *,
                 node_id: int = -1, replicas: tuple[int, ...] = (), isr: tuple[int, ...] = (), leader: int = -1,
                 clock: Clock = SYSTEM_CLOCK,
                 on_storage_failure: Callable[[BaseException], None] | None = None,
                 free_space: FreeSpace | None = None) -> None:
        """``on_storage_failure(error)`` is told, once, that an fsync of this partition failed; ``free_space``
        keeps log.dir.min.free.bytes free on the log directory (kbroker/log/free_space.py)."""
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self.node_id = node_id
        self.leader = leader
        self.replicas = replicas
        self.isr = isr
        self.clock = clock
        self._flusher = flusher
        self._flushing: trio.Event | None = None  # set when the fsync under way is done
        self._flush_error: BaseException | None = None  # the last flush's, when its fsync never ran
        self.offline: LogDirOffline | None = None  # set for good once an fsync failed (or the directory did)
        self.on_storage_failure = on_storage_failure
        self.free_space = free_space
        self._wanted = -1  # the highest offset someone asked to be made durable
        self._flush_policy_wanted = -1  # the highest offset whose append reached flush.messages
        self._advanced = trio.Event()  # set (and replaced) whenever the high watermark moves
        self._appended = trio.Event()  # set (and replaced) whenever the log grows (followers' fetches wait on it)
        self.advance_watchers = Watchers()  # told when the high watermark or the log start moves (consumers' fetches)
        self.append_watchers = Watchers()  # told when the log grows (followers' fetches)
        log.on_start_moved = self.advance_watchers.fire  # a fetch session answers a moved log start
        # The high watermark when others' copies count (a replicated partition); None: the durable end.
        self._high_watermark: int | None = None if len(replicas) <= 1 else log.log_start_offset
        self.follower_offsets: dict[int, int] = {}  # leader: each follower's durable end, as its fetches say
        self.caught_up_ms: dict[int, int] = {}  # leader: when each follower last had everything the leader had
        self._last_fetch: dict[int, tuple[int, int]] = {}  # leader: (time, log end) at each follower's last fetch
        self.pending_isr: tuple[int, ...] | None = None  # leader: an ISR change sent to the controller
        self._led: dict[int, int] = {}  # leader epoch -> the high watermark reached while leading in it
        if self.is_leader:
            self._start_leading()

    # -- roles ---------------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    def update(self, leader: int, leader_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> None:
        """The image's word on this partition (a new leader, epoch, ISR or replica set)."""
        became_leader = leader == self.node_id and (not self.is_leader or leader_epoch != self.leader_epoch)
        self.leader, self.leader_epoch, self.replicas, self.isr = leader, leader_epoch, replicas, isr
        self.pending_isr = None
        if len(replicas) > 1 and self._high_watermark is None:
            self._high_watermark = min(self.log.recovery_point, self.log.log_end_offset)
        if became_leader:
            self._start_leading()
        self._advance()

    def _start_leading(self) -> None:
        """A new leadership: every follower has a whole replica.lag.time.max.ms from now to show up."""
        now = self.clock.monotonic_ms()
        self.follower_offsets = {}
        self._last_fetch = {}
        self.caught_up_ms = {replica: now for replica in self.replicas if replica != self.node_id}

    # -- the high watermark ---------------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        if self._high_watermark is None:
            return self.log.recovery_point
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        return min(self.log.last_stable_offset, self.high_watermark)

    def advanced(self) -> trio.Event:
        """An event set the next time the high watermark moves (for long-polling fetches)."""
        return self._advanced

    def appended(self) -> trio.Event:
        """An event set the next time the log grows (for followers' long-polling fetches)."""
        return self._appended

    def counted_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: while a change is pending, the larger of the two."""
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending_isr))

    def _advance(self) -> None:
        """Move the high watermark to what the ISR holds (leader) and wake whoever waits on it."""
        if self._high_watermark is not None and self.is_leader:
            durable = min(self.log.recovery_point, self.log.log_end_offset)
            others = [self.follower_offsets.get(replica, -1) for replica in self.counted_isr() if replica != self.node_id]
            committed = min([durable, *others])
            if committed > self._high_watermark:
                self._high_watermark = committed
        if self.is_leader:
            self._led[self.leader_epoch] = self.high_watermark
            if len(self._led) > _LEADERSHIPS_KEPT:
                del self._led[min(self._led)]
        advanced, self._advanced = self._advanced, trio.Event()
        advanced.set()
        self.advance_watchers.fire()

    def follower_fetched(self, replica: int, fetch_offset: int, now_ms: int | None = None) -> None:
        """Leader: follower ``replica`` fetches from ``fetch_offset``, so it holds everything below it
        (``now_ms``: the partition's monotonic clock unless given)."""
        now_ms = self.clock.monotonic_ms() if now_ms is None else now_ms
        # Kafka's rule: a follower fetching from the leader's end as it was at its previous fetch had
        # caught up then (under steady writes it is never at the end as it is now).
        if fetch_offset >= self.log.log_end_offset:
            self.caught_up_ms[replica] = now_ms
        elif replica in self._last_fetch and fetch_offset >= self._last_fetch[replica][1]:
            self.caught_up_ms[replica] = max(self.caught_up_ms.get(replica, 0), self._last_fetch[replica][0])
        self._last_fetch[replica] = (now_ms, self.log.log_end_offset)
        if self.follower_offsets.get(replica) != fetch_offset:
            self.follower_offsets[replica] = fetch_offset
            self._advance()

    def last_fetch_ms(self, replica: int) -> int | None:
        """Leader: when follower ``replica``'s last fetch came (the partition's monotonic clock), or None."""
        last = self._last_fetch.get(replica)
        return None if last is None else last[0]

    def follow_high_watermark(self, leader_high_watermark: int) -> None:
        """Follower: the leader's high watermark, as far as this log reaches."""
        if self._high_watermark is None:
            return
        high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        if high_watermark != self._high_watermark:
            self._high_watermark = high_watermark
            self._advance()

    def truncated(self) -> None:
        """Follower: the log was cut back to its leader's; the high watermark never points past the end."""
        if self._high_watermark is not None and self._high_watermark > self.log.log_end_offset:
            self._high_watermark = self.log.log_end_offset

    # -- appends and durability ---------------------------------------------------------------------------------

    def append(self, records, origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendResult:
        """Append as leader (offsets and this leader's epoch stamped in place); followers' fetches wake.
        ``records``: bytes, or a produce's batches as kbroker/log/validator.py validated them. OSError
        ENOSPC when the disk is full (or would be past log.dir.min.free.bytes): nothing is written then."""
        self._check_online()
        self._claim_space(records)
        result = self.log.append(records, origin=origin, leader_epoch=self.leader_epoch, now_ms=self.clock.wall_ms())
        self._wake_fetchers()
        self._apply_flush_policy(result)
        return result

    def append_replicated(self, records) -> AppendResult:
        """Append as follower: the leader's batches with their offsets and epochs."""
        self._check_online()
        self._claim_space(records)
        result = self.log.append(records, origin=AppendOrigin.REPLICATION, now_ms=self.clock.wall_ms())
        self._apply_flush_policy(result)
        return result

    def _apply_flush_policy(self, result: AppendResult) -> None:
        """flush.messages reached: the fsync Kafka's append makes in place starts now, on the flusher thread."""
        if result.flush_messages_reached:
            self._flush_policy_wanted = max(self._flush_policy_wanted, result.last_offset)
            self.start_flush(result.last_offset)

    def flush_policy_waits(self, offset: int) -> bool:
        """Whether the append that wrote ``offset`` reached flush.messages and is not fsynced yet: Kafka
        answers such an append only after its fsync, whatever the acks."""
        return self.log.recovery_point <= offset <= self._flush_policy_wanted

    def visible_once_durable(self, offset: int) -> bool:
        """Whether ``offset`` is not visible yet and will be at this replica's next fsync: this replica is
        the lone in-sync one, whose high watermark is its fsynced end. An acks=1 answer waits for it (DESIGN
        rule 12: an acknowledged record is readable, counted by ListOffsets and deletable at once, as on a
        lone in-sync replica in Kafka; consumers still read only what is fsynced)."""
        return self.log.recovery_point <= offset and len(self.counted_isr()) <= 1

    def flush_if_due(self) -> None:
        """flush.ms: unflushed data older than that is fsynced (Kafka's LogManager.flushDirtyLogs)."""
        if self.log.flush_due(self.clock.wall_ms()):
            self.start_flush(self.log.log_end_offset - 1)

    def _wake_fetchers(self) -> None:
        appended, self._appended = self._appended, trio.Event()
        appended.set()
        self.append_watchers.fire()

    def start_flush(self, offset: int) -> None:
        """Have everything up to ``offset`` made durable, without waiting: a flush starts now,
        or follows the one under way if that began before ``offset`` was appended. Offline: nothing."""
        self._wanted = max(self._wanted, offset)
        if self.log.recovery_point <= offset and self._flushing is None and self.offline is None:
            self._begin_flush()

    async def wait_durable(self, offset: int) -> None:
        """Return once everything up to ``offset`` is fsynced here, sharing fsyncs with other waiters;
        :class:`LogDirOffline` if an fsync failed (never a second try: see the module's docstring)."""
        self.start_flush(offset)
        while self.log.recovery_point <= offset:
            self._check_online()
            if self._flushing is None:  # the last flush never ran its fsync (FSYNC_NOT_RUN): a first try
                self._begin_flush()
            await self._flushing.wait()
            self._check_online()
            if self._flush_error is not None:
                raise self._flush_error

    def go_offline(self, cause: BaseException) -> None:
        """This partition's log directory is offline (one of its fsyncs failed, or another partition's on
        the same directory): waiters get :class:`LogDirOffline`; nothing is appended or fsynced again."""
        if self.offline is not None:
            return
        self.offline = cause if isinstance(cause, LogDirOffline) else LogDirOffline(self.topic, self.index, cause)
        self._wake_fetchers()
        self._advanced.set()  # high-watermark waiters look again (and find the partition offline)
        self._advanced = trio.Event()
        self.advance_watchers.fire()

    def _claim_space(self, records) -> None:
        if self.free_space is not None:
            self.free_space.claim(len(records.buffer) if isinstance(records, ValidatedBatches) else len(records))

    def _check_online(self) -> None:
        if self.offline is not None:
            raise self.offline

    async def wait_committed(self, offset: int, leader_epoch: int) -> None:
        """Return once everything up to ``offset``, appended as leader in ``leader_epoch`` (the append's
        ``AppendResult.leader_epoch``), is committed: fsynced here and held by the whole ISR of that
        leadership. :class:`NotLeaderForEpoch` at once when this replica stops leading in that epoch first
        (see the module's docstring); :class:`LogDirOffline` or the flush's error when it cannot be made
        durable. The caller bounds the wait (a follower may stop fetching; then the ISR shrinks first)."""
        self.start_flush(offset)
        while not self.committed_under(offset, leader_epoch):
            self._check_online()
            if self.log.recovery_point <= offset and self._flushing is None:  # the last flush did not reach it
                if self._flush_error is not None:
                    raise self._flush_error
                self._begin_flush()
            await self._advanced.wait()  # set by every flush, follower fetch and leadership change

    def committed_under(self, offset: int, leader_epoch: int) -> bool:
        """Whether ``offset``, appended as leader in ``leader_epoch``, is committed in that leadership;
        NotLeaderForEpoch when the leadership ended first."""
        if self.is_leader and self.leader_epoch == leader_epoch:
            return self.high_watermark > offset
        if self._led.get(leader_epoch, -1) > offset:
            return True  # committed while it led; the waiter runs only after the change
        raise NotLeaderForEpoch(self.topic, self.index, offset, leader_epoch)

    def _begin_flush(self) -> None:
        self._flushing = trio.Event()
        self._flusher.submit(self.log.begin_flush(), self._flushed)

    def _flushed(self, job, error: BaseException | None) -> None:
        """The flusher's report, in the trio thread (so it lands even if every waiter was cancelled).
        A failed fsync takes the partition offline and is not tried again (see the module's docstring)."""
        if error is None and self.offline is None:
            self.log.complete_flush(job, now_ms=self.clock.wall_ms())
        flushing, self._flushing = self._flushing, None
        self._flush_error = error
        if error is not None and not (isinstance(error, WriteBeforeFsyncFailed)
                                      or isinstance(error, OSError) and error.errno in FSYNC_NOT_RUN):
            self.go_offline(error)
            if self.on_storage_failure is not None:
                self.on_storage_failure(self.offline)
        # What was asked for meanwhile (and still exists: a truncation may have cut it) goes next.
        wanted = min(self._wanted, self.log.log_end_offset - 1)
        if error is None and self.offline is None and self.log.recovery_point <= wanted:
            self._begin_flush()
        flushing.set()
        self._advance()
