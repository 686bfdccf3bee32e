"""Share sessions (KIP-932): what a share consumer's ShareFetch and ShareAcknowledge requests to this broker
refer to by ``group_id``, ``member_id`` and ``share_session_epoch``.

Kafka 4.2 is the reference: ShareSessionCache, ShareSession and CachedSharePartition (server/.../share/),
SharePartitionManager.newContext and acknowledgeSessionUpdate, ShareSessionContext and FinalContext, and
KafkaApis.handleShareFetchRequest / handleShareAcknowledgeRequest for when a session ends. Pure: calls take
the request's values and return answers; no I/O, no trio, no clock (nothing here times out: Kafka 4.2 sessions
have no idle eviction).

One session per (group id, member id) on this broker, holding an ordered set of partitions, each a
(topic id, partition) with the topic's name when metadata knows it, and the id of the connection that opened
it. A session's epoch is the one its next request must carry: 1 after an opening request, then one more per
request, wrapping from 2**31-1 to 1 (ShareRequestMetadata.nextEpoch).

ShareFetch (:meth:`ShareSessionCache.fetch`):
- epoch 0 opens a session: acknowledgements in the request are INVALID_REQUEST (and nothing changes); a
  session of the same key is replaced, without releasing anything (the member is the same and still holds
  its records); with ``group.share.max.share.sessions`` sessions open already, SHARE_SESSION_LIMIT_REACHED
  (no eviction; Kafka answers it after waiting the request's max_wait_ms, which is the shell's to do). The
  session holds every partition the request names (the forgotten ones are ignored), and the answer to this
  request names them all.
- epoch -1 is the final fetch: SHARE_SESSION_NOT_FOUND without a session, else its epoch is not checked; it
  fetches nothing (partitions it names only carry acknowledgements: Kafka 4.2 no longer refuses them) and
  closes the session. The shell processes the acknowledgements first, then releases the member's acquired
  records on the partitions the session held (:class:`ClosedSession`).
- any other epoch: SHARE_SESSION_NOT_FOUND without a session, INVALID_SHARE_SESSION_EPOCH unless it equals
  the session's; then the partitions named join the session (all of them, including those that only carry
  acknowledgements), those in ``forgotten_topics_data`` leave it, and the epoch moves on. The session's
  partitions, in its order, are what this request fetches.
- Which partitions an answer then carries (:meth:`ShareSessionCache.response_partitions`): the opening and the
  final request, all of them; later ones, Kafka's incremental rule: a partition with records or an error, or
  one added since the last answer that carried it, or one whose error of last time has gone; a partition that
  returned records moves to the end of the session's order. When the session's epoch is no longer the one
  this request set (a duplicate request overtook it), INVALID_SHARE_SESSION_EPOCH and no partitions.
  Acknowledgement results for partitions the answer does not carry are added by the shell, as Kafka does.

ShareAcknowledge (:meth:`ShareSessionCache.acknowledge`): epoch 0 is INVALID_SHARE_SESSION_EPOCH; then
SHARE_SESSION_NOT_FOUND without a session; epoch -1 closes the session after the acknowledgements (as a final
fetch does); otherwise the epoch must equal the session's (INVALID_SHARE_SESSION_EPOCH) and moves on. The
session's partitions do not change.

Sessions also end when the connection that opened them closes (Kafka's connectionDisconnectListener, which
then treats the member as gone from this broker: its acquired records on the session's partitions are
released). A member that leaves its group keeps its session: the client closes it after leaving. When the
last session of a group on this broker ends, Kafka drops the group's share-partitions here (onGroupEmpty,
checked at a disconnect); :attr:`ClosedSession.last_in_group` says when, and the shell may do the same once
the closing request's acknowledgements and releases are done.

Where this differs from Kafka, deliberately:
- A final request's session leaves the cache when the request is accepted; Kafka removes it once the
  request's acknowledgements are done, so a request arriving meanwhile still finds it there, and
  SHARE_SESSION_NOT_FOUND here.
- A closing connection ends every session it opened that is still open. Kafka remembers one session per
  connection (the last opened on it) and, since KAFKA-19950 (#21062), only while that session has been
  neither closed nor replaced; here a session replaced from another connection is likewise safe from the
  old connection's close, and a connection that opened sessions for two members closes both.
- A partition whose topic id was unknown when it joined learns its name when a later request names it again
  with metadata that knows it (Kafka keeps the null name, and answers UNKNOWN_TOPIC_ID, until the session is
  opened again). A partition named twice in an opening request joins once (Kafka fails the request).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kbroker.wire.errors import ErrorCode

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ClosedSession", "FetchKind", "PartitionOutcome", "SessionAcknowledge",
           "SessionFetch", "SessionPartition", "SessionResponse", "ShareSessionCache", "ShareSessionView",
           "TopicIdPartition", "next_epoch"]

INITIAL_EPOCH = 0  # ShareFetch: open a session
FINAL_EPOCH = -1  # ShareFetch and ShareAcknowledge: close it
_MAX_EPOCH = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]  # topic id, partition index


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (ShareRequestMetadata.nextEpoch): final stays final, 2**31-1 wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


class FetchKind(enum.Enum):
    """Which of Kafka's share fetch contexts a request got."""

    NEW = "new"  # ShareSessionContext, not subsequent: the session was opened by this request
    SUBSEQUENT = "subsequent"  # ShareSessionContext on an existing session
    FINAL = "final"  # FinalContext: fetches nothing, the session is closed


@dataclass(frozen=True)
class SessionPartition:
    topic_id: uuid.UUID
    partition: int
    topic_name: str | None  # None: metadata did not know the topic id; answer UNKNOWN_TOPIC_ID

    @property
    def key(self) -> TopicIdPartition:
        return (self.topic_id, self.partition)


@dataclass(frozen=True)
class ClosedSession:
    """A session that ended. Its member's acquired records on ``partitions`` are to be released (after the
    acknowledgements of the request that closed it, if a request did)."""

    group_id: str
    member_id: str
    partitions: tuple[TopicIdPartition, ...]
    last_in_group: bool  # no session of the group is left on this broker (see the module's docstring)


@dataclass
class _Partition:
    topic_name: str | None
    needs_answer: bool  # Kafka's requiresUpdateInResponse: carry it in the next answer even without records


@dataclass
class _Session:
    group_id: str
    member_id: str
    connection_id: str
    epoch: int
    partitions: dict[TopicIdPartition, _Partition]  # in the session's order

    def held(self) -> tuple[SessionPartition, ...]:
        return tuple(SessionPartition(topic_id, index, cached.topic_name)
                     for (topic_id, index), cached in self.partitions.items())

    def closed(self, last_in_group: bool) -> ClosedSession:
        return ClosedSession(self.group_id, self.member_id, tuple(self.partitions), last_in_group)

    def view(self) -> ShareSessionView:
        return ShareSessionView(self.group_id, self.member_id, self.connection_id, self.epoch, self.held())


@dataclass(frozen=True)
class SessionFetch:
    """The session's answer to one ShareFetch. With an error, the request is answered with that top-level error
    and nothing else. Otherwise ``held`` are the session's partitions, in its order, after this request (for a
    final request: those it held when it closed, and ``closed`` says so): what the request fetches, unless it
    is final."""

    error_code: int
    error_message: str | None = None
    kind: FetchKind | None = None
    request_epoch: int = INITIAL_EPOCH
    held: tuple[SessionPartition, ...] = ()
    added: tuple[TopicIdPartition, ...] = ()
    removed: tuple[TopicIdPartition, ...] = ()
    closed: ClosedSession | None = None
    _session: _Session | None = field(default=None, repr=False, compare=False)

    @property
    def partitions(self) -> tuple[TopicIdPartition, ...]:
        return tuple(partition.key for partition in self.held)

    @property
    def final(self) -> bool:
        return self.kind is FetchKind.FINAL

    @property
    def full(self) -> bool:
        """The answer carries every partition (Kafka's opening and final contexts)."""
        return self.kind in (FetchKind.NEW, FetchKind.FINAL)

    @property
    def to_fetch(self) -> tuple[SessionPartition, ...]:
        if self.final:
            return ()
        return tuple(partition for partition in self.held if partition.topic_name is not None)

    @property
    def unknown_topic(self) -> tuple[SessionPartition, ...]:
        """Partitions to answer UNKNOWN_TOPIC_ID (Kafka's erroneous partitions of the context)."""
        if self.final:
            return ()
        return tuple(partition for partition in self.held if partition.topic_name is None)


@dataclass(frozen=True)
class SessionAcknowledge:
    """The session's answer to one ShareAcknowledge: a top-level error, or NONE and, for a final request, the
    session it closed."""

    error_code: int
    error_message: str | None = None
    closed: ClosedSession | None = None

    @property
    def final(self) -> bool:
        return self.closed is not None

    @property
    def partitions(self) -> tuple[TopicIdPartition, ...]:
        """For a final request, the partitions whose records the member still holds are to be released."""
        return self.closed.partitions if self.closed is not None else ()


@dataclass(frozen=True)
class PartitionOutcome:
    """What a share fetch found for one partition, as its answer would say it."""

    topic_id: uuid.UUID
    partition: int
    has_records: bool
    error_code: int = ErrorCode.NONE

    @property
    def key(self) -> TopicIdPartition:
        return (self.topic_id, self.partition)


@dataclass(frozen=True)
class SessionResponse:
    error_code: int
    partitions: tuple[TopicIdPartition, ...] = ()  # the partitions the answer carries, in the given order


@dataclass(frozen=True)
class ShareSessionView:
    group_id: str
    member_id: str
    connection_id: str
    epoch: int  # the epoch the session's next request must carry
    partitions: tuple[SessionPartition, ...]


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:  # group.share.max.share.sessions
        if max_sessions < 1:
            raise ValueError(f"group.share.max.share.sessions must be at least 1, not {max_sessions}")
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._sessions_per_group: dict[str, int] = {}

    # -- views ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def partition_count(self) -> int:
        """Partitions over all sessions (Kafka's SharePartitionsCount)."""
        return sum(len(session.partitions) for session in self._sessions.values())

    def group_session_count(self, group_id: str) -> int:
        return self._sessions_per_group.get(group_id, 0)

    def session(self, group_id: str, member_id: str) -> ShareSessionView | None:
        session = self._sessions.get((group_id, member_id))
        return session.view() if session is not None else None

    def sessions(self) -> list[ShareSessionView]:
        return [session.view() for session in self._sessions.values()]

    # -- requests ---------------------------------------------------------------------------

    def fetch(self, group_id: str, member_id: str, epoch: int, partitions: Sequence[TopicIdPartition],
              forgotten: Sequence[TopicIdPartition], has_acknowledgements: bool, connection_id: str, *,
              topic_names: Mapping[uuid.UUID, str] | None = None) -> SessionFetch:
        """A ShareFetch: ``partitions`` are those its topics name (with or without acknowledgements),
        ``forgotten`` its forgotten_topics_data, ``topic_names`` what metadata calls the topic ids."""
        names = topic_names or {}
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            session = self._sessions.get(key)
            if session is None:
                return SessionFetch(ErrorCode.SHARE_SESSION_NOT_FOUND, _not_found(group_id, member_id))
            held, closed = session.held(), self._remove(session)
            return SessionFetch(ErrorCode.NONE, None, FetchKind.FINAL, epoch, held, closed=closed, _session=session)
        if epoch == INITIAL_EPOCH:
            return self._open(group_id, member_id, partitions, has_acknowledgements, connection_id, names)
        session = self._sessions.get(key)
        if session is None:
            return SessionFetch(ErrorCode.SHARE_SESSION_NOT_FOUND, _not_found(group_id, member_id))
        if epoch != session.epoch:
            return SessionFetch(ErrorCode.INVALID_SHARE_SESSION_EPOCH, _wrong_epoch(session, epoch))
        added = _add(session.partitions, partitions, names, needs_answer=True)
        removed = [partition for partition in dict.fromkeys(forgotten)
                   if session.partitions.pop(partition, None) is not None]
        session.epoch = next_epoch(session.epoch)
        return SessionFetch(ErrorCode.NONE, None, FetchKind.SUBSEQUENT, epoch, session.held(), tuple(added),
                            tuple(removed), _session=session)

    def _open(self, group_id: str, member_id: str, partitions: Sequence[TopicIdPartition],
              has_acknowledgements: bool, connection_id: str, names: Mapping[uuid.UUID, str]) -> SessionFetch:
        if has_acknowledgements:
            return SessionFetch(ErrorCode.INVALID_REQUEST, "a share fetch that opens a session has nothing to "
                                                           "acknowledge")
        replaced = self._sessions.get((group_id, member_id))
        if replaced is not None:
            self._remove(replaced)
        if len(self._sessions) >= self.max_sessions:
            return SessionFetch(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                f"this broker holds {self.max_sessions} share sessions already "
                                f"(group.share.max.share.sessions)")
        session = _Session(group_id, member_id, connection_id, next_epoch(INITIAL_EPOCH), {})
        added = _add(session.partitions, partitions, names, needs_answer=False)
        self._sessions[(group_id, member_id)] = session
        self._sessions_per_group[group_id] = self._sessions_per_group.get(group_id, 0) + 1
        return SessionFetch(ErrorCode.NONE, None, FetchKind.NEW, INITIAL_EPOCH, session.held(), tuple(added),
                            _session=session)

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> SessionAcknowledge:
        """A ShareAcknowledge's session checks (its partitions need not be in the session)."""
        if epoch == INITIAL_EPOCH:
            return SessionAcknowledge(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                      "a share acknowledge cannot open a share session (epoch 0)")
        session = self._sessions.get((group_id, member_id))
        if session is None:
            return SessionAcknowledge(ErrorCode.SHARE_SESSION_NOT_FOUND, _not_found(group_id, member_id))
        if epoch == FINAL_EPOCH:
            return SessionAcknowledge(ErrorCode.NONE, closed=self._remove(session))
        if epoch != session.epoch:
            return SessionAcknowledge(ErrorCode.INVALID_SHARE_SESSION_EPOCH, _wrong_epoch(session, epoch))
        session.epoch = next_epoch(session.epoch)
        return SessionAcknowledge(ErrorCode.NONE)

    def response_partitions(self, fetch: SessionFetch, outcomes: Iterable[PartitionOutcome]) -> SessionResponse:
        """Which of ``outcomes`` (the fetched and the erroneous partitions of the request ``fetch`` answered)
        its response carries; for a later request of a session, the session remembers what it told."""
        outcomes = list(outcomes)
        session = fetch._session
        if fetch.error_code != ErrorCode.NONE:
            return SessionResponse(fetch.error_code)
        if fetch.kind is not FetchKind.SUBSEQUENT or session is None:
            return SessionResponse(ErrorCode.NONE, tuple(outcome.key for outcome in outcomes))
        if session.epoch != next_epoch(fetch.request_epoch):
            return SessionResponse(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        carried = []
        for outcome in outcomes:
            cached = session.partitions.get(outcome.key)
            failed = outcome.error_code != ErrorCode.NONE
            if cached is None:  # forgotten since (Kafka cannot meet this): only news is worth telling
                if outcome.has_records or failed:
                    carried.append(outcome.key)
                continue
            if not (outcome.has_records or failed or cached.needs_answer):
                continue
            cached.needs_answer = failed  # told now; an error is told again once it has gone
            carried.append(outcome.key)
            if outcome.has_records:  # the others' turn first next time
                session.partitions[outcome.key] = session.partitions.pop(outcome.key)
        return SessionResponse(ErrorCode.NONE, tuple(carried))

    # -- sessions ending otherwise ----------------------------------------------------------

    def connection_closed(self, connection_id: str) -> list[ClosedSession]:
        """The client connection closed: every session it opened that is still open ends."""
        return [self._remove(session) for session in list(self._sessions.values())
                if session.connection_id == connection_id]

    def _remove(self, session: _Session) -> ClosedSession:
        del self._sessions[(session.group_id, session.member_id)]
        remaining = self._sessions_per_group[session.group_id] - 1
        if remaining:
            self._sessions_per_group[session.group_id] = remaining
        else:
            del self._sessions_per_group[session.group_id]
        return session.closed(last_in_group=not remaining)


def _not_found(group_id: str, member_id: str) -> str:
    return f"no share session of member {member_id!r} of group {group_id!r} on this broker"


def _wrong_epoch(session: _Session, epoch: int) -> str:
    return f"the share session expects epoch {session.epoch}, not {epoch}"


def _add(held: dict[TopicIdPartition, _Partition], partitions: Sequence[TopicIdPartition],
         names: Mapping[uuid.UUID, str], *, needs_answer: bool) -> list[TopicIdPartition]:
    """Adds ``partitions`` not held yet to the end of ``held``; returns those added."""
    added = []
    for topic_id, index in partitions:
        name = names.get(topic_id)
        cached = held.get((topic_id, index))
        if cached is None:
            held[(topic_id, index)] = _Partition(name, needs_answer)
            added.append((topic_id, index))
        elif cached.topic_name is None:
            cached.topic_name = name
    return added
