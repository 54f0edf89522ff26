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

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import anyio
import anyio.to_thread
import attrs
import httpx
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS

from toolhost._mcp.http_auth import Caller
from toolhost._model.routes import HEARTBEAT_S, HostAddress
from toolhost._pipeline.log import get_logger
from toolhost._ports.routes import RouteTable

__all__ = ["FORWARDED", "Router", "route_key"]

FORWARDED: Final = b"toolhost-forwarded"
_SESSION: Final = b"mcp-session-id"
_VERSION: Final = b"mcp-protocol-version"
#: How long a route read from the table is trusted before it is read again.
_REMEMBER_S: Final = 5.0
#: Headers of one connection only (RFC 9110 7.6.1), never passed on.
_HOP: Final = frozenset({b"connection", b"keep-alive", b"proxy-authenticate",
                         b"proxy-authorization", b"te", b"trailer", b"transfer-encoding",
                         b"upgrade", b"proxy-connection"})


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
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
    if _header(headers, FORWARDED) is not None:
        return None
    version = _header(headers, _VERSION)
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        # The SDK's own rule for a 2026-07-28 request (it ignores any session header then).
        principal = "" if caller is None else caller.principal.id
        fingerprint = "" if caller is None else caller.fingerprint
        return RouteKey(f"run\x1f{principal}\x1f{fingerprint}", session=False)
    session = _header(headers, _SESSION)
    return None if not session else RouteKey(f"session\x1f{session}", session=True)


class Router:
    """This host's side of the routing table: where a request is served, forwarding it when
    that is elsewhere, and the sessions opened here."""

    def __init__(self, table: RouteTable, me: HostAddress, client: httpx.AsyncClient) -> None:
        self._table = table
        self._me = me
        self._client = client
        #: key -> (host, or None for this one; until when the answer is trusted)
        self._known: dict[str, tuple[HostAddress | None, float]] = {}
        self._log = get_logger()
        #: Requests forwarded, by outcome (a counter for operators and tests).
        self.forwarded = 0

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
        await anyio.to_thread.run_sync(self._table.claim, key, self._me.host_id)
        self._known[key] = (None, float("inf"))

    async def closed(self, session_id: str) -> None:
        key = f"session\x1f{session_id}"
        self._known.pop(key, None)
        await anyio.to_thread.run_sync(self._table.drop, key)

    async def target(self, route: RouteKey) -> HostAddress | None:
        """The host ``route`` is served on; None: this one."""
        now = time.monotonic()
        known = self._known.get(route.key)
        if known is not None and known[1] > now:
            return known[0]
        if route.session:
            found = await anyio.to_thread.run_sync(self._table.owner, route.key)
        else:
            found = await anyio.to_thread.run_sync(self._table.claim, route.key,
                                                   self._me.host_id)
        host = None if found is None or found.host_id == self._me.host_id else found
        self._known[route.key] = (host, now + _REMEMBER_S)
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
        target cannot be reached (it stopped: ask the table again)."""
        headers = [(k, v) for k, v in scope.get("headers", ()) if k.lower() not in _HOP]
        headers.append((FORWARDED, self._me.host_id.encode("latin-1")))
        request = self._client.build_request(scope["method"], _url(target.url, scope),
                                             headers=headers, content=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            self.forget(route)
            self._log.warning("http.routes.unreachable", host=target.host_id,
                              error=type(exc).__name__)
            return False
        self.forwarded += 1
        try:
            async with anyio.create_task_group() as tasks:
                async def client_gone() -> None:
                    while (await receive()).get("type") != "http.disconnect":
                        pass
                    tasks.cancel_scope.cancel()

                tasks.start_soon(client_gone)
                await send({"type": "http.response.start", "status": response.status_code,
                            "headers": [(k, v) for k, v in response.headers.raw
                                        if k.lower() not in _HOP]})
                try:
                    async for chunk in response.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk,
                                    "more_body": True})
                except httpx.HTTPError:
                    pass  # the owner went away mid-answer: end what was sent
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tasks.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
        return True

    @staticmethod
    async def unreachable(route: RouteKey,
                          send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        """The answer when the host a request belongs on cannot be reached: a session's is the
        spec's 404 (the client opens a new session), a sessionless one's a 503 to retry."""
        if route.session:
            await _answer(send, 404, b'{"jsonrpc": "2.0", "id": null, "error": '
                          b'{"code": -32600, "message": "Session not found"}}')
        else:
            await _answer(send, 503, b'{"jsonrpc": "2.0", "id": null, "error": '
                          b'{"code": -32000, "message": "Retry in a moment."}}',
                          retry_after=b"1")


def _url(base: str, scope: dict[str, Any]) -> str:
    """``base``'s scheme and authority with the request's own path and query."""
    url = httpx.URL(base)
    path: bytes = scope.get("raw_path") or str(scope.get("path", "/")).encode()
    query: bytes = scope.get("query_string", b"")
    origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
    return origin + path.decode("latin-1") + (f"?{query.decode('latin-1')}" if query else "")


async def _answer(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, body: bytes,
                  *, retry_after: bytes | None = None) -> None:
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", retry_after))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
