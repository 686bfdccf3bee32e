"""Kafka as the oracle on three nodes (issue 40): each session of compat_tests/differential_cluster_sessions.py
runs against a fresh three-node kbroker cluster (kbroker/testing/process_cluster.py) and against a three-node
Apache Kafka (compat_tests/kafka_oracle.py's ``reference_kafka_cluster``), both talking to node 1, and every
answer is compared field by field after testkit/differential.py's rules, as the one-node suite
(compat_tests/test_differential.py) compares them; with its findings files
(``compat_tests/differential_findings/<session>.txt``, written afresh with ``KBTEST_DIFFERENTIAL_WRITE=1``).

Both clusters run on their defaults (internal topics replicated three times); kbroker's test heartbeats are
quicker than Kafka's (``TEST_TIMINGS``), which changes when a broker is ready, not what it answers.
"""

from __future__ import annotations

import pytest

from compat_tests.differential_cluster_sessions import SESSIONS
from compat_tests.kafka_oracle import reference_kafka_cluster  # noqa: F401 (the module's reference cluster)
from compat_tests.test_differential import FINDINGS, run_both
from kbroker.testing.process_cluster import running_cluster
from testkit.differential import Totals, check_findings

pytestmark = pytest.mark.timeout(900)
TOTALS = Totals()


@pytest.fixture(scope="module")
def kbroker_cluster():
    with running_cluster(3) as cluster:
        yield cluster.nodes[0]  # node 1: a session's requests go there, as they go to Kafka's node 1


@pytest.fixture(scope="module", autouse=True)
def totals():
    yield TOTALS
    print(f"\n{TOTALS.summary('differential (three nodes)')}")


@pytest.mark.parametrize("session", SESSIONS, ids=[session.__name__ for session in SESSIONS])
def test_a_cluster_answers_as_kafkas_does(reference_kafka_cluster, kbroker_cluster, session):
    result = run_both(session, kbroker_cluster, reference_kafka_cluster)
    TOTALS.sessions += 1
    TOTALS.add(result)
    check_findings(FINDINGS / f"{session.__name__}.txt", result)
