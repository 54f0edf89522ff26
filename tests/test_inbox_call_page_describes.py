"""The inbox's call page shows what a waiting call's tool says it will do
(``Host.describe_call``), each line HTML-escaped, before the arguments; a decided call is not
described (nobody decides it any more). Driven in-process as ASGI over a real SQLite record,
as test_inbox_app is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_inbox_app import ADA, FakeHost, _get, record

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._mcp.inbox.app import Inbox
from toolhost._mcp.inbox.login import Logins
from toolhost._model.invocations import InvocationState
from toolhost._testing.clocks import DEFAULT_INSTANT

WAITING, DENIED = "a" * 32, "b" * 32


class DescribingHost(FakeHost):
    """A fake host whose tool says, for each call asked about, two lines of its own."""

    def __init__(self, records: Any) -> None:
        super().__init__(records)
        self.asked: list[str] = []

    def describe_call(self, record: Any) -> tuple[str, list[str]] | None:
        self.asked.append(record.id)
        return "toolhost-email", ['s_1: list <b>news</b> & "more"', "one-click POST to https://x/…"]


def _inbox(host: DescribingHost) -> Inbox:
    logins = Logins(b"s" * 32, None, lambda: DEFAULT_INSTANT.timestamp(), lambda: "1" * 32)

    async def verify(token: str) -> None:
        return None

    return Inbox(host, logins, verify)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteInvocationStore]:
    opened = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    yield opened
    opened.close()


def test_the_call_page_shows_the_tools_lines_escaped_before_the_arguments(
        store: SQLiteInvocationStore) -> None:
    store.insert(record(id=WAITING, principal_id="ada", state=InvocationState.AWAITING_APPROVAL))
    store.insert(record(id=DENIED, principal_id="ada", state=InvocationState.DENIED))
    host = DescribingHost(store)
    inbox = _inbox(host)

    async def probe() -> tuple[bytes, bytes]:
        status, _, waiting = await _get(inbox, f"/ui/calls/{WAITING}", caller=ADA)
        assert status == 200, waiting[:300]
        status, _, denied = await _get(inbox, f"/ui/calls/{DENIED}", caller=ADA)
        assert status == 200, denied[:300]
        return waiting, denied

    waiting, denied = anyio.run(probe)
    block = (b"<h2>What toolhost-email says this call does</h2><ul class=\"described\">"
             b"<li>s_1: list &lt;b&gt;news&lt;/b&gt; &amp; &quot;more&quot;</li>"
             b"<li>one-click POST to https://x/\xe2\x80\xa6</li></ul><h2>Arguments</h2>")
    assert block in waiting
    assert b"<b>news" not in waiting
    assert b"says this call does" not in denied
    assert host.asked == [WAITING]
