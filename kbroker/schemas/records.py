"""The ``_schemas`` topic's records, as JSON keys and values in the layout Confluent's Schema Registry
writes, so that a registry pointed at the same topic reads what kbroker wrote (and the other way round).

Keys (one per thing that can change; the last value per key wins, as compaction keeps it):

- ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}``: one version of a subject; its value
  ``{"subject","version","id","schemaType" (absent for AVRO),"references" (absent if none),"schema",
  "deleted"}``; ``deleted`` true is a soft delete, a null value (tombstone) a permanent one;
- ``{"keytype":"CONFIG","subject":S,"magic":0}`` (no subject: the global one): ``{"compatibilityLevel"}``;
- ``{"keytype":"MODE","subject":S,"magic":0}``: ``{"mode"}``;
- ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}``: ``{"subject","version"}``, written with a
  subject's soft delete (each of its versions is marked deleted as well);
- ``{"keytype":"NOOP","magic":0}``: nothing (Confluent's writers use it to read up to the end).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP = (
    "SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP")
AVRO = "AVRO"


class RecordError(ValueError):
    """A ``_schemas`` record that is not in the registry's format."""


@dataclass(frozen=True)
class Reference:
    """A schema's reference to another subject's version, under the ``name`` the schema uses for it."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}

    @classmethod
    def from_json(cls, value) -> Reference:
        if not isinstance(value, dict):
            raise RecordError(f"a reference is an object, not {value!r}")
        name, subject, version = value.get("name"), value.get("subject"), value.get("version")
        if not isinstance(name, str) or not isinstance(subject, str) or not isinstance(version, int) \
                or isinstance(version, bool):
            raise RecordError(f"a reference needs a name, a subject and a version: {value!r}")
        return cls(name, subject, version)


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a subject, as a SCHEMA record's value holds it."""

    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    def to_json(self) -> dict:
        value = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != AVRO:
            value["schemaType"] = self.schema_type
        if self.references:
            value["references"] = [reference.to_json() for reference in self.references]
        value["schema"] = self.schema
        value["deleted"] = self.deleted
        return value


def _dump(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def subject_key(keytype: str, subject: str | None) -> bytes:
    """The key of a CONFIG, MODE, DELETE_SUBJECT or CLEAR_SUBJECT record (no subject: the global one)."""
    key = {"keytype": keytype}
    if subject is not None:
        key["subject"] = subject
    key["magic"] = 0
    return _dump(key)


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def noop_key() -> bytes:
    return _dump({"keytype": NOOP, "magic": 0})


def schema_record(version: SchemaVersion) -> tuple[bytes, bytes]:
    return schema_key(version.subject, version.version), _dump(version.to_json())


def config_record(subject: str | None, level: str | None) -> tuple[bytes, bytes | None]:
    return subject_key(CONFIG, subject), None if level is None else _dump({"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> tuple[bytes, bytes | None]:
    return subject_key(MODE, subject), None if mode is None else _dump({"mode": mode})


def delete_subject_record(subject: str, latest: int) -> tuple[bytes, bytes]:
    return subject_key(DELETE_SUBJECT, subject), _dump({"subject": subject, "version": latest})


def decode(key: bytes | None, value: bytes | None) -> tuple[dict, dict | None]:
    """A record's key and value as JSON objects (value None: a tombstone)."""
    try:
        decoded_key = json.loads(key) if key is not None else None
        decoded_value = json.loads(value) if value is not None else None
    except (ValueError, UnicodeDecodeError) as error:
        raise RecordError(f"not JSON: {error}") from None
    if not isinstance(decoded_key, dict) or not isinstance(decoded_key.get("keytype"), str):
        raise RecordError(f"a key names its keytype: {decoded_key!r}")
    if decoded_value is not None and not isinstance(decoded_value, dict):
        raise RecordError(f"a value is an object: {decoded_value!r}")
    return decoded_key, decoded_value


def schema_version(value: dict) -> SchemaVersion:
    """A SCHEMA record's value."""
    subject, version, schema_id, schema = (value.get(name) for name in ("subject", "version", "id", "schema"))
    if not isinstance(subject, str) or not isinstance(schema, str) or not all(
            isinstance(number, int) and not isinstance(number, bool) for number in (version, schema_id)):
        raise RecordError(f"a schema value needs subject, version, id and schema: {value!r}")
    references = value.get("references") or ()
    if not isinstance(references, list | tuple):
        raise RecordError(f"references are a list: {references!r}")
    return SchemaVersion(subject, version, schema_id, value.get("schemaType") or AVRO, schema,
                         tuple(Reference.from_json(reference) for reference in references),
                         bool(value.get("deleted", False)))
