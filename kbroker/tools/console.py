"""``kbroker produce`` and ``kbroker consume``: Kafka's console producer and consumer on our client.

Both end as Kafka's do: Ctrl-C stops them quietly with the totals line on stderr ("Processed a total
of N messages", exit 0, as kafka-console-consumer prints on its way out), and a reader that goes
away (``kbroker consume T | head -1``) ends the consumer without a traceback.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

from kbroker.tools.client import EARLIEST, LATEST, Client, CommandFailed, KafkaError, check_error_code
from kbroker.wire.errors import ErrorCode
from kbroker.wire.murmur2 import default_partition
from kbroker.wire.records import Record, build_batch, decode_records, iter_batches
from kbroker.wire.schema import API_BY_NAME

PROGRESS_EVERY = 100_000
BATCH_RECORDS = 500
INPUT_CHUNK_BYTES = 1 << 16
TOPIC_CREATION_WAIT_S = 30  # Kafka's producer waits max.block.ms (60 s) for a topic to show up
BROKER_RESOURCE = 4  # DescribeConfigs' resource type of a broker
Fetch = API_BY_NAME["Fetch"].request_class.FetchTopic
ProduceData = API_BY_NAME["Produce"].request_class.TopicProduceData
ConfigResource = API_BY_NAME["DescribeConfigs"].request_class.DescribeConfigsResource


def flush_stdout() -> None:
    """Flush what was printed; when the reader has gone (``| head``), send the rest nowhere, so that
    neither this nor Python's own flush at exit complains about a broken pipe."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def print_totals(count: int) -> None:
    print(f"Processed a total of {count} messages", file=sys.stderr)


def check_partition(topic: str, partition: int | None, leaders: dict[int, int]) -> None:
    if partition is not None and partition not in leaders:
        raise CommandFailed(f"Topic {topic} has no partition {partition}: it has {len(leaders)}, from 0")


# -- produce --------------------------------------------------------------------------------------------------

def produce(client: Client, args) -> None:
    producer = LineProducer(client, args, leaders_for_producing(client, args.topic))
    try:
        producer.send_lines(input_lines(sys.stdin.fileno()))
    except KeyboardInterrupt:  # Ctrl-C: what was read still goes out, as Kafka's producer sends it on close
        producer.flush()
        print_totals(producer.sent)
        return
    print(f"{producer.sent} records produced to {args.topic}.")


def leaders_for_producing(client: Client, topic: str) -> dict[int, int]:
    """Partition -> leader, found as Kafka's producer finds them: Metadata requests that let the broker
    create the topic (auto.create.topics.enable), until every partition has a leader (bounded)."""
    deadline = time.monotonic() + TOPIC_CREATION_WAIT_S
    creates_topics = None
    while True:
        [found] = client.metadata([topic], auto_create=True).topics
        if found.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            creates_topics = _broker_creates_topics(client) if creates_topics is None else creates_topics
            if not creates_topics:
                raise CommandFailed(f"Topic '{topic}' does not exist and the broker does not create topics on "
                                    f"first use (auto.create.topics.enable=false): kbroker topics create {topic}")
        elif found.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
            raise KafkaError(found.error_code, topic)
        leaders = {p.partition_index: p.leader_id for p in found.partitions}
        if found.error_code == ErrorCode.NONE and leaders and min(leaders.values()) >= 0:
            return leaders
        if time.monotonic() >= deadline:
            raise CommandFailed(f"Topic {topic} not present in metadata after {TOPIC_CREATION_WAIT_S * 1000} ms.")
        time.sleep(0.1)


def _broker_creates_topics(client: Client) -> bool:
    """A broker's auto.create.topics.enable; true where it cannot be read (the bounded wait tells then).
    In a cluster an auto-created topic is unknown for a moment, so the answer alone does not tell."""
    node_id = min((broker.node_id for broker in client.metadata([]).brokers), default=None)
    if node_id is None:
        return True
    try:
        answer = client.broker(node_id).call("DescribeConfigs", resources=[ConfigResource(
            resource_type=BROKER_RESOURCE, resource_name=str(node_id),
            configuration_keys=["auto.create.topics.enable"])])
    except KafkaError:
        return True
    [result] = answer.results
    return result.error_code != ErrorCode.NONE or all(config.value != "false" for config in result.configs)


def input_lines(descriptor: int):
    """The lines read from ``descriptor`` as they come, and None whenever no more input is ready right
    now: what was typed is sent then, as Kafka's console producer sends each line after linger.ms."""
    rest = b""
    while chunk := os.read(descriptor, INPUT_CHUNK_BYTES):
        *lines, rest = (rest + chunk).split(b"\n")
        yield from (line.rstrip(b"\r") for line in lines)
        if not select.select([descriptor], [], [], 0)[0]:
            yield None
    if rest:
        yield rest.rstrip(b"\r")


class LineProducer:
    """Lines become records, batched per partition and sent when a batch is full or the input pauses."""

    def __init__(self, client: Client, args, leaders: dict[int, int]) -> None:
        check_partition(args.topic, args.partition, leaders)
        self.client, self.topic, self.leaders = client, args.topic, leaders
        self.key_separator = args.key_separator.encode() if args.key_separator is not None else None
        self.partition = args.partition
        self.acks = {"all": -1, "-1": -1, "1": 1, "0": 0}[args.acks]
        self.pending: dict[int, list[Record]] = {}
        self.sticky_partition = 0  # keyless records go to one partition per batch, as Kafka's producers do
        self.read = self.sent = 0

    def send_lines(self, lines) -> None:
        for line in lines:
            if line is None:
                self.flush()
                continue
            self.read += 1
            self._add(*self._key_and_value(line))
            if self.read % PROGRESS_EVERY == 0:
                print(f"{self.read:,} records sent", file=sys.stderr)
        self.flush()

    def _key_and_value(self, line: bytes) -> tuple[bytes | None, bytes]:
        if self.key_separator is None:
            return None, line
        key, separator, value = line.partition(self.key_separator)
        if not separator:  # Kafka's console producer throws here; what it read before is sent on close
            self.flush()
            before = "nothing was sent" if self.read == 1 else f"the {self.read - 1} lines before it were sent"
            raise CommandFailed(f"No key separator found on line number {self.read}: "
                                f"'{line.decode(errors='replace')}' ({before})")
        return key, value

    def _add(self, key: bytes | None, value: bytes) -> None:
        if self.partition is not None:
            partition = self.partition
        elif key is not None:
            partition = default_partition(key, len(self.leaders))
        else:
            partition = self.sticky_partition
        records = self.pending.setdefault(partition, [])
        records.append(Record(offset_delta=len(records), key=key, value=value))
        if len(records) >= BATCH_RECORDS:
            self._send({partition: self.pending.pop(partition)})

    def flush(self) -> None:
        if self.pending:
            batches, self.pending = self.pending, {}
            self._send(batches)

    def _send(self, batches: dict[int, list[Record]]) -> None:
        with _sigint_held():
            for leader, partitions in self._by_leader(batches).items():
                request = dict(acks=self.acks, timeout_ms=30_000,
                               topic_data=[ProduceData(name=self.topic, partition_data=partitions)])
                self._produce(self.client.broker(leader), request)
            self.sent += sum(len(records) for records in batches.values())
        if self.sticky_partition in batches:
            self.sticky_partition = (self.sticky_partition + 1) % len(self.leaders)

    def _by_leader(self, batches: dict[int, list[Record]]) -> dict[int, list]:
        now_ms = int(time.time() * 1000)
        by_leader: dict[int, list] = {}
        for partition, records in batches.items():
            batch = build_batch(records, base_timestamp=now_ms, max_timestamp=now_ms)
            by_leader.setdefault(self.leaders[partition], []).append(
                ProduceData.PartitionProduceData(index=partition, records=batch))
        return by_leader

    def _produce(self, connection, request: dict) -> None:
        """Send one Produce and check its answers. A partition answered as not there yet (a new topic that
        its leader has not applied) is sent again every 100 ms for up to 10 s, as Kafka's producer retries
        it: those answers mean nothing was written."""
        if self.acks == 0:
            connection.send("Produce", **request)
            return
        deadline = time.monotonic() + _NOT_YET_RETRY_S
        while True:
            results = connection.call("Produce", **request).responses[0].partition_responses
            waiting = {result.index for result in results if result.error_code in _NOT_YET}
            if not waiting or time.monotonic() >= deadline:
                break
            for result in results:
                if result.index not in waiting:
                    check_error_code(result.error_code, f"{self.topic}-{result.index}")
            time.sleep(0.1)
            [topic] = request["topic_data"]
            request = dict(request, topic_data=[ProduceData(name=self.topic, partition_data=[
                data for data in topic.partition_data if data.index in waiting])])
        for result in results:
            check_error_code(result.error_code, f"{self.topic}-{result.index}")


_NOT_YET = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE})
_NOT_YET_RETRY_S = 10


@contextlib.contextmanager
def _sigint_held():
    """Ctrl-C waits until a request is sent and answered: one cut in half would leave the connection
    unusable for sending what is still pending (Ctrl-C arrives as KeyboardInterrupt right after)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


# -- consume --------------------------------------------------------------------------------------------------

def consume(client: Client, args) -> None:
    consumer = LineConsumer(client, args)
    try:
        consumer.run()
    except (KeyboardInterrupt, BrokenPipeError):  # Ctrl-C, or the reader went away (| head): both mean stop
        pass
    flush_stdout()
    print_totals(consumer.printed)


class LineConsumer:
    """Prints each record's value (and key) on a line, fetching from each partition's leader until
    --max-messages are printed or nothing arrived for --timeout-ms."""

    def __init__(self, client: Client, args) -> None:
        self.client, self.args, self.topic = client, args, args.topic
        self.printed = 0

    def run(self) -> None:
        leaders = self.client.leaders(self.topic)
        check_partition(self.topic, self.args.partition, leaders)
        partitions = [self.args.partition] if self.args.partition is not None else sorted(leaders)
        start = EARLIEST if self.args.from_beginning else LATEST
        positions = {p: offset for p, offset in self.client.list_offsets(self.topic, start).items() if p in partitions}
        idle_since = time.monotonic()
        while not self._enough() and time.monotonic() - idle_since < self.args.timeout_ms / 1000:
            printed_before = self.printed
            for leader in sorted({leaders[p] for p in partitions}):
                self._fetch(leader, {p: positions[p] for p in partitions if leaders[p] == leader}, positions)
            if self.printed > printed_before:  # shown now, also through a pipe (| grep), as Kafka's consumer does
                sys.stdout.flush()
                idle_since = time.monotonic()

    def _enough(self) -> bool:
        return self.args.max_messages is not None and self.printed >= self.args.max_messages

    def _fetch(self, leader: int, wanted: dict[int, int], positions: dict[int, int]) -> None:
        answer = self.client.broker(leader).call("Fetch", max_wait_ms=200, min_bytes=1, max_bytes=16 << 20, topics=[
            Fetch(topic=self.topic, partitions=[Fetch.FetchPartition(
                partition=p, fetch_offset=offset, partition_max_bytes=4 << 20) for p, offset in wanted.items()])],
            forgotten_topics_data=[], rack_id="")
        for result in answer.responses[0].partitions:
            check_error_code(result.error_code, f"{self.topic}-{result.partition_index}")
            for key, value, offset in _records(result.records, positions[result.partition_index]):
                if self._enough():
                    return
                self._print(key, value)
                positions[result.partition_index] = offset + 1

    def _print(self, key: bytes | None, value: bytes | None) -> None:
        shown = value.decode(errors="replace") if value is not None else "null"
        if self.args.print_key:
            shown = (key.decode(errors="replace") if key is not None else "null") + self.args.key_separator + shown
        self.printed += 1  # first: a Ctrl-C right after the line is out must not leave it uncounted
        print(shown)


def _records(data, from_offset: int):
    """(key, value, offset) of each data record at or after ``from_offset`` (control batches skipped)."""
    data = bytes(data or b"")
    for position, header in iter_batches(data, allow_partial_tail=True):
        if header.is_control:
            continue
        _, records = decode_records(data, position)
        for record in records:
            offset = header.base_offset + record.offset_delta
            if offset >= from_offset:
                yield record.key, record.value, offset
