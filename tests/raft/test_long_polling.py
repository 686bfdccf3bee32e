"""Which fetch answers the trio driver holds back for long polling (raft/driver.py's nothing_new)."""

from kbroker.raft.driver import nothing_new
from kbroker.raft.messages import Entry, FetchResponse


def answer(**fields) -> FetchResponse:
    return FetchResponse(epoch=1, leader=2, fetch_offset=13, last_fetched_epoch=1, **fields)


def test_an_answer_with_nothing_the_fetcher_lacks_is_held():
    assert nothing_new(answer(high_watermark=13), told_high_watermark=13)


def test_an_answer_saying_more_is_committed_goes_at_once():
    """The fetch that commits a leader's last entries is answered with the new high watermark at once: a
    leader stopping cleanly right after would otherwise never send it (its voters would hold committed
    entries without knowing), as a three-node cluster showed when its second voter stopped."""
    assert not nothing_new(answer(high_watermark=14), told_high_watermark=13)
    assert not nothing_new(answer(high_watermark=13), told_high_watermark=None)  # a first fetch


def test_entries_errors_truncations_and_snapshots_go_at_once():
    for fields in ({"entries": (Entry(1, b"x"),)}, {"not_leader": True}, {"diverging_end_offset": 5}):
        assert not nothing_new(answer(high_watermark=13, **fields), told_high_watermark=13)
    assert not nothing_new(None, told_high_watermark=13)
