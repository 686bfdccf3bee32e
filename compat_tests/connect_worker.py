"""A Kafka Connect distributed worker (``ConnectDistributed``) as a child process, driven over its REST API.

The worker keeps its config, offsets and status in three topics on the broker (replication factor 1)
and uses Confluent's AvroConverter for record values, with the schema registry the broker serves. Its
REST server listens on a free loopback port; its log goes to a file beside its properties, whose tail
a failed wait shows. Only the process this object started is ever stopped or killed.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import time
import urllib.error
import urllib.request

from testkit.broker_process import free_port

START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 60
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


class ConnectWorker:
    def __init__(self, java: str, classpath: str, directory: pathlib.Path, bootstrap: str, registry_url: str,
                 group: str) -> None:
        """A worker of Connect cluster ``group`` whose files live in ``directory`` (created)."""
        self.java, self.classpath = java, classpath
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
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": self.registry_url,
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "offset.flush.interval.ms": "500",
            # A worker that leaves is not waited for before its work moves (the default waits 5 minutes).
            "scheduled.rebalance.max.delay.ms": "0",
            # Plugins by their ServiceLoader manifests only: no scan of every jar, about 8 s less per start.
            # AvroConverter (7.0.16 has no manifest) still loads by class name from the classpath.
            "plugin.discovery": "service_load",
        }
        return "".join(f"{name}={value}\n" for name, value in settings.items())

    def start(self) -> None:
        """Start the worker and wait until its REST API answers."""
        worker_properties = self.directory / "worker.properties"
        worker_properties.write_text(self.properties())
        log4j2 = self.directory / "log4j2.properties"
        log4j2.write_text(LOG4J2.format(log=self.log))
        command = [self.java, f"-Dlog4j2.configurationFile={log4j2}", "-cp", self.classpath,
                   "org.apache.kafka.connect.cli.ConnectDistributed", str(worker_properties)]
        with open(self.directory / "stdout.log", "ab") as output:
            self.process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
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
