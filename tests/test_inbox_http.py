"""The approvals inbox (issue #31) over raw HTTP: login, CSRF, each person's own calls, the
security headers. A real ``toolhost serve --http`` with a token file; the browser's side is
tests/test_inbox_browser.py."""

from __future__ import annotations

import re
import socket
import sqlite3
import ssl
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import meta, run, write_tokens
from test_http_serve import ADA, BOB, SCOPES, deployment

ARGS = {"destination": "ops"}
#: Each person's token for the inbox, apart from the one their MCP client holds (D314): only
#: it may decide. The admin's sees and decides everyone's.
ADA_INBOX, BOB_INBOX, ADMIN = "ada-inbox-5c1e", "bob-inbox-77d0", "admin-token-3b9d"


def inbox_deployment(tmp_path: Path, **settings: str) -> Any:
    """test_http_serve's deployment, its token file with the inbox's tokens too."""
    people = deployment(tmp_path, **settings)
    write_tokens(tmp_path / "tokens.toml", (ADA, "ada", SCOPES), (BOB, "bob", SCOPES),
                 (ADA_INBOX, "ada", ["approvals.decide"]),
                 (BOB_INBOX, "bob", ["approvals.decide"]), (ADMIN, "lead", ["approvals.admin"]))
    return people


def _login(base: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    form = client.get("/ui/login")
    assert "SameSite=Strict" in form.headers["set-cookie"]
    answer = client.post("/ui/login", data={"token": token, "csrf": _csrf(form.text)},
                         headers={"Origin": base})
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/"
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    return client


@asynccontextmanager
async def ada_served(people: Any) -> AsyncIterator[tuple[str, Any]]:
    """A `serve --http` of ``people`` and Ada's MCP session on it: the server's base URL (the
    inbox is under it) and her client."""
    async with people.http_server() as url, \
            people.session("http", url=url, token=ADA) as ada:
        yield url.removesuffix("/mcp"), ada


@asynccontextmanager
async def both_served(people: Any) -> AsyncIterator[tuple[str, Any, Any]]:
    """``ada_served``, and Bob's MCP session beside hers."""
    async with ada_served(people) as (base, ada), \
            people.session("http", url=f"{base}/mcp", token=BOB) as bob:
        yield base, ada, bob


async def pend(client: Any, destination: str = "ops") -> str:
    """A call of fxw.external_write (EXTERNAL_WRITE/HIGH: it waits for a decision): its id."""
    return str(meta(await client.call_tool("fxw.external_write",
                                           {"destination": destination}), "invocationId"))


def _row(people: Any, invocation_id: str) -> dict[str, Any]:
    return next(r for r in people.invocations() if r["id"] == invocation_id)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def test_a_person_logs_in_sees_only_their_calls_and_approves_one_once(tmp_path: Path) -> None:
    people = inbox_deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with both_served(people) as (base, ada, bob):
            ada_id = await pend(ada)
            bob_id = meta(await bob.call_tool("fxw.external_write", ARGS), "invocationId")
            with closing(_login(base, ADA_INBOX)) as browser, \
                    closing(_login(base, BOB_INBOX)) as other:
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
    people = inbox_deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            with httpx.Client(base_url=base, timeout=30) as client:
                assert client.get("/ui/").headers["location"] == "/ui/login"
                form = client.get("/ui/login")
                assert form.status_code == 200
                csrf = _csrf(form.text)
                # Not from a page (no Origin), without the form's CSRF token or with another
                # form's, a wrong token, another site's page: refused.
                assert client.post("/ui/login", data={"token": ADA, "csrf": csrf}
                                   ).status_code == 403
                stale = client.post("/ui/login", data={"token": ADA}, headers={"Origin": base})
                assert stale.status_code == 403 and "toolhost_inbox=" not in str(
                    stale.headers.get_list("set-cookie"))
                with closing(httpx.Client(base_url=base, timeout=30)) as elsewhere:
                    foreign = elsewhere.post("/ui/login", data={"token": ADA, "csrf": csrf},
                                             headers={"Origin": base})
                    assert foreign.status_code == 403
                csrf = _csrf(client.get("/ui/login").text)
                wrong = client.post("/ui/login", data={"token": "nope", "csrf": csrf},
                                    headers={"Origin": base})
                assert wrong.status_code == 401 and "toolhost_inbox=" not in str(
                    wrong.headers.get_list("set-cookie"))
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


def test_a_logout_ends_every_copy_of_the_login_on_every_host_of_the_record(
    tmp_path: Path,
) -> None:
    # Regression (D324): a logout cleared the browser's cookie only, and a copy of it (a
    # shared machine, a proxy's log) stayed a login for up to 8 hours. The second server is
    # another host of the same record (the same data directory and inbox secret).
    people = inbox_deployment(tmp_path, TOOLHOST_HTTP_UI_SECRET="one-secret-for-both-hosts-" * 2)

    async def journey() -> None:
        async with people.http_server() as url, people.http_server() as other_url:
            base, other = url.removesuffix("/mcp"), other_url.removesuffix("/mcp")
            with closing(_login(base, ADA_INBOX)) as browser, \
                    closing(httpx.Client(base_url=other, timeout=30)) as thief:
                page = browser.get("/ui/")
                assert page.status_code == 200
                thief.cookies.set("toolhost_inbox", browser.cookies["toolhost_inbox"],
                                  path="/ui")
                assert thief.get("/ui/").status_code == 200  # the copy works, until...
                out = browser.post("/ui/logout", data={"csrf": _csrf(page.text)})
                assert out.status_code == 303 and out.headers["location"] == "/ui/login"
                assert thief.get("/ui/").headers.get("location") == "/ui/login"
                assert thief.post("/ui/logout", data={"csrf": _csrf(page.text)}
                                  ).status_code == 401
                # Logging in again is a new login, which works.
                with closing(_login(base, ADA_INBOX)) as again:
                    assert again.get("/ui/").status_code == 200

    run(journey)


def _post_all_but_the_last_byte(base: str, path: str, cookie: str,
                                body: bytes) -> socket.socket:
    """A form POST whose headers and body, all but its last byte, are sent: the server has
    read the login and waits for the form."""
    parsed = urllib.parse.urlsplit(base)
    sock = socket.create_connection((parsed.hostname, parsed.port))
    sock.sendall((f"POST {path} HTTP/1.1\r\nHost: {parsed.netloc}\r\n"
                  f"Cookie: toolhost_inbox={cookie}\r\n"
                  "Content-Type: application/x-www-form-urlencoded\r\n"
                  f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                  ).encode() + body[:-1])
    return sock


def test_a_decision_under_way_at_the_logout_is_not_made(tmp_path: Path) -> None:
    # A review: a copy of the cookie began an approval and held its form's last byte; the
    # owner logged out; the held request, finished, approved (the login was read before).
    people = inbox_deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            call = await pend(ada)
            with closing(_login(base, ADA_INBOX)) as browser:
                page = browser.get("/ui/")
                csrf, cookie = _csrf(page.text), browser.cookies["toolhost_inbox"]
                body = urllib.parse.urlencode({"csrf": csrf}).encode()
                held = _post_all_but_the_last_byte(base, f"/ui/calls/{call}/approve", cookie,
                                                   body)
                with closing(held):
                    await anyio.sleep(0.5)  # its login is read; its form awaited
                    assert browser.post("/ui/logout", data={"csrf": csrf}).status_code == 303
                    held.sendall(body[-1:])
                    answer = await anyio.to_thread.run_sync(lambda: held.recv(65536))
                assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
            assert _row(people, call)["state"] == "awaiting_approval"

    run(journey)


def test_a_logout_the_record_cannot_keep_still_logs_the_browser_out(tmp_path: Path) -> None:
    # A review: the record away, a logout was a bare 500 with a traceback and the browser
    # stayed logged in; a page was a 500 too. The record fails here for real: the table the
    # logouts go to is gone.
    people = inbox_deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            with closing(_login(base, ADA_INBOX)) as browser:
                csrf = _csrf(browser.get("/ui/").text)
                with closing(sqlite3.connect(people.data_dir / "toolhost.sqlite3")) as db:
                    db.execute("DROP TABLE ended_logins")
                    db.commit()
                page = browser.get("/ui/")
                assert (page.status_code, page.text) == (
                    503, "The record did not answer; try again in a moment.\n")
                out = browser.post("/ui/logout", data={"csrf": csrf})
                assert out.status_code == 503 and out.text.startswith(
                    "You are logged out in this browser, but the record did not answer")
                assert "toolhost_inbox=;" in out.headers["set-cookie"]
                assert "toolhost_inbox" not in browser.cookies

    run(journey)


def test_without_authentication_there_is_no_inbox(tmp_path: Path) -> None:
    people = inbox_deployment(tmp_path)
    del people.settings["TOOLHOST_HTTP_TOKENS_FILE"]

    async def journey() -> None:
        async with people.http_server() as url:
            assert httpx.get(url.replace("/mcp", "/ui/"), timeout=30).status_code == 404

    run(journey)


def test_history_is_each_persons_own_newest_first_filtered_and_paged(tmp_path: Path) -> None:
    people = inbox_deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with both_served(people) as (base, ada, bob):
            ok = await ada.call_tool("math.calculate", {"expression": "17 * 23"})
            bad = await ada.call_tool("math.calculate", {"expression": "1 / 0"})
            waiting = await ada.call_tool("fxw.external_write", {"destination": "<b>x</b>"})
            theirs = await bob.call_tool("math.calculate", {"expression": "2 + 2"})
            ids = [meta(r, "invocationId") for r in (ok, bad, waiting, theirs)]
            with closing(_login(base, ADA)) as browser:
                page = browser.get("/ui/history").text
                shown = re.findall(r'href="/ui/calls/([0-9a-f]{32})"', page)
                assert shown == [ids[2], ids[1], ids[0]]  # newest first, never Bob's
                failed = browser.get("/ui/history", params={"status": "failed"}).text
                assert re.findall(r'href="/ui/calls/([0-9a-f]{32})"', failed) == [ids[1]]
                reason = meta(bad, "reasonCode")
                by_reason = browser.get("/ui/history", params={"reason": reason}).text
                assert re.findall(r'href="/ui/calls/([0-9a-f]{32})"', by_reason) == [ids[1]]
                by_tool = browser.get("/ui/history", params={"tool": "fxw.external_write",
                                                             "hours": "1"}).text
                assert re.findall(r'href="/ui/calls/([0-9a-f]{32})"', by_tool) == [ids[2]]
                # Paged from a row: what comes after it; a row that is not there starts over.
                older = browser.get("/ui/history", params={"before": ids[2]}).text
                assert re.findall(r'href="/ui/calls/([0-9a-f]{32})"', older) == [
                    ids[1], ids[0]]
                gone = browser.get("/ui/history", params={"before": "0" * 32})
                assert gone.status_code == 303
                # Nonsense filters are no filter and no error.
                odd = browser.get("/ui/history?status=nope&hours=-3&hours=x&" + "&".join(
                    f"k{n}=v" for n in range(20)))
                assert odd.status_code == 200
                overview = browser.get("/ui/overview")
                assert overview.status_code == 200
                assert "math.calculate" in overview.text and "<svg" in overview.text
                assert "3 calls from" in overview.text  # Ada's three, not Bob's

    run(journey)


def test_a_calls_files_download_through_the_resolvers_checks(tmp_path: Path) -> None:
    people = inbox_deployment(tmp_path)

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            await ada.call_tool("workspace.write_text",
                                {"path": "notes.html", "content": "<script>x()</script>"})
            exported = await ada.call_tool("artifact.export", {"path": "notes.html"})
            call_id = meta(exported, "invocationId")
            with closing(_login(base, ADA_INBOX)) as browser, \
                    closing(_login(base, BOB_INBOX)) as other:
                page = browser.get(f"/ui/calls/{call_id}").text
                links = re.findall(rf'href="(/ui/calls/{call_id}/files/[^"]+)"', page)
                assert len(links) == 1
                got = browser.get(links[0])
                assert got.status_code == 200 and got.content == b"<script>x()</script>"
                assert got.headers["content-type"] == "application/octet-stream"
                assert got.headers["content-disposition"] == (
                    "attachment; filename*=UTF-8''notes.html")
                assert "sandbox" in got.headers["content-security-policy"]
                assert got.headers["x-content-type-options"] == "nosniff"
                # Not Bob's call, nor a file the call did not make: as if there were none.
                assert other.get(links[0]).status_code == 404
                elsewhere = links[0].rsplit("/", 1)[0] + "/" + "f" * 32
                assert browser.get(elsewhere).status_code == 404

    run(journey)



def test_an_approvals_admin_sees_and_decides_everyones_calls(tmp_path: Path) -> None:
    people = inbox_deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with both_served(people) as (base, ada, bob):
            ada_id = await pend(ada)
            bob_id = meta(await bob.call_tool("fxw.external_write", ARGS), "invocationId")
            with closing(_login(base, ADMIN)) as lead, closing(_login(base, ADA)) as mine:
                inbox = lead.get("/ui/").text
                assert ada_id in inbox and bob_id in inbox
                assert bob_id not in mine.get("/ui/").text
                history = lead.get("/ui/history").text
                assert ada_id in history and bob_id in history
                approved = lead.post(f"/ui/calls/{bob_id}/approve",
                                     data={"csrf": _csrf(inbox)})
                assert approved.status_code == 303
                assert "inbox:lead" in lead.get(f"/ui/calls/{bob_id}").text

    run(journey)
    assert (tmp_path / "fxw.log").read_text().splitlines() == ["wrote ops"]


def test_a_login_through_the_issuer_is_a_code_with_pkce(tmp_path: Path) -> None:
    from urllib.parse import parse_qs, urlsplit

    from journeys.fake_services import oauth_issuer
    from test_http_serve import free_port

    with oauth_issuer(tmp_path) as issuer:
        port = free_port()
        audience = f"http://127.0.0.1:{port}/mcp"
        people = inbox_deployment(tmp_path, **issuer.settings(audience),
                            TOOLHOST_HTTP_UI_CLIENT_ID="toolhost-inbox")

        def start(client: httpx.Client) -> tuple[str, dict[str, str]]:
            began = client.get("/ui/login/start")
            assert began.status_code == 303
            to = began.headers["location"]
            assert "SameSite=Lax" in began.headers["set-cookie"]
            return to, {k: v[0] for k, v in parse_qs(urlsplit(to).query).items()}

        def issuer_answer(to: str) -> str:
            trusted = ssl.create_default_context(cafile=str(issuer.ca_bundle))
            with httpx.Client(verify=trusted) as browser_at_issuer:
                answer = browser_at_issuer.get(to)
            assert answer.status_code == 302
            back = answer.headers["location"]
            assert back.startswith(f"http://127.0.0.1:{port}/ui/login/callback?")
            return back.removeprefix(f"http://127.0.0.1:{port}")

        async def journey() -> None:
            async with people.http_server(port=port) as url:
                base = url.removesuffix("/mcp")
                with closing(httpx.Client(base_url=base, timeout=30)) as client:
                    assert "/ui/login/start" in client.get("/ui/login").text
                    to, asked = start(client)
                    assert to.startswith(f"{issuer.url}/authorize?")
                    assert asked["response_type"] == "code"
                    assert asked["client_id"] == "toolhost-inbox"
                    assert asked["code_challenge_method"] == "S256"
                    assert asked["redirect_uri"] == f"{base}/ui/login/callback"
                    assert asked["resource"] == audience
                    assert len(asked["state"]) >= 32 and len(asked["code_challenge"]) == 43
                    back = issuer_answer(to)
                    landed = client.get(back)
                    assert landed.status_code == 200
                    assert 'http-equiv="refresh"' in landed.text
                    inbox = client.get("/ui/")
                    assert inbox.status_code == 200 and ">ada<" in inbox.text

                with closing(httpx.Client(base_url=base, timeout=30)) as other, \
                        closing(httpx.Client(base_url=base, timeout=30)) as client:
                    # The issuer's answer replayed in another browser: no flow of its own.
                    to, _ = start(client)
                    back = issuer_answer(to)
                    stolen = other.get(back)
                    assert stolen.status_code == 400 and "toolhost_inbox=" not in str(
                        stolen.headers.get_list("set-cookie"))
                    # The flow's own browser, but the code spent (by a thief at the issuer):
                    code = parse_qs(urlsplit(back).query)["code"][0]
                    issuer.codes.pop(code)
                    spent = client.get(back)
                    assert spent.status_code == 401
                    # A state that is not the flow's: refused before the issuer is asked.
                    to, _ = start(client)
                    forged = client.get("/ui/login/callback",
                                        params={"code": "x", "state": "not-the-state"})
                    assert forged.status_code == 400
                    denied = client.get("/ui/login/callback", params={
                        "error": "access_denied",
                        "state": parse_qs(urlsplit(to).query)["state"][0]})
                    assert denied.status_code == 401
                    assert client.get("/ui/").headers["location"] == "/ui/login"

        run(journey)


def test_only_a_browser_login_with_approvals_decide_decides(tmp_path: Path) -> None:
    # The token an MCP client holds must never approve the calls it makes (what
    # TOOLHOST_MCP_ELICITATION=off promises): not as a bearer header, not through a login.
    people = inbox_deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            ada_id = await pend(ada)
            for token in (ADA, ADA_INBOX):
                by_header = httpx.post(f"{base}/ui/calls/{ada_id}/approve", timeout=30,
                                       headers={"Authorization": f"Bearer {token}"})
                assert by_header.status_code == 403, token
            with closing(_login(base, ADA)) as client_token:
                page = client_token.get(f"/ui/calls/{ada_id}").text
                assert "may look, not decide" in page and 'class="approve"' not in page
                refused = client_token.post(f"/ui/calls/{ada_id}/approve",
                                            data={"csrf": _csrf(page)})
                assert refused.status_code == 403
            assert _row(people, ada_id)["state"] == "awaiting_approval"

    run(journey)
    assert not (tmp_path / "fxw.log").exists()
