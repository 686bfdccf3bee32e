"""The .txnindex: Kafka's AbortedTxn layout, collect semantics, truncation, torn tails, laziness."""

import logging
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, TransactionIndexError

# The entries of Kafka's TransactionIndexTest.testCollectAbortedTransactions.
KAFKA_ABORTED = [
    AbortedTxn(0, 0, 10, 11),
    AbortedTxn(1, 5, 15, 13),
    AbortedTxn(2, 18, 35, 25),
    AbortedTxn(3, 32, 50, 40),
]


@pytest.fixture
def index_path(tmp_path):
    return tmp_path / "00000000000000000000.txnindex"


@pytest.fixture
def index(index_path):
    index = TransactionIndex(index_path)
    yield index
    index.close()


def filled(path, entries, start_offset=0):
    index = TransactionIndex(path, start_offset)
    for entry in entries:
        index.append(entry)
    return index


def test_entry_layout_is_kafkas():
    entry = AbortedTxn(producer_id=983493, first_offset=137, last_offset=299, last_stable_offset=200)
    data = entry.to_bytes()
    assert len(data) == ENTRY_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 983493, 137, 299, 200)
    assert data[:2] == b"\x00\x00"  # version 0
    assert data[2:10] == (983493).to_bytes(8, "big")


def test_append_writes_entries_back_to_back(index, index_path):
    for entry in KAFKA_ABORTED:
        index.append(entry)
    assert index_path.read_bytes() == b"".join(entry.to_bytes() for entry in KAFKA_ABORTED)
    assert index.all_aborted() == KAFKA_ABORTED


def test_position_set_correctly_when_reopened(index_path):
    filled(index_path, KAFKA_ABORTED).close()
    reopened = TransactionIndex(index_path)
    another = AbortedTxn(3, 50, 60, 55)
    reopened.append(another)
    assert reopened.all_aborted() == KAFKA_ABORTED + [another]
    reopened.close()


@pytest.mark.parametrize("last_offset", [15, 10])
def test_last_offset_must_increase(index, last_offset):
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError, match="must be greater"):
        index.append(AbortedTxn(0, 0, last_offset, 11))
    assert index.all_aborted() == [AbortedTxn(1, 5, 15, 13)]


def test_last_offset_must_increase_across_reopening(index_path):
    filled(index_path, [AbortedTxn(1, 5, 15, 13)]).close()
    reopened = TransactionIndex(index_path)
    with pytest.raises(ValueError):
        reopened.append(AbortedTxn(0, 0, 15, 11))
    reopened.append(AbortedTxn(0, 0, 16, 11))
    reopened.close()


def test_transaction_cannot_end_before_it_starts(index):
    with pytest.raises(ValueError):
        index.append(AbortedTxn(0, 10, 9, 0))


# (fetch_offset, upper_bound_offset, indexes of expected entries, is_complete) from Kafka's test.
COLLECT_CASES = [
    (0, 100, [0, 1, 2, 3], False),
    (0, 32, [0, 1, 2], True),
    (0, 35, [0, 1, 2, 3], True),
    (10, 35, [0, 1, 2, 3], True),
    (11, 35, [1, 2, 3], True),
    (20, 41, [2, 3], False),
    # Beyond Kafka's table: a range past every entry, and one before all but the first.
    (51, 100, [], False),
    (0, 1, [0], True),
    (16, 18, [], True),  # the gap between transactions 1 and 2
    (16, 19, [2], True),
]


@pytest.mark.parametrize(("fetch_offset", "upper_bound_offset", "expected", "is_complete"), COLLECT_CASES)
def test_collect_aborted(index_path, fetch_offset, upper_bound_offset, expected, is_complete):
    index = filled(index_path, KAFKA_ABORTED)
    result = index.collect_aborted(fetch_offset, upper_bound_offset)
    assert result.aborted == [KAFKA_ABORTED[position] for position in expected]
    assert result.is_complete is is_complete
    aborted, complete = result  # also usable as a plain pair
    assert (aborted, complete) == (result.aborted, is_complete)
    index.close()


def test_truncate_and_reset(index_path):
    entries = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]
    index = filled(index_path, entries)
    index.truncate_to(51)
    assert index.collect_aborted(0, 100).aborted == entries
    index.truncate_to(50)
    assert index.collect_aborted(0, 100).aborted == entries[:3]
    assert os.path.getsize(index_path) == 3 * ENTRY_SIZE
    # The ordering check now runs against the new last entry (35), not the dropped one (50).
    with pytest.raises(ValueError):
        index.append(AbortedTxn(4, 30, 35, 30))
    index.append(AbortedTxn(4, 30, 36, 30))
    index.truncate_to(0)
    assert index.all_aborted() == []
    index.append(AbortedTxn(5, 0, 1, 0))  # anything goes after truncating everything
    index.reset()
    assert index.collect_aborted(0, 100).aborted == []
    assert os.path.getsize(index_path) == 0
    index.append(AbortedTxn(6, 0, 0, 0))
    assert index.all_aborted() == [AbortedTxn(6, 0, 0, 0)]
    index.close()


def test_truncate_after_reopening_restores_previous_last_offset(index_path):
    filled(index_path, KAFKA_ABORTED).close()
    index = TransactionIndex(index_path)
    index.truncate_to(35)
    assert index.all_aborted() == KAFKA_ABORTED[:2]
    index.append(AbortedTxn(9, 16, 16, 16))
    index.close()


def test_many_entries_span_read_chunks(index_path):
    entries = [AbortedTxn(producer, producer * 3, producer * 3 + 2, producer * 3) for producer in range(2500)]
    index = filled(index_path, entries)
    assert index.all_aborted() == entries
    index.close()
    reopened = TransactionIndex(index_path)
    assert reopened.all_aborted() == entries
    assert reopened.collect_aborted(6000, 6003).aborted == [entries[2000]]
    reopened.close()


def test_torn_trailing_entry_is_dropped_on_first_use(index_path, caplog):
    whole = b"".join(entry.to_bytes() for entry in KAFKA_ABORTED[:2])
    index_path.write_bytes(whole + KAFKA_ABORTED[2].to_bytes()[:20])
    index = TransactionIndex(index_path)
    assert os.path.getsize(index_path) == len(whole) + 20  # untouched until used
    with caplog.at_level(logging.WARNING, logger="kbroker.log.txn_index"):
        assert index.all_aborted() == KAFKA_ABORTED[:2]
    assert os.path.getsize(index_path) == len(whole)
    assert index.torn_bytes_dropped == 20
    assert index.sanity_check() == 20
    [record] = [record for record in caplog.records if record.name == "kbroker.log.txn_index"]
    assert record.levelno == logging.WARNING
    assert "20 bytes" in record.getMessage() and str(index_path) in record.getMessage()
    index.append(KAFKA_ABORTED[2])  # appends land after the last whole entry
    index.close()
    assert TransactionIndex(index_path).all_aborted() == KAFKA_ABORTED[:3]


def test_lone_partial_entry_leaves_an_empty_index(index_path):
    index_path.write_bytes(b"\x00" * 33)
    index = TransactionIndex(index_path)
    assert index.sanity_check() == 33
    assert index.all_aborted() == []
    assert os.path.getsize(index_path) == 0
    index.append(AbortedTxn(1, 0, 0, 0))
    index.close()


def test_clean_file_reports_nothing_dropped(index_path, caplog):
    filled(index_path, KAFKA_ABORTED).close()
    with caplog.at_level(logging.WARNING, logger="kbroker.log.txn_index"):
        assert TransactionIndex(index_path).sanity_check() == 0
    assert not caplog.records


def test_sanity_check_rejects_entries_before_the_segment_start(index_path):
    filled(index_path, KAFKA_ABORTED).close()
    # Reopened as if it belonged to a segment starting at 100, like Kafka's testSanityCheck.
    index = TransactionIndex(index_path, start_offset=100)
    with pytest.raises(TransactionIndexError, match="before the segment start 100"):
        index.sanity_check()
    index.close()
    assert TransactionIndex(index_path, start_offset=10).sanity_check() == 0


def test_unknown_entry_version_is_an_error(index_path):
    index_path.write_bytes(KAFKA_ABORTED[0].to_bytes() + b"\x00\x01" + KAFKA_ABORTED[1].to_bytes()[2:])
    with pytest.raises(TransactionIndexError, match="version 1"):
        TransactionIndex(index_path).all_aborted()


def test_nothing_is_opened_or_created_before_first_use(tmp_path):
    descriptor_directory = "/proc/self/fd"
    if not os.path.isdir(descriptor_directory):
        pytest.skip("needs /proc to count descriptors")
    paths = [tmp_path / f"{base:020d}.txnindex" for base in range(3000)]
    for path in paths[:100]:
        filled(path, KAFKA_ABORTED[:1]).close()
    open_before = len(os.listdir(descriptor_directory))
    indexes = [TransactionIndex(path) for path in paths]
    assert len(os.listdir(descriptor_directory)) == open_before
    # Reading an absent index neither fails nor creates the file.
    assert indexes[-1].all_aborted() == []
    assert indexes[-1].collect_aborted(0, 10) == ([], False)
    indexes[-1].truncate_to(0)
    indexes[-1].reset()
    indexes[-1].flush()
    assert not paths[-1].exists()
    assert len(os.listdir(descriptor_directory)) == open_before
    assert indexes[0].all_aborted() == KAFKA_ABORTED[:1]
    assert len(os.listdir(descriptor_directory)) == open_before + 1
    indexes[0].close()


def test_an_absent_index_is_looked_for_once_until_appended_to_or_moved(tmp_path, index_path):
    """A read_committed fetch reads the index of every segment it reads: one that has no file is not
    opened again (a failed open per fetch), until this index creates it or its path changes."""
    tried = []

    def opener(path, flags, mode):
        tried.append(path)
        return os.open(path, flags, mode)

    index = TransactionIndex(index_path, opener=opener)
    for _ in range(3):
        assert index.collect_aborted(0, 10) == ([], False)
    assert tried == [str(index_path)]
    index.append(AbortedTxn(0, 0, 1, 0))
    index.close()
    assert index.all_aborted() == [AbortedTxn(0, 0, 1, 0)]  # found again, reopened
    renamed = tmp_path / "elsewhere.txnindex"
    filled(renamed, [AbortedTxn(1, 2, 3, 0)]).close()
    absent = TransactionIndex(tmp_path / "absent.txnindex", opener=opener)
    assert absent.all_aborted() == []
    absent.rename_to(renamed)  # (an absent file just changes name, onto one that exists here)
    assert absent.all_aborted() == [AbortedTxn(1, 2, 3, 0)]
    absent.close()


def test_flush_on_absent_file_then_after_append(tmp_path):
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(path, start_offset=100)
    index.flush()
    assert not path.exists()
    index.append(AbortedTxn(0, 100, 110, 102))
    index.flush()
    assert os.path.getsize(path) == ENTRY_SIZE
    index.close()


def test_delete(index_path):
    index = filled(index_path, KAFKA_ABORTED)
    assert index.delete() is True
    assert not index_path.exists()
    assert index.delete() is False
    assert index.all_aborted() == []
    index.append(AbortedTxn(0, 0, 1, 0))  # a deleted index starts over if used again
    assert index.all_aborted() == [AbortedTxn(0, 0, 1, 0)]
    index.close()


def test_rename_keeps_working(tmp_path, index_path):
    index = filled(index_path, [AbortedTxn(0, 0, 10, 2)])
    renamed = tmp_path / "00000000000000000000.txnindex.deleted"
    index.rename_to(renamed)
    assert not index_path.exists() and renamed.exists()
    index.append(AbortedTxn(1, 5, 15, 16))
    assert [entry.first_offset for entry in index.collect_aborted(0, 100).aborted] == [0, 5]
    index.close()
    assert TransactionIndex(renamed).all_aborted() == [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16)]


def test_rename_of_never_created_index_just_changes_the_path(tmp_path, index_path):
    index = TransactionIndex(index_path)
    renamed = tmp_path / "elsewhere.txnindex"
    index.rename_to(renamed)
    assert index.path == str(renamed)
    assert not renamed.exists()


# --- collect_aborted against a model, through real files -------------------------------------


@st.composite
def aborted_transactions(draw):
    entries, last_offset = [], -1
    for producer_id in range(draw(st.integers(0, 25))):
        last_offset += draw(st.integers(1, 20))
        first_offset = last_offset - draw(st.integers(0, 30))
        last_stable_offset = draw(st.integers(max(first_offset, 0), last_offset + 5))
        entries.append(AbortedTxn(producer_id, max(first_offset, 0), last_offset, last_stable_offset))
    return entries


@given(entries=aborted_transactions(), fetch_offset=st.integers(0, 500), length=st.integers(0, 200))
@settings(max_examples=150, deadline=None)
def test_collect_matches_model(tmp_path_factory, entries, fetch_offset, length):
    path = tmp_path_factory.mktemp("txn") / "00000000000000000000.txnindex"
    filled(path, entries).close()
    upper_bound_offset = fetch_offset + length
    index = TransactionIndex(path)
    result = index.collect_aborted(fetch_offset, upper_bound_offset)
    # The search may stop at the first entry whose LSO reaches the bound: all overlapping
    # transactions up to and including it are reported, none after it.
    stop = next(
        (position for position, entry in enumerate(entries) if entry.last_stable_offset >= upper_bound_offset), None
    )
    considered = entries if stop is None else entries[: stop + 1]
    assert result.aborted == [
        entry for entry in considered if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset
    ]
    assert result.is_complete is (stop is not None)
    index.close()
