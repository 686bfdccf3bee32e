"""Protobuf schemas (kbroker/schemas/protobuf.py through types.py): source and base64 descriptors parsed,
bad ones refused in one line, references and well-known imports, and Confluent's compatibility rules as
a table of (what, previous version, new version, the rule that refuses it under BACKWARD or None)."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from kbroker.schemas.records import Reference, SchemaVersion
from kbroker.schemas.registry import RegistryError
from kbroker.schemas.types import check, parse


def proto(body: str, package: str = "shop", syntax: str = "proto3", imports: str = "") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{imports}\n{body}\n'


def protobuf(text: str, references: tuple[Reference, ...] = (), versions: dict | None = None):
    return parse("PROTOBUF", text, references, lambda reference: (versions or {})[reference.subject])


ORDER = proto("message Order { int64 id = 1; string item = 2; repeated int32 counts = 3; Detail detail = 4; "
              "map<string, int32> tags = 5; oneof payment { string card = 6; string voucher = 7; } "
              "message Detail { string note = 1; } }")


def order(fields: str, extra: str = "", package: str = "shop", syntax: str = "proto3") -> str:
    return proto(f"message Order {{ {fields} }} {extra}", package, syntax)


BASE = "int64 id = 1; string item = 2;"

CASES = [
    ("the same schema", ORDER, ORDER, None),
    ("a field added", order(BASE), order(BASE + " bool gift = 3;"), None),
    ("a field removed", order(BASE + " bool gift = 3;"), order(BASE), None),
    ("a field renamed", order(BASE), order("int64 id = 1; string product = 2;"), None),
    ("a field's number changed: one removed, one added", order(BASE), order("int64 id = 1; string item = 9;"), None),
    ("a message added", order(BASE), order(BASE, "message Refund { int64 id = 1; }"), None),
    ("a message removed", order(BASE, "message Refund { int64 id = 1; }"), order(BASE), "MESSAGE_REMOVED"),
    ("a nested message removed", order(BASE + " message Line { int32 n = 1; }"), order(BASE), "MESSAGE_REMOVED"),
    ("the package changed", order(BASE), order(BASE, package="store"), "PACKAGE_CHANGED"),
    *[(f"{old} to {new}: one wire group", order(f"{old} n = 1;"), order(f"{new} n = 1;"), None) for old, new in [
        ("int32", "int64"), ("int32", "uint32"), ("uint64", "bool"), ("sint32", "sint64"), ("fixed32", "sfixed32"),
        ("fixed64", "sfixed64"), ("string", "bytes"), ("bytes", "string")]],
    *[(f"{old} to {new}: another wire group", order(f"{old} n = 1;"), order(f"{new} n = 1;"),
       "FIELD_SCALAR_KIND_CHANGED") for old, new in [
        ("int32", "sint32"), ("int64", "fixed64"), ("fixed32", "float"), ("float", "double"), ("int32", "string"),
        ("bool", "bytes"), ("sfixed64", "int64")]],
    ("an int32 to an enum", order("int32 state = 1;"), order("State state = 1;", "enum State { NEW = 0; }"), None),
    ("an enum value added", order("State s = 1;", "enum State { NEW = 0; }"),
     order("State s = 1;", "enum State { NEW = 0; PAID = 1; }"), None),
    ("a scalar to a message", order("string detail = 1;"), order("D detail = 1;", "message D { int32 x = 1; }"),
     "FIELD_KIND_CHANGED"),
    ("a message to a map", order("D d = 1;", "message D { int32 x = 1; }"),
     order("map<string, int32> d = 1;", "message D { int32 x = 1; }"), "FIELD_KIND_CHANGED"),
    ("a map's value type changed", order("map<string, int32> m = 1;"), order("map<string, string> m = 1;"),
     "FIELD_SCALAR_KIND_CHANGED"),
    ("a field's message type changed", order("A x = 1;", "message A { int32 a = 1; } message B { int32 a = 1; }"),
     order("B x = 1;", "message A { int32 a = 1; } message B { int32 a = 1; }"), "FIELD_NAMED_TYPE_CHANGED"),
    ("a numeric field made repeated", order("int32 n = 1;"), order("repeated int32 n = 1;"),
     "FIELD_NUMERIC_LABEL_CHANGED"),
    ("a string field made repeated", order("string s = 1;"), order("repeated string s = 1;"), None),
    ("a field made optional (proto3 presence)", order("int32 n = 1;"), order("optional int32 n = 1;"), None),
    ("a required field added (proto2)", order("optional int32 n = 1;", syntax="proto2"),
     order("optional int32 n = 1; required int32 m = 2;", syntax="proto2"), "REQUIRED_FIELD_ADDED"),
    ("a required field removed (proto2)", order("optional int32 n = 1; required int32 m = 2;", syntax="proto2"),
     order("optional int32 n = 1;", syntax="proto2"), "REQUIRED_FIELD_REMOVED"),
    ("one field moved into a new oneof", order(BASE), order("int64 id = 1; oneof what { string item = 2; }"), None),
    ("two fields moved into one oneof", order(BASE), order("oneof what { int64 id = 1; string item = 2; }"),
     "MULTIPLE_FIELDS_MOVED_TO_ONEOF"),
    ("a field moved into an existing oneof", order("int64 id = 1; oneof what { string item = 2; }"),
     order("oneof what { int64 id = 1; string item = 2; }"), "FIELD_MOVED_TO_EXISTING_ONEOF"),
    ("a field moved out of a oneof", order("int64 id = 1; oneof what { string item = 2; string sku = 3; }"),
     order("int64 id = 1; string item = 2; oneof what { string sku = 3; }"), None),
    ("a oneof field added", order("oneof what { string item = 2; }"),
     order("oneof what { string item = 2; string sku = 3; }"), None),
    ("a oneof field removed", order("oneof what { string item = 2; string sku = 3; }"),
     order("oneof what { string item = 2; }"), "ONEOF_FIELD_REMOVED"),
    ("a field's type changed inside a oneof", order("oneof what { int32 n = 1; }"), order("oneof what { string n = 1; }"),
     "FIELD_SCALAR_KIND_CHANGED"),
]


@pytest.mark.parametrize("what, previous, new, rule", CASES, ids=[case[0] for case in CASES])
def test_confluents_protobuf_rules(what, previous, new, rule):
    problems = check("BACKWARD", protobuf(new), [protobuf(previous)])
    if rule is None:
        assert problems == []
    else:
        assert problems and rule in problems[0] and "\n" not in problems[0], problems


def test_forward_and_full_compare_the_other_way_round():
    two = order(BASE + " message Line { int32 n = 1; }")
    one = order(BASE)
    assert check("BACKWARD", protobuf(two), [protobuf(one)]) == []  # a message added
    # FORWARD: the previous version reads the new one's data, and lacks the new message type
    assert "MESSAGE_REMOVED" in check("FORWARD", protobuf(two), [protobuf(one)])[0]
    assert check("FULL", protobuf(two), [protobuf(one)]) != []
    assert check("NONE", protobuf(one), [protobuf(two)]) == []


def test_a_descriptor_in_base64_is_the_same_schema_as_its_source():
    source = protobuf(ORDER)
    serialized = source.formatted("serialized")
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [message.name for message in descriptor.message_type] == ["Order"] and descriptor.package == "shop"
    sent = protobuf(serialized)
    assert sent.canonical == serialized and sent.formatted("serialized") == serialized
    assert source.canonical == ORDER  # source is kept as sent
    assert check("FULL", sent, [source]) == [] and check("FULL", source, [sent]) == []
    assert sent.normalized().canonical == source.normalized().canonical
    assert protobuf(order(BASE)).normalized().canonical != source.normalized().canonical


@pytest.mark.parametrize("text", [
    'syntax = "proto3"; message M { Unknown u = 1; }',
    'syntax = "proto3"; message M { int32 a = 1; int32 b = 1; }',
    'syntax = "proto3"; message',
    'syntax = "proto3"; import "nowhere.proto"; message M {}',
    "AAAA",  # base64, not a descriptor
    base64.b64encode(descriptor_pb2.FileDescriptorProto(
        name="x.proto", syntax="proto3", message_type=[descriptor_pb2.DescriptorProto(name="M", field=[
            descriptor_pb2.FieldDescriptorProto(name="f", number=1, type_name=".Missing",
                                                type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE)])]
    ).SerializeToString()).decode(),  # a descriptor naming a type that is nowhere
    "message M { " * 200 + "}" * 200,
])
def test_a_bad_protobuf_schema_is_42201_in_one_line(text):
    with pytest.raises(RegistryError) as refused:
        protobuf(text)
    assert refused.value.error_code == 42201 and "\n" not in refused.value.message
    assert refused.value.message.startswith("Invalid schema: ")


ADDRESS = proto("message Address { string city = 1; }", package="geo")
CUSTOMER = proto("message Customer { geo.Address home = 1; google.protobuf.Timestamp since = 2; }",
                 imports='import "geo/address.proto";\nimport "google/protobuf/timestamp.proto";')


def test_references_are_imports_by_name_and_well_known_types_need_none():
    versions = {"geo": SchemaVersion("geo", 1, 1, "PROTOBUF", ADDRESS)}
    reference = (Reference("geo/address.proto", "geo", 1),)
    customer = protobuf(CUSTOMER, reference, versions)
    assert sorted(customer.parsed.files) == ["geo/address.proto", "google/protobuf/timestamp.proto", "schema.proto"]
    with pytest.raises(RegistryError) as refused:  # the import without its reference
        protobuf(CUSTOMER)
    assert "geo/address.proto" in refused.value.message

    # the same as confluent-kafka's serializer sends it: descriptors in base64, the dependency too
    address_sent = base64.b64encode(_descriptor(protobuf(ADDRESS), "geo/address.proto")).decode()
    sent = {"geo": SchemaVersion("geo", 1, 1, "PROTOBUF", address_sent)}
    customer_sent = protobuf(customer.formatted("serialized"), reference, sent)
    assert check("FULL", customer_sent, [customer]) == []


def test_a_referenced_message_changed_incompatibly_is_found():
    reference = (Reference("geo/address.proto", "geo", 1),)
    before = protobuf(CUSTOMER, reference, {"geo": SchemaVersion("geo", 1, 1, "PROTOBUF", ADDRESS)})
    changed = proto("message Address { int64 city = 1; }", package="geo")
    after = protobuf(CUSTOMER, reference, {"geo": SchemaVersion("geo", 2, 2, "PROTOBUF", changed)})
    problems = check("BACKWARD", after, [before])
    assert any("FIELD_SCALAR_KIND_CHANGED" in problem for problem in problems)
    assert any("FIELD_NAMED_TYPE_CHANGED" in problem for problem in problems)


def _descriptor(schema, name: str) -> bytes:
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.formatted("serialized")))
    descriptor.name = name
    return descriptor.SerializeToString()
