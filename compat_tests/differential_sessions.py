"""Scripted sessions for the differential suite (compat_tests/test_differential.py): the core APIs.

Every module ``compat_tests/differential_sessions*.py`` holds a ``SESSIONS`` list; the suite runs them all.

Each session is a function of one ``testkit.differential.Side``; it runs once against kbroker and once
against Apache Kafka, and must send both the same requests. Names are the session's own, so that the
shared reference Kafka never holds a topic a session did not make. ``wait_*`` helpers send requests that
are not recorded: how many tries a broker needs to be ready is not compared.
"""

from __future__ import annotations

import struct
import time
import uuid

from kbroker.handlers import HANDLERS
from kbroker.wire.frame import encode_request
from kbroker.wire.records import Record, build_batch
from kbroker.wire.schema import API_BY_NAME
from testkit.differential import Side

READY_TIMEOUT_S = 30


def request(api_name: str, **fields):
    return API_BY_NAME[api_name].request_class(**fields)


def versions(api_name: str) -> list[int]:
    """The versions kbroker serves (those it does not, Kafka's newer ones, are ApiVersions' findings)."""
    handler = HANDLERS[API_BY_NAME[api_name].key]
    return [version for version in range(handler.min_version, handler.max_version + 1) if handler.supports(version)]


def create_topics(side: Side, version: int, *topics, validate_only: bool = False, record: bool = True):
    """``topics``: (name, partitions, replication factor[, {config: value}])."""
    creatable = API_BY_NAME["CreateTopics"].request_class.CreatableTopic
    wanted = [creatable(name=name, num_partitions=partitions, replication_factor=replication, configs=[
        creatable.CreatableTopicConfig(name=key, value=value) for key, value in (configs[0] if configs else {}).items()])
        for name, partitions, replication, *configs in topics]
    return side.call("CreateTopics", version, request("CreateTopics", topics=wanted, timeout_ms=30000,
                                                      validate_only=validate_only), record=record)


def metadata(side: Side, version: int, topics: list[str] | None, auto_create: bool = False, record: bool = True):
    wanted = None if topics is None else [
        API_BY_NAME["Metadata"].request_class.MetadataRequestTopic(name=name) for name in topics]
    return side.call("Metadata", version, request("Metadata", topics=wanted, allow_auto_topic_creation=auto_create),
                     record=record)


def wait_led(side: Side, *topics: str) -> None:
    """Until every partition of ``topics`` has a leader (unrecorded Metadata requests)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = metadata(side, 12, list(topics), record=False)
        if all(topic.error_code == 0 and topic.partitions and all(p.leader_id >= 0 for p in topic.partitions)
               for topic in answer.topics):
            return
        time.sleep(0.05)
    raise AssertionError(f"{side.name}: {topics} not led within {READY_TIMEOUT_S} s")


def produce(side: Side, version: int, topic: str, partition: int, batch: bytes, acks: int = -1, **fields):
    """From v13 the topic is named by its id (KIP-516), asked of the side first (an unknown topic's is
    ``UNKNOWN_TOPIC_ID``, made up)."""
    data = API_BY_NAME["Produce"].request_class.TopicProduceData
    named = {"name": topic} if version < 13 else {"topic_id": topic_id(side, topic)}
    return side.call("Produce", version, request("Produce", acks=acks, timeout_ms=30000, topic_data=[
        data(**named, partition_data=[data.PartitionProduceData(index=partition, records=batch)])], **fields))


UNKNOWN_TOPIC_ID = uuid.UUID("5eed0000-0000-4000-8000-00000000d1ff")


def topic_id(side: Side, topic: str) -> uuid.UUID:
    """The side's id of ``topic`` (an unrecorded Metadata request), or UNKNOWN_TOPIC_ID."""
    [found] = metadata(side, 12, [topic], record=False).topics
    return found.topic_id if found.error_code == 0 else UNKNOWN_TOPIC_ID


def values(*items: bytes, **options) -> bytes:
    return build_batch([Record(offset_delta=i, key=b"k%d" % i, value=value) for i, value in enumerate(items)],
                       base_timestamp=1_700_000_000_000, **options)


# -- sessions ---------------------------------------------------------------------------------------------

def api_versions(side: Side) -> None:
    """Every version of ApiVersions: both brokers' ranges, key by key (a version past the highest is
    answered UNSUPPORTED_VERSION with the ranges, in v0)."""
    for version in versions("ApiVersions"):
        side.call("ApiVersions", version, request("ApiVersions", client_software_name="differential",
                                                  client_software_version="1.0"))
    # v5 (KIP-1242): the cluster and node the client means to reach, this one's or another's, or one of them
    cluster = side.call("DescribeCluster", 1, request("DescribeCluster"), record=False)
    here = (cluster.cluster_id, cluster.brokers[0].broker_id)
    for cluster_id, node_id in (here, ("another-cluster", here[1]), (here[0], here[1] + 100), (here[0], -1),
                                (None, here[1])):
        side.call("ApiVersions", 5, request("ApiVersions", client_software_name="differential",
                                            client_software_version="1.0", cluster_id=cluster_id, node_id=node_id))


def metadata_session(side: Side) -> None:
    name = "diff-metadata"
    create_topics(side, 7, (name, 3, 1), record=False)
    wait_led(side, name)
    for version in versions("Metadata"):
        metadata(side, version, [name])
        # unknown: below v4 Metadata creates it (no allow_auto_topic_creation field), later versions do not
        metadata(side, version, [f"diff-metadata-unknown-v{version}"])
    metadata(side, 12, ["bad/name"])  # an invalid name


def create_topics_session(side: Side) -> None:
    for version in versions("CreateTopics"):
        name = f"diff-create-v{version}"
        create_topics(side, version, (name, 2, 1, {"cleanup.policy": "compact", "retention.ms": "3600000"}))
        create_topics(side, version, (name, 2, 1))  # TOPIC_ALREADY_EXISTS
        create_topics(side, version, (f"{name}-validate", 1, 1), validate_only=True)
        create_topics(side, version, (f"{name}-zero", 0, 1))  # INVALID_PARTITIONS
        create_topics(side, version, (f"{name}-rf", 1, 4))  # INVALID_REPLICATION_FACTOR: one broker
        create_topics(side, version, (f"{name}-config", 1, 1, {"no.such.config": "1"}))
        create_topics(side, version, (f"{name}-value", 1, 1, {"cleanup.policy": "sometimes"}))
        create_topics(side, version, ("bad/name", 1, 1))
        create_topics(side, version, (f"{name}-dup", 1, 1), (f"{name}-dup", 1, 1))  # named twice


def delete_topics_session(side: Side) -> None:
    deletable = API_BY_NAME["DeleteTopics"].request_class
    for version in versions("DeleteTopics"):
        name = f"diff-delete-v{version}"
        create_topics(side, 7, (name, 1, 1), record=False)
        wait_led(side, name)
        if version >= 6:
            body = request("DeleteTopics", timeout_ms=30000, topics=[
                deletable.DeleteTopicState(name=name), deletable.DeleteTopicState(name=f"{name}-unknown")])
        else:
            body = request("DeleteTopics", timeout_ms=30000, topic_names=[name, f"{name}-unknown"])
        side.call("DeleteTopics", version, body)


def produce_fetch_list_offsets(side: Side) -> None:
    topic = "diff-produce"
    create_topics(side, 7, (topic, 2, 1), record=False)
    wait_led(side, topic)
    for version in versions("Produce"):
        produce(side, version, topic, 0, values(b"a", b"b", b"c"))
        produce(side, version, topic, 1, values(b"one"), acks=1)
        produce(side, version, topic, 7, values(b"no partition"))  # UNKNOWN_TOPIC_OR_PARTITION
        produce(side, version, "diff-produce-unknown", 0, values(b"x"))  # not auto-created by Produce
        corrupt = bytearray(values(b"corrupt"))
        corrupt[-1] ^= 0xFF
        produce(side, version, topic, 0, bytes(corrupt))  # CORRUPT_MESSAGE
        produce(side, version, topic, 0, values(b"a"), acks=2)  # INVALID_REQUIRED_ACKS
    fetch = API_BY_NAME["Fetch"].request_class
    topic_id = metadata(side, 12, [topic], record=False).topics[0].topic_id  # from v13 a fetch names the id
    for version in versions("Fetch"):
        for offset, isolation in ((0, 0), (2, 0), (0, 1), (10_000, 0)):  # start, middle, read_committed, beyond
            side.call("Fetch", version, request(
                "Fetch", replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation,
                session_id=0, session_epoch=-1, topics=[fetch.FetchTopic(
                    topic=topic, topic_id=topic_id, partitions=[fetch.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                        log_start_offset=-1, last_fetched_epoch=-1)])]))
        if version >= 13:  # an id no topic has
            side.call("Fetch", version, request(
                "Fetch", replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[fetch.FetchTopic(
                    topic_id=uuid.UUID(int=7), partitions=[fetch.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                        log_start_offset=-1, last_fetched_epoch=-1)])]))
    listing = API_BY_NAME["ListOffsets"].request_class.ListOffsetsTopic
    for version in versions("ListOffsets"):
        # earliest, latest, max, earliest local, latest tiered, earliest pending upload, unknown ones, by time
        for timestamp in (-2, -1, -3, -4, -5, -6, -7, -100, 1_700_000_000_000, 1_800_000_000_000):
            side.call("ListOffsets", version, request("ListOffsets", replica_id=-1, isolation_level=0, topics=[
                listing(name=topic, partitions=[listing.ListOffsetsPartition(partition_index=0, timestamp=timestamp,
                                                                             current_leader_epoch=-1)])]))


SESSIONS = [api_versions, metadata_session, create_topics_session, delete_topics_session, produce_fetch_list_offsets]


def with_version(frame: bytes, version: int) -> bytes:
    """``frame`` with its header's api_version replaced (a version no codec of ours encodes)."""
    return frame[:6] + struct.pack(">h", version) + frame[8:]


def protocol_edges(side: Side) -> None:
    """What a broker does with requests it cannot serve: ApiVersions beyond its versions is answered
    UNSUPPORTED_VERSION in v0 with the ranges (KIP-511); another API beyond its versions, an unknown
    API key and a frame larger than socket.request.max.bytes close the connection."""
    ask = request("ApiVersions", client_software_name="differential", client_software_version="1.0")
    side.send_raw(with_version(encode_request(18, 3, 7, "differential", ask), 99), "ApiVersions", 0)
    side.send_raw(with_version(encode_request(3, 12, 8, "differential", request("Metadata", topics=[])), 99),
                  "Metadata", 12)
    side.send_raw(struct.pack(">ihhi", 10, 999, 0, 9) + b"\xff\xff", "Metadata", 12)  # no API 999
    side.send_raw(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 64, "Metadata", 12)  # 200 MiB announced
    side.call("ApiVersions", 3, ask)  # and the broker serves a new connection as before


SESSIONS.append(protocol_edges)
