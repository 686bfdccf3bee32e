"""A kbroker process on a free loopback port, for tests that kill and restart it."""

from __future__ import annotations

import collections
import resource
import socket
import subprocess
import sys
import threading
import time


# Set on every test broker process before the test's own overrides. Kafka's initial rebalance delay
# (3000 ms, kbroker's default too) would make each new group's first formation 3-6 s; a short one
# still makes consumers that subscribe together form one first generation, led by a member that
# knows the topic's partitions (kafka-python 3.0.12 hangs now and then without it, issue 31). Measured
# here: three members' JoinGroups land within 20 ms of one another, and a kafka-python member has the
# topic's partitions about 90 ms after its first JoinGroup (its 100 ms metadata backoff).
TEST_SETTINGS = ("group.initial.rebalance.delay.ms=300",
                 "schema.registry.listeners=",  # not localhost:8081: a test that wants one chooses its port
                 "metrics.port=-1")  # nor the console's localhost:8080


_HANDED_OUT: set[int] = set()  # the ports free_port gave this process: the kernel may offer one again
_PORT_TRIES_MAX = 100


def process_running(pid: int) -> bool:
    """Whether ``pid`` is a live process, by Linux's /proc (a zombie nobody reaped is not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def free_port() -> int:
    """A loopback port free now and not handed out before in this process (two nodes' listeners drawn
    one after the other once got the same port, and the node refused to start)."""
    for _ in range(_PORT_TRIES_MAX):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError(f"no free loopback port not handed out already after {_PORT_TRIES_MAX} tries")


class BrokerProcess:
    def __init__(self, data_dir, port: int | None = None, *overrides: str, open_files_limit: int | None = None) -> None:
        """``open_files_limit``: the child's RLIMIT_NOFILE, soft and hard (so that it cannot raise it)."""
        self.data_dir = str(data_dir)
        self.port = port or free_port()
        self.overrides = overrides
        self.open_files_limit = open_files_limit
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The command line that starts this broker."""
        settings = [f"listeners=PLAINTEXT://127.0.0.1:{self.port}", f"log.dirs={self.data_dir}", *TEST_SETTINGS,
                    *self.overrides]
        return [sys.executable, "-m", "kbroker.cli", *(part for s in settings for part in ("--override", s))]

    def start(self, timeout_s: float = 30) -> None:
        limit = self.open_files_limit
        self.process = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        preexec_fn=None if limit is None else lambda: resource.setrlimit(
                                            resource.RLIMIT_NOFILE, (limit, limit)))
        deadline = time.monotonic() + timeout_s
        seen = []
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "ready on" in line:
                # Keep reading its log, or a chatty broker fills the pipe and blocks in a write.
                self.log_tail = collections.deque(seen, maxlen=200)
                threading.Thread(target=self._drain, args=(self.process, self.log_tail), daemon=True).start()
                return
        self.kill()
        raise RuntimeError(f"kbroker did not start: {''.join(seen)}")

    @staticmethod
    def _drain(process: subprocess.Popen, tail: collections.deque) -> None:
        for line in process.stdout:
            tail.append(line)

    def kill(self) -> None:
        """SIGKILL the process we started (and only it) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def stop(self) -> int:
        self.process.terminate()
        code = self.process.wait(20)
        self.process = None
        return code
