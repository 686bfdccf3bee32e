"""The transactional history checker (compat_tests/txn_checker.py) catches each anomaly it claims to."""

from __future__ import annotations

import pytest

from compat_tests.txn_checker import HistoryViolation, Transaction, check


def history():
    """Two committed transactions, one aborted and one unknown that turned out committed."""
    transactions = [Transaction("p1", 0, ["a", "b"], "committed"), Transaction("p1", 1, ["c"], "aborted"),
                    Transaction("p2", 0, ["d", "e"], "unknown"), Transaction("p2", 1, ["f"], "committed")]
    final = [("t", 0, 0, "a"), ("t", 0, 2, "d"), ("t", 1, 0, "b"), ("t", 1, 2, "e"), ("t", 1, 3, "f")]
    polls = {"c1": [("t", 0, 0, "a"), ("t", 1, 0, "b"), ("t", 0, 2, "d"), ("t", 1, 2, "e")],
             "c2": [("t", 1, 0, "b"), ("t", 1, 3, "f")]}
    return transactions, polls, final


def anomalies_of(transactions, polls, final):
    with pytest.raises(HistoryViolation) as violation:
        check(transactions, polls, final)
    return violation.value.anomalies


def test_a_clean_history_passes_with_its_counts():
    counts = check(*history())
    assert counts == {"transactions committed": 2, "transactions aborted": 1, "transactions unknown": 1,
                      "unknown, found committed": 1, "values written": 6, "records in the final read": 5,
                      "records polled": 6}


def test_an_aborted_read_is_caught():
    transactions, polls, final = history()
    polls["c2"].append(("t", 1, 4, "c"))
    [anomaly] = anomalies_of(transactions, polls, final)
    assert anomaly.startswith("aborted read: c2")


def test_a_lost_committed_write_is_caught():
    transactions, polls, final = history()
    final = [record for record in final if record[3] != "f"]
    assert [a.split(":")[0] for a in anomalies_of(transactions, polls, final)] == ["lost write"]


def test_a_torn_transaction_in_the_final_read_is_caught():
    transactions, polls, final = history()
    final = [record for record in final if record[3] != "e"]
    polls["c1"] = polls["c1"][:3]
    assert [a.split(":")[0] for a in anomalies_of(transactions, polls, final)] == ["torn transaction"]


def test_a_reader_that_passed_part_of_a_transaction_is_caught():
    transactions, polls, final = history()
    polls["c1"] = [record for record in polls["c1"] if record[3] != "e"] + [("t", 1, 3, "f")]
    assert [a.split(":")[0] for a in anomalies_of(transactions, polls, final)] == ["torn read"]


def test_duplicates_are_caught_in_the_final_read_and_in_a_stream():
    transactions, polls, final = history()
    assert [a.split(":")[0] for a in anomalies_of(transactions, polls, final + [("t", 0, 5, "a")])] == ["duplicate"]
    polls["c2"].append(("t", 0, 7, "b"))
    kinds = {a.split(":")[0] for a in anomalies_of(transactions, polls, final)}
    assert "duplicate" in kinds


def test_a_poll_going_backwards_is_caught():
    transactions, polls, final = history()
    polls["c2"] = [("t", 1, 3, "f"), ("t", 1, 0, "b")]
    assert [a.split(":")[0] for a in anomalies_of(transactions, polls, final)] == ["non-monotonic"]


def test_two_values_at_one_offset_and_phantoms_are_caught():
    transactions, polls, final = history()
    polls["c2"][1] = ("t", 1, 3, "e")
    assert "two values at t-1@3" in " ".join(anomalies_of(transactions, polls, final))
    transactions, polls, final = history()
    polls["c2"].append(("t", 2, 0, "zzz"))
    assert [a.split(":")[0] for a in anomalies_of(transactions, polls, final)] == ["phantom"]
