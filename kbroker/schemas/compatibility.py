"""May a new schema follow a subject's earlier ones? Confluent's compatibility levels over the schemas
kbroker/schemas/types.py parses.

BACKWARD (the default): a reader of the new schema reads what the earlier one wrote; FORWARD: a
reader of the earlier schema reads what the new one writes; FULL: both. A plain level compares with
the latest version only, a ``_TRANSITIVE`` one with every version; NONE compares nothing.

- AVRO: the Avro specification's schema resolution, as ``avro.compatibility`` decides it (promotions
  int->long->float->double and string<->bytes, added fields needing defaults, enum symbols and enum
  defaults, unions, names and aliases, fixed sizes, arrays, maps, nested records).
- JSON: the main rules of Confluent's for JSON Schema, by their names (kbroker/schemas/json_rules.py).
- PROTOBUF: Confluent's rules, by their names (kbroker/schemas/protobuf.py): messages matched by
  name, fields by number; a changed package, a removed message, a field's kind or scalar group or
  message type changed, required fields added or removed, fields moved into or out of oneofs.
"""

from __future__ import annotations

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


def check(level: str, new, previous: list) -> list[str]:
    """Why ``new`` may not follow ``previous`` (a subject's versions, oldest first) at ``level``; [] if it may."""
    if level not in LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}")
    if level == "NONE":
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    backward, forward = level.startswith(("BACKWARD", "FULL")), level.startswith(("FORWARD", "FULL"))
    problems = []
    for old in against:
        if old.schema_type != new.schema_type:
            problems.append(f"the schema type changed from {old.schema_type} to {new.schema_type}")
            continue
        if backward:
            problems += incompatibilities(reader=new, writer=old)
        if forward:
            problems += incompatibilities(reader=old, writer=new)
    return list(dict.fromkeys(problems))


def incompatibilities(reader, writer) -> list[str]:
    """Why a reader of ``reader``'s schema may fail on data written with ``writer``'s; [] if it cannot."""
    if reader.schema_type == "AVRO":
        return _avro(reader.parsed, writer.parsed)
    if reader.schema_type == "JSON":
        from kbroker.schemas.json_rules import incompatibilities as json_incompatibilities

        return json_incompatibilities(reader.parsed, writer.parsed)
    from kbroker.schemas.protobuf import incompatibilities as protobuf_incompatibilities

    return protobuf_incompatibilities(original=writer.parsed, update=reader.parsed)


def _avro(reader, writer) -> list[str]:
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    return [f"{kind.name.upper()}: {', '.join(sorted(map(str, result.messages)))} at "
            f"{', '.join(sorted(result.locations))}" for kind in result.incompatibilities]
