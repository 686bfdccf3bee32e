"""Creating and deleting topics on a single node: checks, records, logs.

The rules and error codes are Kafka's (``Topic.validate``, CreateTopics and
DeleteTopics semantics); the change itself is a list of metadata records
committed to ``__cluster_metadata`` as one batch.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, fields

from kbroker.metadata import records
from kbroker.metadata.image import TOPIC_RESOURCE, MetadataImage, TopicImage
from kbroker.log.config import LogConfig
from kbroker.wire.errors import ErrorCode

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_NAME_LENGTH = 249
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"  # Kafka's segment size for tests (kbroker/config/topic_definitions.py)
_LOG_CONFIG_NAMES = {f.name.replace("_", "."): f for f in fields(LogConfig)}


class TopicError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def validate_topic_name(name: str) -> None:
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL_NAME.fullmatch(name):
        raise TopicError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass(frozen=True)
class TopicRequest:
    name: str
    num_partitions: int  # -1: the broker's num.partitions
    replication_factor: int  # -1: the broker's default.replication.factor
    assignments: dict[int, list[int]]
    configs: dict[str, str | None]


def plan_topic(image: MetadataImage, request: TopicRequest, *, default_partitions: int, default_replication: int,
               known_configs: set[str]) -> list:
    """The metadata records that create the topic, or TopicError saying why not."""
    validate_topic_name(request.name)
    if request.name in image.topics:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{request.name}' already exists.")
    broker_ids = {broker.node_id for broker in image.live_brokers}
    if request.assignments:
        if request.num_partitions != -1 or request.replication_factor != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments were set.")
        # Kafka's order: each partition's replicas in the request's order, the first setting the replication
        # factor the others must have, then whether the partitions are numbered 0, 1, ...
        replication = None
        for replicas in request.assignments.values():
            _check_manual_assignment(list(replicas), broker_ids, len(replicas) if replication is None else replication)
            replication = len(replicas)
        if sorted(request.assignments) != list(range(len(request.assignments))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence")
        assignments = dict(request.assignments)
    else:
        partitions = default_partitions if request.num_partitions == -1 else request.num_partitions
        replication = default_replication if request.replication_factor == -1 else request.replication_factor
        if partitions <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication <= 0:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        if replication > len(broker_ids):
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication} time(s): The target replication factor of "
                f"{replication} cannot be reached because only {len(broker_ids)} broker(s) are registered.",
            )
        assignments = dict(enumerate(assign_replicas(image.live_brokers, 0, partitions, replication)))
    check_topic_configs(request.configs, known_configs)

    topic_id = uuid.uuid4()
    plan: list = [records.TopicRecord(name=request.name, topic_id=topic_id)]
    for partition, replicas in sorted(assignments.items()):
        plan.append(
            records.PartitionRecord(
                partition_id=partition, topic_id=topic_id, replicas=replicas, isr=replicas,
                leader=replicas[0], leader_epoch=0, partition_epoch=0,
            )
        )
    for name, value in sorted(request.configs.items()):
        plan.append(records.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=request.name, name=name, value=value))
    return plan


def check_topic_configs(configs: dict[str, str | None], known_configs: set[str]) -> None:
    for name, value in configs.items():
        if name not in known_configs:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if value is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {name}")
    try:
        topic_log_config(LogConfig(), configs)
    except ValueError as error:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(error)) from None


def topic_log_config(base: LogConfig, configs: dict[str, str | None]) -> LogConfig:
    """The log settings of a topic: the broker's defaults overridden by the topic's configs."""
    applicable = {name: value for name, value in configs.items() if name in _LOG_CONFIG_NAMES and value is not None}
    if configs.get(INTERNAL_SEGMENT_BYTES) is not None:  # Kafka's segment size for tests wins
        applicable["segment.bytes"] = configs[INTERNAL_SEGMENT_BYTES]
    try:
        return LogConfig.from_properties(applicable, base)
    except ValueError as error:
        raise ValueError(f"Invalid value for topic config: {error}") from None


def removal_records(topic: TopicImage) -> list:
    return [records.RemoveTopicRecord(topic_id=topic.topic_id)]


def plan_partitions(image: MetadataImage, name: str, count: int, assignments: list[list[int]] | None) -> list:
    """The PartitionRecords that grow a topic to ``count`` partitions, or TopicError as Kafka's controller says."""
    topic = image.topics.get(name)
    if topic is None:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")
    current = len(topic.partitions)
    if count == current:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if count < current:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {name} currently has {current} partition(s); {count} would not be an increase.",
        )
    additional = count - current
    replication = len(topic.partitions[0].replicas)
    broker_ids = sorted(broker.node_id for broker in image.live_brokers)
    if assignments is not None:
        if len(assignments) != additional:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} additional partition(s), but only {len(assignments)} assignment(s) were specified.",
            )
        for replicas in assignments:
            _check_manual_assignment(replicas, set(broker_ids), replication)
    else:
        if replication > len(broker_ids):
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication} time(s): The target replication factor of "
                f"{replication} cannot be reached because only {len(broker_ids)} broker(s) are registered.",
            )
        assignments = assign_replicas(image.live_brokers, current, count - current, replication)
    return [
        records.PartitionRecord(
            partition_id=current + i, topic_id=topic.topic_id, replicas=replicas, isr=replicas,
            leader=replicas[0], leader_epoch=0, partition_epoch=0,
        )
        for i, replicas in enumerate(assignments)
    ]


def assign_replicas(brokers, first_partition: int, count: int, replication: int) -> list[list[int]]:
    """Replicas for partitions ``first_partition`` on, ``replication`` brokers each (there are enough).

    Rack-aware as Kafka's placement is (``broker.rack``): brokers are lined up alternating
    racks, each partition's first replica (its preferred leader) is the next in line, so
    leaderships spread evenly, and its followers are the brokers after it, taking one from
    every rack before any rack gets a second. Brokers without a rack count as one rack.
    """
    by_rack: dict[str | None, list[int]] = {}
    for broker in sorted(brokers, key=lambda b: b.node_id):
        by_rack.setdefault(broker.rack, []).append(broker.node_id)
    rack_of = {broker.node_id: broker.rack for broker in brokers}
    lined_up = []
    for turn in range(max(len(ids) for ids in by_rack.values())):
        lined_up += [ids[turn] for _, ids in sorted(by_rack.items(), key=lambda item: item[0] or "") if turn < len(ids)]
    assignments = []
    for partition in range(first_partition, first_partition + count):
        first = partition % len(lined_up)
        after = [lined_up[(first + k) % len(lined_up)] for k in range(1, len(lined_up))]
        replicas = [lined_up[first]]
        racks = {rack_of[lined_up[first]]}
        for broker_id in after:  # a new rack first ...
            if len(replicas) < replication and rack_of[broker_id] not in racks:
                replicas.append(broker_id)
                racks.add(rack_of[broker_id])
        for broker_id in after:  # ... then any broker not chosen yet
            if len(replicas) < replication and broker_id not in replicas:
                replicas.append(broker_id)
        assignments.append(replicas)
    return assignments


def _check_manual_assignment(replicas: list[int], broker_ids: set[int], replication: int) -> None:
    if not replicas:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(replicas):
        if broker_id not in broker_ids:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )
        if broker_id == previous:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if len(replicas) != replication:
        raise TopicError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
            f"not consistent with previous partitions, which have {replication} replica(s).",
        )
