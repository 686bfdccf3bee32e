"""A look inside a test broker without a client: what a topic holds, a group's state and committed offsets, the
transactions, the schemas, as plain Python values (dicts, lists, tuples, ints, strings, bytes) for a test's
assertions. Nothing of the broker's own objects is handed out, so a test can keep what it got.

Each function reads the broker's state in its trio thread (``RunningBroker.records`` and the others call it
there): the partitions' logs as Fetch reads them, the coordinators' state as their Describe answers show it.
"""

from __future__ import annotations

_READ_BYTES = 1 << 20  # one read of a partition's log; whole batches, at least one


def records(broker, topic: str, partition: int | None = None, from_offset: int = 0,
            max_records: int = 10_000) -> list[dict]:
    """The records of ``topic`` (one partition, or all of them in partition order) from ``from_offset`` (or the
    log start, if later) up to the last stable offset, as a read_committed consumer gets them: control records
    and aborted transactions' records left out. Each a dict of topic, partition, offset, timestamp, key,
    value, headers ([(name, value)]) and transactional (written in a committed transaction); at most
    ``max_records`` in all. KeyError for a topic or partition the broker does not have."""
    described = broker.image.topics.get(topic)
    if described is None:
        raise KeyError(f"no topic {topic!r} on this broker")
    count = len(described.partitions)
    if partition is not None and not 0 <= partition < count:
        raise KeyError(f"{topic!r} has {count} partition(s), not a partition {partition}")
    found: list[dict] = []
    for index in range(count) if partition is None else (partition,):
        if len(found) >= max_records:
            break
        found += _partition_records(broker.partition(topic, index), topic, index, from_offset, max_records - len(found))
    return found


def _partition_records(replica, topic: str, index: int, from_offset: int, limit: int) -> list[dict]:
    from kbroker.wire.records import LOG_APPEND_TIME, decode_records, iter_batches

    log, end = replica.log, replica.last_stable_offset
    offset = max(from_offset, log.log_start_offset)
    if offset >= end:
        return []
    aborted: dict[int, list[tuple[int, int]]] = {}  # producer id -> (first offset, marker offset) of each abort
    for txn in log.collect_aborted_transactions(offset, end):
        aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    found: list[dict] = []
    while offset < end and len(found) < limit:
        data = log.read_bytes(offset, _READ_BYTES, upper_bound=end)
        read_from = offset
        for position, header in iter_batches(data, allow_partial_tail=True):
            if header.is_control or _is_aborted(header, aborted):
                offset = header.next_offset
                continue
            _, batch = decode_records(data, position)
            for record in batch:
                record_offset = header.base_offset + record.offset_delta
                if record_offset < offset or record_offset >= end or len(found) >= limit:
                    continue
                found.append({
                    "topic": topic, "partition": index, "offset": record_offset,
                    "timestamp": header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME
                    else header.base_timestamp + record.timestamp_delta,
                    "key": record.key, "value": record.value, "headers": [tuple(pair) for pair in record.headers],
                    "transactional": header.is_transactional,
                })
            offset = header.next_offset
        if offset == read_from:  # nothing whole came back: nothing more to read
            break
    return found


def _is_aborted(header, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """A transactional batch of an aborted transaction (it lies between the transaction's first offset and
    its ABORT marker), as a read_committed consumer decides from the aborted transactions a fetch lists."""
    if not header.is_transactional:
        return False
    return any(first <= header.base_offset <= last for first, last in aborted.get(header.producer_id, ()))


def group(broker, group_id: str) -> dict:
    """A group as its coordinator holds it: ``{"group_id", "type": "classic" | "consumer" | "share", "state",
    "protocol" (the classic group's chosen assignor, or the server assignor), "members": [{"member_id",
    "client_id", "assignment": {topic: [partitions]}}], "committed": {(topic, partition): offset}}``. A group the
    coordinator does not know is ``"Dead"``, of type None, with no members (and the offsets it may still have)."""
    shell = broker.groups
    committed = committed_offsets(broker, group_id)
    found = shell.coordinator.groups.get(group_id) if shell.topic in broker.image.topics else None
    if found is None:
        return {"group_id": group_id, "type": None, "state": "Dead", "protocol": None, "members": [],
                "committed": committed}
    if found.kind == "classic":
        from kbroker.tools.groups import assigned_partitions

        described = found.describe()
        protocol = found.protocol_name or None
        members = [{"member_id": member.member_id, "client_id": member.client_id,
                    "assignment": _by_topic(assigned_partitions(member.member_assignment)
                                            if found.protocol_type == "consumer" else [])}
                   for member in described.members]
    else:  # "consumer" (KIP-848) or "share" (KIP-932)
        described = found.describe(shell.topics_view())
        protocol = described.assignor_name or None
        members = [{"member_id": member.member_id, "client_id": member.client_id,
                    "assignment": _by_topic([(topic.topic_name, partition)
                                             for topic in member.assignment.topic_partitions
                                             for partition in topic.partitions])}
                   for member in described.members]
    return {"group_id": group_id, "type": found.kind, "state": described.group_state, "protocol": protocol,
            "members": members, "committed": committed}


def _by_topic(pairs) -> dict[str, list[int]]:
    assignment: dict[str, list[int]] = {}
    for topic, partition in sorted(pairs):
        assignment.setdefault(topic, []).append(partition)
    return assignment


def committed_offsets(broker, group_id: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets by (topic, partition), as OffsetFetch shows them (durable ones)."""
    shell = broker.groups
    if shell.topic not in broker.image.topics:
        return {}
    offsets = shell.coordinator.offsets.of_group(group_id)
    return {key: offsets[key].offset for key in sorted(offsets)}


def transactions(broker) -> list[dict]:
    """Every transactional id the coordinator knows (open transactions and those ended, until their id
    expires), by id: ``{"transactional_id", "producer_id", "producer_epoch", "state" (Kafka's name: "Ongoing",
    "CompleteCommit", ...), "partitions": [(topic, partition)]}``."""
    shell = broker.transactions
    if shell.topic not in broker.image.topics:
        return []
    coordinator = shell.coordinator
    return [{"transactional_id": transactional_id, "producer_id": meta.producer_id,
             "producer_epoch": meta.producer_epoch, "state": meta.state.kafka_name,
             "partitions": sorted(meta.partitions)}
            for transactional_id, meta in sorted(coordinator.transactions.items())
            if coordinator.partition_of(transactional_id) in coordinator.loaded]


async def schemas(broker) -> dict[str, list[dict]]:
    """The schema registry's subjects and their versions, oldest first (soft-deleted ones left out):
    ``{subject: [{"version", "id", "schema_type", "schema"}]}``."""
    from kbroker.schemas.store import TOPIC

    if broker.schema_store is None and TOPIC not in broker.image.topics:
        return {}  # nothing registered: the store is not made (nor its libraries imported) for nothing
    registry = await broker.schemas().catch_up_if_held()
    return {subject: [{"version": entry.version, "id": entry.id, "schema_type": entry.schema_type,
                       "schema": entry.schema} for entry in registry.versions(subject)]
            for subject in registry.subject_names()}
