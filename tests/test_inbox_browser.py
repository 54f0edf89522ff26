"""The approvals inbox (issue #31) in a real browser: Debian's headless Chromium driven by
Selenium through Debian's chromedriver (no browser is downloaded). A missing browser fails
these tests; it never skips them (.ci/run installs both packages).

What a person does: logs in with their token, sees a call pend from their MCP client without
reloading, approves it or denies it with a reason; what an attacker tries: markup and
invisible characters in arguments, a POST without the CSRF token, another person's login, a
page of another origin that frames the inbox."""

from __future__ import annotations

import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import meta, run
from test_inbox_http import ADA_INBOX, BOB_INBOX, ada_served, pend
from test_inbox_http import inbox_deployment as deployment

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: Where the README's picture of the inbox is kept (written when TOOLHOST_SCREENSHOT=1).
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "inbox.png"
WAIT_S = 15


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail("Debian's chromium and chromium-driver are needed "
                    "(apt-get install chromium chromium-driver; .ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1100,900",
                 # The fake issuer's certificate is a test CA's (loopback only).
                 "--ignore-certificate-errors",
                 f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def _log_in(driver: Any, base: str, token: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/ui/")
    assert driver.current_url.endswith("/ui/login")
    field = driver.find_element(By.ID, "token")
    field.send_keys(token)
    field.submit()
    _until(driver, lambda d: d.current_url.endswith("/ui/"))


def _until(driver: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(condition)


def _call(driver: Any, invocation_id: str) -> Any:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, f'article[data-id="{invocation_id}"]')
    return found[0] if found else None


def test_a_call_pends_shows_live_and_is_approved_once_or_denied_with_a_reason(
        tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    people = deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            _log_in(browser, base, ADA_INBOX)
            assert "Nothing is waiting" in browser.page_source
            browser.execute_script("window.sameDocument = true;")
            paused = await ada.call_tool("fxw.external_write", {"destination": "ops"})
            first = meta(paused, "invocationId")
            # It appears without a reload: the same document is still loaded.
            row = _until(browser, lambda d: _call(d, first))
            assert browser.execute_script("return window.sameDocument === true;")
            assert "fxw.external_write" in row.text and '{"destination":"ops"}' in row.text
            if os.environ.get("TOOLHOST_SCREENSHOT") == "1":
                browser.save_screenshot(str(SCREENSHOT))
            row.find_element(By.CSS_SELECTOR, "button.approve").click()
            _until(browser, lambda d: d.current_url.endswith(f"/ui/calls/{first}"))
            assert "inbox:ada" in browser.page_source and "succeeded" in browser.page_source
            done = await ada.call_tool("fxw.external_write", {"destination": "ops"})
            assert meta(done, "invocationId") == first and not done.is_error
            browser.get(f"{base}/ui/history")
            row = browser.find_element(By.XPATH, f'//a[@href="/ui/calls/{first}"]/../..')
            assert "inbox:ada" in row.text and "succeeded" in row.text

            # Decided elsewhere (the operator's CLI): it leaves the open inbox by itself.
            elsewhere = await pend(ada, "cli")
            browser.get(f"{base}/ui/")
            _until(browser, lambda d: _call(d, elsewhere))
            browser.execute_script("window.sameDocument = true;")
            denied_by_cli = await people.operator("deny", elsewhere, "--reason", "no")
            assert denied_by_cli.returncode == 0, denied_by_cli.stderr
            _until(browser, lambda d: _call(d, elsewhere) is None)
            assert browser.execute_script("return window.sameDocument === true;")

            second = await pend(ada, "prod")
            browser.get(f"{base}/ui/")
            _until(browser, lambda d: _call(d, second)).find_element(
                By.LINK_TEXT, "Deny…").click()
            _until(browser, lambda d: d.find_elements(By.ID, "reason"))
            browser.find_element(By.ID, "reason").send_keys("not on a Friday")
            browser.find_element(By.CSS_SELECTOR, "button.deny").click()
            _until(browser, lambda d: "not on a Friday" in d.page_source)
            denied = await ada.call_tool("fxw.external_write", {"destination": "prod"})
            assert meta(denied, "status") == "denied"

    run(journey)
    assert (tmp_path / "fxw.log").read_text().splitlines() == ["wrote ops"]
    rows = {r["id"]: r for r in people.invocations()}
    assert {(r["state"], r["approver"], r["denial_reason"]) for r in rows.values()
            if r["approver"] != "operator"} == {
        ("succeeded", "inbox:ada", None), ("denied", "inbox:ada", "not on a Friday")}


HOSTILE = ("<script>window.pwned=1</script>javascript:x\u202e\u200b",
           '<a href="javascript:pwned=2">go</a><img src=x onerror=pwned=3>')


def test_hostile_arguments_are_inert_and_visible(tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    people = deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            ids = [meta(await ada.call_tool("fxw.external_write", {"destination": d}),
                        "invocationId") for d in HOSTILE]
            assert all(ids), ids
            _log_in(browser, base, ADA_INBOX)
            for invocation_id in ids:
                for page in (f"{base}/ui/", f"{base}/ui/calls/{invocation_id}"):
                    browser.get(page)
                    _until(browser, lambda d, i=invocation_id: _call(d, i)
                           or d.find_elements(By.CSS_SELECTOR, "pre.arguments"))
                    assert browser.execute_script("return typeof window.pwned;") == "undefined"
                    assert browser.find_elements(By.CSS_SELECTOR, "main a[href^=javascript]") == []
                    assert browser.find_elements(By.CSS_SELECTOR, "main img, main script") == []
            browser.get(f"{base}/ui/")
            shown = " ".join(e.text for e in browser.find_elements(By.CSS_SELECTOR,
                                                                  "pre.arguments"))
            # The markup is shown as text, the invisible characters as their escapes.
            assert "<script>window.pwned=1</script>" in shown
            assert '<a href=\\"javascript:pwned=2\\">go</a><img src=x onerror=pwned=3>' in shown
            assert "\\u202e\\u200b" in shown and "\u202e" not in shown and "\u200b" not in shown

    run(journey)


@contextmanager
def _other_origin(page: str) -> Iterator[str]:
    """A page of another origin (another loopback port), as an attacker's site."""
    body = page.encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_no_csrf_token_another_persons_login_and_framing_are_refused(
        tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    people = deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            ada_id = await pend(ada, "ops")
            _log_in(browser, base, ADA_INBOX)
            status = browser.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                f"fetch('/ui/calls/{ada_id}/approve', {{method: 'POST'}})"
                ".then(r => done(r.status), e => done(String(e)));")
            assert status == 403
            # Bob, logged in on the same browser, finds no such call of Ada's.
            browser.find_element(By.CSS_SELECTOR, "form.who button").click()
            _until(browser, lambda d: d.current_url.endswith("/ui/login"))
            _log_in(browser, base, BOB_INBOX)
            assert _call(browser, ada_id) is None
            browser.get(f"{base}/ui/calls/{ada_id}")
            # Waited for, not read at once: a loaded CI run once read the text page before
            # Chromium had put its words in (an empty <pre>); a wrong page still fails here.
            _until(browser, lambda d: "Not found." in d.page_source)
            # Nor can he approve it with his own login's CSRF token (from his inbox page).
            browser.get(f"{base}/ui/")
            status = browser.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "const csrf = document.querySelector('input[name=csrf]').value;"
                f"fetch('/ui/calls/{ada_id}/approve', {{method: 'POST', body: "
                "new URLSearchParams({csrf})}).then(r => done(r.status), e => done(String(e)));")
            assert status == 404
            # Another origin's page framing the inbox: the browser refuses to render it.
            with _other_origin(f'<iframe src="{base}/ui/"></iframe>') as attacker:
                browser.get_log("browser")  # what came before
                browser.get(attacker)
                _until(browser, lambda d: any("frame-ancestors" in e["message"]
                                              for e in d.get_log("browser")))

    run(journey)
    assert not (tmp_path / "fxw.log").exists()
    assert {r["state"] for r in people.invocations()} == {"awaiting_approval"}


def test_the_chromium_found_is_debians(browser: Any) -> None:
    assert shutil.which("chromium") is not None
    assert browser.capabilities["browserName"] in {"chrome", "chromium"}


#: The overview of this many recorded calls is drawn within OVERVIEW_S (measured in the
#: browser: from the request to the page's load event).
SEEDED = 10_000
OVERVIEW_S = 5.0
TOOLS = ("math.calculate", "workspace.read_text", "workspace.write_text", "fxw.external_write",
         "artifact.export")


def _seed(people: Any, count: int) -> dict[str, int]:
    """``count`` calls of Ada's over the last day, straight into the record; how many of each
    tool."""
    import datetime as dt

    from toolhost._composition import InvocationRecord, InvocationState, Settings, load_stores

    stores = load_stores(Settings.from_environ(people.env()))
    now = dt.datetime.now(dt.UTC)
    states = (InvocationState.SUCCEEDED,) * 7 + (InvocationState.FAILED,) * 2 + (
        InvocationState.DENIED,)
    per_tool: dict[str, int] = {}
    try:
        store = stores.invocations
        for n in range(count):
            created = now - dt.timedelta(seconds=86_400 * n / count)
            tool, state = TOOLS[n % len(TOOLS)], states[n % len(states)]
            per_tool[tool] = per_tool.get(tool, 0) + 1
            store.insert(InvocationRecord(
                id=f"{n:032x}", run_id="seeded", principal_id="ada", scopes=(),
                tool_name=tool, tool_version="1.0.0", arguments={"n": n},
                argument_digest=f"sha256:{n:064x}", state=state,
                policy={"action": "allow", "rule": "NONE/LOW"}, created_at=created,
                started_at=created, finished_at=created + dt.timedelta(milliseconds=n % 40),
                reason_code="tool.internal.interrupted" if state is InvocationState.FAILED
                else None))
    finally:
        stores.close()
    return per_tool


def test_the_overview_of_ten_thousand_calls_renders_quickly(tmp_path: Path,
                                                           browser: Any) -> None:
    from selenium.webdriver.common.by import By

    people = deployment(tmp_path)
    per_tool = _seed(people, SEEDED)

    async def journey() -> None:
        async with people.http_server() as url:
            base = url.removesuffix("/mcp")
            _log_in(browser, base, ADA_INBOX)
            browser.get(f"{base}/ui/overview")
            # get() returns once readyState is "complete", which Chrome sets before the load
            # event ends: loadEventEnd can still read 0 then, so wait for it to be written.
            took = _until(browser, lambda d: d.execute_script(
                "const t = performance.getEntriesByType('navigation')[0];"
                "return t.loadEventEnd > 0 ? (t.loadEventEnd - t.startTime) / 1000 : null;"))
            assert 0 < took < OVERVIEW_S, took
            print(f"overview of {SEEDED} calls: {took:.3f} s")
            if os.environ.get("TOOLHOST_SCREENSHOT") == "1":
                browser.save_screenshot(str(SCREENSHOT.with_name("inbox-overview.png")))
            assert f"{SEEDED} calls from" in browser.page_source
            charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart[role=img]")
            assert len(charts) == 2 and all(c.size["height"] > 50 for c in charts)
            table = browser.find_element(By.CSS_SELECTOR, "table.figures")
            totals = {row.find_element(By.TAG_NAME, "th").text:
                      int(row.find_elements(By.TAG_NAME, "td")[-1].text)
                      for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")}
            assert totals == per_tool
            bars = browser.find_elements(By.CSS_SELECTOR, "svg.chart rect")
            assert len(bars) > 20

    run(journey)


def _tab_to(driver: Any, matches: Any, most: int = 40) -> Any:
    """Press Tab until the focused element ``matches``; that element."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    for _ in range(most):
        ActionChains(driver).send_keys(Keys.TAB).perform()
        focused = driver.switch_to.active_element
        if matches(focused):
            return focused
    raise AssertionError("not reachable with Tab")


def test_every_control_is_reachable_and_usable_with_the_keyboard(tmp_path: Path,
                                                                 browser: Any) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    people = deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off")

    def keys(*typed: str) -> None:
        ActionChains(browser).send_keys(*typed).perform()

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            first = await pend(ada, "a")
            second = await pend(ada, "b")
            browser.get(f"{base}/ui/login")
            # The token field takes the focus (autofocus, applied once the page has loaded:
            # waited for, or a loaded machine types into the page before it): type, Enter.
            _until(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "token")
            keys(ADA_INBOX, Keys.ENTER)
            _until(browser, lambda d: d.current_url.endswith("/ui/"))
            # Tab to the first call's Approve button (the newest: the second call), Enter.
            _tab_to(browser, lambda e: e.tag_name == "button" and e.text == "Approve")
            keys(Keys.ENTER)
            _until(browser, lambda d: d.current_url.endswith(f"/ui/calls/{second}"))
            assert "inbox:ada" in browser.page_source
            # Back to the inbox by its link, then Deny… on the other call, a reason, Deny.
            _tab_to(browser, lambda e: e.text == "toolhost approvals")
            keys(Keys.ENTER)
            _until(browser, lambda d: d.current_url.endswith("/ui/"))
            _tab_to(browser, lambda e: e.text == "Deny…")
            keys(Keys.ENTER)
            _until(browser, lambda d: d.current_url.endswith(f"/ui/calls/{first}#deny"))
            _tab_to(browser, lambda e: e.get_attribute("id") == "reason")
            keys("typed, not clicked")
            _tab_to(browser, lambda e: e.tag_name == "button" and e.text == "Deny")
            keys(Keys.ENTER)
            _until(browser, lambda d: "typed, not clicked" in d.page_source
                   and "denied" in d.page_source)
            # History and overview, and the history's filters, by keyboard too.
            _tab_to(browser, lambda e: e.text == "History")
            keys(Keys.ENTER)
            _until(browser, lambda d: d.current_url.endswith("/ui/history"))
            _tab_to(browser, lambda e: e.get_attribute("id") == "status")
            keys("d")  # "denied", chosen by its first letter
            _tab_to(browser, lambda e: e.tag_name == "button" and e.text == "Show")
            keys(Keys.ENTER)
            _until(browser, lambda d: "status=denied" in d.current_url)
            assert first in browser.page_source and second not in browser.page_source
            _tab_to(browser, lambda e: e.text == "Overview")
            keys(Keys.ENTER)
            _until(browser, lambda d: d.current_url.endswith("/ui/overview"))
            _tab_to(browser, lambda e: e.tag_name == "summary")
            keys(Keys.ENTER)
            _until(browser, lambda d: d.find_element("css selector", "details").get_attribute(
                "open") is not None)
            _tab_to(browser, lambda e: e.tag_name == "button" and e.text == "Log out")
            keys(Keys.ENTER)
            _until(browser, lambda d: d.current_url.endswith("/ui/login"))

    run(journey)
    assert (tmp_path / "fxw.log").read_text().splitlines() == ["wrote b"]


def test_a_person_logs_in_at_the_issuer_and_lands_in_the_inbox(tmp_path: Path,
                                                              browser: Any) -> None:
    # The issuer's redirect back is a cross-site navigation: the login cookie (SameSite=Strict)
    # set there reaches /ui/ only through the landing page's own navigation (D314).
    from journeys.fake_services import oauth_issuer
    from journeys.journey_support import free_port
    from selenium.webdriver.common.by import By

    with oauth_issuer(tmp_path) as issuer:
        issuer.scope = "approvals.decide"
        port = free_port()
        audience = f"http://127.0.0.1:{port}/mcp"
        people = deployment(tmp_path, **issuer.settings(audience),
                            TOOLHOST_HTTP_UI_CLIENT_ID="toolhost-inbox")

        async def journey() -> None:
            async with people.http_server(port=port) as url:
                base = url.removesuffix("/mcp")
                browser.get(f"{base}/ui/login")
                browser.find_element(By.CSS_SELECTOR, "a.issuer").click()
                _until(browser, lambda d: d.current_url == f"{base}/ui/")
                assert "Waiting for a decision" in browser.page_source
                assert browser.find_element(By.CSS_SELECTOR, "form.who span").text == "ada"

        run(journey)
