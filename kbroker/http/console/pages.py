"""The console's pages as HTML, rendered on the server: every view is a plain URL, and the pages work with
no script at all but the two live charts (static/console.js). Every value from the broker or a client is
escaped here, and nowhere else is HTML made."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from html import escape
from urllib.parse import quote, urlencode

from kbroker.http.console.messages import Page, Wanted, shown
from kbroker.http.console.views import MISSING, Disk, PartitionRow, TopicRow

NAV = (("overview", "/", "Overview"), ("topics", "/topics", "Topics"), ("groups", "/groups", "Groups"),
       ("schemas", "/schemas", "Schemas"))


def e(value) -> str:
    return escape(str(value), quote=True)


def url(path: str, **query) -> str:
    """A console URL: ``path`` with its parts quoted, and the query's set values."""
    shown_query = {name: value for name, value in query.items() if value not in (None, "")}
    return quote(path) + ("?" + urlencode(shown_query) if shown_query else "")


def size(count_bytes) -> str:
    if not isinstance(count_bytes, (int, float)):
        return e(count_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count_bytes < 1024 or unit == "GiB":
            return f"{count_bytes:,.0f} {unit}" if unit == "B" else f"{count_bytes:,.1f} {unit}"
        count_bytes /= 1024
    return ""


def when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def table(headers: list[str], rows: list[list[str]], table_id: str, empty: str = "None.") -> str:
    """A table of cells already made HTML."""
    if not rows:
        return f'<p class="empty" id="{table_id}-empty">{e(empty)}</p>'
    head = "".join(f"<th>{e(header)}</th>" for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def form(action: str, csrf: str, fields: str, button: str, form_id: str, confirm: str = "") -> str:
    """A changing request: a POST with the session's CSRF token."""
    confirmed = f' onsubmit="return confirm({e(repr(confirm))})"' if confirm else ""
    return (f'<form method="post" action="{e(action)}" id="{form_id}"{confirmed}>'
            f'<input type="hidden" name="csrf" value="{e(csrf)}">{fields}'
            f'<button type="submit">{e(button)}</button></form>')


def layout(title: str, body: str, *, active: str, principal: str | None, csrf: str = "", flash: str = "",
           failed: bool = False, login_out: bool = False) -> str:
    links = "".join(f'<a href="{href}"{" class=active" if name == active else ""}>{label}</a>'
                    for name, href, label in NAV)
    who = ""
    if principal is not None:
        who = f'<span class="who" id="principal">{e(principal)}</span>'
        if login_out:
            who += form("/logout", csrf, "", "Sign out", "logout")
    message = f'<p class="{"error" if failed else "flash"}" id="{"error" if failed else "flash"}">{e(flash)}</p>' \
        if flash else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{e(title)} · kbroker</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="csrf" content="{e(csrf)}">'
            f'<link rel="stylesheet" href="/static/console.css"><script src="/static/console.js" defer></script>'
            f'</head><body data-page="{e(active)}"><header><a class="brand" href="/">kbroker</a><nav>{links}</nav>'
            f'{who}</header><main><h1>{e(title)}</h1>{message}{body}</main></body></html>')


# -- overview -------------------------------------------------------------------------------------------------

def overview(cluster_id: str, ready: tuple[bool, str], counts: dict[str, int], nodes: list, node_id: int,
             quorum, quorum_error: str, disks: list[Disk]) -> str:
    is_ready, reason = ready
    cards = [("Cluster", cluster_id), ("Readiness", "ready" if is_ready else reason),
             *((name.capitalize(), f"{value:,}") for name, value in counts.items())]
    body = '<section class="cards">' + "".join(
        f'<div class="card" id="card-{e(name.lower())}"><span>{e(name)}</span><strong>{e(value)}</strong></div>'
        for name, value in cards) + "</section>"
    voters = {voter.replica_id for voter in quorum.current_voters} if quorum is not None else set()
    rows = []
    for broker in nodes:
        roles = ["broker"] + (["controller"] if broker.node_id in voters else [])
        if quorum is not None and broker.node_id == quorum.leader_id:
            roles.append("quorum leader")
        state = "fenced" if broker.fenced else "serving"
        rows.append([e(broker.node_id) + (" (this node)" if broker.node_id == node_id else ""),
                     e(f"{broker.host}:{broker.port}"), e(broker.rack or ""), e(state), e(", ".join(roles))])
    body += "<h2>Nodes</h2>" + table(["Node", "Address", "Rack", "State", "Roles"], rows, "nodes")
    body += "<h2>Metadata quorum</h2>"
    if quorum is None:
        body += f'<p class="empty" id="quorum-empty">{e(quorum_error or "Not available.")}</p>'
    else:
        body += (f'<p id="quorum">Leader <strong>{e(quorum.leader_id)}</strong>, epoch {e(quorum.leader_epoch)}, '
                 f'high watermark {e(quorum.high_watermark)}</p>')
        now_ms = int(time.time() * 1000)
        body += table(["Voter", "Log end offset", "Lag", "Last caught up"], [
            [e(voter.replica_id), e(voter.log_end_offset), e(max(0, quorum.high_watermark - voter.log_end_offset)),
             e(f"{max(0, now_ms - voter.last_caught_up_timestamp)} ms ago" if voter.last_caught_up_timestamp > 0
               else MISSING)]
            for voter in sorted(quorum.current_voters, key=lambda voter: voter.replica_id)], "voters")
    body += ('<h2>Throughput</h2><figure class="chart"><svg id="rates-chart" data-source="/api/rates" '
             'viewBox="0 0 600 160"></svg><figcaption id="rates-caption">'
             '<span class="in">in</span> and <span class="out">out</span>, bytes per second over the last '
             'five minutes</figcaption></figure>')
    body += "<h2>Disks</h2>" + table(["Log directory", "Logs", "Free", "Size", "State"], [
        [e(disk.path), size(disk.logs_bytes), size(disk.usable_bytes), size(disk.total_bytes),
         "offline" if disk.offline else "online"] for disk in disks], "disks", "Needs DESCRIBE on the cluster.")
    return body


# -- topics ---------------------------------------------------------------------------------------------------

def topics(rows: list[TopicRow], query: str, rates: dict[str, float], csrf: str, shown_at_most: int) -> str:
    search = (f'<form method="get" action="/topics" class="inline" id="search"><input type="search" name="q" '
              f'value="{e(query)}" placeholder="Topic name contains" autofocus><button>Search</button></form>')
    cut = rows[:shown_at_most]
    listed = table(["Topic", "Partitions", "Replication", "Size", "Records in/s", "Configs"], [
        [f'<a href="{e(url("/topics/" + row.name))}">{e(row.name)}</a>', e(row.partitions),
         e(row.replication_factor), size(row.size_bytes), f"{rates.get(row.name, 0.0):,.1f}",
         e(", ".join(f"{k}={v}" for k, v in sorted(row.configs.items())))] for row in cut], "topics",
        "No topic matches." if query else "No topics yet.")
    more = f'<p class="more">{len(rows) - len(cut):,} more: narrow the search.</p>' if len(rows) > len(cut) else ""
    create = form("/topics", csrf, (
        '<label>Name <input name="name" required maxlength="249"></label>'
        '<label>Partitions <input name="partitions" type="number" min="1" placeholder="default"></label>'
        '<label>Replication factor <input name="replication_factor" type="number" min="1" placeholder="default">'
        '</label><label>Configs <textarea name="configs" rows="2" placeholder="cleanup.policy=compact"></textarea>'
        '</label>'), "Create topic", "create-topic")
    return (f'{search}<p class="count" id="topic-count">{len(rows):,} topics</p>{listed}{more}'
            f'<details><summary>Create a topic</summary>{create}</details>')


def topic(name: str, topic_id, partitions: list[PartitionRow], configs: dict[str, str], csrf: str) -> str:
    path = "/topics/" + name
    body = (f'<p class="meta">Topic id <code>{e(topic_id)}</code> · {len(partitions)} partitions · '
            f'<a id="browse" href="{e(url(path + "/messages"))}">Browse messages</a></p>')
    body += "<h2>Partitions</h2>" + table(
        ["Partition", "Leader", "Replicas", "ISR", "Log start", "High watermark", "Last stable", "Size"],
        [[e(row.index), e(row.leader), e(",".join(map(str, row.replicas))), e(",".join(map(str, row.isr))),
          e(row.log_start), e(row.high_watermark), e(row.last_stable), size(row.size_bytes)] for row in partitions],
        "partitions")
    body += "<h2>Configs set on the topic</h2>" + table(
        ["Config", "Value"], [[e(k), e(v)] for k, v in sorted(configs.items())], "configs",
        "None: every config is the broker's default.")
    body += "<details><summary>Change configs</summary>" + form(
        url(path + "/configs"), csrf, '<label>One per line, <code>name=value</code>; <code>name=</code> returns '
        'it to its default <textarea name="configs" rows="3" required></textarea></label>', "Change configs",
        "alter-configs") + "</details>"
    body += "<details><summary>Produce a message</summary>" + produce_form(path, csrf) + "</details>"
    body += "<details><summary>Delete the topic</summary>" + form(
        url(path + "/delete"), csrf, "", f"Delete {name}", "delete-topic",
        confirm=f"Delete topic {name} and all its messages?") + "</details>"
    return body


def produce_form(path: str, csrf: str) -> str:
    return form(url(path + "/produce"), csrf, (
        '<label>Partition <input name="partition" type="number" min="0" placeholder="by key"></label>'
        '<label>Key <input name="key"></label><label>Value <textarea name="value" rows="3"></textarea></label>'
        '<label>Headers, one per line, <code>name: value</code> <textarea name="headers" rows="2"></textarea>'
        '</label>'), "Produce", "produce")


def messages(name: str, partitions: int, wanted: Wanted, form_name: str, page: Page | None, error: str,
             timestamp_text: str, decoded: dict[int, tuple[str, str]]) -> str:
    """``decoded``: offset -> (what decoded its value, the value) for values in the registry's wire format."""
    path = "/topics/" + name + "/messages"
    options = "".join(f'<option value="{p}"{" selected" if p == wanted.partition else ""}>{p}</option>'
                      for p in range(partitions))
    orders = "".join(f'<option value="{value}"{" selected" if (value == "newest") == wanted.newest_first else ""}>'
                     f'{label}</option>' for value, label in (("newest", "Newest first"), ("oldest", "Oldest first")))
    forms = "".join(f'<option value="{value}"{" selected" if value == form_name else ""}>{value}</option>'
                    for value in ("text", "json", "hex"))
    body = (f'<p class="meta"><a href="{e(url("/topics/" + name))}">{e(name)}</a></p>'
            f'<form method="get" action="{e(quote(path))}" class="filters" id="browse-form">'
            f'<label>Partition <select name="partition">{options}</select></label>'
            f'<label>Order <select name="order">{orders}</select></label>'
            f'<label>From offset <input name="offset" type="number" min="0" value="{e(wanted.offset if wanted.offset is not None and wanted.timestamp is None else "")}"></label>'
            f'<label>From time <input name="timestamp" placeholder="2026-11-27T10:00:00Z or ms" value="{e(timestamp_text)}"></label>'
            f'<label>Key <input name="key" value="{e(wanted.key)}"></label>'
            f'<label>Contains <input name="contains" value="{e(wanted.contains)}"></label>'
            f'<label>Show as <select name="format">{forms}</select></label>'
            f'<label>Per page <input name="limit" type="number" min="1" max="500" value="{wanted.limit}"></label>'
            f'<button>Show</button></form>')
    if error:
        return body + f'<p class="error" id="error">{e(error)}</p>'
    if page is None:
        return body
    body += (f'<p class="meta" id="bounds">Log start {page.log_start} · high watermark {page.high_watermark} · '
             f'read offsets {page.scanned[0]} to {page.scanned[1]}</p>')
    rows = []
    for message in page.messages:
        headers = "<br>".join(f"{e(key)}: {e(shown(value, form_name))}" for key, value in message.headers)
        value = f'<pre class="value">{e(shown(message.value, form_name))}</pre>'
        if message.offset in decoded:
            label, text = decoded[message.offset]
            value = f'<span class="schema">{e(label)}</span>' + (f'<pre class="value">{e(text)}</pre>' if text else value)
        rows.append([e(message.offset), e(when(message.timestamp)),
                     f'<code class="key">{e(shown(message.key, form_name))}</code>',
                     f'<span class="headers">{headers}</span>', value])
    body += table(["Offset", "Timestamp", "Key", "Headers", "Value"], rows, "messages", "No messages here.")
    order = "newest" if wanted.newest_first else "oldest"
    common = dict(partition=wanted.partition, order=order, key=wanted.key, contains=wanted.contains,
                  format=form_name, limit=wanted.limit)
    links = []
    if page.previous is not None:
        links.append(f'<a id="previous" href="{e(url(path, offset=page.previous, **common))}">'
                     f'{"Newer" if wanted.newest_first else "Older"}</a>')
    if page.next is not None:
        links.append(f'<a id="next" href="{e(url(path, offset=page.next, **common))}">'
                     f'{"Older" if wanted.newest_first else "Newer"}</a>')
    return body + f'<nav class="pager">{" ".join(links)}</nav>'


# -- groups ---------------------------------------------------------------------------------------------------

def groups(listed: list[list[str]], error: str) -> str:
    if error:
        return f'<p class="error" id="error">{e(error)}</p>'
    return table(["Group", "Type", "Protocol", "State"], [
        [f'<a href="{e(url("/groups/" + group))}">{e(group)}</a>', e(kind), e(protocol), e(state)]
        for group, kind, protocol, state in listed], "groups", "No groups yet.")


def group(group_id: str, state: str, kind: str, members: list, rows: list[list], share_rows: list[list] | None,
          topics: list[str], csrf: str, plan: list[list] | None, reset: dict[str, str]) -> str:
    path = "/groups/" + group_id
    body = f'<p class="meta" id="group-state">State <strong>{e(state)}</strong> · {e(kind)}</p>'
    body += "<h2>Members</h2>" + table(["Member", "Client id", "Host", "Assigned"], [
        [e(m.member_id), e(m.client_id), e(m.host), e(", ".join(f"{t}-{p}" for t, p in sorted(m.partitions)))]
        for m in members], "members", "No active members.")
    if share_rows is not None:
        header, *share = share_rows or [[]]
        body += "<h2>Start offsets</h2>" + table([str(cell) for cell in header], [[e(c) for c in r] for r in share],
                                                  "offsets", "No offsets.")
    else:
        body += "<h2>Offsets and lag</h2>" + table(
            ["Topic", "Partition", "Current offset", "Log end offset", "Lag", "Consumer", "Host", "Client id"],
            [[e(cell) for cell in row[1:]] for row in rows], "offsets", "No committed offsets.")
    body += ('<h2>Lag over time</h2><figure class="chart"><svg id="lag-chart" data-source="'
             f'{e(url("/api/lag/" + group_id))}" viewBox="0 0 600 160"></svg>'
             '<figcaption>Total lag over the partitions led by this broker, over the last five minutes'
             '</figcaption></figure>')
    choices = "".join(f'<option{" selected" if t == reset.get("topic") else ""}>{e(t)}</option>' for t in topics)
    to = reset.get("to", "earliest")
    tos = "".join(f'<option value="{v}"{" selected" if v == to else ""}>{label}</option>'
                  for v, label in (("earliest", "Earliest"), ("latest", "Latest"), ("offset", "Offset")))
    fields = (f'<label>Topic <input name="topic" list="group-topics" required value="{e(reset.get("topic", ""))}">'
              f'<datalist id="group-topics">{choices}</datalist></label>'
              f'<label>To <select name="to">{tos}</select></label>'
              f'<label>Offset <input name="offset" type="number" min="0" value="{e(reset.get("offset", ""))}"></label>')
    body += "<h2>Reset offsets</h2>" + form(url(path + "/reset-offsets"), csrf, fields, "Dry run", "reset-dry-run")
    if plan is not None:
        body += '<h3>Dry run</h3>' + table(["Topic", "Partition", "New offset"], [[e(c) for c in r] for r in plan],
                                           "reset-plan", "Nothing to reset.")
        hidden = "".join(f'<input type="hidden" name="{k}" value="{e(v)}">' for k, v in reset.items())
        body += form(url(path + "/reset-offsets"), csrf, hidden + '<input type="hidden" name="execute" value="1">',
                     "Execute the reset", "reset-execute")
    return body


# -- schemas --------------------------------------------------------------------------------------------------

def schemas(subjects: list[list]) -> str:
    """``subjects``: each subject's live versions, oldest first."""
    return table(["Subject", "Latest version", "Type", "Schema id", "Versions"], [
        [f'<a href="{e(url("/schemas/" + versions[-1].subject))}">{e(versions[-1].subject)}</a>',
         e(versions[-1].version), e(versions[-1].schema_type), e(versions[-1].id), e(len(versions))]
        for versions in subjects], "subjects", "No schemas registered.")


def subject(name: str, versions: list, shown, text: str, compare, lines: list[str]) -> str:
    path = "/schemas/" + name
    options = "".join(f'<option value="{v.version}"{" selected" if v is shown else ""}>{v.version}</option>'
                      for v in versions)
    others = '<option value="">nothing</option>' + "".join(
        f'<option value="{v.version}"{" selected" if v is compare else ""}>{v.version}</option>' for v in versions)
    body = (f'<form method="get" action="{e(quote(path))}" class="filters" id="versions-form">'
            f'<label>Version <select name="version">{options}</select></label>'
            f'<label>Compared with <select name="compare">{others}</select></label><button>Show</button></form>'
            f'<p class="meta" id="schema-meta">Version {e(shown.version)} · id {e(shown.id)} · {e(shown.schema_type)}'
            f'{" · references " + e(", ".join(f"{r.subject} v{r.version}" for r in shown.references)) if shown.references else ""}</p>')
    if compare is not None:
        diff = "".join(f'<span class="{"added" if line.startswith("+") else "removed" if line.startswith("-") else ""}">'
                       f'{e(line)}</span>\n' for line in lines)
        body += f'<h2>From version {e(compare.version)} to {e(shown.version)}</h2>'
        body += f'<pre class="diff" id="diff">{diff or e("The same schema.")}</pre>'
    return body + f'<h2>Schema</h2><pre class="schema-text" id="schema-text">{e(text)}</pre>'


def login(error: str, csrf: str, mechanism: str, then: str) -> str:
    return (f'<p class="meta">This broker authenticates its clients ({e(mechanism)}): sign in with a Kafka '
            'user\'s credentials; the console then acts as that user.</p>' +
            (f'<p class="error" id="error">{e(error)}</p>' if error else "") +
            form(url("/login", next=then), csrf, '<label>User <input name="username" required autofocus></label>'
                 '<label>Password <input name="password" type="password" required></label>', "Sign in", "login"))
