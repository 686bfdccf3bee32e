"""The in-flight records of one share-partition: contiguous offset ranges, each a run of records in one state.

Kafka's SharePartition keeps an InFlightBatch per fetched batch and turns it into a per-offset map once
its records diverge. Here a range is split only where its records come to differ, and merged again with
a neighbour that has come to agree, so memory follows the number of distinct runs, never the number of
records. The ranges cover ``[start_offset, end_offset)`` without gap or overlap: every offset the
share-partition has met since its start offset is in exactly one range.

Pure data, no policy: :mod:`kbroker.share.partition` decides what the states become.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["InFlightRange", "InFlightRecords", "RecordState"]


class RecordState(enum.IntEnum):
    """A record's delivery state, with Kafka's ids (SharePartition.RecordState, and the DeliveryState of
    Read/WriteShareGroupState's state batches: 0 available, 2 acknowledged, 4 archived; 1 is never written)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def is_terminal(self) -> bool:
        """Delivery is over: the record is never delivered again."""
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass
class InFlightRange:
    first_offset: int
    last_offset: int  # inclusive, as Kafka's batches
    state: RecordState
    delivery_count: int
    member_id: str | None = None  # who holds the records: ACQUIRED only
    lock_deadline_ms: int | None = None  # when the acquisition lock runs out: ACQUIRED only
    write_id: int | None = None  # a state write on its way will change these (ACQUIRED) records

    @property
    def record_count(self) -> int:
        return self.last_offset - self.first_offset + 1

    def agrees_with(self, other: InFlightRange) -> bool:
        return (self.state, self.delivery_count, self.member_id, self.lock_deadline_ms, self.write_id) == (
            other.state, other.delivery_count, other.member_id, other.lock_deadline_ms, other.write_id)


def _first_offset(in_flight: InFlightRange) -> int:
    return in_flight.first_offset


class InFlightRecords:
    def __init__(self, start_offset: int) -> None:
        self._ranges: list[InFlightRange] = []
        self.start_offset = start_offset
        self.end_offset = start_offset  # the next offset never met: where new records begin

    def __iter__(self) -> Iterator[InFlightRange]:
        return iter(self._ranges)

    def __len__(self) -> int:
        return len(self._ranges)

    @property
    def record_count(self) -> int:
        return self.end_offset - self.start_offset

    def first(self) -> InFlightRange | None:
        return self._ranges[0] if self._ranges else None

    def overlapping(self, first_offset: int, last_offset: int) -> list[InFlightRange]:
        """The ranges holding an offset of ``[first_offset, last_offset]``, unsplit, in offset order."""
        first_offset, last_offset = max(first_offset, self.start_offset), min(last_offset, self.end_offset - 1)
        if first_offset > last_offset:
            return []
        return self._ranges[self._index_of(first_offset):self._index_of(last_offset) + 1]

    def extend(self, last_offset: int, state: RecordState, delivery_count: int, member_id: str | None = None,
               lock_deadline_ms: int | None = None) -> None:
        """Records ``end_offset`` to ``last_offset`` join, all in one state."""
        if last_offset < self.end_offset:
            raise ValueError(f"records up to {last_offset} cannot join at {self.end_offset}")
        first_offset = self.end_offset
        self._ranges.append(InFlightRange(first_offset, last_offset, state, delivery_count, member_id,
                                          lock_deadline_ms))
        self.end_offset = last_offset + 1
        self.coalesce(first_offset, last_offset)

    def isolate(self, first_offset: int, last_offset: int) -> list[InFlightRange]:
        """The ranges covering exactly ``[first_offset, last_offset]`` (inside the window), split where needed,
        for the caller to change; it calls :meth:`coalesce` afterwards."""
        if not self.start_offset <= first_offset <= last_offset < self.end_offset:
            raise ValueError(f"[{first_offset}, {last_offset}] is not inside [{self.start_offset}, {self.end_offset})")
        self._split_before(first_offset)
        self._split_before(last_offset + 1)
        return self._ranges[self._index_of(first_offset):self._index_of(last_offset) + 1]

    def coalesce(self, first_offset: int, last_offset: int) -> None:
        """Merges agreeing neighbours among the ranges touching ``[first_offset - 1, last_offset + 1]``."""
        if not self._ranges:
            return
        low = max(self._index_of(max(first_offset, self.start_offset)) - 1, 0)
        high = min(self._index_of(min(last_offset, self.end_offset - 1)) + 1, len(self._ranges) - 1)
        index = low
        while index < high:
            current, following = self._ranges[index], self._ranges[index + 1]
            if current.agrees_with(following):
                current.last_offset = following.last_offset
                del self._ranges[index + 1]
                high -= 1
            else:
                index += 1

    def drop_below(self, offset: int) -> list[InFlightRange]:
        """Forgets every record below ``offset``, which becomes the start offset (and the end offset too,
        when it lies past it); returns what was dropped."""
        if offset <= self.start_offset:
            return []
        if offset >= self.end_offset:
            dropped, self._ranges = self._ranges, []
            self.start_offset = self.end_offset = offset
            return dropped
        self._split_before(offset)
        index = self._index_of(offset)
        dropped, self._ranges = self._ranges[:index], self._ranges[index:]
        self.start_offset = offset
        return dropped

    def clear(self, offset: int) -> list[InFlightRange]:
        """Forgets every record: the window starts over, empty, at ``offset``."""
        dropped, self._ranges = self._ranges, []
        self.start_offset = self.end_offset = offset
        return dropped

    def _index_of(self, offset: int) -> int:
        return bisect.bisect_right(self._ranges, offset, key=_first_offset) - 1

    def _split_before(self, offset: int) -> None:
        """Makes ``offset`` the first offset of a range, if it lies inside the window."""
        if not self.start_offset < offset < self.end_offset:
            return
        index = self._index_of(offset)
        in_flight = self._ranges[index]
        if in_flight.first_offset == offset:
            return
        self._ranges[index:index + 1] = [dataclasses.replace(in_flight, last_offset=offset - 1),
                                         dataclasses.replace(in_flight, first_offset=offset)]
