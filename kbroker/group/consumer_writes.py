"""The KIP-848 groups' writes on their way, and how a group whose write failed is put back (DESIGN.md rule 11).

A consumer group changes only by replaying its own records (kbroker/group/consumer.py), so the state its
log holds is a replay too. Here, per group: a copy fed with the group's records once they are durable, and
the records still on their way, in append order. When a write fails, the group takes the state of that copy
with the writes still on their way replayed on top of it: what a coordinator loading the log would build,
as Kafka's coordinator reverts its timeline to the snapshot before the failed batch. Timers are not records:
the members still there keep theirs, and a member that is back gets a new session.

Pure, like the group core: the shell tells each write's fate through the Persist's callbacks.
"""

from __future__ import annotations

from kbroker.effects import Persist
from kbroker.group.consumer import ConsumerGroup


class ConsumerGroupWrites:
    def __init__(self) -> None:
        self._durable: dict[str, ConsumerGroup] = {}  # group id -> as its durable records leave it
        self._unwritten: dict[str, list[list]] = {}  # group id -> the records of each write on its way

    def loaded(self, group: ConsumerGroup, now_ms: int) -> None:
        """``group`` was built from durable records (a load): that is its durable state."""
        self._durable[group.group_id] = _copy_of(group, now_ms)

    def forget(self, group_id: str) -> None:
        """The group is deleted, turned classic, or no longer coordinated here."""
        self._durable.pop(group_id, None)
        self._unwritten.pop(group_id, None)

    def persist(self, group: ConsumerGroup, written: tuple) -> Persist:
        """The Persist of records the group has just applied: kept in the durable copy once durable,
        and undone if they fail."""
        group_id, write = group.group_id, list(written)
        self._unwritten.setdefault(group_id, []).append(write)

        def durable(now_ms: int) -> list:
            if self._take(group_id, write):
                copy = self._durable.get(group_id) or _fresh(group, now_ms)
                for key, value in write:
                    copy.replay(key, value)
                self._durable[group_id] = copy
            return []

        def failed(error_code: int, now_ms: int) -> list:
            if self._take(group_id, write):
                durable_state = self._durable.get(group_id)
                rebuilt = _copy_of(durable_state, now_ms) if durable_state is not None else _fresh(group, now_ms)
                for pending in self._unwritten.get(group_id, ()):
                    for key, value in pending:
                        rebuilt.replay(key, value)
                group.restore(rebuilt, now_ms)
            return []

        return Persist(written, on_durable=durable, on_failure=failed)

    def _take(self, group_id: str, write: list) -> bool:
        writes = self._unwritten.get(group_id, [])
        for position, candidate in enumerate(writes):
            if candidate is write:
                del writes[position]
                if not writes:
                    del self._unwritten[group_id]
                return True
        return False  # forgotten meanwhile


def _fresh(group: ConsumerGroup, now_ms: int) -> ConsumerGroup:
    """The group as no record has it: nothing durable yet."""
    return ConsumerGroup(group.group_id, group.config, now_ms, group.new_member_id)


def _copy_of(group: ConsumerGroup, now_ms: int) -> ConsumerGroup:
    """A group equal to ``group`` in all its records determine, built by replaying them."""
    copy = _fresh(group, now_ms)
    for key, value in group.records():
        copy.replay(key, value)
    return copy
