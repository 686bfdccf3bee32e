"""The records of ``__share_group_state`` (kbroker/share/state_records.py) and what they hold: Kafka's bytes,
where a share-partition's state lives, the batch combiner, replay, and random writes against a per-offset
model."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.share import coordinator as coordinator_module
from kbroker.share.coordinator import ShareCoordinatorConfig, ShareCoordinatorShard, coordinator_key, state_partition
from kbroker.share.persisted import StateBatch
from kbroker.share.state_records import (ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue,
                                         combine_state_batches, decode_key, decode_value, encode_key, encode_value)
from kbroker.wire import DecodeError
from kbroker.wire.errors import ErrorCode
from tests.share.coordinator_calls import (  # noqa: F401 (log and shard are fixtures)
    ACKNOWLEDGED, ARCHIVED, AVAILABLE, GROUP, NOW_MS, ONE_PARTITION, T1, T2, TOPICS, Log, batches, done, failed,
    initialize, initialized, log, only, persist_of, read, shard, summary, write)


# -- the records -------------------------------------------------------------------------------------------


def test_records_are_kafkas_bytes():
    key = ShareUpdateKey(group_id="g", topic_id=uuid.UUID(int=5), partition=3)
    assert encode_key(key).hex() == "0001" + "0001" "67" + "00" * 15 + "05" + "00000003"  # type 1, "g", uuid, 3
    assert encode_key(ShareSnapshotKey(group_id="g", topic_id=uuid.UUID(int=5), partition=3))[:2] == b"\x00\x00"
    value = ShareSnapshotValue(snapshot_epoch=1, state_epoch=2, leader_epoch=3, start_offset=4,
                               delivery_complete_count=7, create_timestamp=8, write_timestamp=9,
                               state_batches=[ShareSnapshotValue.StateBatch(first_offset=4, last_offset=5,
                                                                           delivery_state=2, delivery_count=1)])
    # version 0; the fields; the batch array (compact) and its empty tags; then tag 0 (4 bytes): 7
    assert encode_value(value).hex() == ("0000" "00000001" "00000002" "00000003" "0000000000000004"
                                         "0000000000000008" "0000000000000009"
                                         "02" "0000000000000004" "0000000000000005" "02" "0001" "00"
                                         "01" "00" "04" "00000007")
    untagged = ShareUpdateValue(snapshot_epoch=1, leader_epoch=2, start_offset=3)
    assert untagged.delivery_complete_count == -1
    assert encode_value(untagged).hex().endswith("0100")  # no batches, no tagged field: the default is left out


@pytest.mark.parametrize("key, value", [
    (ShareSnapshotKey(group_id="g", topic_id=T1, partition=1),
     ShareSnapshotValue(snapshot_epoch=3, state_epoch=2, leader_epoch=5, start_offset=10, delivery_complete_count=4,
                        create_timestamp=1, write_timestamp=2,
                        state_batches=[ShareSnapshotValue.StateBatch(first_offset=10, last_offset=12,
                                                                    delivery_state=4, delivery_count=2)])),
    (ShareUpdateKey(group_id="g", topic_id=T2, partition=0),
     ShareUpdateValue(snapshot_epoch=3, leader_epoch=5, start_offset=-1,
                      state_batches=[ShareUpdateValue.StateBatch(first_offset=1, last_offset=1, delivery_state=0,
                                                                 delivery_count=1)])),
    (ShareSnapshotKey(group_id="g", topic_id=T1, partition=0), None),
])
def test_records_round_trip(key, value):
    decoded_key = decode_key(encode_key(key))
    assert decoded_key == key
    assert decode_value(decoded_key, None if value is None else encode_value(value)) == value


@pytest.mark.parametrize("data, message", [
    (b"\x00", "too short"),
    (b"\x00\x02" + b"\x00\x01g" + bytes(20), "unknown __share_group_state record type 2"),
    (b"\x00\x00\x00\x01g" + bytes(10), "truncated"),
    (encode_key(ShareSnapshotKey(group_id="g", topic_id=T1, partition=0)) + b"\x00", "left over"),
])
def test_unreadable_keys_are_decode_errors(data, message):
    with pytest.raises(DecodeError, match=message):
        decode_key(data)


def test_a_value_of_an_unknown_version_is_a_decode_error():
    key = ShareUpdateKey(group_id="g", topic_id=T1, partition=0)
    data = b"\x00\x01" + encode_value(ShareUpdateValue())[2:]
    with pytest.raises(DecodeError, match="v1 is outside"):
        decode_value(key, data)


# -- where a share-partition's state lives -----------------------------------------------------------------


def java_hash(text: str) -> int:
    """Java's String.hashCode, written out as its definition: s[0]*31^(n-1) + ... + s[n-1], as an int."""
    units = text.encode("utf-16-be")
    code = sum(((units[i] << 8) | units[i + 1]) * 31 ** (len(units) // 2 - 1 - i // 2) for i in range(0, len(units), 2))
    code %= 1 << 32
    return code - (1 << 32) if code >= 1 << 31 else code


def test_the_java_hash_written_out_is_javas():
    assert java_hash("hello") == 99162322
    assert java_hash("polygenelubricants") == -(1 << 31)


def test_the_coordinator_key_prints_the_topic_id_as_kafka_does():
    assert coordinator_key("my:group", uuid.UUID(int=1), 3) == "my:group:AAAAAAAAAAAAAAAAAAAAAQ:3"


@pytest.mark.parametrize("group_id", ["group", "g-😀", "", "a" * 300])
@pytest.mark.parametrize("partition_count", [1, 7, 50])
def test_a_share_partition_maps_to_abs_of_its_keys_hash_modulo_the_partition_count(group_id, partition_count):
    for topic_id, partition in [(T1, 0), (uuid.UUID("f1d7a41c-0d6e-4a59-9ad4-3b9f2c9f0e11"), 17)]:
        code = java_hash(coordinator_key(group_id, topic_id, partition))
        assert state_partition(group_id, topic_id, partition, partition_count) == abs(code) % partition_count


def test_a_hash_of_integer_min_value_maps_to_partition_0(monkeypatch):
    monkeypatch.setattr(coordinator_module, "coordinator_key", lambda *key: "polygenelubricants")
    assert state_partition("g", T1, 0, 7) == 0  # Kafka's Utils.abs(Integer.MIN_VALUE) is 0


def test_a_share_partition_kept_by_another_partition_is_not_coordinated_here(log):
    config = ShareCoordinatorConfig(state_topic_partition_count=50)
    home = state_partition(GROUP, T1, 0, 50)
    elsewhere = ShareCoordinatorShard((home + 1) % 50, config, TOPICS.get)
    response, effects = elsewhere.initialize_state(1, initialize((T1, 0, 1, 0)), NOW_MS)
    assert only(response).error_code == ErrorCode.NOT_COORDINATOR and persist_of(effects) is None
    here = ShareCoordinatorShard(home, config, TOPICS.get)
    assert only(done(here, log, "initialize_state", initialize((T1, 0, 1, 0)))).error_code == ErrorCode.NONE


def test_settings_are_checked():
    with pytest.raises(ValueError):
        ShareCoordinatorConfig(updates_per_snapshot=501)
    with pytest.raises(ValueError):
        ShareCoordinatorConfig(updates_per_snapshot=-1)
    with pytest.raises(ValueError):
        ShareCoordinatorConfig(state_topic_partition_count=0)
    with pytest.raises(ValueError):
        ShareCoordinatorShard(1, ONE_PARTITION, TOPICS.get)
    assert ShareCoordinatorConfig() == ShareCoordinatorConfig(state_topic_partition_count=50, updates_per_snapshot=500)


# -- combining batches -------------------------------------------------------------------------------------


def sb(*batch_tuples) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(*batch) for batch in batch_tuples)


COMBINER_CASES = [
    # (so far, new, start offset, combined): each batch (first, last, state, count)
    ("both empty", [], [], 0, []),
    ("one batch is kept as it is", [(0, 9, 0, 1)], [], -1, [(0, 9, 0, 1)]),
    ("equal batches overlapping join", [(0, 5, 0, 1)], [(3, 9, 0, 1)], -1, [(0, 9, 0, 1)]),
    ("equal batches touching join", [(0, 4, 2, 1)], [(5, 9, 2, 1)], -1, [(0, 9, 2, 1)]),
    ("a gap is kept", [(0, 3, 2, 1)], [(5, 9, 2, 1)], -1, [(0, 3, 2, 1), (5, 9, 2, 1)]),
    ("a higher delivery count wins", [(0, 9, 2, 1)], [(3, 5, 0, 2)], -1, [(0, 2, 2, 1), (3, 5, 0, 2), (6, 9, 2, 1)]),
    ("a lower delivery count loses", [(3, 5, 0, 3)], [(0, 9, 4, 2)], -1, [(0, 2, 4, 2), (3, 5, 0, 3), (6, 9, 4, 2)]),
    ("at the same count the higher state wins", [(0, 9, 0, 1)], [(2, 4, 2, 1)], -1,
     [(0, 1, 0, 1), (2, 4, 2, 1), (5, 9, 0, 1)]),
    ("archived beats acknowledged", [(0, 4, 4, 1)], [(0, 9, 2, 1)], -1, [(0, 4, 4, 1), (5, 9, 2, 1)]),
    ("a lower state does not undo a higher one", [(0, 9, 2, 1)], [(0, 9, 0, 1)], -1, [(0, 9, 2, 1)]),
    ("same first offset, new one longer and higher", [(0, 4, 0, 1)], [(0, 9, 2, 1)], -1, [(0, 9, 2, 1)]),
    ("same last offset, new one inside and lower", [(0, 9, 2, 2)], [(5, 9, 0, 1)], -1, [(0, 9, 2, 2)]),
    ("overlapping new batches among themselves", [], [(0, 5, 0, 1), (3, 8, 2, 1), (4, 4, 0, 3)], -1,
     [(0, 2, 0, 1), (3, 3, 2, 1), (4, 4, 0, 3), (5, 8, 2, 1)]),
    ("unsorted input comes out sorted", [(20, 29, 0, 1)], [(0, 9, 2, 1)], -1, [(0, 9, 2, 1), (20, 29, 0, 1)]),
    ("below the start offset is dropped", [(0, 4, 0, 1)], [(5, 9, 2, 1)], 5, [(5, 9, 2, 1)]),
    ("a batch across the start offset is cut", [(0, 9, 0, 1)], [], 6, [(6, 9, 0, 1)]),
    ("cut, then joined", [(0, 6, 2, 1)], [(7, 9, 2, 1)], 3, [(3, 9, 2, 1)]),
    ("everything below the start offset", [(0, 4, 0, 1)], [(2, 8, 2, 1)], 9, []),
    ("a start offset of -1 prunes nothing", [(0, 4, 0, 1)], [], -1, [(0, 4, 0, 1)]),
    ("many updates to one offset", [(5, 5, 0, 1)], [(5, 5, 0, 2), (5, 5, 4, 2), (5, 5, 2, 2)], -1, [(5, 5, 4, 2)]),
]


@pytest.mark.parametrize("so_far, new, start_offset, expected", [case[1:] for case in COMBINER_CASES],
                         ids=[case[0] for case in COMBINER_CASES])
def test_the_batch_combiner(so_far, new, start_offset, expected):
    assert combine_state_batches(sb(*so_far), sb(*new), start_offset) == sb(*expected)


# -- replay ------------------------------------------------------------------------------------------------


def test_replaying_the_records_gives_the_same_state_and_the_same_answers(log):
    shard = ShareCoordinatorShard(0, ONE_PARTITION, TOPICS.get)
    initialized(shard, log, state_epoch=2)
    initialized(shard, log, topic=T2, partition=1, start_offset=-1)
    for step in range(11):  # more than three updates per snapshot: snapshots and updates in the log
        done(shard, log, "write_state", write(step, (step, step + 3, step % 3 * 2, 1 + step % 2), state_epoch=2,
                                              leader_epoch=step // 4, delivery_complete_count=step), NOW_MS + step)
        if step % 4 == 3:
            done(shard, log, "read_state", read((T1, 0, step // 4 + 1)))
    done(shard, log, "write_state", write(0, (0, 0, ACKNOWLEDGED, 1), topic=T2, partition=1))
    kinds = [decode_key(key).__class__.__name__ for key, _ in log.records]
    assert "ShareUpdateKey" in kinds and kinds.count("ShareSnapshotKey") > 2
    replayed = log.replayed()
    assert replayed.states() == shard.states()
    for request in (read((T1, 0, 3)), read((T2, 1, 0))):
        assert replayed.read_state(1, request, NOW_MS)[0] == shard.read_state(1, request, NOW_MS)[0]
    assert (replayed.read_state_summary(1, summary((T1, 0), (T2, 1)), NOW_MS)[0]
            == shard.read_state_summary(1, summary((T1, 0), (T2, 1)), NOW_MS)[0])
    # What comes next is written the same way after a reload: the same record.
    next_write = write(20, (20, 25, ARCHIVED, 2), state_epoch=2, leader_epoch=3)
    assert (persist_of(replayed.write_state(1, next_write, NOW_MS)[1]).records
            == persist_of(shard.write_state(1, next_write, NOW_MS)[1]).records)


def test_an_update_without_its_snapshot_is_kept_as_kafka_keeps_it():
    shard = ShareCoordinatorShard(0, ONE_PARTITION, TOPICS.get)
    key = ShareUpdateKey(group_id=GROUP, topic_id=T1, partition=0)
    shard.replay(key, ShareUpdateValue(snapshot_epoch=0, leader_epoch=2, start_offset=5, state_batches=[
        ShareUpdateValue.StateBatch(first_offset=5, last_offset=6, delivery_state=2, delivery_count=1)]))
    shard.replay(key, None)  # an update's tombstone: Kafka never writes one, and it deletes nothing
    stored = shard.state(GROUP, T1, 0)
    assert (stored.persisted.state_epoch, stored.persisted.start_offset, stored.state_epoch_seen) == (0, 5, None)
    assert batches(stored) == [(5, 6, ACKNOWLEDGED, 1)]


def test_an_update_with_start_offset_minus_one_keeps_the_start_offset(log):
    shard = ShareCoordinatorShard(0, ONE_PARTITION, TOPICS.get)
    initialized(shard, log, start_offset=4)
    shard.replay(ShareUpdateKey(group_id=GROUP, topic_id=T1, partition=0),
                 ShareUpdateValue(snapshot_epoch=0, leader_epoch=-1, start_offset=-1))
    stored = shard.state(GROUP, T1, 0)
    assert (stored.persisted.start_offset, stored.persisted.leader_epoch) == (4, 0)


# -- properties --------------------------------------------------------------------------------------------

OFFSET_MAX = 40
BATCH = st.tuples(st.integers(0, OFFSET_MAX), st.integers(0, 6), st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED]),
                  st.integers(1, 4)).map(lambda t: (t[0], min(t[0] + t[1], OFFSET_MAX), t[2], t[3]))
WRITE = st.tuples(st.integers(0, OFFSET_MAX), st.lists(BATCH, max_size=4))
OUTCOME = st.sampled_from(["durable", "durable", "durable", "failed"])


def model_after(model: dict[int, tuple[int, int]], start: int, start_offset: int,
                new_batches: list[tuple[int, int, int, int]]) -> tuple[dict[int, tuple[int, int]], int]:
    """The naive state: per offset, the (delivery count, state) with the highest priority ever written, and
    the start offset as the highest ever written, below which nothing is kept."""
    start = max(start, start_offset)
    model = dict(model)
    for first, last, state, count in new_batches:
        for offset in range(first, last + 1):  # bounded: offsets up to OFFSET_MAX
            model[offset] = max(model.get(offset, (count, state)), (count, state))
    return {offset: value for offset, value in model.items() if offset >= start}, start


def flattened(state_batches) -> dict[int, tuple[int, int]]:
    """(delivery count, state) per offset of well-formed batches."""
    per_offset = {}
    previous = None
    for batch in state_batches:
        assert batch.first_offset <= batch.last_offset
        if previous is not None:  # sorted, disjoint, touching equal batches joined
            assert previous.last_offset < batch.first_offset
            assert not (previous.last_offset + 1 == batch.first_offset
                        and (previous.delivery_state, previous.delivery_count)
                        == (batch.delivery_state, batch.delivery_count))
        for offset in range(batch.first_offset, batch.last_offset + 1):
            per_offset[offset] = (batch.delivery_count, batch.delivery_state)
        previous = batch
    return per_offset


@settings(max_examples=200, deadline=None)
@given(writes=st.lists(st.tuples(WRITE, OUTCOME), max_size=25), updates_per_snapshot=st.sampled_from([0, 1, 2, 5, 500]),
       in_flight=st.integers(1, 4))
def test_the_combined_state_is_the_per_offset_model_and_replay_rebuilds_it(writes, updates_per_snapshot, in_flight):
    config = ShareCoordinatorConfig(state_topic_partition_count=1, updates_per_snapshot=updates_per_snapshot)
    shard, log = ShareCoordinatorShard(0, config, TOPICS.get), Log()
    initialized(shard, log)
    model, start = {}, 0
    waiting: list[tuple[list, str, tuple]] = []  # writes on their way, settled in order, up to ``in_flight``
    any_failed = False

    def settle_first():
        nonlocal model, start, any_failed
        effects, outcome, (start_offset, new_batches) = waiting.pop(0)
        if outcome == "failed":
            failed(effects)
            any_failed = True
        else:
            log.durable(effects)
            model, start = model_after(model, start, start_offset, new_batches)

    for step, ((start_offset, new_batches), outcome) in enumerate(writes):
        _, effects = shard.write_state(1, write(start_offset, *new_batches), NOW_MS + step)
        waiting.append((effects, outcome, (start_offset, new_batches)))
        if len(waiting) >= in_flight:
            settle_first()
    while waiting:  # bounded: one write settled per turn
        settle_first()
    stored = shard.state(GROUP, T1, 0)
    assert shard.writes_in_flight == 0
    if not any_failed or in_flight == 1:
        # A snapshot made while a write that later failed was on its way holds that write's batches (the log
        # says so, and a reload would too), so the model holds when no failure had a write after it in flight.
        assert (flattened(stored.persisted.state_batches), stored.persisted.start_offset) == (model, start)
    else:
        flattened(stored.persisted.state_batches)  # still well formed
    assert log.replayed(config).states() == shard.states()


@settings(max_examples=100, deadline=None)
@given(so_far=st.lists(BATCH, max_size=5), new=st.lists(BATCH, max_size=5), start_offset=st.integers(-1, OFFSET_MAX))
def test_the_combiner_is_the_per_offset_model(so_far, new, start_offset):
    combined = combine_state_batches(sb(*so_far), sb(*new), start_offset)
    expected, _ = model_after({}, 0, 0, so_far + new)
    if start_offset >= 0:
        expected = {offset: value for offset, value in expected.items() if offset >= start_offset}
    assert flattened(combined) == expected
