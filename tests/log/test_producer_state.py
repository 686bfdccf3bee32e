"""Producer state: validation, transactions, expiration and snapshots, after Kafka's ProducerStateManagerTest."""

import logging
import os
import struct
import tempfile

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.log.producer_state import (
    BATCHES_TO_RETAIN,
    CompletedTxn,
    DuplicateBatch,
    ProducerStateManager,
    TxnMarker,
    Validation,
    delete_snapshots_after,
    delete_snapshots_before,
    list_snapshot_offsets,
    load_latest_snapshot,
    read_txn_marker,
    snapshot_path,
)
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import (
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    ControlRecordType,
    Record,
    build_batch,
    build_control_batch,
)

PID = 1
EPOCH = 0
INT32_MAX = 2**31 - 1
HOUR_MS = 3_600_000
NOW_MS = 1_700_000_000_000
COMMIT = ControlRecordType.COMMIT
ABORT = ControlRecordType.ABORT


def data(seq, offset, count=1, *, pid=PID, epoch=EPOCH, txn=False, timestamp=NOW_MS):
    """The header of a data batch of ``count`` records at ``offset``."""
    return BatchHeader(
        base_offset=offset,
        batch_length=0,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=TRANSACTIONAL_MASK if txn else 0,
        last_offset_delta=count - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        record_count=count,
    )


def control(offset, *, pid=PID, epoch=EPOCH, timestamp=NOW_MS):
    """The header of a transaction marker batch at ``offset``."""
    return data(-1, offset, pid=pid, epoch=epoch, timestamp=timestamp)._replace(
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK
    )


def apply(manager, header, marker=None):
    return manager.update(header, header.base_offset, header.last_offset, marker=marker)


def end_txn(manager, offset, kind=COMMIT, *, pid=PID, epoch=EPOCH, coordinator_epoch=0, timestamp=NOW_MS):
    return apply(manager, control(offset, pid=pid, epoch=epoch, timestamp=timestamp), TxnMarker(kind, coordinator_epoch))


def produce(manager, header, *, is_from_client=True, marker=None) -> Validation:
    """What a leader does with one batch: validate, then append and update when allowed."""
    validation = manager.validate(header, is_from_client=is_from_client, marker=marker)
    if validation.should_append:
        apply(manager, header, marker)
    return validation


def state_of(manager):
    return manager.producer_entries(), manager.ongoing_transactions(), manager.end_offset


# --- validation, table driven ---------------------------------------------------------

FIVE_BATCHES = [data(seq, seq, 2) for seq in range(0, 10, 2)]  # sequences 0-1, 2-3, ... at the same offsets
OK = ErrorCode.NONE
OUT_OF_ORDER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
BAD_EPOCH = ErrorCode.INVALID_PRODUCER_EPOCH


def marker(offset, kind=COMMIT, epoch=EPOCH, coordinator_epoch=0):
    return (control(offset, epoch=epoch), TxnMarker(kind, coordinator_epoch))


VALIDATION_CASES = [
    # (history applied in order, candidate, expected error or duplicate, is_from_client)
    pytest.param([], data(0, 0), OK, True, id="new producer at sequence 0"),
    pytest.param([], data(17, 0, epoch=3), OK, True, id="unknown producer at any sequence (KIP-360)"),
    pytest.param([data(0, 0)], data(1, 1), OK, True, id="next sequence"),
    pytest.param([data(0, 0, 5)], data(5, 5), OK, True, id="next sequence after a multi-record batch"),
    pytest.param([data(0, 0), data(1, 1)], data(5, 2), OUT_OF_ORDER, True, id="gap"),
    pytest.param([data(0, 0), data(1, 1)], data(1, 2, 2), OUT_OF_ORDER, True, id="overlaps but is no duplicate"),
    pytest.param([data(0, 0, 3)], data(0, 3), OUT_OF_ORDER, True, id="same first sequence, other range"),
    *(
        pytest.param(
            FIVE_BATCHES,
            FIVE_BATCHES[index]._replace(base_offset=99),
            DuplicateBatch(2 * index, 2 * index + 1, NOW_MS),
            True,
            id=f"duplicate of batch {index + 1} of the last five",
        )
        for index in range(BATCHES_TO_RETAIN)
    ),
    pytest.param(
        [data(0, 0, 2), *[data(seq, seq, 2) for seq in range(2, 12, 2)]],
        data(0, 99, 2),
        OUT_OF_ORDER,
        True,
        id="retry of the sixth-latest batch is out of order",
    ),
    pytest.param([data(0, 0, epoch=1)], data(0, 1, epoch=0), BAD_EPOCH, True, id="duplicate from an older epoch"),
    pytest.param([data(0, 0, epoch=1)], data(1, 1, epoch=0), BAD_EPOCH, True, id="stale epoch"),
    pytest.param([data(0, 0), data(1, 1)], data(0, 2, epoch=1), OK, True, id="bumped epoch from sequence 0"),
    pytest.param([data(0, 0), data(1, 1)], data(2, 2, epoch=1), OUT_OF_ORDER, True, id="bumped epoch not from 0"),
    pytest.param([data(INT32_MAX, 0)], data(0, 1), OK, True, id="sequence wraps to 0 after int32 max"),
    pytest.param([data(INT32_MAX, 0)], data(1, 1), OUT_OF_ORDER, True, id="wrap must land on 0"),
    pytest.param([data(INT32_MAX - 10, 0, 21)], data(10, 21), OK, True, id="after a batch whose sequences wrap"),
    pytest.param(
        [data(INT32_MAX - 10, 0, 21)],
        data(INT32_MAX - 10, 50, 21),
        DuplicateBatch(0, 20, NOW_MS),
        True,
        id="duplicate of a batch whose sequences wrap",
    ),
    pytest.param([marker(0, epoch=2)], data(17, 1, epoch=2), OUT_OF_ORDER, True, id="only a marker: must restart"),
    pytest.param([marker(0, epoch=2)], data(0, 1, epoch=2), OK, True, id="only a marker: sequence 0"),
    pytest.param([marker(0, epoch=2)], data(0, 1, epoch=0), BAD_EPOCH, True, id="only a marker: still fences"),
    pytest.param(
        [data(0, 0, txn=True), data(1, 1, txn=True), marker(2, ABORT, epoch=1)],
        data(2, 3, epoch=1, txn=True),
        OUT_OF_ORDER,
        True,
        id="marker bumped the epoch: sequence must reset",
    ),
    pytest.param(
        [data(0, 0, txn=True), data(1, 1, txn=True), marker(2, ABORT, epoch=1)],
        data(2, 3, epoch=2, txn=True),
        OUT_OF_ORDER,
        True,
        id="epoch above the marker's: sequence must reset too",
    ),
    pytest.param(
        [data(0, 0, txn=True), data(1, 1, txn=True), marker(2, ABORT, epoch=1)],
        data(0, 3, epoch=1, txn=True),
        OK,
        True,
        id="marker bumped the epoch: sequence 0",
    ),
    pytest.param([data(0, 0, txn=True)], data(1, 1), ErrorCode.INVALID_TXN_STATE, True, id="plain batch in a txn"),
    pytest.param([data(0, 0, txn=True)], data(1, 1, txn=True), OK, True, id="transactional batch in a txn"),
    pytest.param([data(0, 0, txn=True), marker(1)], data(1, 2), OK, True, id="plain batch after the commit"),
    pytest.param([data(0, 0, txn=True)], data(-1, 1, pid=-1), OK, True, id="no producer id: nothing checked"),
    pytest.param([data(-1, 0, txn=True)], data(-1, 1, txn=True), OK, False, id="coordinator: no sequences"),
    pytest.param([data(5, 0, epoch=2)], data(-1, 1, epoch=1), BAD_EPOCH, False, id="coordinator: epochs checked"),
    pytest.param([data(3, 0, txn=True)], data(7, 1), ErrorCode.INVALID_TXN_STATE, False, id="coordinator: txn state"),
    pytest.param([data(3, 0)], data(3, 1), OK, False, id="coordinator: no duplicate detection"),
    pytest.param([data(0, 0, epoch=5, txn=True)], marker(1, epoch=3), BAD_EPOCH, False, id="marker of an old epoch"),
    pytest.param([marker(0, coordinator_epoch=1)], marker(1, coordinator_epoch=1), OK, False, id="same coordinator"),
    pytest.param([marker(0, coordinator_epoch=1)], marker(1, coordinator_epoch=2), OK, False, id="newer coordinator"),
    pytest.param(
        [marker(0, coordinator_epoch=2)],
        marker(1, coordinator_epoch=1),
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        False,
        id="zombie coordinator",
    ),
]


@pytest.mark.parametrize(("history", "candidate", "expected", "is_from_client"), VALIDATION_CASES)
def test_validate(history, candidate, expected, is_from_client):
    manager = ProducerStateManager()
    for step in history:
        header, txn_marker = (step, None) if isinstance(step, BatchHeader) else step
        apply(manager, header, txn_marker)
    header, txn_marker = (candidate, None) if isinstance(candidate, BatchHeader) else candidate
    before = state_of(manager)

    validation = manager.validate(header, is_from_client=is_from_client, marker=txn_marker)

    if isinstance(expected, DuplicateBatch):
        assert validation == Validation(duplicate=expected)
        assert not validation.should_append
    else:
        assert validation.error == expected, validation.message
        assert validation.duplicate is None
        assert validation.should_append == (expected == OK)
        assert bool(validation.message) == (expected != OK)
    assert state_of(manager) == before  # validation never changes the state


def test_basic_id_mapping_as_a_leader_sees_it():
    manager = ProducerStateManager()
    assert produce(manager, data(0, 0)).should_append
    assert produce(manager, data(1, 1)).should_append
    assert produce(manager, data(1, 2)).duplicate == DuplicateBatch(1, 1, NOW_MS)
    assert produce(manager, data(5, 2)).error == OUT_OF_ORDER
    assert produce(manager, data(0, 2, epoch=1)).should_append
    assert produce(manager, data(0, 3, epoch=0)).error == BAD_EPOCH
    entry = manager.producer_entry(PID)
    assert (entry.producer_epoch, entry.last_sequence, entry.last_data_offset) == (1, 0, 2)
    assert len(entry.batches) == 1  # the epoch bump dropped the old epoch's batches
    assert manager.end_offset == 3


def test_replicas_accept_sequence_gaps_and_state_without_history():
    manager = ProducerStateManager()
    apply(manager, data(16, 735, epoch=5))
    assert manager.producer_entry(PID).batches[0].first_sequence == 16
    assert produce(manager, data(20, 736, epoch=5)).error == OUT_OF_ORDER
    apply(manager, data(20, 736, epoch=5))  # a follower copies what the leader accepted
    assert manager.producer_entry(PID).last_sequence == 20


def test_wrapping_batch_metadata():
    manager = ProducerStateManager()
    apply(manager, data(INT32_MAX - 10, 2000, 21))
    (batch,) = manager.producer_entry(PID).batches
    assert (batch.first_sequence, batch.last_sequence) == (INT32_MAX - 10, 9)
    assert (batch.first_offset, batch.last_offset) == (2000, 2020)


def test_only_five_batches_are_kept():
    manager = ProducerStateManager()
    for seq in range(100):
        assert produce(manager, data(seq, seq)).should_append
    batches = manager.producer_entry(PID).batches
    assert [batch.first_sequence for batch in batches] == list(range(100 - BATCHES_TO_RETAIN, 100))


# --- transactions ---------------------------------------------------------------------


def test_transaction_begin_and_commit():
    manager = ProducerStateManager()
    produce(manager, data(0, 9))
    assert manager.first_unstable_offset() is None
    assert produce(manager, data(1, 16, 5, txn=True)).should_append
    assert produce(manager, data(6, 26, 5, txn=True)).should_append
    assert manager.producer_entry(PID).current_txn_first_offset == 16
    assert manager.first_unstable_offset() == 16
    assert manager.ongoing_transactions() == [(16, PID)]

    completed = end_txn(manager, 40, COMMIT, coordinator_epoch=15)

    assert completed == CompletedTxn(PID, 16, 40, is_aborted=False)
    entry = manager.producer_entry(PID)
    assert entry.current_txn_first_offset == -1 and entry.coordinator_epoch == 15
    # The marker leaves the batches alone: retries of them are still duplicates.
    assert [(batch.first_sequence, batch.last_sequence) for batch in entry.batches] == [(0, 0), (1, 5), (6, 10)]
    assert produce(manager, data(6, 50, 5, txn=True)).duplicate == DuplicateBatch(26, 30, NOW_MS)
    assert manager.first_unstable_offset() is None and manager.ongoing_transactions() == []


def test_abort_with_bumped_epoch_fences_and_resets():
    manager = ProducerStateManager()
    produce(manager, data(0, 0, txn=True))
    completed = end_txn(manager, 1, ABORT, epoch=EPOCH + 1)
    assert completed == CompletedTxn(PID, 0, 1, is_aborted=True)
    entry = manager.producer_entry(PID)
    assert (entry.producer_epoch, entry.last_data_offset, entry.current_txn_first_offset) == (1, -1, -1)
    manager.remove_expired_producers(NOW_MS)  # recent: kept, so the fence holds
    assert produce(manager, data(1, 2, txn=True)).error == BAD_EPOCH


def test_marker_without_data_completes_nothing():
    manager = ProducerStateManager()
    assert end_txn(manager, 27, COMMIT, epoch=2, coordinator_epoch=4) is None
    entry = manager.producer_entry(PID)
    assert (entry.producer_epoch, entry.coordinator_epoch, entry.last_sequence) == (2, 4, -1)
    assert manager.first_unstable_offset() is None


def test_empty_control_batch_changes_nothing():
    manager = ProducerStateManager()
    assert apply(manager, control(15, pid=23423)) is None
    assert manager.producer_entry(23423) is None
    assert manager.end_offset == 16


def test_first_unstable_offset_across_producers():
    manager = ProducerStateManager()
    assert manager.first_unstable_offset() is None
    produce(manager, data(0, 99, epoch=5, txn=True))
    assert manager.first_unstable_offset() == 99
    produce(manager, data(0, 105, pid=2, epoch=5, txn=True))
    assert manager.first_unstable_offset() == 99
    assert manager.ongoing_transactions() == [(99, PID), (105, 2)]
    completed = end_txn(manager, 109, COMMIT, epoch=5)
    assert manager.first_unstable_offset() == 105
    assert manager.last_stable_offset(completed) == 105
    completed = end_txn(manager, 112, ABORT, pid=2, epoch=5)
    assert manager.first_unstable_offset() is None
    assert manager.last_stable_offset(completed) == 113


def test_last_stable_offset_of_completed_transactions():
    manager = ProducerStateManager()
    start1, start2, start3 = 992342, 992342 + 25, 992342 + 57
    for pid, start in ((1, start1), (2, start2), (3, start3)):
        produce(manager, data(0, start, pid=pid, txn=True))
    last1 = start3 + 15
    completed1 = end_txn(manager, last1, pid=1)
    assert completed1 == CompletedTxn(1, start1, last1, False)
    assert manager.last_stable_offset(completed1) == start2
    completed3 = end_txn(manager, last1 + 20, pid=3)
    assert manager.last_stable_offset(completed3) == start2
    completed2 = end_txn(manager, last1 + 98, pid=2)
    assert manager.last_stable_offset(completed2) == last1 + 99
    assert manager.first_unstable_offset() is None


def test_markers_of_empty_transactions_are_skipped():
    manager = ProducerStateManager()
    produce(manager, data(0, 16, 5, txn=True))
    assert end_txn(manager, 21, COMMIT) == CompletedTxn(PID, 16, 21, False)
    assert end_txn(manager, 22, COMMIT) is None
    assert end_txn(manager, 23, ABORT) is None
    produce(manager, data(5, 24, 4, txn=True))
    assert end_txn(manager, 28, ABORT) == CompletedTxn(PID, 24, 28, True)
    assert end_txn(manager, 29, ABORT) is None
    produce(manager, data(9, 30, 2, txn=True))
    assert manager.first_unstable_offset() == 30


def test_update_requires_log_order():
    manager = ProducerStateManager()
    apply(manager, data(0, 10))
    with pytest.raises(ValueError, match="truncation"):
        apply(manager, data(1, 5))
    with pytest.raises(ValueError):
        manager.update(data(1, 11, 2), 12, 11)


def test_batches_without_producer_id_only_advance_the_end_offset():
    manager = ProducerStateManager(end_offset=100)
    assert apply(manager, data(-1, 100, 3, pid=-1)) is None
    assert len(manager) == 0 and manager.end_offset == 103


def test_replay_skips_batches_already_applied():
    manager = ProducerStateManager()
    history = [data(0, 0, txn=True), data(1, 1, txn=True), control(2), data(2, 3)]
    markers = [None, None, TxnMarker(COMMIT, 0), None]
    results = [manager.replay(header, txn_marker) for header, txn_marker in zip(history, markers)]
    assert results[2] == CompletedTxn(PID, 0, 2, False)
    before = state_of(manager)
    assert [manager.replay(header, txn_marker) for header, txn_marker in zip(history, markers)] == [None] * 4
    assert state_of(manager) == before


def test_read_txn_marker_from_batches():
    batch = build_control_batch(ControlRecordType.ABORT, PID, 3, 7, NOW_MS, base_offset=40)
    assert read_txn_marker(batch) == TxnMarker(ABORT, 7)
    assert read_txn_marker(b"xx" + batch, 2) == TxnMarker(ABORT, 7)
    emptied = build_batch([], producer_id=PID, producer_epoch=3, transactional=True, control=True)
    assert read_txn_marker(emptied) is None
    leader_change = build_batch([Record(key=struct.pack(">hh", 0, ControlRecordType.LEADER_CHANGE))], control=True)
    assert read_txn_marker(leader_change) is None


# --- expiration -----------------------------------------------------------------------


def test_idle_producers_expire_and_come_back_at_any_sequence():
    manager = ProducerStateManager(producer_id_expiration_ms=HOUR_MS)
    produce(manager, data(0, 1, epoch=5, timestamp=NOW_MS))
    assert manager.remove_expired_producers(NOW_MS + HOUR_MS - 1) == 0
    assert manager.remove_expired_producers(NOW_MS + HOUR_MS) == 1
    assert manager.producer_entry(PID) is None
    assert produce(manager, data(7, 2, epoch=5)).should_append
    assert manager.producer_entry(PID).last_sequence == 7 and manager.end_offset == 3


def test_producers_in_a_transaction_never_expire():
    manager = ProducerStateManager(producer_id_expiration_ms=HOUR_MS)
    produce(manager, data(0, 99, epoch=5, txn=True, timestamp=NOW_MS))
    produce(manager, data(0, 100, pid=2, timestamp=NOW_MS))
    assert manager.remove_expired_producers(NOW_MS + 10 * HOUR_MS) == 1
    assert manager.producer_entry(PID) is not None and manager.producer_entry(2) is None
    assert manager.first_unstable_offset() == 99


def test_default_expiration_is_kafkas():
    assert ProducerStateManager().producer_id_expiration_ms == 86_400_000


# --- snapshots ------------------------------------------------------------------------


def busy_manager():
    """Three producers: five batches and a commit, an open transaction, and a fenced one."""
    manager = ProducerStateManager()
    for seq in range(7):
        produce(manager, data(seq, seq, timestamp=NOW_MS + seq))
    produce(manager, data(0, 7, 3, pid=2, epoch=4, txn=True))
    produce(manager, data(0, 10, pid=3, txn=True))
    end_txn(manager, 11, ABORT, pid=3, epoch=1, coordinator_epoch=9)
    produce(manager, data(3, 12, 2, pid=2, epoch=4, txn=True))
    return manager


def test_snapshot_round_trip(tmp_path):
    manager = busy_manager()
    path = manager.take_snapshot(tmp_path)
    assert os.path.basename(path) == "00000000000000000014.snapshot"
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000014.snapshot"]

    offset, loaded = load_latest_snapshot(tmp_path, max_offset=14)

    assert offset == 14
    assert state_of(loaded) == state_of(manager)
    assert loaded.first_unstable_offset() == 7
    # All five batches survive, so any in-flight retry is still a duplicate after a restart.
    assert loaded.validate(data(2, 50)).duplicate == DuplicateBatch(2, 2, NOW_MS + 2)
    assert loaded.validate(data(1, 50)).error == OUT_OF_ORDER
    assert loaded.validate(control(50, pid=3, epoch=1), marker=TxnMarker(COMMIT, 8)).error == (
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )


def test_snapshot_of_empty_state_and_at_a_later_offset(tmp_path):
    manager = ProducerStateManager(end_offset=5)
    with pytest.raises(ValueError):
        manager.take_snapshot(tmp_path, 4)
    manager.take_snapshot(tmp_path, 8)
    offset, loaded = load_latest_snapshot(tmp_path, 100)
    assert (offset, len(loaded), loaded.end_offset) == (8, 0, 8)


def test_load_picks_the_newest_snapshot_not_above_max_offset(tmp_path):
    manager = ProducerStateManager()
    for offset in range(4):
        produce(manager, data(offset, offset))
        manager.take_snapshot(tmp_path)
    assert list_snapshot_offsets(tmp_path) == [1, 2, 3, 4]
    offset, loaded = load_latest_snapshot(tmp_path, max_offset=3)
    assert offset == 3 and loaded.producer_entry(PID).last_sequence == 2
    assert load_latest_snapshot(tmp_path, max_offset=0) is None
    assert load_latest_snapshot(tmp_path / "missing", max_offset=10) is None
    assert list_snapshot_offsets(tmp_path) == [1, 2, 3, 4]  # later ones are left to the caller


def test_load_drops_producers_that_expired_meanwhile(tmp_path):
    manager = ProducerStateManager(producer_id_expiration_ms=HOUR_MS)
    produce(manager, data(0, 0, timestamp=NOW_MS))
    produce(manager, data(0, 1, pid=2, timestamp=NOW_MS + HOUR_MS))
    produce(manager, data(0, 2, pid=3, txn=True, timestamp=NOW_MS))
    manager.take_snapshot(tmp_path)
    _, loaded = load_latest_snapshot(tmp_path, 3, now_ms=NOW_MS + HOUR_MS, producer_id_expiration_ms=HOUR_MS)
    assert sorted(loaded.producer_entries()) == [2, 3]
    assert loaded.producer_id_expiration_ms == HOUR_MS


def corrupt_empty(path):
    open(path, "wb").close()


def corrupt_truncate(path):
    data_bytes = open(path, "rb").read()
    open(path, "wb").write(data_bytes[: len(data_bytes) // 2])


def corrupt_garbage(path):
    with open(path, "r+b") as snapshot:
        snapshot.seek(8)
        snapshot.write(bytes(37))


def corrupt_version(path):
    with open(path, "r+b") as snapshot:
        snapshot.write(struct.pack(">h", 99))


def corrupt_offset(path):
    os.rename(path, path.replace("00000000000000000002", "00000000000000000003"))


def corrupt_count(path):
    # A consistent CRC over a body whose entry count lies.
    body = bytearray(open(path, "rb").read()[6:])
    struct.pack_into(">i", body, 8, 1_000_000)
    open(path, "wb").write(struct.pack(">hI", 2, crc32c(body)) + body)


@pytest.mark.parametrize(
    "corrupt", [corrupt_empty, corrupt_truncate, corrupt_garbage, corrupt_version, corrupt_offset, corrupt_count]
)
def test_corrupt_snapshot_is_deleted_and_an_older_one_used(tmp_path, caplog, corrupt):
    manager = ProducerStateManager()
    produce(manager, data(0, 0))
    manager.take_snapshot(tmp_path)
    produce(manager, data(1, 1))
    latest = manager.take_snapshot(tmp_path)
    corrupt(latest)
    broken_offset = list_snapshot_offsets(tmp_path)[-1]

    with caplog.at_level(logging.WARNING, logger="kbroker.log.producer_state"):
        offset, loaded = load_latest_snapshot(tmp_path, max_offset=20)

    assert offset == 1
    assert loaded.producer_entry(PID).last_data_offset == 0
    assert list_snapshot_offsets(tmp_path) == [1]
    (warning,) = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert warning.name == "kbroker.log.producer_state"
    assert f"{broken_offset:020d}.snapshot" in warning.getMessage()


def test_all_snapshots_corrupt_means_none(tmp_path):
    ProducerStateManager(end_offset=3).take_snapshot(tmp_path)
    corrupt_garbage(snapshot_path(tmp_path, 3))
    assert load_latest_snapshot(tmp_path, 3) is None
    assert list_snapshot_offsets(tmp_path) == []


def kafka_v1_snapshot(entries):
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *entry) for entry in entries)
    return struct.pack(">hI", 1, crc32c(body)) + body


def test_reads_kafkas_version_1_snapshot(tmp_path):
    # (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch, txn_first_offset)
    open(snapshot_path(tmp_path, 30), "wb").write(
        kafka_v1_snapshot(
            [
                (1, 2, 3, 20, 3, NOW_MS, 5, 17),
                (11, 12, -1, -1, 0, NOW_MS, 13, -1),  # only a marker left
                (21, 0, 2, 25, 4, NOW_MS, -1, -1),  # sequences wrapped inside the batch
            ]
        )
    )
    offset, loaded = load_latest_snapshot(tmp_path, 30)
    assert offset == 30 and loaded.end_offset == 30
    first = loaded.producer_entry(1)
    assert (first.producer_epoch, first.coordinator_epoch, first.current_txn_first_offset) == (2, 5, 17)
    assert [tuple(batch) for batch in first.batches] == [(0, 3, 20, 3, NOW_MS)]
    assert not loaded.producer_entry(11).batches
    assert loaded.producer_entry(21).batches[0].first_sequence == INT32_MAX - 1
    assert loaded.first_unstable_offset() == 17
    assert loaded.validate(data(0, 31, 4, epoch=2, txn=True)).duplicate == DuplicateBatch(17, 20, NOW_MS)


def test_truncation_and_retention_delete_snapshots(tmp_path):
    for offset in (0, 10, 20, 30):
        ProducerStateManager(end_offset=offset).take_snapshot(tmp_path)
    (tmp_path / "00000000000000000010.log").write_bytes(b"")
    (tmp_path / "00000000000000000040.snapshot.tmp").write_bytes(b"")
    assert list_snapshot_offsets(tmp_path) == [0, 10, 20, 30]

    assert delete_snapshots_after(tmp_path, 20) == [30]
    assert list_snapshot_offsets(tmp_path) == [0, 10, 20]
    assert delete_snapshots_after(tmp_path, 20) == []
    assert delete_snapshots_before(tmp_path, 10) == [0]
    assert list_snapshot_offsets(tmp_path) == [10, 20]
    assert (tmp_path / "00000000000000000010.log").exists()


def test_leftover_temporary_file_is_removed_on_load(tmp_path):
    ProducerStateManager(end_offset=7).take_snapshot(tmp_path)
    (tmp_path / "00000000000000000009.snapshot.tmp").write_bytes(b"half")
    assert load_latest_snapshot(tmp_path, 10)[0] == 7
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000007.snapshot"]


def test_snapshot_write_syncs_data_then_renames_then_syncs_directory(tmp_path, durability_events):
    events = durability_events
    busy_manager().take_snapshot(tmp_path)
    name = "00000000000000000014.snapshot"
    assert events == [("fsync", False), ("replace", name + ".tmp", name), ("fsync", True)]


def test_failed_snapshot_write_leaves_previous_content(tmp_path, monkeypatch):
    path = ProducerStateManager(end_offset=3).take_snapshot(tmp_path)
    before = open(path, "rb").read()
    newer = ProducerStateManager()
    apply(newer, data(0, 0, 3))

    def fail(descriptor):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk gone"):
        newer.take_snapshot(tmp_path)
    monkeypatch.undo()
    assert open(path, "rb").read() == before
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000003.snapshot"]


# --- recovery: snapshot + replay equals never stopping --------------------------------

PRODUCER_IDS = (1000, 1001, 1002)
# One producer starts just below int32 max so histories cross the sequence wrap.
FIRST_SEQUENCES = (0, 0, INT32_MAX - 6)

# A producer never retries a batch of an epoch it has left, so a bump forgets its last batch.
operation = st.tuples(
    st.integers(0, len(PRODUCER_IDS) - 1),
    st.sampled_from(["data", "txn", "txn", "commit", "abort", "bump", "retry", "gap", "plain"]),
    st.integers(1, 4),  # records per batch
    st.booleans(),  # markers: bump the epoch (KIP-890); otherwise: take a snapshot after this step
)


def run_history(operations, directory):
    """Drive a leader through ``operations``; returns the manager, applied (header, marker)s, snapshot offsets."""
    manager = ProducerStateManager()
    next_sequence = list(FIRST_SEQUENCES)
    epochs = [0] * len(PRODUCER_IDS)
    coordinator_epochs = [0] * len(PRODUCER_IDS)
    last_batch = [None] * len(PRODUCER_IDS)
    applied, snapshots = [], []
    offset = 0
    timestamp = NOW_MS
    for index, (producer, kind, count, flag) in enumerate(operations):
        pid, timestamp = PRODUCER_IDS[producer], timestamp + 7
        txn_marker = None
        is_from_client = True
        if kind in ("data", "txn", "gap"):
            sequence = next_sequence[producer] + (3 if kind == "gap" else 0)
            header = data(sequence % 2**31, offset, count, pid=pid, epoch=epochs[producer], txn=kind == "txn",
                          timestamp=timestamp)  # fmt: skip
        elif kind == "retry":
            if last_batch[producer] is None:
                continue
            header = last_batch[producer]._replace(base_offset=offset)
        elif kind in ("commit", "abort"):
            if flag:
                epochs[producer] += 1
                next_sequence[producer] = 0
                last_batch[producer] = None
            coordinator_epochs[producer] += index % 2
            header = control(offset, pid=pid, epoch=epochs[producer], timestamp=timestamp)
            txn_marker = TxnMarker(COMMIT if kind == "commit" else ABORT, coordinator_epochs[producer])
            is_from_client = False
        elif kind == "bump":
            epochs[producer] += 1
            next_sequence[producer] = 0
            last_batch[producer] = None
            continue
        else:
            header = data(-1, offset, count, pid=-1, timestamp=timestamp)
        validation = manager.validate(header, is_from_client=is_from_client, marker=txn_marker)
        if kind == "retry":
            assert validation.duplicate is not None
        if kind == "gap" and manager.producer_entry(pid) is not None:
            assert not validation.should_append
        if not validation.should_append:
            continue
        manager.update(header, offset, header.last_offset, marker=txn_marker)
        applied.append((header, txn_marker))
        offset = header.last_offset + 1
        if kind in ("data", "txn"):
            next_sequence[producer] = (next_sequence[producer] + count) % 2**31
            last_batch[producer] = header
        if kind not in ("commit", "abort") and flag:
            manager.take_snapshot(directory)
            snapshots.append(manager.end_offset)
    return manager, applied, snapshots


@settings(max_examples=200, deadline=None)
@given(operations=st.lists(operation, min_size=5, max_size=80), data_strategy=st.data())
def test_replay_after_any_snapshot_matches_the_uninterrupted_state(operations, data_strategy):
    with tempfile.TemporaryDirectory() as directory:
        manager, applied, snapshots = run_history(operations, directory)
        expected = state_of(manager)
        recovery_point = data_strategy.draw(st.integers(0, manager.end_offset), label="recovery point")

        loaded = load_latest_snapshot(directory, recovery_point)

        eligible = [offset for offset in snapshots if offset <= recovery_point]
        if loaded is None:
            assert not eligible
            recovered = ProducerStateManager()
        else:
            assert loaded[0] == max(eligible)
            recovered = loaded[1]
        # The log replays from its start; batches the snapshot covers must be skipped.
        for header, txn_marker in applied:
            recovered.replay(header, txn_marker)
        assert state_of(recovered) == expected
        assert recovered.first_unstable_offset() == manager.first_unstable_offset()

        # Replaying everything once more changes nothing either.
        for header, txn_marker in applied:
            assert recovered.replay(header, txn_marker) is None
        assert state_of(recovered) == expected
