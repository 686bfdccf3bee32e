"""One consumer-group member in a process of its own, and the test side's handle on it.

Run as a worker (``python -m testkit.group_member --client CLIENT ...``) it
subscribes to one topic in one group with a stock client, and after every
poll that returned records it commits synchronously (confluent-kafka and
aiokafka also commit in their revocation callbacks, as applications do). It
prints one JSON object per line:

    {"event": "assigned", "partitions": [...], "added": [...], "committed": {"0": 12, ...},
     "generation": 3, "member_id": "..."}   committed offsets fetched when they were assigned
    {"event": "revoked", "partitions": [...], "removed": [...]}
    {"event": "resumed", "partition": 0, "committed": 12, "first": 12}   first record after an assignment
    {"event": "records", "offsets": [[partition, offset], ...]}          processed (printed before the commit)
    {"event": "committed", "offsets": {"0": 13, ...}} / {"event": "commit_failed", "error": "..."}
    {"event": "closed"} / {"event": "error", "error": "..."}
    {"event": "fatal", "error": "_FATAL", "reason": "..."}   confluent-kafka: the client is unusable (a fenced
                                                              static member); it closes without committing
    {"event": "ready"}   with --wait-for-start: the client exists and waits for a ``start`` line to subscribe

``partitions`` is always the whole current assignment, whether the client
hands over eagerly (everything revoked, then the new set assigned) or
incrementally (KIP-848, cooperative). A line ``close`` on stdin, or its end,
makes the worker commit, close its consumer (leaving the group) and exit.
Separate processes, so a test can SIGKILL one member and keep the others.

``Member`` is the test side: it starts a worker, reads its lines in a thread
and keeps the member's state; ``BackgroundProducer`` writes while members come
and go.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time

CLIENTS = ("confluent-classic", "confluent-consumer", "kafka-python", "aiokafka")
POLL_TIMEOUT_S = 0.1
CALL_TIMEOUT_S = 10
CLOSE_TIMEOUT_S = 30
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the worker ----------------------------------------------------------------------------------


class Reporter:
    """Prints events and keeps the current assignment; callbacks may come from a client's thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.partitions: set[int] = set()
        self.awaiting_first: dict[int, int] = {}  # partition -> committed offset when it was assigned

    def emit(self, event: str, **fields) -> None:
        with self.lock:
            print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)

    def assigned(self, added: list[int], committed: dict[int, int], generation: int | None = None, member_id: str | None = None) -> None:
        self.partitions |= set(added)
        self.awaiting_first.update(committed)
        self.emit("assigned", partitions=sorted(self.partitions), added=sorted(added), committed={str(p): o for p, o in committed.items()},
                  generation=generation, member_id=member_id)

    def revoked(self, removed: list[int]) -> None:
        self.partitions -= set(removed)
        for partition in removed:
            self.awaiting_first.pop(partition, None)
        self.emit("revoked", partitions=sorted(self.partitions), removed=sorted(removed))

    def processed(self, offsets: list[tuple[int, int]]) -> None:
        for partition, offset in offsets:
            if partition in self.awaiting_first:
                self.emit("resumed", partition=partition, committed=self.awaiting_first.pop(partition), first=offset)
        self.emit("records", offsets=offsets)


class Control:
    """What stdin asks for: ``start`` (with --wait-for-start), ``close``; its end also means close."""

    def __init__(self) -> None:
        self.starting = threading.Event()
        self.stopping = threading.Event()


def watch_stdin(control: Control) -> None:
    def read() -> None:
        for line in sys.stdin:
            if line.strip() == "start":
                control.starting.set()
            elif line.strip() == "close":
                break
        control.starting.set()
        control.stopping.set()

    threading.Thread(target=read, daemon=True).start()


def wait_for_start(options, reporter: Reporter, control: Control) -> None:
    """With --wait-for-start, the client exists (and may be connected) before the clock starts."""
    if options.wait_for_start:
        reporter.emit("ready")
        control.starting.wait()


def confluent_group_metadata(consumer) -> tuple[int | None, str | None]:
    """Generation and member id from librdkafka's serialized ConsumerGroupMetadata.

    The layout is "CGMDv2:", the int32 generation in the machine's byte order, then
    the group id and the member id, each NUL-terminated; confluent-kafka offers no accessor.
    """
    blob = consumer.consumer_group_metadata()
    if not isinstance(blob, bytes) or not blob.startswith(b"CGMDv2:"):
        return None, None
    generation = int.from_bytes(blob[7:11], sys.byteorder, signed=True)
    _group, member_id, _rest = blob[11:].split(b"\0", 2)
    return generation, member_id.decode()


def run_confluent(options, reporter: Reporter, control: Control) -> None:
    import confluent_kafka

    protocol = "consumer" if options.client == "confluent-consumer" else "classic"
    config = {"bootstrap.servers": options.bootstrap, "group.id": options.group, "group.protocol": protocol, "client.id": options.name,
              "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if protocol == "classic":  # under KIP-848 the broker owns these
        config.update({"session.timeout.ms": options.session_timeout_ms, "heartbeat.interval.ms": options.heartbeat_interval_ms})
    if options.instance_id:
        config["group.instance.id"] = options.instance_id
    fatal_errors = []  # librdkafka's fatal error: _FATAL, the broker's error in its text (error_cb, or a consumed error)

    def on_error(error) -> None:
        if error.fatal():
            fatal_errors.append(error)
        else:
            print(f"error_cb: {error}", file=sys.stderr, flush=True)  # into the member's log

    config["error_cb"] = on_error
    consumer = confluent_kafka.Consumer(config)

    def commit() -> None:
        try:
            done = consumer.commit(asynchronous=False)
            reporter.emit("committed", offsets={str(tp.partition): tp.offset for tp in done or [] if tp.error is None})
        except confluent_kafka.KafkaException as error:
            if error.args[0].code() != confluent_kafka.KafkaError._NO_OFFSET:  # nothing consumed since the last commit
                reporter.emit("commit_failed", error=str(error))

    def on_assign(_consumer, partitions) -> None:
        committed = {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=CALL_TIMEOUT_S)}
        reporter.assigned([tp.partition for tp in partitions], committed, *confluent_group_metadata(consumer))

    def on_revoke(_consumer, partitions) -> None:
        commit()  # what we processed is ours to commit before another member takes it
        reporter.revoked([tp.partition for tp in partitions])

    def on_lost(_consumer, partitions) -> None:
        reporter.revoked([tp.partition for tp in partitions])

    wait_for_start(options, reporter, control)
    consumer.subscribe([options.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    while not control.stopping.is_set():
        polled = consumer.consume(num_messages=500, timeout=POLL_TIMEOUT_S)
        fatal_errors += [m.error() for m in polled if m.error() is not None and m.error().code() == confluent_kafka.KafkaError._FATAL]
        messages = [m for m in polled if m.error() is None]
        if fatal_errors:
            reporter.emit("fatal", error=fatal_errors[0].name(), reason=fatal_errors[0].str())
            consumer.close()
            return
        if messages:
            reporter.processed([(m.partition(), m.offset()) for m in messages])
            commit()
    commit()
    consumer.close()


def run_kafka_python(options, reporter: Reporter, control: Control) -> None:
    import kafka
    from kafka.errors import KafkaError

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=options.bootstrap, group_id=options.group, client_id=options.name, group_instance_id=options.instance_id,
        enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=options.session_timeout_ms, heartbeat_interval_ms=options.heartbeat_interval_ms)

    def commit() -> None:
        if not consumer.assignment():
            return  # nothing to commit (the clients refuse)
        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
        try:
            consumer.commit()
            reporter.emit("committed", offsets={str(tp.partition): offset for tp, offset in positions.items()})
        except KafkaError as error:
            reporter.emit("commit_failed", error=repr(error))

    # kafka-python 3 calls listeners on its IO thread, where blocking calls (commit, committed) are refused.
    # So they only queue what changed; the loop below reports it, fetching the committed offsets of new
    # partitions before processing anything. Nothing needs committing on revocation: every batch is
    # committed before the next poll, inside which revocations happen.
    changes: queue.SimpleQueue = queue.SimpleQueue()

    class Listener(kafka.ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            changes.put(("revoked", [tp.partition for tp in revoked]))

        def on_partitions_assigned(self, assigned):
            changes.put(("assigned", list(assigned)))

    def report_changes() -> None:
        while not changes.empty():
            kind, partitions = changes.get()
            if kind == "revoked":
                reporter.revoked(partitions)
            else:
                committed = {tp.partition: consumer.committed(tp) for tp in partitions}
                reporter.assigned([tp.partition for tp in partitions], {p: -1 if o is None else o for p, o in committed.items()})

    wait_for_start(options, reporter, control)
    consumer.subscribe([options.topic], listener=Listener())
    while not control.stopping.is_set():
        batches = consumer.poll(timeout_ms=int(POLL_TIMEOUT_S * 1000))
        report_changes()
        offsets = [(record.partition, record.offset) for records in batches.values() for record in records]
        if offsets:
            reporter.processed(offsets)
            commit()
    commit()
    consumer.close()


async def run_aiokafka(options, reporter: Reporter, control: Control) -> None:
    import aiokafka
    from aiokafka.errors import KafkaError

    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=options.bootstrap, group_id=options.group, client_id=options.name, group_instance_id=options.instance_id,
        enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=options.session_timeout_ms, heartbeat_interval_ms=options.heartbeat_interval_ms)

    async def commit() -> None:
        if not consumer.assignment():
            return  # nothing to commit (the clients refuse)
        positions = {tp: await consumer.position(tp) for tp in consumer.assignment()}
        try:
            await consumer.commit()
            reporter.emit("committed", offsets={str(tp.partition): offset for tp, offset in positions.items()})
        except KafkaError as error:
            reporter.emit("commit_failed", error=repr(error))

    class Listener(aiokafka.ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            await commit()
            reporter.revoked([tp.partition for tp in revoked])

        async def on_partitions_assigned(self, assigned):
            committed = {tp.partition: await consumer.committed(tp) for tp in assigned}
            reporter.assigned([tp.partition for tp in assigned], {p: -1 if o is None else o for p, o in committed.items()})

    await asyncio.to_thread(wait_for_start, options, reporter, control)
    consumer.subscribe([options.topic], listener=Listener())
    await consumer.start()
    try:
        while not control.stopping.is_set():
            batches = await consumer.getmany(timeout_ms=int(POLL_TIMEOUT_S * 1000))
            offsets = [(record.partition, record.offset) for records in batches.values() for record in records]
            if offsets:
                reporter.processed(offsets)
                await commit()
        await commit()
    finally:
        await consumer.stop()


def worker_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", default="member")
    parser.add_argument("--instance-id")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500)
    parser.add_argument("--wait-for-start", action="store_true", help="create the client, print ready, subscribe on a start line")
    options = parser.parse_args(argv)
    # Clients' warnings go to the member's log file; GROUP_MEMBER_LOG_LEVEL=DEBUG shows their requests.
    logging.basicConfig(level=os.environ.get("GROUP_MEMBER_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1 <pid>: every thread's stack into the log file
    reporter, control = Reporter(), Control()
    watch_stdin(control)
    try:
        if options.client == "aiokafka":
            asyncio.run(run_aiokafka(options, reporter, control))
        elif options.client == "kafka-python":
            run_kafka_python(options, reporter, control)
        else:
            run_confluent(options, reporter, control)
    except Exception as error:  # reported to the test, which fails on it
        reporter.emit("error", error=repr(error))
        return 1
    reporter.emit("closed")
    return 0


# -- the test side -------------------------------------------------------------------------------


def wait_until(condition, timeout_s: float, interval_s: float = 0.05) -> bool:
    """True as soon as ``condition()`` is; False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


class Member:
    """A worker process and what it has reported so far."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, name: str, log_dir, *, instance_id: str | None = None,
                 session_timeout_ms: int = 6000, heartbeat_interval_ms: int = 500, wait_for_start: bool = False) -> None:
        self.name = name
        self.command = [sys.executable, "-m", "testkit.group_member", "--client", client, "--bootstrap", bootstrap, "--group", group,
                        "--topic", topic, "--name", name, "--session-timeout-ms", str(session_timeout_ms),
                        "--heartbeat-interval-ms", str(heartbeat_interval_ms), *(["--instance-id", instance_id] if instance_id else []),
                        *(["--wait-for-start"] if wait_for_start else [])]
        self.log_path = os.path.join(str(log_dir), f"{name}.log")
        self.events_path = os.path.join(str(log_dir), f"{name}.events.jsonl")  # every line it printed, for diagnosis
        self.lock = threading.Lock()
        self.events: list[dict] = []
        self.partitions: set[int] = set()
        self.assignments = 0  # assigned + revoked callbacks seen
        self.processed: list[tuple[int, int]] = []
        self.resumed: list[dict] = []
        self.process: subprocess.Popen | None = None
        self.reader: threading.Thread | None = None

    def start(self) -> Member:
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [REPO_DIR, os.environ.get("PYTHONPATH")]))}
        with open(self.log_path, "w") as log:  # the client's own logging, for a failing test's diagnosis
            self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                            env=environment, cwd=REPO_DIR)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self) -> None:
        with open(self.events_path, "a") as kept:
            for line in self.process.stdout:
                kept.write(line)
                kept.flush()
                self._take(line)

    def _take(self, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            return  # a stray line from a client library
        with self.lock:
            self.events.append(event)
            kind = event["event"]
            if kind in ("assigned", "revoked"):
                self.partitions = set(event["partitions"])
                self.assignments += 1
            elif kind == "records":
                self.processed.extend(tuple(pair) for pair in event["offsets"])
            elif kind == "resumed":
                self.resumed.append(event)

    def send(self, line: str) -> None:
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # it is gone already; the caller sees that from its exit code

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def errors(self) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e["event"] == "error"]

    def last(self, kind: str) -> dict | None:
        with self.lock:
            return next((e for e in reversed(self.events) if e["event"] == kind), None)

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        """Ask the worker to commit, leave the group and exit; returns its exit code."""
        self.send("close")
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not close within {timeout_s} s; see {self.log_path}")
        self.reader.join(5)
        return code

    def kill(self) -> None:
        """SIGKILL this worker (and only it) and reap it."""
        if self.alive:
            self.process.kill()
            self.process.wait(10)
        if self.reader is not None:
            self.reader.join(5)

    def describe(self) -> str:
        return f"{self.name}: {sorted(self.partitions)} ({'alive' if self.alive else 'gone'}, log {self.log_path})"


def balanced(members: list[Member], partitions: int) -> bool:
    """Every live member owns its even share, with no overlap and every partition owned."""
    for member in members:
        if not member.alive:  # fail now rather than at the end of a long wait
            raise AssertionError(f"{member.describe()} exited: {member.errors()}")
    share, remainder = divmod(partitions, len(members))
    owned = [m.partitions for m in members]
    sizes_ok = all(len(p) in (share, share + (1 if remainder else 0)) for p in owned)
    return sizes_ok and sum(map(len, owned)) == partitions and set().union(*owned) == set(range(partitions))


class BackgroundProducer:
    """Writes ``rate_per_s`` acks=all records round robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_per_s: int = 300) -> None:
        import confluent_kafka

        self.topic, self.partitions, self.interval_s = topic, partitions, 1 / rate_per_s
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
        self.end_offsets = [0] * partitions
        self.failures: list[str] = []
        self.sent = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error, message) -> None:
        if error is not None:
            self.failures.append(str(error))
        else:
            self.end_offsets[message.partition()] = max(self.end_offsets[message.partition()], message.offset() + 1)

    def _run(self) -> None:
        next_send = time.monotonic()
        while not self.stopping.is_set():
            self.producer.produce(self.topic, value=b"%d" % self.sent, partition=self.sent % self.partitions, on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0)
            next_send += self.interval_s
            self.stopping.wait(max(0.0, next_send - time.monotonic()))  # pacing, not a wait for an outcome

    def start(self) -> BackgroundProducer:
        self.thread.start()
        return self

    def stop(self) -> list[int]:
        """Stop writing, wait for every acknowledgement, and return the log end offsets."""
        self.stopping.set()
        self.thread.join(10)
        assert self.producer.flush(30) == 0, "records left unacknowledged"
        assert not self.failures, self.failures[:5]
        return list(self.end_offsets)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as OffsetFetch returns them (AdminClient.list_consumer_group_offsets)."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
    future = client.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(group, wanted)])[group]
    return {tp.partition: tp.offset for tp in future.result(timeout=CALL_TIMEOUT_S).topic_partitions}


def check_everything_processed(members: list[Member], end_offsets: list[int]) -> int:
    """Every produced record was processed at least once by some member; returns the duplicates."""
    processed: dict[tuple[int, int], int] = {}
    for member in members:
        for pair in member.processed:
            processed[pair] = processed.get(pair, 0) + 1
    missing = [(p, o) for p, end in enumerate(end_offsets) for o in range(end) if (p, o) not in processed]
    assert not missing, f"{len(missing)} records never processed, first {missing[:10]}"
    return sum(count - 1 for count in processed.values())


def check_resumed_at_committed(members: list[Member]) -> int:
    """After each assignment a member's first record is the committed offset (or the log start when none was).

    Returns how many resumptions were checked.
    """
    resumed = [event for member in members for event in member.resumed]
    wrong = [event for event in resumed if event["first"] != (event["committed"] if event["committed"] >= 0 else 0)]
    assert not wrong, f"resumed elsewhere than at the committed offset: {wrong[:5]}"
    return len(resumed)


if __name__ == "__main__":
    sys.exit(worker_main())
