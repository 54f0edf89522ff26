"""The approvals inbox (D314) at its edges: bytes that are not ASCII, bodies held open, a
server that stops while an approval runs, a principal at its cap on calls, an issuer's token
that expires. Each failed before its fix (found by a review of the first version).

A real ``toolhost serve --http`` with a token file, raw HTTP for what an attacker or a careless
client sends; one test uses the fake OAuth issuer's introspection endpoint."""

from __future__ import annotations

import signal
import socket
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.fake_services import oauth_issuer
from journeys.journey_support import Deployment, free_port, meta, run
from test_http_serve import ADA
from test_inbox_http import ADA_INBOX, _csrf, _login, _row, ada_served, pend
from test_inbox_http import inbox_deployment as deployment

#: fxw.slow (WORKSPACE_WRITE/LOW) pauses for approval too, so an approval can run for long.
SLOW_NEEDS_APPROVAL = '{"WORKSPACE_WRITE/LOW": "approval"}'


def _raw(base: str, request: bytes, timeout: float = 10.0) -> bytes:
    """What the server answers ``request`` on a connection of its own (until it closes the
    connection or ``timeout`` passes: then what came, and ``<<timeout>>``)."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request)
        answer = b""
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except TimeoutError:
            answer += b"<<timeout>>"
    return answer


def _head(base: str) -> bytes:
    return base.removeprefix("http://").encode()


# ---------------------------------------------------------------------------- 500s


def test_a_cookie_that_is_not_ascii_is_no_login_not_a_500(tmp_path: Path) -> None:
    # login.py Logins.read: hmac.compare_digest raises TypeError for a non-ASCII str, before
    # any login is known: an unauthenticated traceback (and a 500) for one byte.
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            answer = _raw(base, b"GET /ui/ HTTP/1.1\r\nHost: " + _head(base)
                          + b"\r\nCookie: toolhost_inbox=e30.\xe9\r\nConnection: close\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 303 "), answer[:80]

    run(journey)  # and the server's log has no traceback


def test_a_csrf_field_that_is_not_ascii_is_403_not_a_500(tmp_path: Path) -> None:
    # login.py Logins.csrf_holds: the same TypeError for a form's csrf of one non-ASCII
    # character (or %FF, decoded as U+FFFD).
    people = deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            ada_id = await pend(ada, "ops")
            with closing(_login(base, ADA_INBOX)) as browser:
                for csrf in ("\u00e9", "%FF"):
                    body = "csrf=" + (csrf if csrf.startswith("%") else "%C3%A9")
                    answer = browser.post(f"/ui/calls/{ada_id}/approve", content=body, headers={
                        "content-type": "application/x-www-form-urlencoded"})
                    assert answer.status_code == 403, (csrf, answer.status_code)
            assert _row(people, ada_id)["state"] == "awaiting_approval"

    run(journey)


# ---------------------------------------------------------------------------- slow bodies


def test_a_login_body_held_open_is_408_as_on_mcp(tmp_path: Path) -> None:
    # app.py _form reads without TOOLHOST_HTTP_BODY_TIMEOUT_S (the front door's MCP POST is
    # 408 after it): an unauthenticated POST /ui/login that never finishes its body holds its
    # connection (and one of TOOLHOST_HTTP_MAX_CONNECTIONS) for as long as the client likes.
    people = deployment(tmp_path, TOOLHOST_HTTP_BODY_TIMEOUT_S="1")

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            mcp = _raw(base, b"POST /mcp HTTP/1.1\r\nHost: " + _head(base)
                       + b"\r\nAuthorization: Bearer " + ADA.encode()
                       + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
                       b"Connection: close\r\n\r\n{", timeout=8)
            assert mcp.startswith(b"HTTP/1.1 408 "), mcp[:80]
            login = _raw(base, b"POST /ui/login HTTP/1.1\r\nHost: " + _head(base)
                         + b"\r\nOrigin: " + base.encode()
                         + b"\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                         b"Content-Length: 100\r\nConnection: close\r\n\r\ntoken=", timeout=8)
            assert login.startswith(b"HTTP/1.1 408 "), login[:80]

    run(journey)


# ---------------------------------------------------------------------------- the front door


def _approve_in_thread(base: str, invocation_id: str, answers: dict[str, Any]) -> threading.Thread:
    """Ada approves the call in her inbox (a browser's login), on a thread of its own."""
    browser = _login(base, ADA_INBOX)
    csrf = _csrf(browser.get("/ui/").text)

    def approve() -> None:
        try:
            answers[invocation_id] = browser.post(
                f"/ui/calls/{invocation_id}/approve", data={"csrf": csrf},
                timeout=60).status_code
        except httpx.HTTPError as exc:
            answers[invocation_id] = type(exc).__name__
        finally:
            browser.close()

    thread = threading.Thread(target=approve, daemon=True)
    thread.start()
    return thread


async def _until_started(log: Path, times: int = 1) -> None:
    deadline = time.monotonic() + 30
    while not (log.exists() and log.read_text().split().count("started") >= times):
        assert time.monotonic() < deadline, "fxw.slow never started"
        await anyio.sleep(0.05)


def test_a_stopping_server_lets_an_inbox_approval_finish(tmp_path: Path) -> None:
    # Regression: the drain waited only for MCP's calls, so SIGTERM cut an approval running
    # from the inbox after uvicorn's 3 s grace: a 500 with a traceback, the row left running.
    people = deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off", TOOLHOST_HTTP_DRAIN_S="30",
                        TOOLHOST_POLICY=SLOW_NEEDS_APPROVAL)
    answers: dict[str, Any] = {}

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            slow_id = meta(await ada.call_tool("fxw.slow", {"seconds": 8}), "invocationId")
            thread = _approve_in_thread(base, slow_id, answers)
            await _until_started(tmp_path / "fxw.log")
            server = people.servers[-1]
            server.send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(thread.join, 60)
            await anyio.to_thread.run_sync(server.wait, 60)
            # Before the harness's own checks (exit 0, no traceback in the server's log):
            assert list(answers.values()) == [303], answers
            assert {r["state"] for r in people.invocations()} == {"succeeded"}

    run(journey)


def test_the_per_principal_call_cap_bounds_inbox_approvals(tmp_path: Path) -> None:
    # Regression: TOOLHOST_HTTP_MAX_CALLS counted MCP's tools/call only: approvals at once in
    # the inbox ran bodies past the cap. Past it an approval is now 429, its call still
    # waiting. (A cap of 2, not 1: a client's next call may arrive while its last one's
    # answer is still leaving, and count.)
    people = deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off", TOOLHOST_HTTP_MAX_CALLS="2",
                        TOOLHOST_POLICY=SLOW_NEEDS_APPROVAL)
    answers: dict[str, Any] = {}

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            ids = [meta(await ada.call_tool("fxw.slow", {"seconds": s}), "invocationId")
                   for s in (4, 5, 6)]
            threads = [_approve_in_thread(base, i, answers) for i in ids]
            await _until_started(tmp_path / "fxw.log", times=2)
            await anyio.sleep(1.5)
            running = (tmp_path / "fxw.log").read_text().split().count("started")
            for thread in threads:
                await anyio.to_thread.run_sync(thread.join, 60)
            assert running == 2, f"{running} bodies of one principal ran at once past a cap of 2"
            assert sorted(answers.values()) == [303, 303, 429], answers
            states = sorted(_row(people, i)["state"] for i in ids)
            assert states == ["awaiting_approval", "succeeded", "succeeded"]

    run(journey)


# ---------------------------------------------------------------------------- issuer logins


def test_an_issuers_login_ends_with_its_token_and_needs_an_expiry(tmp_path: Path) -> None:
    # Regression: an opaque (introspected) token's login lasted 8 h whatever the token's exp
    # (only a JWT's was read). A login now lasts at most as long as the issuer says its token
    # does, and a token that says nothing cannot make one.
    with oauth_issuer(tmp_path) as issuer:
        port = free_port()
        audience = f"http://127.0.0.1:{port}/mcp"
        claims = {"active": True, "sub": "ada", "aud": audience, "iss": issuer.url,
                  "scope": ""}
        issuer.introspected["opaque-forever"] = dict(claims)
        people = Deployment(tmp_path, plugins="toolhost-math", **issuer.settings(audience),
                            **issuer.introspection_settings(),
                            TOOLHOST_HTTP_INTROSPECTION_CACHE_S="0")

        async def journey() -> None:
            async with people.http_server(port=port) as url:
                base = url.removesuffix("/mcp")
                issuer.introspected["opaque-ada"] = {**claims, "exp": int(time.time()) + 5}
                with closing(_login(base, "opaque-ada")) as browser:
                    assert browser.get("/ui/").status_code == 200
                    while time.time() < issuer.introspected["opaque-ada"]["exp"] + 1:
                        await anyio.sleep(0.2)
                    assert browser.get("/ui/").headers.get("location") == "/ui/login"
                with closing(httpx.Client(base_url=base, timeout=30)) as client:
                    csrf = _csrf(client.get("/ui/login").text)
                    forever = client.post("/ui/login", headers={"Origin": base},
                                          data={"token": "opaque-forever", "csrf": csrf})
                    assert forever.status_code == 401 and "expires" in forever.text

        run(journey)
