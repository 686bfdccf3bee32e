"""The grammar our API declarations are written in, and the model it parses to.

One declaration describes an API's request and response over every version::

    Heartbeat 12 versions 0-4 flexible 4+

    request
      group_id: string
      generation_id: int32
      member_id: string
      group_instance_id: string? v3+ = null

    response
      throttle_time_ms: int32 v1+
      error_code: int16

A field line is ``name: type [versions] [nullable versions] [tag N] [= default]``.

- Types: ``bool int8 int16 int32 int64 uint16 uint32 float64 uuid string bytes
  records``, an array ``[]type``, or a struct named in CamelCase whose fields are
  indented below it. A struct named without a body refers to a ``struct Name``
  section of the same declaration (Kafka's common structs).
- ``?`` after the type makes the field nullable in every version it has;
  ``nullable v3+`` makes it nullable from a version on.
- Versions are ``v3+``, ``v3-5`` or ``v3``; a field without them exists in all
  versions of its parent.
- ``tag N`` makes the field a tagged field (flexible versions only).
- ``= default`` is an integer, ``true``, ``false``, ``null`` or a quoted string;
  without one the default is Kafka's: zero, false, empty.

The header line may end with ``rejected 0-2``: versions advertised for old
clients' sake but not served (``Api.rejected_versions``; the broker closes the
connection on them, as Kafka 4 does on Produce v0-2).

A record declaration (KRaft metadata records, :func:`parse_record_declaration`)
has the same header without ``rejected`` and one ``record`` section instead of
``request`` and ``response``::

    TopicRecord 2 versions 0 flexible 0+

    record
      name: string
      topic_id: uuid
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

VERSION_MAX = 0x7FFF

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "uuid", "string", "bytes", "records"}
)


class DeclarationError(Exception):
    """A declaration does not follow the grammar."""


@dataclass(frozen=True)
class Versions:
    low: int
    high: int = VERSION_MAX

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    def __iter__(self):
        return iter(range(self.low, self.high + 1))

    def __str__(self) -> str:
        if self.high == VERSION_MAX:
            return f"{self.low}+"
        return f"{self.low}-{self.high}" if self.high != self.low else f"{self.low}"

    @classmethod
    def parse(cls, text: str) -> Versions:
        text = text.removeprefix("v")
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]))
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))


NO_VERSIONS = Versions(1, 0)


@dataclass(frozen=True)
class TypeRef:
    """A field's type: a primitive name, a struct, or an array of either."""

    name: str
    struct: StructSpec | None = None
    element: TypeRef | None = None

    @property
    def is_array(self) -> bool:
        return self.element is not None


@dataclass(eq=False)
class FieldSpec:
    name: str
    type: TypeRef
    versions: Versions
    nullable_versions: Versions = NO_VERSIONS
    tag: int | None = None
    default: object = None
    has_default: bool = False

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions


@dataclass(eq=False)
class StructSpec:
    name: str
    fields: list[FieldSpec] = field(default_factory=list)
    value_class: type | None = None


@dataclass(eq=False)
class MessageSpec(StructSpec):
    api_key: int = -1
    kind: str = ""  # "request", "response" or "record"


@dataclass(eq=False)
class ApiSpec:
    key: int
    name: str
    versions: Versions
    flexible: Versions
    rejected: Versions
    request: MessageSpec
    response: MessageSpec
    common_structs: dict[str, StructSpec]

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


@dataclass(eq=False)
class RecordSpec:
    """A record type (a KRaft metadata record): one message over every version."""

    name: str
    key: int
    versions: Versions
    flexible: Versions
    message: MessageSpec
    common_structs: dict[str, StructSpec]

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


_HEADER = re.compile(
    r"^(?P<name>[A-Z]\w*)\s+(?P<key>\d+)\s+versions\s+(?P<versions>\S+)\s+flexible\s+(?P<flexible>\S+)"
    r"(?:\s+rejected\s+(?P<rejected>\S+))?$"
)
_FIELD = re.compile(r"^(?P<name>[a-z][a-z0-9_]*):\s*(?P<type>\S+)(?P<rest>.*)$")
_VERSION_TOKEN = re.compile(r"^v\d+(\+|-\d+)?$")


def parse_declaration(text: str) -> ApiSpec:
    header, sections = _split(text)
    name = header["name"]
    versions = Versions.parse(header["versions"])
    flexible = Versions.parse(header["flexible"])
    rejected = Versions.parse(header["rejected"]) if header["rejected"] else NO_VERSIONS
    common = _common_structs(sections, versions)
    messages = {}
    for kind in ("request", "response"):
        messages[kind] = _parse_message(name, int(header["key"]), kind, sections, versions, common)
    _check_sections(name, sections, ("request", "response"))
    return ApiSpec(
        key=int(header["key"]),
        name=name,
        versions=versions,
        flexible=flexible,
        rejected=rejected,
        request=messages["request"],
        response=messages["response"],
        common_structs=common,
    )


def parse_record_declaration(text: str) -> RecordSpec:
    """A declaration with a single ``record`` section; its message is named as the header says."""
    header, sections = _split(text)
    name = header["name"]
    if header["rejected"]:
        raise DeclarationError(f"{name}: a record declaration has no rejected versions")
    versions = Versions.parse(header["versions"])
    common = _common_structs(sections, versions)
    message = _parse_message(name, int(header["key"]), "record", sections, versions, common)
    _check_sections(name, sections, ("record",))
    return RecordSpec(
        name=name,
        key=int(header["key"]),
        versions=versions,
        flexible=Versions.parse(header["flexible"]),
        message=message,
        common_structs=common,
    )


def _split(text: str):
    """The header match and the sections: each unindented line starts one."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip() if '"' not in raw else raw.rstrip()
        if line.strip():
            lines.append((number, len(line) - len(line.lstrip()), line.strip()))
    if not lines:
        raise DeclarationError("empty declaration")
    header = _HEADER.match(lines[0][2])
    if header is None:
        raise DeclarationError(f"bad header line: {lines[0][2]!r}")

    sections: dict[str, list] = {}
    current = None
    for number, indent, line in lines[1:]:
        if indent == 0:
            current = []
            sections[line] = current
        elif current is None:
            raise DeclarationError(f"line {number}: field outside a section")
        else:
            current.append((number, indent, line))
    return header, sections


def _common_structs(sections, versions: Versions) -> dict[str, StructSpec]:
    common: dict[str, StructSpec] = {}
    # Common structs may refer to each other; declare them all before filling any.
    for section in sections:
        if section.startswith("struct "):
            struct_name = section.split()[1]
            common[struct_name] = StructSpec(struct_name)
    for section, body in sections.items():
        if section.startswith("struct "):
            struct = common[section.split()[1]]
            struct.fields = _parse_fields(body, 0, len(body), versions, common, struct.name)
    return common


def _parse_message(name, key, kind, sections, versions, common) -> MessageSpec:
    if kind not in sections:
        raise DeclarationError(f"{name}: missing {kind} section")
    # A record's message is the record itself (TopicRecord); an API's are NameRequest, NameResponse.
    message_name = name if kind == "record" else name + kind.capitalize()
    message = MessageSpec(message_name, api_key=key, kind=kind)
    body = sections[kind]
    message.fields = _parse_fields(body, 0, len(body), versions, common, message.name)
    return message


def _check_sections(name, sections, kinds) -> None:
    for section in sections:
        if section not in kinds and not section.startswith("struct "):
            raise DeclarationError(f"{name}: unknown section {section!r}")


def _parse_fields(body, start, stop, parent_versions, common, owner) -> list[FieldSpec]:
    fields: list[FieldSpec] = []
    if start >= stop:
        return fields
    indent = body[start][1]
    index = start
    while index < stop:
        number, line_indent, line = body[index]
        if line_indent != indent:
            raise DeclarationError(f"line {number}: unexpected indentation in {owner}")
        child_end = index + 1
        while child_end < stop and body[child_end][1] > indent:
            child_end += 1
        fields.append(_parse_field(body, index, child_end, parent_versions, common, owner))
        index = child_end
    names = [f.name for f in fields]
    if len(names) != len(set(names)):
        raise DeclarationError(f"{owner}: duplicate field names {names}")
    return fields


def _parse_field(body, index, child_end, parent_versions, common, owner) -> FieldSpec:
    number, _, line = body[index]
    match = _FIELD.match(line)
    if match is None:
        raise DeclarationError(f"line {number}: bad field line {line!r}")
    type_text = match["type"]
    nullable_everywhere = type_text.endswith("?")
    type_text = type_text.rstrip("?")

    versions = parent_versions
    nullable = NO_VERSIONS
    tag = None
    default = None
    has_default = False
    rest = match["rest"].strip()
    if "=" in rest:
        rest, _, default_text = rest.partition("=")
        default, has_default = _parse_default(default_text.strip(), number), True
    tokens = rest.split()
    position = 0
    while position < len(tokens):
        token = tokens[position]
        if _VERSION_TOKEN.match(token):
            versions = Versions.parse(token)
        elif token == "nullable" and position + 1 < len(tokens):
            position += 1
            nullable = Versions.parse(tokens[position])
        elif token == "tag" and position + 1 < len(tokens):
            position += 1
            tag = int(tokens[position])
        else:
            raise DeclarationError(f"line {number}: unexpected {token!r}")
        position += 1
    versions = Versions(max(versions.low, parent_versions.low), min(versions.high, parent_versions.high))
    if nullable_everywhere:
        nullable = versions

    has_body = child_end > index + 1
    field_type = _parse_type(type_text, number, body, index, child_end, versions, common, has_body)
    return FieldSpec(
        name=match["name"],
        type=field_type,
        versions=versions,
        nullable_versions=nullable,
        tag=tag,
        default=default,
        has_default=has_default,
    )


def _parse_type(text, number, body, index, child_end, versions, common, has_body) -> TypeRef:
    if text.startswith("[]"):
        element = _parse_type(text[2:], number, body, index, child_end, versions, common, has_body)
        return TypeRef("array", element=element)
    if text in PRIMITIVES:
        if has_body:
            raise DeclarationError(f"line {number}: a {text} field has no body")
        return TypeRef(text)
    if not text[:1].isupper():
        raise DeclarationError(f"line {number}: unknown type {text!r}")
    if has_body:
        struct = StructSpec(text)
        struct.fields = _parse_fields(body, index + 1, child_end, versions, common, text)
        return TypeRef("struct", struct=struct)
    if text not in common:
        raise DeclarationError(f"line {number}: struct {text!r} has no body and no 'struct {text}' section")
    return TypeRef("struct", struct=common[text])


def _parse_default(text: str, number: int):
    if text == "null":
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    try:
        return int(text, 0)
    except ValueError:
        raise DeclarationError(f"line {number}: bad default {text!r}") from None
