"""The console's routes on the broker's HTTP application (kbroker/http/endpoints.py).

Reading pages (GET) show the broker's own state (views.py) or what its Kafka listener answers the user
(kafka.py, messages.py, the admin commands' group code); changing ones (POST, with the session's CSRF
token) send the Kafka request that makes the change, as the user, and redirect to a page that says what
happened (the broker's refusal included, by its Kafka error name).

    GET  /                                 overview: nodes, quorum, throughput, disks
    GET  /topics?q=                        topics whose name contains q
    POST /topics                           create one
    GET  /topics/{topic}                   partitions and configs
    POST /topics/{topic}/configs|produce|delete
    GET  /topics/{topic}/messages?partition=&order=newest|oldest&offset=&timestamp=&key=&contains=&format=&limit=
    GET  /groups, /groups/{group}
    POST /groups/{group}/reset-offsets     a dry run; with execute=1, the reset
    GET  /api/rates, /api/lag/{group}      the charts' samples, as JSON
    GET  /login, POST /login, POST /logout where the broker authenticates its clients
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime
from importlib import resources
from urllib.parse import parse_qsl, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from kbroker.http.console import pages, views
from kbroker.http.console.access import COOKIE, Session, Sessions, Viewer, csrf_matches
from kbroker.http.console.kafka import UserClient, choose_listener
from kbroker.http.console.messages import Wanted, produce, read_page
from kbroker.http.console.schemas import Decoder, difference, pretty, schema_id
from kbroker.security.acls import AclOperation, ResourceType
from kbroker.security.authorization import allowed
from kbroker.tools import groups as group_tools
from kbroker.tools import share_groups
from kbroker.tools.admin import alter_topic_configs, create_topic, delete_topic, describe_quorum
from kbroker.tools.client import CommandFailed, KafkaError

logger = logging.getLogger("kbroker.console")
TOPICS_SHOWN = 1000  # rows of the topics page; a search narrows it
_LOGIN_COOKIE = "kbroker_login"  # the sign-in form's own CSRF token, before there is a session
_STATIC = {name: (resources.files(__package__).joinpath("static", name).read_bytes(), kind)
           for name, kind in (("console.css", "text/css"), ("console.js", "text/javascript"))}
_FAILURES = (KafkaError, CommandFailed, OSError)  # what the broker or the connection to it refused


class Console:
    def __init__(self, node) -> None:
        self.node = node
        self.history = node.history
        self.decoder = Decoder()
        self._sessions: Sessions | None = None

    @property
    def sessions(self) -> Sessions:
        """Made on first use: the listener is bound, and the broker serving, by then."""
        if self._sessions is None:
            node = self.node
            listeners = [(listener.host, node.ports[listener.name], listener.security_protocol,
                          server.security.mechanisms) for listener, server in zip(node.settings.listeners, node.servers)]
            self._sessions = Sessions(choose_listener(listeners))
        return self._sessions

    def routes(self) -> list[Route]:
        page, change = self._page, self._change
        return [
            Route("/", page(self.overview)), Route("/topics", page(self.topics)),
            Route("/topics", change(self.create_topic), methods=["POST"]),
            Route("/topics/{topic:path}/messages", page(self.messages)),
            Route("/topics/{topic:path}/configs", change(self.alter_configs), methods=["POST"]),
            Route("/topics/{topic:path}/produce", change(self.produce), methods=["POST"]),
            Route("/topics/{topic:path}/delete", change(self.delete_topic), methods=["POST"]),
            Route("/topics/{topic:path}", page(self.topic)),
            Route("/groups", page(self.groups)), Route("/groups/{group:path}/reset-offsets",
                                                       change(self.reset_offsets), methods=["POST"]),
            Route("/groups/{group:path}", page(self.group)),
            Route("/schemas", page(self.schemas)), Route("/schemas/{subject:path}", page(self.subject)),
            Route("/api/rates", page(self.rates)), Route("/api/lag/{group:path}", page(self.lag)),
            Route("/login", self._serving(self.login_page)),
            Route("/login", self._serving(self.log_in), methods=["POST"]),
            Route("/logout", self._serving(self.log_out), methods=["POST"]),
            Route("/static/{name}", self.static),
        ]

    # -- sessions ----------------------------------------------------------------------------------------------

    def _serving(self, endpoint):
        """A route answering 503 until every client listener is open: the console logs in on one."""
        async def guarded(request: Request) -> Response:
            node = self.node
            if all(listener.name in node.ports for listener in node.settings.listeners):
                return await endpoint(request)
            return HTMLResponse(pages.layout("Starting", f"<p>{pages.e(node.readiness()[1])}: reload in a moment."
                                             "</p>", active="", principal=None), status_code=503)
        return guarded

    def _page(self, handler):
        """A reading route: its session found, or made for a broker that authenticates no one."""
        async def endpoint(request: Request) -> Response:
            session, new = self._session(request)
            if session is None:
                return RedirectResponse("/login?" + _query(next=request.url.path), status_code=303)
            try:
                response = await handler(request, session, Viewer(session.principal, _host(request)))
            except Exception as failure:  # a bug or a torn answer: one line in the log and on the page
                return _failed(request, failure)
            return _with_cookie(response, new)
        return self._serving(endpoint)

    def _change(self, handler):
        """A changing route: a POST with the session's CSRF token, else 403."""
        async def endpoint(request: Request) -> Response:
            fields = await _form(request)
            token = request.cookies.get(COOKIE)
            session = self.sessions.find(token)
            if session is None or not csrf_matches(session, fields.get("csrf")):
                return HTMLResponse(pages.layout("Refused", "<p>The request did not come from this console's page "
                                                 "(no session or no CSRF token): reload the page and try again.</p>",
                                                 active="", principal=None), status_code=403)
            try:
                return await handler(request, session, Viewer(session.principal, _host(request)), fields)
            except Exception as failure:
                return _failed(request, failure)
        return self._serving(endpoint)

    def _session(self, request: Request) -> tuple[Session | None, str | None]:
        sessions = self.sessions
        session = sessions.find(request.cookies.get(COOKIE))
        if session is not None or sessions.listener.needs_login:
            return session, None
        token = sessions.anonymous()
        return sessions.find(token), token

    def _render(self, session: Session, title: str, body: str, active: str, status: int = 200) -> HTMLResponse:
        flash, failed = session.flash or ("", False)
        session.flash = None
        return HTMLResponse(pages.layout(title, body, active=active, principal=session.principal, csrf=session.csrf,
                                         flash=flash, failed=failed, login_out=self.sessions.listener.needs_login),
                            status_code=status)

    async def login_page(self, request: Request) -> Response:
        listener = self.sessions.listener
        if not listener.needs_login:
            return RedirectResponse("/", status_code=303)
        token = secrets.token_urlsafe(24)
        error, then = request.query_params.get("error", ""), _safe_next(request.query_params.get("next"))
        response = HTMLResponse(pages.layout("Sign in", pages.login(error, token, listener.mechanism, then),
                                             active="", principal=None, csrf=token), status_code=401 if error else 200)
        response.set_cookie(_LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/login")
        return response

    async def log_in(self, request: Request) -> Response:
        fields = await _form(request)
        expected = request.cookies.get(_LOGIN_COOKIE)
        then = _safe_next(request.query_params.get("next"))
        if not expected or not secrets.compare_digest(expected, fields.get("csrf", "")):
            return RedirectResponse("/login?" + _query(error="The form expired: sign in again.", next=then),
                                    status_code=303)
        sessions, username = self.sessions, fields.get("username", "")
        client = UserClient(sessions.listener, sessions.listener.security(username, fields.get("password", "")))
        try:
            await client.run(lambda kafka: kafka.metadata([]))
        except (*_FAILURES, ConnectionError) as failure:
            client.close()
            return RedirectResponse("/login?" + _query(error=f"Not signed in: {failure}", next=then), status_code=303)
        response = RedirectResponse(then, status_code=303)
        return _with_cookie(response, sessions.open("User:" + username, client))

    async def log_out(self, request: Request) -> Response:
        fields = await _form(request)
        session = self.sessions.find(request.cookies.get(COOKIE))
        if session is not None and csrf_matches(session, fields.get("csrf")):
            self.sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    async def static(self, request: Request) -> Response:
        found = _STATIC.get(request.path_params["name"])
        if found is None:
            return Response("not found\n", status_code=404, media_type="text/plain")
        return Response(found[0], media_type=found[1], headers={"Cache-Control": "max-age=3600"})

    # -- reading pages ---------------------------------------------------------------------------------------

    async def overview(self, request: Request, session: Session, viewer: Viewer) -> Response:
        node = self.node
        quorum, quorum_error = None, ""
        try:
            quorum, refused = await session.client.run(describe_quorum)
            quorum_error = str(refused or "")
        except _FAILURES as failure:
            quorum_error = str(failure)
        body = pages.overview(node.image.cluster_id, node.readiness(), views.counts(node, viewer), views.nodes(node),
                              node.node_id, quorum, quorum_error, views.disks(node, viewer))
        return self._render(session, "Overview", body, "overview")

    async def topics(self, request: Request, session: Session, viewer: Viewer) -> Response:
        query = request.query_params.get("q", "")
        rows = views.topics(self.node, viewer, query)
        body = pages.topics(rows, query, self.history.topic_rates, session.csrf, TOPICS_SHOWN)
        return self._render(session, "Topics", body, "topics")

    async def topic(self, request: Request, session: Session, viewer: Viewer) -> Response:
        name = request.path_params["topic"]
        found = views.topic(self.node, viewer, name)
        if found is None:
            return self._render(session, name, _unknown_topic(name), "topics", 404)
        body = pages.topic(name, found.topic_id, views.partition_rows(self.node, found), found.configs, session.csrf)
        return self._render(session, name, body, "topics")

    async def messages(self, request: Request, session: Session, viewer: Viewer) -> Response:
        name = request.path_params["topic"]
        found = views.topic(self.node, viewer, name)
        if found is None:
            return self._render(session, name, _unknown_topic(name), "topics", 404)
        query = request.query_params
        error, page = "", None
        try:
            wanted = _wanted(query, len(found.partitions))
        except ValueError as bad:
            wanted, error = Wanted(), str(bad)
        if not error:
            try:
                page = await session.client.run(lambda kafka: read_page(kafka, name, wanted))
            except _FAILURES as failure:
                error = str(failure)
        form_name = query.get("format", "text")
        decoded = {}
        if page is not None and form_name != "hex" and any(schema_id(m.value) is not None for m in page.messages):
            registry = await self.node.schemas().catch_up_if_held()
            decoded = {m.offset: self.decoder.decoded(m.value, registry) for m in page.messages}
        body = pages.messages(name, len(found.partitions), wanted, form_name, page, error, query.get("timestamp", ""),
                              {offset: found for offset, found in decoded.items() if found is not None})
        return self._render(session, f"Messages of {name}", body, "topics")

    async def groups(self, request: Request, session: Session, viewer: Viewer) -> Response:
        listed, error = [], ""
        try:
            listed = await session.client.run(group_tools.listed_groups)
        except _FAILURES as failure:
            error = str(failure)
        return self._render(session, "Consumer groups", pages.groups(listed, error), "groups")

    async def group(self, request: Request, session: Session, viewer: Viewer, *, plan=None, reset=None) -> Response:
        group_id = request.path_params["group"]
        try:
            described, rows, share_rows = await session.client.run(lambda kafka: _group(kafka, group_id))
        except _FAILURES as failure:
            return self._render(session, group_id, f'<p class="error" id="error">{pages.e(failure)}</p>', "groups")
        if described.state == group_tools.DEAD:
            return self._render(session, group_id, f'<p class="error" id="error">Group {pages.e(group_id)} does not '
                                'exist.</p>', "groups", 404)
        kind = f"{described.kind} group"
        topics = sorted({row[1] for row in rows} | {row[1] for row in (share_rows or [])[1:]})
        body = pages.group(group_id, described.state, kind, described.members, rows, share_rows, topics,
                           session.csrf, plan, reset or {})
        return self._render(session, group_id, body, "groups")

    async def schemas(self, request: Request, session: Session, viewer: Viewer) -> Response:
        registry = await self.node.schemas().catch_up_if_held()
        subjects = [registry.versions(subject) for subject in registry.subject_names()]
        return self._render(session, "Schemas", pages.schemas([versions for versions in subjects if versions]),
                            "schemas")

    async def subject(self, request: Request, session: Session, viewer: Viewer) -> Response:
        subject = request.path_params["subject"]
        versions = (await self.node.schemas().catch_up_if_held()).versions(subject)
        if not versions:
            return self._render(session, subject, f'<p class="error" id="error">Subject {pages.e(subject)} does not '
                                'exist.</p>', "schemas", 404)
        by_number = {version.version: version for version in versions}
        try:
            shown = by_number.get(_number(request.query_params.get("version"), "version", versions[-1].version))
            compare = by_number.get(_number(request.query_params.get("compare"), "compare", -1) if
                                    request.query_params.get("compare") else None)
        except ValueError:
            shown, compare = None, None
        if shown is None:
            shown = versions[-1]
        lines = difference(compare, shown) if compare is not None else []
        body = pages.subject(subject, versions, shown, pretty(shown), compare, lines)
        return self._render(session, subject, body, "schemas")

    async def rates(self, request: Request, session: Session, viewer: Viewer) -> Response:
        return JSONResponse({"series": ["in", "out"], "points": list(self.history.rates)})

    async def lag(self, request: Request, session: Session, viewer: Viewer) -> Response:
        group_id = request.path_params["group"]
        if not allowed(self.node, viewer, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return JSONResponse({"series": ["lag"], "points": []}, status_code=403)
        return JSONResponse({"series": ["lag"], "points": list(self.history.lag.get(group_id, ()))})

    # -- changes ---------------------------------------------------------------------------------------------

    async def _act(self, session: Session, action, done: str, after: str, failed_at: str) -> Response:
        """Run ``action(client)``; back to ``after`` saying ``done``, or to ``failed_at`` with the refusal."""
        try:
            await session.client.run(action)
        except _FAILURES as failure:
            session.flash = (f"Refused: {failure}", True)
            return RedirectResponse(failed_at, status_code=303)
        session.flash = (done, False)
        return RedirectResponse(after, status_code=303)

    async def create_topic(self, request, session, viewer, fields) -> Response:
        name = fields.get("name", "").strip()
        try:
            partitions = int(fields.get("partitions") or -1)
            factor = int(fields.get("replication_factor") or -1)
            configs = _pairs(fields.get("configs", ""))
        except ValueError as bad:
            session.flash = (f"Refused: {bad}", True)
            return RedirectResponse("/topics", status_code=303)
        return await self._act(session, lambda kafka: create_topic(kafka, name, partitions, factor, configs),
                               f"Created topic {name}.", pages.url("/topics/" + name), "/topics")

    async def alter_configs(self, request, session, viewer, fields) -> Response:
        name = request.path_params["topic"]
        try:
            changes = [(key, value or None) for key, value in _pairs(fields.get("configs", ""))]
        except ValueError as bad:
            session.flash = (f"Refused: {bad}", True)
            return RedirectResponse(pages.url("/topics/" + name), status_code=303)
        return await self._act(session, lambda kafka: alter_topic_configs(kafka, name, changes),
                               f"Changed configs of {name}.", pages.url("/topics/" + name),
                               pages.url("/topics/" + name))

    async def delete_topic(self, request, session, viewer, fields) -> Response:
        name = request.path_params["topic"]
        return await self._act(session, lambda kafka: delete_topic(kafka, name), f"Deleted topic {name}.",
                               "/topics", pages.url("/topics/" + name))

    async def produce(self, request, session, viewer, fields) -> Response:
        name = request.path_params["topic"]
        here = pages.url("/topics/" + name)
        try:
            partition = int(fields["partition"]) if fields.get("partition", "").strip() else None
            headers = [(key.strip(), value.strip().encode()) for key, value in
                       (_split(line, ":") for line in fields.get("headers", "").splitlines() if line.strip())]
        except ValueError as bad:
            session.flash = (f"Refused: {bad}", True)
            return RedirectResponse(here, status_code=303)
        key = fields["key"].encode() if fields.get("key") else None
        value = fields.get("value", "").encode()
        written = []

        def send(kafka):
            written.append(produce(kafka, name, partition, key, value, headers))

        response = await self._act(session, send, "", here, here)
        if written:
            partition, offset = written[0]
            session.flash = (f"Produced to {name}-{partition} at offset {offset}.", False)
        return response

    async def reset_offsets(self, request, session, viewer, fields) -> Response:
        group_id = request.path_params["group"]
        reset = {name: fields.get(name, "") for name in ("topic", "to", "offset")}
        to = {"earliest": group_tools.EARLIEST, "latest": group_tools.LATEST}.get(reset["to"])
        here = pages.url("/groups/" + group_id)
        try:
            to = int(reset["offset"]) if to is None else to
            if to < group_tools.EARLIEST:
                raise ValueError("an offset is 0 or more")
        except ValueError:
            session.flash = ("Refused: give the offset to reset to.", True)
            return RedirectResponse(here, status_code=303)
        try:
            plan = await session.client.run(lambda kafka: group_tools.planned_reset(kafka, group_id, reset["topic"], to))
        except _FAILURES as failure:
            session.flash = (f"Refused: {failure}", True)
            return RedirectResponse(here, status_code=303)
        if fields.get("execute") == "1":
            return await self._act(session, plan.execute, f"Reset offsets of group {group_id} on {reset['topic']}.",
                                   here, here)
        rows = [[plan.topic, partition, offset] for partition, offset in sorted(plan.targets.items())]
        return await self.group(request, session, viewer, plan=rows, reset=reset)


def _group(kafka, group_id: str):
    """The group as ``kbroker groups describe`` shows it: its description, offset rows and a share group's table."""
    described = group_tools.described_group(kafka, group_id)
    if described.state == group_tools.DEAD:
        return described, [], None
    if described.share is not None:
        rows, _ = share_groups.offsets_table(kafka.coordinator(group_id), group_id)
        return described, [], rows
    return described, group_tools.offset_rows(kafka, group_id, described.members), None


def _wanted(query, partitions: int) -> Wanted:
    """What a messages page asks for, from its query; ValueError says what is wrong."""
    partition = _number(query.get("partition"), "partition", 0)
    if not 0 <= partition < partitions:
        raise ValueError(f"partition {partition} does not exist: the topic has {partitions}")
    timestamp = None
    if query.get("timestamp", "").strip():
        text = query["timestamp"].strip()
        try:
            timestamp = int(text)
        except ValueError:
            try:
                timestamp = int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                raise ValueError(f"timestamp {text!r}: give milliseconds or an ISO time") from None
    offset = _number(query.get("offset"), "offset", None)
    return Wanted(partition, offset, timestamp, query.get("order", "newest") != "oldest",
                  _number(query.get("limit"), "limit", 50), query.get("key", ""), query.get("contains", ""))


def _number(text: str | None, name: str, default):
    if text is None or not text.strip():
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} {text!r} is not a number") from None
    if value < 0:
        raise ValueError(f"{name} {value} is negative")
    return value


def _pairs(text: str) -> list[tuple[str, str]]:
    return [tuple(part.strip() for part in _split(line, "=")) for line in text.splitlines() if line.strip()]


def _split(line: str, separator: str) -> tuple[str, str]:
    key, found, value = line.partition(separator)
    if not found or not key.strip():
        raise ValueError(f"{line.strip()!r}: expected name{separator}value")
    return key, value


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form's fields (the console's forms send no other kind); the last of a repeated name."""
    body = await request.body()
    return dict(parse_qsl(body.decode(errors="replace"), keep_blank_values=True))


def _host(request: Request) -> str:
    return request.client.host if request.client is not None else ""


def _with_cookie(response: Response, token: str | None) -> Response:
    if token is not None:
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
    return response


def _query(**values: str) -> str:
    return "&".join(f"{name}={quote(value, safe='')}" for name, value in values.items())


def _safe_next(path: str | None) -> str:
    """Back to the page that asked for the sign-in, only if it is one of ours."""
    return path if path and path.startswith("/") and not path.startswith("//") else "/"


def _failed(request: Request, failure: Exception) -> Response:
    logger.warning("console: %s %s failed: %s: %s", request.method, request.url.path, type(failure).__name__, failure)
    return HTMLResponse(pages.layout("Failed", f'<p class="error" id="error">{pages.e(type(failure).__name__)}: '
                                     f'{pages.e(failure)}</p>', active="", principal=None), status_code=500)


def _unknown_topic(name: str) -> str:
    return (f'<p class="error" id="error">Topic {pages.e(name)} does not exist (or this user may not '
            'describe it).</p>')

