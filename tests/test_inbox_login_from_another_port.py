"""A page on another port of the same machine cannot log a browser into the inbox as someone
else (login CSRF). Cookies are not kept apart by port (RFC 6265 8.5), so such a page can set
the login form's cookie for the inbox's host, and the default allowed origins take every
loopback port: a review's page on localhost:18799 posted the login form with its own cookie,
CSRF token and Ada's token, and Bob's browser was then Ada in the inbox. Now the login POST must
come from the server's own origin (its ``Origin``, else its ``Referer``'s), and a request
carrying one of the inbox's cookies twice (a planted one beside the browser's own) is refused
with a page telling the person to clear the site's cookies. A real ``serve --http`` driven
with httpx, sending what the browser would."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import run
from loopback_ports import free_port
from test_inbox_http import ADA_INBOX, BOB_INBOX, _csrf, _login, inbox_deployment

CLEAR = "Clear this site's cookies in the browser, then log in again."


def _form(base: str) -> tuple[str, str]:
    """A fresh login form's pair, as another page fetches it for itself: its cookie
    (``name=value``) and its CSRF token."""
    with closing(httpx.Client(base_url=base, timeout=30)) as elsewhere:
        form = elsewhere.get("/ui/login")
        return f"toolhost_inbox_login={form.cookies['toolhost_inbox_login']}", _csrf(form.text)


def test_a_login_posted_from_another_ports_page_is_refused(tmp_path: Path) -> None:
    people = inbox_deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            other = f"http://127.0.0.1:{free_port()}"  # an allowed origin, not this server
            planted, csrf = _form(base)
            sent = {"token": ADA_INBOX, "csrf": csrf}
            foreign = httpx.post(f"{base}/ui/login", data=sent, timeout=30, headers={
                "Cookie": planted, "Origin": other})
            assert foreign.status_code == 403, foreign.text
            assert "toolhost_inbox=" not in str(foreign.headers.get_list("set-cookie"))
            # Nor with the foreign page's Referer and no Origin, another loopback origin, or
            # neither.
            for headers in ({"Referer": f"{other}/"}, {"Origin": "http://[::1]:1"}, {}):
                refused = httpx.post(f"{base}/ui/login", data=sent, timeout=30,
                                     headers={"Cookie": planted, **headers})
                assert refused.status_code == 403, headers
            # The server's own page: by its Origin, or (none sent) its Referer.
            for headers in ({"Origin": base}, {"Referer": f"{base}/ui/login"}):
                planted, csrf = _form(base)
                own = httpx.post(f"{base}/ui/login", timeout=30, data={
                    "token": ADA_INBOX, "csrf": csrf}, headers={"Cookie": planted, **headers})
                assert (own.status_code, own.headers["location"]) == (303, "/ui/"), headers

    run(journey)


def test_a_request_carrying_an_inbox_cookie_twice_is_told_to_clear_them(
        tmp_path: Path) -> None:
    people = inbox_deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            with closing(_login(base, BOB_INBOX)) as bob, closing(_login(base, ADA_INBOX)) as ada:
                bobs, adas = bob.cookies["toolhost_inbox"], ada.cookies["toolhost_inbox"]
                # Ada's login planted beside Bob's own (a more specific Path comes first).
                both = f"toolhost_inbox={adas}; toolhost_inbox={bobs}"
                page = httpx.get(f"{base}/ui/", headers={"Cookie": both}, timeout=30)
                assert page.status_code == 400 and CLEAR in page.text, page.text
                assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
                # In two Cookie headers alike.
                split = httpx.get(f"{base}/ui/", timeout=30, headers=[
                    ("Cookie", f"toolhost_inbox={adas}"), ("Cookie", f"toolhost_inbox={bobs}")])
                assert split.status_code == 400
                # The login form's cookie twice: no login is made.
                mine, csrf = _form(base)
                planted, _ = _form(base)
                login = httpx.post(f"{base}/ui/login", data={"token": BOB_INBOX, "csrf": csrf},
                                   headers={"Cookie": f"{planted}; {mine}", "Origin": base},
                                   timeout=30)
                assert login.status_code == 400 and CLEAR in login.text
                assert "set-cookie" not in login.headers
                # One of each is as before.
                alone = httpx.get(f"{base}/ui/", timeout=30,
                                  headers={"Cookie": f"toolhost_inbox={bobs}; {mine}"})
                assert alone.status_code == 200 and "bob" in alone.text

    run(journey)
