"""Hypothesis strategies for any declared message at any version.

Fields a version does not have keep their defaults, so a value drawn for
version v survives an encode/decode round trip at v unchanged.
"""

from __future__ import annotations

from functools import cache

from hypothesis import strategies as st

from kbroker.wire.schema.values import FRESH, field_default, make_value_class
from kbroker.wire.schema.declaration import FieldSpec, StructSpec, TypeRef

try:
    from kbroker.wire.errors import ErrorCode

    ERROR_CODES = sorted(int(code) for code in ErrorCode)
except ImportError:  # pragma: no cover - until wire.errors exists
    ERROR_CODES = list(range(-1, 120))

_INTEGER_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
# Peers that map int64 to datetimes and durations hold only these exactly.
NARROW_INT64 = 2**40

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def _primitive(name: str, field_name: str, narrow: bool):
    if field_name.endswith("error_code") and name == "int16":
        return st.sampled_from(ERROR_CODES)
    if name in _INTEGER_BOUNDS:
        low, high = _INTEGER_BOUNDS[name]
        if narrow and name == "int64":
            low, high = -1, NARROW_INT64
        return st.integers(low, high)
    if name == "bool":
        return st.booleans()
    if name == "float64":
        return st.floats(allow_nan=False)
    if name == "uuid":
        return st.uuids(allow_nil=True)
    if name == "string":
        return TEXT
    if name in ("bytes", "records"):
        return st.binary(max_size=24)
    raise AssertionError(name)


def _type_strategy(type_ref: TypeRef, field_name: str, version: int, flexible: bool, narrow: bool, depth: int):
    if type_ref.is_array:
        element = _type_strategy(type_ref.element, field_name, version, flexible, narrow, depth + 1)
        return st.lists(element, max_size=3 if depth < 2 else 1)
    if type_ref.name == "struct":
        return value_strategy(type_ref.struct, version, flexible, narrow)
    return _primitive(type_ref.name, field_name, narrow)


def _field_strategy(spec: FieldSpec, version: int, flexible: bool, narrow: bool):
    strategy = _type_strategy(spec.type, spec.name, version, flexible, narrow, 0)
    if spec.nullable_in(version):
        strategy = st.none() | strategy
    return strategy


@cache
def value_strategy(struct_spec: StructSpec, version: int, flexible: bool, narrow: bool = False):
    value_class = make_value_class(struct_spec)
    present = {}
    for spec in struct_spec.fields:
        if version not in spec.versions:
            continue
        if spec.tag is not None and not flexible:
            continue
        present[spec.name] = _field_strategy(spec, version, flexible, narrow)
    return st.fixed_dictionaries(present).map(lambda kwargs: value_class(**kwargs))


def default_of(spec: FieldSpec):
    default = field_default(spec)
    return [] if default is FRESH else default


def all_structs(struct_spec: StructSpec):
    """The struct and every struct nested in it, each once."""
    seen: dict[int, StructSpec] = {}
    stack = [struct_spec]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen[id(current)] = current
        for spec in current.fields:
            type_ref = spec.type
            while type_ref.element is not None:
                type_ref = type_ref.element
            if type_ref.struct is not None:
                stack.append(type_ref.struct)
    return list(seen.values())
