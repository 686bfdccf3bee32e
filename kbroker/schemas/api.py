"""The schema registry's REST API, Confluent's: the same paths, bodies, query parameters, error codes
and messages, so its clients and serializers work unchanged.

A Starlette application over a ``SchemaStore`` (kbroker/schemas/store.py), served by the broker's HTTP
stack (kbroker/http/). Reads are answered from this node's copy; writes by the writer, this node or
the one it passes the request on to (``forward``). Every refusal is Confluent's body,
``{"error_code": ..., "message": ...}``, with the status its code begins with; bodies are bounded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

from kbroker.schemas.records import AVRO, Reference, RecordError, SchemaVersion
from kbroker.schemas.registry import INVALID_SCHEMA, Registry, RegistryError, version_label
from kbroker.schemas.store import FORWARDING_FAILED, UNKNOWN_LEADER, NotWriter, SchemaStore

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 4 << 20  # a schema and its request, at most (Confluent's default is 1 MiB of JSON per schema)
SCHEMA_TOO_LARGE = 42209
SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")
FORWARDED_HEADER = "x-kbroker-forwarded"  # a request passed on once is not passed on again

# forward(leader node id, method, path with query, body) -> (status, body bytes)
Forward = Callable[[int, str, str, bytes], Awaitable[tuple[int, bytes]]]


class BadRequest(Exception):
    """The request itself is wrong (not JSON, a field of the wrong type): HTTP 400 or 422."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def application(store: SchemaStore, parse, forward: Forward):
    """The Starlette app. ``parse(schema_type, text, references, resolve, normalize)`` parses a
    schema (kbroker/schemas/types.py); ``forward`` passes a write on to the writer."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    def answer(value, status: int = 200) -> Response:
        return Response(json.dumps(value), status_code=status, media_type=CONTENT_TYPE)

    def refusal(error_code: int, message: str) -> Response:
        status = error_code if error_code < 1000 else error_code // 100
        return answer({"error_code": error_code, "message": message}, status)

    def flag(request, name: str) -> bool:
        return request.query_params.get(name, "false").lower() == "true"

    async def body_of(request) -> dict:
        size = 0
        chunks = []
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise BadRequest(SCHEMA_TOO_LARGE, f"The request body is larger than {MAX_BODY_BYTES} bytes")
            chunks.append(chunk)
        request.state.raw = b"".join(chunks)  # passed on as it came, where this node is not the writer
        try:
            body = json.loads(request.state.raw or b"{}")
        except (ValueError, UnicodeDecodeError) as error:
            raise BadRequest(400, f"Unrecognized JSON in the request body: {error}") from None
        if not isinstance(body, dict):
            raise BadRequest(400, "The request body must be a JSON object")
        return body

    def resolver(registry: Registry):
        def resolve(reference: Reference) -> SchemaVersion:
            try:
                return registry.version(reference.subject, reference.version)
            except RegistryError as error:
                raise RegistryError(INVALID_SCHEMA, f"Invalid schema: reference {reference.name} to "
                                    f"{reference.subject} version {reference.version}: {error.message}") from None
        return resolve

    def schema_of(body: dict, registry: Registry, normalize: bool):
        text, schema_type = body.get("schema"), body.get("schemaType") or AVRO
        if not isinstance(text, str):
            raise RegistryError(INVALID_SCHEMA, "Invalid schema: the request names no schema")
        if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
            raise RegistryError(INVALID_SCHEMA, f"Invalid schema type {schema_type!r}: one of {', '.join(SCHEMA_TYPES)}")
        try:
            references = tuple(Reference.from_json(reference) for reference in body.get("references") or ())
        except RecordError as error:
            raise RegistryError(INVALID_SCHEMA, f"Invalid schema: {error}") from None
        parsed = parse(schema_type.upper(), text, references, resolver(registry), normalize)
        return parsed, references

    def stored(registry: Registry, normalize: bool = False):
        def parse_stored(entry: SchemaVersion):
            return parse(entry.schema_type, entry.schema, entry.references, resolver(registry), normalize)
        return parse_stored

    def text_of(request, registry: Registry, entry: SchemaVersion) -> str:
        """The schema's text in the ``format`` the request asks for (``serialized``: a Protobuf descriptor)."""
        schema_format = request.query_params.get("format")
        if not schema_format:
            return entry.schema
        return stored(registry)(entry).formatted(schema_format)

    def shown(entry: SchemaVersion, *fields: str, text: str | None = None) -> dict:
        value = {"subject": entry.subject, "version": entry.version, "id": entry.id}
        value = {name: value[name] for name in fields}
        if entry.schema_type != AVRO:
            value["schemaType"] = entry.schema_type
        if entry.references:
            value["references"] = [reference.to_json() for reference in entry.references]
        value["schema"] = entry.schema if text is None else text
        return value

    def endpoint(method: Callable) -> Callable:
        """Errors as Confluent's bodies; writes passed on to the writer where this node is not it."""
        async def run(request) -> Response:
            try:
                return await method(request)
            except RegistryError as error:
                return refusal(error.error_code, error.message)
            except BadRequest as error:
                return refusal(error.error_code, str(error))
            except NotWriter as error:
                return await pass_on(request, error.leader)
        return run

    async def pass_on(request, leader: int) -> Response:
        if leader < 0 or FORWARDED_HEADER in request.headers:
            return refusal(UNKNOWN_LEADER, "Unknown leader of the schema registry's topic; try again")
        body = getattr(request.state, "raw", b"")
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            status, content = await forward(leader, request.method, path, body)
        except OSError as error:
            return refusal(FORWARDING_FAILED, f"Error while forwarding the request to the leader (node {leader}): "
                                              f"{error}")
        return Response(content, status_code=status, media_type=CONTENT_TYPE)

    # -- schemas --------------------------------------------------------------------------------

    async def root(request):
        return answer({})

    async def schema_types(request):
        return answer(list(SCHEMA_TYPES))

    def schema_id(request) -> int:
        try:
            return int(request.path_params["id"])
        except ValueError:
            raise RegistryError(40403, f"Schema {request.path_params['id']} not found") from None

    async def by_id(request):
        registry = await store.catch_up()
        entry = registry.by_id(schema_id(request), request.query_params.get("subject"))
        return answer(shown(entry, text=text_of(request, registry, entry)))

    async def raw_by_id(request):
        registry = await store.catch_up()
        entry = registry.by_id(schema_id(request), request.query_params.get("subject"))
        return Response(text_of(request, registry, entry), media_type=CONTENT_TYPE)

    async def id_subjects(request):
        registry = await store.catch_up()
        held = registry.holders(schema_id(request), flag(request, "deleted"))
        return answer(sorted({entry.subject for entry in held}))

    async def id_versions(request):
        registry = await store.catch_up()
        held = registry.holders(schema_id(request), flag(request, "deleted"))
        return answer([{"subject": entry.subject, "version": entry.version} for entry in held])

    async def schemas(request):
        registry = await store.catch_up()
        deleted, latest_only = flag(request, "deleted"), flag(request, "latestOnly")
        listed = []
        for subject in registry.subject_names(request.query_params.get("subjectPrefix", ""), deleted):
            versions = registry.versions(subject, deleted)
            listed += [shown(entry, "subject", "version", "id") for entry in (versions[-1:] if latest_only else versions)]
        return answer(listed)

    # -- subjects -------------------------------------------------------------------------------

    async def subjects(request):
        registry = await store.catch_up()
        return answer(registry.subject_names(request.query_params.get("subjectPrefix", ""), flag(request, "deleted")))

    async def versions(request):
        registry = await store.catch_up()
        return answer([entry.version for entry in registry.versions(request.path_params["subject"],
                                                                    flag(request, "deleted"))])

    async def version(request):
        registry = await store.catch_up()
        entry = registry.version(request.path_params["subject"], request.path_params["version"], flag(request, "deleted"))
        return answer(shown(entry, "subject", "version", "id", text=text_of(request, registry, entry)))

    async def raw_version(request):
        registry = await store.catch_up()
        entry = registry.version(request.path_params["subject"], request.path_params["version"], flag(request, "deleted"))
        return Response(text_of(request, registry, entry), media_type=CONTENT_TYPE)

    async def referenced_by(request):
        registry = await store.catch_up()
        return answer(registry.referenced_by(request.path_params["subject"], request.path_params["version"]))

    async def register(request):
        body = await body_of(request)
        subject, normalize = request.path_params["subject"], flag(request, "normalize")
        explicit_id, explicit_version = body.get("id"), body.get("version")
        for value in (explicit_id, explicit_version):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise BadRequest(422, "id and version are numbers")

        def decide(registry: Registry):
            parsed, references = schema_of(body, registry, normalize)
            entry, written = registry.register(subject, parsed, references, stored(registry, normalize),
                                               explicit_id or None, explicit_version or None)
            return entry, written

        entry = await store.write(decide)
        return answer({"id": entry.id})

    async def lookup(request):
        body = await body_of(request)
        registry = await store.catch_up()
        subject = request.path_params["subject"]
        registry.versions(subject, deleted=True)  # 40401 first, as Confluent answers
        parsed, references = schema_of(body, registry, flag(request, "normalize"))
        entry = registry.lookup(subject, parsed, references, flag(request, "deleted"))
        return answer(shown(entry, "subject", "version", "id"))

    async def delete_subject(request):
        subject, permanent = request.path_params["subject"], flag(request, "permanent")
        return answer(await store.write(lambda registry: registry.delete_subject(subject, permanent)))

    async def delete_version(request):
        subject, permanent = request.path_params["subject"], flag(request, "permanent")
        number = request.path_params["version"]
        return answer(await store.write(lambda registry: registry.delete_version(subject, number, permanent)))

    # -- compatibility ------------------------------------------------------------------------------

    async def compatibility(request):
        body = await body_of(request)
        registry = await store.catch_up()
        subject = request.path_params["subject"]
        parsed, _ = schema_of(body, registry, flag(request, "normalize"))
        label = request.path_params.get("version")
        try:
            if label is None:  # against what the level compares with
                live = registry.versions(subject)
                level = registry.level(subject)
                against = live if level.endswith("_TRANSITIVE") else live[-1:]
            else:
                version_label(label)
                against = [registry.version(subject, label)]
                level = registry.level(subject)
        except RegistryError as error:
            if error.error_code == 40401 and label is None:
                against, level = [], registry.level(subject)  # nothing to be compatible with
            else:
                raise
        if label is not None:
            level = level.removesuffix("_TRANSITIVE")
        problems = registry.problems(subject, parsed, [stored(registry)(entry) for entry in against], level)
        value = {"is_compatible": not problems}
        if flag(request, "verbose"):
            value["messages"] = problems
        return answer(value)

    # -- config and mode ----------------------------------------------------------------------------

    async def own_setting(request, settings: dict, error_code: int, what: str) -> str | None:
        """The subject in the path (None: the global setting), refused where it has no setting of its own
        unless defaultToGlobal asks for the one that applies."""
        subject = request.path_params.get("subject")
        if subject is not None and subject not in settings and not flag(request, "defaultToGlobal"):
            raise RegistryError(error_code, f"Subject '{subject}' does not have subject-level {what} configured")
        return subject

    async def get_config(request):
        registry = await store.catch_up()
        subject = await own_setting(request, registry.configs, 40408, "compatibility")
        return answer({"compatibilityLevel": registry.level(subject)})

    async def put_config(request):
        body = await body_of(request)
        subject = request.path_params.get("subject")
        level = await store.write(lambda registry: registry.set_level(subject, body.get("compatibility")))
        return answer({"compatibility": level})

    async def delete_config(request):
        subject = request.path_params.get("subject")
        return answer({"compatibilityLevel": await store.write(lambda registry: registry.delete_level(subject))})

    async def get_mode(request):
        registry = await store.catch_up()
        subject = await own_setting(request, registry.modes, 40409, "mode")
        return answer({"mode": registry.mode(subject)})

    async def put_mode(request):
        body = await body_of(request)
        subject, force = request.path_params.get("subject"), flag(request, "force")
        return answer({"mode": await store.write(lambda registry: registry.set_mode(subject, body.get("mode"), force))})

    async def delete_mode(request):
        subject = request.path_params["subject"]
        return answer({"mode": await store.write(lambda registry: registry.delete_mode(subject))})

    routes = [
        Route("/", endpoint(root)),
        Route("/schemas", endpoint(schemas)),
        Route("/schemas/types", endpoint(schema_types)),
        Route("/schemas/ids/{id}", endpoint(by_id)),
        Route("/schemas/ids/{id}/schema", endpoint(raw_by_id)),
        Route("/schemas/ids/{id}/subjects", endpoint(id_subjects)),
        Route("/schemas/ids/{id}/versions", endpoint(id_versions)),
        Route("/subjects", endpoint(subjects)),
        # A subject may hold "/" (a Protobuf reference's subject is its import path, sent as %2F, which
        # arrives decoded): the longest routes first, each subject matched as a path.
        Route("/subjects/{subject:path}/versions/{version}/schema", endpoint(raw_version)),
        Route("/subjects/{subject:path}/versions/{version}/referencedby", endpoint(referenced_by)),
        Route("/subjects/{subject:path}/versions/{version}", endpoint(version), methods=["GET"]),
        Route("/subjects/{subject:path}/versions/{version}", endpoint(delete_version), methods=["DELETE"]),
        Route("/subjects/{subject:path}/versions", endpoint(versions), methods=["GET"]),
        Route("/subjects/{subject:path}/versions", endpoint(register), methods=["POST"]),
        Route("/subjects/{subject:path}", endpoint(lookup), methods=["POST"]),
        Route("/subjects/{subject:path}", endpoint(delete_subject), methods=["DELETE"]),
        Route("/compatibility/subjects/{subject:path}/versions", endpoint(compatibility), methods=["POST"]),
        Route("/compatibility/subjects/{subject:path}/versions/{version}", endpoint(compatibility), methods=["POST"]),
        Route("/config", endpoint(get_config), methods=["GET"]),
        Route("/config", endpoint(put_config), methods=["PUT"]),
        Route("/config", endpoint(delete_config), methods=["DELETE"]),
        Route("/config/{subject:path}", endpoint(get_config), methods=["GET"]),
        Route("/config/{subject:path}", endpoint(put_config), methods=["PUT"]),
        Route("/config/{subject:path}", endpoint(delete_config), methods=["DELETE"]),
        Route("/mode", endpoint(get_mode), methods=["GET"]),
        Route("/mode", endpoint(put_mode), methods=["PUT"]),
        Route("/mode/{subject:path}", endpoint(get_mode), methods=["GET"]),
        Route("/mode/{subject:path}", endpoint(put_mode), methods=["PUT"]),
        Route("/mode/{subject:path}", endpoint(delete_mode), methods=["DELETE"]),
    ]

    async def not_found(request, exc):
        return refusal(404, "HTTP 404 Not Found")

    async def not_allowed(request, exc):
        return refusal(405, "HTTP 405 Method Not Allowed")

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
