"""Where Spark's Kafka connector jars come from, in the order the README gives.

1. ``SPARK_KAFKA_JARS``: a folder of jars (the connector, its token provider,
   kafka-clients and commons-pool2), handed to Spark as ``spark.jars``.
2. ``spark.jars.packages`` with the coordinates matching the installed
   pyspark, when a Maven repository answers (Spark's Ivy then downloads them
   into its own cache).
3. Neither: every spark_it test skips with one reason saying so.

The connector must match pyspark's version exactly: 4.0 jars fail on 4.3.
"""

from __future__ import annotations

import glob
import os
import socket
from dataclasses import dataclass

MAVEN_HOST = "repo1.maven.org"
_PROBE_TIMEOUT_S = 3


@dataclass(frozen=True)
class Connector:
    """Spark settings that put the connector on the classpath, and where it came from."""

    settings: dict[str, str]
    origin: str


class ConnectorMissing(Exception):
    """No connector jars to be had; the message says what was tried."""


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def coordinates(version: str) -> str:
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"


def find_connector() -> Connector:
    version = pyspark_version()
    folder = os.environ.get("SPARK_KAFKA_JARS")
    if folder:
        return _from_folder(folder, version)
    if _maven_reachable():
        return Connector({"spark.jars.packages": coordinates(version)}, f"spark.jars.packages={coordinates(version)}")
    raise ConnectorMissing(
        f"Spark's Kafka connector for pyspark {version} is not available: SPARK_KAFKA_JARS is not set and "
        f"{MAVEN_HOST} is unreachable for spark.jars.packages={coordinates(version)}"
    )


def _from_folder(folder: str, version: str) -> Connector:
    jars = sorted(glob.glob(os.path.join(folder, "*.jar")))
    connector = [jar for jar in jars if os.path.basename(jar).startswith("spark-sql-kafka-0-10_")]
    if not connector:
        raise ConnectorMissing(f"SPARK_KAFKA_JARS={folder} holds no spark-sql-kafka-0-10_*.jar")
    wanted = f"spark-sql-kafka-0-10_2.13-{version}.jar"
    if os.path.basename(connector[0]) != wanted:
        raise ConnectorMissing(f"SPARK_KAFKA_JARS={folder} has {os.path.basename(connector[0])}, but pyspark {version} needs {wanted}")
    return Connector({"spark.jars": ",".join(jars)}, f"SPARK_KAFKA_JARS={folder}")


def _maven_reachable() -> bool:
    """Whether Spark's Ivy could download the connector (a TCP connect, nothing sent)."""
    try:
        with socket.create_connection((MAVEN_HOST, 443), timeout=_PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False
