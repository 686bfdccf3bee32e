"""A Jepsen-style checker for a transactional workload's history.

The history is what the workload's producers meant and learned, and what its
read_committed consumers saw:

- ``Transaction``: the unique values one producer wrote in one transaction and
  what the producer learned of its end: ``committed``, ``aborted``, or
  ``unknown`` (the commit call itself failed, e.g. across a broker restart);
- ``polls``: per consumer, the records it was given, in the order it was given
  them, as ``(topic, partition, offset, value)``;
- ``final``: one last read_committed read of every partition from the start.

``check`` proves, or lists what breaks:

- no aborted read: no value of an aborted transaction was read, ever;
- no lost write: every value of a committed transaction is in the final read;
- atomicity: of every transaction (unknown ones too) the final read has all
  values or none, and so does every consumer that read past its end;
- no duplicate: no value twice in the final read, nor twice in one consumer's stream;
- monotonic polls: each consumer's offsets in each partition strictly increase;
- one value per offset: whatever any consumer read at an offset is what the final read has there;
- nothing read that no producer wrote.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

OUTCOMES = ("committed", "aborted", "unknown")


@dataclass
class Transaction:
    producer: str
    number: int
    values: list[str] = field(default_factory=list)
    outcome: str = "unknown"


class HistoryViolation(AssertionError):
    def __init__(self, anomalies: list[str]) -> None:
        shown = "\n  ".join(anomalies[:20])
        more = f"\n  ... and {len(anomalies) - 20} more" if len(anomalies) > 20 else ""
        super().__init__(f"{len(anomalies)} anomalies:\n  {shown}{more}")
        self.anomalies = anomalies


def check(transactions: list[Transaction], polls: dict[str, list[tuple[str, int, int, str]]],
          final: list[tuple[str, int, int, str]]) -> dict[str, int]:
    """The counts checked; raises HistoryViolation listing every anomaly found."""
    anomalies: list[str] = []
    owner: dict[str, Transaction] = {}
    for transaction in transactions:
        if transaction.outcome not in OUTCOMES:
            raise ValueError(f"outcome {transaction.outcome!r}")
        for value in transaction.values:
            if value in owner:
                raise ValueError(f"value {value!r} written twice by the workload")
            owner[value] = transaction

    final_values = Counter(value for *_, value in final)
    at_offset = {(topic, partition, offset): value for topic, partition, offset, value in final}
    for value, count in final_values.items():
        if count > 1:
            anomalies.append(f"duplicate: {value!r} {count} times in the final read")
    for topic, partition, offset, value in final:
        _check_read(value, owner, anomalies, f"final read at {topic}-{partition}@{offset}")

    resolved = Counter()
    for transaction in transactions:
        present = sum(1 for value in transaction.values if value in final_values)
        if transaction.outcome == "committed" and present < len(transaction.values):
            anomalies.append(f"lost write: {len(transaction.values) - present} of {len(transaction.values)} values of "
                             f"committed {transaction.producer}#{transaction.number} missing from the final read")
        elif 0 < present < len(transaction.values):
            anomalies.append(f"torn transaction: {present} of {len(transaction.values)} values of "
                             f"{transaction.outcome} {transaction.producer}#{transaction.number} in the final read")
        if transaction.outcome == "unknown":
            resolved["unknown, found committed" if present else "unknown, found aborted"] += 1

    poll_count = 0
    for consumer, records in polls.items():
        last: dict[tuple[str, int], int] = {}
        seen = Counter()
        for topic, partition, offset, value in records:
            poll_count += 1
            _check_read(value, owner, anomalies, f"{consumer} at {topic}-{partition}@{offset}")
            previous = last.get((topic, partition))
            if previous is not None and offset <= previous:
                anomalies.append(f"non-monotonic: {consumer} read {topic}-{partition}@{offset} after @{previous}")
            last[(topic, partition)] = offset
            seen[value] += 1
            if seen[value] == 2:
                anomalies.append(f"duplicate: {consumer} read {value!r} twice")
            expected = at_offset.get((topic, partition, offset))
            if expected is not None and expected != value:
                anomalies.append(f"two values at {topic}-{partition}@{offset}: {consumer} read {value!r}, "
                                 f"the final read has {expected!r}")
        anomalies += _torn_for_reader(consumer, records, owner, last, at_offset)

    if anomalies:
        raise HistoryViolation(anomalies)
    outcomes = Counter(transaction.outcome for transaction in transactions)
    return {"transactions committed": outcomes["committed"], "transactions aborted": outcomes["aborted"],
            "transactions unknown": outcomes["unknown"], **resolved,
            "values written": len(owner), "records in the final read": len(final), "records polled": poll_count}


def _check_read(value: str, owner: dict[str, Transaction], anomalies: list[str], where: str) -> None:
    transaction = owner.get(value)
    if transaction is None:
        anomalies.append(f"phantom: {where} is {value!r}, which no producer wrote")
    elif transaction.outcome == "aborted":
        anomalies.append(f"aborted read: {where} is {value!r} of aborted {transaction.producer}#{transaction.number}")


def _torn_for_reader(consumer: str, records, owner, last_offsets, at_offset) -> list[str]:
    """A transaction a reader saw part of, although it read past every one of its records."""
    read = {value for *_, value in records}
    where = {value: (topic, partition, offset) for (topic, partition, offset), value in at_offset.items()}
    anomalies = []
    for transaction in {id(owner[value]): owner[value] for value in read if value in owner}.values():
        missing = [value for value in transaction.values if value not in read and value in where
                   and where[value][2] <= last_offsets.get(where[value][:2], -1)]
        if missing:
            anomalies.append(f"torn read: {consumer} read part of {transaction.producer}#{transaction.number} and "
                             f"passed {len(missing)} of its other records")
    return anomalies
