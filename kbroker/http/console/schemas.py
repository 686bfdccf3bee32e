"""The schema registry as the console shows it: subjects, their versions, the difference between two, and a
message value in the registry's wire format (a zero byte, the schema id in four bytes, then the data)
decoded through its schema: Avro by the ``avro`` package, JSON as it is; a Protobuf value stays hexadecimal
(decoding it needs the message type compiled, which the registry does not do).
"""

from __future__ import annotations

import difflib
import io
import json
from collections import OrderedDict

from kbroker.schemas.records import SchemaVersion
from kbroker.schemas.registry import Registry, RegistryError
from kbroker.schemas.types import parse

WIRE_MAGIC = 0
_KEPT_SCHEMAS = 256  # parsed schemas, by id


def pretty(version: SchemaVersion) -> str:
    """A schema's text indented where it is JSON (Avro and JSON Schema), as written otherwise (Protobuf)."""
    try:
        return json.dumps(json.loads(version.schema), indent=2, ensure_ascii=False)
    except ValueError:
        return version.schema


def difference(old: SchemaVersion, new: SchemaVersion) -> list[str]:
    """The unified diff of two versions' texts, as lines."""
    return list(difflib.unified_diff(pretty(old).splitlines(), pretty(new).splitlines(),
                                     f"version {old.version}", f"version {new.version}", lineterm=""))


def schema_id(value: bytes | None) -> int | None:
    """The schema id of a value in the wire format, else None."""
    if value is None or len(value) < 5 or value[0] != WIRE_MAGIC:
        return None
    return int.from_bytes(value[1:5], "big")


class Decoder:
    """Values decoded through the registry's schemas, parsed once per id (the last ``_KEPT_SCHEMAS``)."""

    def __init__(self) -> None:
        self._parsed: OrderedDict[int, tuple[SchemaVersion, object]] = OrderedDict()

    def decoded(self, value: bytes | None, registry: Registry) -> tuple[str, str] | None:
        """(what decoded it, the value as indented JSON) for a value in the wire format whose schema the
        registry has; (why not, "") where it cannot be decoded; None for any other value."""
        found = schema_id(value)
        if found is None:
            return None
        try:
            version, parsed = self._schema(found, registry)
        except RegistryError:
            return None  # not a schema id after all: a value that merely starts with a zero byte
        label = f"schema {found} ({version.schema_type}, {version.subject} v{version.version})"
        data = value[5:]
        try:
            if version.schema_type == "AVRO":
                import avro.io

                document = avro.io.DatumReader(parsed.parsed).read(avro.io.BinaryDecoder(io.BytesIO(data)))
            elif version.schema_type == "JSON":
                document = json.loads(data)
            else:
                return f"{label}: Protobuf values are shown as bytes", ""
        except Exception as error:  # a torn or foreign value: said, never a failed page
            return f"{label}: does not decode ({type(error).__name__})", ""
        return label, json.dumps(document, indent=2, ensure_ascii=False, default=_plain)

    def _schema(self, found: int, registry: Registry) -> tuple[SchemaVersion, object]:
        if found in self._parsed:
            self._parsed.move_to_end(found)
            return self._parsed[found]
        version = registry.by_id(found)
        parsed = parse(version.schema_type, version.schema, version.references,
                       lambda reference: registry.version(reference.subject, reference.version))
        self._parsed[found] = (version, parsed)
        while len(self._parsed) > _KEPT_SCHEMAS:
            self._parsed.popitem(last=False)
        return version, parsed


def _plain(value):
    """What JSON has no type for in an Avro datum: bytes as hexadecimal, decimals and the rest as text."""
    return value.hex() if isinstance(value, bytes) else str(value)
