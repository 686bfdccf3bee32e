"""Where Spark's Kafka connector jars come from, in the order the README gives.

1. ``SPARK_KAFKA_JARS``: a folder of jars (the connector, its token provider,
   kafka-clients and commons-pool2), handed to Spark as ``spark.jars``. Each is
   known by what it holds, not by its file name, so jars built from Spark's
   source (``spark-sql-kafka-0-10_2.13-4.3.0-SNAPSHOT.jar``) or renamed ones do.
   When set, it is the only place looked at: nothing is tried over the network.
2. ``spark.jars.packages`` with the coordinates matching the installed
   pyspark, when a Maven repository answers (Spark's Ivy then downloads them
   into its own cache).
3. Neither: every spark_it test skips with one reason saying so.

The connector must be of pyspark's release: 4.0 jars fail on 4.3. A snapshot
of that release (4.3.0-SNAPSHOT for pyspark 4.3.0) is taken as it.
"""

from __future__ import annotations

import glob
import os
import re
import socket
import zipfile
from dataclasses import dataclass

MAVEN_HOST = "repo1.maven.org"
_PROBE_TIMEOUT_S = 3


@dataclass(frozen=True)
class Connector:
    """Spark settings that put the connector on the classpath, and where it came from."""

    settings: dict[str, str]
    origin: str


class ConnectorMissing(Exception):
    """No connector jars to be had; the message (one line) says what was tried and what is missing."""


@dataclass(frozen=True)
class JarKind:
    """One of the jars the connector needs, known by a class it holds (and, for a data source, registers)."""

    name: str
    class_name: str
    service: str | None = None  # a ServiceLoader interface whose META-INF/services file must name class_name
    spark_artifact: str | None = None  # Spark's artifactId, less the Scala suffix: its version must be pyspark's

    @property
    def class_entry(self) -> str:
        return self.class_name.replace(".", "/") + ".class"

    @property
    def evidence(self) -> str:
        """What a jar of this kind holds, as a message says it."""
        if self.service:
            return f"META-INF/services/{self.service} naming {self.class_name}"
        return self.class_entry


CONNECTOR = JarKind(
    "the Kafka SQL connector",
    "org.apache.spark.sql.kafka010.KafkaSourceProvider",  # its shortName() is "kafka": format("kafka")
    service="org.apache.spark.sql.sources.DataSourceRegister",
    spark_artifact="spark-sql-kafka-0-10",
)
TOKEN_PROVIDER = JarKind(
    "the Kafka token provider", "org.apache.spark.kafka010.KafkaTokenUtil", spark_artifact="spark-token-provider-kafka-0-10")
KAFKA_CLIENTS = JarKind("kafka-clients", "org.apache.kafka.clients.consumer.KafkaConsumer")
COMMONS_POOL2 = JarKind("commons-pool2", "org.apache.commons.pool2.impl.GenericKeyedObjectPool")
JAR_KINDS = (CONNECTOR, TOKEN_PROVIDER, KAFKA_CLIENTS, COMMONS_POOL2)
_ALL_KINDS = ", ".join(kind.name for kind in JAR_KINDS[:-1]) + f" and {JAR_KINDS[-1].name}"


@dataclass(frozen=True)
class Jar:
    """What a jar holds, as far as telling its kind and its version goes."""

    path: str
    entries: frozenset[str]
    services: dict[str, frozenset[str]]  # interface -> the provider classes its services file names
    spark_versions: dict[str, str]  # org.apache.spark artifactId -> version, from META-INF/maven/.../pom.properties
    manifest_version: str | None  # Implementation-Version of META-INF/MANIFEST.MF

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def is_a(self, kind: JarKind) -> bool:
        if kind.class_entry not in self.entries:
            return False
        return kind.service is None or kind.class_name in self.services.get(kind.service, ())

    def stated_version(self, kind: JarKind) -> str | None:
        """The version the jar gives for ``kind``: its Maven pom.properties, else its manifest, else None."""
        for artifact, version in self.spark_versions.items():
            if artifact == kind.spark_artifact or artifact.startswith(f"{kind.spark_artifact}_"):
                return version
        return self.manifest_version


def read_jar(path: str) -> Jar:
    """Raises OSError or zipfile.BadZipFile when ``path`` is not a readable zip file."""
    with zipfile.ZipFile(path) as archive:
        entries = frozenset(archive.namelist())

        def text(entry: str) -> str:
            return archive.read(entry).decode("utf-8", "replace") if entry in entries else ""

        services = {entry.removeprefix("META-INF/services/"): _service_providers(text(entry))
                    for entry in entries if entry.startswith("META-INF/services/") and not entry.endswith("/")}
        spark_versions = {}
        for entry in entries:
            if entry.startswith("META-INF/maven/org.apache.spark/") and entry.endswith("/pom.properties"):
                properties = _properties(text(entry))
                if "artifactId" in properties and "version" in properties:
                    spark_versions[properties["artifactId"]] = properties["version"]
        manifest = _manifest_attributes(text("META-INF/MANIFEST.MF"))
    return Jar(path, entries, services, spark_versions, manifest.get("Implementation-Version"))


def _service_providers(text: str) -> frozenset[str]:
    """The class names a META-INF/services file lists (ServiceLoader's format: one a line, # comments)."""
    return frozenset(line.split("#", 1)[0].strip() for line in text.splitlines()) - {""}


def _properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.lstrip().startswith(("#", "!")))
    return {key.strip(): value.strip() for key, value in pairs}


def _manifest_attributes(text: str) -> dict[str, str]:
    """The main section of a MANIFEST.MF (a line starting with a space continues the one before)."""
    attributes: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if not line:
            break  # the main section ends at the first blank line
        if line.startswith(" ") and name:
            attributes[name] += line[1:]
        elif ":" in line:
            name, value = line.split(":", 1)
            attributes[name] = value.strip()
    return attributes


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def coordinates(version: str) -> str:
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"


def same_release(stated: str, pyspark: str) -> bool:
    """Whether two versions name the same release: 4.3.0-SNAPSHOT, 4.3.0.dev0 and 4.3.0 do."""
    return _release(stated) == _release(pyspark)


def _release(version: str) -> str:
    numbers = re.match(r"\d+(?:\.\d+)*", version)
    return numbers.group() if numbers else version


def find_connector() -> Connector:
    version = pyspark_version()
    folder = os.environ.get("SPARK_KAFKA_JARS")
    if folder:
        return from_folder(folder, version)
    if _maven_reachable():
        return Connector({"spark.jars.packages": coordinates(version)}, f"spark.jars.packages={coordinates(version)}")
    raise ConnectorMissing(
        f"Spark's Kafka connector for pyspark {version} is not available: SPARK_KAFKA_JARS is not set (to a folder "
        f"holding {_ALL_KINDS} jars) and {MAVEN_HOST} is unreachable for spark.jars.packages={coordinates(version)}"
    )


def from_folder(folder: str, version: str) -> Connector:
    """The jars of ``folder`` as ``spark.jars``, once each kind is there and Spark's are of pyspark ``version``."""
    if not os.path.isdir(folder):
        raise ConnectorMissing(f"SPARK_KAFKA_JARS={folder} is not a folder; it should hold {_ALL_KINDS} jars")
    jars = []
    for path in sorted(glob.glob(os.path.join(folder, "*.jar"))):
        try:
            jars.append(read_jar(path))
        except (OSError, zipfile.BadZipFile) as error:
            raise ConnectorMissing(f"SPARK_KAFKA_JARS={folder}: {os.path.basename(path)} cannot be read as a jar "
                                   f"({error})") from None
    found = {kind: [jar for jar in jars if jar.is_a(kind)] for kind in JAR_KINDS}
    missing = [kind for kind in JAR_KINDS if not found[kind]]
    if missing:
        lacking = "; ".join(f"{kind.name} ({kind.evidence})" for kind in missing)
        raise ConnectorMissing(
            f"SPARK_KAFKA_JARS={folder} has no jar holding {lacking}: give it those of Spark {version}, as released "
            f"(spark-sql-kafka-0-10_2.13-{version}.jar and the jars it depends on) or built from Spark's source, "
            f"under any file names"
        )
    if len(found[CONNECTOR]) > 1:  # Spark refuses to choose: "Multiple sources found for kafka"
        raise ConnectorMissing(f"SPARK_KAFKA_JARS={folder} holds {CONNECTOR.name} more than once: "
                               f"{', '.join(jar.name for jar in found[CONNECTOR])}; keep one")
    mismatches = [f"{jar.name} is {kind.name} of Spark {stated}"
                  for kind in JAR_KINDS if kind.spark_artifact for jar in found[kind]
                  if (stated := jar.stated_version(kind)) and not same_release(stated, version)]
    if mismatches:
        raise ConnectorMissing(f"SPARK_KAFKA_JARS={folder}: {'; '.join(mismatches)}, but the installed pyspark is "
                               f"{version}: use the jars of Spark {version}")
    (connector,) = found[CONNECTOR]
    stated = connector.stated_version(CONNECTOR) or "a version it does not state"
    return Connector({"spark.jars": ",".join(jar.path for jar in jars)},
                     f"SPARK_KAFKA_JARS={folder} ({connector.name}, {stated})")


def _maven_reachable() -> bool:
    """Whether Spark's Ivy could download the connector (a TCP connect, nothing sent)."""
    try:
        with socket.create_connection((MAVEN_HOST, 443), timeout=_PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False
