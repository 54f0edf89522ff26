"""The approvals inbox (issue #31) over raw HTTP: login, CSRF, each person's own calls, the
security headers. A real ``toolhost serve --http`` with a token file; the browser's side is
tests/test_inbox_browser.py."""

from __future__ import annotations

import re
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import meta, run, write_tokens
from test_http_serve import ADA, BOB, SCOPES, deployment

ARGS = {"destination": "ops"}


def _login(base: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    answer = client.post("/ui/login", data={"token": token}, headers={"Origin": base})
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/"
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    return client


def _row(people: Any, invocation_id: str) -> dict[str, Any]:
    return next(r for r in people.invocations() if r["id"] == invocation_id)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def test_a_person_logs_in_sees_only_their_calls_and_approves_one_once(tmp_path: Path) -> None:
    people = deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with people.http_server() as url, \
                people.session("http", url=url, token=ADA) as ada, \
                people.session("http", url=url, token=BOB) as bob:
            base = url.removesuffix("/mcp")
            ada_id = meta(await ada.call_tool("fxw.external_write", ARGS), "invocationId")
            bob_id = meta(await bob.call_tool("fxw.external_write", ARGS), "invocationId")
            with closing(_login(base, ADA)) as browser, closing(_login(base, BOB)) as other:
                inbox = browser.get("/ui/")
                assert inbox.status_code == 200
                assert ada_id in inbox.text and bob_id not in inbox.text
                headers = inbox.headers
                assert "frame-ancestors 'none'" in headers["content-security-policy"]
                assert "script-src 'self'" in headers["content-security-policy"]
                assert headers["x-frame-options"] == "DENY"
                assert headers["cache-control"] == "no-store"
                token = _csrf(inbox.text)
                # Bob's login can neither see nor decide Ada's call: as if it did not exist.
                assert other.get(f"/ui/calls/{ada_id}").status_code == 404
                bobs = _csrf(other.get("/ui/").text)
                refused = other.post(f"/ui/calls/{ada_id}/approve", data={"csrf": bobs})
                assert refused.status_code == 404
                # No CSRF token, or another login's: refused, nothing decided.
                assert browser.post(f"/ui/calls/{ada_id}/approve").status_code == 403
                crowded = "&".join(f"f{n}=x" for n in range(40))
                assert browser.post(f"/ui/calls/{ada_id}/approve", content=crowded, headers={
                    "content-type": "application/x-www-form-urlencoded"}).status_code == 403
                assert browser.post(f"/ui/calls/{ada_id}/approve",
                                    data={"csrf": bobs}).status_code == 403
                assert _row(people, ada_id)["state"] == "awaiting_approval"
                approved = browser.post(f"/ui/calls/{ada_id}/approve", data={"csrf": token})
                assert approved.status_code == 303
                page = browser.get(f"/ui/calls/{ada_id}")
                assert "inbox:ada" in page.text and "succeeded" in page.text
                # Twice is once: the call was decided already.
                again = browser.post(f"/ui/calls/{ada_id}/approve", data={"csrf": token})
                assert again.status_code == 409 and "decided already" in again.text
                assert ada_id not in browser.get("/ui/inbox.part").text
                # Ada's client, asking again, gets the result the inbox's approval recorded.
                done = await ada.call_tool("fxw.external_write", ARGS)
                assert meta(done, "invocationId") == ada_id and not done.is_error
                denied = other.post(f"/ui/calls/{bob_id}/deny",
                                    data={"csrf": bobs, "reason": "not <today>"})
                assert denied.status_code == 303
                assert "not &lt;today&gt;" in other.get(f"/ui/calls/{bob_id}").text

    run(journey)
    assert (tmp_path / "fxw.log").read_text().splitlines() == ["wrote ops"]
    row = next(r for r in people.invocations() if r["principal_id"] == "bob")
    assert (row["state"], row["approver"], row["denial_reason"]) == (
        "denied", "inbox:bob", "not <today>")


def test_a_login_needs_a_valid_token_from_a_page_and_ends_with_the_token(tmp_path: Path) -> None:
    people = deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            with httpx.Client(base_url=base, timeout=30) as client:
                assert client.get("/ui/").headers["location"] == "/ui/login"
                assert client.get("/ui/login").status_code == 200
                # Not from a page (no Origin), a wrong token, another site's page: refused.
                assert client.post("/ui/login", data={"token": ADA}).status_code == 403
                wrong = client.post("/ui/login", data={"token": "nope"},
                                    headers={"Origin": base})
                assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
                assert client.post("/ui/login", data={"token": ADA},
                                   headers={"Origin": "https://evil.example"}
                                   ).status_code == 403
                # A forged or altered cookie is no login.
                client.cookies.set("toolhost_inbox", "e30.AAAA", path="/ui")
                assert client.get("/ui/").status_code == 303
            with closing(_login(base, ADA)) as browser:
                assert browser.get("/ui/").status_code == 200
                # The bearer token itself works too, without a cookie or a CSRF token.
                bearer = httpx.get(f"{base}/ui/", headers={"Authorization": f"Bearer {ADA}"})
                assert bearer.status_code == 200 and "ada" in bearer.text
                assert httpx.get(f"{base}/ui/", headers={"Authorization": "Bearer no"}
                                 ).status_code == 401
                # Revoking Ada's token ends her login at the next request.
                write_tokens(tmp_path / "tokens.toml", (BOB, "bob", SCOPES))
                assert browser.get("/ui/").headers.get("location") == "/ui/login"
                logout = browser.post("/ui/logout")
                assert logout.status_code == 401  # no login left to log out of

    run(journey)


def test_without_authentication_there_is_no_inbox(tmp_path: Path) -> None:
    people = deployment(tmp_path)
    del people.settings["TOOLHOST_HTTP_TOKENS_FILE"]

    async def journey() -> None:
        async with people.http_server() as url:
            assert httpx.get(url.replace("/mcp", "/ui/"), timeout=30).status_code == 404

    run(journey)
