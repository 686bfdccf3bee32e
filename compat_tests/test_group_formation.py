"""Three consumers of one client subscribing at the same moment form a classic group, again and again (issue 31).

kafka-python 3.0.12 hung in about one formation in ten when a new group formed at
once around its first member: that member led alone, assigned before it knew the
topic's partitions (so assigned nothing), rejoined when they arrived, and if its
poll() timed out while its SyncGroup was in flight it never completed that join
(its need_rejoin() had turned false in the assignment), so it stayed without
partitions and without heartbeats for good. The initial rebalance delay
(group.initial.rebalance.delay.ms, short for the tests' brokers) lets the three
join one first generation, led by a member that knows the partitions.
Each fresh broker's group coordinator is made ready (``__consumer_offsets``
created and loaded) before its first round: on a loaded machine that creation
can spread the members' first joins wider than a short delay (Kafka's
default of 3 s, which kbroker keeps, covers it), and this test is about the
formation itself.

Each round starts three member processes (compat_tests/group_member.py), lets them
subscribe together and waits until each owns two of the six partitions; a fresh
broker every few rounds. Formation times are printed (pytest -s).
"""

from __future__ import annotations

import statistics
import time

import confluent_kafka.admin as admin
import pytest

from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME
from testkit.broker_process import BrokerProcess
from testkit.raw_client import call
from testkit.group_member import Member, balanced, wait_until

ROUNDS = 50
ROUNDS_PER_BROKER = 5
PARTITIONS = 6
MEMBERS = 3
READY_TIMEOUT_S = 30  # the processes start and connect before the clock starts
FORMATION_TIMEOUT_S = 20  # a hung member never gets its share; the others get three each after its session times out
CALL_TIMEOUT_S = 10
# For kafka-python a third of Kafka's default (3000, kbroker's too), not the other tests' 300 ms: in about one
# formation in a hundred its leader still had no metadata for the topic 600 ms after its first JoinGroup, led
# the first generation assigning nothing, and then hung in the rejoin as described above.
INITIAL_DELAY_MS = {"kafka-python": 1000}
FindCoordinatorRequest = API_BY_NAME["FindCoordinator"].request_class


def coordinator_ready(port: int) -> None:
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while True:
        found = call(port, "FindCoordinator", 3, FindCoordinatorRequest(key="warm-up", key_type=0))
        if found.error_code == ErrorCode.NONE:
            return
        assert time.monotonic() < deadline, f"no group coordinator in {CALL_TIMEOUT_S} s: {found}"
        time.sleep(0.05)


def form_once(bootstrap: str, client: str, name: str, log_dir) -> float:
    """Three members subscribe at once; seconds until each owns its two partitions."""
    client_admin = admin.AdminClient({"bootstrap.servers": bootstrap})
    client_admin.create_topics([admin.NewTopic(name, PARTITIONS)])[name].result(timeout=CALL_TIMEOUT_S)
    members = [Member(client, bootstrap, name, name, f"{name}-{index}", log_dir, wait_for_start=True).start()
               for index in range(MEMBERS)]
    try:
        assert wait_until(lambda: all(m.last("ready") for m in members), READY_TIMEOUT_S), [m.describe() for m in members]
        started = time.monotonic()
        for member in members:
            member.send("start")
        formed = wait_until(lambda: balanced(members, PARTITIONS), FORMATION_TIMEOUT_S)
        assert formed, f"{name}: {[m.describe() for m in members]}"
        return time.monotonic() - started
    finally:
        for member in members:
            member.kill()


@pytest.mark.slow
@pytest.mark.parametrize("client", ["kafka-python", "confluent-classic", "aiokafka"])
def test_three_consumers_form_a_group_fifty_times_in_a_row(tmp_path, client):
    formation_s = []
    for first in range(0, ROUNDS, ROUNDS_PER_BROKER):
        broker = BrokerProcess(tmp_path / f"broker-{first}", None, f"group.initial.rebalance.delay.ms={INITIAL_DELAY_MS.get(client, 300)}")
        broker.start()
        try:
            coordinator_ready(broker.port)
            for round_number in range(first, first + ROUNDS_PER_BROKER):
                formation_s.append(form_once(broker.bootstrap, client, f"formation-{round_number}", tmp_path))
        finally:
            broker.kill()
    print(f"\n{client}: {len(formation_s)} formations of {MEMBERS} members, none left without partitions; "
          f"formed in {statistics.median(formation_s):.2f} s median, {max(formation_s):.2f} s at most")
