"""The registry's state and rules (kbroker/schemas/registry.py) over records, with schemas as plain text:
each change's records are applied back as the writer applies them once committed, and a registry rebuilt
from the same records agrees."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kbroker.schemas import records
from kbroker.schemas.records import Reference
from kbroker.schemas.registry import Registry, RegistryError


@dataclass(frozen=True)
class Text:
    """A schema whose fields are the words of its text: a new version is backward compatible when it keeps
    every field of the one it reads ("?field" marks a field with a default, which may be added)."""

    canonical: str
    schema_type: str = "AVRO"

    def normalized(self) -> Text:
        return Text(" ".join(sorted(self.canonical.split())), self.schema_type)

    def fields(self) -> set[str]:
        return {word.lstrip("?") for word in self.canonical.split()}


def check(level: str, new: Text, previous: list[Text]) -> list[str]:
    problems = []
    for old in previous:
        added = {word for word in new.canonical.split() if not word.startswith("?")} - old.fields()
        if level.startswith(("BACKWARD", "FULL")) and added:
            problems.append(f"reader field {sorted(added)} has no default")
        if level.startswith(("FORWARD", "FULL")) and old.fields() - new.fields():
            problems.append(f"fields {sorted(old.fields() - new.fields())} removed")
    return problems


class Log:
    """The writer's part: records applied in order, and kept to rebuild a registry from."""

    def __init__(self) -> None:
        self.registry = Registry(check)
        self.written: list[tuple[bytes, bytes | None]] = []

    def write(self, answer):
        result, written = answer
        for key, value in written:
            self.written.append((key, value))
            self.registry.apply(*records.decode(key, value))
        return result

    def register(self, subject: str, text: str, schema_type: str = "AVRO", references=(), **imported):
        return self.write(self.registry.register(subject, Text(text, schema_type), tuple(references),
                                                 lambda entry: Text(entry.schema, entry.schema_type), **imported))

    def rebuilt(self) -> Registry:
        registry = Registry(check)
        for key, value in self.written:
            registry.apply(*records.decode(key, value))
        return registry


def refused(call, *args, **kwargs) -> int:
    with pytest.raises(RegistryError) as raised:
        call(*args, **kwargs)
    return raised.value.error_code


@pytest.fixture
def log() -> Log:
    return Log()


def test_versions_count_per_subject_and_ids_per_schema(log):
    first = log.register("orders-value", "a b")
    assert (first.id, first.version) == (1, 1)
    assert log.register("orders-value", "a b") == first  # the same schema again: nothing written
    assert len(log.written) == 1
    second = log.register("orders-value", "a b ?c")
    assert (second.id, second.version) == (2, 2)
    elsewhere = log.register("payments-value", "a b")
    assert (elsewhere.id, elsewhere.version) == (1, 1)  # the same schema keeps its id in any subject
    assert [entry.version for entry in log.registry.versions("orders-value")] == [1, 2]
    assert log.registry.version("orders-value", "latest").id == 2
    assert [(e.subject, e.version) for e in log.registry.holders(1)] == [("orders-value", 1), ("payments-value", 1)]
    assert log.registry.subject_names() == ["orders-value", "payments-value"]
    assert log.registry.subject_names(prefix="pay") == ["payments-value"]


def test_the_level_decides_what_may_follow(log):
    log.register("s", "a b")
    error = pytest.raises(RegistryError, log.register, "s", "a b c").value
    assert (error.error_code, error.http_status) == (409, 409) and "reader field ['c'] has no default" in error.message
    log.write(log.registry.set_level("s", "forward"))
    assert log.registry.level("s") == "FORWARD" and log.registry.level("other") == "BACKWARD"
    assert log.register("s", "a b c").version == 2
    assert refused(log.registry.set_level, None, "SIDEWAYS") == 42203
    log.write(log.registry.set_level(None, "NONE"))
    assert log.write(log.registry.delete_level("s")) == "FORWARD"
    assert log.registry.level("s") == "NONE"
    assert refused(log.registry.delete_level, "s") == 40408


def test_transitive_levels_check_every_live_version(log):
    log.register("s", "a")
    log.register("s", "a ?b")
    log.write(log.registry.set_level("s", "BACKWARD_TRANSITIVE"))
    assert refused(log.register, "s", "a b") == 409  # reads v2's data, not v1's (no b there, no default)
    log.write(log.registry.set_level("s", "BACKWARD"))
    assert log.register("s", "a b").version == 3


def test_soft_then_permanent_deletes_with_confluents_codes(log):
    log.register("s", "a")
    log.register("s", "a ?b")
    assert log.write(log.registry.delete_version("s", "1", permanent=False)) == 1
    assert refused(log.registry.version, "s", 1) == 40402
    assert log.registry.version("s", 1, deleted=True).deleted
    assert log.registry.by_id(1).schema == "a"  # still readable by id
    assert refused(log.registry.delete_version, "s", 1, permanent=False) == 40402
    assert refused(log.registry.delete_version, "s", 2, permanent=True) == 40407
    assert log.write(log.registry.delete_version("s", 1, permanent=True)) == 1
    assert refused(log.registry.by_id, 1) == 40403
    assert refused(log.registry.delete_subject, "s", permanent=True) == 40405
    assert log.write(log.registry.delete_subject("s", permanent=False)) == [2]
    assert refused(log.registry.versions, "s") == 40401 and log.registry.subject_names() == []
    assert log.registry.subject_names(deleted=True) == ["s"]
    assert refused(log.registry.delete_subject, "s", permanent=False) == 40404
    assert log.write(log.registry.delete_subject("s", permanent=True)) == [2]
    assert refused(log.registry.versions, "s", deleted=True) == 40401
    again = log.register("s", "z")
    assert (again.version, again.id) == (1, 3)  # ids are never given twice


def test_a_referenced_version_cannot_be_deleted(log):
    log.register("common", "x")
    user = log.register("user", "u", references=[Reference("common.avsc", "common", 1)])
    assert log.registry.referenced_by("common", 1) == [user.id]
    assert refused(log.registry.delete_version, "common", 1, permanent=False) == 42206
    assert refused(log.registry.delete_subject, "common", permanent=False) == 42206


def test_modes(log):
    log.register("s", "a")
    log.write(log.registry.set_mode("s", "READONLY"))
    assert refused(log.register, "s", "a ?b") == 42205
    assert refused(log.registry.set_mode, None, "SOMETIMES") == 42204
    assert refused(log.registry.set_mode, None, "IMPORT") == 42205  # subjects exist
    log.write(log.registry.set_mode("fresh", "IMPORT"))
    imported = log.register("fresh", "q", schema_id=100, version=7)
    assert (imported.id, imported.version) == (100, 7)
    assert refused(log.register, "fresh", "r", schema_id=100, version=8) == 42207
    assert log.write(log.registry.delete_mode("s")) == "READONLY"
    assert (log.register("s", "a ?b").version, log.register("other", "w").id) == (2, 102)  # past every id seen


def test_lookup_and_bad_versions(log):
    log.register("s", "a")
    assert log.registry.lookup("s", Text("a"), ()).version == 1
    assert refused(log.registry.lookup, "s", Text("b"), ()) == 40403
    assert refused(log.registry.lookup, "t", Text("a"), ()) == 40401
    for bad in ("0", "x", str(2**31), "-2"):
        assert refused(log.registry.version, "s", bad) == 42202
    assert refused(log.register, "", "a") == 42208


def test_a_registry_rebuilt_from_the_records_agrees(log):
    log.register("s", "a")
    log.register("s", "a ?b")
    log.write(log.registry.delete_version("s", 1, permanent=False))
    log.write(log.registry.set_level(None, "FULL"))
    rebuilt = log.rebuilt()
    assert rebuilt.subjects == log.registry.subjects and rebuilt.configs == log.registry.configs
    assert rebuilt.max_id == 2


def test_records_read_as_confluent_writes_them():
    key, value = records.schema_record(records.SchemaVersion("s", 1, 5, "PROTOBUF", "syntax", (Reference("n", "t", 2),)))
    assert key == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    assert value == (b'{"subject":"s","version":1,"id":5,"schemaType":"PROTOBUF","references":'
                     b'[{"name":"n","subject":"t","version":2}],"schema":"syntax","deleted":false}')
    assert records.config_record(None, "FULL") == (b'{"keytype":"CONFIG","magic":0}', b'{"compatibilityLevel":"FULL"}')
    avro = records.schema_record(records.SchemaVersion("s", 2, 6, "AVRO", '"string"'))[1]
    assert b"schemaType" not in avro and b"references" not in avro
    for junk in (b"nope", b"[]", b'{"magic":0}'):
        with pytest.raises(records.RecordError):
            records.decode(junk, None)
