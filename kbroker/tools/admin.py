"""``kbroker topics|groups|produce|consume|cluster``: Kafka's shell tools for people without them.

Each command speaks the Kafka protocol (kbroker/tools/client.py) to any broker named by
``--bootstrap-server``, connecting as ``--command-config FILE`` says (TLS, SASL; see
kbroker/tools/client_config.py), and prints plain aligned text; errors are Kafka's names on stderr
with exit code 1.
"""

from __future__ import annotations

import sys

from kbroker.config import ConfigError
from kbroker.tools import console, groups
from kbroker.tools.client import Client, CommandFailed, KafkaError, check_error_code
from kbroker.tools.client_config import ClientSecurity
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

_REQUEST = {name: API_BY_NAME[name].request_class for name in (
    "CreateTopics", "DeleteTopics", "CreatePartitions", "IncrementalAlterConfigs", "DescribeConfigs")}


def table(rows: list[list], out=sys.stdout) -> None:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))] if rows else []
    for row in rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip(), file=out)


# -- topics ---------------------------------------------------------------------------------------------------

def topics_list(client: Client, args) -> None:
    for topic in sorted(client.metadata().topics, key=lambda t: t.name):
        if not topic.name.startswith("__") or args.internal:
            print(topic.name)


def topics_describe(client: Client, args) -> None:
    [topic] = client.metadata([args.name]).topics
    check_error_code(topic.error_code, args.name)
    print(f"Topic: {topic.name}  PartitionCount: {len(topic.partitions)}  "
          f"ReplicationFactor: {len(topic.partitions[0].replica_nodes) if topic.partitions else 0}")
    configs = client.bootstrap.call("DescribeConfigs", resources=[_REQUEST["DescribeConfigs"].DescribeConfigsResource(
        resource_type=2, resource_name=args.name, configuration_keys=None)]).results[0]
    overrides = [f"{c.name}={c.value}" for c in configs.configs if c.config_source == 1]
    print(f"Configs: {','.join(overrides)}")
    table([["Partition", "Leader", "Replicas", "Isr"]] + [
        [p.partition_index, p.leader_id, ",".join(map(str, p.replica_nodes)), ",".join(map(str, p.isr_nodes))]
        for p in sorted(topic.partitions, key=lambda p: p.partition_index)])


def topics_create(client: Client, args) -> None:
    Creatable = _REQUEST["CreateTopics"].CreatableTopic
    configs = [Creatable.CreatableTopicConfig(name=k, value=v) for k, v in _pairs(args.topic_configs)]
    answer = client.bootstrap.call("CreateTopics", topics=[Creatable(
        name=args.name, num_partitions=args.partitions, replication_factor=args.replication_factor,
        assignments=[], configs=configs)], timeout_ms=30_000)
    check_error_code(answer.topics[0].error_code, args.name, answer.topics[0].error_message)
    print(f"Created topic {args.name}.")


def topics_delete(client: Client, args) -> None:
    answer = client.bootstrap.call("DeleteTopics", topic_names=[args.name], topics=[], timeout_ms=30_000)
    check_error_code(answer.responses[0].error_code, args.name)
    print(f"Deleted topic {args.name}.")


def topics_alter(client: Client, args) -> None:
    if args.partitions is not None:
        Topic = _REQUEST["CreatePartitions"].CreatePartitionsTopic
        answer = client.bootstrap.call("CreatePartitions", topics=[Topic(name=args.name, count=args.partitions,
                                                                         assignments=None)],
                                       timeout_ms=30_000, validate_only=False)
        check_error_code(answer.results[0].error_code, args.name, answer.results[0].error_message)
        print(f"Topic {args.name} now has {args.partitions} partitions.")
    if args.topic_configs:
        Resource = _REQUEST["IncrementalAlterConfigs"].AlterConfigsResource
        changes = [Resource.AlterableConfig(name=k, config_operation=0, value=v)
                   for k, v in _pairs(args.topic_configs)]
        answer = client.bootstrap.call("IncrementalAlterConfigs", resources=[Resource(
            resource_type=2, resource_name=args.name, configs=changes)], validate_only=False)
        check_error_code(answer.responses[0].error_code, args.name, answer.responses[0].error_message)
        print(f"Altered configs of {args.name}: {', '.join(args.topic_configs)}.")


# -- cluster --------------------------------------------------------------------------------------------------

def cluster_status(client: Client, args) -> None:
    metadata = client.metadata()
    live = {b.node_id for b in metadata.brokers}
    print(f"Cluster: {metadata.cluster_id}  Controller: {metadata.controller_id}")
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
    if "DescribeQuorum" in client.bootstrap.versions:
        _quorum_status(client)


def _quorum_status(client: Client) -> None:
    """The metadata quorum as the active controller sees it (a broker asks it for us)."""
    Request = API_BY_NAME["DescribeQuorum"].request_class
    answer = client.bootstrap.call("DescribeQuorum", topics=[Request.TopicData(
        topic_name="__cluster_metadata", partitions=[Request.TopicData.PartitionData(partition_index=0)])])
    if answer.error_code or not answer.topics:
        print(f"Quorum: not available ({KafkaError(answer.error_code or ErrorCode.UNKNOWN_SERVER_ERROR)})")
        return
    quorum = answer.topics[0].partitions[0]
    if quorum.error_code:
        print(f"Quorum: not available ({KafkaError(quorum.error_code)})")
        return
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
