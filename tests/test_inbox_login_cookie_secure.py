"""The inbox's login cookie is ``Secure`` whenever the login form was posted from an https
page, though the request reached the server as plain http: operator.md's team setup (a token
file, ``TOOLHOST_HTTP_ALLOWED_ORIGINS=https://...``, TLS ended by a proxy on another machine,
whose ``X-Forwarded-Proto`` uvicorn does not trust) has no https audience or advertised URL to
tell it by. Before, that login's 8-hour cookie had no ``Secure``. A plain-http loopback login
still works (its cookie cannot be ``Secure``: the browser would not send it back). Driven
in-process as ASGI, as test_inbox_app is.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_inbox_app import FakeHost
from test_inbox_record_unavailable import ADA_INBOX, ada_logged_in

from toolhost._adapters.sqlite_db import DATABASE_NAME, connect
from toolhost._adapters.sqlite_invocations import SQLiteInvocationStore
from toolhost._mcp.inbox.app import BEFORE_COOKIE, COOKIE, Inbox


async def log_in(inbox: Inbox, origin: str | None) -> tuple[int, str]:
    """The login form read (a top-level navigation: no ``Origin``), then posted from a page
    of ``origin`` (None: without one) over plain http: the POST's status and its cookie's
    header."""
    answers: list[tuple[int, dict[str, str], bytes]] = []

    async def request(method: str, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        got: dict[str, object] = {"body": b""}

        async def receive() -> dict[str, object]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                got["status"] = message["status"]
                got["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
            else:
                got["body"] = got["body"] + message.get("body", b"")  # type: ignore[operator]

        # The Host the page's origin names (a login comes from the server's own page).
        host = origin.partition("://")[2] if origin else "mcp.example.org"
        scope = {"type": "http", "method": method, "path": "/ui/login", "scheme": "http",
                 "query_string": b"", "headers": [(b"host", host.encode()), *headers]}
        await inbox(scope, receive, send, None)
        answers.append((got["status"], got["headers"], got["body"]))  # type: ignore[arg-type]

    await request("GET", [], b"")
    _, form_headers, page = answers[-1]
    before = form_headers["set-cookie"].split(";")[0]
    assert before.startswith(BEFORE_COOKIE + "=")
    found = re.search(rb'name="csrf" value="([^"]+)"', page)
    assert found is not None
    body = f"csrf={found.group(1).decode()}&token={ADA_INBOX}".encode()
    sent = [(b"cookie", before.encode()), (b"content-type", b"application/x-www-form-urlencoded")]
    await request("POST", sent + ([(b"origin", origin.encode())] if origin else []), body)
    status, headers, _ = answers[-1]
    return status, headers.get("set-cookie", "")


def test_a_login_posted_from_an_https_page_gets_a_secure_cookie_over_plain_http(
        tmp_path: Path) -> None:
    store = SQLiteInvocationStore(connect(tmp_path / DATABASE_NAME))
    inbox, _, _ = ada_logged_in(tmp_path, FakeHost(store))

    async def probe() -> None:
        status, cookie = await log_in(inbox, "https://mcp.example.org")
        assert status == 303 and cookie.startswith(COOKIE + "="), cookie
        assert cookie.endswith("; Secure"), cookie
        status, cookie = await log_in(inbox, "http://127.0.0.1:8765")
        assert status == 303 and cookie.startswith(COOKIE + "="), cookie
        assert "Secure" not in cookie
        # So the Origin always tells: a login posted without one is refused, no cookie made.
        status, cookie = await log_in(inbox, None)
        assert status == 403 and cookie == ""

    try:
        anyio.run(probe)
    finally:
        store.close()
