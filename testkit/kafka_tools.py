"""Kafka's own command-line tools (Kafka 4.4.0's jars, the pom's ``tools`` profile), each run as the main
class its ``bin/kafka-*.sh`` script runs, in a JVM of its own:

    result = run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--list")
    assert result.returncode == 0 and "orders" in result.stdout.split()

The JVM starts as the reference Kafka's does (``QUICK_START_JVM_OPTIONS``: the tools' code runs no
differently, only sooner). The tools log through log4j2 with a configuration written once beside the
Maven cache: WARN and above to stderr (as Kafka's config/tools-log4j2.yaml), so that stdout holds only
what a tool prints for its user.

Where java or the jars cannot be had, :func:`run_tool` raises :class:`testkit.maven.Unavailable` with the
one line saying which.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

from testkit.maven import Unavailable, cache_dir, classpath_text
from testkit.reference_kafka import QUICK_START_JVM_OPTIONS

TOOLS_PROFILE = "tools"  # in testkit/jvm/pom.xml
# The script's name -> the class it runs (Kafka 4.4's bin/, every one through kafka-run-class.sh).
MAIN_CLASSES = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
}
HEAP_MB = 256  # kafka-run-class.sh's default heap for a tool
TIMEOUT_S = 60
LOG4J2_CONFIG = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Kafka's command-line tools run by testkit/kafka_tools.py: WARN and above to stderr, stdout left to
     what a tool prints for its user (as Kafka's config/tools-log4j2.yaml). -->
<Configuration status="WARN">
  <Appenders>
    <Console name="stderr" target="SYSTEM_ERR">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="WARN"><AppenderRef ref="stderr"/></Root>
  </Loggers>
</Configuration>
"""


class ToolResult(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def run_tool(name: str, *args: str, timeout_s: float = TIMEOUT_S, stdin: str | None = None,
             heap_mb: int = HEAP_MB) -> ToolResult:
    """Run the tool ``name`` (a bin/ script's name, ``kafka-topics``) with ``args``; its exit code, stdout
    and stderr once it ends. A tool still running after ``timeout_s`` is killed and raises
    ``subprocess.TimeoutExpired``."""
    command = tool_command(name, *args, heap_mb=heap_mb)
    result = subprocess.run(command, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=timeout_s)
    return ToolResult(result.returncode, result.stdout, result.stderr)


def check_available() -> None:
    """Raise :class:`Unavailable` (one line saying why) unless java and the tools' jars can be had; the
    first call may run Maven."""
    if shutil.which("java") is None:
        raise Unavailable("java not found on PATH (Kafka's tools need a JDK, 17 or newer)")
    classpath_text(TOOLS_PROFILE)
    _log4j2_config()


def tool_command(name: str, *args: str, heap_mb: int = HEAP_MB) -> list[str]:
    """The command line that runs the tool ``name`` with ``args``, for a caller that starts it itself
    (a consumer that runs until it is stopped)."""
    main_class = MAIN_CLASSES.get(name)
    if main_class is None:
        raise ValueError(f"no Kafka tool named {name!r} here; known: {', '.join(sorted(MAIN_CLASSES))}")
    java = shutil.which("java")
    if java is None:
        raise Unavailable("java not found on PATH (Kafka's tools need a JDK, 17 or newer)")
    return [java, f"-Xmx{heap_mb}m", *QUICK_START_JVM_OPTIONS, f"-Dlog4j2.configurationFile={_log4j2_config()}",
            "-cp", classpath_text(TOOLS_PROFILE), main_class, *args]


def _log4j2_config() -> Path:
    """The logging configuration's file, written (atomically) when missing or different."""
    path = cache_dir() / "kafka-tools-log4j2.xml"
    try:
        if path.read_text() == LOG4J2_CONFIG:
            return path
    except OSError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(prefix=path.name, suffix=".part", dir=path.parent)
        with os.fdopen(handle, "w") as output:
            output.write(LOG4J2_CONFIG)
        os.replace(partial, path)
    except OSError as error:
        raise Unavailable(f"cannot write the tools' logging configuration: {error}") from None
    return path
