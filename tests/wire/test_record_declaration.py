"""Record declarations: one ``record`` section under an API-style header."""

import pytest

from kbroker.wire.schema.declaration import DeclarationError, Versions, parse_record_declaration

EXAMPLE = """
ExampleRecord 42 versions 0-2 flexible 0+

record
  id: int32 = -1
  owner: Owner v1+
  tags: []int32? v2+ tag 0 = null

struct Owner
  name: string
"""


def test_a_record_declaration_parses():
    spec = parse_record_declaration(EXAMPLE)
    assert (spec.name, spec.key, spec.versions, spec.flexible) == ("ExampleRecord", 42, Versions(0, 2), Versions(0))
    assert spec.message.name == "ExampleRecord"
    assert spec.message.kind == "record"
    assert spec.message.api_key == 42
    assert [field.name for field in spec.message.fields] == ["id", "owner", "tags"]
    assert spec.message.fields[1].type.struct is spec.common_structs["Owner"]
    tags = spec.message.fields[2]
    assert (tags.versions, tags.tag, tags.default) == (Versions(2, 2), 0, None)
    assert spec.is_flexible(0)


def test_a_record_may_have_no_fields():
    spec = parse_record_declaration("Empty 20 versions 0 flexible 0+\n\nrecord\n")
    assert spec.message.fields == []


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Bad 1 versions 0 flexible 0+ rejected 0\n\nrecord\n  a: int8\n", id="rejected"),
        pytest.param("Bad 1 versions 0 flexible 0+\n\nrequest\n  a: int8\n", id="no-record-section"),
        pytest.param("Bad 1 versions 0 flexible 0+\n\nrecord\n  a: int8\nresponse\n  b: int8\n", id="extra-section"),
        pytest.param("bad header\n\nrecord\n", id="header"),
    ],
)
def test_malformed_record_declarations_are_refused(text):
    with pytest.raises(DeclarationError):
        parse_record_declaration(text)
