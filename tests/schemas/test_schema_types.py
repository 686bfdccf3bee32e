"""Schemas parsed by their libraries and the compatibility rules (kbroker/schemas/types.py, json_rules.py),
as tables: each Avro case is a rule of the Avro specification's schema resolution (writer's schema,
reader's schema, whether the reader can read what the writer wrote)."""

from __future__ import annotations

import json

import pytest

from kbroker.schemas.records import Reference, SchemaVersion
from kbroker.schemas.registry import RegistryError
from kbroker.schemas.types import check, parse


def avro(document) -> object:
    return parse("AVRO", json.dumps(document), (), lambda reference: None)


def record(*fields, name="R", **extra) -> dict:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def field(name, kind, **extra) -> dict:
    return {"name": name, "type": kind, **extra}


PROMOTIONS = [("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
              ("float", "double"), ("string", "bytes"), ("bytes", "string")]

AVRO_CASES = [  # (what, writer, reader, the reader reads the writer's data)
    *[(f"{w} promotes to {r}", w, r, True) for w, r in PROMOTIONS],
    *[(f"{r} does not narrow to {w}", r, w, False) for w, r in PROMOTIONS if (r, w) not in PROMOTIONS],
    ("a field added with a default", record(field("a", "int")),
     record(field("a", "int"), field("b", "string", default="x")), True),
    ("a field added without a default", record(field("a", "int")), record(field("a", "int"), field("b", "string")),
     False),
    ("a field the reader drops is skipped", record(field("a", "int"), field("b", "string")),
     record(field("a", "int")), True),
    ("a field's type promoted", record(field("a", "int")), record(field("a", "long")), True),
    ("an enum symbol added", {"type": "enum", "name": "E", "symbols": ["A"]},
     {"type": "enum", "name": "E", "symbols": ["A", "B"]}, True),
    ("an enum symbol removed", {"type": "enum", "name": "E", "symbols": ["A", "B"]},
     {"type": "enum", "name": "E", "symbols": ["A"]}, False),
    ("an enum symbol removed with an enum default", {"type": "enum", "name": "E", "symbols": ["A", "B"]},
     {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}, True),
    ("a union widened", ["null", "int"], ["null", "int", "string"], True),
    ("a union narrowed", ["null", "int", "string"], ["null", "int"], False),
    ("a plain type read as a union holding it", "int", ["null", "int"], True),
    ("a union read as one of its branches", ["null", "int"], "int", False),
    ("a record renamed", record(field("a", "int"), name="Old"), record(field("a", "int"), name="New"), False),
    ("a record renamed with the old name as an alias", record(field("a", "int"), name="Old"),
     record(field("a", "int"), name="New", aliases=["Old"]), True),
    ("a fixed of another size", {"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8},
     False),
    ("an array of promoted items", {"type": "array", "items": "int"}, {"type": "array", "items": "long"}, True),
    ("a map of narrowed values", {"type": "map", "values": "long"}, {"type": "map", "values": "int"}, False),
    ("a nested record gains a field without a default", record(field("n", record(field("x", "int"), name="N"))),
     record(field("n", record(field("x", "int"), field("y", "int"), name="N"))), False),
]


@pytest.mark.parametrize("what, writer, reader, readable", AVRO_CASES, ids=[case[0] for case in AVRO_CASES])
def test_avro_schema_resolution(what, writer, reader, readable):
    new, old = avro(reader), avro(writer)
    assert (check("BACKWARD", new, [old]) == []) is readable  # the new schema reads the old one's data
    assert (check("FORWARD", old, [new]) == []) is readable  # the same pair, the other way round
    full = check("FULL", new, [old]) == []
    assert full is (readable and check("BACKWARD", old, [new]) == [])


def test_transitive_levels_compare_with_every_version():
    v1 = avro(record(field("a", "int")))
    v2 = avro(record(field("a", "int"), field("b", "int", default=0)))
    v3 = avro(record(field("a", "int"), field("b", "int")))  # b required: reads v2's data, not v1's
    assert check("BACKWARD", v3, [v2]) == []
    assert check("BACKWARD_TRANSITIVE", v3, [v1, v2]) != []
    assert check("NONE", v3, [v1, v2]) == []


JSON_OBJECT = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
               "required": ["id"]}

JSON_CASES = [  # (what, writer, reader, expected rule or None when the reader accepts every writer document)
    ("the same schema", JSON_OBJECT, JSON_OBJECT, None),
    ("a required property added", JSON_OBJECT, {**JSON_OBJECT, "required": ["id", "name"]}, "REQUIRED_PROPERTY_ADDED"),
    ("a required property dropped", JSON_OBJECT, {**JSON_OBJECT, "required": []}, None),
    ("integer widened to number", {"type": "integer"}, {"type": "number"}, None),
    ("number narrowed to integer", {"type": "number"}, {"type": "integer"}, "TYPE_NARROWED"),
    ("a property constrained in an open model", {"type": "object", "properties": {}},
     {"type": "object", "properties": {"x": {"type": "string"}}}, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"),
    ("a property added to a closed model", {"type": "object", "properties": {}, "additionalProperties": False},
     {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False}, None),
    ("a property removed from a closed model",
     {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False},
     {"type": "object", "properties": {}, "additionalProperties": False}, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"),
    ("an open model closed", {"type": "object"}, {"type": "object", "additionalProperties": False},
     "ADDITIONAL_PROPERTIES_NARROWED"),
    ("an enum value removed", {"enum": ["a", "b"]}, {"enum": ["a"]}, "ENUM_ARRAY_NARROWED"),
    ("an enum value added", {"enum": ["a"]}, {"enum": ["a", "b"]}, None),
    ("a shorter maxLength", {"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5},
     "MAX_LENGTH_DECREASED"),
    ("a larger minimum", {"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 1}, "MINIMUM_INCREASED"),
    ("array items narrowed", {"type": "array", "items": {"type": "number"}},
     {"type": "array", "items": {"type": "integer"}}, "TYPE_NARROWED"),
    ("a nested property's type narrowed", {"type": "object", "properties": {"o": JSON_OBJECT}},
     {"type": "object", "properties": {"o": {**JSON_OBJECT, "properties": {"id": {"type": "string"}}}}},
     "TYPE_NARROWED"),
]


@pytest.mark.parametrize("what, writer, reader, rule", JSON_CASES, ids=[case[0] for case in JSON_CASES])
def test_json_schema_rules(what, writer, reader, rule):
    def json_schema(document):
        return parse("JSON", json.dumps(document), (), lambda reference: None)

    problems = check("BACKWARD", json_schema(reader), [json_schema(writer)])
    if rule is None:
        assert problems == []
    else:
        assert problems and all(rule in problem for problem in problems[:1]), problems


@pytest.mark.parametrize("schema_type, text", [
    ("AVRO", "{not json"), ("AVRO", '{"type": "record", "name": "R"}'), ("AVRO", '{"type": "nothing"}'),
    ("AVRO", '{"type": "enum", "name": "E", "symbols": ["A", "A"]}'),
    ("JSON", "[1, 2]"), ("JSON", '{"type": "not-a-type"}'), ("JSON", '{"minimum": "zero"}'),
    ("AVRO", ""), ("AVRO", '{"type": "fixed", "name": "F"}'),
    ("AVRO", '{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}'),
    ("JSON", "5"), ("JSON", '{"required": "id"}'),
    ("JSON", '{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": 5}'),
    ("PROTOBUF", 'syntax = "proto3"; message M { Unknown u = 1; }'), ("PROTOBUF", ""), ("PROTOBUF", "   "),
    ("PROTOBUF", 'syntax = "proto3";\nmessage M {\n  U u = 1;\n  V v = 2;\n}'),  # two errors, one line
    ("protobuf", 'syntax = "proto3";'), ("XML", "<a/>"),
])
def test_a_schema_that_does_not_parse_is_42201_in_one_line(schema_type, text):
    with pytest.raises(RegistryError) as refused:
        parse(schema_type, text, (), lambda reference: None)
    assert refused.value.error_code == 42201 and "\n" not in refused.value.message


def test_canonical_text_references_and_normalize():
    spaced = parse("AVRO", '{ "type" : "string" }', (), lambda reference: None)
    assert spaced.canonical == '{"type":"string"}'
    dependency = SchemaVersion("dep", 1, 1, "AVRO", json.dumps(record(field("q", "int"), name="x.Dep")))
    user = parse("AVRO", json.dumps(record(field("d", "x.Dep"), name="x.User")),
                 (Reference("x.Dep", "dep", 1),), lambda reference: dependency)
    assert '"x.Dep"' in user.normalized().canonical or '"Dep"' in user.normalized().canonical  # named, not inlined
    with pytest.raises(RegistryError):  # without the reference the name is unknown
        parse("AVRO", json.dumps(record(field("d", "x.Dep"), name="x.User")), (), lambda reference: None)
    ordered = parse("JSON", '{"type": "object", "properties": {}}', (), None, normalize=True)
    assert ordered.canonical == '{"properties":{},"type":"object"}'
