"""``kbroker topics|cluster``, and the dispatch of every admin command (``groups``: kbroker/tools/groups.py,
``produce|consume``: kbroker/tools/console.py): Kafka's shell tools for people without them.

Each command speaks the Kafka protocol (kbroker/tools/client.py) to any broker named by
``--bootstrap-server``, connecting as ``--command-config FILE`` says (TLS, SASL; see
kbroker/config/client.py). Where Kafka's tools print something a person would compare
(``kafka-topics --describe``, ``kafka-consumer-groups --describe``), the layout is theirs; errors are
one line on stderr (Kafka's error names, or Kafka's sentences) with exit code 1.
"""

from __future__ import annotations

import base64
import sys

from kbroker.config import ConfigError
from kbroker.tools import console, groups
from kbroker.tools.client import Client, CommandFailed, KafkaError, check_error_code
from kbroker.config.client import ClientSecurity
from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

_REQUEST = {name: API_BY_NAME[name].request_class for name in (
    "CreateTopics", "DeleteTopics", "CreatePartitions", "IncrementalAlterConfigs", "DescribeConfigs",
    "DescribeTopicPartitions", "DescribeQuorum")}
TOPIC_RESOURCE = 2  # DescribeConfigs' resource type of a topic
DEFAULT_CONFIG = 5  # a config's source when nothing sets it: kafka-topics leaves those out of Configs


def table(rows: list[list], out=sys.stdout) -> None:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))] if rows else []
    for row in rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip(), file=out)


def kafka_uuid(value) -> str:
    """A topic id as Kafka prints it (Uuid.toString): URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


# -- topics ---------------------------------------------------------------------------------------------------

def topics_list(client: Client, args) -> None:
    for topic in sorted(client.metadata().topics, key=lambda t: t.name):
        if not topic.name.startswith("__") or args.internal:
            print(topic.name)


def topics_describe(client: Client, args) -> None:
    """As kafka-topics --describe: the topic's line, then one line per partition, tab-separated."""
    topic, partitions, with_elr = _described_topic(client, args.name)
    replication = len(partitions[0].replica_nodes) if partitions else 0
    topic_id = f"\tTopicId: {kafka_uuid(topic.topic_id)}" if topic.topic_id != ZERO_UUID else ""
    print(f"Topic: {topic.name}{topic_id}\tPartitionCount: {len(partitions)}\tReplicationFactor: {replication}"
          f"\tConfigs: {','.join(_set_configs(client, args.name))}")
    for partition in partitions:
        print(_partition_line(topic.name, partition, with_elr))


def _described_topic(client: Client, name: str) -> tuple[object, list, bool]:
    """The topic, its partitions in order, and whether they carry eligible leader replicas: Kafka's
    admin client asks DescribeTopicPartitions (which has them) where the broker knows it, else Metadata."""
    with_elr = "DescribeTopicPartitions" in client.bootstrap.versions
    [topic] = [_topic_partitions(client, name)] if with_elr else client.metadata([name]).topics
    if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise CommandFailed(f"Topic '{name}' does not exist as expected")
    check_error_code(topic.error_code, name)
    return topic, sorted(topic.partitions, key=lambda p: p.partition_index), with_elr


def _topic_partitions(client: Client, name: str):
    """DescribeTopicPartitions, following its cursor until every partition is in."""
    Request = _REQUEST["DescribeTopicPartitions"]
    topic, cursor = None, None
    while True:
        answer = client.bootstrap.call("DescribeTopicPartitions", topics=[Request.TopicRequest(name=name)],
                                       response_partition_limit=2000, cursor=cursor)
        [page] = answer.topics
        if topic is None:
            topic = page
        else:
            topic.partitions.extend(page.partitions)
        if answer.next_cursor is None or page.error_code:
            return topic
        cursor = Request.Cursor(topic_name=answer.next_cursor.topic_name,
                                partition_index=answer.next_cursor.partition_index)


def _set_configs(client: Client, name: str) -> list[str]:
    """KEY=VALUE of each config not at its default (set on the topic, or on the broker), as kafka-topics shows."""
    Resource = _REQUEST["DescribeConfigs"].DescribeConfigsResource
    [result] = client.bootstrap.call("DescribeConfigs", resources=[Resource(
        resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=None)]).results
    check_error_code(result.error_code, name, result.error_message)
    return [f"{config.name}={config.value}" for config in result.configs if config.config_source != DEFAULT_CONFIG]


def _partition_line(topic: str, partition, with_elr: bool) -> str:
    def nodes(ids) -> str:
        return ",".join(map(str, ids))

    leader = partition.leader_id if partition.leader_id >= 0 else "none"
    line = (f"\tTopic: {topic}\tPartition: {partition.partition_index}\tLeader: {leader}"
            f"\tReplicas: {nodes(partition.replica_nodes)}\tIsr: {nodes(partition.isr_nodes)}")
    if not with_elr or partition.eligible_leader_replicas is None:
        return line + "\tElr: N/A\tLastKnownElr: N/A"
    elr, last_known_elr = partition.eligible_leader_replicas, partition.last_known_elr or []
    return line + f"\tElr: {nodes(elr)}\tLastKnownElr: {nodes(last_known_elr)}"


def topics_create(client: Client, args) -> None:
    create_topic(client, args.name, args.partitions, args.replication_factor, _pairs(args.topic_configs))
    print(f"Created topic {args.name}.")


def create_topic(client: Client, name: str, partitions: int, replication_factor: int,
                 configs: list[tuple[str, str]]) -> None:
    """CreateTopics for one topic (-1: the broker's default count or factor); its error raised."""
    Creatable = _REQUEST["CreateTopics"].CreatableTopic
    answer = client.bootstrap.call("CreateTopics", topics=[Creatable(
        name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
        configs=[Creatable.CreatableTopicConfig(name=k, value=v) for k, v in configs])], timeout_ms=30_000)
    check_error_code(answer.topics[0].error_code, name, answer.topics[0].error_message)


def topics_delete(client: Client, args) -> None:
    delete_topic(client, args.name)
    print(f"Deleted topic {args.name}.")


def delete_topic(client: Client, name: str) -> None:
    answer = client.bootstrap.call("DeleteTopics", topic_names=[name], topics=[], timeout_ms=30_000)
    check_error_code(answer.responses[0].error_code, name, answer.responses[0].error_message)


def topics_alter(client: Client, args) -> None:
    if args.partitions is not None:
        Topic = _REQUEST["CreatePartitions"].CreatePartitionsTopic
        answer = client.bootstrap.call("CreatePartitions", topics=[Topic(name=args.name, count=args.partitions,
                                                                         assignments=None)],
                                       timeout_ms=30_000, validate_only=False)
        check_error_code(answer.results[0].error_code, args.name, answer.results[0].error_message)
        print(f"Topic {args.name} now has {args.partitions} partitions.")
    if args.topic_configs:
        alter_topic_configs(client, args.name, _pairs(args.topic_configs))
        print(f"Altered configs of {args.name}: {', '.join(args.topic_configs)}.")


def alter_topic_configs(client: Client, name: str, changes: list[tuple[str, str | None]]) -> None:
    """IncrementalAlterConfigs on a topic: each config set, or deleted (back to its default) where None."""
    Resource = _REQUEST["IncrementalAlterConfigs"].AlterConfigsResource
    answer = client.bootstrap.call("IncrementalAlterConfigs", resources=[Resource(
        resource_type=2, resource_name=name, configs=[
            Resource.AlterableConfig(name=k, config_operation=0 if v is not None else 1, value=v)
            for k, v in changes])], validate_only=False)
    check_error_code(answer.responses[0].error_code, name, answer.responses[0].error_message)


# -- cluster --------------------------------------------------------------------------------------------------

def cluster_status(client: Client, args) -> None:
    """The active controller is the metadata quorum's leader (kafka-metadata-quorum's LeaderId): a
    broker's Metadata names itself or any broker there, since clients cannot reach a KRaft controller."""
    metadata = client.metadata()
    quorum, quorum_error = describe_quorum(client)
    controller = quorum.leader_id if quorum is not None else metadata.controller_id
    live = {b.node_id for b in metadata.brokers}
    print(f"Cluster: {metadata.cluster_id}  Controller: {controller}")
    table([["BROKER", "HOST", "PORT", "RACK"]] + [[b.node_id, b.host, b.port, b.rack or ""]
                                                  for b in sorted(metadata.brokers, key=lambda b: b.node_id)])
    partitions = [(t.name, p) for t in metadata.topics for p in t.partitions]
    under = [f"{name}-{p.partition_index}" for name, p in partitions if len(p.isr_nodes) < len(p.replica_nodes)]
    offline = [f"{name}-{p.partition_index}" for name, p in partitions if p.leader_id not in live]
    print(f"Topics: {len(metadata.topics)}  Partitions: {len(partitions)}  "
          f"Under-replicated: {len(under)}  Offline: {len(offline)}")
    for name in under:
        print(f"under-replicated: {name}")
    for name in offline:
        print(f"offline: {name}")
    if quorum is not None:
        _print_quorum(quorum)
    elif quorum_error is not None:
        print(f"Quorum: not available ({quorum_error})")


def describe_quorum(client: Client) -> tuple[object | None, KafkaError | None]:
    """The metadata quorum as the active controller sees it (a broker asks it for us); (None, None)
    from a broker that does not speak DescribeQuorum."""
    if "DescribeQuorum" not in client.bootstrap.versions:
        return None, None
    Request = _REQUEST["DescribeQuorum"]
    answer = client.bootstrap.call("DescribeQuorum", topics=[Request.TopicData(
        topic_name="__cluster_metadata", partitions=[Request.TopicData.PartitionData(partition_index=0)])])
    if answer.error_code or not answer.topics:
        return None, KafkaError(answer.error_code or ErrorCode.UNKNOWN_SERVER_ERROR)
    quorum = answer.topics[0].partitions[0]
    return (None, KafkaError(quorum.error_code)) if quorum.error_code else (quorum, None)


def _print_quorum(quorum) -> None:
    print(f"Quorum: leader {quorum.leader_id}  epoch {quorum.leader_epoch}  high watermark {quorum.high_watermark}")
    table([["VOTER", "LOG-END-OFFSET", "LAG"]] + [
        [voter.replica_id, voter.log_end_offset, max(0, quorum.high_watermark - voter.log_end_offset)]
        for voter in sorted(quorum.current_voters, key=lambda v: v.replica_id)])


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items or ():
        key, equals, value = item.partition("=")
        if not equals:
            raise SystemExit(f"kbroker: expected KEY=VALUE, got {item!r}")
        pairs.append((key, value))
    return pairs


RUNNERS = {
    ("topics", "list"): topics_list, ("topics", "describe"): topics_describe, ("topics", "create"): topics_create,
    ("topics", "delete"): topics_delete, ("topics", "alter"): topics_alter,
    ("groups", "list"): groups.list_groups, ("groups", "describe"): groups.describe,
    ("groups", "reset-offsets"): groups.reset_offsets,
    ("produce", None): console.produce, ("consume", None): console.consume,
    ("cluster", "status"): cluster_status,
}


def run(arguments) -> int:
    """Run the command ``arguments`` names (kbroker/tools/arguments.py); its exit code."""
    try:
        return _run(arguments)
    except KeyboardInterrupt:  # Ctrl-C outside produce and consume (which end on it with their totals)
        return 130
    except BrokenPipeError:  # our reader went away (| head): nothing to say, nobody to say it to
        console.flush_stdout()
        return 0


def _run(arguments) -> int:
    try:
        security = ClientSecurity.from_properties(arguments.command_config)
    except ConfigError as error:
        print(f"kbroker: {error}", file=sys.stderr)
        return 2
    try:
        client = Client(arguments.bootstrap_server, security=security)
    except (OSError, KafkaError) as error:
        print(f"kbroker: {error}", file=sys.stderr)
        return 1
    try:
        RUNNERS[(arguments.command, arguments.action)](client, arguments)
        sys.stdout.flush()  # here, where a closed pipe is caught, rather than at exit
    except BrokenPipeError:  # our stdout (the client turns a broker's into ConnectionError): see run
        raise
    except (KafkaError, CommandFailed, OSError) as error:
        sys.stdout.flush()
        print(f"kbroker: {error}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0
