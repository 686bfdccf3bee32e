"""The schema registry's state and rules, without I/O: what the ``_schemas`` records say, and what a
request changes.

Every node builds a ``Registry`` by applying the topic's records in order (``apply``); reads are
answered from it. Changes are decided by the one writer (kbroker/schemas/store.py): a change method
returns its answer and the records that make it so; the writer appends them and applies them once
they are committed. A refusal raises ``RegistryError`` with Confluent's error code and message.

Schemas arrive parsed (kbroker/schemas/types.py): a ``Parsed`` gives the canonical text that is
stored and compared, and the registry asks ``check(level, new, previous)`` for compatibility
(kbroker/schemas/compatibility.py), both given to it by its owner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Protocol

from kbroker.schemas import records
from kbroker.schemas.records import Reference, SchemaVersion

DEFAULT_LEVEL = "BACKWARD"
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_MODE = "READWRITE"
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
_READ_ONLY = ("READONLY", "READONLY_OVERRIDE")
_MAX_VERSION = 2**31 - 1
_MAX_SUBJECT_CHARS = 2000

# Confluent's error codes (the HTTP status is their first three digits).
SUBJECT_NOT_FOUND, VERSION_NOT_FOUND, SCHEMA_NOT_FOUND = 40401, 40402, 40403
SUBJECT_SOFT_DELETED, SUBJECT_NOT_SOFT_DELETED = 40404, 40405
VERSION_SOFT_DELETED, VERSION_NOT_SOFT_DELETED = 40406, 40407
SUBJECT_LEVEL_NOT_CONFIGURED, SUBJECT_MODE_NOT_CONFIGURED = 40408, 40409
INCOMPATIBLE = 409
INVALID_SCHEMA, INVALID_VERSION, INVALID_LEVEL, INVALID_MODE = 42201, 42202, 42203, 42204
NOT_PERMITTED, REFERENCE_EXISTS, INVALID_SUBJECT = 42205, 42206, 42208

Record = tuple[bytes, bytes | None]


class RegistryError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    @property
    def http_status(self) -> int:
        return self.error_code if self.error_code < 1000 else self.error_code // 100


class Parsed(Protocol):
    """A schema as kbroker/schemas/types.py parsed it."""

    schema_type: str
    canonical: str  # the text stored, returned and compared

    def normalized(self) -> Parsed: ...


Check = Callable[[str, Parsed, list[Parsed]], list[str]]  # (level, new, previous oldest first) -> problems


def version_label(version: str | int) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or "latest" (also -1): None."""
    if str(version) in ("latest", "-1"):
        return None
    try:
        number = int(str(version))
    except ValueError:
        number = 0
    if not 1 <= number <= _MAX_VERSION:
        raise RegistryError(INVALID_VERSION, f"The specified version '{version}' is not a valid version id. "
                            "Allowed values are between [1, 2^31-1] and the string \"latest\"")
    return number


class Registry:
    def __init__(self, check: Check) -> None:
        self.check = check
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0  # ids are never given twice: the highest one any record named
        self._holders: dict[int, dict[tuple[str, int], None]] = {}  # id -> the versions holding it, in order
        self._ids: dict[tuple[str, str, tuple[Reference, ...]], int] = {}  # content -> its id

    # -- the records ------------------------------------------------------------------------

    def apply(self, key: dict, value: dict | None) -> None:
        """One ``_schemas`` record (kbroker/schemas/records.py), in log order."""
        keytype, subject = key["keytype"], key.get("subject")
        if keytype == records.SCHEMA:
            version = key.get("version")
            if not isinstance(subject, str) or not isinstance(version, int):
                raise records.RecordError(f"a schema key names a subject and a version: {key!r}")
            if value is None:
                self._forget(subject, version)
            else:
                self._hold(records.schema_version(value))
        elif keytype == records.CONFIG:
            self._set(self.configs, subject, None if value is None else value.get("compatibilityLevel"))
        elif keytype == records.MODE:
            self._set(self.modes, subject, None if value is None else value.get("mode"))
        # DELETE_SUBJECT, CLEAR_SUBJECT and NOOP change nothing a SCHEMA record does not say too.

    def _hold(self, entry: SchemaVersion) -> None:
        self._forget(entry.subject, entry.version)
        self.subjects.setdefault(entry.subject, {})[entry.version] = entry
        self._holders.setdefault(entry.id, {})[(entry.subject, entry.version)] = None
        self._ids.setdefault(_content(entry), entry.id)
        self.max_id = max(self.max_id, entry.id)

    def _forget(self, subject: str, version: int) -> None:
        entry = self.subjects.get(subject, {}).pop(version, None)
        if entry is None:
            return
        if not self.subjects[subject]:
            del self.subjects[subject]
        holders = self._holders[entry.id]
        del holders[(subject, version)]
        if not holders:
            del self._holders[entry.id]
            del self._ids[_content(entry)]

    @staticmethod
    def _set(settings: dict, subject: str | None, setting: str | None) -> None:
        if setting is None:
            settings.pop(subject, None)
        else:
            settings[subject] = setting

    # -- reads --------------------------------------------------------------------------------

    def by_id(self, schema_id: int, subject: str | None = None) -> SchemaVersion:
        """The schema with ``schema_id`` (soft-deleted versions still hold it: old data stays readable)."""
        holders = self._holders.get(schema_id)
        if not holders:
            raise RegistryError(SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        held = [self.subjects[s][v] for s, v in holders]
        return next((entry for entry in held if entry.subject == subject), held[0])

    def holders(self, schema_id: int, deleted: bool = False) -> list[SchemaVersion]:
        self.by_id(schema_id)
        held = (self.subjects[subject][version] for subject, version in self._holders[schema_id])
        return [entry for entry in held if deleted or not entry.deleted]

    def subject_names(self, prefix: str = "", deleted: bool = False) -> list[str]:
        return sorted(subject for subject, versions in self.subjects.items() if subject.startswith(prefix)
                      and (deleted or any(not entry.deleted for entry in versions.values())))

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions, oldest first; 40401 if it has none (soft-deleted ones count with ``deleted``)."""
        found = sorted((entry for entry in self.subjects.get(subject, {}).values() if deleted or not entry.deleted),
                       key=lambda entry: entry.version)
        if not found:
            raise RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        return found

    def version(self, subject: str, version: str | int, deleted: bool = False) -> SchemaVersion:
        number = version_label(version)
        versions = self.versions(subject, deleted)
        if number is None:
            return versions[-1]
        entry = self.subjects[subject].get(number)
        if entry is None or (entry.deleted and not deleted):
            raise RegistryError(VERSION_NOT_FOUND, f"Version {number} not found.")
        return entry

    def lookup(self, subject: str, parsed: Parsed, references: tuple[Reference, ...],
               deleted: bool = False) -> SchemaVersion:
        """The subject's version holding this schema (the newest, if several)."""
        content = (parsed.schema_type, parsed.canonical, references)
        for entry in reversed(self.versions(subject, deleted)):
            if _content(entry) == content:
                return entry
        raise RegistryError(SCHEMA_NOT_FOUND, "Schema not found")

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        """Ids of the live schemas that reference this version."""
        target = self.version(subject, version, deleted=True)
        return sorted({entry.id for versions in self.subjects.values() for entry in versions.values()
                       if not entry.deleted and any(reference.subject == subject and reference.version ==
                                                    target.version for reference in entry.references)})

    def level(self, subject: str | None) -> str:
        """The compatibility level that applies to ``subject``: its own, else the global one, else BACKWARD."""
        return self.configs.get(subject) or self.configs.get(None) or DEFAULT_LEVEL

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE

    def problems(self, subject: str, parsed: Parsed, previous: Iterable[Parsed], level: str | None = None) -> list[str]:
        """Why ``parsed`` may not follow ``previous`` (oldest first) under the subject's level; [] if it may."""
        return self.check(level or self.level(subject), parsed, list(previous))

    # -- changes (decided by the writer) ------------------------------------------------------------

    def register(self, subject: str, parsed: Parsed, references: tuple[Reference, ...],
                 previous: Callable[[SchemaVersion], Parsed], schema_id: int | None = None,
                 version: int | None = None) -> tuple[SchemaVersion, list[Record]]:
        """Register ``parsed`` under ``subject``: the version holding it, and the records to write (none if
        the subject already holds it). ``previous`` parses a stored version, for the compatibility check.
        ``schema_id``/``version`` are given only in IMPORT mode."""
        _check_subject(subject)
        mode = self.mode(subject)
        if mode in _READ_ONLY:
            raise RegistryError(NOT_PERMITTED, f"Subject {subject} is in read-only mode")
        if (schema_id is not None or version is not None) and mode != "IMPORT":
            raise RegistryError(NOT_PERMITTED, "Subject must be in IMPORT mode to register with an id or version")
        content = (parsed.schema_type, parsed.canonical, references)
        live = [entry for entry in self.subjects.get(subject, {}).values() if not entry.deleted]
        live.sort(key=lambda entry: entry.version)
        for entry in live:
            if _content(entry) == content and schema_id in (None, entry.id):
                return entry, []
        if mode != "IMPORT":
            level = self.level(subject)
            against = live if level.endswith("_TRANSITIVE") else live[-1:]
            problems = self.problems(subject, parsed, [previous(entry) for entry in against], level)
            if problems:
                raise RegistryError(INCOMPATIBLE, "Schema being registered is incompatible with an earlier schema "
                                    f"for subject \"{subject}\", details: {problems}")
        if schema_id is None:
            schema_id = self._ids.get(content) or self.max_id + 1
        elif schema_id in self._holders and _content(self.by_id(schema_id)) != content:
            raise RegistryError(42207, f"Schema with id {schema_id} already exists and is a different schema")
        if version is None:
            version = max(self.subjects.get(subject, {}), default=0) + 1
        entry = SchemaVersion(subject, version, schema_id, parsed.schema_type, parsed.canonical, references)
        return entry, [records.schema_record(entry)]

    def delete_version(self, subject: str, version: str | int, permanent: bool) -> tuple[int, list[Record]]:
        self._writable(subject)
        entry = self.version(subject, version, deleted=permanent)
        if permanent and not entry.deleted:
            raise RegistryError(VERSION_NOT_SOFT_DELETED, f"Subject '{subject}' Version {entry.version} was not "
                                "deleted first before being permanently deleted")
        if self._referenced(entry):
            raise RegistryError(REFERENCE_EXISTS, "One or more references exist to the schema "
                                f"{{magic=1,keytype=SCHEMA,subject={subject},version={entry.version}}}.")
        if permanent:
            return entry.version, [(records.schema_key(subject, entry.version), None)]
        return entry.version, [records.schema_record(replace(entry, deleted=True))]

    def delete_subject(self, subject: str, permanent: bool) -> tuple[list[int], list[Record]]:
        self._writable(subject)
        every = self.versions(subject, deleted=True)
        live = [entry for entry in every if not entry.deleted]
        if permanent and live:
            raise RegistryError(SUBJECT_NOT_SOFT_DELETED, f"Subject '{subject}' was not deleted first before being "
                                "permanently deleted")
        if not permanent and not live:
            raise RegistryError(SUBJECT_SOFT_DELETED, f"Subject '{subject}' was soft deleted.Set permanent=true "
                                "to delete permanently")
        for entry in every:
            if self._referenced(entry):
                raise RegistryError(REFERENCE_EXISTS, "One or more references exist to the schema "
                                    f"{{magic=1,keytype=SCHEMA,subject={subject},version={entry.version}}}.")
        if permanent:
            written = [(records.schema_key(subject, entry.version), None) for entry in every]
            written += [records.config_record(subject, None), records.mode_record(subject, None)]
            return [entry.version for entry in every], written
        written = [records.schema_record(replace(entry, deleted=True)) for entry in live]
        written.append(records.delete_subject_record(subject, live[-1].version))
        return [entry.version for entry in live], written

    def set_level(self, subject: str | None, level) -> tuple[str, list[Record]]:
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise RegistryError(INVALID_LEVEL, "Invalid compatibility level. Valid values are none, backward, "
                                "forward, full, backward_transitive, forward_transitive, and full_transitive")
        if subject is not None:
            _check_subject(subject)
        return level.upper(), [records.config_record(subject, level.upper())]

    def delete_level(self, subject: str | None) -> tuple[str, list[Record]]:
        """Back to the level above (the global one; for the global one, BACKWARD): the level it had."""
        if subject is not None and subject not in self.configs:
            self.versions(subject, deleted=True)
            raise RegistryError(SUBJECT_LEVEL_NOT_CONFIGURED, f"Subject '{subject}' does not have subject-level "
                                "compatibility configured")
        return self.level(subject), [records.config_record(subject, None)]

    def set_mode(self, subject: str | None, mode, force: bool = False) -> tuple[str, list[Record]]:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(INVALID_MODE, "Invalid mode. Valid values are READWRITE, READONLY, "
                                "READONLY_OVERRIDE and IMPORT")
        mode = mode.upper()
        if mode == "IMPORT" and not force and (self.subjects if subject is None else self.subjects.get(subject)):
            raise RegistryError(NOT_PERMITTED, "Cannot import since found existing subjects")
        return mode, [records.mode_record(subject, mode)]

    def delete_mode(self, subject: str) -> tuple[str, list[Record]]:
        if subject not in self.modes:
            raise RegistryError(SUBJECT_MODE_NOT_CONFIGURED, f"Subject '{subject}' does not have subject-level "
                                "mode configured")
        return self.modes[subject], [records.mode_record(subject, None)]

    def _writable(self, subject: str) -> None:
        if self.mode(subject) in _READ_ONLY:
            raise RegistryError(NOT_PERMITTED, f"Subject {subject} is in read-only mode")

    def _referenced(self, target: SchemaVersion) -> bool:
        return any(not entry.deleted and (entry.subject, entry.version) != (target.subject, target.version)
                   and any(reference.subject == target.subject and reference.version == target.version
                           for reference in entry.references)
                   for versions in self.subjects.values() for entry in versions.values())


def _content(entry: SchemaVersion) -> tuple[str, str, tuple[Reference, ...]]:
    return entry.schema_type, entry.schema, entry.references


def _check_subject(subject: str) -> None:
    if not subject or len(subject) > _MAX_SUBJECT_CHARS or any(ord(char) < 32 for char in subject):
        raise RegistryError(INVALID_SUBJECT, f"The specified subject '{subject[:100]}' is not a valid subject")
