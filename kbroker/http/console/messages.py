"""Browsing a partition's messages as a consumer of it would: Fetch and ListOffsets from its leader, as the
console's user (so READ on the topic is needed), reading only the batches a page shows.

A page is at most ``limit`` records. Oldest first, it starts at an offset (or the first offset at a
timestamp) and goes forward; newest first, it ends before that offset (the high watermark by default)
and goes back. With a filter (a key, or a substring of the key, value or a header) a page scans up to
``SCAN_RECORDS`` records for its matches, so a rare match in a large topic takes several pages rather
than one unbounded read; the page says how far it scanned and where the next one starts.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from kbroker.tools.client import EARLIEST, LATEST, Client, KafkaError, check_error_code
from kbroker.tools.console import leaders_for_producing
from kbroker.wire.errors import ErrorCode
from kbroker.wire.murmur2 import default_partition
from kbroker.wire.records import Record, build_batch, decode_records, iter_batches
from kbroker.wire.schema import API_BY_NAME

FETCH_BYTES = 1 << 20  # one Fetch's partition_max_bytes: a page of small records is one request
SCAN_RECORDS = 10_000
MAX_LIMIT = 500
SHOWN_BYTES = 16 * 1024  # of each key, value and header
_FetchTopic = API_BY_NAME["Fetch"].request_class.FetchTopic
_FetchPartition = _FetchTopic.FetchPartition
_ListTopic = API_BY_NAME["ListOffsets"].request_class.ListOffsetsTopic
_ProduceData = API_BY_NAME["Produce"].request_class.TopicProduceData


@dataclass(frozen=True)
class Message:
    offset: int
    timestamp: int  # ms
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Wanted:
    partition: int = 0
    offset: int | None = None  # oldest first: the first offset; newest first: the one after the last
    timestamp: int | None = None  # ms: start at the first offset at or after it (instead of ``offset``)
    newest_first: bool = True
    limit: int = 50
    key: str = ""  # the key, exactly
    contains: str = ""  # a substring of the key, the value or a header value


@dataclass(frozen=True)
class Page:
    messages: list[Message]  # in the page's order
    log_start: int
    high_watermark: int
    scanned: tuple[int, int]  # [from, to) of the offsets read
    next: int | None  # the ``offset`` of the page after this one, in the same order; None at the end
    previous: int | None  # of the page before it; None at the start


def matches(message: Message, wanted: Wanted) -> bool:
    if wanted.key and message.key != wanted.key.encode():
        return False
    if not wanted.contains:
        return True
    needle = wanted.contains.encode()
    return any(needle in part for part in (message.key or b"", message.value or b"",
                                           *(value or b"" for _, value in message.headers)))


def read_page(client: Client, topic: str, wanted: Wanted) -> Page:
    """One page of the partition's messages as ``wanted`` says."""
    leader = client.broker(client.leaders(topic)[wanted.partition])
    log_start, high_watermark = _bounds(leader, topic, wanted.partition)
    limit = max(1, min(wanted.limit, MAX_LIMIT))
    filtered = bool(wanted.key or wanted.contains)
    step = SCAN_RECORDS if filtered else limit
    start = wanted.offset
    if wanted.timestamp is not None:
        start = _offset_at(leader, topic, wanted.partition, wanted.timestamp)
        start = high_watermark if start < 0 else start
    if wanted.newest_first:
        end = high_watermark if start is None else max(log_start, min(high_watermark, start))
        begin = max(log_start, end - step)
        found = [m for m in _read(leader, topic, wanted.partition, begin, end) if matches(m, wanted)][-limit:]
        found.reverse()
        if filtered and len(found) == limit:
            begin = found[-1].offset
        return Page(found, log_start, high_watermark, (begin, end), begin if begin > log_start else None,
                    min(high_watermark, end + step) if end < high_watermark else None)
    begin = log_start if start is None else min(high_watermark, max(log_start, start))
    end = min(high_watermark, begin + step)
    found = [m for m in _read(leader, topic, wanted.partition, begin, end) if matches(m, wanted)][:limit]
    if filtered and len(found) == limit:
        end = found[-1].offset + 1
    return Page(found, log_start, high_watermark, (begin, end), end if end < high_watermark else None,
                max(log_start, begin - step) if begin > log_start else None)


def _read(leader, topic: str, partition: int, begin: int, end: int) -> list[Message]:
    """The records in [begin, end), fetched in as few requests as their size allows."""
    found: list[Message] = []
    position = begin
    while position < end:
        answer = leader.call("Fetch", replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=FETCH_BYTES,
                             isolation_level=0, session_id=0, session_epoch=-1, topics=[_FetchTopic(
                                 topic=topic, partitions=[_FetchPartition(
                                     partition=partition, current_leader_epoch=-1, fetch_offset=position,
                                     last_fetched_epoch=-1, log_start_offset=-1,
                                     partition_max_bytes=FETCH_BYTES)])],
                             forgotten_topics_data=[], rack_id="")
        check_error_code(answer.error_code, topic)
        [result] = answer.responses[0].partitions
        check_error_code(result.error_code, f"{topic}-{partition}")
        data = result.records or b""
        before = position
        for at, header in iter_batches(data, allow_partial_tail=True):
            if header.last_offset < position:
                continue
            position = header.last_offset + 1
            if header.is_control:
                continue
            _, records = decode_records(data, at)
            for record in records:
                offset = header.base_offset + record.offset_delta
                if begin <= offset < end:
                    found.append(Message(offset, header.base_timestamp + record.timestamp_delta, record.key,
                                         record.value, record.headers))
        if position == before:  # nothing more to read (an aborted or compacted tail)
            break
    return found


def _bounds(leader, topic: str, partition: int) -> tuple[int, int]:
    return _offset_at(leader, topic, partition, EARLIEST), _offset_at(leader, topic, partition, LATEST)


def _offset_at(leader, topic: str, partition: int, timestamp: int) -> int:
    answer = leader.call("ListOffsets", replica_id=-1, isolation_level=0, topics=[_ListTopic(
        name=topic, partitions=[_ListTopic.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)])])
    [result] = answer.topics[0].partitions
    check_error_code(result.error_code, f"{topic}-{partition}")
    return result.offset


def produce(client: Client, topic: str, partition: int | None, key: bytes | None, value: bytes,
            headers: list[tuple[str, bytes]]) -> tuple[int, int]:
    """One record, acks=all, as Kafka's producer places it (a key's partition by murmur2, else the first);
    (partition, offset) where it was written."""
    leaders = leaders_for_producing(client, topic)
    if partition is None:
        partition = default_partition(key, len(leaders)) if key is not None else 0
    if partition not in leaders:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
    now_ms = int(time.time() * 1000)
    batch = build_batch([Record(key=key, value=value, headers=headers)], base_timestamp=now_ms, max_timestamp=now_ms)
    answer = client.broker(leaders[partition]).call("Produce", acks=-1, timeout_ms=30_000, topic_data=[_ProduceData(
        name=topic, partition_data=[_ProduceData.PartitionProduceData(index=partition, records=batch)])])
    [result] = answer.responses[0].partition_responses
    check_error_code(result.error_code, f"{topic}-{partition}", getattr(result, "error_message", None))
    return partition, result.base_offset


def shown(data: bytes | None, form: str) -> str:
    """Bytes as the page shows them: ``text`` (UTF-8, else hexadecimal), ``json`` (indented where it parses)
    or ``hex``; past ``SHOWN_BYTES``, cut, saying how much more there is (a page of large values stays small)."""
    if data is None:
        return "null"
    if len(data) > SHOWN_BYTES:
        more = len(data) - SHOWN_BYTES
        return shown(data[:SHOWN_BYTES], "hex" if form == "hex" else "text") + f" … ({more:,} bytes more)"
    if form == "hex":
        return data.hex(" ")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data.hex(" ")
    if form == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text
