"""The approvals inbox's app (D314) driven in-process as ASGI, with a fake host over a real
SQLite record: odd query strings, pages anchored on another's call, and logins through the
issuer that never end. Each failed before its fix (found by a second review); the PostgreSQL
side of the history's filters is in the store's contract suite."""

from __future__ import annotations

import datetime as dt
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from toolhost import Principal
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._mcp.config import InboxOAuth
from toolhost._mcp.http_auth import Caller
from toolhost._mcp.inbox.app import FLOW_COOKIE, Inbox
from toolhost._mcp.inbox.login import Logins
from toolhost._model.invocations import InvocationState
from toolhost._testing.clocks import DEFAULT_INSTANT, FixedClock
from toolhost.testing import InvocationStoreContract

ADA = Caller(Principal("ada", frozenset()), "token-file")
record = InvocationStoreContract.record


class FakeHost:
    """What the inbox's reading routes use of a Host: its clock and its record."""

    def __init__(self, store: Any) -> None:
        self.invocations = store
        self.clock = FixedClock(DEFAULT_INSTANT + dt.timedelta(hours=1))

    def row(self, invocation_id: str) -> Any:
        return self.invocations.get(invocation_id)

    def deadline_in(self, seconds: float) -> float:
        return time.monotonic() + seconds

    def describe_call(self, record: Any) -> tuple[str, list[str]] | None:
        return None  # no tool of a fake host describes its calls


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteInvocationStore]:
    opened = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    yield opened
    opened.close()


def _inbox(store: Any, **kwargs: Any) -> Inbox:
    ids = iter(range(1, 1 << 30))
    logins = Logins(b"s" * 32, None, lambda: DEFAULT_INSTANT.timestamp(),
                    lambda: f"{next(ids):032x}")

    async def verify(token: str) -> Caller | None:
        return None

    return Inbox(FakeHost(store), logins, verify, **kwargs)  # type: ignore[arg-type]


async def _get(inbox: Inbox, path: str, query: str = "", *, caller: Caller | None = None,
               cookie: str | None = None) -> tuple[int, dict[str, list[str]], bytes]:
    headers = [(b"host", b"127.0.0.1")]
    if cookie is not None:
        headers.append((b"cookie", cookie.encode()))
    scope = {"type": "http", "method": "GET", "path": path, "headers": headers,
             "query_string": query.encode("latin-1"), "scheme": "http"}
    answer: dict[str, Any] = {"headers": {}, "body": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            for k, v in message["headers"]:
                answer["headers"].setdefault(k.decode(), []).append(v.decode("latin-1"))
        else:
            answer["body"] += message.get("body", b"")

    await inbox(scope, receive, send, caller)
    return answer["status"], answer["headers"], answer["body"]


# ---------------------------------------------------------------------------- history


def test_history_hours_that_isdigit_but_is_not_int_is_no_filter_not_a_500(
        store: SQLiteInvocationStore) -> None:
    # Regression: ``"²".isdigit()`` is True but int("²") raises ValueError: a 500.
    inbox = _inbox(store)

    async def probe() -> None:
        for query in ("hours=%C2%B2", "hours=\xb9"):
            status, _, _ = await _get(inbox, "/ui/history", query, caller=ADA)
            assert status == 200, query

    anyio.run(probe)


def test_a_history_page_anchored_on_anothers_call_is_as_a_missing_one(
        store: SQLiteInvocationStore) -> None:
    # Regression: /ui/history?before=ID answered 303 for an id that does not exist but 200
    # for another principal's call (positioned at its created_at): an existence oracle.
    store.insert(record(id="a" * 32, principal_id="ada", created_at=DEFAULT_INSTANT,
                        state=InvocationState.SUCCEEDED))
    store.insert(record(id="b" * 32, principal_id="bob",
                        created_at=DEFAULT_INSTANT + dt.timedelta(seconds=5),
                        state=InvocationState.SUCCEEDED))
    inbox = _inbox(store)

    async def probe() -> None:
        missing, _, _ = await _get(inbox, "/ui/history", "before=" + "f" * 32, caller=ADA)
        assert missing == 303
        theirs, _, body = await _get(inbox, "/ui/history", "before=" + "b" * 32, caller=ADA)
        assert theirs == missing, body[:200]

    anyio.run(probe)


# ---------------------------------------------------------------------------- the issuer


def test_token_exchanges_of_unauthenticated_callbacks_do_not_take_every_thread(
        store: SQLiteInvocationStore) -> None:
    # Regression: anyone can begin a flow and send its callback with any code; each token
    # request (a blocking POST to the issuer) ran on anyio's shared threads (40), so 40 junk
    # callbacks against a slow issuer left a logged-in person's history waiting. They now
    # take EXCHANGING threads of their own.
    release = threading.Event()
    oauth = InboxOAuth("inbox", "https://issuer.test/authorize", "https://issuer.test/token",
                       "http://127.0.0.1/ui/login/callback", "http://127.0.0.1/mcp")

    def slow_post(url: str, form: dict[str, str], auth: Any, limit: int) -> bytes:
        release.wait(20)
        raise ValueError("refused")

    inbox = _inbox(store, oauth=oauth, post=slow_post)

    async def flow() -> tuple[str, str]:
        status, headers, _ = await _get(inbox, "/ui/login/start")
        assert status == 303
        state = urllib.parse.parse_qs(urllib.parse.urlsplit(
            headers["location"][0]).query)["state"][0]
        cookie = headers["set-cookie"][0].split(";")[0]
        assert cookie.startswith(FLOW_COOKIE + "=")
        return state, cookie

    async def probe() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(40):
                state, cookie = await flow()
                group.start_soon(lambda s=state, c=cookie: _get(
                    inbox, "/ui/login/callback", f"code=junk&state={s}", cookie=c))
            await anyio.sleep(0.5)
            began = time.monotonic()
            with anyio.move_on_after(3):
                status, _, _ = await _get(inbox, "/ui/history", caller=ADA)
            waited = time.monotonic() - began
            release.set()
        assert waited < 3, "the history waited for a thread the junk callbacks held"
        assert status == 200

    anyio.run(probe)


def test_cookies_are_secure_when_the_public_url_is_https_though_tls_ends_before(
        store: SQLiteInvocationStore) -> None:
    async def cookie_of(inbox: Inbox) -> str:
        status, headers, _ = await _get(inbox, "/ui/login")
        assert status == 200
        return headers["set-cookie"][0]

    async def probe() -> None:
        assert "; Secure" in await cookie_of(_inbox(store, public_https=True))
        assert "; Secure" not in await cookie_of(_inbox(store))

    anyio.run(probe)


def test_the_overview_reads_the_record_once_for_a_page_reloaded_in_a_loop(
        store: SQLiteInvocationStore) -> None:
    store.insert(record(id="a" * 32, principal_id="ada", state=InvocationState.SUCCEEDED))
    reads: list[str | None] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def history(self, **given: Any) -> Any:
            reads.append(given.get("principal_id"))
            return store.history(**given)

    inbox = _inbox(Counting())
    bob = Caller(Principal("bob", frozenset()), "token-file")

    async def probe() -> None:
        for caller in (ADA, ADA, ADA, bob):
            status, _, body = await _get(inbox, "/ui/overview", caller=caller)
            assert status == 200
        assert b"No calls recorded yet." in body  # Bob has none of Ada's

    anyio.run(probe)
    assert reads == ["ada", "bob"]


def test_the_waiting_list_is_one_read_however_many_calls_wait(
        store: SQLiteInvocationStore) -> None:
    # Regression: each poll (every 2 s per open tab) read the waiting calls' ids, then each
    # whole row again: 1 + N reads. One read now, newest first, the person's own calls only.
    _ada_waits(store, 5)
    store.insert(record(id="b" * 32, principal_id="bob", state=InvocationState.AWAITING_APPROVAL))
    store.insert(record(id="c" * 32, principal_id="ada", state=InvocationState.SUCCEEDED))
    reads: list[str] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            reads.append(name)
            return getattr(store, name)

    inbox = _inbox(Counting())

    async def probe() -> bytes:
        status, _, body = await _get(inbox, "/ui/inbox.part", caller=ADA)
        assert status == 200
        return body

    body = anyio.run(probe)
    assert reads == ["history"]
    shown = [body.index(f'data-id="{i:032x}"'.encode()) for i in reversed(range(5))]
    assert shown == sorted(shown)  # newest first
    assert b"b" * 32 not in body and b"c" * 32 not in body


def test_past_the_shown_waiting_calls_the_inbox_says_older_ones_wait(
        store: SQLiteInvocationStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolhost._mcp.inbox import app

    monkeypatch.setattr(app, "WAITING_SHOWN", 3)
    _ada_waits(store, 5)
    inbox = _inbox(store)

    async def part() -> bytes:
        status, _, body = await _get(inbox, "/ui/inbox.part", caller=ADA)
        assert status == 200
        return body

    body = anyio.run(part)
    assert [i for i in range(5) if f'data-id="{i:032x}"'.encode() in body] == [2, 3, 4]
    older = f"status=awaiting_approval&before={2:032x}"  # after the oldest one shown
    assert f'href="/ui/history?{older.replace("&", "&amp;")}"'.encode() in body

    async def follow() -> bytes:
        status, _, page = await _get(inbox, "/ui/history", older, caller=ADA)
        assert status == 200
        return page

    page = anyio.run(follow)
    assert [i for i in range(5) if f"{i:032x}".encode() in page] == [0, 1]
    store.transition(f"{0:032x}", expected={InvocationState.AWAITING_APPROVAL},
                     to=InvocationState.DENIED)
    store.transition(f"{1:032x}", expected={InvocationState.AWAITING_APPROVAL},
                     to=InvocationState.DENIED)
    assert b"status=awaiting_approval" not in anyio.run(part)  # all shown: no note


def _ada_waits(store: SQLiteInvocationStore, calls: int) -> None:
    """``calls`` calls of Ada's awaiting approval, ids 0, 1, ... (32 hex digits), a second
    apart, oldest first."""
    for i in range(calls):
        store.insert(record(id=f"{i:032x}", principal_id="ada",
                            created_at=DEFAULT_INSTANT + dt.timedelta(seconds=i),
                            state=InvocationState.AWAITING_APPROVAL))


async def _log_in(inbox: Inbox, token: str) -> int:
    """A login form posted as a browser posts it (its before-login cookie and CSRF token): the
    answer's status."""
    from toolhost._mcp.inbox.app import BEFORE_COOKIE

    csrf, before = inbox._logins.before_login()
    body = f"csrf={csrf}&token={token}".encode()
    scope = {"type": "http", "method": "POST", "path": "/ui/login", "scheme": "http",
             "query_string": b"",
             "headers": [(b"host", b"127.0.0.1"), (b"origin", b"http://127.0.0.1"),
                         (b"content-type", b"application/x-www-form-urlencoded"),
                         (b"cookie", f"{BEFORE_COOKIE}={before}".encode())]}
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await inbox(scope, receive, send, None)
    return status[0]


def test_a_login_while_tokens_queue_for_the_issuer_is_asked_to_retry(
        store: SQLiteInvocationStore) -> None:
    """With INTROSPECTION_QUEUE requests already waiting for the issuer, a login is told to
    try again (503), not that its token is invalid (D331)."""
    from toolhost._mcp.http_introspection import IntrospectionBusy

    inbox = _inbox(store)

    async def busy(token: str) -> Caller | None:
        raise IntrospectionBusy("too many tokens wait for the issuer's answer")

    inbox._verify = busy  # type: ignore[assignment]
    assert anyio.run(_log_in, inbox, "opaque-token") == 503


def test_a_principal_past_its_logins_of_the_hour_is_told_to_wait(
        store: SQLiteInvocationStore) -> None:
    from toolhost._mcp.inbox.login import LOGINS_PER_HOUR

    inbox = _inbox(store)

    async def ada(token: str) -> Caller | None:
        return ADA

    inbox._verify = ada  # type: ignore[assignment]

    async def many() -> list[int]:
        return [await _log_in(inbox, "ada-token") for _ in range(LOGINS_PER_HOUR + 1)]

    assert anyio.run(many) == [303] * LOGINS_PER_HOUR + [429]


# ---------------------------------------------------------------------------- old rows


def test_a_row_stored_with_nan_before_d401_is_still_shown(
        store: SQLiteInvocationStore, tmp_path: Path) -> None:
    # Regression: the canonical encoder refuses NaN since D401, and one waiting row stored
    # before it (SQLite took NaN) made the inbox, its waiting list and the call's page a 500.
    store.insert(record(id="a" * 32, principal_id="ada", state=InvocationState.AWAITING_APPROVAL))
    conn = connect(tmp_path / DATABASE_NAME)
    conn.execute("UPDATE tool_invocations SET arguments = ? WHERE id = ?",
                 ('{"x":NaN,"y":-Infinity}', "a" * 32))
    conn.commit()
    conn.close()
    inbox = _inbox(store)

    async def probe() -> None:
        for path in ("/ui/", "/ui/inbox.part", "/ui/calls/" + "a" * 32):
            status, _, body = await _get(inbox, path, caller=ADA)
            assert status == 200, (path, body[:300])
        assert b"{&quot;x&quot;:NaN,&quot;y&quot;:-Infinity}" in body

    anyio.run(probe)
