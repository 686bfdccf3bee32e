"""Schemas parsed by the library of their type (kbroker/schemas/types.py): what is stored and compared,
normalize, references, a base64 Protobuf descriptor (bad schemas of each type: test_schema_types.py)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest

from kbroker.schemas.records import Reference, SchemaVersion
from kbroker.schemas.types import InvalidSchema, ParsedSchema, parse


def nothing(reference):
    raise AssertionError(f"no reference was expected, not {reference}")


def versions(*entries: SchemaVersion):
    """A resolver over ``entries``, found by subject and version."""
    by_key = {(entry.subject, entry.version): entry for entry in entries}
    return lambda reference: by_key.get((reference.subject, reference.version))


ORDER_PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
// an order, as a shop keeps it
message Order {
  int64 id = 1;
  google.protobuf.Timestamp placed = 2;
  map<string, int32> items = 3;
  oneof payment { string card = 4; string iban = 5; }
}
"""


def test_each_type_parses_and_keeps_its_canonical_text():
    avro = parse("AVRO", '{ "type": "record", "name": "R", "fields": [ {"name": "a", "type": "int"} ] }', (), nothing)
    assert avro.schema_type == "AVRO"
    assert avro.canonical == '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    document = parse("JSON", '{"type": "object", "properties": {"a": {"type": "integer"}}}', (), nothing)
    assert document.canonical == '{"type":"object","properties":{"a":{"type":"integer"}}}'
    assert document.parsed == {"type": "object", "properties": {"a": {"type": "integer"}}}
    protobuf = parse("PROTOBUF", ORDER_PROTO, (), nothing)
    assert protobuf.schema_type == "PROTOBUF" and protobuf.canonical == ORDER_PROTO  # source is kept as sent


def test_json_schema_draft_follows_dollar_schema_and_defaults_to_draft_7():
    draft_2020 = '{"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": [{"type": "integer"}]}'
    assert parse("JSON", draft_2020, (), nothing).schema_type == "JSON"
    with pytest.raises(InvalidSchema):  # draft-07's metaschema: "items" is a schema or an array of them
        parse("JSON", '{"items": 5}', (), nothing)
    with pytest.raises(InvalidSchema):
        parse("JSON", '{"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": 5}', (), nothing)


def test_an_unknown_schema_type_is_42201_and_says_so():
    with pytest.raises(InvalidSchema, match="Invalid schema type XML") as refused:
        parse("XML", "<a/>", (), nothing)
    assert refused.value.error_code == 42201 and refused.value.http_status == 422


def test_avro_references_resolve_through_their_own_references():
    money = SchemaVersion("money", 1, 1, "AVRO", json.dumps(
        {"type": "record", "name": "shop.Money", "fields": [{"name": "currency", "type": "shop.Currency"}]}),
        (Reference("shop.Currency", "currency", 1),))
    currency = SchemaVersion("currency", 1, 2, "AVRO", '{"type": "enum", "name": "shop.Currency", "symbols": ["EUR"]}')
    order = '{"type": "record", "name": "shop.Order", "fields": [{"name": "total", "type": "shop.Money"}]}'
    references = (Reference("shop.Money", "money", 1),)
    parsed = parse("AVRO", order, references, versions(money, currency))
    assert parsed.references == references
    assert '"shop.Money"' in parsed.normalize()  # referenced by name, not written out
    assert '"EUR"' in parsed.formatted("resolved")  # written out in place
    with pytest.raises(InvalidSchema, match="shop.Money"):  # a reference that resolves to nothing
        parse("AVRO", order, references, versions())


def test_json_references_must_be_json_schemas():
    address = SchemaVersion("address", 1, 1, "JSON", '{"type": "object"}')
    person = '{"type": "object", "properties": {"home": {"$ref": "address.json"}}}'
    references = (Reference("address.json", "address", 1),)
    assert parse("JSON", person, references, versions(address)).references == references
    broken = SchemaVersion("address", 1, 1, "JSON", '{"type": "nothing"}')
    with pytest.raises(InvalidSchema, match="address.json"):
        parse("JSON", person, references, versions(broken))


def test_a_base64_descriptor_as_confluent_kafkas_serializer_sends_it():
    from google.protobuf import timestamp_pb2

    sent = base64.standard_b64encode(timestamp_pb2.DESCRIPTOR.serialized_pb).decode("ascii")  # as _schema_to_str
    parsed = parse("PROTOBUF", sent, (), nothing)
    assert [message.name for message in parsed.parsed.file.message_type] == ["Timestamp"]
    assert parsed.formatted("serialized") and parsed.canonical == sent


def test_normalize_sorts_json_keys_and_prints_avro_one_way():
    first = parse("JSON", '{"type": "object", "properties": {"b": {}, "a": {}}}', (), nothing)
    second = parse("JSON", '{"properties": {"a": {}, "b": {}}, "type": "object"}', (), nothing)
    assert first != second and first.normalized() == second.normalized()
    assert first.normalize() == '{"properties":{"a":{},"b":{}},"type":"object"}'
    short = parse("AVRO", '{"type": "record", "name": "R", "namespace": "n", "fields": [{"name": "a", "type": "int"}]}',
                  (), nothing)
    full = parse("AVRO", '{"name": "n.R", "fields": [{"type": "int", "name": "a"}], "type": "record"}', (), nothing)
    assert short != full and short.normalized() == full.normalized()
    assert parse("AVRO", '"int"', (), nothing, normalize=True).canonical == parse("AVRO", '"int"', (), nothing).normalize()


def test_protobuf_normalize_drops_comments_and_layout():
    spaced = parse("PROTOBUF", ORDER_PROTO, (), nothing)
    tight = parse("PROTOBUF", " ".join(line for line in ORDER_PROTO.splitlines() if not line.startswith("//")), (),
                  nothing)
    assert spaced != tight and spaced.normalized() == tight.normalized()


def test_the_same_schema_is_type_canonical_text_and_references():
    def avro(text, references=()):
        return parse("AVRO", text, references, versions(SchemaVersion("s", 1, 1, "AVRO", '"int"')))

    assert avro('{"type": "string"}') == avro('{ "type" : "string" }')  # whitespace is not part of it
    assert len({avro('{"type": "string"}'), avro('{"type":"string"}')}) == 1
    assert avro('{"type": "string"}') != avro('{"type": "string"}', (Reference("x", "s", 1),))
    assert avro('"string"') != avro('{"type": "string"}')  # the same type, but not the same text
    assert parse("JSON", '{"type": "string"}', (), nothing) != avro('{"type": "string"}')  # another type
    assert isinstance(avro('"int"'), ParsedSchema)


def test_formatted_is_the_canonical_text_unless_a_format_applies():
    avro = parse("AVRO", '{"type": "string"}', (), nothing)
    assert avro.formatted("serialized") == avro.canonical
    protobuf = parse("PROTOBUF", ORDER_PROTO, (), nothing)
    assert protobuf.formatted("") == ORDER_PROTO
    assert base64.standard_b64decode(protobuf.formatted("serialized"))


def test_the_libraries_are_imported_on_first_use_only():
    code = ("import sys, kbroker.schemas.types, kbroker.schemas.compatibility; "
            "print(sorted(name for name in ('avro', 'jsonschema', 'grpc_tools', 'google.protobuf') "
            "if name in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
