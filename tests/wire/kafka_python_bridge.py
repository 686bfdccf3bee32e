"""Converting between our values and kafka-python's message objects, field by field.

kafka-python (3.x) builds its request/response classes (``kafka.protocol.*``,
subclasses of ``ApiMessage``) from Kafka's JSON message definitions, which it
ships in ``kafka/protocol/schemas/resources``. Field names are the JSON names in
snake_case, as ours are, so fields map one to one by name. The differences this
bridge handles, each on purpose:

- **Patched JSON.** A few classes define ``json_patch``, which edits the JSON
  before the class is built: MetadataResponse and DescribeClusterResponse rename
  ``ClusterAuthorizedOperations``/``TopicAuthorizedOperations`` to
  ``authorized_operations``, and those and DescribeGroupsResponse's
  ``AuthorizedOperations`` become type ``bitfield`` (an int32 on the wire,
  a set of bit numbers in Python, ``None`` for INT32_MIN, i.e. bit 31 alone).
  We re-read the unpatched JSON and pair it with the patched one position by
  position, so every kafka-python field knows its original Kafka name and type;
  renames and bitfields are then handled wherever they occur, not by a list.
  The other patches change only construction defaults (CreatePartitionsRequest
  ``assignments``, ListOffsetsRequest ``replica_id``), which do not matter here
  because every field present in the version is passed explicitly.
- **UUIDs.** kafka-python represents the all-zero UUID as ``None`` (its decoder
  returns ``None`` for it, its encoder writes zeros for ``None``).
- **Tagged struct fields.** kafka-python omits a tagged field whose value equals
  the field's default, and the default of a tagged struct is ``None``; Kafka
  (and we) omit a tagged struct equal to a default-constructed struct. A tagged
  struct equal to our default therefore goes over as ``None``, and an absent one
  comes back as our default struct.
- **Records / bytes** decode as ``memoryview`` on both sides; compared as bytes.
- **Decoding** uses the compiled body decoder that ``ApiMessage.decode`` runs
  (``_struct.compiled_decode_from``), because it also returns the end position,
  so we can check every byte was used. This also bypasses
  ``ApiVersionsResponse.decode``'s client-side fallback (decode as v0 whenever
  error_code != 0, mirroring the Java client's handling of UNSUPPORTED_VERSION),
  which is not a property of the v3/v4 body format.
- **Encoding** uses the class's own ``encode(version, header=False,
  framed=False)``, including its overrides: MetadataRequest (v0 writes a null
  topic list as empty; our v0 ``topics`` is never null) and DeleteTopicsRequest
  (copies ``topics`` names into ``topic_names`` for v0-5 when the latter is
  empty; ``topics`` does not exist before v6, so it is always empty there).
  :data:`OVERRIDES` lists every override we know of, so a new one fails the
  test until it is looked at.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from functools import cache

with warnings.catch_warnings():  # building the classes runs load_json, see _original_json
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.schemas import load_json
    from kafka.protocol.schemas.fields.array import ArrayField
    from kafka.protocol.schemas.fields.base import BaseField
    from kafka.protocol.schemas.fields.simple import SimpleField
    from kafka.protocol.schemas.fields.struct import StructField
    from kafka.protocol.schemas.fields.struct_array import StructArrayField

from tests.wire.values import default_of
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema.values import make_value_class

# Methods kafka-python's message classes override, per class; see the module docstring.
OVERRIDES: dict[str, set[str]] = {
    "MetadataRequest": {"encode"},
    "MetadataResponse": {"json_patch"},
    "DescribeClusterResponse": {"json_patch"},
    "DescribeGroupsResponse": {"json_patch"},
    "CreatePartitionsRequest": {"json_patch"},
    "ListOffsetsRequest": {"json_patch"},
    "DeleteTopicsRequest": {"encode"},
    "ApiVersionsResponse": {"decode", "parse_header", "encode_header"},
}
_WATCHED_METHODS = ("encode", "decode", "json_patch", "encode_header", "parse_header", "encode_into")


class SchemaMismatch(AssertionError):
    """kafka-python's fields for a version do not pair up with ours."""


# --- enumerating kafka-python's message classes ------------------------------


@cache
def kp_classes() -> dict[tuple[int, str], type]:
    """Every kafka-python message class, by (api key, "request" | "response")."""
    for module in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        # old/ holds the legacy hand-written Struct classes; generate_stubs is a tool.
        if ".old" in module.name or module.name.endswith("generate_stubs"):
            continue
        with warnings.catch_warnings():  # class creation runs load_json, see _original_json
            warnings.simplefilter("ignore", DeprecationWarning)
            importlib.import_module(module.name)
    found: dict[tuple[int, str], type] = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls._class_version is not None:  # a cls[version] wrapper, not a message class
            continue
        key = (cls.API_KEY, cls.type)
        if key in found and found[key] is not cls:
            raise SchemaMismatch(f"two kafka-python classes for {key}: {found[key]}, {cls}")
        found[key] = cls
    return dict(sorted(found.items()))


def kp_versions(kp_cls) -> range:
    """The versions kafka-python's JSON declares valid.

    kafka-python widens its struct's versions to start at 0 (it lets the broker's
    ApiVersions answer decide), but the JSON it ships is Kafka 4's, from which the
    fields of versions below ``validVersions`` have been removed; only the JSON's
    own range is a faithful description of the wire format.
    """
    low, high = kp_cls._valid_versions
    return range(low, high + 1)


def kp_class(api_key: int, version: int, kind: str):
    """kafka-python's class for (api, version, kind), or None if it lacks it."""
    cls = kp_classes().get((api_key, kind))
    if cls is None or version not in kp_versions(cls):
        return None
    return cls


def unexpected_overrides() -> dict[str, set[str]]:
    """Overridden methods of message classes not accounted for in OVERRIDES."""
    surprises = {}
    for cls in kp_classes().values():
        overridden = {name for name in _WATCHED_METHODS if name in vars(cls)}
        extra = overridden - OVERRIDES.get(cls.__name__, set())
        if extra:
            surprises[cls.__name__] = extra
    return surprises


# --- the unpatched JSON behind each kafka-python field -----------------------


@cache
def _original_json(kp_cls) -> dict[int, dict]:
    """id(kafka-python field) -> that field's JSON before any json_patch."""
    with warnings.catch_warnings():  # load_json uses importlib.resources.read_text, deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        original = load_json(kp_cls.__name__)
    by_field: dict[int, dict] = {}

    def pair(struct, fields_json):
        fields = struct._fields or ()
        if len(fields) != len(fields_json):
            raise SchemaMismatch(f"{kp_cls.__name__}: patched JSON changed the number of fields of {struct.name}")
        for kp_field, field_json in zip(fields, fields_json):
            by_field[id(kp_field)] = field_json
            inner = kp_field.array_of if isinstance(kp_field, StructArrayField) else kp_field
            if isinstance(inner, StructField):
                by_field[id(inner)] = field_json
                pair(inner, field_json["fields"])

    pair(kp_cls._struct, original["fields"])
    return by_field


def _kafka_name(kp_cls, kp_field) -> str:
    return BaseField.underscore_name(_original_json(kp_cls)[id(kp_field)]["name"])


def _is_bitfield(kp_field) -> bool:
    return isinstance(kp_field, SimpleField) and kp_field.type_str == "bitfield"


# --- pairing fields ----------------------------------------------------------


def _kp_present(kp_struct, version: int, flexible: bool):
    """kafka-python's fields that are on the wire at this version."""
    fields = list(kp_struct.untagged_fields(version))
    if flexible:
        fields.extend(kp_struct.tagged_fields(version)._fields)
    return fields


def _our_present(our_cls, version: int, flexible: bool):
    return [
        spec
        for spec in our_cls._spec.fields
        if version in spec.versions and (spec.tag is None or flexible)
    ]


_PAIRS: dict[tuple, tuple] = {}


def _pairs(kp_cls, kp_struct, our_cls, version: int, flexible: bool):
    """[(kafka-python field, our FieldSpec)] for every field present at the version."""
    # kafka-python's fields define __eq__ without __hash__, so key by identity.
    key = (kp_cls, id(kp_struct), our_cls, version, flexible)
    if key not in _PAIRS:
        _PAIRS[key] = _pair_fields(kp_cls, kp_struct, our_cls, version, flexible)
    return _PAIRS[key]


def _pair_fields(kp_cls, kp_struct, our_cls, version, flexible):
    ours = {spec.name: spec for spec in _our_present(our_cls, version, flexible)}
    pairs = []
    for kp_field in _kp_present(kp_struct, version, flexible):
        name = _kafka_name(kp_cls, kp_field)
        spec = ours.pop(name, None)
        if spec is None:
            raise SchemaMismatch(
                f"{our_cls.__name__} v{version}: kafka-python field {name!r} has no counterpart"
                f" among our fields {sorted(s.name for s in _our_present(our_cls, version, flexible))}"
            )
        if (kp_field.tag if kp_field.tagged_field_q(version) else None) != spec.tag:
            raise SchemaMismatch(f"{our_cls.__name__} v{version}: {name!r} tag {kp_field.tag} here, {spec.tag} ours")
        pairs.append((kp_field, spec))
    if ours:
        raise SchemaMismatch(f"{our_cls.__name__} v{version}: our fields {sorted(ours)} are unknown to kafka-python")
    return tuple(pairs)


def _nested_class(spec):
    type_ref = spec.type
    while type_ref.element is not None:
        type_ref = type_ref.element
    return make_value_class(type_ref.struct) if type_ref.struct is not None else None


# --- ours -> kafka-python ----------------------------------------------------


def to_kp(value, kp_cls, version: int, flexible: bool):
    """Our message value as an instance of kafka-python's class kp_cls."""
    return _struct_to_kp(value, kp_cls, kp_cls._struct, kp_cls, version, flexible)


def _struct_to_kp(value, kp_cls, kp_struct, data_class, version, flexible):
    kwargs = {}
    for kp_field, spec in _pairs(kp_cls, kp_struct, type(value), version, flexible):
        field_value = getattr(value, spec.name)
        if (
            kp_field.tagged_field_q(version)
            and isinstance(kp_field, StructField)
            and field_value == default_of(spec)
        ):
            kwargs[kp_field.name] = None  # kafka-python's "absent" for a tagged struct
            continue
        kwargs[kp_field.name] = _field_to_kp(field_value, kp_cls, kp_field, version, flexible)
    return data_class(version=version, **kwargs)


def _field_to_kp(value, kp_cls, kp_field, version, flexible):
    if value is None:
        return None
    if isinstance(kp_field, StructArrayField):
        inner = kp_field.array_of
        return [_struct_to_kp(item, kp_cls, inner, inner.data_class, version, flexible) for item in value]
    if isinstance(kp_field, ArrayField):
        return [_simple_to_kp(item, kp_field.array_of) for item in value]
    if isinstance(kp_field, StructField):
        return _struct_to_kp(value, kp_cls, kp_field, kp_field.data_class, version, flexible)
    return _simple_to_kp(value, kp_field)


def _simple_to_kp(value, kp_field):
    if _is_bitfield(kp_field):
        bits = {bit for bit in range(32) if (value & 0xFFFFFFFF) >> bit & 1}
        return None if bits == {31} else bits
    if kp_field.type_str == "uuid":
        return None if value == ZERO_UUID else value
    if kp_field.type_str in ("bytes", "records") and value is not None:
        return bytes(value)
    return value


# --- kafka-python -> ours ----------------------------------------------------


def from_kp(obj, our_cls, kp_cls, version: int, flexible: bool):
    """kafka-python's decoded message as our value class."""
    return _struct_from_kp(obj, our_cls, kp_cls, kp_cls._struct, version, flexible)


def _struct_from_kp(obj, our_cls, kp_cls, kp_struct, version, flexible):
    kwargs = {}
    for kp_field, spec in _pairs(kp_cls, kp_struct, our_cls, version, flexible):
        # Absent tagged fields are not set on decoded objects; getattr gives the default.
        field_value = getattr(obj, kp_field.name)
        if field_value is None and isinstance(kp_field, StructField) and kp_field.tagged_field_q(version):
            kwargs[spec.name] = default_of(spec)
            continue
        kwargs[spec.name] = _field_from_kp(field_value, spec, kp_cls, kp_field, version, flexible)
    unknown = obj.unknown_tags
    if unknown:
        kwargs["unknown_tags"] = {int(tag.lstrip("_")): bytes(data) for tag, data in unknown.items()}
    return our_cls(**kwargs)


def _field_from_kp(value, spec, kp_cls, kp_field, version, flexible):
    if isinstance(kp_field, StructArrayField):
        if value is None:
            return None
        nested = _nested_class(spec)
        return [_struct_from_kp(item, nested, kp_cls, kp_field.array_of, version, flexible) for item in value]
    if isinstance(kp_field, ArrayField):
        return None if value is None else [_simple_from_kp(item, kp_field.array_of) for item in value]
    if isinstance(kp_field, StructField):
        if value is None:
            return None
        return _struct_from_kp(value, _nested_class(spec), kp_cls, kp_field, version, flexible)
    return _simple_from_kp(value, kp_field)


def _simple_from_kp(value, kp_field):
    if _is_bitfield(kp_field):
        bits = {31} if value is None else value
        raw = sum(1 << bit for bit in bits)
        return raw - (1 << 32) if raw & (1 << 31) else raw
    if kp_field.type_str == "uuid":
        return ZERO_UUID if value is None else value
    if kp_field.type_str in ("bytes", "records") and value is not None:
        return bytes(value)
    return value


# --- the codec itself --------------------------------------------------------


def kp_encode(obj, version: int) -> bytes:
    """The message body alone: no request/response header, no size frame."""
    return bytes(obj.encode(version=version, header=False, framed=False))


def kp_decode(kp_cls, version: int, data: bytes):
    """(decoded object, end position) of a message body, as ApiMessage.decode reads it."""
    flexible = kp_cls.flexible_version_q(version)
    decode = kp_cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=kp_cls[None])
    return decode(memoryview(data), 0)
