"""The ``kbroker`` command: a whole single-node cluster by default.

    kbroker [--config server.properties] [--override key=value ...]
    kbroker topics|groups|produce|consume|cluster ... [--bootstrap-server host:port]   (kbroker/tools/)
    kbroker mirror --source host:port --target host:port                              (kbroker/tools/mirror.py)
    kbroker test-broker [--override key=value ...]                          (kbroker/testing/test_broker.py)

Settings use Kafka's names; ``KBROKER_<NAME>`` environment variables (dots as
underscores) sit between the file and ``--override``. SIGINT and SIGTERM stop
the broker cleanly: listeners close, logs are flushed and checkpointed.
"""

from __future__ import annotations

import argparse
import errno
import gc
import logging
import os
import signal
import sys
import time

from kbroker import __version__
from kbroker.config import BrokerConfig, ConfigError
from kbroker.config.sources import Source
from kbroker.data_directories import DataDirectories
from kbroker.http import LISTENER as HTTP_LISTENER
from kbroker.listen import bind_listeners
from kbroker.schemas.service import LISTENER as REGISTRY_LISTENER, registry_address
from kbroker.log.descriptor_cache import DESCRIPTORS, describe_limits, raise_open_files_limit
from kbroker.event_log import configure as configure_logging
from kbroker.tools.mirror import __doc__ as mirror_description
from kbroker.tools.mirror import add_arguments as add_mirror_arguments
from kbroker.tools.arguments import (add_admin_commands, add_connection_options, connection_options_given,
                                     with_connection_defaults)

logger = logging.getLogger("kbroker")
USAGE = """kbroker [--config FILE] [--override KEY=VALUE ...] [--metrics-port PORT]
       kbroker COMMAND ... [--bootstrap-server HOST:PORT] [--command-config FILE]"""


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    _refuse_mixed_options(parser, arguments)
    if arguments.metrics_port is not None:
        arguments.override.append(f"metrics.port={arguments.metrics_port}")
    return arguments if arguments.command in (None, "mirror", "test-broker") else with_connection_defaults(arguments)


def build_parser() -> argparse.ArgumentParser:
    """The broker's own options, or one of the commands: admin commands (kbroker/tools/arguments.py)
    or the mirror. Only argument declarations are imported here: the broker starts as fast as before."""
    parser = argparse.ArgumentParser(
        prog="kbroker", usage=USAGE, description="A Kafka-wire-compatible broker. Without a command, start a broker "
        "(a whole single-node cluster by default); with one, run it against a running cluster "
        "(kbroker COMMAND --help).")
    broker = parser.add_argument_group("starting a broker")
    broker.add_argument("--config", metavar="FILE", help="a server.properties file")
    broker.add_argument("--override", metavar="KEY=VALUE", action="append", default=[], help="a setting (repeatable)")
    broker.add_argument("--metrics-port", metavar="PORT", type=int,
                        help="serve the web console, /metrics, /health and /ready on PORT (metrics.port)")
    parser.add_argument("--version", action="version", version=f"kbroker {__version__}")
    add_connection_options(parser)
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND", prog="kbroker")
    add_admin_commands(commands)
    add_mirror_arguments(commands.add_parser(
        "mirror", help="copy topics from one cluster to another, continuously (as MirrorMaker)",
        description=mirror_description, formatter_class=argparse.RawDescriptionHelpFormatter))
    _add_test_broker_arguments(commands)
    return parser


def _add_test_broker_arguments(commands) -> None:
    """``kbroker test-broker``, declared here: its module (kbroker/testing/test_broker.py) brings in the
    pytest plugin's package, which a plain ``kbroker`` must not import."""
    test_broker = commands.add_parser(
        "test-broker", help="a broker for tests in any language: a free port, one JSON line, a control API",
        description="Start a test broker on a free loopback port with its control API (docs/test-broker.md), print "
        'one line {"bootstrap": ..., "control": ..., "pid": ...} and serve until the parent process ends, '
        "SIGTERM or SIGINT.")
    test_broker.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                             dest="test_broker_overrides", help="a broker setting by Kafka's name (repeatable)")
    test_broker.add_argument("--exit-on-stdin-close", action="store_true",
                             help="also stop when standard input reaches its end")


def _refuse_mixed_options(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> None:
    """The broker's options with a command, or a command's options without one, are a mistake worth a
    line rather than silently ignored."""
    connection = connection_options_given(arguments)
    if arguments.command in (None, "mirror", "test-broker") and connection:
        parser.error(f"{' and '.join(connection)}: only for the admin commands, e.g. kbroker topics list "
                     "--bootstrap-server HOST:PORT (the mirror takes --source and --target)")
    broker_options = [option for option, value in (("--config", arguments.config), ("--override", arguments.override),
                                                   ("--metrics-port", arguments.metrics_port)) if value]
    if arguments.command is not None and broker_options:
        parser.error(f"{' and '.join(broker_options)}: only for starting a broker, not for kbroker {arguments.command}")


async def serve(server, started_at: float, data_dir: str, ready: list | None = None) -> None:
    """Run a broker or a controller until SIGINT or SIGTERM; a controller hands its leadership over first.
    ``ready`` gets True appended once it serves."""
    import trio

    from kbroker.collector import keep_full_collections_short

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            if ready is not None:
                ready.append(True)
            _collect_garbage_again()
            nursery.start_soon(keep_full_collections_short)
            elapsed_ms = (time.perf_counter() - started_at) * 1000
            logger.info("kbroker %s ready on %s in %.0f ms (data in %s)", __version__, ", ".join(server.addresses()),
                        elapsed_ms, data_dir)
            async for signum in signals:
                logger.info("stopping on %s", signal.Signals(signum).name)
                await server.shutdown()
                nursery.cancel_scope.cancel()
                break


def _collect_garbage_again() -> None:
    """Starting, the command imports some 350 modules and builds their classes with the collector off
    (main): collecting meanwhile would only walk objects that live as long as the process, some 15 ms of
    a start of 250. Once serving, what exists is frozen (the collector skips it from then on) and
    collection resumes, full collections kept short from then on (kbroker/collector.py)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


# "ready in N ms" counts from here, the command's first line of kbroker code: the interpreter's own
# start (some 20 ms) comes before. /proc's start ticks were tried and read up to 200 ms high on a VM.
_LOADED_AT = time.perf_counter()


def _raise_open_files_limit() -> None:
    """The command owns its process: the soft RLIMIT_NOFILE goes up to the hard limit (as Kafka's packages
    ask of their users), and the logs' descriptor cache is sized from it (kbroker/log/descriptor_cache.py)."""
    soft_before, soft, hard = raise_open_files_limit()
    DESCRIPTORS.fit_to_limit()
    if soft != soft_before:  # the Broker logs the limits it runs with (kbroker/broker.py)
        logger.info("open files limit raised from soft %d to %s", soft_before, describe_limits(soft, hard))


def main(argv: list[str] | None = None) -> int:
    started_at = _LOADED_AT
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    if arguments.command == "mirror":  # kbroker mirror: copy topics between clusters (kbroker/tools/mirror.py)
        from kbroker.tools import mirror

        return mirror.run(arguments)
    if arguments.command == "test-broker":  # kbroker test-broker: for tests in other languages (docs/test-broker.md)
        from kbroker.testing.test_broker import run

        return run(arguments.test_broker_overrides, arguments.exit_on_stdin_close)
    if arguments.command is not None:  # kbroker topics|groups|produce|consume|cluster (kbroker/tools/admin.py)
        from kbroker.tools import admin

        return admin.run(arguments)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    gc.disable()  # until the broker serves (_collect_garbage_again)
    from kbroker.wire.schema import code_cache

    code_cache.open_cache()  # the codecs the last run compiled, kept for this one (wire/schema/code_cache.py)
    try:
        return _start_broker(arguments, started_at)
    finally:
        gc.enable()
        code_cache.save_cache()


def _start_broker(arguments: argparse.Namespace, started_at: float) -> int:
    try:
        config = BrokerConfig.load(arguments.config, os.environ, arguments.override)
    except ConfigError as error:
        print(f"kbroker: {error}", file=sys.stderr)
        return 2
    configure_logging(config.get("logging.format"))
    for shown in config.ignored_settings():
        logger.warning("%s is accepted for Kafka's files, but kbroker does not act on it", shown)
    try:  # before anything reads or writes them; held until the process exits
        directories = DataDirectories.of_config(config)
    except ConfigError as error:
        print(f"kbroker: {error}", file=sys.stderr)
        return 2
    _raise_open_files_limit()  # before any log opens a file
    roles = set(config.process_roles)
    in_quorum = "controller" in roles and not config.is_embedded_quorum
    controllers = config.controller_listener_names
    endpoints = [*(config.controller_endpoints[:1] if in_quorum else ()),
                 *(e for e in config.listener_endpoints if e.listener_name not in controllers and "broker" in roles)]
    sockets = {}  # listener name -> its bound sockets
    for endpoint in endpoints:
        try:
            sockets[endpoint.listener_name] = tuple(bind_listeners(endpoint.host, endpoint.port))
        except OSError as error:
            print(f"kbroker: cannot listen on {endpoint.host or '*'}:{endpoint.port}: {error}", file=sys.stderr)
            return 1
    try:
        registry = _bind_schema_registry(config)
    except ConfigError as error:
        print(f"kbroker: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"kbroker: cannot listen on {error.filename} (schema.registry.listeners): {error.strerror}",
              file=sys.stderr)
        return 1
    if registry:
        sockets[REGISTRY_LISTENER] = registry
    try:
        http = _bind_http(config)
    except OSError as error:
        print(f"kbroker: cannot listen on {error.filename} (metrics.port): {error.strerror}", file=sys.stderr)
        return 1
    if http and "broker" in roles:
        sockets[HTTP_LISTENER] = http
    import trio  # the slow imports come after the ports are open (kbroker/listen.py says why)

    from kbroker.raft.store import CorruptStore

    try:  # a listener's TLS or SASL settings are read here
        quorum = None  # this process's member of the metadata quorum: a voter, an observer, or (a single node) made by the broker
        if in_quorum:
            from kbroker.controller.controller import Controller

            quorum = Controller(config, sockets=sockets[config.controller_endpoints[0].listener_name])
        elif not config.is_embedded_quorum:
            from kbroker.metadata.observer import QuorumObserver

            quorum = QuorumObserver(config)
        node = quorum  # what this process serves: its broker, or else its controller
        if "broker" in roles:
            from kbroker.broker import Broker, settings_from_config

            node = Broker(settings_from_config(config, sockets), config, quorum=quorum, directories=directories)
    except ConfigError as error:
        print(f"kbroker: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the machine refused: a full disk, no descriptors, unreadable files
        print(f"kbroker: cannot start: {machine_problem(error, config.get('log.dirs')[0])}", file=sys.stderr)
        return 1
    except CorruptStore as error:
        print(f"kbroker: cannot start: {error}", file=sys.stderr)
        return 1
    ready: list = []
    try:
        trio.run(serve, node, started_at, config.get("log.dirs")[0], ready)
    except BaseException as raised:
        error = _os_error_in(raised)
        if error is None or ready:  # a failure once serving keeps its traceback: it is a bug to see
            raise
        print(f"kbroker: cannot start: {machine_problem(error, config.get('log.dirs')[0])}", file=sys.stderr)
        return 1
    logger.info("stopped")
    return 0


def _bind_schema_registry(config: BrokerConfig) -> tuple:
    """The schema registry's listening sockets (none where it is off)."""
    address = registry_address(config)
    if address is None:
        return ()
    return _bind_as_told(config, "schema.registry.listeners", *address, "no schema registry",
                         "schema.registry.listeners sets another address, or turns it off when empty")


def _bind_http(config: BrokerConfig) -> tuple:
    """The console's, /metrics' and /ready's listening sockets (none where ``metrics.port`` is -1). A port
    set by the user listens on every interface; the default on the first listener's host (localhost
    unless told)."""
    port = config.get("metrics.port")
    if port < 0:
        return ()
    chosen = config.source("metrics.port").source is not Source.DEFAULT
    host = "0.0.0.0" if chosen else (config.listener_endpoints[0].host or "0.0.0.0")
    return _bind_as_told(config, "metrics.port", host, port, "no web console", "metrics.port sets another port")


def _bind_as_told(config: BrokerConfig, setting: str, host: str, port: int, without: str, advice: str) -> tuple:
    """Listening sockets on host:port for ``setting``. An address the user chose that is taken raises OSError
    naming it; the default address taken (by another broker) is given up with a warning, so that a
    newcomer's ``kbroker`` starts."""
    try:
        return tuple(bind_listeners(host, port))
    except OSError as error:
        shown = f"{host or '*'}:{port}"
        if config.source(setting).source is not Source.DEFAULT:
            raise OSError(error.errno, error.strerror, shown) from None
        logger.warning("%s: cannot listen on %s (%s); %s", without, shown, error.strerror, advice)
        return ()


_ADVICE = {errno.ENOSPC: "free some space there", errno.EDQUOT: "free some space there or raise the quota",
           errno.EMFILE: "raise the open files limit (ulimit -n)", errno.ENFILE: "the system is out of open files",
           errno.EACCES: "give this user access to it", errno.EROFS: "the file system is read-only",
           errno.EIO: "the disk reported an I/O error"}


def machine_problem(error: OSError, directory: str | None = None) -> str:
    """One line for an OSError the machine raised: what failed, on which path (else under which data
    ``directory``: a write names no file), and what to do."""
    where = f" ({error.filename})" if error.filename else f" (in {directory})" if directory else ""
    advice = _ADVICE.get(error.errno)
    return f"{error.strerror or error}{where}" + (f": {advice}" if advice else "")


def _os_error_in(raised: BaseException) -> OSError | None:
    """The OSError a failed start ended with, however deep in trio's exception groups; None if another."""
    if isinstance(raised, OSError):
        return raised
    if isinstance(raised, BaseExceptionGroup):
        found = [_os_error_in(inner) for inner in raised.exceptions]
        if found and all(error is not None for error in found):
            return found[0]
    return None


if __name__ == "__main__":
    raise SystemExit(main())
