"""What the share-partition tests share: a fake clock, and an empty share-partition of partition 0."""

import pytest

from kbroker.log.clock import FakeClock
from kbroker.share.partition import SharePartition
from tests.share.partition_calls import CONFIG


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def partition() -> SharePartition:
    return SharePartition(CONFIG, 0)
