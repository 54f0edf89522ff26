"""The front door of ``toolhost serve --http``: what every request meets before MCP does.

In order, for each request:

1. ``GET /healthz`` (the process answers) and ``GET /readyz`` (the record and the artifact
   store answer) without authentication, and without a word about why not;
   ``GET /.well-known/oauth-protected-resource[/mcp]`` (RFC 9728) when an issuer is set.
2. ``Host`` and ``Origin`` against their allow-lists, whatever address the server is bound
   to: a web page in a browser (DNS rebinding included) cannot drive the server. A wrong Host
   is ``421``, a forbidden Origin ``403``; a request without Origin (not a browser) passes.
3. The bearer token, when the operator configured a token file or an issuer (``http_auth``):
   none, or one that does not verify, is ``401`` with ``WWW-Authenticate`` (naming the RFC 9728
   metadata where there is some). Nothing runs and nothing is recorded; a counter of refusals
   by reason is kept. ``GET /metrics`` (the Prometheus scrape) is answered here, after the
   token: protected exactly as MCP is.
4. A POST's body, read up to ``TOOLHOST_HTTP_MAX_BODY_BYTES`` (``413`` past it) and within
   its principal's body budget (twice that, over all its requests in flight: ``429`` past it,
   D333), its JSON values counted before it is parsed as a stdio line's are (``413`` with
   stdio's ``-32700`` past ``frames.MAX_FRAME_VALUES``), then: a
   request with an unusable id, a batch, or any frame stdio would not read is ``-32600``
   (``400``), as on stdio; a request the SDK's parse cannot read though it is JSON (a lone
   surrogate escape) is ``-32602`` with its id (``400``); a ``tools/call`` takes one of its principal's
   ``TOOLHOST_HTTP_MAX_CALLS`` slots, or is ``429`` with ``Retry-After`` before any row is
   written. The slot is held until the call ends, not only while its request is open
   (``CallSlot``): a client that drops the POST has not cancelled the call.

The request then reaches the SDK's app with the caller in its scope: ``scope["user"]`` in the
SDK's own type, so the SDK binds each session to the credential that opened it (another token
gets "Session not found"), and ``scope["toolhost.caller"]`` for the server's sessions. A
session's ``DELETE`` and the notifications and answers POSTed to it take turns there
(``_SessionOrder``): the SDK answers those ``202`` before it hands them to the session.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import ipaddress
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import anyio
import anyio.to_thread
import attrs
import mcp.types as types
import pydantic_core
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from pydantic import ValidationError

from toolhost._composition import METRICS_CONTENT_TYPE, RoutesUnavailable, get_logger
from toolhost._mcp.descriptors import OncePerInterval, running_short
from toolhost._mcp.frames import (
    MAX_FRAME_VALUES,
    TooManyValues,
    UnusableRequestId,
    error_for_frame,
    has_unusable_id,
    holds_too_many_values,
    unreadable_reply,
)
from toolhost._mcp.http_auth import Caller, JwtVerifier, TokenFile, bearer_token
from toolhost._mcp.http_introspection import (
    IntrospectionBusy,
    IntrospectionUnavailable,
    TokenIntrospector,
)
from toolhost._mcp.http_routes import NotServedHere, Router, route_key

__all__ = [
    "BUSY_MESSAGE",
    "CALLER_KEY",
    "CALL_SLOT_KEY",
    "OPENING_KEY",
    "CallSlot",
    "FrontDoor",
    "HttpPolicy",
    "Opening",
    "handler_slot",
    "host_allowed",
    "origin_allowed",
]

#: Introspection requests to the issuer at once, and how long a request waits for its
#: token's answer before it is refused (401).
INTROSPECTING = 8
INTROSPECTION_WAIT_S = 10.0
#: Requests that may wait for a token's introspection at once; more are answered 503 at once
#: (D331): unknown tokens, sent by anyone, otherwise each held a connection for the wait.
INTROSPECTION_QUEUE = 32

#: Seconds between two checks of an open GET's token (an event stream lasts as long as its
#: client keeps it: checked only when it opened, a revoked token's stream never ended, and
#: kept its session from idling out).
STREAM_RECHECK_S: Final = 5.0

#: The longest a session's DELETE waits for the notifications and answers being handed to it,
#: and one of those for a DELETE under way (``_SessionOrder``); each takes milliseconds.
HANDOVER_WAIT_S: Final = 5.0

#: Where the verified caller rides in the ASGI scope.
CALLER_KEY = "toolhost.caller"
#: Where an authenticated ``initialize`` carries its ``Opening`` to the SDK's handler.
OPENING_KEY = "toolhost.opening"
#: Where a ``tools/call`` carries its ``CallSlot`` to the call's handler.
CALL_SLOT_KEY = "toolhost.call_slot"
#: The answers a refused request gets: static, and short.
_TEXT = "text/plain; charset=utf-8"

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]],
                    Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]


@attrs.frozen
class HttpPolicy:
    """What the front door enforces (``toolhost._mcp.config.HttpConfig`` reads it from the
    settings)."""

    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    max_body_bytes: int
    max_calls: int
    #: Seconds a request's body may take to arrive (a body held open is 408).
    body_timeout_s: float = 30.0
    #: MCP sessions one authenticated principal may have open on this host (a new one past
    #: it: 429), so that no one person's client can take every session the host serves.
    max_sessions_per_principal: int = 100
    tokens: TokenFile | None = None
    jwt: JwtVerifier | None = None
    introspection: TokenIntrospector | None = None
    #: The RFC 9728 metadata's absolute URL, named in ``WWW-Authenticate``; None: none served.
    metadata_url: str | None = None
    #: The metadata document itself.
    metadata: Mapping[str, Any] | None = None

    @property
    def principal_body_bytes(self) -> int:
        """What the bodies of one principal's requests in flight may hold at once: two of the
        largest (D333). Each body is held, parsed and copied on the one event loop until its
        request ends; without a bound per principal, one token's concurrent largest bodies
        held gigabytes and the loop for seconds."""
        return 2 * self.max_body_bytes

    @property
    def authenticates(self) -> bool:
        return (self.tokens is not None or self.jwt is not None
                or self.introspection is not None)


def _port(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 5


def _pattern_match(value: str, patterns: Iterable[str], *, default_ports: bool = False) -> bool:
    """``value`` is one of ``patterns``, where a pattern ending ``:*`` matches any port; with
    ``default_ports``, a value without a port (a client leaves 80 and 443 out) matches a
    pattern for port 80 or 443 of the same name."""
    value = value.lower()
    for pattern in patterns:
        pattern = pattern.lower()
        if pattern.endswith(":*"):
            base = pattern[:-2]
            if value == base or (value.startswith(base + ":") and _port(value[len(base) + 1:])):
                return True
        elif value == pattern or (default_ports and value + ":443" == pattern) or (
                default_ports and value + ":80" == pattern):
            return True
    return False


def host_allowed(host: str | None, allowed: Iterable[str]) -> bool:
    return host is not None and _pattern_match(host, allowed, default_ports=True)


def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    return origin is None or _pattern_match(origin, allowed)


def loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return address.lower() == "localhost"


class FrontDoor:
    """The ASGI app ``serve --http`` runs: the checks above, then the SDK's app."""

    def __init__(self, app: Any, policy: HttpPolicy, *,
                 ready: Callable[[], bool], monotonic: Callable[[], float],
                 abandoned: Callable[[str], int] = lambda principal: 0,
                 router: Router | None = None, once: OncePerInterval | None = None,
                 open_sessions: Callable[[], int] = lambda: 0,
                 open_sessions_of: Callable[[str], int] = lambda principal: 0,
                 metrics: Callable[[], str] | None = None) -> None:
        self._app = app
        #: ``GET /metrics``: the process's metrics in the Prometheus text format; None: 404.
        self._metrics = metrics
        self._open_sessions = open_sessions
        #: A principal's transport sessions open on this host (``Sessions.open_of``), and
        #: its ``initialize`` requests on their way to becoming one.
        self._open_sessions_of = open_sessions_of
        self._opening: collections.Counter[str] = collections.Counter()
        #: Which log lines about running out are due (one a minute of each kind).
        self._once = once
        #: Several hosts on one record: where each session and sessionless run is served.
        self._router = router
        self._policy = policy
        self._readiness = _Readiness(ready, monotonic)
        # A principal's sync tool bodies that their calls stopped waiting for but that still
        # hold a worker: they count against that principal's calls.
        self._abandoned = abandoned
        #: Refused requests by reason (nothing else of them is kept).
        self.refused: collections.Counter[str] = collections.Counter()
        self._calls: collections.Counter[str] = collections.Counter()
        #: The body bytes each principal's requests in flight hold (D333).
        self._body_bytes: collections.Counter[str] = collections.Counter()
        self._introspecting = anyio.CapacityLimiter(INTROSPECTING)
        self._introspection_waiting = 0
        self._log = get_logger()
        #: Set when the server is stopping: no new call or session; what runs finishes.
        self.draining = False
        #: The approvals inbox under ``/ui/`` (``inbox.app.Inbox``); None: ``/ui/`` is 404.
        self.inbox: Any = None
        #: Each session's DELETE after the notifications and answers handed to it.
        self._order = _SessionOrder()

    @property
    def calls_in_flight(self) -> int:
        """Calls running here, and calls forwarded to another host whose answer is still on
        its way through here: a stopping host waits for both."""
        forwarding = self._router.forwarding if self._router is not None else 0
        return sum(self._calls.values()) + forwarding

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # no websockets: the connection is closed unanswered
        method, path = scope.get("method", ""), scope.get("path", "")
        if method == "GET" and path == "/healthz":
            await _plain(send, 200, "ok\n")
            return
        if method == "GET" and path == "/readyz":
            ready = not self.draining and await self._readiness.answer()
            await _plain(send, 200 if ready else 503, "ready\n" if ready else "not ready\n")
            return
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", ()))
        host = _header(headers, b"host")
        if not host_allowed(host, self._policy.allowed_hosts):
            await self._refuse(send, "host", 421, "Misdirected request.\n")
            return
        if not origin_allowed(_header(headers, b"origin"), self._policy.allowed_origins):
            await self._refuse(send, "origin", 403, "Forbidden origin.\n")
            return
        if path.startswith("/.well-known/oauth-protected-resource"):
            if method == "GET" and self._policy.metadata is not None:
                await _json(send, 200, dict(self._policy.metadata))
            else:
                await _plain(send, 404, "Not found.\n")
            return
        if path == "/ui" or path.startswith("/ui/"):
            await self._inbox(scope, headers, receive, send)
            return
        caller: Caller | None = None
        token = None
        if self._policy.authenticates:
            token = bearer_token(headers)
            try:
                caller = await self.verify(token) if token is not None else None
            except IntrospectionBusy:
                await _issuer_busy(send)
                return
            if caller is None:
                await self._unauthorized(send, presented=token is not None)
                return
            scope = {**scope, "user": _sdk_user(caller), CALLER_KEY: caller}
        if path == "/metrics" and self._metrics is not None:
            # Authenticated like MCP (any valid token; open on loopback when none is
            # configured, as MCP is): the counts name tools and reason codes.
            if method == "GET":
                await _plain(send, 200, self._metrics(), content_type=METRICS_CONTENT_TYPE)
            else:
                await _plain(send, 405, "Method not allowed.\n", extra=[(b"allow", b"GET")])
            return
        if method != "POST":
            served = functools.partial(self._served, scope, headers, caller, receive, method)
            if method == "GET" and token is not None and caller is not None:
                await self._while_valid(token, caller, served, send)
            else:
                await served(send)
            return
        principal = caller.principal.id if caller is not None else ""
        with self._budget(principal) as take:
            await self._post(scope, headers, caller, principal, take, receive, send)

    async def _served(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]],
                      caller: Caller | None, receive: Any, method: str, send: Any) -> None:
        """A request without a body, on the host its session lives on."""
        if not await self._routed(scope, headers, caller, b"", receive, send):
            session = _header(headers, b"mcp-session-id")
            async with (self._order.ending(_principal(caller), session)
                        if method == "DELETE" and session else contextlib.nullcontext()):
                await self._app(scope, receive, self._noting(headers, send, method))

    async def _while_valid(self, token: str, caller: Caller,
                           serve: Callable[[Any], Awaitable[None]], send: Any) -> None:
        """``serve(send)`` (a GET: an event stream) while ``token`` is still ``caller``'s,
        checked again every STREAM_RECHECK_S as a new request would be; ended when it is not
        (removed from the file, scopes changed, expired), so its session, no longer in
        flight, idles out."""
        started = ended = revoked = False

        async def tracking(message: dict[str, Any]) -> None:
            nonlocal started, ended
            started = started or message.get("type") == "http.response.start"
            ended = ended or (message.get("type") == "http.response.body"
                              and not message.get("more_body", False))
            await send(message)

        async def serving(stop: anyio.CancelScope) -> None:
            await serve(tracking)
            stop.cancel()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(serving, group.cancel_scope)
                while True:
                    await anyio.sleep(STREAM_RECHECK_S)
                    if not await self._still(token, caller):
                        break
                revoked = True
                group.cancel_scope.cancel()
        except BaseExceptionGroup as failed:
            # The stream's own failure, as it would have come without the watch beside it.
            if len(failed.exceptions) == 1:
                raise failed.exceptions[0] from None
            raise
        if not revoked:
            return
        self._log.info("http.stream.revoked", principal=caller.principal.id)
        if not started:
            await self._unauthorized(send, presented=True)
        elif not ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _still(self, token: str, caller: Caller) -> bool:
        """Whether ``token`` authenticates as ``caller`` still (principal and scopes: the
        session it opened is bound to both)."""
        try:
            now = await self.verify(token, rechecking=True)
        except (IntrospectionBusy, IntrospectionUnavailable):
            # The issuer said nothing of it (busy, away): asked again next time. Only an
            # answer ends a stream; a new request is still refused while it is away.
            return True
        return now is not None and (now.principal.id, now.fingerprint) == (
            caller.principal.id, caller.fingerprint)

    @contextlib.contextmanager
    def _budget(self, principal: str) -> Iterator[Callable[[int], bool]]:
        """A request's share of ``principal``'s body budget while entered: a ``take(n)`` that
        says whether ``n`` more bytes fit (and counts them if so); all given back at the end."""
        held, limit = self._body_bytes, self._policy.principal_body_bytes
        taken = 0

        def take(size: int) -> bool:
            nonlocal taken
            if held[principal] + size > limit:
                return False
            held[principal] += size
            taken += size
            return True

        try:
            yield take
        finally:
            if taken:
                held[principal] -= taken
                if not held[principal]:
                    del held[principal]

    async def _post(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]],
                    caller: Caller | None, principal: str, take: Callable[[int], bool],
                    receive: Any, send: Any) -> None:
        """A POST past the token: its body read within the bounds, then step 4."""
        # A declared length is taken whole before a byte is read (the server's HTTP layer
        # holds a body without Transfer-Encoding to it); a chunked body, as its chunks arrive.
        declared = _declared_length(headers)
        if declared is not None and declared > self._policy.max_body_bytes:
            await self._refuse(send, "body_too_large", 413, "Request body too large.\n")
            return
        if declared is not None and not take(declared):
            await self._over_budget(send)
            return
        try:
            with anyio.fail_after(self._policy.body_timeout_s):
                body = await _body(receive, self._policy.max_body_bytes,
                                   take if declared is None else _already_taken)
        except TimeoutError:
            await self._refuse(send, "body_timeout", 408, "Request body too slow.\n")
            return
        except _OverBudget:
            await self._over_budget(send)
            return
        if body is None:
            await self._refuse(send, "body_too_large", 413, "Request body too large.\n")
            return
        if holds_too_many_values(body):
            await self._too_many_values(send)
            return
        try:
            frame = pydantic_core.from_json(body)
        except ValueError:
            # Fail closed: a body this door cannot read (another encoding, a byte order mark)
            # is never handed on to a parser that might read it uncounted. One the SDK cannot
            # read either (lone surrogate escapes) is answered with its request's id.
            self.refused["unreadable"] += 1
            await _json_bytes(send, 400, unreadable_reply(body).model_dump_json(
                by_alias=True, exclude_unset=True).encode("utf-8"))
            return
        unreadable = _unreadable(frame)
        if unreadable is not None:
            # Answered as stdio answers it (D84, D368): the SDK's own answer to a batch or a
            # frame without "jsonrpc" was -32602 with its validator's whole report.
            reply = error_for_frame(unreadable)
            self._log.warning("mcp.frame.rejected", code=reply.error.code,
                              error=type(unreadable).__name__)
            await _json_bytes(send, 400, reply.model_dump_json(
                by_alias=True, exclude_unset=True).encode("utf-8"))
            return
        if await self._routed(scope, headers, caller, body, receive, send):
            return
        send = self._noting(headers, send, "POST")
        if self.draining and _starts_work(frame):
            # Stopping: no new call or session starts here; calls in flight finish, and
            # what they need (an answer to their question, a listing) still goes through.
            self.refused["draining"] += 1
            await _json(send, 503, _stopping_reply(frame), retry_after="1")
            return
        opens = _header(headers, b"mcp-session-id") is None and _opens_session(frame)
        if opens:
            left = running_short(self._open_sessions())
            if left is not None:
                # Out of descriptors the open sessions would fail too: no new one here.
                self.refused["descriptors"] += 1
                suppressed = self._once.allow("descriptors") if self._once else 0
                if suppressed is not None:
                    self._log.warning("http.sessions.refused", reason="descriptors",
                                      descriptors_left=left, not_logged=suppressed)
                await _json(send, 503, _no_session_reply(frame), retry_after="5")
                return
        # What the request counts against while the SDK handles it: an authenticated
        # initialize, its principal's sessions (without authentication every client is the
        # one principal: TOOLHOST_HTTP_MAX_SESSIONS is the only bound then); a tools/call,
        # its principal's calls.
        held: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if opens and caller is not None:
            if (self._open_sessions_of(principal) + self._opening[principal]
                    >= self._policy.max_sessions_per_principal):
                self.refused["sessions_per_principal"] += 1
                await _json(send, 429, _principal_sessions_reply(frame), retry_after="5")
                return
            opening = Opening(self._opening, principal)
            scope = {**scope, OPENING_KEY: opening}
            held = opening
        elif _is_tool_call(frame):
            if self._at_cap(principal):
                self._too_many_calls()
                await _json(send, 429, _busy_reply(frame), retry_after="1")
                return
            # Held by this request and by the call's handler (``CallSlot``): the call keeps
            # its slot after a client drops the POST, for as long as it runs.
            slot = CallSlot(self._calls, principal, functools.partial(self._at_cap, principal),
                            refused=self._too_many_calls)
            scope = {**scope, CALL_SLOT_KEY: slot}
            held = slot.held()
        session = _header(headers, b"mcp-session-id")
        async with (self._order.handing(principal, session)
                    if session and _handed_after_answer(frame) else contextlib.nullcontext()):
            with held:
                await self._app(scope, _replay(body, receive), send)

    async def _routed(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]],
                      caller: Caller | None, body: bytes, receive: Any, send: Any) -> bool:
        """Forward the request to the host its session or sessionless run lives on, when that
        is another one; whether it was (``http_routes``)."""
        if self._router is None:
            return False
        route = route_key(headers, caller)
        if route is None:
            return False
        for _ in range(2):  # a target that stopped: the table is asked once more
            try:
                target = await self._router.target(route, claim=not self.draining)
            except NotServedHere:
                self.refused["draining"] += 1
                await _json(send, 503, _stopping_reply(None), retry_after="1")
                return True
            except RoutesUnavailable as exc:
                # The table is away and the route is not one this host knows (its own
                # sessions it does): to be retried, not served where its state is not.
                self._log.warning("http.routes.unavailable", error=str(exc))
                self.refused["routes_unavailable"] += 1
                await _json(send, 503, {"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32000, "message": "Retry in a moment."}}, retry_after="1")
                return True
            if target is None:
                return False
            if await self._router.forward(target, route, scope, body, receive, send):
                return True
        await self._router.unreachable(route, send)
        return True

    def _noting(self, headers: list[tuple[bytes, bytes]], send: Any, method: str) -> Any:
        """``send``, telling the router about a session this request opens (its answer's
        ``mcp-session-id``, before the client can use it anywhere) or ends (a DELETE)."""
        router = self._router
        if router is None:
            return send
        named = _header(headers, b"mcp-session-id")

        async def noting(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start" and message.get("status", 500) < 400:
                if named is None:
                    opened = _header(message.get("headers", ()), b"mcp-session-id")
                    if opened:
                        await _quietly(router.opened(opened), self._log)
                elif method == "DELETE":
                    await _quietly(router.closed(named), self._log)
            await send(message)

        return noting

    async def _inbox(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]],
                     receive: Any, send: Any) -> None:
        """The approvals inbox (``inbox.app``): with a bearer token, for its caller; else the
        inbox asks for its own login. Only where requests are authenticated."""
        if self.inbox is None:
            await _plain(send, 404, "Not found.\n")
            return
        caller = None
        token = bearer_token(headers)
        if token is not None:
            try:
                caller = await self.verify(token)
            except IntrospectionBusy:  # as for MCP: never the 500 of an uncaught error
                await _issuer_busy(send)
                return
            if caller is None:
                await self._unauthorized(send, presented=True)
                return
        await self.inbox(scope, receive, send, caller)

    @contextlib.contextmanager
    def call_slot(self, principal: str) -> Iterator[tuple[int, str] | None]:
        """One of ``principal``'s calls run outside MCP (an approval in the inbox), counted
        like a ``tools/call``: a stopping server waits for it, and the principal's cap bounds
        it. Yields None when admitted, else the refusal's status and words."""
        if self.draining:
            self.refused["draining"] += 1
            yield 503, "The server is stopping; try again in a moment.\n"
            return
        if self._at_cap(principal):
            self._too_many_calls()
            yield 429, "Too many calls at once; try again in a moment.\n"
            return
        with self._counting(principal):
            yield None

    def _too_many_calls(self) -> None:
        """A call refused for its principal's cap, counted once wherever that is decided: at
        this door, in the inbox (``call_slot``), or by a call's handler that starts after its
        request ended (``CallSlot.adopt``), which the door admitted and so never counted."""
        self.refused["too_many_calls"] += 1

    def _at_cap(self, principal: str) -> bool:
        """Whether ``principal`` has as many calls running as it may (its bodies that their
        calls gave up on count too)."""
        return self._calls[principal] + self._abandoned(principal) >= self._policy.max_calls

    def _counting(self, principal: str) -> contextlib.AbstractContextManager[None]:
        """One of ``principal``'s calls in flight while entered (``calls_in_flight``)."""
        return _counted(self._calls, principal)

    async def verify(self, token: str, *, rechecking: bool = False) -> Caller | None:
        """The caller ``token`` authenticates, or None (as for every MCP request).

        :raises IntrospectionUnavailable: ``rechecking`` (a token already accepted) and the
            issuer did not answer about it, or no thread was free to ask it in time.
        """
        tokens = self._policy.tokens
        if tokens is not None:
            # A file that changed is read again, off the loop; otherwise this is a stat.
            caller = (await asyncio.to_thread(tokens.verify, token) if tokens.changed()
                      else tokens.verify(token))
            if caller is not None:
                return caller
        if self._policy.jwt is not None and token.count(".") == 2:
            # A token verified before costs a lookup; a new one may need the JWKS fetched,
            # which blocks: off the loop.
            return self._policy.jwt.remembered(token) or await asyncio.to_thread(
                self._policy.jwt.verify, token)
        introspection = self._policy.introspection
        if introspection is not None:
            # Opaque (or, with no keys to verify it here, any) token: asked of the issuer, a
            # blocking POST, on at most INTROSPECTING threads of its own: tokens nobody
            # issued, sent by anyone, must not take the threads /readyz and the tools use.
            # A request waits at most INTROSPECTION_WAIT_S for a thread; one that has a
            # thread waits for its POST (the host client's 10 s timeouts bound it).
            caller = introspection.remembered(token)
            if caller is None:
                if self._introspection_waiting >= INTROSPECTION_QUEUE:
                    self.refused["introspection_busy"] += 1
                    raise IntrospectionBusy("too many tokens wait for the issuer's answer")
                self._introspection_waiting += 1
                try:
                    with anyio.move_on_after(INTROSPECTION_WAIT_S) as waited:
                        caller = await anyio.to_thread.run_sync(
                            introspection.recheck if rechecking else introspection.verify,
                            token, limiter=self._introspecting)
                finally:
                    self._introspection_waiting -= 1
                if rechecking and waited.cancelled_caught:
                    raise IntrospectionUnavailable("no thread to ask the issuer in time")
            return caller
        return None

    async def _unauthorized(self, send: Any, *, presented: bool) -> None:
        self.refused["token" if presented else "no_token"] += 1
        parts = ['Bearer realm="toolhost"']
        if presented:
            parts.append('error="invalid_token"')
        if self._policy.metadata_url is not None:
            parts.append(f'resource_metadata="{self._policy.metadata_url}"')
        await _plain(send, 401, "Authentication required.\n",
                     extra=[(b"www-authenticate", ", ".join(parts).encode())])

    async def _over_budget(self, send: Any) -> None:
        self.refused["body_budget"] += 1
        await _plain(send, 429, "Too much request data in flight; retry in a moment.\n",
                     extra=[(b"retry-after", b"1")])

    async def _too_many_values(self, send: Any) -> None:
        """A body of more JSON values than a stdio line may hold (``frames``), refused before
        it is parsed, with stdio's answer (``-32700``, a null id): its values cost ~80 bytes
        each once parsed and ~340 through the SDK's, and their parse holds the loop. ``413``,
        as a body past its bytes is: it is too large to take, not malformed."""
        self.refused["too_many_values"] += 1
        self._log.info("http.refused", reason="too_many_values", status=413)
        reply = error_for_frame(TooManyValues(f"a body of more than {MAX_FRAME_VALUES} JSON values"))
        await _json_bytes(send, 413, reply.model_dump_json(
            by_alias=True, exclude_unset=True).encode("utf-8"))

    async def _refuse(self, send: Any, reason: str, status: int, text: str) -> None:
        self.refused[reason] += 1
        self._log.info("http.refused", reason=reason, status=status)
        await _plain(send, status, text)


#: Seconds one answer of the stores stands for ``/readyz``, and how long after a check started
#: every request is told "not ready" while it is still under way (D328): no longer than the
#: second its answer would stand for, so a balancer's probe (Kubernetes waits 1 s by default)
#: reads a record that does not answer (the pool waits 5 s for a connection) as not ready.
READY_FOR_S: Final = 1.0
READY_WAIT_S: Final = 1.0


class _Readiness:
    """``/readyz``'s answer: the stores asked at most once every READY_FOR_S, one check at a
    time, the requests meanwhile given its answer, or "not ready" once it has been under way
    READY_WAIT_S (D328). The route takes no token: asked per request, it put two queries on
    the record for anyone (on PostgreSQL, every host's record), and a record that hangs held
    a worker thread, and the request, for each."""

    def __init__(self, check: Callable[[], bool], monotonic: Callable[[], float]) -> None:
        self._check = check
        self._monotonic = monotonic
        self._checking: asyncio.Future[bool] | None = None
        self._answer = False
        self._until: float | None = None
        #: When the check under way is given up on: a request arriving later is answered at
        #: once, so probes against a record that hangs never wait one after another.
        self._deadline = 0.0

    async def answer(self) -> bool:
        now = self._monotonic()
        if self._until is not None and now < self._until:
            return self._answer
        if self._checking is None:
            self._checking = asyncio.ensure_future(self._ask())
            self._deadline = now + READY_WAIT_S
        wait = self._deadline - now
        if wait <= 0:
            return False
        try:
            return await asyncio.wait_for(asyncio.shield(self._checking), wait)
        except TimeoutError:
            return False

    async def _ask(self) -> bool:
        try:
            try:
                answer = await asyncio.to_thread(self._check)
            except Exception:  # a check that fails says "not ready", once a second too
                answer = False
            self._answer, self._until = answer, self._monotonic() + READY_FOR_S
            return answer
        finally:
            self._checking = None


async def _quietly(step: Awaitable[None], log: Any) -> None:
    """A routing table update that must not cost the request its answer: a table away is
    logged (the session is then reachable on this host only)."""
    try:
        await step
    except Exception as exc:
        log.warning("http.routes.unavailable", error=type(exc).__name__)


def _sdk_user(caller: Caller) -> AuthenticatedUser:
    """The caller as the SDK knows a credential: it binds a session to the one that opened it
    (client id, issuer and subject compared): the principal, how it authenticated, and its
    scopes, so another token of the same principal with other scopes is another session."""
    return AuthenticatedUser(AccessToken(
        token="", client_id=caller.principal.id, subject=caller.fingerprint,
        scopes=sorted(caller.principal.scopes), claims={"iss": caller.by}))


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    values = [v for k, v in headers if k.lower() == name]
    return values[0].decode("latin-1") if len(values) == 1 else (None if not values else "")


def _is_tool_call(frame: Any) -> bool:
    frames = frame if isinstance(frame, list) else [frame]
    return any(isinstance(f, dict) and f.get("method") == "tools/call" and "id" in f
               for f in frames)


def _starts_work(frame: Any) -> bool:
    """A request that starts a call or a session (``tools/call``, ``initialize``)."""
    frames = frame if isinstance(frame, list) else [frame]
    return any(isinstance(f, dict) and f.get("method") in ("tools/call", "initialize")
               and "id" in f for f in frames)


def _opens_session(frame: Any) -> bool:
    """An ``initialize`` (without a session header it is what opens one)."""
    return isinstance(frame, dict) and frame.get("method") == "initialize"


def _handed_after_answer(frame: Any) -> bool:
    """A notification or an answer (no request): the SDK answers its POST ``202`` and only
    then hands it to the session."""
    return isinstance(frame, dict) and not ("method" in frame and "id" in frame)


def _principal(caller: Caller | None) -> str:
    return caller.principal.id if caller is not None else ""


@attrs.define
class _Turns:
    """One session's requests in ``_SessionOrder``."""

    #: Notifications and answers in the SDK's hands, being handed to the session.
    handing: int = 0
    #: DELETEs waiting for their turn or under way, and whether one is under way.
    ending: int = 0
    ending_now: bool = False
    changed: anyio.Event = attrs.field(factory=anyio.Event)

    def change(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


class _SessionOrder:
    """A session's ``DELETE`` waits for the notifications and answers POSTed to it before it,
    and those POSTed while it waits or runs wait for it (then the SDK answers them 404): at
    most HANDOVER_WAIT_S each way, then as before.

    The SDK answers such a POST ``202`` and only then hands its message to the session. A
    client that cancels a call and ends its session (what the SDK's client does when it gives
    up on a call and leaves) sent its ``DELETE`` in between: the session's streams were closed
    under the handover, and the SDK logged ``ClosedResourceError`` and started a second answer
    on the answered request (uvicorn's ``RuntimeError``), two tracebacks at error level each
    time (D574). Keyed by principal and session id: another principal's ``DELETE`` (which the
    SDK refuses) never holds a session's messages."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], _Turns] = {}

    @contextlib.asynccontextmanager
    async def handing(self, principal: str, session: str) -> AsyncIterator[None]:
        key = (principal, session)
        turns = self._sessions.setdefault(key, _Turns())
        with anyio.move_on_after(HANDOVER_WAIT_S):
            while turns.ending:
                await turns.changed.wait()
        # The DELETE waited for may have ended and forgotten the session's turns, and another
        # DELETE begun since: this one is then handed over before it.
        turns = self._sessions.setdefault(key, turns)
        turns.handing += 1
        try:
            yield
        finally:
            turns.handing -= 1
            self._changed(key, turns)

    @contextlib.asynccontextmanager
    async def ending(self, principal: str, session: str) -> AsyncIterator[None]:
        key = (principal, session)
        turns = self._sessions.setdefault(key, _Turns())
        turns.ending += 1
        try:
            with anyio.move_on_after(HANDOVER_WAIT_S):
                while turns.handing or turns.ending_now:
                    await turns.changed.wait()
            turns.ending_now = True
            try:
                yield
            finally:
                turns.ending_now = False
        finally:
            turns.ending -= 1
            self._changed(key, turns)

    def _changed(self, key: tuple[str, str], turns: _Turns) -> None:
        turns.change()
        if not turns.handing and not turns.ending and self._sessions.get(key) is turns:
            del self._sessions[key]


@contextlib.contextmanager
def _counted(counts: collections.Counter[str], principal: str) -> Iterator[None]:
    """One more of ``principal``'s in ``counts`` while entered (none kept at zero)."""
    counts[principal] += 1
    try:
        yield
    finally:
        counts[principal] -= 1
        if not counts[principal]:
            del counts[principal]


class CallSlot:
    """A ``tools/call``'s place among its principal's ``TOOLHOST_HTTP_MAX_CALLS`` (one in
    ``counts``): held by the front door while the request lasts and by the call's handler
    while the call runs (``held``), given back when neither holds it.

    Why both: the SDK runs a call to its end after the client dropped its POST (in MCP's
    streamable HTTP a disconnect is not a cancellation; ``notifications/cancelled`` is), so a
    slot held for the request alone let one token run any number of calls at once by
    dropping each POST, and a stopping server did not wait for them (D366). Why the request
    too: a request the SDK refuses never reaches a handler. A handler that starts after its
    request is over (dropped before the call was dispatched) takes the slot again only while
    the principal is under its cap (``adopt``)."""

    def __init__(self, counts: collections.Counter[str], principal: str,
                 at_cap: Callable[[], bool], *, refused: Callable[[], None]) -> None:
        self._counts = counts
        self._principal = principal
        self._at_cap = at_cap
        #: Counts a refusal ``adopt`` decides (``FrontDoor.refused``, as the door's own).
        self._refused = refused
        self._holders = 0

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The slot held while entered (counted once, however many hold it)."""
        if not self._holders:
            self._counts[self._principal] += 1
        self._holders += 1
        try:
            yield
        finally:
            self._holders -= 1
            if not self._holders:
                self._counts[self._principal] -= 1
                if not self._counts[self._principal]:
                    del self._counts[self._principal]

    def adopt(self) -> contextlib.AbstractContextManager[None] | None:
        """The handler's hold on the slot, or None: its request is over and the principal has
        as many calls running as it may meanwhile (the call is refused, as its request would
        have been)."""
        if not self._holders and self._at_cap():
            self._refused()
            return None
        return self.held()


def handler_slot(request: Any) -> contextlib.AbstractContextManager[None] | None:
    """What a ``tools/call`` handler holds while its call runs: the slot the front door took
    for it (``CallSlot.adopt``), nothing for a call that took none (stdio, the inbox's), or
    None when the call may not run (its principal is at its cap)."""
    scope = getattr(request, "scope", None) or {}
    slot = scope.get(CALL_SLOT_KEY)
    if not isinstance(slot, CallSlot):
        return contextlib.nullcontext()
    return slot.adopt()


def _unreadable(frame: Any) -> ValueError | None:
    """Why a decoded body is not one JSON-RPC message stdio would read (``frames``), or None:
    a request with an unusable id, a batch (MCP has none since 2025-06-18), a frame without
    ``"jsonrpc": "2.0"`` or any other shape the protocol's parse refuses."""
    if has_unusable_id(frame):
        return UnusableRequestId("a request id must be a string or an integer")
    try:
        types.jsonrpc_message_adapter.validate_python(frame, by_name=False)
    except ValidationError as exc:
        return exc
    return None


class Opening:
    """An authenticated ``initialize`` on its way to becoming a session: one of its
    principal's in ``counts`` (``_counted``) until the session is open (``SessionEnds`` calls
    ``became_open``; ``Sessions.open_of`` counts it from then on) or the request is over.
    Counted once, not twice: between the two the session was both, and a burst at the bound
    got fewer than the bound's sessions."""

    def __init__(self, counts: collections.Counter[str], principal: str) -> None:
        self._counts = counts
        self._principal = principal
        self._held = contextlib.ExitStack()

    def __enter__(self) -> None:
        self._held.enter_context(_counted(self._counts, self._principal))

    def __exit__(self, *exc_info: object) -> None:
        self.became_open()

    def became_open(self) -> None:
        """Stop counting (again: nothing)."""
        self._held.close()


def _principal_sessions_reply(frame: Any) -> dict[str, Any]:
    rid = frame.get("id") if isinstance(frame, dict) else None
    return {"jsonrpc": "2.0", "id": rid, "error": {
        "code": -32000, "message": "Too many open sessions for this principal. End one "
        "(DELETE) or retry later."}}


def _no_session_reply(frame: Any) -> dict[str, Any]:
    rid = frame.get("id") if isinstance(frame, dict) else None
    return {"jsonrpc": "2.0", "id": rid, "error": {
        "code": -32000, "message": "Too many open sessions. Retry later."}}


def _stopping_reply(frame: Any) -> dict[str, Any]:
    rid = frame.get("id") if isinstance(frame, dict) else None
    return {"jsonrpc": "2.0", "id": rid, "error": {
        "code": -32000, "message": "The server is stopping. Retry in a moment."}}


#: What a ``tools/call`` past its principal's ``TOOLHOST_HTTP_MAX_CALLS`` is answered.
BUSY_MESSAGE: Final = "Too many calls are running for this principal. Retry later."


async def _issuer_busy(send: Any) -> None:
    """The issuer has as many tokens waiting for its answer as it may (D331): retry."""
    await _plain(send, 503, "Busy; retry in a moment.\n", extra=[(b"retry-after", b"1")])


def _busy_reply(frame: Any) -> dict[str, Any]:
    rid = frame.get("id") if isinstance(frame, dict) else None
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": BUSY_MESSAGE}}


class _OverBudget(Exception):
    """A chunked body that would pass its principal's body budget (D333)."""


def _already_taken(size: int) -> bool:
    return True


def _declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The request's ``Content-Length`` (the server's HTTP layer refused a malformed one), or
    None for a chunked body: with both headers the body is framed by its chunks (RFC 9112
    6.3), and ``Content-Length: 0`` beside them carried a whole body past the count."""
    if any(name.lower() == b"transfer-encoding" for name, _ in headers):
        return None
    value = _header(headers, b"content-length")
    if value is None or not (value.isascii() and value.isdigit()):
        return None
    return int(value) if len(value) <= 18 else sys.maxsize


async def _body(receive: Any, limit: int, take: Callable[[int], bool]) -> bytes | None:
    """The request's body, or None once it passes ``limit`` (what is left is not read); each
    chunk first ``take``-n from the principal's budget, or ``_OverBudget``."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        if not take(len(chunk)):
            raise _OverBudget
        parts.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(parts)


def _replay(body: bytes, receive: Any) -> Callable[[], Awaitable[dict[str, Any]]]:
    """A receive that gives the body read already, then what the connection says next."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: dict[str, Any] = await receive()
        return message

    return replayed


async def _plain(send: Any, status: int, text: str,
                 extra: list[tuple[bytes, bytes]] | None = None, *,
                 content_type: str = _TEXT) -> None:
    body = text.encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()),
                            (b"content-length", str(len(body)).encode()),
                            (b"cache-control", b"no-store"), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Any, status: int, data: Mapping[str, Any], *,
                retry_after: str | None = None) -> None:
    await _json_bytes(send, status, json.dumps(data).encode("utf-8"), retry_after=retry_after)


async def _json_bytes(send: Any, status: int, body: bytes, *,
                      retry_after: str | None = None) -> None:
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", retry_after.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
