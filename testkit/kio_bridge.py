"""Converting between our values and kio's entities, field by field.

kio names a few fields differently (``throttle_time`` for ``throttle_time_ms``,
holding a timedelta) and wraps some types (ErrorCode, timedelta, datetime);
everything else maps one to one by name.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import types
import typing
from functools import cache

from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema.values import make_value_class

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.index import schema_name_map
from kio.static.constants import EntityType

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class NotComparable(Exception):
    """The value cannot be represented exactly on kio's side."""


def kio_name(api_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", api_name).lower()


def kio_class(api_name: str, version: int, kind: str):
    """kio's entity class for (api, version, kind), or None if kio lacks it."""
    versions = schema_name_map.get(kio_name(api_name), {})
    if version not in versions:
        return None
    entity_type = EntityType.request if kind == "request" else EntityType.response
    return _load(versions[version][entity_type])


def _load(path: str):
    from pkgutil import resolve_name

    return resolve_name(path)


@cache
def _hints(kio_cls) -> dict[str, object]:
    return typing.get_type_hints(kio_cls)


def _unwrap(annotation):
    """(element class or None, is_tuple, is_optional) of a kio annotation."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(arguments) < len(typing.get_args(annotation))
        annotation = arguments[0]
        origin = typing.get_origin(annotation)
    if origin is tuple:
        element = typing.get_args(annotation)[0]
        element_origin = typing.get_origin(element)
        if element_origin in (typing.Union, types.UnionType):
            element = [a for a in typing.get_args(element) if a is not type(None)][0]
        return element, True, optional
    return annotation, False, optional


def _our_name(kio_field, our_fields) -> str:
    name = kio_field.name
    if name in our_fields:
        return name
    if name + "_ms" in our_fields:
        return name + "_ms"
    raise NotComparable(f"kio field {name!r} has no counterpart among {sorted(our_fields)}")


def _is_entity(cls) -> bool:
    return isinstance(cls, type) and dataclasses.is_dataclass(cls)


def to_kio(value, kio_cls):
    our_fields = set(type(value)._field_names)
    kwargs = {}
    for kio_field in dataclasses.fields(kio_cls):
        name = _our_name(kio_field, our_fields)
        kwargs[kio_field.name] = _to_kio_field(getattr(value, name), kio_field, _hints(kio_cls)[kio_field.name])
    return kio_cls(**kwargs)


def _to_kio_field(value, kio_field, annotation):
    kind = kio_field.metadata.get("kafka_type")
    element, is_tuple, optional = _unwrap(annotation)
    if value is None:
        return None
    if is_tuple:
        return tuple(_to_kio_scalar(item, kind, element, False) for item in value)
    return _to_kio_scalar(value, kind, element, optional)


def _to_kio_scalar(value, kind, cls, optional):
    if _is_entity(cls):
        return to_kio(value, cls)
    if kind == "error_code":
        return KioErrorCode(value)
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=value)
    if kind == "uuid" and value == ZERO_UUID:
        return None  # kio's spelling of the zero uuid
    if kind == "datetime_i64":
        if value == -1 and optional:
            return None
        if value < 0:
            raise NotComparable("kio cannot hold timestamps before 1970")
        moment = EPOCH + datetime.timedelta(milliseconds=value)
        if round(moment.timestamp() * 1000) != value:
            raise NotComparable(f"timestamp {value} is not exact as a float")
        return moment
    if kind in ("bytes", "records") and value is not None:
        return bytes(value)
    return value


def from_kio(entity, our_cls):
    kwargs = {}
    our_fields = set(our_cls._field_names)
    specs = {spec.name: spec for spec in our_cls._spec.fields}
    for kio_field in dataclasses.fields(type(entity)):
        name = _our_name(kio_field, our_fields)
        value = getattr(entity, kio_field.name)
        annotation = _hints(type(entity))[kio_field.name]
        kwargs[name] = _from_kio_field(value, kio_field, _struct_class(specs[name]), annotation)
    return our_cls(**kwargs)


def _struct_class(spec):
    type_ref = spec.type
    while type_ref.element is not None:
        type_ref = type_ref.element
    return make_value_class(type_ref.struct) if type_ref.struct is not None else None


def _from_kio_field(value, kio_field, nested, annotation):
    kind = kio_field.metadata.get("kafka_type")
    element, is_tuple, _ = _unwrap(annotation)
    if value is None:
        # kio reads an all-zero uuid as None; ours keeps the zero uuid.
        if not is_tuple and kind == "uuid":
            return ZERO_UUID
        # kio reads a timestamp of -1 as None.
        return -1 if not is_tuple and kind == "datetime_i64" else None
    if is_tuple:
        return [_from_kio_scalar(item, kind, element, nested) for item in value]
    return _from_kio_scalar(value, kind, element, nested)


def _from_kio_scalar(value, kind, cls, nested):
    if value is None and kind == "uuid":
        return ZERO_UUID
    if _is_entity(cls):
        return from_kio(value, nested)
    if kind == "error_code":
        return int(value.value if hasattr(value, "value") else value)
    if kind in ("timedelta_i32", "timedelta_i64"):
        return round(value.total_seconds() * 1000)
    if kind == "datetime_i64":
        return round(value.timestamp() * 1000)
    if kind in ("bytes", "records"):
        return bytes(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value
