"""Requests between the hosts of one record: ``serve --http`` behind a balancer that pins
nothing (several hosts on one PostgreSQL database).

A session lives on the host that opened it: the SDK's streams and the session's run (its
workspace files, its pending questions) are that process's and are never moved. A request
that names a session of another live host is forwarded there, streamed both ways (an SSE
answer included), and the answer is the owner's; a 2026-07-28 request has no session, so the
caller's sessionless run (one per principal and kind of credential, as ``Sessions`` keys it)
gets a home host, claimed by the first host it reaches, and its requests are forwarded there
the same way. What is shared is only the routing table (``RouteTable``: routes, the hosts'
URLs, their heartbeats); a host that falls silent loses its sessions (the client gets the
spec's 404 and starts a new one) and its sessionless runs move to the next host that asks.

A forwarded request carries ``toolhost-forwarded``: its receiver serves it itself, whatever
it knows, so a route that changed in between can never bounce a request around. The header
gives a client nothing: set by hand, it only keeps a request on the host it reached. The
receiver checks the request as any other (Host, Origin, the token again, its own caps).
"""

from __future__ import annotations

import collections
import http.cookiejar
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import anyio
import anyio.to_thread
import attrs
import httpx
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS

from toolhost._composition import HEARTBEAT_S, HostAddress, RouteTable, ToolhostError, get_logger
from toolhost._mcp.http_auth import Caller

__all__ = ["FORWARDED", "NotServedHere", "QuietUpstreamLost", "Router", "UpstreamLost",
           "first_header", "route_key"]

FORWARDED: Final = b"toolhost-forwarded"
_SESSION: Final = b"mcp-session-id"
_VERSION: Final = b"mcp-protocol-version"
#: How long a route read from the table is trusted before it is read again.
_REMEMBER_S: Final = 5.0
#: At most this many routes remembered (the least recently used go first): a client naming
#: made-up session ids costs table lookups, never this host's memory.
_REMEMBER_AT_MOST: Final = 10_000
#: Headers of one connection only (RFC 9110 7.6.1), never passed on; and the request's
#: length, which the forwarded body sets again.
_HOP: Final = frozenset({b"connection", b"keep-alive", b"proxy-authenticate",
                         b"proxy-authorization", b"te", b"trailer", b"transfer-encoding",
                         b"upgrade", b"proxy-connection"})
_NOT_FORWARDED: Final = _HOP | {b"content-length"}


class NotServedHere(ToolhostError):
    """A stopping host was asked for a sessionless run that no host serves yet: it takes no
    new run (the client is to retry, and reaches a host that will)."""


class UpstreamLost(ToolhostError):
    """The host a forwarded answer came from went away in the middle of it: raised to the
    ASGI server, which cuts the client's connection, so the client sees a broken answer and
    not a complete one without its message."""


def first_header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (lower case) in an ASGI scope's headers, or None."""
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


@attrs.frozen
class RouteKey:
    """Where a request belongs: a session (``session`` True: never claimed, only looked up)
    or a sessionless run (claimed by the first host it reaches)."""

    key: str
    session: bool


def route_key(headers: Iterable[tuple[bytes, bytes]], caller: Caller | None) -> RouteKey | None:
    """The route of a request; None: it opens a session (or is forwarded already), so it is
    served where it is."""
    headers = list(headers)
    if first_header(headers, FORWARDED) is not None:
        return None
    version = first_header(headers, _VERSION)
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        # The SDK's own rule for a 2026-07-28 request (it ignores any session header then).
        principal = "" if caller is None else caller.principal.id
        fingerprint = "" if caller is None else caller.fingerprint
        return RouteKey(f"run\x1f{principal}\x1f{fingerprint}", session=False)
    session = first_header(headers, _SESSION)
    return None if not session else RouteKey(f"session\x1f{session}", session=True)


class Router:
    """This host's side of the routing table: where a request is served, forwarding it when
    that is elsewhere, and the sessions opened here."""

    def __init__(self, table: RouteTable, me: HostAddress, client: httpx.AsyncClient, *,
                 monotonic: Callable[[], float]) -> None:
        self._table = table
        self._monotonic = monotonic
        self._me = me
        # One client forwards everyone's requests: a cookie one host set on one person's
        # answer must never ride along on another's (the client's own Cookie header goes
        # through as it came; what the other host sets goes back to its client only).
        # (The jar itself: httpx's ``cookies`` setter copies into a jar of its own.)
        client.cookies.jar = http.cookiejar.CookieJar(
            policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        self._client = client
        #: key -> (host, or None for this one; until when the answer is trusted), least
        #: recently used first.
        self._known: collections.OrderedDict[str, tuple[HostAddress | None, float]] = (
            collections.OrderedDict())
        #: Sessions opened here and not deleted: served here without asking the table, also
        #: while it is away.
        self._mine: set[str] = set()
        self._log = get_logger()
        #: Requests forwarded (a counter for operators and tests).
        self.forwarded = 0
        #: Forwarded POSTs whose answer is still streaming back: a stopping host waits for
        #: them as for its own calls (a forwarded GET stream lasts as long as its session).
        self.forwarding = 0

    @property
    def me(self) -> HostAddress:
        return self._me

    # ---------------------------------------------------------------------- the table

    async def announce(self) -> None:
        await anyio.to_thread.run_sync(self._table.announce, self._me)

    async def heartbeat(self) -> None:
        """Announce this host every HEARTBEAT_S until cancelled; a missed one is logged, the
        next tried on time."""
        while True:
            await anyio.sleep(HEARTBEAT_S)
            try:
                await self.announce()
            except Exception as exc:  # the database is away: try again next beat
                self._log.warning("http.routes.heartbeat_failed", error=type(exc).__name__)

    async def retire(self) -> None:
        await anyio.to_thread.run_sync(self._table.retire, self._me.host_id)

    async def opened(self, session_id: str) -> None:
        """A session opened here: its requests anywhere come here."""
        key = f"session\x1f{session_id}"
        self._mine.add(key)
        await anyio.to_thread.run_sync(self._table.claim, key, self._me.host_id)

    async def closed(self, session_id: str) -> None:
        key = f"session\x1f{session_id}"
        self._mine.discard(key)
        self._known.pop(key, None)
        await anyio.to_thread.run_sync(self._table.drop, key)

    async def target(self, route: RouteKey, *, claim: bool = True) -> HostAddress | None:
        """The host ``route`` is served on; None: this one. Without ``claim`` (this host is
        stopping), a sessionless run no host serves yet is not taken here.

        :raises RoutesUnavailable: the table is away and the route is not known here.
        :raises NotServedHere: no host serves the run, and ``claim`` is False.
        """
        if route.key in self._mine:
            return None
        now = self._monotonic()
        known = self._known.get(route.key)
        if known is not None and known[1] > now:
            self._known.move_to_end(route.key)
            return known[0]
        if route.session:
            found = await anyio.to_thread.run_sync(self._table.owner, route.key)
            if found is None:
                return None  # nobody's: served here, where the SDK answers the spec's 404
        elif claim:
            found = await anyio.to_thread.run_sync(self._table.claim, route.key,
                                                   self._me.host_id)
        else:
            # Taken here, every host would send the run's calls to a host that refuses new
            # calls until it is gone (D330).
            found = await anyio.to_thread.run_sync(self._table.owner, route.key)
            if found is None:
                raise NotServedHere("no host serves this run yet")
        host = None if found.host_id == self._me.host_id else found
        self._known[route.key] = (host, now + _REMEMBER_S)
        self._known.move_to_end(route.key)
        while len(self._known) > _REMEMBER_AT_MOST:
            self._known.popitem(last=False)
        return host

    def forget(self, route: RouteKey) -> None:
        self._known.pop(route.key, None)

    async def close(self) -> None:
        await self._client.aclose()

    # ---------------------------------------------------------------------- forwarding

    async def forward(self, target: HostAddress, route: RouteKey, scope: dict[str, Any],
                      body: bytes, receive: Callable[[], Awaitable[dict[str, Any]]],
                      send: Callable[[dict[str, Any]], Awaitable[None]]) -> bool:
        """Send the request to ``target`` and stream its answer back, until it ends or the
        client goes away; False, with nothing answered and the route forgotten, when the
        target cannot be reached (it stopped: ask the table again).

        :raises UpstreamLost: the target went away in the middle of its answer.
        """
        url = _url(target.url, scope)
        if url is None:
            await _answer(send, 400, b'{"jsonrpc": "2.0", "id": null, "error": '
                          b'{"code": -32600, "message": "Invalid Request"}}')
            return True
        headers = [(k, v) for k, v in scope.get("headers", ())
                   if k.lower() not in _NOT_FORWARDED]
        headers.append((FORWARDED, self._me.host_id.encode("latin-1")))
        request = self._client.build_request(scope["method"], url, headers=headers,
                                             content=body)
        counted = scope["method"] == "POST"
        self.forwarding += counted
        try:
            try:
                response = await self._client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                self.forget(route)
                self._log.warning("http.routes.unreachable", host=target.host_id,
                                  error=type(exc).__name__)
                return False
            except httpx.HTTPError as exc:  # reached, but no answer: the client may retry
                self._log.warning("http.routes.no_answer", host=target.host_id,
                                  error=type(exc).__name__)
                await _answer(send, 503, _RETRY, retry_after=b"1")
                return True
            self.forwarded += 1
            try:
                await self._stream(response, receive, send, until_client_gone=not counted)
            finally:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
        finally:
            self.forwarding -= counted
        return True

    @staticmethod
    async def _stream(response: httpx.Response,
                      receive: Callable[[], Awaitable[dict[str, Any]]],
                      send: Callable[[dict[str, Any]], Awaitable[None]], *,
                      until_client_gone: bool) -> None:
        """The answer to the client, chunk by chunk as it comes, until it ends or the client
        goes away. Without ``until_client_gone`` (a POST's answer) the rest is still read
        for up to LEFT_CLIENT_GRACE_S once the client left: the SDK's client closes each
        answer at its last event, just before the answer's own end, and an answer cut there
        closes the pooled connection to the other host, so each forwarded call paid for a
        new one (a send to a client that left is dropped by the ASGI server). An answer that
        goes on (a long call whose client gave up) is cut after the grace."""
        lost: str | None = None
        async with anyio.create_task_group() as tasks:
            async def client_gone() -> None:
                while (await receive()).get("type") != "http.disconnect":
                    pass
                if until_client_gone:
                    tasks.cancel_scope.cancel()
                else:
                    tasks.cancel_scope.deadline = min(
                        tasks.cancel_scope.deadline,
                        anyio.current_time() + LEFT_CLIENT_GRACE_S)

            tasks.start_soon(client_gone)
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": [(k, v) for k, v in response.headers.raw
                                    if k.lower() not in _HOP]})
            try:
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk,
                                "more_body": True})
            except httpx.HTTPError as exc:
                lost = type(exc).__name__
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            tasks.cancel_scope.cancel()
        if lost is not None:  # raised out here: not wrapped in the task group's exception group
            raise UpstreamLost(lost)

    @staticmethod
    async def unreachable(route: RouteKey,
                          send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        """The answer when the host a request belongs on cannot be reached: a session's is the
        spec's 404 (the client opens a new session), a sessionless one's a 503 to retry."""
        if route.session:
            await _answer(send, 404, b'{"jsonrpc": "2.0", "id": null, "error": '
                          b'{"code": -32600, "message": "Session not found"}}')
        else:
            await _answer(send, 503, _RETRY, retry_after=b"1")


def _url(base: str, scope: dict[str, Any]) -> httpx.URL | None:
    """``base`` (the target's advertised URL) with the request's own path and query; None for
    a request target that is no absolute path (``@host/...``, ``//host/...``, an absolute
    URL): only a path is ever appended to the target's own origin."""
    raw: bytes = scope.get("raw_path") or str(scope.get("path", "/")).encode()
    if not raw.startswith(b"/") or raw.startswith(b"//"):
        return None
    query: bytes = scope.get("query_string", b"")
    target = raw + (b"?" + query if query else b"")
    try:
        url = httpx.URL(base).copy_with(raw_path=target)
    except (httpx.InvalidURL, ValueError):
        return None
    # httpx resolves dot segments ("/./ui/login" is "/ui/login" to it): a path this host
    # did not read as the other will (its inbox, its metrics) is not sent on.
    return url if url.raw_path == target else None


#: How long a forwarded POST's answer is still read after its client left.
LEFT_CLIENT_GRACE_S: Final = 2.0

_RETRY: Final = (b'{"jsonrpc": "2.0", "id": null, "error": '
                 b'{"code": -32000, "message": "Retry in a moment."}}')


class QuietUpstreamLost(logging.Filter):
    """uvicorn logs an exception its app raised with a traceback; an UpstreamLost is an
    expected end (another host went away mid-answer): one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], UpstreamLost):
            record.msg, record.args, record.exc_info = (
                "a forwarded answer was cut: its host went away (%s)",
                (record.exc_info[1],), None)
        return True


async def _answer(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, body: bytes,
                  *, retry_after: bytes | None = None) -> None:
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", retry_after))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
