"""Protobuf schemas: parsed by protoc, compared by Confluent's rules.

A schema arrives as ``.proto`` source (what Confluent's Java serializer registers) or as a base64
serialized ``FileDescriptorProto`` (what confluent-kafka's Python serializer registers). Source is
compiled by protoc (grpcio-tools, in process: it reports its errors as values), with the schemas it
references written under their reference names and the well-known ``google/protobuf/*.proto`` files
found in protoc's own bundle. A descriptor is checked by building it, with the files it depends on, in
a private descriptor pool. Either way the schema ends as its files' descriptors, and ``serialized``
(``?format=serialized``) is base64 of its own file's descriptor.

The text stored is the text sent (there is no library here that prints ``.proto`` source back from a
descriptor); a descriptor is stored as its standard base64. ``normalize`` stores the serialized
descriptor instead, so a schema sent as source and as a descriptor is one schema.

Compatibility (``incompatibilities``) follows Confluent's Protobuf rules, with their names: data
written with ``original`` must be readable with ``update`` (BACKWARD compares the previous version
with the new one; FORWARD the other way round). Incompatible are PACKAGE_CHANGED, MESSAGE_REMOVED,
FIELD_KIND_CHANGED (scalar, message, map), FIELD_SCALAR_KIND_CHANGED (outside the wire-compatible
groups: int32/uint32/int64/uint64/bool/enum; sint32/sint64; fixed32/sfixed32; fixed64/sfixed64;
string/bytes; float; double), FIELD_NAMED_TYPE_CHANGED (another message type),
FIELD_NUMERIC_LABEL_CHANGED (a numeric field made repeated, or no longer), REQUIRED_FIELD_ADDED and
REQUIRED_FIELD_REMOVED (proto2), ONEOF_FIELD_REMOVED, MULTIPLE_FIELDS_MOVED_TO_ONEOF and
FIELD_MOVED_TO_EXISTING_ONEOF. Compatible, as in Confluent's: fields and messages added, fields
removed or renamed (a field is its number: a number changed is one field removed and another added),
enums and their values changed, a single field moved into a new oneof or out of one.
"""

from __future__ import annotations

import ast
import base64
import binascii
import functools
import os
import re
import tempfile
from dataclasses import dataclass, field

from kbroker.schemas.records import Reference

WELL_KNOWN = "google/protobuf/"
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_MAX_REFERENCE_DEPTH = 32
_CACHED_SCHEMAS = 128
_CACHED_TEXT_CHARS_MAX = 64 * 1024  # larger schemas are compiled each time rather than held


class ProtobufError(ValueError):
    """A schema that is not a valid Protobuf schema; its message is one line."""


@dataclass(frozen=True)
class ProtobufSchema:
    name: str  # its own file's name among ``files``
    files: dict = field(compare=False)  # name -> FileDescriptorProto: itself and every file it imports
    serialized: str = ""  # base64 of its own file's descriptor

    @property
    def file(self):
        return self.files[self.name]


# A resolved reference: (its name, its schema text, its own resolved references).
Resolved = tuple[str, str, tuple]


def parse(text: str, references: tuple[Reference, ...], resolve) -> ProtobufSchema:
    """``text`` (``.proto`` source or a base64 descriptor) with its references; ProtobufError if invalid."""
    return _parse(text, _resolved(references, resolve, 0))


def canonical(text: str) -> str:
    """The text stored: source as sent, a descriptor as its standard base64."""
    decoded = _descriptor_bytes(text)
    return text if decoded is None else base64.standard_b64encode(decoded).decode("ascii")


def normalized(schema: ProtobufSchema) -> str:
    """The descriptor, serialized deterministically, under a name that does not depend on how it was sent."""
    proto = type(schema.file)()
    proto.CopyFrom(schema.file)
    proto.name = "schema.proto"
    return base64.standard_b64encode(proto.SerializeToString(deterministic=True)).decode("ascii")


def _resolved(references: tuple[Reference, ...], resolve, depth: int) -> tuple[Resolved, ...]:
    if depth > _MAX_REFERENCE_DEPTH:
        raise ProtobufError(f"references nest deeper than {_MAX_REFERENCE_DEPTH}")
    found = []
    for reference in references:
        version = resolve(reference)
        found.append((reference.name, version.schema, _resolved(version.references, resolve, depth + 1)))
    return tuple(found)


def _parse(text: str, references: tuple[Resolved, ...]) -> ProtobufSchema:
    if len(text) > _CACHED_TEXT_CHARS_MAX:
        return _parse_now(text, references)
    return _parse_cached(text, references)


@functools.lru_cache(maxsize=_CACHED_SCHEMAS)  # a subject's versions are parsed again for every check
def _parse_cached(text: str, references: tuple[Resolved, ...]) -> ProtobufSchema:
    return _parse_now(text, references)


def _parse_now(text: str, references: tuple[Resolved, ...]) -> ProtobufSchema:
    decoded = _descriptor_bytes(text)
    if decoded is not None:
        return _from_descriptor(decoded, references)
    return _from_source(text, references)


def _descriptor_bytes(text: str) -> bytes | None:
    """The bytes of a base64 descriptor; None where ``text`` is not base64 (source has ``;`` and spaces)."""
    if not _BASE64.fullmatch(text) or not text.strip():
        return None
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return None


# -- a base64 descriptor ---------------------------------------------------------------------------


def _from_descriptor(decoded: bytes, references: tuple[Resolved, ...]) -> ProtobufSchema:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(decoded)
    except DecodeError as error:
        raise ProtobufError(f"not a serialized FileDescriptorProto: {error}") from None
    files = {}
    for name, text, nested in references:
        _merge(files, _parse(text, nested), name)
    if proto.name in files or not proto.name:
        proto.name = _unused_name(files)
    for dependency in proto.dependency:
        if dependency not in files:
            if not dependency.startswith(WELL_KNOWN):
                raise ProtobufError(f"{proto.name} imports {dependency}, which no reference names")
            files.update(_well_known(dependency))
    files[proto.name] = proto
    files = _built(files, proto.name)
    return ProtobufSchema(proto.name, files, base64.standard_b64encode(decoded).decode("ascii"))


def _merge(files: dict, schema: ProtobufSchema, name: str) -> None:
    """A referenced schema's files into ``files``, its own file under its reference ``name``."""
    for file_name, proto in schema.files.items():
        if file_name == schema.name:
            proto = _renamed(proto, name)
            file_name = name
        held = files.get(file_name)
        if held is not None and held != proto:
            raise ProtobufError(f"two different schemas are referenced as {file_name}")
        files[file_name] = proto


def _renamed(proto, name: str):
    copy = type(proto)()
    copy.CopyFrom(proto)
    copy.name = name
    return copy


def _unused_name(files: dict) -> str:
    name = "schema.proto"
    while name in files:
        name = "_" + name
    return name


def _built(files: dict, main: str) -> dict:
    """The files as a descriptor pool builds them (every type name resolved): ProtobufError if they do not build."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str, path: tuple[str, ...]) -> None:
        if name in added:
            return
        if name in path:
            raise ProtobufError(f"{name} imports itself through {' -> '.join(path)}")
        proto = files.get(name)
        if proto is None:
            raise ProtobufError(f"{path[-1]} imports {name}, which is not found")
        for dependency in proto.dependency:
            add(dependency, (*path, name))
        try:
            pool.Add(proto)
        except (TypeError, ValueError) as error:
            raise ProtobufError(" ".join(str(error).split())) from None
        added.add(name)

    add(main, ())
    built = {}
    for name in added:
        proto = descriptor_pb2.FileDescriptorProto()
        pool.FindFileByName(name).CopyToProto(proto)
        built[name] = proto
    return built


@functools.cache
def _well_known(name: str) -> dict:
    """A ``google/protobuf/*.proto`` file and what it imports, compiled from protoc's bundle."""
    with tempfile.TemporaryDirectory(prefix="kbroker-proto-") as directory:
        return _compiled(directory, name)


# -- .proto source ---------------------------------------------------------------------------------


def _from_source(text: str, references: tuple[Resolved, ...]) -> ProtobufSchema:
    sources: dict[str, str] = {}
    _collect(sources, references)
    main = _unused_name(sources)
    sources[main] = text
    with tempfile.TemporaryDirectory(prefix="kbroker-proto-") as directory:
        for name, source in sources.items():
            path = os.path.realpath(os.path.join(directory, name))
            if not path.startswith(os.path.realpath(directory) + os.sep):
                raise ProtobufError(f"a reference's name is not a relative file path: {name}")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as file:
                file.write(source)
        files = _compiled(directory, main)
    files = _built(files, main)
    return ProtobufSchema(main, files, base64.standard_b64encode(files[main].SerializeToString()).decode("ascii"))


def _collect(sources: dict[str, str], references: tuple[Resolved, ...]) -> None:
    """Every referenced schema's source, transitively, by reference name."""
    for name, text, nested in references:
        if _descriptor_bytes(text) is not None:
            raise ProtobufError(f"the reference {name} is a serialized descriptor; .proto source can import "
                                "only schemas registered as source")
        if sources.get(name, text) != text:
            raise ProtobufError(f"two different schemas are referenced as {name}")
        sources[name] = text
        _collect(sources, nested)


def _compiled(directory: str, main: str) -> dict:
    """protoc's descriptors of ``main`` and every file it imports, by name; ProtobufError with protoc's errors."""
    import grpc_tools
    from google.protobuf import descriptor_pb2
    from grpc_tools import _protoc_compiler

    bundle = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    try:
        generated = _protoc_compiler.get_protos(main.encode(), [directory.encode(), bundle.encode()])
    except _protoc_compiler.ProtocErrors as errors:
        raise ProtobufError(_protoc_message(errors.errors())) from None
    files = {}
    for _, code in generated:  # each file's Python module, which holds its serialized descriptor
        proto = descriptor_pb2.FileDescriptorProto.FromString(_serialized_descriptor(code))
        files[proto.name] = proto
    return files


def _protoc_message(errors) -> str:
    def text(value) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else str(value)

    described = []
    for error in errors[:3]:
        where = text(error.filename)
        if error.line >= 0:
            where += f":{error.line + 1}:{error.column + 1}"
        described.append(f"{where}: {text(error.message)}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return " ".join(("; ".join(described) + more).split())


def _serialized_descriptor(code: bytes) -> bytes:
    """The argument of ``AddSerializedFile(b'...')`` in a module protoc generated."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "AddSerializedFile" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, bytes):
            return node.args[0].value
    raise ProtobufError("protoc generated no descriptor")


# -- compatibility ---------------------------------------------------------------------------------

_SCALAR_GROUPS = {  # the types whose values read as each other on the wire
    "int32": "number", "int64": "number", "uint32": "number", "uint64": "number", "bool": "number",
    "enum": "number", "sint32": "signed", "sint64": "signed", "fixed32": "fixed32", "sfixed32": "fixed32",
    "fixed64": "fixed64", "sfixed64": "fixed64", "string": "text", "bytes": "text", "float": "float",
    "double": "double",
}


class _Types:
    """One schema's message types by full name ('.package.Outer.Inner'), with the file each is in."""

    def __init__(self, schema: ProtobufSchema) -> None:
        self.main = schema.name
        self.messages: dict[str, tuple] = {}  # full name -> (DescriptorProto, file name, package)
        for name, proto in schema.files.items():
            prefix = f".{proto.package}" if proto.package else ""
            for message in proto.message_type:
                self._add(message, f"{prefix}.{message.name}", name, proto.package)

    def _add(self, message, full_name: str, file_name: str, package: str) -> None:
        self.messages[full_name] = (message, file_name, package)
        for nested in message.nested_type:
            self._add(nested, f"{full_name}.{nested.name}", file_name, package)

    def local_name(self, full_name: str) -> str:
        """The name without its package."""
        package = self.messages[full_name][2] if full_name in self.messages else ""
        return full_name[len(package) + 2:] if package else full_name.lstrip(".")

    def map_entry(self, field_proto):
        """The map entry message of a map field, else None."""
        held = self.messages.get(field_proto.type_name)
        return held[0] if held and held[0].options.map_entry else None


class _Comparison:
    def __init__(self, original: ProtobufSchema, update: ProtobufSchema) -> None:
        self.original, self.update = _Types(original), _Types(update)
        self.problems: list[str] = []
        self.compared: set[tuple[str, str]] = set()  # referenced message types already compared

    def add(self, kind: str, path: str, detail: str) -> None:
        self.problems.append(f"{kind} at {path}: {detail}")

    def types(self, original: list, update: list, path: str) -> None:
        """Messages matched by name (enums may change freely)."""
        updated = {message.name: message for message in update}
        for message in original:
            if message.options.map_entry:
                continue  # a map field's entry, compared with its field
            where = f"{path}/{message.name}"
            if message.name in updated:
                self.message(message, updated[message.name], where)
            else:
                self.add("MESSAGE_REMOVED", where, f"the message {message.name} is gone")

    def message(self, original, update, path: str) -> None:
        old_top, old_all, old_oneof = _fields(original)
        new_top, new_all, new_oneof = _fields(update)
        for oneof, numbers in _oneof_members(update).items():
            moved = [number for number in numbers if number in old_top]
            existing = [number for number in numbers if number in old_oneof]
            for number in moved:
                del old_top[number]  # compared below as a field whose oneof changed, not as removed
            if len(moved) > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}/{oneof}", f"fields {moved} moved into one oneof")
            elif moved and existing:
                self.add("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}/{oneof}",
                         f"field {moved[0]} moved into a oneof that held {existing}")
        for number, oneof in sorted(old_oneof.items()):
            if oneof not in new_oneof.values():
                continue  # the whole oneof removed: compatible, as adding one is
            if number not in new_all:
                self.add("ONEOF_FIELD_REMOVED", f"{path}/{oneof}/{number}",
                         f"the oneof field {old_all[number].name} is gone")
            elif new_oneof.get(number) == oneof:
                self.field(old_all[number], new_all[number], f"{path}/{oneof}/{number}")
        for number in sorted(old_top.keys() | new_top.keys()):
            old, new = old_top.get(number), new_top.get(number)
            if new is None and number not in new_all and _required(old):
                self.add("REQUIRED_FIELD_REMOVED", f"{path}/{number}", f"the required field {old.name} is gone")
            elif old is None and number not in old_all and _required(new):
                self.add("REQUIRED_FIELD_ADDED", f"{path}/{number}", f"the field {new.name} is required")
            elif old is not None and new is not None:
                self.field(old, new, f"{path}/{number}")
        for number in sorted(old_all.keys() & new_all.keys()):  # moved into or out of a oneof, or between two
            if old_oneof.get(number) != new_oneof.get(number):
                self.field(old_all[number], new_all[number], f"{path}/{number}")
        self.types(list(original.nested_type), list(update.nested_type), path)

    def field(self, original, update, path: str) -> None:
        self.kinds(original, update, original.label, update.label, path)

    def kinds(self, original, update, old_label: int | None, new_label: int | None, path: str) -> None:
        old_entry, new_entry = self.original.map_entry(original), self.update.map_entry(update)
        old_kind, new_kind = _kind(original, old_entry), _kind(update, new_entry)
        if old_kind != new_kind:
            self.add("FIELD_KIND_CHANGED", path, f"a {old_kind} field became a {new_kind} field")
        elif old_kind == "map":
            self.kinds(old_entry.field[0], new_entry.field[0], None, None, f"{path}/key")
            self.kinds(old_entry.field[1], new_entry.field[1], None, None, f"{path}/value")
        elif old_kind == "scalar":
            old_type, new_type = _scalar(original), _scalar(update)
            if _SCALAR_GROUPS[old_type] != _SCALAR_GROUPS[new_type]:
                self.add("FIELD_SCALAR_KIND_CHANGED", path, f"{old_type} does not read as {new_type}")
            elif old_label is not None and old_label != new_label and _SCALAR_GROUPS[old_type] != "text":
                self.add("FIELD_NUMERIC_LABEL_CHANGED", path,
                         f"{_label(old_label)} {old_type} became {_label(new_label)} {new_type}")
        else:
            self.named_types(original.type_name, update.type_name, path)

    def named_types(self, old_name: str, new_name: str, path: str) -> None:
        old_local, new_local = self.original.local_name(old_name), self.update.local_name(new_name)
        if old_local != new_local:
            self.add("FIELD_NAMED_TYPE_CHANGED", path, f"{old_local} became {new_local}")
            return
        old_held, new_held = self.original.messages.get(old_name), self.update.messages.get(new_name)
        in_main = old_held is None or new_held is None or \
            (old_held[1] == self.original.main and new_held[1] == self.update.main)
        if in_main or (old_name, new_name) in self.compared or old_held[0] == new_held[0]:
            return  # the schemas' own messages are compared by name anyway
        self.compared.add((old_name, new_name))
        before = len(self.problems)
        self.message(old_held[0], new_held[0], f"#/{old_local}")
        if len(self.problems) > before:
            self.add("FIELD_NAMED_TYPE_CHANGED", path, f"the referenced message {old_local} changed incompatibly")


def _fields(message) -> tuple[dict, dict, dict]:
    """(fields outside a oneof, every field, oneof name) by number; proto3 ``optional`` is not a oneof."""
    outside, every, oneof_of = {}, {}, {}
    for field_proto in message.field:
        every[field_proto.number] = field_proto
        if field_proto.HasField("oneof_index") and not field_proto.proto3_optional:
            oneof_of[field_proto.number] = message.oneof_decl[field_proto.oneof_index].name
        else:
            outside[field_proto.number] = field_proto
    return outside, every, oneof_of


def _oneof_members(message) -> dict[str, list[int]]:
    members: dict[str, list[int]] = {}
    for number, oneof in _fields(message)[2].items():
        members.setdefault(oneof, []).append(number)
    return members


def _required(field_proto) -> bool:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto

    return field_proto.label == FieldDescriptorProto.LABEL_REQUIRED


def _label(label: int) -> str:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto

    return FieldDescriptorProto.Label.Name(label).removeprefix("LABEL_").lower()


def _kind(field_proto, map_entry) -> str:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto

    if map_entry is not None:
        return "map"
    if field_proto.type in (FieldDescriptorProto.TYPE_MESSAGE, FieldDescriptorProto.TYPE_GROUP):
        return "message"
    return "scalar"


def _scalar(field_proto) -> str:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto

    return FieldDescriptorProto.Type.Name(field_proto.type).removeprefix("TYPE_").lower()


def incompatibilities(original: ProtobufSchema, update: ProtobufSchema) -> list[str]:
    """Why data written with ``original`` may not be read with ``update``, by Confluent's rules; [] if it may."""
    comparison = _Comparison(original, update)
    old_file, new_file = original.file, update.file
    if old_file.package != new_file.package:
        comparison.add("PACKAGE_CHANGED", "#/", f"package {old_file.package!r} became {new_file.package!r}")
    comparison.types(list(old_file.message_type), list(new_file.message_type), "#")
    return comparison.problems
