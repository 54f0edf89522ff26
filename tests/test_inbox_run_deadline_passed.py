"""The inbox names a waiting call's run's deadline and, once it has passed, marks the call and
offers no Approve: an approval could only end it failed, unrun (D222), and the person is asked
only what their answer can still act on (D440); Deny still closes it. Driven in-process as ASGI
over a real Host and its SQLite record (as test_inbox_record_unavailable is), and through a
real `toolhost serve --http` whose session's run has a deadline (as test_inbox_http is)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from conftest import make_plugin, make_tool
from journeys.journey_support import run
from test_inbox_app import record
from test_inbox_http import ADA_INBOX, _csrf, _login, _row, ada_served, inbox_deployment, pend
from test_inbox_record_unavailable import ada_logged_in, ask

from toolhost._composition import Host
from toolhost._model.invocations import InvocationState
from toolhost.testing import host_for

LATE, TIMELY = "a" * 32, "b" * 32
PASSED = ("Its run's deadline has passed: no approval can run this call now (an approval "
          "would only end it failed, tool.timeout.run_deadline_passed). Deny it to close it "
          "with your reason.")


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    with host_for({"toolhost-fx": make_plugin(("fx",), [make_tool()])},
                  data_dir=tmp_path / "data") as made:
        yield made


def article(page: str, invocation_id: str) -> str:
    found = re.search(f'<article class="[^"]*" data-id="{invocation_id}">.*?</article>', page)
    assert found, page
    return found.group(0)


def test_a_call_past_its_runs_deadline_is_marked_and_offers_deny_not_approve(
        tmp_path: Path, host: Host) -> None:
    now = host.clock.now()
    late_deadline = now - dt.timedelta(minutes=1)
    for invocation_id, deadline in ((LATE, late_deadline), (TIMELY, now + dt.timedelta(hours=1))):
        host.invocations.insert(record(id=invocation_id, principal_id="ada", run_deadline=deadline,
                                       created_at=now - dt.timedelta(minutes=2)))
    inbox, cookie, csrf = ada_logged_in(tmp_path, host)

    async def probe() -> tuple[str, str, str, int]:
        pages = []
        for path in ("/ui/inbox.part", f"/ui/calls/{LATE}", f"/ui/calls/{TIMELY}"):
            status, body = await ask(inbox, "GET", path, cookie=cookie)
            assert status == 200, body[:300]
            pages.append(body.decode())
        status, _ = await ask(inbox, "POST", f"/ui/calls/{LATE}/deny", cookie=cookie,
                              form={"csrf": csrf, "reason": "too late to matter"})
        return pages[0], pages[1], pages[2], status

    listed, late, timely, denied = anyio.run(probe)
    when = late_deadline.isoformat(timespec="seconds")
    # The list: the late call is marked, with its deadline, and only a way to deny it.
    late_item = article(listed, LATE)
    assert late_item.startswith(f'<article class="call past-deadline" data-id="{LATE}">')
    assert f"<dt>run deadline</dt><dd>{when} (passed)</dd>" in late_item
    assert PASSED in late_item and f'href="/ui/calls/{LATE}#deny">Deny…</a>' in late_item
    assert "/approve" not in late_item and "Approve" not in late_item
    timely_item = article(listed, TIMELY)
    assert timely_item.startswith(f'<article class="call" data-id="{TIMELY}">')
    assert f'action="/ui/calls/{TIMELY}/approve"' in timely_item and "(passed)" not in timely_item
    # The call's page: the same, with the deny form and its reason.
    assert f"<dt>run deadline</dt><dd>{when} (passed)</dd>" in late
    assert PASSED in late and f'action="/ui/calls/{LATE}/deny"' in late
    assert "/approve" not in late
    assert f'action="/ui/calls/{TIMELY}/approve"' in timely and PASSED not in timely
    # Deny closes it as the person decided.
    assert denied == 303
    row = host.invocations.get(LATE)
    assert (row.state, row.approver) == (InvocationState.DENIED, "inbox:ada")


def test_a_served_sessions_call_left_waiting_past_its_runs_deadline_is_marked(
        tmp_path: Path) -> None:
    people = inbox_deployment(tmp_path, TOOLHOST_MCP_ELICITATION="off",
                              TOOLHOST_MCP_RUN_TIMEOUT_S="2")

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            invocation_id = await pend(ada)
            deadline = dt.datetime.fromisoformat(_row(people, invocation_id)["run_deadline"])
            await anyio.sleep(max(0.0, (deadline - dt.datetime.now(dt.UTC)).total_seconds())
                              + 0.3)
            with closing(_login(base, ADA_INBOX)) as browser:
                listed = browser.get("/ui/").text
                item = article(listed, invocation_id)
                assert "past-deadline" in item and PASSED in item and "/approve" not in item
                page = browser.get(f"/ui/calls/{invocation_id}").text
                assert PASSED in page and "/approve" not in page
                denied = browser.post(f"/ui/calls/{invocation_id}/deny",
                                      data={"csrf": _csrf(page), "reason": "too late"})
                assert denied.status_code == 303

    run(journey)
