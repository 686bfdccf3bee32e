"""Which errors of an answer the broker's log names (kbroker/event_log.py), and that finding them costs
nothing it need not: lists whose structs hold no error code are not entered, and nothing is looked for
when the log would take no event."""

from __future__ import annotations

import logging

from kbroker import event_log
from kbroker.event_log import errors_in, log_answer
from kbroker.handlers.api_versions import api_versions_response
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import RequestHeader
from kbroker.wire.schema import API_BY_NAME

Produce = API_BY_NAME["Produce"].response_class
Topic = Produce.TopicProduceResponse
Partition = Topic.PartitionProduceResponse


def test_every_error_is_named_with_where_it_applies():
    answer = Produce(responses=[
        Topic(name="orders", partition_responses=[Partition(index=0),
                                                  Partition(index=1, error_code=ErrorCode.CORRUPT_MESSAGE)]),
        Topic(name="clicks", partition_responses=[Partition(index=3, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)])])
    assert errors_in(answer) == ["CORRUPT_MESSAGE@orders-1", "NOT_LEADER_OR_FOLLOWER@clicks-3"]
    assert errors_in(api_versions_response(ErrorCode.UNSUPPORTED_VERSION)) == ["UNSUPPORTED_VERSION"]
    assert errors_in(Produce(responses=[Topic(name="orders", partition_responses=[Partition(index=0)])])) == []


def test_lists_that_hold_no_error_code_are_not_entered(monkeypatch):
    entered = []
    walk = event_log._walk
    monkeypatch.setattr(event_log, "_walk",
                        lambda value, path, found: (entered.append(value), walk(value, path, found)))
    answer = api_versions_response()
    assert len(answer.api_keys) > 50 and errors_in(answer) == []
    assert entered == [answer]  # its API ranges and features have no error code


def test_nothing_is_looked_for_when_the_log_takes_no_event(monkeypatch, caplog):
    looked = []
    monkeypatch.setattr(event_log, "errors_in", lambda response: looked.append(response) or ["CORRUPT_MESSAGE"])
    header = RequestHeader(0, 9, 5, "client")
    with caplog.at_level(logging.WARNING, logger="kbroker.requests"):
        log_answer(header, "Produce", "127.0.0.1", "User:ANONYMOUS", object(), 0.001, every_request=True)
    assert looked == [] and not caplog.records
    with caplog.at_level(logging.INFO, logger="kbroker.requests"):
        log_answer(header, "Produce", "127.0.0.1", "User:ANONYMOUS", object(), 0.001, every_request=False)
    assert len(looked) == 1
    assert [record.errors for record in caplog.records] == [["CORRUPT_MESSAGE"]]
