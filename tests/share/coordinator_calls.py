"""What the share coordinator tests share: the requests, a log of what a shell made durable, and the
calls a shell would make."""

from __future__ import annotations

import uuid

import pytest

from kbroker.effects import Persist, Respond
from kbroker.share.coordinator import ShareCoordinatorConfig, ShareCoordinatorShard
from kbroker.share.persisted import StateBatch
from kbroker.share.state_records import decode_key, decode_value, encode_key, encode_value
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
GROUP = "group"
T1, T2, MISSING = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=99)
TOPICS = {T1: 4, T2: 2}  # topic id -> partition count, as the metadata says
ONE_PARTITION = ShareCoordinatorConfig(state_topic_partition_count=1, updates_per_snapshot=3)
NOW_MS = 1_700_000_000_000

Initialize = API_BY_NAME["InitializeShareGroupState"].request_class
Read = API_BY_NAME["ReadShareGroupState"].request_class
Write = API_BY_NAME["WriteShareGroupState"].request_class
Delete = API_BY_NAME["DeleteShareGroupState"].request_class
Summary = API_BY_NAME["ReadShareGroupStateSummary"].request_class


# -- requests, and what a shell would do with the effects --------------------------------------------------


def initialize(*partitions, group=GROUP):
    """``partitions``: (topic, partition, state epoch, start offset) each."""
    return Initialize(group_id=group, topics=[
        Initialize.InitializeStateData(topic_id=topic, partitions=[Initialize.InitializeStateData.PartitionData(
            partition=partition, state_epoch=state_epoch, start_offset=start_offset)])
        for topic, partition, state_epoch, start_offset in partitions])


def write(start_offset, *batches, topic=T1, partition=0, state_epoch=1, leader_epoch=0, delivery_complete_count=-1,
          group=GROUP):
    """``batches``: (first, last, state, count) each."""
    data = Write.WriteStateData.PartitionData
    return Write(group_id=group, topics=[Write.WriteStateData(topic_id=topic, partitions=[data(
        partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
        delivery_complete_count=delivery_complete_count,
        state_batches=[data.StateBatch(first_offset=first, last_offset=last, delivery_state=state,
                                       delivery_count=count) for first, last, state, count in batches])])])


def read(*partitions, group=GROUP):
    """``partitions``: (topic, partition, leader epoch) each."""
    return Read(group_id=group, topics=[Read.ReadStateData(topic_id=topic, partitions=[
        Read.ReadStateData.PartitionData(partition=partition, leader_epoch=leader_epoch)])
        for topic, partition, leader_epoch in partitions])


def summary(*partitions, group=GROUP):
    """``partitions``: (topic, partition) each."""
    return Summary(group_id=group, topics=[Summary.ReadStateSummaryData(topic_id=topic, partitions=[
        Summary.ReadStateSummaryData.PartitionData(partition=partition, leader_epoch=0)])
        for topic, partition in partitions])


def delete(*partitions, group=GROUP):
    return Delete(group_id=group, topics=[Delete.DeleteStateData(topic_id=topic, partitions=[
        Delete.DeleteStateData.PartitionData(partition=partition)]) for topic, partition in partitions])


class Log:
    """The records a shell made durable, in order, written and read back as bytes."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def durable(self, effects: list, now_ms: int = NOW_MS) -> None:
        for effect in effects:
            if isinstance(effect, Persist):
                self.records += [(encode_key(key), None if value is None else encode_value(value))
                                 for key, value in effect.records]
                assert effect.on_durable(now_ms) == []

    def replayed(self, config: ShareCoordinatorConfig = ONE_PARTITION, partition: int = 0) -> ShareCoordinatorShard:
        shard = ShareCoordinatorShard(partition, config, TOPICS.get)
        for key_bytes, value_bytes in self.records:
            key = decode_key(key_bytes)
            shard.replay(key, decode_value(key, value_bytes))
        return shard


def persist_of(effects: list) -> Persist | None:
    persists = [effect for effect in effects if isinstance(effect, Persist)]
    assert len(persists) <= 1
    return persists[0] if persists else None


def failed(effects: list, error_code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> None:
    assert persist_of(effects).on_failure(error_code, NOW_MS) == []


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def shard() -> ShareCoordinatorShard:
    return ShareCoordinatorShard(0, ONE_PARTITION, TOPICS.get)


def done(shard: ShareCoordinatorShard, log: Log, call: str, request, now_ms: int = NOW_MS):
    """The call, its records made durable; the response."""
    response, effects = getattr(shard, call)(7, request, now_ms)
    assert effects[-1] == Respond(7, response)
    log.durable(effects, now_ms)
    return response


def only(response):
    """The single partition result of a response."""
    [topic] = response.results
    [result] = topic.partitions
    return result


def batches(state) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.persisted.state_batches]


def initialized(shard, log, start_offset=0, state_epoch=1, topic=T1, partition=0):
    assert only(done(shard, log, "initialize_state", initialize((topic, partition, state_epoch, start_offset)))
                ).error_code == ErrorCode.NONE
