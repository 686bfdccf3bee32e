"""Kafka as the oracle for the security APIs (issue 40): the sessions of
compat_tests/differential_security_sessions.py run against a kbroker and a reference Apache Kafka that
both listen with SASL_PLAINTEXT (PLAIN and SCRAM-SHA-256) and authorize by ACLs, and every answer must be
the same field by field, but for what testkit/differential.py's RULES say is not comparable.

Both brokers are configured alike: a PLAINTEXT listener (the readiness checks and Kafka's own inter-broker
and controller traffic, as User:ANONYMOUS) beside the SASL_PLAINTEXT one the sessions use; PLAIN's users
in the listener's JAAS config; a SCRAM-SHA-256 credential of 4096 iterations for each of them (Kafka's
storage tool writes them at format time, kbroker's admin makes them before the first session); the
StandardAuthorizer (kbroker answers to its name), ``super.users`` admin and ANONYMOUS, and no ACL else; a
new group's first rebalance not delayed. Findings are kept as in compat_tests/test_differential.py, in
``compat_tests/differential_findings/<session>.txt`` (``KBTEST_DIFFERENTIAL_WRITE=1`` writes them afresh).
"""

from __future__ import annotations

import os

import pytest

from compat_tests.differential_security_sessions import SESSIONS, SCRAM_ITERATIONS, USERS, alter_scram, plain, upsertion
from compat_tests.kafka_oracle import start_reference_kafka
from compat_tests.test_differential import FINDINGS, run_both
from kbroker.testing import running_broker
from testkit.differential import Side, Totals, check_findings

SUPER_USERS = "User:admin;User:ANONYMOUS"  # ANONYMOUS: the PLAINTEXT listener, Kafka's brokers and controller
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SETTINGS = {"authorizer.class.name": AUTHORIZER, "super.users": SUPER_USERS,
            "group.initial.rebalance.delay.ms": 0}
TOTALS = Totals()


class Listener:
    """What run_both reads of a broker (host and port, or a bootstrap): here its SASL_PLAINTEXT listener."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port, self.bootstrap = host, port, f"{host}:{port}"


@pytest.fixture(scope="module")
def kbroker():
    plain_users = " ".join(f'user_{user}="{password}"' for user, password in USERS.items())
    settings = {**SETTINGS,
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"}
    with running_broker(settings=settings) as broker:
        host, port = broker.address("SASL_PLAINTEXT").rsplit(":", 1)
        listener = Listener(host, int(port))
        _make_scram_users(listener)
        yield listener


def _make_scram_users(listener: Listener) -> None:
    """What Kafka's storage tool does at format time (``--add-scram``): a credential for every user."""
    admin = Side("kbroker", listener.host, listener.port)
    try:
        plain(admin, "admin")
        answer = alter_scram(admin, upsertions=[upsertion(user, password, iterations=SCRAM_ITERATIONS,
                                                          salt=os.urandom(16)) for user, password in USERS.items()])
        assert all(result.error_code == 0 for result in answer.results), answer
    finally:
        admin.close()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    reference = start_reference_kafka(tmp_path_factory.mktemp("reference-kafka-sasl"), overrides=SETTINGS,
                                      sasl_users=USERS)
    try:
        yield Listener("127.0.0.1", reference.nodes[0].sasl_port)
    finally:
        reference.stop()


@pytest.fixture(scope="module", autouse=True)
def totals():
    yield TOTALS
    print(f"\n{TOTALS.summary('differential security')}")


@pytest.mark.parametrize("session", SESSIONS, ids=[session.__name__ for session in SESSIONS])
def test_kbroker_answers_as_kafka_does_on_a_sasl_listener_with_acls(kbroker, kafka, session):
    result = run_both(session, kbroker, kafka)
    TOTALS.sessions += 1
    TOTALS.add(result)
    check_findings(FINDINGS / f"{session.__name__}.txt", result)
