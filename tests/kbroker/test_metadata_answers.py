"""Topics' Metadata answers encoded ahead (kbroker/metadata/answers.py): the bytes a client gets are the bytes
encoding the answer afresh gives, at every version, and a change to a topic or to the live brokers is seen
by the next request."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from kbroker.handlers import metadata
from kbroker.metadata.answers import EncodedTopics
from kbroker.metadata.image import BrokerEndpoint, PartitionState, TopicImage
from kbroker.wire.frame import decode_response, encode_response
from kbroker.wire.schema import API_BY_NAME
from tests.kbroker.in_memory_parts import HOST, PORT, THIS_NODE, MemoryNode, context, topic_led_here

pytestmark = pytest.mark.trio
METADATA = API_BY_NAME["Metadata"]
REQUEST = METADATA.request_class


def two_topics() -> MemoryNode:
    followed = PartitionState(1, leader=2, leader_epoch=4, replicas=(2, THIS_NODE, 3), isr=(2, THIS_NODE))
    events = topic_led_here("events", 3)
    events = dataclasses.replace(events, partitions=(*events.partitions[:1], followed, *events.partitions[2:]))
    node = MemoryNode(events, topic_led_here("audit", 2))
    node.image = dataclasses.replace(node.image, brokers=(*node.image.brokers, BrokerEndpoint(2, HOST, PORT + 1)))
    return node


async def answer_bytes(node: MemoryNode, version: int, names=None) -> bytes:
    topics = None if names is None else [REQUEST.MetadataRequestTopic(name=name) for name in names]
    if version == 0 and topics is None:
        topics = []
    response = await metadata.handle(node, context("Metadata", version), REQUEST(topics=topics))
    return bytes(encode_response(METADATA.key, version, 7, response))


def decoded(frame: bytes, version: int = 12):
    return decode_response(METADATA.key, version, frame[4:])[1]


def fresh_bytes(node: MemoryNode, version: int) -> bytes:
    """The answer built without anything kept: every topic's part encoded now, from the image."""
    image = node.image
    live = frozenset(b.node_id for b in image.live_brokers)
    response = METADATA.response_class(
        brokers=[METADATA.response_class.MetadataResponseBroker(node_id=b.node_id, host=h, port=p, rack=b.rack)
                 for b, h, p in image.live_addresses(None)],
        cluster_id=image.cluster_id, controller_id=image.controller_id,
        topics=[metadata._topic(topic, live) for topic in image.topics.values()])
    return bytes(encode_response(METADATA.key, version, 7, response))


@pytest.mark.parametrize("version", range(METADATA.min_version, METADATA.max_version + 1))
async def test_an_answer_kept_encoded_is_byte_for_byte_the_fresh_one(version):
    node = two_topics()
    first = await answer_bytes(node, version)
    assert first == fresh_bytes(node, version)
    assert await answer_bytes(node, version) == first  # the second from what was kept
    assert len(node.metadata_answers) == 2


async def test_a_changed_topic_is_encoded_again_and_the_unchanged_one_is_kept():
    node = two_topics()
    await answer_bytes(node, 12)
    audit_before = node.metadata_answers.get(node.image.topics, node.image.topics["audit"], 12,
                                             frozenset({THIS_NODE, 2}), lambda: pytest.fail("audit was not kept"))
    events = node.image.topics["events"]
    moved = dataclasses.replace(events.partitions[0], leader=2, leader_epoch=1)
    events = dataclasses.replace(events, partitions=(moved, *events.partitions[1:]))
    node.image = dataclasses.replace(node.image, topics={**node.image.topics, "events": events})
    answer = decoded(await answer_bytes(node, 12))
    leaders = {(t.name, p.partition_index): p.leader_id for t in answer.topics for p in t.partitions}
    assert leaders[("events", 0)] == 2
    assert await answer_bytes(node, 12) == fresh_bytes(node, 12)
    assert node.metadata_answers.get(node.image.topics, node.image.topics["audit"], 12, frozenset({THIS_NODE, 2}),
                                     lambda: pytest.fail("audit was not kept")) is audit_before


async def test_a_broker_gone_shows_its_replicas_offline_at_once():
    node = two_topics()
    await answer_bytes(node, 12)
    node.image = dataclasses.replace(node.image, brokers=node.image.brokers[:1])  # broker 2 is no longer live
    answer = decoded(await answer_bytes(node, 12))
    [followed] = [p for t in answer.topics if t.name == "events" for p in t.partitions if p.partition_index == 1]
    assert followed.offline_replicas == [2, 3]


async def test_a_deleted_topic_is_no_longer_kept():
    node = two_topics()
    await answer_bytes(node, 12)
    await answer_bytes(node, 9)
    assert len(node.metadata_answers) == 4
    node.image = dataclasses.replace(node.image, topics={"audit": node.image.topics["audit"]})
    await answer_bytes(node, 12, ["audit"])
    assert len(node.metadata_answers) == 2  # audit at 12 and 9; events' parts are gone with it


async def test_kept_answers_follow_the_topics_mapping_they_were_made_for():
    answers = EncodedTopics()
    topic = TopicImage("t", uuid.uuid4(), ())
    made = []
    encode = lambda: made.append(1) or METADATA.encode_response_part(12, metadata._topic(topic, frozenset()))  # noqa: E731
    topics = {"t": topic}
    first = answers.get(topics, topic, 12, frozenset({1}), encode)
    assert answers.get(topics, topic, 12, frozenset({1}), encode) is first and made == [1]
    answers.get({"t": topic}, topic, 12, frozenset({1}), encode)  # another mapping, the same topic: still kept
    assert made == [1]
    answers.get(topics, topic, 12, frozenset({1, 2}), encode)  # the live brokers changed
    assert made == [1, 1]
