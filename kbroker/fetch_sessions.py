"""Fetch sessions (KIP-227): what a Fetch request's ``session_id`` and ``session_epoch`` refer to, which
partitions it reads and in which order, and which of them its answer carries.

Kafka 4.x is the reference: FetchManager.newContext, FetchSessionCacheShard (maybeCreateSession, tryEvict,
touch), FetchSession and its CachedPartition (update, maybeUpdateResponseData), the four FetchContexts and
FetchMetadata (server/src/main/java/org/apache/kafka/server/, clients/.../requests/FetchMetadata.java; before
4.0 core/src/main/scala/kafka/server/FetchSession.scala). Pure: calls take the request's values and ``now_ms``
and return answers; no I/O, no trio, no clock, no randomness but the session id generator passed in.

A session holds an ordered set of partitions, each keyed by topic id and partition index when the request
version carries topic ids (13+), by topic name and index before (:func:`partition_key`). Each remembers the
request's values for it (fetch offset, max bytes, the fetcher's log start offset, current leader epoch, last
fetched epoch) and what the last answer that carried it said (high watermark, this broker's log start offset,
last stable offset). A session's epoch is the one its next request must carry: 1 once the session opens, then
one more per request, wrapping from 2**31-1 to 1 (:func:`next_epoch`).

A request gets a :class:`FetchContext` (:meth:`FetchSessionCache.new_context`):
- epoch -1 (FINAL_EPOCH): the session named, if any, is closed; the request is read and answered in full
  with session id 0 (SessionlessFetchContext; what every request before v7 is).
- epoch 0 (INITIAL_EPOCH): the session named, if any, is closed; the request is read and answered in full,
  and the answer opens a new session holding the partitions it carried, in its order, if the cache has a
  free slot or can evict a session for it; else the answer says session id 0 (FullFetchContext). Forgotten
  partitions are ignored.
- any other epoch: FETCH_SESSION_ID_NOT_FOUND without a session of that id, INVALID_FETCH_SESSION_EPOCH
  unless the epoch is the session's, FETCH_SESSION_TOPIC_ID_ERROR when the session uses topic ids and the
  request version does not, or the other way round (SessionErrorContext: nothing is read, the answer carries
  the error and session id 0). Otherwise the partitions named join the session at its end, or update their
  request values in place, and the forgotten ones leave it. A session this leaves empty is closed and the
  request read and answered as a sessionless one (its named partitions, session id 0). Any other session is
  used now (its idle time starts again) and its epoch moves on, and the request reads all of the session's
  partitions in the session's order (IncrementalFetchContext).
Partitions named twice count once, at their first place, with their last values. A partition whose topic id
metadata does not know has no name (the handler answers UNKNOWN_TOPIC_ID); it learns its name at a later
request of its session once metadata knows it, and keeps a name once known.

The handler then reports what it found for each partition it read (:class:`PartitionOutcome`) and asks
:meth:`FetchSessionCache.answer` which partitions the answer carries, in the outcomes' order. A session error
carries none; a sessionless or full request carries all; an incremental request carries a partition with
records, an error, a diverging epoch or a preferred read replica, or whose high watermark, log start offset or
last stable offset differs from what the session last answered (a partition that joined since has answered
nothing: it is carried). A partition answered with an error is remembered with high watermark -1, so that it
is carried again once the error has gone. A partition that returned records moves to the end of its
session's order, so that partitions that returned nothing get the next request's fetch.max.bytes first.
When the session's epoch is no longer the one the request set (a duplicate request overtook it), the answer is
INVALID_FETCH_SESSION_EPOCH with the session's id and no partitions, and nothing is remembered.

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions (1000). A new session that finds
no free slot may evict one, as Kafka's tryEvict does: the least recently used session if it is stale (unused for
more than ``eviction_ms``, Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, 120 s), else the least valuable
evictable one, if the newcomer is worth more. Worth is (privileged, size): a follower's session is privileged
over a consumer's, then more partitions over fewer. An unprivileged session is evictable by a privileged
newcomer at any time; any session is evictable by any newcomer once it was last used more than ``eviction_ms``
after it was created (Kafka files sessions under their evictable keys when it touches them: at creation and at
each incremental request).

Where this differs from Kafka, deliberately:
- One cache, not Kafka's eight shards (KAFKA-9401) of slots/8 sessions each that new sessions go to in turn and that
  evict within themselves: shards spread lock contention over request threads, and there is one event loop
  here. With the same slots, a new session here may evict where Kafka's would find its shard's sessions
  unevictable, and the other way round.
- ``eviction_ms`` is an argument; Kafka's is a constant, not a broker setting.
- A changed last stable offset also makes an incremental answer carry a partition (Kafka caches none: there a
  transaction's end counts once the high watermark passes its marker, so the LSO moves only as the high
  watermark does). This can carry more partitions, never fewer.
- An answer's error resets the remembered high watermark to -1 whatever high watermark the outcome gives; in
  Kafka the error answer itself carries -1 (FetchResponse.partitionResponse), also when it opens a session.
- A session never holds more than ``max_session_partitions`` partitions (Kafka has no bound, DESIGN rule 7):
  a full request naming more opens no session (session id 0, as when the cache is full), an incremental request
  that would take a session beyond it closes the session and is answered sessionless, as one that empties it is.
- An outcome for a partition the context did not name is left out of the answer (Kafka 4.x does so for an
  incremental context, and cannot meet it for a full one).
- :meth:`FetchSessionCache.throttled` keeps a session error; Kafka's empty throttled answer to a session error
  is NONE with session id 0 (either way the client starts over with a full request).
"""

from __future__ import annotations

import enum
import functools
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID

__all__ = ["EVICTION_MS", "FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "TOPIC_IDS_VERSION", "CachedPartition",
           "ContextKind", "FetchAnswer", "FetchContext", "FetchPartition", "FetchSessionCache", "FetchSessionView",
           "PartitionKey", "PartitionOutcome", "next_epoch", "partition_key"]

INVALID_SESSION_ID = 0  # no session: the answer to a sessionless request, or a session refused
INITIAL_EPOCH = 0  # open a session (closing the one named)
FINAL_EPOCH = -1  # no session (closing the one named)
TOPIC_IDS_VERSION = 13  # Fetch names topics by id from this version
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
_MAX_INT32 = 2**31 - 1
_SESSION_ID_DRAWS_MAX = 1000  # drawing ids in use this often means the generator is broken, not unlucky
_NO_REPLICA = -1  # preferred_read_replica when the answer names none

PartitionKey = tuple[uuid.UUID | str, int]  # (topic id, partition) from v13, (topic name, partition) before


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (FetchMetadata.nextEpoch): final stays final, 2**31-1 wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_INT32 else epoch + 1


def partition_key(topic_id: uuid.UUID, topic_name: str | None, partition: int) -> PartitionKey:
    """How a session tells partitions apart (Kafka's CachedPartition.equals): by topic id where the request
    carries one, else by topic name."""
    if topic_id != ZERO_UUID:
        return (topic_id, partition)
    return (topic_name or "", partition)


@dataclass(frozen=True)
class FetchPartition:
    """One partition as a fetch request names it (FetchRequest.PartitionData)."""

    topic_id: uuid.UUID  # ZERO_UUID before v13
    topic_name: str | None  # None: metadata does not know the topic id (answer UNKNOWN_TOPIC_ID)
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int = -1  # the fetcher's: a follower's log start
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1

    @property
    def key(self) -> PartitionKey:
        return partition_key(self.topic_id, self.topic_name, self.partition)


class ContextKind(enum.Enum):
    """Which of Kafka's fetch contexts a request got."""

    SESSIONLESS = "sessionless"  # SessionlessFetchContext: read and answer every partition named, no session
    FULL = "full"  # FullFetchContext: read and answer every partition named; the answer may open a session
    INCREMENTAL = "incremental"  # IncrementalFetchContext: read the session's partitions, answer what is new
    ERROR = "error"  # SessionErrorContext: read nothing, answer the error


@dataclass(frozen=True)
class FetchContext:
    """A request's place in the session cache. ``partitions`` are what the handler reads, in this order.
    ``added``, ``updated`` and ``removed`` are what an incremental request did to its session; a session the
    request closed (the one a full request named, or one it emptied) is ``closed_session_id``."""

    kind: ContextKind
    request_epoch: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    session_id: int = INVALID_SESSION_ID  # the session an incremental request is on
    partitions: tuple[FetchPartition, ...] = ()
    added: tuple[PartitionKey, ...] = ()
    updated: tuple[PartitionKey, ...] = ()
    removed: tuple[PartitionKey, ...] = ()
    closed_session_id: int = INVALID_SESSION_ID
    _named: Mapping[PartitionKey, FetchPartition] = field(default_factory=dict, repr=False, compare=False)
    _privileged: bool = field(default=False, repr=False, compare=False)
    _uses_topic_ids: bool = field(default=False, repr=False, compare=False)
    _session: _Session | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class PartitionOutcome:
    """What the handler found for one partition it read, as its answer would say it."""

    key: PartitionKey
    has_records: bool
    high_watermark: int
    log_start_offset: int  # this broker's
    last_stable_offset: int = -1
    error_code: int = ErrorCode.NONE
    preferred_read_replica: int = _NO_REPLICA
    diverging: bool = False  # the answer carries a diverging epoch: the follower must truncate

    def is_news(self) -> bool:
        """Carried whatever the session last answered."""
        return (self.has_records or self.error_code != ErrorCode.NONE or self.diverging
                or self.preferred_read_replica != _NO_REPLICA)


@dataclass(frozen=True)
class FetchAnswer:
    """The answer's top-level error and session id, and the partitions it carries, in order."""

    error_code: int
    session_id: int
    partitions: tuple[PartitionKey, ...] = ()


@dataclass(frozen=True)
class CachedPartition:
    request: FetchPartition  # the request's values, as last named
    high_watermark: int  # as last answered; -1: never, or an error since
    log_start_offset: int  # this broker's, as last answered
    last_stable_offset: int


@dataclass(frozen=True)
class FetchSessionView:
    session_id: int
    epoch: int  # the epoch the session's next request must carry
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    partitions: tuple[CachedPartition, ...]  # in the session's order


@dataclass
class _Cached:
    request: FetchPartition
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1

    def carries(self, outcome: PartitionOutcome) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData, asked without updating."""
        return outcome.is_news() or ((outcome.high_watermark, outcome.log_start_offset, outcome.last_stable_offset)
                                     != (self.high_watermark, self.log_start_offset, self.last_stable_offset))

    def remember(self, outcome: PartitionOutcome) -> None:
        failed = outcome.error_code != ErrorCode.NONE
        self.high_watermark = -1 if failed else outcome.high_watermark  # -1: carried again once the error is gone
        self.log_start_offset = outcome.log_start_offset
        self.last_stable_offset = outcome.last_stable_offset

    def view(self) -> CachedPartition:
        return CachedPartition(self.request, self.high_watermark, self.log_start_offset, self.last_stable_offset)


@dataclass
class _Session:
    id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    partitions: dict[PartitionKey, _Cached]  # in the session's order
    attachment: object = None  # the handler's, released with the session (FetchSessionCache.attach)

    def worth(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: the least of these is evicted first."""
        return (self.privileged, len(self.partitions), self.id)

    def evictable_by(self, privileged: bool, eviction_ms: int) -> bool:
        settled = self.last_used_ms - self.creation_ms > eviction_ms  # as of its last use: when Kafka files it
        return settled or (privileged and not self.privileged)

    def view(self) -> FetchSessionView:
        return FetchSessionView(self.id, self.epoch, self.privileged, self.uses_topic_ids, self.creation_ms,
                                self.last_used_ms, tuple(cached.view() for cached in self.partitions.values()))


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, *, eviction_ms: int = EVICTION_MS,
                 max_session_partitions: int = 100_000, session_ids: Callable[[], int] | None = None) -> None:
        """``max_slots``: max.incremental.fetch.session.cache.slots (0: no sessions). ``session_ids`` draws
        candidate session ids (1 to 2**31-1; one in use is drawn again); random by default."""
        if max_slots < 0:
            raise ValueError(f"max.incremental.fetch.session.cache.slots must be at least 0, not {max_slots}")
        if eviction_ms < 0 or max_session_partitions < 0:
            raise ValueError("eviction_ms and max_session_partitions must be at least 0")
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.max_session_partitions = max_session_partitions
        self.evictions = 0  # Kafka's IncrementalFetchSessionEvictionsPerSec, counted
        self.opened = 0  # sessions opened
        self.incremental_requests = 0  # requests served as incremental ones (IncrementalFetchContext)
        self._session_ids = session_ids or functools.partial(random.Random().randint, 1, _MAX_INT32)
        self._sessions: dict[int, _Session] = {}

    # -- views ------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Kafka's NumIncrementalFetchSessions."""
        return len(self._sessions)

    @property
    def partition_count(self) -> int:
        """Partitions over all sessions (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(len(session.partitions) for session in self._sessions.values())

    def session(self, session_id: int) -> FetchSessionView | None:
        session = self._sessions.get(session_id)
        return session.view() if session is not None else None

    def sessions(self) -> list[FetchSessionView]:
        return [session.view() for session in self._sessions.values()]

    # -- requests ---------------------------------------------------------------------------

    def new_context(self, session_id: int, epoch: int, partitions: Sequence[FetchPartition],
                    forgotten: Sequence[PartitionKey], *, version: int, follower: bool, now_ms: int,
                    topic_names: Mapping[uuid.UUID, str] | None = None) -> FetchContext:
        """A Fetch request: ``partitions`` are those its topics name, ``forgotten`` its forgotten_topics_data
        (keys as :func:`partition_key` makes them), ``follower`` whether a replica sent it, ``topic_names``
        what metadata calls the topic ids."""
        names = topic_names or {}
        named = _named(partitions, names)
        uses_topic_ids = version >= TOPIC_IDS_VERSION
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            closed = self._sessions.pop(session_id, None) if session_id != INVALID_SESSION_ID else None
            if closed is not None:
                _release(closed)
            return FetchContext(ContextKind.FULL if epoch == INITIAL_EPOCH else ContextKind.SESSIONLESS, epoch,
                                partitions=tuple(named.values()),
                                closed_session_id=closed.id if closed is not None else INVALID_SESSION_ID,
                                _named=named, _privileged=follower, _uses_topic_ids=uses_topic_ids)
        session = self._sessions.get(session_id)
        if session is None:
            return _failed(epoch, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, f"no fetch session {session_id} here")
        if epoch != session.epoch:
            return _failed(epoch, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                           f"fetch session {session_id} expects epoch {session.epoch}, not {epoch}")
        if session.uses_topic_ids != uses_topic_ids:
            return _failed(epoch, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
                           f"fetch session {session_id} {'uses' if session.uses_topic_ids else 'uses no'} topic "
                           f"ids, Fetch v{version} {'does' if uses_topic_ids else 'does not'}")
        added, updated, removed = _update(session, named, forgotten, names)
        if not session.partitions or len(session.partitions) > self.max_session_partitions:
            del self._sessions[session.id]
            _release(session)
            return FetchContext(ContextKind.SESSIONLESS, epoch, partitions=tuple(named.values()), added=added,
                                updated=updated, removed=removed, closed_session_id=session.id, _named=named)
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        self.incremental_requests += 1
        return FetchContext(ContextKind.INCREMENTAL, epoch, session_id=session.id,
                            partitions=tuple(cached.request for cached in session.partitions.values()),
                            added=added, updated=updated, removed=removed, _session=session)

    def answer(self, context: FetchContext, outcomes: Iterable[PartitionOutcome], now_ms: int) -> FetchAnswer:
        """Which of ``outcomes`` (what the handler found for the partitions ``context`` had it read) the answer
        carries, in their order; a full request's answer opens its session here, an incremental one's updates
        the session (Kafka's updateAndGenerateResponseData)."""
        if context.kind is ContextKind.ERROR:
            return FetchAnswer(context.error_code, INVALID_SESSION_ID)
        found = {outcome.key: outcome for outcome in outcomes}
        if context.kind is ContextKind.INCREMENTAL:
            return _incremental_answer(context, found)
        found = {key: outcome for key, outcome in found.items() if key in context._named}
        session_id = self._open(context, found, now_ms) if context.kind is ContextKind.FULL else INVALID_SESSION_ID
        return FetchAnswer(ErrorCode.NONE, session_id, tuple(found))

    def attach(self, session_id: int, attachment) -> None:
        """Keep ``attachment`` with session ``session_id`` (the handler's own state of it, say what changed
        among its partitions); its ``release()`` is called when the session is closed, emptied or evicted."""
        self._sessions[session_id].attachment = attachment

    def attachment(self, context: FetchContext):
        """What is attached to an incremental request's session, or None."""
        return context._session.attachment if context._session is not None else None

    def throttled(self, context: FetchContext) -> FetchAnswer:
        """The empty answer to a request whose client is over its quota (Kafka's getThrottledResponse): it
        remembers nothing and opens no session."""
        session = context._session
        if context.kind is ContextKind.ERROR:
            return FetchAnswer(context.error_code, INVALID_SESSION_ID)
        if session is None:
            return FetchAnswer(ErrorCode.NONE, INVALID_SESSION_ID)
        if session.epoch != next_epoch(context.request_epoch):
            return FetchAnswer(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id)
        return FetchAnswer(ErrorCode.NONE, session.id)

    # -- sessions ---------------------------------------------------------------------------

    def _open(self, context: FetchContext, found: dict[PartitionKey, PartitionOutcome], now_ms: int) -> int:
        """Kafka's maybeCreateSession: the new session's id, or 0 when there is no room for it."""
        size = len(found)
        if size > self.max_session_partitions:
            return INVALID_SESSION_ID
        if len(self._sessions) >= self.max_slots and not self._evict_for(context._privileged, size, now_ms):
            return INVALID_SESSION_ID
        partitions = {}
        for key, outcome in found.items():
            partitions[key] = cached = _Cached(context._named[key])
            cached.remember(outcome)
        session = _Session(self._new_session_id(), context._privileged, context._uses_topic_ids, now_ms, now_ms,
                           next_epoch(INITIAL_EPOCH), partitions)
        self._sessions[session.id] = session
        self.opened += 1
        return session.id

    def _evict_for(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Kafka's tryEvict: makes room for a new session worth (privileged, size), if it may. Kafka keeps two
        sorted maps for this; here the sessions are scanned, only when every slot is taken: about 0.2 ms at
        1000 sessions."""
        sessions = self._sessions.values()
        if not sessions:
            return False
        stalest = min(sessions, key=lambda session: (session.last_used_ms, session.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            victim = stalest
        else:
            evictable = [session for session in sessions if session.evictable_by(privileged, self.eviction_ms)]
            if not evictable:
                return False
            victim = min(evictable, key=_Session.worth)
            if (privileged, size) <= victim.worth()[:2]:  # a newcomer must be worth strictly more
                return False
        del self._sessions[victim.id]
        _release(victim)
        self.evictions += 1
        return True

    def _new_session_id(self) -> int:
        for _ in range(_SESSION_ID_DRAWS_MAX):
            session_id = self._session_ids()
            if not INVALID_SESSION_ID <= session_id <= _MAX_INT32:
                raise ValueError(f"a fetch session id is an int32 above 0, not {session_id}")
            if session_id != INVALID_SESSION_ID and session_id not in self._sessions:
                return session_id
        raise RuntimeError(f"the session id generator drew {_SESSION_ID_DRAWS_MAX} ids in use")


def _release(session: _Session) -> None:
    if session.attachment is not None:
        session.attachment.release()
        session.attachment = None


def _failed(epoch: int, error_code: int, message: str) -> FetchContext:
    return FetchContext(ContextKind.ERROR, epoch, error_code, message)


def _named(partitions: Sequence[FetchPartition], names: Mapping[uuid.UUID, str]) -> dict[PartitionKey, FetchPartition]:
    """The request's partitions by key, in its order: one named twice keeps its first place and last values."""
    named: dict[PartitionKey, FetchPartition] = {}
    for partition in partitions:
        if partition.topic_name is None and partition.topic_id in names:
            partition = replace(partition, topic_name=names[partition.topic_id])
        named[partition.key] = partition
    return named


def _update(session: _Session, named: Mapping[PartitionKey, FetchPartition], forgotten: Sequence[PartitionKey],
            names: Mapping[uuid.UUID, str]) -> tuple[tuple[PartitionKey, ...], ...]:
    """Kafka's FetchSession.update, then the names metadata has learnt: (added, updated, removed)."""
    added, updated = [], []
    for key, partition in named.items():
        cached = session.partitions.get(key)
        if cached is None:
            session.partitions[key] = _Cached(partition)
            added.append(key)
        else:  # a name once known is kept (KAFKA-13111): the topic may be gone from metadata now
            cached.request = replace(partition, topic_name=cached.request.topic_name or partition.topic_name)
            updated.append(key)
    removed = [key for key in dict.fromkeys(forgotten) if session.partitions.pop(key, None) is not None]
    if session.uses_topic_ids:
        for cached in session.partitions.values():
            if cached.request.topic_name is None and cached.request.topic_id in names:
                cached.request = replace(cached.request, topic_name=names[cached.request.topic_id])
    return tuple(added), tuple(updated), tuple(removed)


def _incremental_answer(context: FetchContext, found: Mapping[PartitionKey, PartitionOutcome]) -> FetchAnswer:
    session = context._session
    assert session is not None
    if session.epoch != next_epoch(context.request_epoch):  # a later request of the session came first
        return FetchAnswer(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id)
    carried = []
    for key, outcome in found.items():
        cached = session.partitions.get(key)
        if cached is None or not cached.carries(outcome):
            continue
        cached.remember(outcome)
        carried.append(key)
        if outcome.has_records:  # the others' turn at fetch.max.bytes first next time
            session.partitions[key] = session.partitions.pop(key)
    return FetchAnswer(ErrorCode.NONE, session.id, tuple(carried))
