"""The approvals inbox when its record's store fails: a denial the store does not take is
answered as an approval it does not take (409, "could not be recorded"), and every page or
decision read while the store is away is the static 503 a cookie's login check already gave
("The record did not answer"), with one log line and no traceback (D307, D324). Before, the
denial under another process's SQLite write lock, and any ``/ui/`` page asked with a bearer
header while PostgreSQL was down, were a 500 with a traceback.

Driven in-process as ASGI (as test_inbox_app is): the denial over a real Host and a real SQLite
record whose write lock another connection holds (``BEGIN IMMEDIATE``), the pages over a real
PostgreSQL cluster stopped in the middle of the test (``-m immediate``, as a crash).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import sqlite3
import urllib.parse
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from conftest import make_plugin, make_tool
from pg_server import PgServer, pg_database, pg_server
from test_inbox_app import ADA, FakeHost, record

from toolhost import Principal
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._composition import Host
from toolhost._mcp.http_auth import Caller, TokenFile
from toolhost._mcp.inbox.app import COOKIE, Inbox
from toolhost._mcp.inbox.login import DECIDE_SCOPE, Logins
from toolhost._model.invocations import InvocationState
from toolhost._testing.clocks import DEFAULT_INSTANT
from toolhost.testing import host_for

NO_ANSWER = b"The record did not answer; try again in a moment.\n"
NOT_RECORDED = b"The decision could not be recorded; try again."
ADA_INBOX = "ada-inbox-token"
FIRST, SECOND = "a" * 32, "b" * 32

__all__ = ["pg_database", "pg_server"]  # the fixtures, used by name


def warnings_of(logged: io.StringIO) -> list[dict[str, Any]]:
    """The log's warning lines; no traceback anywhere in it."""
    assert "Traceback" not in logged.getvalue()
    lines = [json.loads(line) for line in logged.getvalue().splitlines()]
    return [line for line in lines if line["level"] == "warning"]


def ada_logged_in(tmp_path: Path, host: Any) -> tuple[Inbox, str, str]:
    """An inbox over ``host`` and Ada's browser login to it with a token of hers that has
    ``approvals.decide`` (a token file's, looked up again at each request): the inbox, her
    ``Cookie`` header and her CSRF token."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(f'[[token]]\nsha256 = "{hashlib.sha256(ADA_INBOX.encode()).hexdigest()}"'
                      f'\nprincipal = "ada"\nscopes = ["{DECIDE_SCOPE}"]\n')
    token_file = TokenFile(tokens)
    nonces = iter(range(1, 1 << 30))
    logins = Logins(b"s" * 32, token_file, lambda: DEFAULT_INSTANT.timestamp(),
                    lambda: f"{next(nonces):032x}")

    async def verify(token: str) -> Caller | None:
        return token_file.verify(token)

    value = logins.issue(Caller(Principal("ada", frozenset({DECIDE_SCOPE})), "token-file"),
                         ADA_INBOX)
    assert value is not None
    login = logins.read(value)
    assert login is not None
    return Inbox(host, logins, verify), f"{COOKIE}={value}", logins.csrf(login)


async def ask(inbox: Inbox, method: str, path: str, *, query: str = "",
              caller: Caller | None = None, cookie: str | None = None,
              form: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One request to the inbox, as the front door hands it on: its status and body."""
    headers = [(b"host", b"127.0.0.1")]
    if cookie is not None:
        headers.append((b"cookie", cookie.encode()))
    body = urllib.parse.urlencode(form or {}).encode()
    scope = {"type": "http", "method": method, "path": path, "headers": headers,
             "query_string": query.encode(), "scheme": "http"}
    answer: dict[str, Any] = {"body": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        else:
            answer["body"] += message.get("body", b"")

    await inbox(scope, receive, send, caller)
    return answer["status"], answer["body"]


# ------------------------------------------------------------ a decision the store refuses


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    """A real Host with fx.echo (the tool of ``record``'s rows), whose record waits 0.2 s,
    not 30, for another process's write lock."""
    with host_for({"toolhost-fx": make_plugin(("fx",), [make_tool()])},
                  data_dir=tmp_path / "data") as made:
        conn = connect(made.data_dir / DATABASE_NAME)
        conn.execute("PRAGMA busy_timeout=200")
        store = SQLiteInvocationStore(conn)
        kept, made.pipeline.invocations = made.pipeline.invocations, store
        try:
            yield made
        finally:
            store.close()
            made.pipeline.invocations = kept  # closed with the host


def test_a_denial_the_record_does_not_take_is_answered_as_an_approval_it_does_not_take(
        tmp_path: Path, host: Host, logged: io.StringIO) -> None:
    # Before: the denial was a 500 and sqlite3.OperationalError's traceback in the log, while
    # the approval beside it was the call's page, 409, "could not be recorded".
    for invocation_id in (FIRST, SECOND):
        host.invocations.insert(record(id=invocation_id, principal_id="ada",
                                       state=InvocationState.AWAITING_APPROVAL))
    inbox, cookie, csrf = ada_logged_in(tmp_path, host)

    async def decide(invocation_id: str, action: str) -> tuple[int, bytes]:
        return await ask(inbox, "POST", f"/ui/calls/{invocation_id}/{action}", cookie=cookie,
                         form={"csrf": csrf, "reason": "not now"})

    async def probe() -> None:
        # Another process writes (a backup, `toolhost recover`, another host's long write).
        with closing(sqlite3.connect(host.data_dir / DATABASE_NAME,
                                     isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            denied, approved = await decide(FIRST, "deny"), await decide(SECOND, "approve")
            other.execute("ROLLBACK")
        for status, page in (denied, approved):
            assert status == 409 and NOT_RECORDED in page, re.findall(rb'class="message"[^<]*<', page)
        assert [host.row(i).state for i in (FIRST, SECOND)] == [
            InvocationState.AWAITING_APPROVAL] * 2  # nothing changed: decided again, it is
        assert (await decide(FIRST, "deny"))[0] == 303
        assert host.row(FIRST).state is InvocationState.DENIED

    anyio.run(probe)
    assert [(w["event"], w["invocation_id"], w["error"]) for w in warnings_of(logged)] == [
        ("http.inbox.decision_failed", FIRST, "OperationalError"),
        ("http.inbox.decision_failed", SECOND, "ApprovalNotRecorded")]


def test_a_decision_on_a_damaged_row_is_answered_as_on_a_missing_one(
        tmp_path: Path, host: Host, logged: io.StringIO) -> None:
    # The review's deny of a damaged row (a 500 before D476, whose tests read the pages):
    # its owner cannot be read, so it is nobody's to decide, as a missing call is.
    host.invocations.insert(record(id=FIRST, principal_id="ada",
                                   state=InvocationState.AWAITING_APPROVAL))
    with closing(sqlite3.connect(host.data_dir / DATABASE_NAME)) as db, db:
        db.execute("UPDATE tool_invocations SET created_at = 'not a time' WHERE id = ?",
                   (FIRST,))
    inbox, cookie, csrf = ada_logged_in(tmp_path, host)

    async def probe() -> list[tuple[int, bytes]]:
        return [await ask(inbox, "POST", f"/ui/calls/{invocation_id}/{action}",
                          cookie=cookie, form={"csrf": csrf, "reason": "no"})
                for action in ("deny", "approve") for invocation_id in (FIRST, SECOND)]

    assert anyio.run(probe) == [(404, b"Not found.\n")] * 4
    assert [(w["event"], w["field"]) for w in warnings_of(logged)] == [
        ("http.inbox.record_damaged", "created_at")] * 2


# ------------------------------------------------------------ the record away


def test_every_page_and_decision_while_postgresql_is_down_is_the_static_503(
        tmp_path: Path, pg_server: PgServer, pg_database: str, logged: io.StringIO) -> None:
    # Before: with a bearer header (no login cookie to check first), every page was a 500
    # and psycopg_pool.PoolTimeout's traceback; so was a decision of a login whose logouts
    # are not kept with the record. Now each is the cookie check's static 503.
    from toolhost._adapters.pg_invocations import PostgresInvocationStore

    store = PostgresInvocationStore(pg_database, timeout=1)
    try:
        store.insert(record(id=FIRST, principal_id="ada",
                            state=InvocationState.AWAITING_APPROVAL))
        inbox, cookie, csrf = ada_logged_in(tmp_path, FakeHost(store))
        pages = [("/ui/", ""), ("/ui/inbox.part", ""), ("/ui/history", ""),
                 ("/ui/history", f"before={FIRST}"), ("/ui/overview", ""),
                 (f"/ui/calls/{FIRST}", ""), (f"/ui/calls/{FIRST}/files/x", "")]

        async def probe() -> list[tuple[int, bytes]]:
            assert (await ask(inbox, "GET", "/ui/", caller=ADA))[0] == 200
            pg_server.stop()
            try:
                answers = [await ask(inbox, "GET", path, query=query, caller=ADA)
                           for path, query in pages]
                answers += [await ask(inbox, "POST", f"/ui/calls/{FIRST}/{action}",
                                      cookie=cookie, form={"csrf": csrf, "reason": "no"})
                            for action in ("approve", "deny")]
            finally:
                pg_server.start()
            # The record back, so is the inbox (the pool reconnects).
            status, page = await ask(inbox, "GET", "/ui/", caller=ADA)
            assert status == 200 and FIRST.encode() in page
            return answers

        answers = anyio.run(probe)
    finally:
        store.close()
    assert answers == [(503, NO_ANSWER)] * (len(pages) + 2)
    assert [(w["event"], w["error"]) for w in warnings_of(logged)] == [
        ("http.inbox.record_unavailable", "PoolTimeout")] * (len(pages) + 2)
