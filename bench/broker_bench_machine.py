"""What bench/broker_bench.py writes beside its table about the run: the machine, its load, the source under
test (commit and uncommitted files), the peers and the clients' versions."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys

from broker_bench_brokers import KBROKER, REPO_DIR


def _output_lines(command: list[str]) -> list[str] | None:
    try:
        done = subprocess.run(command, cwd=REPO_DIR, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.rstrip("\n").splitlines() if done.returncode == 0 else None


def first_line(command: list[str]) -> str:
    return (_output_lines(command) or ["?"])[0].strip() or "?"


def source_state() -> str:
    """The commit under test and any uncommitted or untracked file outside bench/ (the broker runs from the work tree)."""
    changed = _output_lines(["git", "status", "--porcelain"])
    paths = [line[3:] for line in changed or [] if not line[3:].startswith("bench/")]
    commit = first_line(["git", "rev-parse", "--short", "HEAD"])
    if changed is None:
        return f"commit {commit}, work tree state unknown"
    if not paths:
        return f"commit {commit}, no uncommitted changes outside bench/"
    return f"commit {commit}, uncommitted changes in {', '.join(paths[:8])}{' ...' if len(paths) > 8 else ''}"


def machine_description(outcome, arguments) -> list[str]:
    """The run's machine, load, source and peers, a line each (``outcome``: broker_bench's Outcome)."""
    def proc_field(path: str, prefix: str) -> str:
        try:
            with open(path) as source:
                return next((line.split(":", 1)[1].strip() for line in source if line.startswith(prefix)), "?")
        except OSError:
            return "?"

    memory_kib = proc_field("/proc/meminfo", "MemTotal").split()[0]
    memory = f"{int(memory_kib) / 1024**2:.1f} GiB" if memory_kib.isdigit() else "?"
    state_at_end = source_state()
    state_at_start = outcome.state_at_start
    source = state_at_start if state_at_end == state_at_start else f"at the start {state_at_start}; at the end {state_at_end}"
    loads = ", ".join(f"{load:.1f}" for load in outcome.loads[1:])
    peers = [f"- {name}: {outcome.descriptions[name]}" for name in outcome.names if name != KBROKER]
    return [
        f"- cores: {os.cpu_count()} ({proc_field('/proc/cpuinfo', 'model name')}), memory {memory}",
        f"- kernel: {platform.system()} {platform.release()}; Python {platform.python_version()} ({sys.executable})",
        f"- load average (1 min): {outcome.loads[0]:.1f} at the start, {loads or '-'} after each round",
        *([f"- {arguments.note}"] if arguments.note else []),
        f"- kbroker: {source}",
        *peers,
        *(f"- {name}: not run: {reason}" for name, reason in outcome.left_out.items()),
        f"- clients: confluent-kafka {package_version('confluent-kafka')}, librdkafka {_librdkafka_version()}",
    ]


def _librdkafka_version() -> str:
    import confluent_kafka

    return confluent_kafka.libversion()[0]


def package_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"
