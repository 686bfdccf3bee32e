"""KIP-848 consumer groups (confluent-kafka, group.protocol=consumer), each member a process of its own.

The same scenarios as the classic protocol's (compat_tests/test_groups.py): here
the broker owns the session timeout and the heartbeat interval
(group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms, set
short for the test) and computes the assignment itself (uniform by default).
"""

import confluent_kafka
import confluent_kafka.admin as admin
import pytest

from testkit.broker_process import BrokerProcess
from testkit.group_member import Member, balanced, wait_until
from compat_tests.test_groups import (
    BROKER_OVERRIDES, CALL_TIMEOUT_S, HEARTBEAT_INTERVAL_MS, PARTITIONS, SESSION_TIMEOUT_MS, SETTLE_TIMEOUT_S, churn, create_topic,
    owners, three_members_share_and_hand_over,
)

CLIENT = "confluent-consumer"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("consumer-groups-broker"), None, *BROKER_OVERRIDES)
    process.start()
    yield process
    process.kill()


@pytest.mark.slow
def test_three_members_share_six_partitions_and_hand_over(broker, tmp_path):
    three_members_share_and_hand_over(broker.bootstrap, CLIENT, tmp_path, session_timeout_ms=SESSION_TIMEOUT_MS)


@pytest.mark.slow
def test_churn_every_record_is_processed_and_committed(broker, tmp_path):
    churn(broker.bootstrap, CLIENT, tmp_path, seed=11)


def test_describe_shows_the_members_epochs_and_assignments(broker, tmp_path):
    """ConsumerGroupDescribe (AdminClient.describe_consumer_groups) of a settled KIP-848 group."""
    topic = group = "described"
    create_topic(broker.bootstrap, topic)
    members = [Member(CLIENT, broker.bootstrap, group, topic, f"described-{i}", tmp_path,
                      heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS).start() for i in range(2)]
    try:
        assert wait_until(lambda: balanced(members, PARTITIONS), SETTLE_TIMEOUT_S), owners(members)
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap})

        def settled_description():
            description = client.describe_consumer_groups([group])[group].result(timeout=CALL_TIMEOUT_S)
            return description if str(description.state).endswith("STABLE") else None

        assert wait_until(settled_description, SETTLE_TIMEOUT_S, 0.2)
        description = settled_description()
        assert description.type == confluent_kafka.ConsumerGroupType.CONSUMER
        assert description.partition_assignor == "uniform"  # Kafka's default group.consumer.assignors
        by_member = {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in description.members}
        reported = {member.last("assigned")["member_id"]: sorted(member.partitions) for member in members}
        assert by_member == reported
        for member in description.members:  # reconciled: what it owns is what the broker targets
            assert sorted(tp.partition for tp in member.target_assignment.topic_partitions) == by_member[member.member_id]
        listed = client.list_consumer_groups().result(timeout=CALL_TIMEOUT_S).valid
        assert [(str(g.type), str(g.state)) for g in listed if g.group_id == group] == [("ConsumerGroupType.CONSUMER", "ConsumerGroupState.STABLE")]
    finally:
        for member in members:
            member.kill()
