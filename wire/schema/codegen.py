"""Value classes, readers and writers generated from the declarations.

Each struct gets one value class covering all versions (as Kafka's generated
data classes do). Readers and writers are generated per (struct, version) on
first use as flat Python: runs of fixed-width fields become one
``struct.unpack_from``/``pack`` call, arrays of integers one call each, and
``records`` fields stay ``memoryview`` slices of the input so a Produce request
decodes in time independent of the records inside it.

Readers have the signature ``read(buf: memoryview, pos) -> (value, pos)`` and
writers ``write(out: bytearray, value) -> None``. Readers raise only
:class:`DecodeError` and ``struct.error``; the entry points in
:mod:`wire.schema` turn the latter into the former.
"""

from __future__ import annotations

import struct
import uuid

from wire.primitives import (
    ZERO_UUID,
    DecodeError,
    read_bytes,
    read_compact_bytes,
    read_compact_nullable_bytes,
    read_compact_nullable_string,
    read_compact_string,
    read_nullable_bytes,
    read_nullable_string,
    read_string,
    read_uvarint,
    write_compact_nullable_bytes,
    write_compact_nullable_string,
    write_nullable_bytes,
    write_nullable_string,
    write_uvarint,
)
from wire.schema.declaration import FieldSpec, StructSpec, TypeRef

_FIXED_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "uuid": "16s",
}

_ZERO_DEFAULTS = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "uint32": 0,
    "float64": 0.0,
    "uuid": ZERO_UUID,
    "string": "",
    "bytes": b"",
    "records": None,
}


_NULL_ARRAY = repr(b"\xff\xff\xff\xff")
_NULL_ARRAY_FLEXIBLE = repr(b"\x00")


class _Fresh:
    """Marks an argument left out, so mutable defaults are made per instance."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<fresh>"


FRESH = _Fresh()


class Region:
    """Base for values of a ``records`` field that are not in memory.

    The writer records where such a value goes (``EncodeBuffer.regions``)
    instead of copying it; the server sends it with ``os.sendfile``.
    Subclasses define ``length`` (bytes).
    """

    __slots__ = ()
    length: int


class EncodeBuffer(bytearray):
    """A bytearray that also collects ``(offset, Region)`` pairs."""

    __slots__ = ("regions",)

    def __init__(self, *args):
        super().__init__(*args)
        self.regions = []


class Value:
    """Base of the generated value classes."""

    __slots__ = ()
    _field_names: tuple[str, ...] = ()

    def _as_tuple(self):
        return tuple(getattr(self, name) for name in self._field_names) + (self.unknown_tags,)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._as_tuple() == other._as_tuple()

    __hash__ = None

    def __repr__(self) -> str:
        parts = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._field_names)
        if self.unknown_tags:
            parts += f", unknown_tags={self.unknown_tags!r}"
        return f"{type(self).__name__}({parts})"


def field_default(spec: FieldSpec):
    """The field's default as a constant; FRESH for a new list or struct."""
    if spec.has_default:
        return spec.default
    if spec.type.is_array or spec.type.name == "struct":
        return FRESH
    return _ZERO_DEFAULTS[spec.type.name]


def make_value_class(struct_spec: StructSpec) -> type:
    """Build (once) the value class for a struct and, recursively, its children."""
    if struct_spec.value_class is not None:
        return struct_spec.value_class
    namespace: dict[str, object] = {"FRESH": FRESH}
    params = []
    body = []
    for index, spec in enumerate(struct_spec.fields):
        default = field_default(spec)
        if default is FRESH:
            params.append(f"{spec.name}=FRESH")
            if spec.type.is_array:
                body.append(f"    self.{spec.name} = [] if {spec.name} is FRESH else {spec.name}")
            else:
                child = make_value_class(spec.type.struct)
                namespace[f"_c{index}"] = child
                body.append(f"    self.{spec.name} = _c{index}() if {spec.name} is FRESH else {spec.name}")
        else:
            namespace[f"_d{index}"] = default
            params.append(f"{spec.name}=_d{index}")
            body.append(f"    self.{spec.name} = {spec.name}")
    params.append("unknown_tags=None")
    body.append("    self.unknown_tags = unknown_tags")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<{struct_spec.name}.__init__>", "exec"), namespace)

    names = tuple(spec.name for spec in struct_spec.fields)
    attributes = {
        "__slots__": names + ("unknown_tags",),
        "__init__": namespace["__init__"],
        "_field_names": names,
        "_spec": struct_spec,
        "__module__": "wire.schema",
    }
    for spec in struct_spec.fields:
        child_struct = _struct_of(spec.type)
        if child_struct is not None:
            attributes[child_struct.name] = make_value_class(child_struct)
    value_class = type(struct_spec.name, (Value,), attributes)
    struct_spec.value_class = value_class
    return value_class


def _struct_of(type_ref: TypeRef) -> StructSpec | None:
    while type_ref.element is not None:
        type_ref = type_ref.element
    return type_ref.struct


class CodeGenerator:
    """Generates and caches readers and writers for one API's structs."""

    def __init__(self) -> None:
        self._readers: dict[tuple[int, int, bool], object] = {}
        self._writers: dict[tuple[int, int, bool], object] = {}
        self._serial = 0
        self.namespace: dict[str, object] = {
            "DecodeError": DecodeError,
            "UUID": uuid.UUID,
            "ZERO_UUID": ZERO_UUID,
            "unpack_from": struct.unpack_from,
            "pack": struct.pack,
            "read_uvarint": read_uvarint,
            "write_uvarint": write_uvarint,
            "read_string": read_string,
            "read_nullable_string": read_nullable_string,
            "read_compact_string": read_compact_string,
            "read_compact_nullable_string": read_compact_nullable_string,
            "read_bytes": read_bytes,
            "read_nullable_bytes": read_nullable_bytes,
            "read_compact_bytes": read_compact_bytes,
            "read_compact_nullable_bytes": read_compact_nullable_bytes,
            "write_string": write_nullable_string,
            "write_compact_string": write_compact_nullable_string,
            "write_bytes": write_nullable_bytes,
            "write_compact_bytes": write_compact_nullable_bytes,
            "read_records": read_records,
            "write_records": write_records,
            "Region": Region,
            "FRESH": FRESH,
        }

    def _name(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}{self._serial}"

    def _constant(self, value) -> str:
        name = self._name("_k")
        self.namespace[name] = value
        return name

    def _define(self, name: str, source: str):
        exec(compile(source, f"<generated {name}>", "exec"), self.namespace)
        return self.namespace[name]

    # -- readers ---------------------------------------------------------------

    def reader(self, struct_spec: StructSpec, version: int, flexible: bool):
        key = (id(struct_spec), version, flexible)
        function = self._readers.get(key)
        if function is None:
            name = self._name(f"read_{struct_spec.name}_v{version}_")
            self._readers[key] = self.namespace[name] = _placeholder(name)
            function = self._define(name, self._reader_source(name, struct_spec, version, flexible))
            self._readers[key] = function
        return function

    def _reader_source(self, name, struct_spec, version, flexible) -> str:
        value_class = self._constant(make_value_class(struct_spec))
        lines = [f"def {name}(buf, pos):", "    blen = len(buf)"]
        arguments = []
        pending: list[tuple[str, FieldSpec]] = []

        def flush_fixed():
            if not pending:
                return
            fmt = ">" + "".join(_FIXED_FORMATS[spec.type.name] for _, spec in pending)
            size = struct.calcsize(fmt)
            unpack = self._constant(struct.Struct(fmt).unpack_from)
            targets = "".join(f"{var}, " for var, _ in pending)
            lines.append(f"    {targets}= {unpack}(buf, pos)")
            lines.append(f"    pos += {size}")
            for var, spec in pending:
                if spec.type.name == "uuid":
                    lines.append(f"    {var} = UUID(bytes={var})")
            pending.clear()

        tagged = []
        for index, spec in enumerate(struct_spec.fields):
            var = f"f{index}"
            arguments.append(var)
            if version not in spec.versions:
                lines.append(f"    {var} = {self._default_expression(spec)}")
                continue
            if spec.tag is not None and flexible:
                tagged.append((var, spec))
                lines.append(f"    {var} = {self._default_expression(spec)}")
                continue
            if spec.tag is not None:
                lines.append(f"    {var} = {self._default_expression(spec)}")
                continue
            if spec.type.name in _FIXED_FORMATS:
                pending.append((var, spec))
                continue
            flush_fixed()
            lines.extend(self._read_value(var, spec.type, spec.nullable_in(version), version, flexible, "    "))
        flush_fixed()
        unknown = "None"
        if flexible:
            unknown = "unknown"
            lines.extend(self._read_tagged_section(tagged, version))
        lines.append(f"    return {value_class}({', '.join(arguments + [unknown])}), pos")
        return "\n".join(lines) + "\n"

    def _default_expression(self, spec: FieldSpec) -> str:
        default = field_default(spec)
        if default is FRESH:
            if spec.type.is_array:
                return "[]"
            return f"{self._constant(make_value_class(spec.type.struct))}()"
        return self._constant(default)

    def _read_value(self, var, type_ref: TypeRef, nullable, version, flexible, indent) -> list[str]:
        name = type_ref.name
        if name in _FIXED_FORMATS:
            fmt = ">" + _FIXED_FORMATS[name]
            unpack = self._constant(struct.Struct(fmt).unpack_from)
            lines = [f"{indent}{var}, = {unpack}(buf, pos)", f"{indent}pos += {struct.calcsize(fmt)}"]
            if name == "uuid":
                lines.append(f"{indent}{var} = UUID(bytes={var})")
            return lines
        if name in ("string", "bytes"):
            function = ("read_compact_" if flexible else "read_") + ("nullable_" if nullable else "") + name
            return [f"{indent}{var}, pos = {function}(buf, pos)"]
        if name == "records":
            return [f"{indent}{var}, pos = read_records(buf, pos, {flexible}, {nullable})"]
        if name == "struct":
            reader = self._constant(self.reader(type_ref.struct, version, flexible))
            if nullable:
                # Kafka writes a nullable struct as an int8 presence marker first.
                return [
                    f"{indent}if unpack_from('>b', buf, pos)[0] < 0:",
                    f"{indent}    {var} = None",
                    f"{indent}    pos += 1",
                    f"{indent}else:",
                    f"{indent}    {var}, pos = {reader}(buf, pos + 1)",
                ]
            return [f"{indent}{var}, pos = {reader}(buf, pos)"]
        return self._read_array(var, type_ref.element, nullable, version, flexible, indent)

    def _read_array(self, var, element: TypeRef, nullable, version, flexible, indent) -> list[str]:
        count = self._name("n")
        lines = []
        if flexible:
            lines.append(f"{indent}{count}, pos = read_uvarint(buf, pos)")
            lines.append(f"{indent}{count} -= 1")
        else:
            lines.append(f"{indent}{count}, = unpack_from('>i', buf, pos)")
            lines.append(f"{indent}pos += 4")
        lines.append(f"{indent}if {count} < 0:")
        if nullable:
            lines.append(f"{indent}    {var} = None")
        else:
            lines.append(f"{indent}    raise DecodeError('null where a non-nullable array is required')")
        lines.append(f"{indent}else:")
        inner = indent + "    "
        lines.append(f"{inner}if {count} > blen - pos:")
        lines.append(f"{inner}    raise DecodeError('array length ' + str({count}) + ' runs past the end of the buffer')")
        if element.name in _FIXED_FORMATS and element.name != "uuid":
            code = _FIXED_FORMATS[element.name]
            size = struct.calcsize(">" + code)
            lines.append(f"{inner}{var} = list(unpack_from('>%d{code}' % {count}, buf, pos))")
            lines.append(f"{inner}pos += {size} * {count}")
            return lines
        item = self._name("item")
        lines.append(f"{inner}{var} = []")
        lines.append(f"{inner}for _ in range({count}):")
        lines.extend(self._read_value(item, element, False, version, flexible, inner + "    "))
        lines.append(f"{inner}    {var}.append({item})")
        return lines

    def _read_tagged_section(self, tagged, version) -> list[str]:
        lines = [
            "    unknown = None",
            "    ntags, pos = read_uvarint(buf, pos)",
            "    if ntags > blen - pos:",
            "        raise DecodeError('tagged field count runs past the end of the buffer')",
            "    for _ in range(ntags):",
            "        tag, pos = read_uvarint(buf, pos)",
            "        size, pos = read_uvarint(buf, pos)",
            "        end = pos + size",
            "        if end > blen:",
            "            raise DecodeError('tagged field runs past the end of the buffer')",
        ]
        keyword = "if"
        for var, spec in tagged:
            value_reader = self._constant(self._tagged_value_reader(spec, version))
            lines.append(f"        {keyword} tag == {spec.tag}:")
            lines.append(f"            {var}, used = {value_reader}(buf[:end], pos)")
            lines.append("            if used != end:")
            lines.append(f"                raise DecodeError('tagged field {spec.tag} has the wrong size')")
            keyword = "elif"
        if tagged:
            lines.append("        else:")
            lines.append("            if unknown is None:")
            lines.append("                unknown = {}")
            lines.append("            unknown[tag] = bytes(buf[pos:end])")
        else:
            lines.append("        if unknown is None:")
            lines.append("            unknown = {}")
            lines.append("        unknown[tag] = bytes(buf[pos:end])")
        lines.append("        pos = end")
        return lines

    def _tagged_value_reader(self, spec: FieldSpec, version: int):
        name = self._name(f"read_tag_{spec.name}_")
        lines = [f"def {name}(buf, pos):", "    blen = len(buf)"]
        lines.extend(self._read_value("value", spec.type, spec.nullable_in(version), version, True, "    "))
        lines.append("    return value, pos")
        return self._define(name, "\n".join(lines) + "\n")

    # -- writers ---------------------------------------------------------------

    def writer(self, struct_spec: StructSpec, version: int, flexible: bool):
        key = (id(struct_spec), version, flexible)
        function = self._writers.get(key)
        if function is None:
            name = self._name(f"write_{struct_spec.name}_v{version}_")
            self._writers[key] = self.namespace[name] = _placeholder(name)
            function = self._define(name, self._writer_source(name, struct_spec, version, flexible))
            self._writers[key] = function
        return function

    def _writer_source(self, name, struct_spec, version, flexible) -> str:
        lines = [f"def {name}(out, obj):"]
        pending: list[FieldSpec] = []

        def flush_fixed():
            if not pending:
                return
            fmt = ">" + "".join(_FIXED_FORMATS[spec.type.name] for spec in pending)
            pack = self._constant(struct.Struct(fmt).pack)
            arguments = ", ".join(
                f"obj.{spec.name}.bytes" if spec.type.name == "uuid" else f"obj.{spec.name}" for spec in pending
            )
            lines.append(f"    out += {pack}({arguments})")
            pending.clear()

        tagged = []
        for spec in struct_spec.fields:
            if version not in spec.versions:
                continue
            if spec.tag is not None:
                if flexible:
                    tagged.append(spec)
                continue
            if spec.type.name in _FIXED_FORMATS:
                pending.append(spec)
                continue
            flush_fixed()
            lines.extend(
                self._write_value(f"obj.{spec.name}", spec.type, spec.nullable_in(version), version, flexible, "    ")
            )
        flush_fixed()
        if flexible:
            lines.extend(self._write_tagged_section(tagged, version))
        if len(lines) == 1:
            lines.append("    pass")
        return "\n".join(lines) + "\n"

    def _write_value(self, expression, type_ref: TypeRef, nullable, version, flexible, indent) -> list[str]:
        name = type_ref.name
        if name in _FIXED_FORMATS:
            pack = self._constant(struct.Struct(">" + _FIXED_FORMATS[name]).pack)
            if name == "uuid":
                expression += ".bytes"
            return [f"{indent}out += {pack}({expression})"]
        if name in ("string", "bytes"):
            function = ("write_compact_" if flexible else "write_") + name
            return [f"{indent}{function}(out, {expression})"]
        if name == "records":
            return [f"{indent}write_records(out, {expression}, {flexible})"]
        if name == "struct":
            writer = self._constant(self.writer(type_ref.struct, version, flexible))
            if nullable:
                value = self._name("v")
                return [
                    f"{indent}{value} = {expression}",
                    f"{indent}if {value} is None:",
                    f"{indent}    out += b'\\xff'",
                    f"{indent}else:",
                    f"{indent}    out += b'\\x01'",
                    f"{indent}    {writer}(out, {value})",
                ]
            return [f"{indent}{writer}(out, {expression})"]
        return self._write_array(expression, type_ref.element, version, flexible, indent)

    def _write_array(self, expression, element: TypeRef, version, flexible, indent) -> list[str]:
        value = self._name("v")
        lines = [f"{indent}{value} = {expression}", f"{indent}if {value} is None:"]
        null_marker = _NULL_ARRAY_FLEXIBLE if flexible else _NULL_ARRAY
        lines.append(f"{indent}    out += {null_marker}")
        lines.append(f"{indent}else:")
        inner = indent + "    "
        if flexible:
            lines.append(f"{inner}write_uvarint(out, len({value}) + 1)")
        else:
            lines.append(f"{inner}out += pack('>i', len({value}))")
        if element.name in _FIXED_FORMATS and element.name != "uuid":
            code = _FIXED_FORMATS[element.name]
            lines.append(f"{inner}out += pack('>%d{code}' % len({value}), *{value})")
            return lines
        item = self._name("item")
        lines.append(f"{inner}for {item} in {value}:")
        lines.extend(self._write_value(item, element, False, version, flexible, inner + "    "))
        return lines

    def _write_tagged_section(self, tagged: list[FieldSpec], version: int) -> list[str]:
        if not tagged:
            return [
                "    unknown = obj.unknown_tags",
                "    if unknown:",
                "        write_tags(out, sorted(unknown.items()))",
                "    else:",
                "        out.append(0)",
            ]
        self.namespace["write_tags"] = write_tags
        lines = ["    fields = []"]
        for spec in tagged:
            value_writer = self._constant(self._tagged_value_writer(spec, version))
            default = field_default(spec)
            if default is FRESH:
                default = [] if spec.type.is_array else make_value_class(spec.type.struct)()
            comparison = self._constant(default)
            lines.append(f"    value = obj.{spec.name}")
            lines.append(f"    if value != {comparison}:")
            lines.append("        data = bytearray()")
            lines.append(f"        {value_writer}(data, value)")
            lines.append(f"        fields.append(({spec.tag}, data))")
        lines.append("    unknown = obj.unknown_tags")
        lines.append("    if unknown:")
        lines.append("        fields.extend(unknown.items())")
        lines.append("        fields.sort()")
        lines.append("    write_tags(out, fields)")
        return lines

    def _tagged_value_writer(self, spec: FieldSpec, version: int):
        name = self._name(f"write_tag_{spec.name}_")
        lines = [f"def {name}(out, value):"]
        lines.extend(self._write_value("value", spec.type, spec.nullable_in(version), version, True, "    "))
        return self._define(name, "\n".join(lines) + "\n")


def write_tags(out: bytearray, fields) -> None:
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


def read_records(buf, pos: int, flexible: bool, nullable: bool):
    """A records field: the bytes stay a slice of the input, never copied."""
    if flexible:
        length, pos = read_uvarint(buf, pos)
        length -= 1
    else:
        length = struct.unpack_from(">i", buf, pos)[0]
        pos += 4
    if length < 0:
        if not nullable:
            raise DecodeError("null records where they are required")
        return None, pos
    end = pos + length
    if end > len(buf):
        raise DecodeError(f"records of {length} bytes run past the end of the buffer")
    return buf[pos:end], end


def write_records(out, value, flexible: bool) -> None:
    if value is None:
        out += b"\x00" if flexible else b"\xff\xff\xff\xff"
        return
    if isinstance(value, Region):
        length = value.length
        if flexible:
            write_uvarint(out, length + 1)
        else:
            out += struct.pack(">i", length)
        out.regions.append((len(out), value))
        return
    if flexible:
        write_uvarint(out, len(value) + 1)
    else:
        out += struct.pack(">i", len(value))
    out += value


def _placeholder(name: str):
    def not_ready(*_args):
        raise RuntimeError(f"{name} used before it was generated")

    return not_ready
