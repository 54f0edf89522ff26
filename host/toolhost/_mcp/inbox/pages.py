"""The inbox's HTML, written here and nowhere else (D314).

Every string that is not the host's own (a tool's name, an argument, a result, a principal, a
reason) goes through ``text``: what does not print becomes its visible JSON escape (a
right-to-left override shows as ``\\u202e``, a zero-width space as ``\\u200b``), then HTML
escaping, so nothing a tool or a caller wrote is ever read as markup. Arguments are shown as the
approval digest binds them: their canonical JSON. The pages have no inline script or style (the
Content-Security-Policy allows neither); the one script, ``static/ui.js``, only reloads the
inbox's list from ``inbox.part``, which this module also writes.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from toolhost._composition import InvocationRecord, InvocationState, shown_text
from toolhost._mcp.inbox.charts import Overview, overview_body
from toolhost._mcp.inbox.inert import text
from toolhost._mcp.inbox.login import Login

__all__ = ["HISTORY_SHOWN", "PAST_DEADLINE", "RESULT_SHOWN", "HistoryFilter", "call_page",
           "files_of", "history_page", "inbox_page", "inbox_part", "logged_in_page",
           "login_page", "overview_page", "past_deadline"]

#: Characters of a result a call's page shows.
RESULT_SHOWN: Final = 20_000
#: The most a deny reason may say.
REASON_CHARS: Final = 1000
#: Rows on one page of the history.
HISTORY_SHOWN: Final = 50
_LOOK_ONLY: Final = ("This login may look, not decide: deciding takes a browser login with "
                     "the approvals.decide scope.")
_NAV: Final = ('<a href="/ui/history">History</a><a href="/ui/overview">Overview</a>')
_STATES: Final = ("", "awaiting_approval", "running", "succeeded", "failed", "denied")
#: Said in place of Approve once the run's deadline has passed, and to an Approve sent then.
PAST_DEADLINE: Final = ("Its run's deadline has passed: no approval can run this call now (an "
                         "approval would only end it failed, tool.timeout.run_deadline_passed). "
                         "Deny it to close it with your reason.")


@attrs.frozen
class HistoryFilter:
    """The history page's filters, as its form sends them (empty: any)."""

    tool: str = ""
    status: str = ""
    reason: str = ""
    #: Only calls created in the last this many hours; 0: any time.
    hours: int = 0

    def query(self, before: str | None = None) -> str:
        fields = {"tool": self.tool, "status": self.status, "reason": self.reason,
                  "hours": str(self.hours) if self.hours else ""}
        if before:
            fields["before"] = before
        return urllib.parse.urlencode({k: v for k, v in fields.items() if v})


def _page(title: str, body: str, login: Login | None, csrf: str | None) -> str:
    who = ""
    if login is not None and login.nonce is not None and csrf is not None:
        who = (f'<form method="post" action="/ui/logout" class="who">'
               f'<span>{text(login.principal.id)}</span> '
               f'{_csrf_field(csrf)}<button type="submit">Log out</button></form>')
    elif login is not None:
        who = f'<span class="who">{text(login.principal.id)}</span>'
    return ("<!doctype html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{text(title)} · toolhost</title>"
            '<link rel="stylesheet" href="/ui/static/ui.css">'
            '<script src="/ui/static/ui.js" defer></script></head><body>'
            f'<header><nav aria-label="pages"><a href="/ui/">toolhost approvals</a>'
            f'{_NAV if login is not None else ""}</nav>{who}</header>'
            f"<main>{body}</main></body></html>\n")


def login_page(csrf: str, problem: str | None = None, *,
               through_issuer: bool = False) -> str:
    said = f'<p class="problem" role="alert">{text(problem)}</p>' if problem else ""
    issuer = ('<p><a href="/ui/login/start" class="issuer">Log in with your organization'
              "'s account</a></p><p>Or with a token:</p>") if through_issuer else ""
    return _page("Log in", (
        "<h1>Log in</h1>" + said + issuer +
        "<p>With a token of yours: to decide, one with the approvals.decide scope, never the "
        "one your MCP client holds.</p>" +
        f'<form method="post" action="/ui/login">{_csrf_field(csrf)}'
        '<label for="token">Token</label> '
        '<input id="token" name="token" type="password" autocomplete="off" required autofocus> '
        '<button type="submit">Log in</button></form>'), None, None)


def logged_in_page() -> str:
    """What the issuer's redirect lands on: the login cookie is set here, and the next page is
    reached by a navigation of this page's own (a SameSite=Strict cookie is not sent on the
    redirect chain the issuer began)."""
    return _page("Logged in", (
        '<meta http-equiv="refresh" content="0; url=/ui/">'
        '<h1>Logged in</h1><p><a href="/ui/">Go to the inbox</a></p>'), None, None)


def inbox_page(rows: Sequence[InvocationRecord], login: Login, csrf: str, *,
               now: dt.datetime, more: bool = False) -> str:
    return _page("Inbox", (
        "<h1>Waiting for a decision</h1>"
        + inbox_part(rows, login, csrf, now=now, more=more)), login, csrf)


def inbox_part(rows: Sequence[InvocationRecord], login: Login, csrf: str, *,
               now: dt.datetime, more: bool = False) -> str:
    """The list of waiting calls (what ``ui.js`` fetches again): newest first; ``more`` when
    older ones wait beyond it, which the history lists. ``now`` is the host's clock, which an
    approval compares the run's deadline with (D222)."""
    if not rows:
        items = '<p class="empty">Nothing is waiting for you.</p>'
    else:
        items = "".join(_waiting(row, login, csrf, now) for row in rows)
    if more and rows:
        older = HistoryFilter(status="awaiting_approval").query(rows[-1].id)
        items = (f'<p class="note">These are the newest {len(rows)} waiting; older calls wait '
                 f'too: <a href="/ui/history?{text(older)}">the older waiting calls</a>.'
                 f"</p>{items}")
    return f'<section id="inbox" aria-live="polite" data-refresh="/ui/inbox.part">{items}</section>'


def _waiting(row: InvocationRecord, login: Login, csrf: str, now: dt.datetime) -> str:
    # The list's Approve runs the call without a visit to its page, so the list names the
    # operator's directory it would run in as that page does (D516: nobody approves blind).
    deadline, directory = _run_deadline(row, now), _directory(row, login)
    pairs = _pairs([("classification", _rule(row.policy)), ("asked by", row.principal_id),
                    ("asked at", _when(row.created_at)),
                    *([("run deadline", deadline)] if deadline else []),
                    *([("directory", directory)] if directory else []),
                    ("invocation", row.id), ("digest", row.argument_digest or "")])
    past = " past-deadline" if past_deadline(row, now) else ""
    return (
        f'<article class="call{past}" data-id="{text(row.id)}">'
        f'<h2><a href="/ui/calls/{text(row.id)}">{_tool(row)}</a></h2>'
        f"<dl>{pairs}</dl>"
        '<pre class="arguments">'
        f"{_arguments(row.arguments)}</pre>"
        f"{_decide(row, login, csrf, now, here=False)}</article>")


def _decide(row: InvocationRecord, login: Login, csrf: str, now: dt.datetime, *,
            here: bool) -> str:
    """Approve and deny, for a login that may decide the call (else why not): on the call's
    own page (``here``) the deny form with its reason, in the inbox a link to it. Past the
    run's deadline there is no Approve: it could not run the call (D222), and the person is
    asked only what their answer can still act on (D440); Deny still closes it."""
    if not login.may_decide(row.principal_id):
        return f'<p class="note">{_LOOK_ONLY}</p>'
    deny = "" if here else f' <a href="/ui/calls/{text(row.id)}#deny">Deny…</a>'
    if past_deadline(row, now):
        offer = f'<p class="note past-deadline" role="status">{PAST_DEADLINE}{deny}</p>'
    else:
        offer = (f'<form method="post" action="/ui/calls/{text(row.id)}/approve">'
                 f'{_csrf_field(csrf)}<button type="submit" class="approve">Approve</button>'
                 f"{deny}</form>")
    if not here:
        return offer
    return (f'{offer}'
            f'<form method="post" action="/ui/calls/{text(row.id)}/deny" id="deny">'
            f'{_csrf_field(csrf)}<label for="reason">Reason for denying</label>'
            f'<textarea id="reason" name="reason" maxlength="{REASON_CHARS}" required>'
            '</textarea><button type="submit" class="deny">Deny</button></form>')


def _csrf_field(csrf: str) -> str:
    return f'<input type="hidden" name="csrf" value="{text(csrf)}">'


def files_of(row: InvocationRecord) -> dict[str, Mapping[str, Any]]:
    """The files a call exported or generated (its artifact references), by id."""
    return {str(ref.get("id")): ref for ref in (*row.artifact_refs, *row.attachments)}


def call_page(row: InvocationRecord, login: Login, csrf: str, message: str | None = None,
              described: tuple[str, list[str]] | None = None, *, now: dt.datetime) -> str:
    """One call: what it is, its decision, its result or reason, what its tool says it will do
    (``described``, ``Host.describe_call``'s lines), its arguments; the approve and deny forms
    while it waits (only deny once its run's deadline is at or before ``now``)."""
    pairs: list[tuple[str, str]] = [
        ("state", row.state.value), ("classification", _rule(row.policy)),
        ("asked by", row.principal_id), ("invocation", row.id), ("run", row.run_id),
        ("run deadline", _run_deadline(row, now)),
        ("directory", _directory(row, login)),
        ("created", _when(row.created_at)), ("decided", _when(row.decided_at)),
        ("approver", row.approver or ""), ("denial reason", row.denial_reason or ""),
        ("started", _when(row.started_at)), ("finished", _when(row.finished_at)),
        ("reason code", row.reason_code or ""), ("digest", row.argument_digest or ""),
        ("output trust", row.output_trust or ""),
    ]
    said = f'<p class="message" role="status">{text(message)}</p>' if message else ""
    body = [f"<h1>{_tool(row)}</h1>", said, f"<dl>{_pairs(p for p in pairs if p[1])}</dl>",
            _described(described),
            "<h2>Arguments</h2>", f'<pre class="arguments">{_arguments(row.arguments)}</pre>']
    if row.result_content is not None and row.state is InvocationState.SUCCEEDED:
        shown = row.result_content[:RESULT_SHOWN]
        more = len(row.result_content) - len(shown)
        body += ["<h2>Result</h2>", f'<pre class="result">{text(shown)}</pre>']
        if more:
            body.append(f"<p>{more} more characters not shown.</p>")
    files = files_of(row)
    if files and row.state is InvocationState.SUCCEEDED:
        body += ["<h2>Files</h2>", "<ul>" + "".join(
            f'<li><a href="/ui/calls/{text(row.id)}/files/{text(i)}" download>'
            f'{text(str(ref.get("name", i)))}</a> ({text(str(ref.get("media_type", "")))}, '
            f'{text(str(ref.get("byte_count", "")))} bytes)</li>'
            for i, ref in files.items()) + "</ul>"]
    if row.state is InvocationState.AWAITING_APPROVAL:
        body.append(_decide(row, login, csrf, now, here=True))
    return _page(f"{row.tool_name} {row.id}", "".join(body), login, csrf)


def _described(described: tuple[str, list[str]] | None) -> str:
    if described is None:
        return ""
    distribution, lines = described
    return (f"<h2>What {text(distribution)} says this call does</h2>"
            '<ul class="described">' + "".join(f"<li>{text(line)}</li>" for line in lines)
            + "</ul>")


def past_deadline(row: InvocationRecord, now: dt.datetime) -> bool:
    """Whether the call still waits though its run's deadline is at or before ``now``, which
    an approval refuses to run it past (``Approvals`` compares the same two)."""
    return (row.state is InvocationState.AWAITING_APPROVAL and row.run_deadline is not None
            and now >= row.run_deadline)


def _run_deadline(row: InvocationRecord, now: dt.datetime) -> str:
    """The run's deadline on the row (D222), said passed while the call still waits."""
    if row.run_deadline is None:
        return ""
    return _when(row.run_deadline) + (" (passed)" if past_deadline(row, now) else "")


def _directory(row: InvocationRecord, login: Login) -> str:
    """Where the call runs once approved, when that is the operator's directory it paused in
    (D509): the path for an admin only, since a bearer token of the call's own principal (an
    agent's client) may read this page too and the path is kept from the model (D458)."""
    recorded = row.operator_directory
    if not recorded:
        return ""
    if not login.admin:
        return "the operator's own, kept as it is (its path shows to approvals.admin)"
    return f"{recorded.get('path')} on {recorded.get('host')}"


def _tool(row: InvocationRecord) -> str:
    return text(f"{row.tool_name} {row.tool_version or ''}".rstrip())


def _rule(policy: Any) -> str:
    """The policy cell the call was sorted into (``CODE_EXECUTION/HIGH``)."""
    return str(policy.get("rule", "")) if isinstance(policy, Mapping) else ""


def _when(instant: Any) -> str:
    return str(instant.isoformat(timespec="seconds")) if instant is not None else ""


def _pairs(pairs: Iterable[tuple[str, str]]) -> str:
    return "".join(f"<dt>{text(k)}</dt><dd>{text(v)}</dd>" for k, v in pairs)


def _arguments(arguments: Any) -> str:
    """Canonical JSON (what the digest binds), one line, every character visible."""
    return text(shown_text(arguments))


def history_page(rows: Sequence[InvocationRecord], login: Login, csrf: str,
                 chosen: HistoryFilter, more: bool) -> str:
    """The calls this person may see, newest first, filtered; a link to the next page."""
    options = "".join(
        f'<option value="{s}"{" selected" if s == chosen.status else ""}>{s or "any"}</option>'
        for s in _STATES)
    form = (
        '<form method="get" action="/ui/history" class="filters">'
        f'<label for="tool">Tool</label><input id="tool" name="tool" value="{text(chosen.tool)}">'
        f'<label for="status">Status</label><select id="status" name="status">{options}</select>'
        f'<label for="reason">Reason code</label>'
        f'<input id="reason" name="reason" value="{text(chosen.reason)}">'
        f'<label for="hours">Last hours</label><input id="hours" name="hours" type="number" '
        f'min="0" value="{chosen.hours or ""}">'
        '<button type="submit">Show</button></form>')
    if rows:
        body = "".join(
            f'<tr><td><a href="/ui/calls/{text(r.id)}">{_when(r.created_at)}</a></td>'
            f"<td>{_tool(r)}</td><td>{text(r.state.value)}</td>"
            f"<td>{text(r.reason_code or '')}</td><td>{text(r.approver or '')}</td>"
            f"<td>{text(r.principal_id)}</td></tr>" for r in rows)
        table = ('<table class="history"><thead><tr><th scope="col">created</th>'
                 '<th scope="col">tool</th><th scope="col">status</th>'
                 '<th scope="col">reason code</th><th scope="col">approver</th>'
                 f'<th scope="col">asked by</th></tr></thead><tbody>{body}</tbody></table>')
    else:
        table = '<p class="empty">No call matches.</p>'
    nav = (f'<p><a href="/ui/history?{text(chosen.query(rows[-1].id))}">Older calls</a></p>'
           if more and rows else "")
    return _page("History", f"<h1>History</h1>{form}{table}{nav}", login, csrf)


def overview_page(overview: Overview, login: Login, csrf: str) -> str:
    return _page("Overview", overview_body(overview), login, csrf)
