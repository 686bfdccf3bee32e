"""Schemas of each type, parsed and checked by the library of their field. Libraries are imported on
first use: the broker's start pays nothing.

- AVRO: the ``avro`` package (Apache Avro's own Python implementation). A reference names a schema
  whose named types this one uses; they are parsed first, their own references before them.
- JSON: ``jsonschema`` checks the schema against the metaschema of its draft (``$schema``; draft-07
  when absent, as Confluent's registry assumes). Each reference (the name ``$ref`` uses for another
  document) must resolve to a valid JSON schema.
- PROTOBUF: ``.proto`` source compiled by protoc, or a base64 serialized ``FileDescriptorProto`` as
  confluent-kafka's Python serializer sends it (kbroker/schemas/protobuf.py); references are imports.

The registry stores, returns and compares a schema's ``canonical`` text with its references: JSON
compacted (whitespace dropped, key order kept), Protobuf as protobuf.py keeps it. ``normalize``
(Confluent's ``normalize=true``) goes further: JSON keys sorted, an Avro schema as its library prints
it (full names, attributes in one order, referenced types by name), Protobuf its descriptor serialized
deterministically. Compatibility between parsed schemas is kbroker/schemas/compatibility.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from kbroker.schemas.records import Reference, SchemaVersion
from kbroker.schemas.registry import INVALID_SCHEMA, RegistryError

SUPPORTED = ("AVRO", "JSON", "PROTOBUF")
_MAX_REFERENCE_DEPTH = 32  # a chain of references longer than this (or a cycle) is refused

Resolve = Callable[[Reference], SchemaVersion]


class InvalidSchema(RegistryError):
    """A schema its library refuses, or of a type not served: Confluent's 42201, with a one-line message."""

    def __init__(self, message: str) -> None:
        super().__init__(INVALID_SCHEMA, " ".join(message.split()))


def _invalid(message: str) -> InvalidSchema:
    return InvalidSchema(f"Invalid schema: {message}")


@dataclass(frozen=True, eq=False)
class ParsedSchema:
    """One parsed schema. Two are the same schema (under a subject, or for an id) when their type,
    canonical text and references are equal, as Confluent compares them; the library's object takes
    no part."""

    schema_type: str
    canonical: str
    parsed: object  # an avro Schema; a JSON document; a protobuf.ProtobufSchema
    normalized_text: str
    references: tuple[Reference, ...] = ()

    def normalize(self) -> str:
        """The text Confluent's ``normalize=true`` stores."""
        return self.normalized_text

    def normalized(self) -> ParsedSchema:
        """This schema with its normalized text as its canonical one."""
        return ParsedSchema(self.schema_type, self.normalized_text, self.parsed, self.normalized_text, self.references)

    def formatted(self, schema_format: str) -> str:
        """The text in a ``format`` Confluent's reads take: ``serialized`` (Protobuf: base64 of its
        descriptor), ``resolved`` (Avro: referenced types written out in place); otherwise the
        canonical text."""
        if self.schema_type == "PROTOBUF" and schema_format == "serialized":
            return self.parsed.serialized
        if self.schema_type == "AVRO" and schema_format == "resolved":
            return _compact(self.parsed.to_json())
        return self.canonical

    def _identity(self) -> tuple:
        return self.schema_type, self.canonical, self.references

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParsedSchema) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())


def parse(schema_type: str, text: str, references: tuple[Reference, ...], resolve: Resolve,
          normalize: bool = False) -> ParsedSchema:
    """``text`` as a schema of ``schema_type``, its references resolved by ``resolve``; InvalidSchema
    (42201) if it is none."""
    parsers = {"AVRO": _parse_avro, "JSON": _parse_json, "PROTOBUF": _parse_protobuf}
    if schema_type not in parsers:
        raise InvalidSchema(f"Invalid schema type {schema_type}: this registry serves {', '.join(SUPPORTED)}")
    references = tuple(references)
    parsed = parsers[schema_type](text, references, resolve)
    return parsed.normalized() if normalize else parsed


def check(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """The compatibility check (kbroker/schemas/compatibility.py), here for callers that import it from here."""
    from kbroker.schemas.compatibility import check as compatibility_check

    return compatibility_check(level, new, previous)


def _referenced(references: tuple[Reference, ...], resolve: Resolve, depth: int = 0) -> list[tuple[str, SchemaVersion]]:
    """Every schema ``references`` lead to, as (name, version), each after the ones it references."""
    if depth > _MAX_REFERENCE_DEPTH:
        raise _invalid(f"references nest deeper than {_MAX_REFERENCE_DEPTH} (a cycle?)")
    found: list[tuple[str, SchemaVersion]] = []
    for reference in references:
        version = resolve(reference)
        if version is None:
            raise _invalid(f"reference {reference.name} to {reference.subject} version {reference.version} "
                           "is not found")
        for name, nested in _referenced(tuple(version.references), resolve, depth + 1):
            if all(name != known for known, _ in found):
                found.append((name, nested))
        if all(reference.name != known for known, _ in found):
            found.append((reference.name, version))
    return found


def _json(text: str, what: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError) as error:
        raise _invalid(f"{what} is not JSON: {error}") from None


def _compact(document, sort_keys: bool = False) -> str:
    return json.dumps(document, separators=(",", ":"), sort_keys=sort_keys)


def _parse_avro(text: str, references: tuple[Reference, ...], resolve: Resolve) -> ParsedSchema:
    import avro.errors
    import avro.schema

    document = _json(text, "an Avro schema")
    names = avro.schema.Names()
    try:
        for name, version in _referenced(references, resolve):  # their named types, known to this one by name
            avro.schema.make_avsc_object(_json(version.schema, f"reference {name}"), names)
        known = set(names.names)
        schema = avro.schema.make_avsc_object(document, names)
    except (avro.errors.AvroException, TypeError, KeyError, AttributeError, ValueError) as error:
        raise _invalid(str(error) or type(error).__name__) from None
    printed = avro.schema.Names()
    for name in known:  # printed by name, as they were referenced, not inlined
        printed.names[name] = names.names[name]
    return ParsedSchema("AVRO", _compact(document), schema, _compact(schema.to_json(printed)), references)


def _parse_json(text: str, references: tuple[Reference, ...], resolve: Resolve) -> ParsedSchema:
    document = _json(text, "a JSON schema")
    _check_json_schema(document, "a JSON schema")
    for name, version in _referenced(references, resolve):
        _check_json_schema(_json(version.schema, f"reference {name}"), f"reference {name}")
    return ParsedSchema("JSON", _compact(document), document, _compact(document, sort_keys=True), references)


def _check_json_schema(document, what: str) -> None:
    import jsonschema
    import jsonschema.exceptions
    import jsonschema.validators

    if not isinstance(document, dict | bool):
        raise _invalid(f"{what} is an object or a boolean")
    validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
    try:
        validator.check_schema(document)
    except jsonschema.exceptions.SchemaError as error:
        raise _invalid(f"{what}: {error.message}") from None


def _parse_protobuf(text: str, references: tuple[Reference, ...], resolve: Resolve) -> ParsedSchema:
    from kbroker.schemas import protobuf

    if not isinstance(text, str) or not text.strip():
        raise _invalid("a Protobuf schema is empty")
    try:
        schema = protobuf.parse(text, references, resolve)
    except protobuf.ProtobufError as error:
        raise _invalid(str(error)) from None
    return ParsedSchema("PROTOBUF", protobuf.canonical(text), schema, protobuf.normalized(schema), references)
