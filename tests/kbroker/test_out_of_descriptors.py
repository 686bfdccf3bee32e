"""Out of file descriptors, Produce and Fetch answer KAFKA_STORAGE_ERROR for the partitions whose files
cannot be opened (as Kafka answers a storage failure; clients retry it) and go on with the others; nothing
is written, and once descriptors are free again the same requests succeed. Handlers called directly over
in-memory parts (tests/kbroker/in_memory_parts.py) and real logs whose files the descriptor cache closed."""

from __future__ import annotations

import errno
import os

import pytest

from kbroker.handlers import Deferred, fetch
from kbroker.log.descriptor_cache import DESCRIPTORS
from kbroker.wire.errors import ErrorCode
from tests.kbroker.in_memory_parts import context
from tests.kbroker.test_handlers_in_memory import (TOPIC_ID, FetchRequest, batch, flusher, node,  # noqa: F401 - fixtures
                                                   produce_to, values_of)

pytestmark = pytest.mark.trio


@pytest.fixture
def out_of_descriptors(monkeypatch, tmp_path):
    """``out_of_descriptors(True)``: from now on every open under tmp_path fails with EMFILE, as in a
    process with no descriptor left, after the files the cache held are closed; ``(False)``: they work."""
    real_open = os.open

    def refusing_open(path, flags, mode=0o777, **options):
        if str(path).startswith(str(tmp_path)):
            raise OSError(errno.EMFILE, "Too many open files", path)
        return real_open(path, flags, mode, **options)

    def switch(on: bool) -> None:
        if on:
            DESCRIPTORS.close_idle()
            monkeypatch.setattr(os, "open", refusing_open)
        else:
            monkeypatch.setattr(os, "open", real_open)

    return switch


async def produce_result(node, records: bytes, index: int = 0, acks: int = 1):
    answer = await produce_to(node, records, index=index, acks=acks)
    if isinstance(answer, Deferred):
        await answer.ready()
        answer = answer.response
    return answer.responses[0].partition_responses[0]


async def fetch_both(node, offset: int):
    topic = FetchRequest.FetchTopic
    wanted = [topic.FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20)
              for index in (0, 1)]
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                           topics=[topic(topic="events", topic_id=TOPIC_ID, partitions=wanted)])
    [answered] = (await fetch.handle(node, context("Fetch", 13), request)).responses
    return answered.partitions


async def test_produce_out_of_descriptors_is_a_storage_error_and_writes_nothing(node, out_of_descriptors):
    assert (await produce_result(node, batch(b"a"))).error_code == ErrorCode.NONE
    out_of_descriptors(True)
    refused = await produce_result(node, batch(b"b"))
    assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert node.partition("events", 0).log.log_end_offset == 1
    out_of_descriptors(False)
    retried = await produce_result(node, batch(b"b"))
    assert (retried.error_code, retried.base_offset) == (ErrorCode.NONE, 1)


async def test_acks_all_whose_fsync_cannot_open_its_files_is_a_storage_error(node, flusher):
    flusher.failing = OSError(errno.EMFILE, "Too many open files")
    assert (await produce_result(node, batch(b"a"), acks=-1)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    flusher.failing = None
    assert (await produce_result(node, batch(b"b"), acks=-1)).error_code == ErrorCode.NONE


async def test_fetch_out_of_descriptors_answers_the_partitions_it_can_read(node, out_of_descriptors):
    await produce_result(node, batch(b"a"), index=0)
    await produce_result(node, batch(b"b"), index=1)
    node.partition("events", 1).log.read(0, 1 << 20).read()  # its file is open (a region will pin it)
    with node.partition("events", 1).log.active_segment.pinned():
        out_of_descriptors(True)
        first, second = await fetch_both(node, 0)
    assert first.error_code == ErrorCode.KAFKA_STORAGE_ERROR and first.records == b""
    assert second.error_code == ErrorCode.NONE and values_of(second.records) == [b"b"]
    out_of_descriptors(False)
    first, second = await fetch_both(node, 0)
    assert first.error_code == ErrorCode.NONE and values_of(first.records) == [b"a"]
