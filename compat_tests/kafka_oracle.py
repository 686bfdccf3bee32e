"""The reference Apache Kafka (testkit/reference_kafka.py) as pytest fixtures, for the tests that compare
kbroker with it. A test module imports the fixtures it uses:

    from compat_tests.kafka_oracle import reference_kafka  # noqa: F401

``reference_kafka``: one node, started once per session and shared by every module that imports it.
``reference_kafka_cluster``: three nodes forming one quorum, started once per module.

Where Maven, Maven Central or java is missing they skip with the one line saying which; where ``CI`` or
``KBTEST_REQUIRE_KAFKA=1`` is set they fail with it instead, so that CI never skips the comparison.
"""

from __future__ import annotations

import os

import pytest

from testkit.maven import Unavailable
from testkit.reference_kafka import ReferenceKafka

START_TIMEOUT_S = 20

# A session fixture imported into several modules is a fixture of each of them, each with its own
# session-long value: these make them one Kafka, stopped when the last of them is torn down (at the
# session's end), and ask Maven only once when it cannot help.
_shared: ReferenceKafka | None = None
_shared_users = 0
_unavailable: str | None = None


def kafka_required() -> bool:
    """Whether a reference Kafka that cannot be had fails the test rather than skipping it."""
    ci = os.environ.get("CI", "").strip().lower()
    return ci not in ("", "0", "false", "no") or os.environ.get("KBTEST_REQUIRE_KAFKA") == "1"


def skip_or_fail(reason: str) -> None:
    if kafka_required():
        pytest.fail(f"the reference Kafka is required here (CI or KBTEST_REQUIRE_KAFKA=1 is set): {reason}",
                    pytrace=False)
    pytest.skip(reason)


def start_reference_kafka(directory, **options) -> ReferenceKafka:
    """A started :class:`ReferenceKafka` (``options`` as its own), or the test skipped (failed on CI)
    with the one line saying what is missing."""
    global _unavailable
    if _unavailable is not None:
        skip_or_fail(_unavailable)
    kafka = ReferenceKafka(directory, **options)
    try:
        kafka.start(timeout_s=START_TIMEOUT_S)
    except Unavailable as missing:
        _unavailable = str(missing)
        skip_or_fail(_unavailable)
    return kafka


@pytest.fixture(scope="session")
def reference_kafka(tmp_path_factory):
    """A one-node Apache Kafka, Kafka's defaults (internal topics replicated once); ``.bootstrap``."""
    global _shared, _shared_users
    if _shared is None:
        _shared = start_reference_kafka(tmp_path_factory.mktemp("reference-kafka"))
    kafka = _shared
    _shared_users += 1
    try:
        yield kafka
    finally:
        _shared_users -= 1
        if _shared_users == 0:
            _shared = None
            kafka.stop()


@pytest.fixture(scope="module")
def reference_kafka_cluster(tmp_path_factory):
    """Three combined Apache Kafka nodes in one quorum (controller.quorum.voters), Kafka's defaults."""
    kafka = start_reference_kafka(tmp_path_factory.mktemp("reference-kafka-cluster"), nodes=3)
    try:
        yield kafka
    finally:
        kafka.stop()
