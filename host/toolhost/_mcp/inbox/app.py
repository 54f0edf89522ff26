"""The inbox's requests: who is asking, then one handler per route (D314).

Routes (every one under ``/ui/``; the front door has checked Host and Origin already):

    GET  /ui/login            the login form         POST /ui/login    a token -> a cookie
    POST /ui/logout           the cookie cleared
    GET  /ui/                 the calls waiting for this person's decision, newest first
    GET  /ui/inbox.part       the same list alone (what ``static/ui.js`` polls)
    GET  /ui/calls/ID         one call                POST /ui/calls/ID/approve|deny
    GET  /ui/static/NAME      the script and the style sheet

A request acts for the bearer token it sends (verified by the front door, as for MCP) or else
for its login cookie (``login``); a page asked for without either is sent to the login form.
Every POST of a cookie's login carries that login's CSRF token (``csrf`` form field), and a
login POST carries an ``Origin`` (a browser's form always does). A person sees and decides
only their own principal's calls; ``approvals.admin`` sees everyone's. A call that is not
theirs is answered exactly as one that does not exist. Every answer carries a strict
Content-Security-Policy (no inline script or style, no framing), ``nosniff``,
``same-origin`` referrers (a browser then still sends ``Origin`` on our own forms) and
``no-store``.
"""

from __future__ import annotations

import importlib.resources
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import anyio.to_thread

from toolhost._composition import (
    ApprovalRefused,
    Host,
    InvocationNotFound,
    InvocationRecord,
    InvocationState,
    InvocationStateError,
    ToolhostError,
    get_logger,
)
from toolhost._mcp.http_auth import Caller
from toolhost._mcp.inbox import pages
from toolhost._mcp.inbox.login import LOGIN_S, Login, Logins

__all__ = ["COOKIE", "CSP", "WAITING_SHOWN", "Inbox"]

COOKIE: Final = "toolhost_inbox"
CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
              "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
#: The most waiting calls the inbox lists at once (the oldest beyond it wait their turn).
WAITING_SHOWN: Final = 200
#: The largest form body the inbox reads (a deny reason is at most 1,000 characters).
_FORM_BYTES: Final = 16 * 1024
_STATIC: Final = {"ui.js": "text/javascript; charset=utf-8", "ui.css": "text/css; charset=utf-8"}
_CALL: Final = re.compile(r"^/ui/calls/([0-9a-f]{32})(?:/(approve|deny))?$")
_HTML: Final = "text/html; charset=utf-8"

Send = Callable[[dict[str, Any]], Awaitable[None]]
Verify = Callable[[str], Awaitable[Caller | None]]


class Inbox:
    """The ASGI app under ``/ui/``; the front door calls it with the bearer token's caller."""

    def __init__(self, host: Host, logins: Logins, verify: Verify) -> None:
        self._host = host
        self._logins = logins
        self._verify = verify
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
        if path == "/ui/login":
            if method == "POST":
                await self._log_in(scope, receive, send)
            else:
                await _html(send, 200, pages.login_page())
            return
        login = (Login(caller.principal) if caller is not None
                 else self._logins.read(_cookie(scope)))
        if login is None:
            if method == "GET":
                await _redirect(send, "/ui/login")
            else:
                await _plain(send, 401, "Log in first.\n")
            return
        if method == "POST":
            form = await _form(receive)
            if form is None:
                await _plain(send, 413, "Form too large.\n")
                return
            if not self._logins.csrf_holds(login, form.get("csrf")):
                self._log.info("http.inbox.refused", reason="csrf")
                await _plain(send, 403, "The form is stale or did not come from this page. "
                                        "Reload and try again.\n")
                return
            await self._post(path, login, form, send)
            return
        if method != "GET":
            await _plain(send, 405, "Method not allowed.\n")
            return
        csrf = self._logins.csrf(login)
        if path == "/ui/":
            await _html(send, 200, pages.inbox_page(await self._waiting(login), login, csrf))
        elif path == "/ui/inbox.part":
            await _html(send, 200, pages.inbox_part(await self._waiting(login), login, csrf))
        elif (found := _CALL.match(path)) and found.group(2) is None:
            row = await self._row(found.group(1), login)
            if row is None:
                await _plain(send, 404, "Not found.\n")
            else:
                await _html(send, 200, pages.call_page(row, login, csrf))
        else:
            await _plain(send, 404, "Not found.\n")

    # ------------------------------------------------------------------ reading

    async def _waiting(self, login: Login) -> list[InvocationRecord]:
        """This person's waiting calls (everyone's for an admin), newest first."""
        def read() -> list[InvocationRecord]:
            store = self._host.invocations
            principal = None if login.admin else login.principal.id
            listed = store.pending(limit=WAITING_SHOWN, principal_id=principal)
            return [store.get(p.id) for p in listed]

        rows = await anyio.to_thread.run_sync(read)
        return sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)

    async def _row(self, invocation_id: str, login: Login) -> InvocationRecord | None:
        try:
            row = await anyio.to_thread.run_sync(self._host.row, invocation_id)
        except InvocationNotFound:
            return None
        return row if login.may_see(row.principal_id) else None

    # ------------------------------------------------------------------ deciding

    async def _post(self, path: str, login: Login, form: dict[str, str], send: Send) -> None:
        if path == "/ui/logout":
            await _redirect(send, "/ui/login", cookie=_clear_cookie())
            return
        found = _CALL.match(path)
        if found is None or found.group(2) is None:
            await _plain(send, 404, "Not found.\n")
            return
        invocation_id, action = found.group(1), found.group(2)
        row = await self._row(invocation_id, login)
        if row is None:
            await _plain(send, 404, "Not found.\n")
            return
        approver = f"inbox:{login.principal.id}"
        message = None
        try:
            if row.state is not InvocationState.AWAITING_APPROVAL:
                message = "The call was decided already."
            elif action == "approve":
                if not (await self._host.resume(invocation_id, approver)).acted:
                    message = "The call was decided already."
            else:
                reason = form.get("reason", "").strip()
                if not reason or len(reason) > pages.REASON_CHARS:
                    await _plain(send, 400, "A reason of 1 to 1000 characters is required.\n")
                    return
                await anyio.to_thread.run_sync(self._host.deny, invocation_id, approver, reason)
        except ApprovalRefused:
            message = "This host cannot run that tool; approve it where the tool is installed."
        except InvocationStateError:
            message = "The call was decided already."
        except ToolhostError as exc:
            self._log.warning("http.inbox.decision_failed", invocation_id=invocation_id,
                              error=type(exc).__name__)
            message = "The decision could not be recorded; try again."
        if message is not None:
            fresh = await self._row(invocation_id, login) or row
            await _html(send, 409, pages.call_page(fresh, login, self._logins.csrf(login),
                                                   message))
            return
        await _redirect(send, f"/ui/calls/{invocation_id}")

    # ------------------------------------------------------------------ logging in

    async def _log_in(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if _header(scope, b"origin") is None:
            # A browser's form POST always says where it comes from; the front door has
            # checked that it is an allowed origin.
            await _plain(send, 403, "Log in from the login page.\n")
            return
        form = await _form(receive)
        token = (form or {}).get("token", "").strip()
        caller = await self._verify(token) if token else None
        if caller is None:
            self._log.info("http.inbox.refused", reason="login")
            await _html(send, 401, pages.login_page("That token is not valid here."))
            return
        secure = scope.get("scheme") == "https"
        cookie = (f"{COOKIE}={self._logins.issue(caller, token)}; Path=/ui; HttpOnly; "
                  f"SameSite=Strict; Max-Age={LOGIN_S}" + ("; Secure" if secure else ""))
        self._log.info("http.inbox.login", principal=caller.principal.id)
        await _redirect(send, "/ui/", cookie=cookie)

    async def _static(self, method: str, name: str, send: Send) -> None:
        kind = _STATIC.get(name)
        if method != "GET" or kind is None:
            await _plain(send, 404, "Not found.\n")
            return
        body = importlib.resources.files("toolhost._mcp.inbox").joinpath(
            "static", name).read_bytes()
        await _answer(send, 200, body, kind, cache="private, max-age=300")


def _clear_cookie() -> str:
    return f"{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _cookie(scope: dict[str, Any]) -> str | None:
    raw = _header(scope, b"cookie")
    if raw is None:
        return None
    for part in raw.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


async def _form(receive: Any) -> dict[str, str] | None:
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
                  cache: str = "no-store", extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    headers = [
        (b"content-type", kind.encode()), (b"content-length", str(len(body)).encode()),
        (b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"),
        (b"cache-control", cache.encode()), *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _html(send: Send, status: int, page: str) -> None:
    await _answer(send, status, page.encode("utf-8"), _HTML)


async def _plain(send: Send, status: int, words: str) -> None:
    await _answer(send, status, words.encode("utf-8"), "text/plain; charset=utf-8")


async def _redirect(send: Send, to: str, *, cookie: str | None = None) -> None:
    extra = [(b"location", to.encode())]
    if cookie is not None:
        extra.append((b"set-cookie", cookie.encode()))
    await _answer(send, 303, b"", "text/plain; charset=utf-8", extra=extra)
