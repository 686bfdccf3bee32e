"""Schemas of each type, parsed and checked by the library of their field, and compatibility between them.

- AVRO: the ``avro`` package (Apache Avro's own Python implementation) parses a schema, with the named
  types of the schemas it references; compatibility is Avro's schema resolution
  (``avro.compatibility``): BACKWARD means the new schema reads what the previous one wrote, FORWARD
  the other way round, FULL both.
- JSON: ``jsonschema`` checks the schema against its draft's metaschema (``$schema``; draft-07 when
  absent, as Confluent's registry assumes). Compatibility follows the main rules of Confluent's for
  JSON Schema (kbroker/schemas/json_rules.py).
- PROTOBUF: not served yet; registering one is refused as an invalid schema type.

A schema is stored and compared as its canonical text: the JSON compacted (whitespace dropped, the
order of keys kept). ``normalize`` also sorts a JSON schema's keys and puts an Avro schema in the
form its library prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from kbroker.schemas.records import Reference, SchemaVersion
from kbroker.schemas.registry import INVALID_SCHEMA, RegistryError

SUPPORTED = ("AVRO", "JSON")


@dataclass(frozen=True)
class ParsedSchema:
    schema_type: str
    canonical: str
    parsed: object  # the library's object (an avro Schema; a JSON document)
    normalized_text: str

    def normalized(self) -> ParsedSchema:
        return ParsedSchema(self.schema_type, self.normalized_text, self.parsed, self.normalized_text)


Resolve = Callable[[Reference], SchemaVersion]


def _invalid(message: str) -> RegistryError:
    return RegistryError(INVALID_SCHEMA, f"Invalid schema: {message}")


def _json(text: str, what: str):
    try:
        return json.loads(text)
    except ValueError as error:
        raise _invalid(f"{what} is not JSON: {error}") from None


def _compact(document, sort_keys: bool = False) -> str:
    return json.dumps(document, separators=(",", ":"), sort_keys=sort_keys)


def parse(schema_type: str, text: str, references: tuple[Reference, ...], resolve: Resolve,
          normalize: bool = False) -> ParsedSchema:
    """``text`` as a schema of ``schema_type``; RegistryError 42201 if it is none."""
    if schema_type == "AVRO":
        parsed = _parse_avro(text, references, resolve)
    elif schema_type == "JSON":
        parsed = _parse_json(text)
    else:
        raise RegistryError(INVALID_SCHEMA, f"Invalid schema type {schema_type}: this registry serves "
                            f"{' and '.join(SUPPORTED)} schemas")
    return parsed.normalized() if normalize else parsed


def _parse_avro(text: str, references: tuple[Reference, ...], resolve: Resolve) -> ParsedSchema:
    import avro.errors
    import avro.schema

    document = _json(text, "an Avro schema")
    names = avro.schema.Names()
    try:
        for reference in references:  # their named types, known by name to the schema that uses them
            avro.schema.make_avsc_object(_json(resolve(reference).schema, f"reference {reference.name}"), names)
        known = set(names.names)
        schema = avro.schema.make_avsc_object(document, names)
    except (avro.errors.AvroException, TypeError, KeyError, AttributeError, ValueError) as error:
        raise _invalid(str(error) or type(error).__name__) from None
    printed = avro.schema.Names()
    for name in known:  # printed by name, as they were referenced, not inlined
        printed.names[name] = names.names[name]
    return ParsedSchema("AVRO", _compact(document), schema, _compact(schema.to_json(printed)))


def _parse_json(text: str) -> ParsedSchema:
    import jsonschema
    import jsonschema.exceptions
    import jsonschema.validators

    document = _json(text, "a JSON schema")
    if not isinstance(document, dict | bool):
        raise _invalid("a JSON schema is an object or a boolean")
    validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
    try:
        validator.check_schema(document)
    except jsonschema.exceptions.SchemaError as error:
        raise _invalid(error.message) from None
    return ParsedSchema("JSON", _compact(document), document, _compact(document, sort_keys=True))


def check(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (the versions to compare with) at ``level``; [] if it may."""
    if level == "NONE":
        return []
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    problems = []
    for old in previous:
        if old.schema_type != new.schema_type:
            problems.append(f"the schema type changed from {old.schema_type} to {new.schema_type}")
            continue
        if backward:
            problems += _incompatible(reader=new, writer=old)
        if forward:
            problems += _incompatible(reader=old, writer=new)
    return problems


def _incompatible(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    if reader.schema_type == "AVRO":
        from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

        result = ReaderWriterCompatibilityChecker().get_compatibility(reader.parsed, writer.parsed)
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        return [f"{kind.name.upper()}: {', '.join(sorted(map(str, result.messages)))} at "
                f"{', '.join(sorted(result.locations))}" for kind in result.incompatibilities]
    from kbroker.schemas.json_rules import incompatibilities

    return incompatibilities(reader.parsed, writer.parsed)
