"""The Router on its own (``toolhost._mcp.http_routes``): an in-memory routing table and
``httpx.MockTransport`` for the other host, so each rule of forwarding is seen at the
boundary: what is sent, and what the client gets. Each test here is a regression of the
review of D246 (the end-to-end cases are in tests/test_http_hosts.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from toolhost._mcp.http_routes import (
    _REMEMBER_AT_MOST,
    NotServedHere,
    QuietUpstreamLost,
    RouteKey,
    Router,
    UpstreamLost,
)
from toolhost._model.routes import HostAddress

ME = HostAddress("me", "http://127.0.0.1:1/mcp")
OTHER = HostAddress("other", "http://127.0.0.1:2/mcp")
SESSION = RouteKey("session\x1fabc", session=True)


class Table:
    """An in-memory RouteTable: every key lives on ``owner``, or nowhere."""

    def __init__(self, owner: HostAddress | None = OTHER) -> None:
        self.owner_of = owner
        self.lookups = 0

    def announce(self, host: HostAddress) -> None: ...
    def retire(self, host_id: str) -> None: ...
    def drop(self, key: str) -> None: ...

    def claim(self, key: str, host_id: str) -> HostAddress:
        self.lookups += 1
        return self.owner_of or ME

    def owner(self, key: str) -> HostAddress | None:
        self.lookups += 1
        return self.owner_of


def _ok() -> httpx.Response:
    """An answer as a real transport gives it: a stream, not read yet."""
    return httpx.Response(200, stream=httpx.ByteStream(b"{}"))


def _router(handler: Any, table: Table | None = None) -> Router:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return Router(table or Table(), ME, client, monotonic=time.monotonic)


def _scope(method: str = "POST", raw_path: bytes = b"/mcp",
           headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": raw_path.decode("latin-1"),
            "raw_path": raw_path, "query_string": b"",
            "headers": headers or [(b"host", b"mcp.example.org")]}


def _forward(router: Router, scope: dict[str, Any], body: bytes = b"{}",
             ) -> tuple[bool, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def go() -> bool:
        return await router.forward(OTHER, SESSION, scope, body, receive, send)

    return anyio.run(go), sent


@pytest.mark.parametrize("raw_path", [b"@127.0.0.1:9/secret", b"//127.0.0.1:9/secret",
                                      b"http://127.0.0.1:9/secret"])
def test_a_request_target_that_is_no_path_is_refused_and_never_sent(raw_path: bytes) -> None:
    # Regression: the target was the other host's origin glued to the raw request target,
    # so "@evil/x" made it http://host:port@evil/x and the answer came back (SSRF).
    seen: list[httpx.Request] = []
    delivered, sent = _forward(_router(lambda r: seen.append(r) or _ok()),
                               _scope(raw_path=raw_path))
    assert delivered and seen == []
    assert sent[0]["status"] == 400


@pytest.mark.parametrize("raw_path", [b"/./ui/login", b"/mcp/../ui/login", b"/x/%2e%2e/metrics"])
def test_a_path_the_other_host_would_read_otherwise_is_refused_and_never_sent(
        raw_path: bytes) -> None:
    # Regression: "/./ui/login" was no inbox path here, so it was forwarded, and httpx sent
    # it as "/ui/login": the other host's inbox, through this host's forwarding client.
    seen: list[httpx.Request] = []
    delivered, sent = _forward(_router(lambda r: seen.append(r) or _ok()),
                               _scope(raw_path=raw_path))
    if seen:  # sent only as it came
        assert seen[0].url.raw_path == raw_path
    else:
        assert delivered and sent[0]["status"] == 400


def test_a_cookie_the_other_host_set_never_rides_on_anothers_request() -> None:
    # Regression: one client forwards everyone's requests, and its cookie jar kept what the
    # other host set on one person's answer for the next person's request.
    seen: list[httpx.Request] = []

    def other_host(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"set-cookie": "toolhost_inbox=ANAS; Path=/"},
                              stream=httpx.ByteStream(b"{}"))

    router = _router(other_host)
    _forward(router, _scope())
    _forward(router, _scope())
    assert [r.headers.get("cookie") for r in seen] == [None, None]


def test_only_the_path_and_query_join_the_other_hosts_origin() -> None:
    seen: list[httpx.Request] = []
    scope = {**_scope(raw_path=b"/mcp"), "query_string": b"a=1"}
    _forward(_router(lambda r: seen.append(r) or _ok()), scope)
    assert str(seen[0].url) == "http://127.0.0.1:2/mcp?a=1"


def test_the_clients_length_is_never_passed_on() -> None:
    # Regression: a DELETE with a body kept its Content-Length over an empty forwarded body,
    # and the forwarding failed with a 500.
    seen: list[httpx.Request] = []
    scope = _scope("DELETE", headers=[(b"host", b"h"), (b"content-length", b"2")])
    delivered, sent = _forward(_router(lambda r: seen.append(r) or _ok()),
                               scope, body=b"")
    assert delivered and sent[0]["status"] == 200
    assert seen[0].headers.get("content-length") in (None, "0")


def test_a_host_that_does_not_answer_in_time_is_a_retry_not_a_lost_session() -> None:
    # Regression: a pool timeout (the forwarding client out of connections) read as "the host
    # is gone": the route was forgotten and the client told its session no longer existed.
    def busy(request: httpx.Request) -> httpx.Response:
        raise httpx.PoolTimeout("no connection available")

    delivered, sent = _forward(_router(busy), _scope())
    assert delivered
    assert sent[0]["status"] == 503
    assert (b"retry-after", b"1") in sent[0]["headers"]


def test_a_host_that_cannot_be_reached_is_reported_for_the_table_to_be_asked_again() -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    delivered, sent = _forward(_router(refused), _scope())
    assert (delivered, sent) == (False, [])


def test_an_answer_cut_in_the_middle_is_cut_for_the_client_too(
        caplog: pytest.LogCaptureFixture) -> None:
    # Regression: the forwarded answer ended cleanly without its message when the other
    # host went away mid-stream.
    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b"event: message\ndata: {}\n\n"
            raise httpx.ReadError("the host went away")

    router = _router(lambda r: httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=Broken()))
    with pytest.raises(UpstreamLost):
        _forward(router, _scope())
    # uvicorn logs what its app raised with a traceback; this one is one line.
    record = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1,
                               "Exception in ASGI application", (),
                               (UpstreamLost, UpstreamLost("ReadError"), None))
    QuietUpstreamLost().filter(record)
    assert record.exc_info is None and "went away" in record.getMessage()


def test_made_up_session_ids_cost_lookups_never_memory() -> None:
    # Regression: every key ever looked up was remembered for good.
    table = Table(owner=None)
    router = _router(lambda r: httpx.Response(200), table)

    async def many() -> None:
        for n in range(2_000):
            assert await router.target(RouteKey(f"session\x1f{n}", session=True)) is None

    anyio.run(many)
    assert table.lookups == 2_000 and len(router._known) == 0


def test_remembered_routes_are_bounded() -> None:
    router = _router(lambda r: httpx.Response(200), Table(owner=OTHER))

    async def many() -> None:
        for n in range(_REMEMBER_AT_MOST + 50):
            assert await router.target(RouteKey(f"run\x1fp{n}\x1f", session=False)) == OTHER

    anyio.run(many)
    assert len(router._known) == _REMEMBER_AT_MOST


@pytest.fixture(autouse=True)
def _no_leaked_clients() -> Iterator[None]:
    yield


class _Answer(httpx.AsyncByteStream):
    """An SSE answer in three chunks, a pass of the loop apart; notes how far it was read."""

    def __init__(self) -> None:
        self.read: list[bytes] = []

    async def __aiter__(self) -> Any:
        for chunk in (b"event: message\n", b"data: {}\n\n", b""):
            await anyio.sleep(0.01)
            self.read.append(chunk)
            if chunk:
                yield chunk


@pytest.mark.parametrize(("method", "read_to_the_end"), [("POST", True), ("GET", False)])
def test_a_posts_answer_is_read_to_its_end_when_the_client_left(
        method: str, read_to_the_end: bool) -> None:
    # The SDK's client closes each POST's answer at its last event; an answer cut there
    # closed the pooled connection to the other host, so every forwarded call paid for a new
    # one. A GET stream has no end: it stops with its client.
    answer = _Answer()
    router = _router(lambda r: httpx.Response(200, stream=answer))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def go() -> bool:
        return await router.forward(OTHER, SESSION, _scope(method), b"{}", receive, send)

    assert anyio.run(go)
    assert (answer.read[-1:] == [b""]) is read_to_the_end


class _Endless(httpx.AsyncByteStream):
    """An SSE answer that never ends (a long call whose client gave up)."""

    async def __aiter__(self) -> Any:
        while True:
            await anyio.sleep(0.01)
            yield b": ping\n\n"


def test_an_answer_that_goes_on_is_cut_a_grace_after_its_client_left(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression: a forwarded POST read its answer to the end after the client left, so an
    # answer that never ended held its connection and kept a draining host waiting.
    import toolhost._mcp.http_routes as http_routes

    monkeypatch.setattr(http_routes, "LEFT_CLIENT_GRACE_S", 0.2)
    router = _router(lambda r: httpx.Response(200, stream=_Endless()))

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    async def go() -> bool:
        with anyio.fail_after(10):
            return await router.forward(OTHER, SESSION, _scope("POST"), b"{}", receive, send)

    assert anyio.run(go)
    assert router.forwarding == 0


class _Claims(Table):
    """A table where no host serves anything yet, counting claims."""

    def __init__(self) -> None:
        super().__init__(owner=None)
        self.claimed: list[str] = []

    def claim(self, key: str, host_id: str) -> HostAddress:
        self.claimed.append(host_id)
        return ME


RUN = RouteKey("run\x1fana\x1fprint", session=False)


def test_a_stopping_host_takes_no_new_run_and_says_retry() -> None:
    """Regression: a host draining on SIGTERM still claimed a new person's sessionless run, so
    every host sent that person's calls to it, refused ("stopping") until it was gone."""
    from toolhost._mcp.http_front import FrontDoor, HttpPolicy

    table = _Claims()
    router = _router(lambda r: _ok(), table)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("nothing is served here")

    door = FrontDoor(app, HttpPolicy(allowed_hosts=("testserver",), allowed_origins=(),
                                     max_body_bytes=4096, max_calls=1),
                     ready=lambda: True, monotonic=time.monotonic, router=router)
    door.draining = True

    async def ask() -> httpx.Response:
        with pytest.raises(NotServedHere):
            await router.target(RUN, claim=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=door),
                                     base_url="http://testserver") as client:
            return await client.post("/mcp", json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "math.calculate", "arguments": {"expression": "1"}}},
                headers={"mcp-protocol-version": "2026-07-28"})

    answer = anyio.run(ask)
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert table.claimed == []
    assert anyio.run(router.target, RUN) is None and table.claimed == ["me"]  # not stopping
