"""The compatibility levels (kbroker/schemas/compatibility.py) as tables. Each Avro case is a rule of the
Avro specification's schema resolution beside those of test_schema_types.py; every level is checked in
both directions and transitively; JSON Schema cases carry the name of Confluent's rule they expect.
Protobuf's rules have their own table (test_protobuf.py)."""

from __future__ import annotations

import json

import pytest

from kbroker.schemas.compatibility import LEVELS, check
from kbroker.schemas.types import parse


def avro(document):
    return parse("AVRO", json.dumps(document), (), lambda reference: None)


def json_schema(document):
    return parse("JSON", json.dumps(document), (), lambda reference: None)


def record(*fields, name="R", **extra) -> dict:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def field(name, kind, **extra) -> dict:
    return {"name": name, "type": kind, **extra}


def enum(name, *symbols, **extra) -> dict:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


AVRO_CASES = [  # (what, writer, reader, the reader reads the writer's data)
    ("null reads null", "null", "null", True),
    ("boolean is not a number", "boolean", "int", False),
    ("string is not a number", "string", "int", False),
    ("float does not narrow to long", "float", "long", False),
    ("fields in another order", record(field("a", "int"), field("b", "string")),
     record(field("b", "string"), field("a", "int")), True),
    ("a field renamed with the old name as its alias", record(field("old", "int")),
     record(field("new", "int", aliases=["old"])), True),
    ("a field renamed without an alias", record(field("old", "int")), record(field("new", "int")), False),
    ("an optional field added with a null default", record(field("a", "int")),
     record(field("a", "int"), field("b", ["null", "string"], default=None)), True),
    ("an enum renamed", enum("E", "A"), enum("F", "A"), False),
    ("an enum renamed with the old name as an alias", enum("E", "A"), enum("F", "A", aliases=["E"]), True),
    ("a fixed renamed, same size", {"type": "fixed", "name": "F", "size": 4},
     {"type": "fixed", "name": "G", "size": 4}, False),
    ("a plain type promoted into a union", "int", ["null", "long"], True),
    ("each writer branch read by some reader branch", ["int", "long"], ["long", "double"], True),
    ("a writer branch no reader type reads", ["int", "string"], "string", False),
    ("a map of arrays of promoted items", {"type": "map", "values": {"type": "array", "items": "int"}},
     {"type": "map", "values": {"type": "array", "items": "long"}}, True),
    ("an array of records whose field is promoted", {"type": "array", "items": record(field("x", "int"), name="P")},
     {"type": "array", "items": record(field("x", "double"), name="P")}, True),
    ("an array of records whose field narrows", {"type": "array", "items": record(field("x", "double"), name="P")},
     {"type": "array", "items": record(field("x", "int"), name="P")}, False),
    ("a nested record gains a field with a default", record(field("n", record(field("x", "int"), name="N"))),
     record(field("n", record(field("x", "int"), field("y", "int", default=0), name="N"))), True),
]


@pytest.mark.parametrize("what, writer, reader, readable", AVRO_CASES, ids=[case[0] for case in AVRO_CASES])
def test_avro_schema_resolution(what, writer, reader, readable):
    assert (check("BACKWARD", avro(reader), [avro(writer)]) == []) is readable
    assert (check("FORWARD", avro(writer), [avro(reader)]) == []) is readable


# One change from an old schema to a new one: (what, old, new, new reads old's data, old reads new's).
V1 = record(field("a", "int"))
CHANGES = [
    ("a field added with a default", V1, record(field("a", "int"), field("b", "int", default=0)), True, True),
    ("a field added without a default", V1, record(field("a", "int"), field("b", "int")), False, True),
    ("a field without a default removed", record(field("a", "int"), field("b", "int")), V1, True, False),
    ("a field promoted from int to long", V1, record(field("a", "long")), True, False),
    ("a field narrowed from long to int", record(field("a", "long")), V1, False, True),
    ("a field's type changed from int to string", V1, record(field("a", "string")), False, False),
]
LEVEL_CASES = [(what, level, old, new, backward, forward) for what, old, new, backward, forward in CHANGES
               for level in LEVELS]


@pytest.mark.parametrize("what, level, old, new, backward, forward", LEVEL_CASES,
                         ids=[f"{case[1]}: {case[0]}" for case in LEVEL_CASES])
def test_each_level_checks_its_directions(what, level, old, new, backward, forward):
    wanted = {"NONE": True, "BACKWARD": backward, "FORWARD": forward, "FULL": backward and forward}
    assert (check(level, avro(new), [avro(old)]) == []) is wanted[level.removesuffix("_TRANSITIVE")]


# Three versions each: the third follows the second at the level but not the first.
TRANSITIVE_CASES = [
    ("BACKWARD", record(field("a", "int")), record(field("a", "int"), field("b", "int", default=0)),
     record(field("a", "int"), field("b", "int"))),  # b required: v2's data has it, v1's does not
    ("FORWARD", record(field("a", "int"), field("b", "int")), record(field("a", "int"), field("b", "int", default=0)),
     record(field("a", "int"))),  # b dropped: v2 reads it as its default, v1 has none
    ("FULL", record(field("a", "int"), field("b", "string", default="x")), record(field("a", "int")),
     record(field("a", "int"), field("b", "int", default=0))),  # a dropped field back with another type
]


@pytest.mark.parametrize("level, v1, v2, v3", TRANSITIVE_CASES, ids=[case[0] for case in TRANSITIVE_CASES])
def test_transitive_levels_compare_with_every_version(level, v1, v2, v3):
    v1, v2, v3 = avro(v1), avro(v2), avro(v3)
    assert check(level, v2, [v1]) == []
    assert check(level, v3, [v1, v2]) == []  # a plain level compares with the latest only
    assert check(f"{level}_TRANSITIVE", v3, [v1, v2]) != []
    assert check(f"{level}_TRANSITIVE", v3, [v2]) == []
    assert check("NONE", v3, [v1, v2]) == []


def test_a_change_of_schema_type_is_incompatible_and_an_unknown_level_an_error():
    assert check("BACKWARD", json_schema({"type": "integer"}), [avro("int")]) == [
        "the schema type changed from AVRO to JSON"]
    assert check("BACKWARD", avro("int"), []) == []
    with pytest.raises(ValueError):
        check("SIDEWAYS", avro("int"), [avro("int")])


OBJECT = {"type": "object", "properties": {"id": {"type": "integer"}}}
JSON_CASES = [  # (what, writer, reader, Confluent's rule, or None when the reader takes every writer document)
    ("a type list widened", {"type": ["string"]}, {"type": ["string", "null"]}, None),
    ("a type list narrowed", {"type": ["string", "null"]}, {"type": "string"}, "TYPE_NARROWED"),
    ("a type constrained where there was none", {}, {"type": "string"}, "TYPE_NARROWED"),
    ("an enum where there was none", {"type": "string"}, {"type": "string", "enum": ["a"]}, "ENUM_ARRAY_NARROWED"),
    ("a longer maxLength", {"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, None),
    ("a larger minLength", {"type": "string", "minLength": 1}, {"type": "string", "minLength": 2},
     "MIN_LENGTH_INCREASED"),
    ("a smaller maximum", {"type": "number", "maximum": 10}, {"type": "number", "maximum": 9}, "MAXIMUM_DECREASED"),
    ("a smaller minimum", {"type": "number", "minimum": 1}, {"type": "number", "minimum": 0}, None),
    ("fewer maxItems", {"type": "array", "maxItems": 3}, {"type": "array", "maxItems": 2}, "MAX_ITEMS_DECREASED"),
    ("more minItems", {"type": "array", "minItems": 0}, {"type": "array", "minItems": 1}, "MIN_ITEMS_INCREASED"),
    ("array items widened", {"type": "array", "items": {"type": "integer"}},
     {"type": "array", "items": {"type": "number"}}, None),
    ("an unconstrained property added to an open model", OBJECT,
     {**OBJECT, "properties": {**OBJECT["properties"], "extra": {}}}, None),
    ("a closed model opened", {**OBJECT, "additionalProperties": False}, OBJECT, None),
    ("a property removed from an open model", OBJECT, {"type": "object", "properties": {}}, None),
    ("a false writer schema reads as anything", False, {"type": "string"}, None),
    ("a false reader schema", {"type": "string"}, False, "TYPE_NARROWED"),
]


@pytest.mark.parametrize("what, writer, reader, rule", JSON_CASES, ids=[case[0] for case in JSON_CASES])
def test_json_schema_rules(what, writer, reader, rule):
    problems = check("BACKWARD", json_schema(reader), [json_schema(writer)])
    assert (problems == []) if rule is None else (problems and rule in problems[0]), problems


def test_json_forward_and_full_swap_the_reader():
    old, new = json_schema(OBJECT), json_schema({**OBJECT, "required": ["id"]})
    assert check("BACKWARD", new, [old]) != []  # new readers require what old writers may leave out
    assert check("FORWARD", new, [old]) == []  # old readers take everything new writers write
    assert check("FULL", new, [old]) != []
