"""What a coordinator core (groups, transactions) asks its shell to do; the shell
(kbroker/coordinator_runtime.py) handles a list of effects in order.

A request that cannot be answered at once (a JoinGroup waiting for the
rebalance, a follower's SyncGroup waiting for the leader) is identified by a
``waiter``: an opaque id the shell passes in with the request. Its answer may
come out of the same call, or out of a later call or ``tick``.

A core that changes state by a ``Persist`` keeps the change pending and
commits it in ``on_durable``, or drops it in ``on_failure`` (DESIGN.md rule 11;
Kafka's coordinators complete a transition, or revert it, when the append's
future completes). The shell calls one of the two for every ``Persist``, in
the order the records were appended to their partition, and carries out the
effects the call returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kbroker.wire.errors import ErrorCode


class CoordinatorError(Exception):
    """A coordinator refused a request as a whole: ``error_code`` is Kafka's for it."""

    def __init__(self, error_code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(error_code).name)
        self.error_code = error_code


@dataclass(frozen=True)
class Persist:
    """Append these ``(key, value)`` records (values ``None`` for tombstones) to the
    group's ``__consumer_offsets`` partition and wait until they are durable.
    ``producer`` ``(id, epoch)`` writes them as part of that producer's transaction
    (TxnOffsetCommit): they count only once its COMMIT marker follows."""

    records: tuple[tuple[object, object | None], ...]
    producer: tuple[int, int] | None = None
    # The records are durable: ``on_durable(now_ms)`` commits what they change and returns effects.
    on_durable: Callable[[int], list] | None = field(default=None, compare=False, repr=False)
    # They were not written, or not made durable (nor was a Persist before them in the same list):
    # ``on_failure(error_code, now_ms)`` reverts what they would change and returns effects.
    on_failure: Callable[[int, int], list] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Respond:
    """Answer the request waiting as ``waiter`` with ``response`` (a wire response value)."""

    waiter: int
    response: object
