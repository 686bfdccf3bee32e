"""Compatibility between two JSON schemas: may every document the writer's schema accepts be read
(accepted) by the reader's? The main rules of Confluent's registry for JSON Schema, by name:

- TYPE_NARROWED: the reader accepts fewer types than the writer (``integer`` reads as ``number``);
- REQUIRED_PROPERTY_ADDED: the reader requires a property the writer did not;
- PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL: the reader constrains a property that the writer's open model
  (``additionalProperties`` not false) let through with any value;
- PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL: the writer's property is not allowed by the reader's
  closed model;
- ADDITIONAL_PROPERTIES_NARROWED: the writer's model is open and the reader's closed;
- ENUM_ARRAY_NARROWED: the reader's ``enum`` lacks a value of the writer's;
- MAX_LENGTH_DECREASED, MIN_LENGTH_INCREASED, MAXIMUM_DECREASED, MINIMUM_INCREASED, MAX_ITEMS_DECREASED,
  MIN_ITEMS_INCREASED: a bound the reader tightened.

Properties and array items are compared the same way, recursively. Keywords beyond these (patterns,
combinations, ``$ref``) are not compared.
"""

from __future__ import annotations

_UPPER_BOUNDS = {"maxLength": "MAX_LENGTH_DECREASED", "maximum": "MAXIMUM_DECREASED",
                 "maxItems": "MAX_ITEMS_DECREASED"}
_LOWER_BOUNDS = {"minLength": "MIN_LENGTH_INCREASED", "minimum": "MINIMUM_INCREASED",
                 "minItems": "MIN_ITEMS_INCREASED"}


def incompatibilities(reader, writer, path: str = "#") -> list[str]:
    """Why documents valid under ``writer`` may be refused by ``reader``; [] if none."""
    if reader is True or reader == {}:
        return []
    if writer is False:
        return []
    if reader is False or writer is True:
        return [f"TYPE_NARROWED at {path}: the reader accepts less than everything"]
    problems = []
    problems += _types(reader, writer, path)
    problems += _enum(reader, writer, path)
    problems += _bounds(reader, writer, path)
    problems += _properties(reader, writer, path)
    if isinstance(reader.get("items"), dict | bool) and isinstance(writer.get("items"), dict | bool):
        problems += incompatibilities(reader["items"], writer["items"], f"{path}/items")
    return problems


def _type_set(schema) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _types(reader, writer, path: str) -> list[str]:
    read, written = _type_set(reader), _type_set(writer)
    if read is None:
        return []
    if written is None:
        return [f"TYPE_NARROWED at {path}: the reader accepts only {sorted(read)}"]
    if "number" in read:
        read = read | {"integer"}
    lost = written - read
    return [f"TYPE_NARROWED at {path}: {sorted(lost)} no longer accepted"] if lost else []


def _enum(reader, writer, path: str) -> list[str]:
    if "enum" not in reader:
        return []
    if "enum" not in writer:
        return [f"ENUM_ARRAY_NARROWED at {path}: the reader takes only {reader['enum']}"]
    lost = [value for value in writer["enum"] if value not in reader["enum"]]
    return [f"ENUM_ARRAY_NARROWED at {path}: {lost} no longer accepted"] if lost else []


def _bounds(reader, writer, path: str) -> list[str]:
    problems = []
    for keyword, name in _UPPER_BOUNDS.items():
        if keyword in reader and (keyword not in writer or writer[keyword] > reader[keyword]):
            problems.append(f"{name} at {path}: {keyword} {writer.get(keyword)} -> {reader[keyword]}")
    for keyword, name in _LOWER_BOUNDS.items():
        if keyword in reader and (keyword not in writer or writer[keyword] < reader[keyword]):
            problems.append(f"{name} at {path}: {keyword} {writer.get(keyword)} -> {reader[keyword]}")
    return problems


def _open(schema) -> bool:
    return schema.get("additionalProperties", True) is not False


def _properties(reader, writer, path: str) -> list[str]:
    problems = []
    required = set(reader.get("required", ())) - set(writer.get("required", ()))
    if required:
        problems.append(f"REQUIRED_PROPERTY_ADDED at {path}: {sorted(required)}")
    if _open(writer) and not _open(reader):
        problems.append(f"ADDITIONAL_PROPERTIES_NARROWED at {path}")
    read, written = reader.get("properties", {}), writer.get("properties", {})
    for name, schema in read.items():
        where = f"{path}/properties/{name}"
        if name in written:
            problems += incompatibilities(schema, written[name], where)
        elif _open(writer) and schema not in (True, {}):
            problems.append(f"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at {where}")
    for name in written:
        if name not in read and not _open(reader):
            problems.append(f"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at {path}/properties/{name}")
    return problems
