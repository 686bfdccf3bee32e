"""The console's parts without a broker: sessions, the listener it logs in on, how bytes are shown, and values
in the schema registry's wire format. compat_tests/test_console*.py run the whole console."""

from __future__ import annotations

import io
import json
import struct

import avro.io
import avro.schema
import pytest

from kbroker.http.console.access import ANONYMOUS, MAX_SESSIONS, Sessions, csrf_matches
from kbroker.http.console.kafka import choose_listener
from kbroker.http.console.messages import Message, Wanted, matches, shown
from kbroker.http.console.pages import e, url
from kbroker.http.console.schemas import Decoder, schema_id
from kbroker.schemas import records
from kbroker.schemas.records import SchemaVersion
from kbroker.schemas.registry import Registry
from kbroker.schemas.types import check


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_sasl_listener_is_chosen_with_the_strongest_mechanism_it_offers():
    listener = choose_listener([("localhost", 9092, "PLAINTEXT", ()),
                                ("0.0.0.0", 9093, "SASL_PLAINTEXT", ("PLAIN", "SCRAM-SHA-256"))])
    assert (listener.host, listener.port, listener.mechanism, listener.needs_login) == \
        ("127.0.0.1", 9093, "SCRAM-SHA-256", True)
    plain = choose_listener([("localhost", 9092, "PLAINTEXT", ()), ("::", 9094, "SSL", ())])
    assert (plain.host, plain.port, plain.mechanism, plain.needs_login) == ("127.0.0.1", 9092, None, False)
    tls = choose_listener([("::", 9094, "SSL", ())])
    assert tls.host == "::1" and tls.security().ssl_context is not None


def test_a_session_lives_while_used_and_the_least_recent_goes_first():
    clock = Clock()
    sessions = Sessions(choose_listener([("localhost", 9092, "PLAINTEXT", ())]), clock)
    token = sessions.anonymous()
    session = sessions.find(token)
    assert session.principal == ANONYMOUS and csrf_matches(session, session.csrf)
    assert not csrf_matches(session, None) and not csrf_matches(session, session.csrf + "x")
    clock.now = 8 * 3600 - 1
    assert sessions.find(token) is session  # used: kept alive
    clock.now += 8 * 3600 + 1
    assert sessions.find(token) is None
    tokens = [sessions.anonymous() for _ in range(MAX_SESSIONS)]
    sessions.find(tokens[0])  # the oldest, used again
    newest = sessions.anonymous()
    assert sessions.find(tokens[0]) is not None and sessions.find(tokens[1]) is None and sessions.find(newest)
    assert sessions.find(None) is None and sessions.find("made-up") is None


@pytest.mark.parametrize("data, form, expected", [
    (None, "text", "null"),
    (b"caf\xc3\xa9", "text", "café"),
    (b"\xff\x00", "text", "ff 00"),  # not UTF-8: hexadecimal
    (b'{"a":[1,2]}', "json", '{\n  "a": [\n    1,\n    2\n  ]\n}'),
    (b"{not json", "json", "{not json"),
    (b"ab", "hex", "61 62"),
    (b"x" * 16390, "json", "x" * 16384 + " … (6 bytes more)"),  # cut: a page of large values stays small
    (b"\x01" * 16385, "hex", ("01 " * 16384).strip() + " … (1 bytes more)"),
])
def test_bytes_are_shown_as_text_json_or_hexadecimal(data, form, expected):
    assert shown(data, form) == expected


def test_a_filter_matches_the_key_exactly_or_a_substring_anywhere():
    message = Message(5, 0, b"order-1", b"value with needle", [("trace", b"abc"), ("empty", None)])
    assert matches(message, Wanted(key="order-1")) and not matches(message, Wanted(key="order"))
    assert all(matches(message, Wanted(contains=part)) for part in ("needle", "der-", "abc"))
    assert not matches(message, Wanted(contains="absent")) and not matches(message, Wanted(key="x", contains="needle"))


def test_what_the_page_writes_is_escaped_and_its_links_quoted():
    assert e('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"
    assert url("/topics/a b", q="x&y", empty="", none=None) == "/topics/a%20b?q=x%26y"


def _registry(*versions: SchemaVersion) -> Registry:
    """A registry that applied a SCHEMA record of each version, as its node reads them from _schemas."""
    registry = Registry(check)
    for version in versions:
        registry.apply(*records.decode(records.schema_key(version.subject, version.version),
                                       json.dumps(version.to_json()).encode()))
    return registry


AVRO = {"type": "record", "name": "Reading", "fields": [{"name": "id", "type": "long"},
                                                        {"name": "raw", "type": "bytes"}]}


def _framed(schema_id_: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id_) + payload


def test_a_value_in_the_wire_format_is_decoded_through_its_schema():
    out = io.BytesIO()
    avro.io.DatumWriter(avro.schema.parse(json.dumps(AVRO))).write({"id": 3, "raw": b"\x01\xff"}, avro.io.BinaryEncoder(out))
    registry = _registry(SchemaVersion("readings-value", 1, 11, "AVRO", json.dumps(AVRO)),
                         SchemaVersion("events-value", 1, 12, "JSON", '{"type": "object"}'),
                         SchemaVersion("p-value", 1, 13, "PROTOBUF", 'syntax = "proto3"; message M { int32 a = 1; }'))
    decoder = Decoder()
    label, text = decoder.decoded(_framed(11, out.getvalue()), registry)
    assert label == "schema 11 (AVRO, readings-value v1)" and json.loads(text) == {"id": 3, "raw": "01ff"}
    assert decoder.decoded(_framed(12, b'{"ok": true}'), registry) == ("schema 12 (JSON, events-value v1)",
                                                                        '{\n  "ok": true\n}')
    assert decoder.decoded(_framed(13, b"\x00\x08\x01"), registry) == (
        "schema 13 (PROTOBUF, p-value v1): Protobuf values are shown as bytes", "")
    assert decoder.decoded(_framed(11, b"\x80"), registry) == (  # torn: said, not a failed page
        "schema 11 (AVRO, readings-value v1): does not decode (InvalidAvroBinaryEncoding)", "")
    assert decoder.decoded(_framed(99, b"{}"), registry) is None  # no such schema: not the wire format
    assert decoder.decoded(b"plain", registry) is None and schema_id(b"\x00\x00\x00") is None
