"""The inbox's requests: who is asking, then one handler per route (D314).

Routes (every one under ``/ui/``; the front door has checked Host and Origin already):

    GET  /ui/login            the login form         POST /ui/login    a token -> a cookie
    GET  /ui/login/start      to the issuer (TOOLHOST_HTTP_UI_CLIENT_ID: the authorization
    GET  /ui/login/callback   code flow with PKCE) and back: its token -> a cookie
    POST /ui/logout           the cookie cleared
    GET  /ui/                 the calls waiting for this person's decision, newest first
    GET  /ui/inbox.part       the same list alone (what ``static/ui.js`` polls)
    GET  /ui/calls/ID         one call                POST /ui/calls/ID/approve|deny
    GET  /ui/calls/ID/files/ARTIFACT   a file the call exported or generated (a download)
    GET  /ui/history          the calls this person may see, newest first, filtered and paged
    GET  /ui/overview         the recent calls summed up: per tool and status, over time,
                              durations, what waits and for how long (``charts``)
    GET  /ui/static/NAME      the script and the style sheet

A request acts for the bearer token it sends (verified by the front door, as for MCP) or else
for its login cookie (``login``); a page asked for without either is sent to the login form.
Every POST of a cookie's login carries that login's CSRF token (``csrf`` form field), and a
login POST comes from this server's own page: its ``Origin`` (or, without one, its ``Referer``)
is the request's own scheme and Host, whatever else the allowed origins let through. A request
carrying one of the inbox's cookies twice is refused (another page of this machine set one:
cookies are not kept apart by port). A person sees only their own
principal's calls and decides them with a browser login that has ``approvals.decide``;
``approvals.admin`` sees and decides everyone's. A call that is not theirs is answered exactly
as one that does not exist. When the record's store fails, a page or a decision is one
static 503 ("The record did not answer"), a denial it does not take is "could not be recorded"
as an approval's is, and a row damaged behind its back is as a missing one. Every answer
carries a strict Content-Security-Policy (no inline script or style, no framing), ``nosniff``,
``same-origin`` referrers (a browser then still sends ``Origin`` on our own forms) and
``no-store``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import importlib.resources
import json
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final, TypeVar

import anyio.to_thread

from toolhost import ArtifactUnavailable
from toolhost._composition import (
    ApprovalRefused,
    ArtifactCorrupted,
    ArtifactError,
    ArtifactNotFound,
    CancellationEvent,
    Host,
    InvocationNotFound,
    InvocationRecord,
    InvocationRecordDamaged,
    InvocationState,
    InvocationStateError,
    ToolhostError,
    get_logger,
)
from toolhost._mcp.config import InboxOAuth
from toolhost._mcp.http_auth import Caller
from toolhost._mcp.http_introspection import IntrospectionBusy, Post
from toolhost._mcp.http_routes import first_header
from toolhost._mcp.inbox import pages
from toolhost._mcp.inbox.charts import Overview, summarize
from toolhost._mcp.inbox.login import (
    DECIDE_SCOPE,
    FLOW_S,
    LOGIN_S,
    Login,
    Logins,
    code_challenge,
)
from toolhost._mcp.resources import MAX_RESOURCE_BYTES, handed_over_name

__all__ = ["COOKIE", "CSP", "OVERVIEW_ROWS", "WAITING_SHOWN", "Inbox"]

COOKIE: Final = "toolhost_inbox"
#: The login form's CSRF cookie (its token is in the form).
BEFORE_COOKIE: Final = "toolhost_inbox_login"
#: A login through the issuer, while it is under way (its state and PKCE verifier).
FLOW_COOKIE: Final = "toolhost_inbox_flow"
CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
              "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
#: The most waiting calls the inbox lists at once: the newest this many, newest first (past
#: it, a note links to the older ones in the history).
WAITING_SHOWN: Final = 200
#: Token requests to the issuer at once (logins through it), and how long a callback waits
#: for its answer before the login fails.
EXCHANGING: Final = 4
EXCHANGE_WAIT_S: Final = 15.0
#: The most recent calls the overview sums up, how long a sum is shown again before the record
#: is read anew, and for how many principals at most.
OVERVIEW_ROWS: Final = 10_000
OVERVIEW_FRESH_S: Final = 5.0
OVERVIEWS_KEPT: Final = 256
#: The largest form body the inbox reads (a deny reason is at most 1,000 characters).
_FORM_BYTES: Final = 16 * 1024
_STATIC: Final = {"ui.js": "text/javascript; charset=utf-8", "ui.css": "text/css; charset=utf-8"}
_CALL: Final = re.compile(r"^/ui/calls/([0-9a-f]{32})(?:/(approve|deny))?$")
_FILE: Final = re.compile(r"^/ui/calls/([0-9a-f]{32})/files/([A-Za-z0-9_-]{1,128})$")
_HTML: Final = "text/html; charset=utf-8"
#: Too many tokens wait for the issuer's introspection (D331).
_LOGINS_BUSY: Final = "Too many logins are being checked at once. Try again in a moment."
#: More than LOGINS_PER_HOUR logins of one principal here (D332).
_TOO_MANY_LOGINS: Final = ("Too many logins as this person in the last hour. Try again later, "
                           "or use a login you have.")
_NO_EXPIRY: Final = ("That token does not say when it expires, so it cannot make a login "
                     "here; use one that does.")
#: A request with one of the inbox's cookies twice: which is this browser's own and which
#: another page of the machine planted cannot be told.
_COOKIE_TWICE: Final = ("This browser sent one of the inbox's cookies twice, and one may have "
                        "been set by another page on this machine. Clear this site's cookies "
                        "in the browser, then log in again.\n")
#: A file's answer: never rendered in the inbox's origin, whatever it holds.
_FILE_CSP: Final = "default-src 'none'; sandbox"
#: Any page or decision while the record's store fails (D324's words for a login's check).
_NO_ANSWER: Final = "The record did not answer; try again in a moment.\n"
_LOGOUT_NOT_KEPT: Final = ("You are logged out in this browser, but the record did not answer: "
                           "a copy of this login stays valid until it expires. Log in and out "
                           "again later to end it everywhere.\n")
#: An Approve refused before the call was taken (``Inbox._not_run``), as ``toolhost approve``
#: words it; the refusal itself names the path, so a login not an admin reads the refusal's
#: words without one (its run live elsewhere, D559), or the second.
_NOT_RUN: Final = "The call was not run and still awaits approval"
_DIRECTORY_REFUSED: Final = ("the operator's directory it paused in does not pass the checks "
                             "an approval makes before it runs (an approvals.admin login, and "
                             "toolhost approve on the host, say which). Deny it and make the "
                             "call again, unless that directory can be set right.")
_R = TypeVar("_R")


class _RecordSilent(Exception):
    """The record's store failed to answer a read or a write (``Inbox._ask``): the request
    is answered the static 503 (``_NO_ANSWER``)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(type(error).__name__)
        #: What failed, by its type's name only (its words may name the database's URL).
        self.error = type(error).__name__

Send = Callable[[dict[str, Any]], Awaitable[None]]
Verify = Callable[[str], Awaitable[Caller | None]]
#: ``admit(principal)``: entered around a call run here; what it yields is None (admitted)
#: or the refusal's status and words.
Admit = Callable[[str], AbstractContextManager[tuple[int, str] | None]]


class Inbox:
    """The ASGI app under ``/ui/``; the front door calls it with the bearer token's caller."""

    def __init__(self, host: Host, logins: Logins, verify: Verify, *,
                 admit: Admit = lambda principal: contextlib.nullcontext(),
                 body_timeout_s: float = 30.0, public_https: bool = False,
                 oauth: InboxOAuth | None = None, post: Post | None = None) -> None:
        self._host = host
        self._logins = logins
        self._verify = verify
        #: The front door's gate for a call (a stopping server, a principal's cap): an
        #: approval that runs its call here is one of the principal's calls.
        self._admit = admit
        self._body_timeout_s = body_timeout_s
        self._public_https = public_https
        #: The approvals running here, cancelled by ``cancel``.
        self._running: set[CancellationEvent] = set()
        self._exchanging = anyio.CapacityLimiter(EXCHANGING)
        #: The overview last summed up for each principal (None: everyone's), and when.
        self._overviews: dict[str | None, tuple[float, Overview]] = {}
        #: The login through the issuer (and the host's form POST for its token request).
        self._oauth = oauth
        self._post_form = post
        self._log = get_logger()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send,
                       caller: Caller | None) -> None:
        method, path = scope.get("method", ""), scope.get("path", "")
        if path == "/ui":
            await _redirect(send, "/ui/")
            return
        if path.startswith("/ui/static/"):
            await self._static(method, path.removeprefix("/ui/static/"), send)
            return
        if any(len(_cookie_values(scope, name)) > 1
               for name in (COOKIE, BEFORE_COOKIE, FLOW_COOKIE)):
            self._log.info("http.inbox.refused", reason="cookie_twice")
            await _plain(send, 400, _COOKIE_TWICE)
            return
        if path == "/ui/login":
            if method == "POST":
                await self._log_in(scope, receive, send)
            else:
                await self._login_page(scope, send, 200)
            return
        if path in ("/ui/login/start", "/ui/login/callback") and self._oauth is not None:
            if method != "GET":
                await _plain(send, 405, "Method not allowed.\n")
            elif path.endswith("start"):
                await self._start_flow(scope, send, self._oauth)
            else:
                await self._end_flow(scope, send, self._oauth)
            return
        try:
            await self._routed(scope, receive, send, caller)
        except _RecordSilent as silent:
            # The record's store failed (PostgreSQL away, a write lock held past the wait):
            # one static answer and one log line, never a traceback (D307); the request is
            # refused, never let through, and a logout still clears this browser's cookie.
            self._log.warning("http.inbox.record_unavailable", error=silent.error)
            if method == "POST" and path == "/ui/logout":
                await _logged_out_here_only(send)
            else:
                await _plain(send, 503, _NO_ANSWER)

    async def _routed(self, scope: dict[str, Any], receive: Any, send: Send,
                      caller: Caller | None) -> None:
        """A page or a decision, for the bearer token's caller or else the cookie's login.

        :raises _RecordSilent: the record's store failed, before anything was answered.
        """
        method, path = scope.get("method", ""), scope.get("path", "")
        login: Login | None
        if caller is not None:
            login = Login(caller.principal)
        else:
            # A cookie's login asks the record whether it was logged out of (D324).
            login = await self._ask(functools.partial(self._logins.read,
                                                      _cookie(scope, COOKIE)))
        if login is None:
            if method == "GET":
                await _redirect(send, "/ui/login")
            else:
                await _plain(send, 401, "Log in first.\n")
            return
        if method == "POST":
            form = await self._form(receive, send)
            if form is None:
                return
            if not self._logins.csrf_holds(login, form.get("csrf")):
                self._log.info("http.inbox.refused", reason="csrf")
                await _plain(send, 403, "The form is stale or did not come from this page. "
                                        "Reload and try again.\n")
                return
            # Logged out of while its form was arriving (a sender decides how slowly): asked
            # again, so a decision never outlives the logout.
            if not await self._ask(functools.partial(self._logins.current, login)):
                await _plain(send, 401, "Log in first.\n")
                return
            await self._post(path, login, form, send)
            return
        if method != "GET":
            await _plain(send, 405, "Method not allowed.\n")
            return
        csrf = self._logins.csrf(login)
        if path == "/ui/":
            rows, more = await self._waiting(login)
            await _html(send, 200, pages.inbox_page(rows, login, csrf, more=more,
                                                    now=self._host.clock.now()))
        elif path == "/ui/inbox.part":
            rows, more = await self._waiting(login)
            await _html(send, 200, pages.inbox_part(rows, login, csrf, more=more,
                                                    now=self._host.clock.now()))
        elif path == "/ui/history":
            await self._history(scope, login, csrf, send)
        elif path == "/ui/overview":
            overview = await self._overview(login)
            await _html(send, 200, pages.overview_page(overview, login, csrf))
        elif found_file := _FILE.fullmatch(path):
            await self._file(found_file.group(1), found_file.group(2), login, send)
        elif (found := _CALL.fullmatch(path)) and found.group(2) is None:
            row = await self._row(found.group(1), login)
            if row is None:
                await _plain(send, 404, "Not found.\n")
            else:
                await _html(send, 200, pages.call_page(row, login, csrf,
                                                       described=await self._described(row),
                                                       now=self._host.clock.now()))
        else:
            await _plain(send, 404, "Not found.\n")

    # ------------------------------------------------------------------ reading

    async def _described(self, row: InvocationRecord) -> tuple[str, list[str]] | None:
        """What a waiting call's tool says it will do (``Host.describe_call``), read off the
        loop (a plugin reads its own store); a decided call is not described: nobody decides it."""
        if row.state is not InvocationState.AWAITING_APPROVAL:
            return None
        return await anyio.to_thread.run_sync(self._host.describe_call, row)

    async def _waiting(self, login: Login) -> tuple[Sequence[InvocationRecord], bool]:
        """This person's waiting calls (everyone's for an admin), the newest WAITING_SHOWN,
        newest first, and whether older ones wait beyond them: one read of the record per
        poll, whatever the number waiting (through the open-state index)."""
        rows = await self._ask(functools.partial(
            self._host.invocations.history, limit=WAITING_SHOWN + 1, principal_id=login.whose,
            state=InvocationState.AWAITING_APPROVAL))
        return rows[:WAITING_SHOWN], len(rows) > WAITING_SHOWN

    async def _row(self, invocation_id: str, login: Login) -> InvocationRecord | None:
        try:
            row = await self._ask(functools.partial(self._host.row, invocation_id),
                                  InvocationNotFound, InvocationRecordDamaged)
        except InvocationNotFound:
            return None
        except InvocationRecordDamaged as damaged:
            # Changed behind the store's back (D415): whose it is cannot be read, so it is
            # answered as a call not this login's (as a damaged file record is, D252).
            self._log.warning("http.inbox.record_damaged", invocation_id=damaged.id,
                              field=damaged.field)
            return None
        return row if login.may_see(row.principal_id) else None

    async def _history(self, scope: dict[str, Any], login: Login, csrf: str,
                       send: Send) -> None:
        one = {name: value.strip() for name, value in _query(scope).items()}
        hours = one.get("hours", "")
        chosen = pages.HistoryFilter(
            tool=one.get("tool", "")[:200], status=one.get("status", ""),
            reason=one.get("reason", "")[:200],
            hours=int(hours) if hours.isascii() and hours.isdigit() and len(hours) <= 6
            else 0)
        try:
            state = InvocationState(chosen.status) if chosen.status else None
        except ValueError:
            state = None
        before = one.get("before") or None
        if before is not None and await self._row(before, login) is None:
            # Paged from a row this person may not see (or that is gone): answered as for a
            # missing one, and the page starts over.
            await _redirect(send, f"/ui/history?{chosen.query()}")
            return
        since = (self._host.clock.now() - dt.timedelta(hours=chosen.hours)
                 if chosen.hours else None)

        def read() -> Sequence[InvocationRecord]:
            return self._host.invocations.history(
                limit=pages.HISTORY_SHOWN + 1, before=before,
                principal_id=login.whose, tool_name=chosen.tool or None, state=state,
                reason_code=chosen.reason or None, since=since)

        try:
            rows = await self._ask(read, InvocationNotFound)
        except InvocationNotFound:  # a page anchored on a row that is gone: start again
            await _redirect(send, f"/ui/history?{chosen.query()}")
            return
        more = len(rows) > pages.HISTORY_SHOWN
        await _html(send, 200, pages.history_page(rows[:pages.HISTORY_SHOWN], login, csrf,
                                                  chosen, more))

    async def _overview(self, login: Login) -> Overview:
        """The last OVERVIEW_ROWS calls this person may see, summed up (off the loop): read
        again at most every OVERVIEW_FRESH_S for each principal (everyone's, for an admin), so
        a page reloaded in a loop costs one read of the record, not one each."""
        whose = login.whose
        now = self._host.deadline_in(0)
        kept = self._overviews.get(whose)
        if kept is not None and now - kept[0] < OVERVIEW_FRESH_S:
            return kept[1]
        rows = await self._ask(functools.partial(self._host.invocations.history,
                                                 limit=OVERVIEW_ROWS, principal_id=whose))
        overview = await anyio.to_thread.run_sync(summarize, rows, self._host.clock.now())
        if len(self._overviews) >= OVERVIEWS_KEPT:
            self._overviews.clear()
        self._overviews[whose] = (now, overview)
        return overview

    async def _file(self, invocation_id: str, artifact_id: str, login: Login,
                    send: Send) -> None:
        """A file the call exported or generated, as a download, after the resolver's checks
        for the call's own principal, run and conversation (as its MCP client would read it),
        verified whole before a byte is sent."""
        row = await self._row(invocation_id, login)
        if row is None or artifact_id not in pages.files_of(row):
            await _plain(send, 404, "Not found.\n")
            return
        try:
            name, content = await anyio.to_thread.run_sync(self._read_file, row, artifact_id)
        except ArtifactUnavailable as refused:
            self._log.info("http.inbox.file_refused", reason=refused.reason)
            words = ("Too large to download here: toolhost artifacts get on the host.\n"
                     if refused.reason == "too_large" else "Not available.\n")
            await _plain(send, 404, words)
            return
        except ArtifactError as exc:
            self._log.warning("http.inbox.file_failed", error=type(exc).__name__)
            await _plain(send, 503, "The file store did not answer; try again.\n")
            return
        # The browser saves the file under this name, a model's or a plugin's choice.
        shown = handed_over_name(name, artifact_id)
        if shown != name:
            self._log.info("http.inbox.file_renamed")
        disposition = "attachment; filename*=UTF-8''" + urllib.parse.quote(shown, safe="")
        await _answer(send, 200, content, "application/octet-stream",
                      extra=[(b"content-disposition", disposition.encode("ascii"))],
                      csp=_FILE_CSP)

    def _read_file(self, row: InvocationRecord, artifact_id: str) -> tuple[str, bytes]:
        record = self._host.artifact_resolver().resolve(  # a damaged record: unavailable
            artifact_id, principal_id=row.principal_id, run_id=row.run_id,
            conversation_id=row.conversation_id)
        if record.size > MAX_RESOURCE_BYTES:
            raise ArtifactUnavailable(artifact_id, "too_large")
        try:
            with self._host.artifacts.read_chunks(record.id) as chunks:
                return record.name, b"".join(chunks)
        except (ArtifactCorrupted, ArtifactNotFound):
            raise ArtifactUnavailable(artifact_id, "corrupted") from None

    async def _ask(self, ask: Callable[[], _R], *answers: type[Exception]) -> _R:
        """``ask()`` off the loop, a read or write of the record (or of the logins it keeps),
        always before the request is answered: an exception in ``answers`` is the record's
        answer, raised as it is; any other is its store's failure, raised as ``_RecordSilent``
        for ``__call__`` to answer.

        :raises _RecordSilent: the store failed (an outage, a lock held past the wait, ...).
        """
        try:
            return await anyio.to_thread.run_sync(ask)
        except answers:
            raise
        except Exception as exc:
            raise _RecordSilent(exc) from exc

    # ------------------------------------------------------------------ deciding

    async def _post(self, path: str, login: Login, form: dict[str, str], send: Send) -> None:
        if path == "/ui/logout":
            # The record away, this browser is logged out anyway (``__call__`` says so).
            await self._ask(functools.partial(self._logins.end, login))
            await _redirect(send, "/ui/login", cookie=_clear_cookie())
            return
        found = _CALL.fullmatch(path)
        if found is None or found.group(2) is None:
            await _plain(send, 404, "Not found.\n")
            return
        invocation_id, action = found.group(1), found.group(2)
        row = await self._row(invocation_id, login)
        if row is None:
            await _plain(send, 404, "Not found.\n")
            return
        if not login.may_decide(row.principal_id):
            self._log.info("http.inbox.refused", reason="may_not_decide")
            await _html(send, 403, pages.call_page(row, login, self._logins.csrf(login), (
                "This login may look, not decide: log in with a token of yours that has "
                f"the {DECIDE_SCOPE} scope (never the one your MCP client holds)."),
                described=await self._described(row), now=self._host.clock.now()))
            return
        approver = f"inbox:{login.principal.id}"
        message = None
        try:
            if row.state is not InvocationState.AWAITING_APPROVAL:
                message = "The call was decided already."
            elif action == "approve":
                message = await self._not_run(row, login)
                if message is None:
                    with self._admit(login.principal.id) as refused:
                        if refused is not None:  # the server stops, or too many calls
                            await _plain(send, *refused)
                            return
                        if not await self._run_approved(invocation_id, approver):
                            message = "The call was decided already."
            else:
                # A browser sends a line break as CRLF: counted as the person typed it.
                reason = form.get("reason", "").replace("\r\n", "\n").strip()
                if not reason or len(reason) > pages.REASON_CHARS:
                    await _plain(send, 400, "A reason of 1 to 1000 characters is required.\n")
                    return
                denied = await self._ask(functools.partial(
                    self._host.denial, invocation_id, approver, reason), ToolhostError)
                if not denied.acted:  # another denial came first; its reason stands
                    message = "The call was decided already."
        except ApprovalRefused:
            message = "This host cannot run that tool; approve it where the tool is installed."
        except InvocationStateError:
            message = "The call was decided already."
        except (ToolhostError, _RecordSilent) as exc:
            # The store did not take the decision (an approval's failure is wrapped as
            # ApprovalNotRecorded, a denial's is the store's own): the call still waits.
            self._log.warning("http.inbox.decision_failed", invocation_id=invocation_id,
                              error=exc.error if isinstance(exc, _RecordSilent)
                              else type(exc).__name__)
            message = "The decision could not be recorded; try again."
        if message is not None:
            fresh = await self._row(invocation_id, login) or row
            await _html(send, 409, pages.call_page(fresh, login, self._logins.csrf(login),
                                                   message, await self._described(fresh),
                                                   now=self._host.clock.now()))
            return
        await _redirect(send, f"/ui/calls/{invocation_id}")

    async def _not_run(self, row: InvocationRecord, login: Login) -> str | None:
        """Why an Approve sent now would not run the call, asked before the row is taken (as
        ``toolhost approve`` asks), so the call stays waiting for a Deny or a later approval:
        past the run's deadline (a page loaded before it, D519), the operator's directory it
        paused in no longer passing (D516), or its run live elsewhere (D559; the paths only to
        an admin, D458). None: it runs.

        :raises _RecordSilent: the run's registry did not answer.
        """
        if pages.past_deadline(row, self._host.clock.now()):
            return pages.PAST_DEADLINE
        refused = await self._ask(functools.partial(self._host.approval_refused, row))
        if refused is None:
            return None
        if login.admin:
            return f"{_NOT_RUN}: {refused.line}."
        # The remedy `toolhost approve` gives, without the paths (D458).
        return (f"{_NOT_RUN}: {refused.pathless}." if refused.pathless is not None
                else f"{_NOT_RUN}: {_DIRECTORY_REFUSED}")

    async def _run_approved(self, invocation_id: str, approver: str) -> bool:
        """Run the approved call here, cancelled (and its row ended so) when a stopping
        server's drain time is up (``cancel``); whether this approval acted, not another
        decision that came first."""
        cancellation = CancellationEvent()
        self._running.add(cancellation)
        try:
            resumed = await self._host.resume(invocation_id, approver, cancellation=cancellation)
        finally:
            self._running.discard(cancellation)
        return resumed.acted

    async def _form(self, receive: Any, send: Send) -> dict[str, str] | None:
        """The request's form; None once it was answered 413 (too large) or 408 (too slow,
        as the front door answers a slow MCP body)."""
        try:
            with anyio.fail_after(self._body_timeout_s):
                form = await _read_form(receive)
        except TimeoutError:
            await _plain(send, 408, "Request body too slow.\n")
            return None
        if form is None:
            await _plain(send, 413, "Form too large.\n")
        return form

    def cancel(self) -> None:
        """A stopping server's drain time is up: the approved calls still running here are
        cancelled (each records its cancellation)."""
        for cancellation in list(self._running):
            cancellation.cancel()

    # ------------------------------------------------------------------ logging in

    async def _log_in(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if not _from_own_page(scope):
            # A browser's form POST always says where it comes from. An allowed origin is not
            # enough: the default allows every loopback port, and a page on another port can
            # set the login form's cookie for this one (cookies are not kept apart by port).
            self._log.info("http.inbox.refused", reason="login_origin")
            await _plain(send, 403, "Log in from this server's own login page.\n")
            return
        form = await self._form(receive, send)
        if form is None:
            return
        if not self._logins.before_login_holds(_cookie(scope, BEFORE_COOKIE), form.get("csrf")):
            self._log.info("http.inbox.refused", reason="login_csrf")
            await self._login_page(scope, send, 403, "The login form is stale or did not come "
                                                     "from this page. Try again.")
            return
        token = form.get("token", "").strip()
        try:
            caller = await self._verify(token) if token else None
        except IntrospectionBusy:
            await self._login_page(scope, send, 503, _LOGINS_BUSY)
            return
        if caller is None:
            self._log.info("http.inbox.refused", reason="login")
            await self._login_page(scope, send, 401, "That token is not valid here.")
            return
        if not self._logins.admit(caller.principal.id):
            self._log.info("http.inbox.refused", reason="logins_per_hour")
            await self._login_page(scope, send, 429, _TOO_MANY_LOGINS)
            return
        cookie = self._login_cookie(scope, caller, token)
        if cookie is None:
            await self._login_page(scope, send, 401, _NO_EXPIRY)
            return
        self._log.info("http.inbox.login", principal=caller.principal.id, by="token")
        await _redirect(send, "/ui/", cookie=cookie)

    async def _start_flow(self, scope: dict[str, Any], send: Send, oauth: InboxOAuth) -> None:
        """To the issuer's authorization endpoint: a code for this server's resource, bound
        to a PKCE verifier and a state that only this browser's flow cookie holds."""
        state, verifier, cookie = self._logins.flow()
        query = urllib.parse.urlencode({
            "response_type": "code", "client_id": oauth.client_id,
            "redirect_uri": oauth.redirect_uri, "code_challenge": code_challenge(verifier),
            "code_challenge_method": "S256", "state": state, "resource": oauth.resource,
            # Asked for, so an issuer that grants only what is asked can grant it.
            "scope": DECIDE_SCOPE})
        separator = "&" if "?" in oauth.authorize_url else "?"
        # Lax, not Strict: it must come back on the issuer's redirect, a cross-site navigation.
        flow = _set_cookie(FLOW_COOKIE, cookie, "/ui/login", FLOW_S, self._secure(scope),
                           same_site="Lax")
        await _redirect(send, f"{oauth.authorize_url}{separator}{query}", cookie=flow)

    async def _end_flow(self, scope: dict[str, Any], send: Send, oauth: InboxOAuth) -> None:
        """The issuer's answer: the code exchanged (with the verifier) for a token, which is
        verified as every bearer token is, then a login like a token's."""
        one = _query(scope)
        verifier = self._logins.read_flow(_cookie(scope, FLOW_COOKIE), one.get("state"))
        if verifier is None:
            await self._flow_failed(scope, send, 400, "That login did not start here, or "
                                    "took too long. Try again.", "flow_state")
            return
        code = one.get("code")
        if not code or "error" in one:
            await self._flow_failed(scope, send, 401, "The issuer did not log you in.",
                                    "flow_denied")
            return
        token = None
        with anyio.move_on_after(EXCHANGE_WAIT_S):
            # Anyone may send a callback with a made-up code: its POST to the issuer takes
            # one of EXCHANGING threads of its own, never the ones the pages and tools use.
            token = await anyio.to_thread.run_sync(self._exchange, oauth, code, verifier,
                                                   limiter=self._exchanging)
        try:
            caller = await self._verify(token) if token is not None else None
        except IntrospectionBusy:
            await self._flow_failed(scope, send, 503, _LOGINS_BUSY, "flow_busy")
            return
        if caller is None or token is None:
            await self._flow_failed(scope, send, 401, "The issuer's answer did not log you in.",
                                    "flow_token")
            return
        if not self._logins.admit(caller.principal.id):
            await self._flow_failed(scope, send, 429, _TOO_MANY_LOGINS, "flow_logins_per_hour")
            return
        cookie = self._login_cookie(scope, caller, token)
        if cookie is None:
            await self._flow_failed(scope, send, 401, _NO_EXPIRY, "flow_no_expiry")
            return
        self._log.info("http.inbox.login", principal=caller.principal.id, by="issuer")
        await _answer(send, 200, pages.logged_in_page().encode("utf-8"), _HTML, extra=[
            (b"set-cookie", cookie.encode()),
            (b"set-cookie", _set_cookie(FLOW_COOKIE, "", "/ui/login", 0, False,
                                        same_site=None).encode())])

    def _exchange(self, oauth: InboxOAuth, code: str, verifier: str) -> str | None:
        """The access token the issuer gives for ``code`` (RFC 6749 4.1.3 with RFC 7636's
        verifier, a public client); None when it gives none."""
        if self._post_form is None:
            return None
        try:
            answer = json.loads(self._post_form(oauth.token_url, {
                "grant_type": "authorization_code", "code": code,
                "redirect_uri": oauth.redirect_uri, "client_id": oauth.client_id,
                "code_verifier": verifier, "resource": oauth.resource}, None, 64 * 1024))
        except Exception as exc:  # the issuer refused, or is away: the person tries again
            self._log.warning("http.inbox.token_request_failed", error=type(exc).__name__)
            return None
        token = answer.get("access_token") if isinstance(answer, dict) else None
        return token if isinstance(token, str) and token else None

    async def _flow_failed(self, scope: dict[str, Any], send: Send, status: int, words: str,
                           reason: str) -> None:
        self._log.info("http.inbox.refused", reason=reason)
        await self._login_page(scope, send, status, words)

    async def _login_page(self, scope: dict[str, Any], send: Send, status: int,
                          problem: str | None = None) -> None:
        """The login form, with a fresh CSRF token and the cookie it must come back with."""
        csrf, cookie = self._logins.before_login()
        page = pages.login_page(csrf, problem, through_issuer=self._oauth is not None)
        header = _set_cookie(BEFORE_COOKIE, cookie, "/ui/login", FLOW_S, self._secure(scope))
        await _answer(send, status, page.encode("utf-8"), _HTML,
                      extra=[(b"set-cookie", header.encode())])

    def _login_cookie(self, scope: dict[str, Any], caller: Caller, token: str) -> str | None:
        """The login cookie's header value; None for a token that cannot make a login."""
        value = self._logins.issue(caller, token)
        if value is None:
            return None
        return _set_cookie(COOKIE, value, "/ui", LOGIN_S, self._secure(scope))

    def _secure(self, scope: dict[str, Any]) -> bool:
        """Whether cookies are ``Secure``: the request came over TLS, the server's public
        URL is https, or the page that sent it is (its ``Origin``, which the front door
        allowed and a login POST must carry): TLS ending at a proxy on another machine is
        neither in the ASGI scheme nor, with a token file, in any URL of ours."""
        return (scope.get("scheme") == "https" or self._public_https
                or _page_origin(scope).startswith("https://"))

    async def _static(self, method: str, name: str, send: Send) -> None:
        kind = _STATIC.get(name)
        if method != "GET" or kind is None:
            await _plain(send, 404, "Not found.\n")
            return
        body = importlib.resources.files("toolhost._mcp.inbox").joinpath(
            "static", name).read_bytes()
        await _answer(send, 200, body, kind, cache="private, max-age=300")


def _clear_cookie() -> str:
    return _set_cookie(COOKIE, "", "/ui", 0, False)


def _set_cookie(name: str, value: str, path: str, max_age: int, secure: bool, *,
                same_site: str | None = "Strict") -> str:
    """A ``Set-Cookie`` value of the inbox's: never readable by a script."""
    return (f"{name}={value}; Path={path}; HttpOnly"
            + (f"; SameSite={same_site}" if same_site else "") + f"; Max-Age={max_age}"
            + ("; Secure" if secure else ""))


def _cookie(scope: dict[str, Any], wanted: str) -> str | None:
    """Cookie ``wanted``'s value (``__call__`` refused a request carrying it twice)."""
    values = _cookie_values(scope, wanted)
    return values[0] if values else None


def _cookie_values(scope: dict[str, Any], wanted: str) -> list[str]:
    """Every value of cookie ``wanted`` the request carries, in every Cookie header."""
    return [value for key, raw in scope.get("headers", ()) if key.lower() == b"cookie"
            for name, _, value in (part.strip().partition("=")
                                   for part in raw.decode("latin-1").split(";"))
            if name == wanted]


def _from_own_page(scope: dict[str, Any]) -> bool:
    """Whether a POST came from a page of this server: its ``Origin`` (else its ``Referer``'s
    origin) has the request's Host, and its scheme, or https (TLS ended by a proxy in front,
    which a page of another port on the machine cannot be)."""
    scheme, separator, authority = _page_origin(scope).partition("://")
    host = (first_header(scope.get("headers", ()), b"host") or "").lower()
    if not (separator and host) or scheme not in (scope.get("scheme", "http"), "https"):
        return False
    default = ":443" if scheme == "https" else ":80"
    return authority.removesuffix(default) == host.removesuffix(default)


def _page_origin(scope: dict[str, Any]) -> str:
    """The origin of the page a request came from, lower case: its ``Origin``, else its
    ``Referer``'s scheme and authority; "" when it says neither."""
    headers = scope.get("headers", ())
    origin = first_header(headers, b"origin")
    if origin is None:
        referer = urllib.parse.urlsplit(first_header(headers, b"referer") or "")
        origin = f"{referer.scheme}://{referer.netloc}" if referer.netloc else ""
    return origin.lower()


def _query(scope: dict[str, Any]) -> dict[str, str]:
    """The query string's fields, each name's first value; none for more fields than any of
    our pages takes."""
    try:
        fields = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"),
                                       max_num_fields=8)
    except ValueError:
        return {}
    return {name: values[0] for name, values in fields.items()}


async def _read_form(receive: Any) -> dict[str, str] | None:
    """An urlencoded form body, at most ``_FORM_BYTES``; None past it."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if len(body) > _FORM_BYTES:
            return None
        if not message.get("more_body", False):
            break
    try:
        fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"), max_num_fields=16)
    except ValueError:  # more fields than any of our forms has
        return {}
    return {name: values[0] for name, values in fields.items()}


async def _answer(send: Send, status: int, body: bytes, kind: str, *,
                  cache: str = "no-store", extra: Sequence[tuple[bytes, bytes]] = (),
                  csp: str = CSP) -> None:
    headers = [
        (b"content-type", kind.encode()), (b"content-length", str(len(body)).encode()),
        (b"content-security-policy", csp.encode()), (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"),
        (b"cache-control", cache.encode()), *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _html(send: Send, status: int, page: str) -> None:
    await _answer(send, status, page.encode("utf-8"), _HTML)


async def _logged_out_here_only(send: Send) -> None:
    await _answer(send, 503, _LOGOUT_NOT_KEPT.encode(), "text/plain; charset=utf-8",
                  extra=[(b"set-cookie", _clear_cookie().encode())])


async def _plain(send: Send, status: int, words: str) -> None:
    await _answer(send, status, words.encode("utf-8"), "text/plain; charset=utf-8")


async def _redirect(send: Send, to: str, *, cookie: str | None = None) -> None:
    extra = [(b"location", to.encode())]
    if cookie is not None:
        extra.append((b"set-cookie", cookie.encode()))
    await _answer(send, 303, b"", "text/plain; charset=utf-8", extra=extra)
