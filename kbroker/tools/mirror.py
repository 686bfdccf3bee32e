"""``kbroker mirror``: MirrorMaker's job, a consumer and a producer linked together.

Continuously copies the topics of a source cluster whose names match a pattern to a target
cluster: keys, values, headers, timestamps, and partitions when the partition counts match
(target topics it creates get the source's count). It commits the source offsets, in a consumer
group (offsets only: partitions are assigned, not balanced), only after the target has
acknowledged everything before them, so a mirror that dies
and starts again loses nothing: what it copied after its last commit is copied again
(at-least-once; the target may hold duplicates, never gaps).

    kbroker mirror --source host:9092 --target host:9093 [--topics 'orders|audit.*'] [--group kbroker-mirror]

Built on confluent-kafka (librdkafka): ``pip install 'kbroker[tools]'``.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import re
import signal
import sys
import time

logger = logging.getLogger("kbroker.tools.mirror")

# What the target acknowledged is committed at the source this often, or after this many records:
# what a killed mirror copies twice (it flushes the producer each time, so not much more often).
COMMIT_INTERVAL_S = 0.2
COMMIT_RECORDS = 5_000
TOPIC_REFRESH_S = 5.0
PROGRESS_INTERVAL_S = 5.0
FLUSH_TIMEOUT_S = 60.0


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kbroker mirror", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return parser.parse_args(argv)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Also under ``kbroker mirror`` (kbroker/cli.py)."""
    parser.add_argument("--source", required=True, help="bootstrap servers of the source cluster")
    parser.add_argument("--target", required=True, help="bootstrap servers of the target cluster")
    parser.add_argument("--topics", default=".*", help="regular expression the whole topic name must match")
    parser.add_argument("--group", default="kbroker-mirror", help="consumer group at the source (its offsets)")
    parser.add_argument("--source-config", action="append", default=[], metavar="KEY=VALUE",
                        help="librdkafka setting for the source consumer (repeatable)")
    parser.add_argument("--target-config", action="append", default=[], metavar="KEY=VALUE",
                        help="librdkafka setting for the target producer (repeatable)")


class Mirror:
    def __init__(self, arguments: argparse.Namespace) -> None:
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient

        self.pattern = re.compile(arguments.topics)
        self.source_admin = AdminClient({"bootstrap.servers": arguments.source, **_settings(arguments.source_config)})
        self.target_admin = AdminClient({"bootstrap.servers": arguments.target, **_settings(arguments.target_config)})
        self.consumer = Consumer({"bootstrap.servers": arguments.source, "group.id": arguments.group,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  **_settings(arguments.source_config)})
        self.producer = Producer({"bootstrap.servers": arguments.target, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, **_settings(arguments.target_config)})
        self.partitions: dict[str, int] = {}  # source topic -> its partition count, once the target has the topic
        self.same_partitions: dict[str, bool] = {}
        self.assigned: set[tuple[str, int]] = set()
        self.consumed: dict[tuple[str, int], int] = {}  # (topic, partition) -> next offset, not yet committed
        self.failed: list = []  # delivery errors: nothing after them may be committed
        self.copied = 0
        self.stop_requested: list = []  # SIGTERM and SIGINT append to it

    def run(self) -> int:
        self._prepare_topics()
        last_commit = last_refresh = last_progress = time.monotonic()
        copied_at_progress = copied_at_commit = 0
        while not self.stop_requested:
            if not self.assigned:  # no matching topic yet
                time.sleep(0.2)
            for message in self.consumer.consume(1000, 0.2) if self.assigned else ():
                if message.error() is None:
                    self._copy(message)
            now = time.monotonic()
            if now - last_commit >= COMMIT_INTERVAL_S or self.copied - copied_at_commit >= COMMIT_RECORDS:
                if not self._commit():
                    return 1
                last_commit, copied_at_commit = now, self.copied
            if now - last_refresh >= TOPIC_REFRESH_S:
                self._prepare_topics()
                last_refresh = now
            if now - last_progress >= PROGRESS_INTERVAL_S:
                rate = (self.copied - copied_at_progress) / (now - last_progress)
                logger.info("mirrored %d records (%.0f/s)", self.copied, rate)
                last_progress, copied_at_progress = now, self.copied
        code = 0 if self._commit() else 1
        self.consumer.close()
        logger.info("stopped after mirroring %d records", self.copied)
        return code

    def _prepare_topics(self) -> None:
        """Give every matching source topic a target topic with its partition count."""
        from confluent_kafka.admin import NewTopic

        source = self.source_admin.list_topics(timeout=30).topics
        target = self.target_admin.list_topics(timeout=30).topics
        missing = []
        for name, metadata in source.items():
            if name.startswith("__") or not self.pattern.fullmatch(name) or name in self.partitions:
                continue
            count = len(metadata.partitions)
            if name not in target:
                missing.append(NewTopic(name, count))
            else:
                self.same_partitions[name] = len(target[name].partitions) == count
            self.partitions[name] = count
        for name, future in (self.target_admin.create_topics(missing).items() if missing else ()):
            try:
                future.result(30)
                logger.info("created %s on the target with %d partitions", name, self.partitions[name])
            except Exception as error:  # made meanwhile by someone else: fine if it exists now
                logger.info("creating %s on the target: %s", name, error)
            self.same_partitions[name] = True
        self._assign_new_partitions()

    def _assign_new_partitions(self) -> None:
        """Read every partition of the matching topics from the group's committed offsets (else the
        beginning). Assigned, not subscribed, as MirrorMaker 2's tasks do: a restarted mirror resumes at
        once instead of waiting out its dead predecessor's session in a rebalance."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        new = [TopicPartition(topic, index) for topic, count in sorted(self.partitions.items())
               for index in range(count) if (topic, index) not in self.assigned]
        if not new:
            return
        positions = self.consumer.committed(new, timeout=30)
        for position in positions:
            if position.offset < 0:
                position.offset = OFFSET_BEGINNING
        self.consumer.incremental_assign(positions)
        self.assigned.update((p.topic, p.partition) for p in positions)
        logger.info("copying %d more partitions from %s", len(positions),
                    ", ".join(sorted({p.topic for p in positions})))

    def _copy(self, message) -> None:
        topic = message.topic()
        kind, timestamp = message.timestamp()
        self._produce(topic, message.value(), message.key(), message.headers(),
                      message.partition() if self.same_partitions.get(topic, False) else None,
                      timestamp if kind != 0 else None)
        self.consumed[(topic, message.partition())] = message.offset() + 1
        self.copied += 1

    def _produce(self, topic, value, key, headers, partition, timestamp) -> None:
        options = {"key": key, "headers": headers, "on_delivery": self._delivered}
        if partition is not None:
            options["partition"] = partition
        if timestamp is not None:
            options["timestamp"] = timestamp
        while True:
            try:
                self.producer.produce(topic, value, **options)
                return
            except BufferError:  # the producer's queue is full: let it drain
                self.producer.poll(0.1)

    def _delivered(self, error, message) -> None:
        if error is not None:
            self.failed.append((message.topic(), message.partition(), error))

    def _commit(self) -> bool:
        """Commit what the target has acknowledged: everything consumed so far, once flushed."""
        from confluent_kafka import TopicPartition

        if not self.consumed:
            return True
        pending, self.consumed = self.consumed, {}
        if self.producer.flush(FLUSH_TIMEOUT_S) or self.failed:
            logger.error("the target did not acknowledge everything (%s); stopping without committing",
                         self.failed[:3] or "timed out")
            return False
        offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in pending.items()]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except Exception as error:  # not committed: copied again after a restart (a duplicate, not a loss)
            logger.warning("committing source offsets failed: %s", error)
        return True


def _settings(pairs: list[str]) -> dict:
    return dict(pair.split("=", 1) for pair in pairs)


def main(argv: list[str] | None = None) -> int:
    return run(parse_arguments(sys.argv[1:] if argv is None else argv))


def run(arguments: argparse.Namespace) -> int:
    stop_requested = []
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.append(True))  # first: a stop while starting counts
    signal.signal(signal.SIGINT, lambda *_: stop_requested.append(True))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if importlib.util.find_spec("confluent_kafka") is None:
        print("kbroker mirror needs confluent-kafka: pip install 'kbroker[tools]'", file=sys.stderr)
        return 2
    mirror = Mirror(arguments)
    mirror.stop_requested = stop_requested
    return mirror.run()


if __name__ == "__main__":
    raise SystemExit(main())
