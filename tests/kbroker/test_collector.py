"""The command's collector policy (kbroker/collector.py): survivors of a full collection are frozen, and
thawed for a walk of everything once they have doubled or the interval has passed."""

import gc

from kbroker.collector import WALK_ALL_EVERY_S, FreezeAfterFullCollections


class FakeCollector:
    """``gc``'s counts, moved by the test: tracked objects, frozen ones, full collections; a block per object."""

    def __init__(self, frozen: int = 100) -> None:
        self.frozen = frozen
        self.tracked = 0  # not frozen
        self.full = 0

    def blocks(self) -> int:
        return self.frozen + self.tracked

    def collect_full(self, survivors: int) -> None:
        self.full += 1
        self.tracked = survivors

    def get_stats(self):
        return [{}, {}, {"collections": self.full}]

    def freeze(self) -> None:
        self.frozen += self.tracked
        self.tracked = 0

    def unfreeze(self) -> None:
        self.tracked += self.frozen
        self.frozen = 0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_nothing_happens_without_a_full_collection():
    fake = FakeCollector()
    policy = FreezeAfterFullCollections(clock=Clock(), collector=fake, allocated_blocks=fake.blocks)
    fake.tracked = 5_000
    policy.check()
    assert (fake.frozen, fake.tracked, policy.freezes, policy.thaws) == (100, 5_000, 0, 0)


def test_survivors_are_frozen_until_the_process_has_doubled_then_walked_again():
    fake = FakeCollector(frozen=100)
    policy = FreezeAfterFullCollections(clock=Clock(), collector=fake, allocated_blocks=fake.blocks)
    fake.collect_full(survivors=60)
    policy.check()
    assert (fake.frozen, fake.tracked) == (160, 0)
    fake.collect_full(survivors=30)
    policy.check()
    assert (fake.frozen, fake.tracked) == (190, 0)
    fake.collect_full(survivors=20)
    policy.check()
    assert (fake.frozen, fake.tracked, policy.thaws) == (0, 210, 1)  # past twice the 100 walked last
    fake.collect_full(survivors=150)  # the next full collection walks all 210 and finds 60 in cycles
    policy.check()
    assert (fake.frozen, fake.tracked, policy.freezes) == (150, 0, 3)
    fake.collect_full(survivors=140)
    policy.check()
    assert (fake.frozen, fake.tracked) == (290, 0)  # not yet twice the 150 of that walk
    fake.collect_full(survivors=20)
    policy.check()
    assert (fake.frozen, fake.tracked, policy.thaws) == (0, 310, 2)


def test_frozen_objects_are_walked_again_after_the_interval():
    fake = FakeCollector(frozen=1_000)
    clock = Clock()
    policy = FreezeAfterFullCollections(clock=clock, collector=fake, allocated_blocks=fake.blocks)
    fake.collect_full(survivors=10)
    policy.check()
    assert fake.frozen == 1_010
    clock.now = WALK_ALL_EVERY_S
    fake.collect_full(survivors=10)
    policy.check()
    assert (fake.frozen, fake.tracked, policy.thaws) == (0, 1_020, 1)  # not doubled, but the interval passed


def test_with_the_real_collector_a_full_collection_s_survivors_are_frozen():
    gc.collect()
    frozen_before = gc.get_freeze_count()
    policy = FreezeAfterFullCollections()
    kept = [[index] for index in range(10_000)]
    try:
        gc.collect()
        policy.check()
        assert gc.get_freeze_count() >= frozen_before + len(kept)
        assert all(gc.is_tracked(item) for item in kept[:3])
        young, middle, _ = gc.get_count()
        assert young < 1_000 and middle < 20
    finally:
        gc.unfreeze()  # the test's process is pytest's: leave nothing frozen
