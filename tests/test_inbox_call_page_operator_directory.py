"""The inbox's call page says where a call that paused in an operator's directory runs once
approved (D509): the path, escaped, to an `approvals.admin` login; to the call's own principal,
whose agent's client may read the page with its bearer token, only that it is the operator's
own directory, never the path (D458 keeps it from the model). Driven in-process as ASGI over a
real SQLite record, as test_inbox_app is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_inbox_app import ADA, _get, _inbox, record

from toolhost import Principal
from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._mcp.http_auth import Caller
from toolhost._mcp.inbox.login import ADMIN_SCOPE
from toolhost._model.invocations import InvocationState

ADMIN = Caller(Principal("root", frozenset({ADMIN_SCOPE})), "token-file")
WAITING = "a" * 32


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteInvocationStore]:
    opened = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    yield opened
    opened.close()


def test_the_call_page_names_the_operators_directory_to_an_admin_alone(
        store: SQLiteInvocationStore) -> None:
    store.insert(record(id=WAITING, principal_id="ada", state=InvocationState.AWAITING_APPROVAL,
                        operator_directory={"host": "build-7", "path": "/srv/<p>\u202e",
                                            "device": 1, "inode": 2}))
    inbox = _inbox(store)

    async def probe() -> tuple[bytes, bytes]:
        pages = []
        for caller in (ADMIN, ADA):
            status, _, page = await _get(inbox, f"/ui/calls/{WAITING}", caller=caller)
            assert status == 200, page[:300]
            pages.append(page)
        return pages[0], pages[1]

    admin, own = anyio.run(probe)
    assert b"<dt>directory</dt><dd>/srv/&lt;p&gt;\\u202e on build-7</dd>" in admin
    assert (b"<dt>directory</dt><dd>the operator&#x27;s own, kept as it is (its path shows to "
            b"approvals.admin)</dd>") in own
    assert b"/srv/" not in own
