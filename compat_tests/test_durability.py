"""Nothing acknowledged is lost: acks=all while the broker is SIGKILLed and restarted."""

import time

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from testkit.broker_process import BrokerProcess

KILLS = 5


@pytest.mark.slow
def test_acknowledged_messages_survive_sigkill_restarts(tmp_path):
    broker = BrokerProcess(tmp_path / "data")
    broker.start()
    try:
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        client.create_topics([admin.NewTopic("durable", 1)])["durable"].result(timeout=10)
        acknowledged = []

        def delivered(error, message):
            if error is None:
                acknowledged.append(int(message.value()))

        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
            "max.in.flight.requests.per.connection": 1, "message.timeout.ms": 60000,
            "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
        })
        sequence = 0
        for _ in range(KILLS):
            deadline = time.monotonic() + 0.7
            while time.monotonic() < deadline:
                producer.produce("durable", value=b"%d" % sequence, callback=delivered)
                sequence += 1
                producer.poll(0.001)
            broker.kill()
            broker.start()
        assert producer.flush(60) == 0
        assert len(acknowledged) > KILLS * 10

        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition("durable", 0, confluent_kafka.OFFSET_BEGINNING)])
        offsets, values = [], []
        deadline = time.monotonic() + 60
        while len(set(values)) < len(set(acknowledged)) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                offsets.append(message.offset())
                values.append(int(message.value()))
        consumer.close()
        assert set(acknowledged) <= set(values), sorted(set(acknowledged) - set(values))[:10]
        assert offsets == list(range(len(offsets)))  # no gaps
        seen, first_seen = set(), []
        for value in values:
            if value not in seen:
                seen.add(value)
                first_seen.append(value)
        assert first_seen == sorted(first_seen)  # order kept (retries may repeat, never reorder)
        print(f"\n{len(acknowledged)} acknowledged across {KILLS} SIGKILLs, {len(values) - len(set(values))} duplicates from retries")
    finally:
        broker.kill()
