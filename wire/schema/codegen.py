"""Readers and writers generated from the declarations, per (struct, version).

Generated on first use as flat Python: runs of fixed-width fields become one
``struct`` call, integer arrays one call each, varint lengths and empty
tagged-field sections take an inline one-byte fast path, and ``records``
fields stay ``memoryview`` slices of the input, so a Produce request decodes
in time independent of the records inside it.

Readers have the signature ``read(buf: memoryview, pos) -> (value, pos)`` and
writers ``write(out: bytearray, value) -> None``. Readers raise
:class:`DecodeError` themselves, or ``struct.error``/``IndexError``/
``UnicodeDecodeError`` on truncated or malformed input, which the entry points
in :mod:`wire.schema` turn into DecodeError.
"""

from __future__ import annotations

import struct

from kbroker.wire.primitives import (
    DecodeError,
    read_bytes,
    read_compact_bytes,
    read_compact_nullable_bytes,
    read_nullable_bytes,
    read_uvarint,
    write_compact_nullable_bytes,
    write_nullable_bytes,
    write_uvarint,
)
from kbroker.wire.schema.declaration import FieldSpec, StructSpec, TypeRef
from kbroker.wire.schema.code_cache import compile_generated
from kbroker.wire.schema.values import FRESH, Encoded, Region, field_default, make_value_class, uuid_from_bytes

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

# Unpackers for integer arrays by element count, so the hot path builds no format strings.
_ARRAY_UNPACKERS_CACHED = 256


def _array_unpackers(code: str) -> list:
    return [struct.Struct(f">{count}{code}").unpack_from for count in range(_ARRAY_UNPACKERS_CACHED)]


def _array_unpacker(code: str, count: int):
    return struct.Struct(f">{count}{code}").unpack_from


def _uvarint_lines(target: str, indent: str) -> list[str]:
    """Read an unsigned varint into ``target``; one byte (the common case) inline."""
    return [
        f"{indent}{target} = buf[pos]",
        f"{indent}if {target} < 128:",
        f"{indent}    pos += 1",
        f"{indent}else:",
        f"{indent}    {target}, pos = read_uvarint(buf, pos)",
    ]


def _write_uvarint_lines(expression: str, indent: str) -> list[str]:
    return [
        f"{indent}n = {expression}",
        f"{indent}if n < 128:",
        f"{indent}    out.append(n)",
        f"{indent}else:",
        f"{indent}    write_uvarint(out, n)",
    ]


class CodeGenerator:
    """Generates and caches readers and writers for one API's structs."""

    def __init__(self) -> None:
        self._readers: dict[tuple[int, int, bool], object] = {}
        self._writers: dict[tuple[int, int, bool], object] = {}
        self._serial = 0
        self.namespace: dict[str, object] = {
            "DecodeError": DecodeError,
            "uuid_from_bytes": uuid_from_bytes,
            "unpack_from": struct.unpack_from,
            "pack": struct.pack,
            "read_uvarint": read_uvarint,
            "write_uvarint": write_uvarint,
            "read_bytes": read_bytes,
            "read_nullable_bytes": read_nullable_bytes,
            "read_compact_bytes": read_compact_bytes,
            "read_compact_nullable_bytes": read_compact_nullable_bytes,
            "write_bytes": write_nullable_bytes,
            "write_compact_bytes": write_compact_nullable_bytes,
            "write_records": write_records,
            "write_tags": write_tags,
            "read_tags": read_tags,
            "array_unpacker": _array_unpacker,
            "Region": Region,
            "Encoded": Encoded,
            "int16": struct.Struct(">h"),
            "int32": struct.Struct(">i"),
        }

    def _name(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}{self._serial}"

    def _constant(self, value) -> str:
        name = self._name("_k")
        self.namespace[name] = value
        return name

    def _define(self, name: str, source: str):
        exec(compile_generated(source, f"<generated {name}>"), self.namespace)
        return self.namespace[name]

    # -- readers ---------------------------------------------------------------

    def reader(self, struct_spec: StructSpec, version: int, flexible: bool):
        key = (id(struct_spec), version, flexible)
        function = self._readers.get(key)
        if function is None:
            name = self._name(f"read_{struct_spec.name}_v{version}_")
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
            unpack = self._constant(struct.Struct(fmt).unpack_from)
            targets = "".join(f"{var}, " for var, _ in pending)
            lines.append(f"    {targets}= {unpack}(buf, pos)")
            lines.append(f"    pos += {struct.calcsize(fmt)}")
            for var, spec in pending:
                if spec.type.name == "uuid":
                    lines.append(f"    {var} = uuid_from_bytes({var})")
            pending.clear()

        tagged = []
        for index, spec in enumerate(struct_spec.fields):
            var = f"f{index}"
            arguments.append(var)
            if version not in spec.versions or spec.tag is not None:
                # Absent in this version, or tagged (filled in by the tagged section).
                lines.append(f"    {var} = {self._default_expression(spec)}")
                if spec.tag is not None and flexible and version in spec.versions:
                    tagged.append((var, spec))
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
        return "[]" if default is FRESH else self._constant(default)

    def _read_value(self, var, type_ref: TypeRef, nullable, version, flexible, indent) -> list[str]:
        name = type_ref.name
        if name in _FIXED_FORMATS:
            fmt = ">" + _FIXED_FORMATS[name]
            unpack = self._constant(struct.Struct(fmt).unpack_from)
            lines = [f"{indent}{var}, = {unpack}(buf, pos)", f"{indent}pos += {struct.calcsize(fmt)}"]
            if name == "uuid":
                lines.append(f"{indent}{var} = uuid_from_bytes({var})")
            return lines
        if name in ("string", "records"):
            return self._read_sized(var, name, nullable, flexible, indent)
        if name == "bytes":
            function = ("read_compact_" if flexible else "read_") + ("nullable_" if nullable else "") + "bytes"
            return [f"{indent}{var}, pos = {function}(buf, pos)"]
        if name == "struct":
            reader = self._constant(self.reader(type_ref.struct, version, flexible))
            if nullable:
                # A nullable struct is preceded by an int8: -1 for null, 1 for present.
                return [
                    f"{indent}if buf[pos] >= 128:",
                    f"{indent}    {var} = None",
                    f"{indent}    pos += 1",
                    f"{indent}else:",
                    f"{indent}    {var}, pos = {reader}(buf, pos + 1)",
                ]
            return [f"{indent}{var}, pos = {reader}(buf, pos)"]
        return self._read_array(var, type_ref.element, nullable, version, flexible, indent)

    def _read_sized(self, var, name, nullable, flexible, indent) -> list[str]:
        """A string (decoded as UTF-8) or records (kept as a view of the input)."""
        if flexible:
            lines = _uvarint_lines("n", indent)
            lines.append(f"{indent}n -= 1")
        elif name == "string":
            lines = [f"{indent}n, = int16.unpack_from(buf, pos)", f"{indent}pos += 2"]
        else:
            lines = [f"{indent}n, = int32.unpack_from(buf, pos)", f"{indent}pos += 4"]
        lines.append(f"{indent}if n < 0:")
        if nullable:
            lines.append(f"{indent}    {var} = None")
        else:
            lines.append(f"{indent}    raise DecodeError('null where a non-nullable {name} is required')")
        value = f"str(buf[pos:end], 'utf-8')" if name == "string" else "buf[pos:end]"
        lines += [
            f"{indent}else:",
            f"{indent}    end = pos + n",
            f"{indent}    if end > blen:",
            f"{indent}        raise DecodeError('{name} of ' + str(n) + ' bytes runs past the end of the buffer')",
            f"{indent}    {var} = {value}",
            f"{indent}    pos = end",
        ]
        return lines

    def _read_array(self, var, element: TypeRef, nullable, version, flexible, indent) -> list[str]:
        count = self._name("n")
        if flexible:
            lines = _uvarint_lines(count, indent)
            lines.append(f"{indent}{count} -= 1")
        else:
            lines = [f"{indent}{count}, = int32.unpack_from(buf, pos)", f"{indent}pos += 4"]
        lines.append(f"{indent}if {count} < 0:")
        if nullable:
            lines.append(f"{indent}    {var} = None")
        else:
            lines.append(f"{indent}    raise DecodeError('null where a non-nullable array is required')")
        lines.append(f"{indent}else:")
        inner = indent + "    "
        # Every element takes at least one byte, so a count past the end is a lie.
        lines.append(f"{inner}if {count} > blen - pos:")
        lines.append(f"{inner}    raise DecodeError('array of ' + str({count}) + ' runs past the end of the buffer')")
        if element.name in _FIXED_FORMATS and element.name != "uuid":
            code = _FIXED_FORMATS[element.name]
            unpackers = self._constant(_array_unpackers(code))
            size = struct.calcsize(">" + code)
            lines.append(
                f"{inner}{var} = list(({unpackers}[{count}] if {count} < {_ARRAY_UNPACKERS_CACHED}"
                f" else array_unpacker('{code}', {count}))(buf, pos))"
            )
            lines.append(f"{inner}pos += {size} * {count}")
            return lines
        item = self._name("item")
        lines.append(f"{inner}{var} = []")
        lines.append(f"{inner}for _ in range({count}):")
        lines.extend(self._read_value(item, element, False, version, flexible, inner + "    "))
        lines.append(f"{inner}    {var}.append({item})")
        return lines

    def _read_tagged_section(self, tagged, version) -> list[str]:
        lines = ["    unknown = None", "    if buf[pos] == 0:", "        pos += 1", "    else:"]
        if not tagged:
            lines.append("        unknown, pos = read_tags(buf, pos, None)")
            return lines
        readers = {spec.tag: self._tagged_value_reader(spec, version) for _, spec in tagged}
        table = self._constant(readers)
        lines.append(f"        values, unknown, pos = read_tags(buf, pos, {table})")
        for var, spec in tagged:
            lines.append(f"        {var} = values.get({spec.tag}, {var})")
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
        if name == "string":
            return self._write_string(expression, flexible, indent)
        if name == "bytes":
            function = "write_compact_bytes" if flexible else "write_bytes"
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
                    f"{indent}    out.append(255)",
                    f"{indent}else:",
                    f"{indent}    out.append(1)",
                    f"{indent}    {writer}(out, {value})",
                ]
            return [f"{indent}{writer}(out, {expression})"]
        return self._write_array(expression, type_ref.element, version, flexible, indent)

    def _write_string(self, expression, flexible, indent) -> list[str]:
        value = self._name("s")
        lines = [f"{indent}{value} = {expression}", f"{indent}if {value} is None:"]
        lines.append(f"{indent}    out.append(0)" if flexible else f"{indent}    out += b'\\xff\\xff'")
        lines.append(f"{indent}else:")
        inner = indent + "    "
        lines.append(f"{inner}{value} = {value}.encode()")
        if flexible:
            lines.extend(_write_uvarint_lines(f"len({value}) + 1", inner))
        else:
            lines.append(f"{inner}out += int16.pack(len({value}))")
        lines.append(f"{inner}out += {value}")
        return lines

    def _write_array(self, expression, element: TypeRef, version, flexible, indent) -> list[str]:
        value = self._name("v")
        lines = [f"{indent}{value} = {expression}", f"{indent}if {value} is None:"]
        lines.append(f"{indent}    out.append(0)" if flexible else f"{indent}    out += b'\\xff\\xff\\xff\\xff'")
        lines.append(f"{indent}else:")
        inner = indent + "    "
        if flexible:
            lines.extend(_write_uvarint_lines(f"len({value}) + 1", inner))
        else:
            lines.append(f"{inner}out += int32.pack(len({value}))")
        if element.name in _FIXED_FORMATS and element.name != "uuid":
            code = _FIXED_FORMATS[element.name]
            lines.append(f"{inner}out += pack('>%d{code}' % len({value}), *{value})")
            return lines
        item = self._name("item")
        lines.append(f"{inner}for {item} in {value}:")
        if element.name == "struct":  # a struct may come encoded ahead (values.Encoded)
            lines.append(f"{inner}    if {item}.__class__ is Encoded:")
            lines.append(f"{inner}        out += {item}.data")
            lines.append(f"{inner}        continue")
        lines.extend(self._write_value(item, element, False, version, flexible, inner + "    "))
        return lines

    def _write_tagged_section(self, tagged: list[FieldSpec], version: int) -> list[str]:
        lines = ["    fields = None"]
        for spec in tagged:
            value_writer = self._constant(self._tagged_value_writer(spec, version))
            default = field_default(spec)
            comparison = self._constant([] if default is FRESH else default)
            lines += [
                f"    value = obj.{spec.name}",
                f"    if value is not {comparison} and value != {comparison}:",
                "        data = bytearray()",
                f"        {value_writer}(data, value)",
                "        if fields is None:",
                "            fields = []",
                f"        fields.append(({spec.tag}, data))",
            ]
        lines += [
            "    unknown = obj.unknown_tags",
            "    if unknown:",
            "        fields = sorted((fields or []) + list(unknown.items()))",
            "    if fields:",
            "        write_tags(out, fields)",
            "    else:",
            "        out.append(0)",
        ]
        return lines

    def _tagged_value_writer(self, spec: FieldSpec, version: int):
        name = self._name(f"write_tag_{spec.name}_")
        lines = [f"def {name}(out, value):"]
        lines.extend(self._write_value("value", spec.type, spec.nullable_in(version), version, True, "    "))
        return self._define(name, "\n".join(lines) + "\n")


def read_tags(buf, pos: int, readers):
    """A non-empty tagged-field section: known tags via ``readers``, the rest kept raw.

    Returns ``(unknown, pos)`` when ``readers`` is None, else ``(values, unknown, pos)``.
    """
    count, pos = read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise DecodeError("tagged field count runs past the end of the buffer")
    values = {}
    unknown = None
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise DecodeError("tagged field runs past the end of the buffer")
        reader = readers.get(tag) if readers else None
        if reader is None:
            if unknown is None:
                unknown = {}
            unknown[tag] = bytes(buf[pos:end])
        else:
            values[tag], used = reader(buf[:end], pos)
            if used != end:
                raise DecodeError(f"tagged field {tag} has the wrong size")
        pos = end
    if readers is None:
        return unknown, pos
    return values, unknown, pos


def write_tags(out: bytearray, fields) -> None:
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


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
