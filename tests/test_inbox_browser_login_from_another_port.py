"""In Debian's Chromium: a page on another loopback port that sets the inbox's login-form
cookie (cookies are not kept apart by port) and posts the login form with its own CSRF token
and Ada's token does not make Bob's browser Ada in the inbox. Before, it did (the review's
repro): the login took any allowed origin, and the default allows every loopback port."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import run
from test_inbox_browser import (
    _log_in,
    _other_origin,
    _until,
    browser,  # noqa: F401 - the fixture
)
from test_inbox_http import ADA_INBOX, BOB_INBOX, _csrf, inbox_deployment


def test_another_ports_page_does_not_log_the_browser_in_as_someone_else(
        tmp_path: Path, browser: Any) -> None:  # noqa: F811 - the fixture
    from selenium.webdriver.common.by import By

    people = inbox_deployment(tmp_path)

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            _log_in(browser, base, BOB_INBOX)
            # The attacker's server fetches a login form's pair for itself.
            form = httpx.get(f"{base}/ui/login", timeout=30)
            before, csrf = form.cookies["toolhost_inbox_login"], _csrf(form.text)
            page = (f'<form method="post" action="{html.escape(base)}/ui/login">'
                    f'<input name="csrf" value="{html.escape(csrf)}">'
                    f'<input name="token" value="{ADA_INBOX}">'
                    '<button id="go" type="submit">go</button></form>')
            with _other_origin(page) as attacker:
                browser.get(attacker)
                # What the page's own Set-Cookie would do: a cookie of the host, any port.
                browser.add_cookie({"name": "toolhost_inbox_login", "value": before,
                                    "path": "/ui/login"})
                browser.find_element(By.ID, "go").click()
                _until(browser, lambda d: d.current_url.startswith(base))
                answered = browser.find_element(By.TAG_NAME, "body").text
            browser.get(f"{base}/ui/")
            assert browser.find_element(By.CSS_SELECTOR, ".who span").text == "bob"
            assert "Log in from this server's own login page." in answered

    run(journey)
