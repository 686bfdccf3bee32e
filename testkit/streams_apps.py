"""Kafka Streams applications of the project's own, compiled in the test run and run each in a JVM of its own.

``StreamsApps.compile(sources, classes)`` compiles every ``*.java`` file of ``sources`` (for the compat tests,
compat_tests/streams_apps/) with the machine's ``javac`` into ``classes``, against the jars of the pom's
``streams`` profile (kafka-streams 4.4.0 with its kafka-clients and a log4j2 binding; testkit/maven.py). A test
session compiles once, into a temporary folder. compat_tests/test_faults_java.py builds and runs its plain-client
program (compat_tests/java_faults/) the same way, and drives it through its standard input (``stdin=True``).

``StreamsApps.start(main, directory, properties)`` runs ``java -cp <classes:jars> <main> key=value ...`` with the
properties on its command line, in ``directory`` (created), where its log (log4j2, WARN and up), its
standard error and a copy of its standard output go. The application prints one JSON object per line on stdout (the lines of
compat_tests/streams_apps/StreamsAppRunner.java); a thread of ours reads them as they come, so that a test can
wait for one. The process is ended by its PID only: SIGTERM (a clean close) or SIGKILL.

Where ``java``, ``javac`` or the jars are missing, :class:`testkit.maven.Unavailable` says which in one line.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from testkit.maven import Unavailable, classpath

PROFILE = "streams"
COMPILE_TIMEOUT_S = 180
STOP_TIMEOUT_S = 45  # the applications' own close waits up to 30 s
LOG_TAIL_LINES = 40
LOG4J2 = """\
rootLogger.level=WARN
rootLogger.appenderRef.file.ref=FILE
appender.file.type=File
appender.file.name=FILE
appender.file.fileName={log}
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=%d{{HH:mm:ss.SSS}} %-5p [%t] %c{{1}} %m%n
"""


def _tool(name: str) -> str:
    """``name`` from $JAVA_HOME/bin, else from PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", name), os.X_OK):
        return os.path.join(home, "bin", name)
    found = shutil.which(name)
    if found is None:
        raise Unavailable(f"{name} not found (neither $JAVA_HOME/bin nor PATH): Kafka Streams applications need a JDK")
    return found


@dataclass(frozen=True)
class StreamsApps:
    java: str
    classpath: str

    @classmethod
    def compile(cls, sources: pathlib.Path, classes: pathlib.Path) -> StreamsApps:
        """Every ``*.java`` of ``sources`` compiled into ``classes``; raises Unavailable when it cannot be."""
        jars = os.pathsep.join(map(str, classpath(PROFILE)))
        javac, java = _tool("javac"), _tool("java")
        files = sorted(str(path) for path in pathlib.Path(sources).glob("*.java"))
        if not files:
            raise ValueError(f"no Java sources in {sources}")
        classes.mkdir(parents=True, exist_ok=True)
        try:
            result = subprocess.run([javac, "-encoding", "UTF-8", "-d", str(classes), "-cp", jars, *files],
                                    capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"javac did not compile {sources} within {COMPILE_TIMEOUT_S} s") from None
        if result.returncode != 0:
            # Our own sources not compiling is a failure, never a skip.
            raise RuntimeError(f"javac failed on {sources}:\n{result.stdout}{result.stderr}")
        return cls(java, os.pathsep.join([str(classes), jars]))

    def command(self, main: str, properties: dict[str, object], log4j2: pathlib.Path) -> list[str]:
        arguments = [f"{name}={value}" for name, value in properties.items()]
        return [self.java, "-Xss1m", "-Xmx256m", f"-Dlog4j2.configurationFile={log4j2}", "-cp", self.classpath,
                main, *arguments]

    def start(self, main: str, directory: pathlib.Path, properties: dict[str, object], *,
              stdin: bool = False) -> StreamsApp:
        """A started application: ``main``'s class run with ``properties`` (key=value arguments); with ``stdin``,
        its standard input a pipe that ``StreamsApp.send`` writes lines to."""
        directory.mkdir(parents=True, exist_ok=True)
        log4j2 = directory / "log4j2.properties"
        log4j2.write_text(LOG4J2.format(log=directory / "app.log"))
        app = StreamsApp(main, directory)
        with open(directory / "stderr.log", "ab") as stderr:
            app.process = subprocess.Popen(self.command(main, properties, log4j2),
                                           stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=directory)
        threading.Thread(target=app._read_lines, name=f"{main}-lines", daemon=True).start()
        return app


class StreamsApp:
    """One running application process and the lines it printed so far."""

    def __init__(self, main: str, directory: pathlib.Path) -> None:
        self.main = main
        self.directory = directory
        self.process: subprocess.Popen | None = None
        self._lines: list[dict] = []
        self._changed = threading.Condition()
        self._stdout_done = False

    def _read_lines(self) -> None:
        with open(self.directory / "stdout.log", "a") as copy:  # kept for a look after the test
            for text in self.process.stdout:
                copy.write(text)
                copy.flush()
                self._keep(text)
        with self._changed:
            self._stdout_done = True
            self._changed.notify_all()

    def _keep(self, text: str) -> None:
        if not text.startswith("{"):
            return  # not one of the application's lines (a JVM warning, say): stdout.log keeps it
        with self._changed:
            self._lines.append(json.loads(text))
            self._changed.notify_all()

    @property
    def lines(self) -> list[dict]:
        with self._changed:
            return list(self._lines)

    def send(self, line: str) -> None:
        """One line to the application's standard input (started with ``stdin=True``)."""
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def events(self, kind: str) -> list[dict]:
        return [line for line in self.lines if line.get("event") == kind]

    def wait_for(self, predicate, timeout_s: float, what: str):
        """The first truthy ``predicate(lines)``, checked at each new line; an AssertionError naming ``what``
        (with the lines and the log's tail) when ``timeout_s`` pass first or the process ends first."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                value = predicate(list(self._lines))
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stdout_done:
                    break
                self._changed.wait(min(remaining, 0.5))
        ended = "the process ended" if self._stdout_done else f"{timeout_s} s passed"
        raise AssertionError(f"{self.main} in {self.directory.name}: {ended} before {what}\n{self.report()}")

    def wait_exit(self, timeout_s: float) -> int:
        """The process's exit code, waiting at most ``timeout_s``."""
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.main} did not exit within {timeout_s} s\n{self.report()}") from None

    def terminate(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (the application closes and leaves its group) and its exit code."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        return self.wait_exit(timeout_s)

    def kill(self) -> None:
        """SIGKILL the process this object started, and reap it."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def report(self) -> str:
        """The last lines it printed and the tail of its log and standard error, for a failure's message."""
        def tail(name: str) -> str:
            try:
                return "\n".join((self.directory / name).read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])
            except OSError:
                return ""
        lines = "\n".join(json.dumps(line) for line in self.lines[-LOG_TAIL_LINES:])
        return f"--- lines ---\n{lines}\n--- app.log ---\n{tail('app.log')}\n--- stderr ---\n{tail('stderr.log')}"
