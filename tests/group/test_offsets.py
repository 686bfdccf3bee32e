"""The offset store's pure helpers."""

from __future__ import annotations

import uuid

from kbroker.group.offsets import unknown_partitions
from kbroker.metadata.image import PartitionState, TopicImage


def topic(name: str, count: int) -> TopicImage:
    return TopicImage(name, uuid.uuid4(), tuple(PartitionState(index, 1, 0, (1,), (1,)) for index in range(count)))


def test_unknown_partitions_are_those_of_missing_topics_and_past_a_topics_count():
    topics = {"two": topic("two", 2)}
    wanted = [("two", 0), ("two", 1), ("two", 2), ("two", -1), ("missing", 0)]
    assert unknown_partitions(topics, wanted) == {("two", 2), ("two", -1), ("missing", 0)}
    assert unknown_partitions(topics, []) == set()
