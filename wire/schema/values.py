"""The value classes generated for declared structs, and what they hold.

Each struct gets one class covering all versions, as Kafka's generated data
classes do: ``__slots__`` for its fields plus ``unknown_tags`` (tagged fields
a newer peer sent that we do not know; kept and written back).

A struct-typed field left at its default shares one immutable instance per
class (``Cls.DEFAULT``) instead of building a new one per message: decoding a
Fetch response would otherwise build three default structs per partition.
Changing a field of a shared default raises; assign a new instance instead.
"""

from __future__ import annotations

import uuid

from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema.code_cache import compile_generated
from kbroker.wire.schema.declaration import FieldSpec, StructSpec, TypeRef

__all__ = ["FRESH", "Region", "EncodeBuffer", "Value", "field_default", "make_value_class", "uuid_from_bytes"]

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


class _Fresh:
    """Marks an argument left out, so a new list is made per instance."""

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


class Encoded:
    """A struct value in an array, encoded ahead for the version being written: the writer copies
    ``data`` where the value would go. For parts of an answer that are large and seldom change
    (a topic's partitions in Metadata), kept encoded between requests."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


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
    _spec: StructSpec

    def _as_tuple(self):
        return tuple(getattr(self, name) for name in self._field_names) + (self.unknown_tags,)

    def __eq__(self, other):
        if not isinstance(other, Value) or other._spec is not self._spec:
            return NotImplemented
        return self is other or self._as_tuple() == other._as_tuple()

    __hash__ = None

    def __repr__(self) -> str:
        parts = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._field_names)
        if self.unknown_tags:
            parts += f", unknown_tags={self.unknown_tags!r}"
        return f"{self._spec.name}({parts})"


def _refuse_change(self, name, value):
    raise AttributeError(
        f"{self._spec.name}.DEFAULT is shared by every message that leaves this field out;"
        f" assign a new {self._spec.name}(...) instead of changing its {name!r}"
    )


def field_default(spec: FieldSpec):
    """The field's default: a constant, or FRESH for a new (empty) list."""
    if spec.has_default:
        return spec.default
    if spec.type.is_array:
        return FRESH
    if spec.type.name == "struct":
        return make_value_class(spec.type.struct).DEFAULT
    return _ZERO_DEFAULTS[spec.type.name]


def make_value_class(struct_spec: StructSpec) -> type:
    """Build (once) the value class for a struct and, first, its children."""
    if struct_spec.value_class is not None:
        return struct_spec.value_class
    children = {}
    for spec in struct_spec.fields:
        child_struct = struct_of(spec.type)
        if child_struct is not None:
            children[child_struct.name] = make_value_class(child_struct)

    defaults = {}
    for spec in struct_spec.fields:
        default = field_default(spec)
        defaults[spec.name] = [] if default is FRESH else default

    names = tuple(spec.name for spec in struct_spec.fields)
    attributes = {
        "__slots__": names + ("unknown_tags",),
        "__init__": _first_init,
        "_field_names": names,
        "_spec": struct_spec,
        "__module__": "kbroker.wire.schema",
        **children,
    }
    value_class = type(struct_spec.name, (Value,), attributes)
    frozen_class = type(struct_spec.name, (value_class,), {"__slots__": (), "__setattr__": _refuse_change})
    shared_default = object.__new__(frozen_class)
    for name, default in defaults.items():
        object.__setattr__(shared_default, name, default)
    object.__setattr__(shared_default, "unknown_tags", None)
    value_class.DEFAULT = shared_default
    struct_spec.value_class = value_class
    return value_class


def _first_init(self, *args, **kwargs):
    """A value class's first construction: compile its ``__init__``, put it on the class, and call it.
    Classes are made for every struct a module names, most of which a process never builds; compiling
    their constructors up front cost a broker's start some 12 ms."""
    value_class = self._spec.value_class
    value_class.__init__ = _compile_init(self._spec)
    value_class.__init__(self, *args, **kwargs)


def _compile_init(struct_spec: StructSpec):
    namespace: dict[str, object] = {"FRESH": FRESH}
    params = []
    body = []
    for index, spec in enumerate(struct_spec.fields):
        default = field_default(spec)
        if default is FRESH:
            params.append(f"{spec.name}=FRESH")
            body.append(f"    self.{spec.name} = [] if {spec.name} is FRESH else {spec.name}")
        else:
            namespace[f"_d{index}"] = default
            params.append(f"{spec.name}=_d{index}")
            body.append(f"    self.{spec.name} = {spec.name}")
    params.append("unknown_tags=None")
    body.append("    self.unknown_tags = unknown_tags")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(compile_generated(source, f"<{struct_spec.name}.__init__>"), namespace)
    return namespace["__init__"]


def struct_of(type_ref: TypeRef) -> StructSpec | None:
    """The struct a field holds, directly or as array elements, if any."""
    while type_ref.element is not None:
        type_ref = type_ref.element
    return type_ref.struct


_new_uuid = object.__new__
_set = object.__setattr__
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


def uuid_from_bytes(data) -> uuid.UUID:
    """``uuid.UUID(bytes=data)`` without its argument checks (a hot path)."""
    value = int.from_bytes(data, "big")
    if not value:
        return ZERO_UUID
    result = _new_uuid(uuid.UUID)
    _set(result, "int", value)
    _set(result, "is_safe", _SAFE_UNKNOWN)
    return result
