"""``create_topic`` for the brokers and clusters the testing helpers run, over kbroker's own blocking client
(kbroker/tools/client.py), so a test needs no admin client of its own."""

from __future__ import annotations

import time

from kbroker.tools.client import Client, KafkaError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

CreatableTopic = API_BY_NAME["CreateTopics"].request_class.CreatableTopic


class CreatesTopics:
    """Gives anything with a ``bootstrap`` address a ``create_topic``."""

    bootstrap: str

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, object] | None = None, *,
                     replication_factor: int = -1, timeout_s: float = 30) -> None:
        """Create topic ``name`` with ``partitions`` partitions and return once each has a leader.

        ``partitions`` -1 takes the broker's num.partitions. ``config`` holds topic configs by Kafka's names (``{"cleanup.policy": "compact"}``);
        ``replication_factor`` -1 takes the broker's default.replication.factor. A refusal
        (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, ...) raises ``KafkaError`` naming it.
        """
        configs = [CreatableTopic.CreatableTopicConfig(name=key, value=config_text(value))
                   for key, value in (config or {}).items()]
        client = Client(self.bootstrap, timeout_s=timeout_s)
        try:
            answer = client.bootstrap.call("CreateTopics", topics=[CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
                configs=configs)], timeout_ms=int(timeout_s * 1000))
            [created] = answer.topics
            if created.error_code:
                raise KafkaError(created.error_code, name, created.error_message)
            count = created.num_partitions if created.num_partitions > 0 else partitions  # -1: num.partitions
            _wait_for_leaders(client, name, count, time.monotonic() + timeout_s)
        finally:
            client.close()


def config_text(value: object) -> str:
    """A config or setting value as Kafka's text: True -> "true"."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _wait_for_leaders(client: Client, name: str, partitions: int, deadline: float) -> None:
    """Until the broker's metadata shows every partition of ``name`` led, so a producer can start at once."""
    while True:
        [topic] = client.metadata([name]).topics
        if topic.error_code == 0 and len(topic.partitions) == partitions \
                and all(partition.leader_id >= 0 for partition in topic.partitions):
            return
        if time.monotonic() > deadline:
            raise KafkaError(topic.error_code or ErrorCode.LEADER_NOT_AVAILABLE, name,
                             f"not every partition had a leader in time: {topic.partitions}")
        time.sleep(0.02)
