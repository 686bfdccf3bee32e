"""The admin commands' arguments (``kbroker topics|groups|produce|consume|cluster``), declared apart
from the code that runs them (kbroker/tools/admin.py, console.py): ``kbroker --help`` and the
broker's own start build this parser without importing the client or the codec.

``--bootstrap-server`` and ``--command-config`` are declared on every level, so they may come before
or after the command (``kbroker --bootstrap-server X topics list``, ``kbroker topics list
--bootstrap-server X``), as Kafka's tools take their options in any order.
"""

from __future__ import annotations

import argparse

DEFAULT_BOOTSTRAP = "localhost:9092"
CONNECTION_OPTIONS = ("bootstrap_server", "command_config")


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """Declared without a default (SUPPRESS) on every level, so that a command's level does not
    overwrite what was given before the command; ``connection_options`` fills in the default."""
    group = parser.add_argument_group("connection (the admin commands)")
    group.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", default=argparse.SUPPRESS,
                       help=f"brokers to connect to first (default {DEFAULT_BOOTSTRAP})")
    group.add_argument("--command-config", metavar="FILE", default=argparse.SUPPRESS,
                       help="client properties as Kafka's tools take them: security.protocol, ssl.*, sasl.* "
                            "(see kbroker/config/client.py)")


def connection_options_given(arguments: argparse.Namespace) -> list[str]:
    return [f"--{name.replace('_', '-')}" for name in CONNECTION_OPTIONS if name in vars(arguments)]


def with_connection_defaults(arguments: argparse.Namespace) -> argparse.Namespace:
    values = vars(arguments)
    values.setdefault("bootstrap_server", DEFAULT_BOOTSTRAP)
    values.setdefault("command_config", None)
    return arguments


def add_admin_commands(commands) -> None:
    """``commands``: the subparsers of ``kbroker``; each command and action sets ``command`` and ``action``.
    No destination may share a name with the broker's options (``--config`` of a topic is ``topic_configs``):
    a command's value would stand for the broker's."""
    _add_topics(commands)
    _add_groups(commands)
    _add_produce(commands)
    _add_consume(commands)
    _add_cluster(commands)


def _command(parent, name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
    parser = parent.add_parser(name, help=summary, description=description or summary[0].upper() + summary[1:] + ".")
    add_connection_options(parser)
    return parser


def _actions(parser: argparse.ArgumentParser):
    return parser.add_subparsers(dest="action", required=True, title="actions", metavar="ACTION")


def _add_topics(commands) -> None:
    actions = _actions(_command(commands, "topics", "list, describe, create, alter and delete topics"))
    _command(actions, "list", "the topics' names").add_argument(
        "--internal", action="store_true", help="also the internal topics (__consumer_offsets, ...)")
    _command(actions, "describe", "partitions, leaders, replicas and overridden configs, as kafka-topics "
             "--describe prints them").add_argument("name", help="the topic")
    create = _command(actions, "create", "create a topic")
    create.add_argument("name", help="the topic")
    create.add_argument("--partitions", type=int, default=-1, help="how many (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", type=int, default=-1,
                        help="copies of each partition (default: the broker's default.replication.factor)")
    create.add_argument("--config", dest="topic_configs", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic setting, e.g. retention.ms=60000 (repeatable)")
    _command(actions, "delete", "delete a topic and its data").add_argument("name", help="the topic")
    alter = _command(actions, "alter", "add partitions or change settings of a topic")
    alter.add_argument("name", help="the topic")
    alter.add_argument("--partitions", type=int, help="the new partition count (only grows)")
    alter.add_argument("--config", dest="topic_configs", action="append", default=[], metavar="KEY=VALUE",
                       help="a topic setting to set (repeatable)")


def _add_groups(commands) -> None:
    actions = _actions(_command(commands, "groups", "list consumer and share groups, show their lag, reset their "
                                "offsets"))
    _command(actions, "list", "the groups' names, types and protocols, as kafka-groups --list prints them")
    _command(actions, "describe", "committed offsets, log-end offsets, lag and members, as "
             "kafka-consumer-groups --describe prints them (a share group's start offsets, lag and members, as "
             "kafka-share-groups --describe and --describe --members print them)").add_argument(
        "group", help="the group")
    reset = _command(actions, "reset-offsets", "move an inactive group's committed offsets (a share group's start "
                     "offsets) on a topic")
    reset.add_argument("group", help="the group (it must have no members)")
    reset.add_argument("--share", action="store_true",
                       help="the group is a share group: one that does not exist yet is made one, as "
                            "kafka-share-groups --reset-offsets makes it")
    reset.add_argument("--topic", required=True, help="the topic whose offsets move")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="to the start of each partition")
    target.add_argument("--to-latest", action="store_true", help="to the end of each partition")
    target.add_argument("--to-offset", type=int, help="to this offset in every partition")
    reset.add_argument("--execute", action="store_true", help="reset (without it: show what would be done)")


def _topic_command(commands, name: str, summary: str, description: str) -> argparse.ArgumentParser:
    """A command without actions (produce, consume), on one topic."""
    parser = _command(commands, name, summary, description)
    parser.set_defaults(action=None)
    parser.add_argument("topic", help="the topic")
    return parser


def _add_produce(commands) -> None:
    producing = _topic_command(commands, "produce", "send lines from stdin to a topic, one record each",
                               "Send lines from stdin to a topic, one record each, as kafka-console-producer does. "
                               "A topic that does not exist is created when the broker creates topics on first use.")
    producing.add_argument("--key-separator", metavar="TEXT",
                           help="each line is KEY<TEXT>VALUE; a line without TEXT is refused")
    producing.add_argument("--partition", type=int, help="send every record to this partition")
    producing.add_argument("--acks", default="all", choices=["all", "-1", "1", "0"],
                           help="acknowledgements to wait for (default all)")


def _add_consume(commands) -> None:
    consuming = _topic_command(commands, "consume", "print a topic's records to stdout, one per line",
                               "Print a topic's records to stdout, one per line, as kafka-console-consumer does.")
    consuming.add_argument("--from-beginning", action="store_true",
                           help="start at the oldest record (default: only new ones)")
    consuming.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    consuming.add_argument("--timeout-ms", type=int, default=5000, help="stop when nothing arrived for this long")
    consuming.add_argument("--print-key", action="store_true", help="print KEY<separator>VALUE")
    consuming.add_argument("--key-separator", default="\t", metavar="TEXT",
                           help="between key and value with --print-key (default a tab)")
    consuming.add_argument("--partition", type=int, help="read only this partition")


def _add_cluster(commands) -> None:
    actions = _actions(_command(commands, "cluster", "the cluster's brokers, controller and health"))
    _command(actions, "status", "brokers, the active controller, under-replicated and offline partitions, "
             "and the metadata quorum")
