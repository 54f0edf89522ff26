"""An inbox Approve that would not run the call is refused before the row is taken, 409 with the
call still waiting, as `toolhost approve` refuses it (D516, D519): a call whose operator's
directory no longer passes (the refusal, which names the path, to an `approvals.admin` login
only, D458), and an Approve sent from a page loaded before the run's deadline, after it (Deny
still closes the call). The inbox's list names that directory as the call's page does, since its
Approve runs the call without a visit to the page. Driven in-process as ASGI over a real Host
and its SQLite record, as test_inbox_run_deadline_passed is."""

from __future__ import annotations

import datetime as dt
import os
import socket
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_inbox_app import record
from test_inbox_record_unavailable import ask
from test_inbox_run_deadline_passed import PASSED, article, host

from toolhost import Principal
from toolhost._composition import Host
from toolhost._mcp.http_auth import Caller
from toolhost._mcp.inbox.app import COOKIE, Inbox
from toolhost._mcp.inbox.inert import text
from toolhost._mcp.inbox.login import ADMIN_SCOPE, DECIDE_SCOPE, Logins
from toolhost._model.invocations import InvocationState
from toolhost._testing.clocks import DEFAULT_INSTANT

__all__ = ["host"]  # the fixture, used by name

WAITING = "c" * 32
ADA = Principal("ada", frozenset({DECIDE_SCOPE}))
ROOT = Principal("root", frozenset({ADMIN_SCOPE, DECIDE_SCOPE}))
NOT_RUN = "The call was not run and still awaits approval: "
PATHLESS = (NOT_RUN + "the operator's directory it paused in does not pass the checks an "
            "approval makes before it runs (an approvals.admin login, and toolhost approve on "
            "the host, say which). Deny it and make the call again, unless that directory can "
            "be set right.")


def browser_logins(host: Host, *people: Principal) -> tuple[Inbox, list[tuple[str, str]]]:
    """An inbox over ``host`` and a browser login of each of ``people`` (an issuer's, valid
    for an hour): each one's ``Cookie`` header and CSRF token."""
    nonces = iter(range(1, 1 << 30))
    logins = Logins(b"s" * 32, None, lambda: DEFAULT_INSTANT.timestamp(),
                    lambda: f"{next(nonces):032x}", issuer="https://issuer.example")
    made = []
    for person in people:
        value = logins.issue(Caller(person, "https://issuer.example",
                                    DEFAULT_INSTANT.timestamp() + 3600), "issued")
        login = logins.read(value)
        assert value is not None and login is not None
        made.append((f"{COOKIE}={value}", logins.csrf(login)))

    async def verify(token: str) -> Caller | None:
        return None

    return Inbox(host, logins, verify), made


def paused_in(tmp_path: Path, host: Host) -> tuple[Path, str]:
    """Ada's call waiting, recorded as paused in ``project``, where another directory is now
    (what D516 refuses: never set right); the directory and the refusal's line."""
    project, other = tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    elsewhere = os.stat(other)
    host.invocations.insert(record(
        id=WAITING, principal_id="ada", operator_directory={
            "host": socket.gethostname(), "path": str(project),
            "device": elsewhere.st_dev, "inode": elsewhere.st_ino}))
    refusal = host.approval_refusal(host.invocations.get(WAITING))
    assert refusal is not None and "another directory now" in refusal
    return project, refusal


def test_an_approve_of_a_call_whose_operators_directory_is_refused_leaves_it_waiting(
        tmp_path: Path, host: Host) -> None:
    project, refusal = paused_in(tmp_path, host)
    inbox, [(ada, ada_csrf), (root, root_csrf)] = browser_logins(host, ADA, ROOT)

    async def probe() -> tuple[tuple[int, bytes], tuple[int, bytes]]:
        own = await ask(inbox, "POST", f"/ui/calls/{WAITING}/approve", cookie=ada,
                        form={"csrf": ada_csrf})
        admin = await ask(inbox, "POST", f"/ui/calls/{WAITING}/approve", cookie=root,
                          form={"csrf": root_csrf})
        return own, admin

    (own_status, own_page), (admin_status, admin_page) = anyio.run(probe)
    # Neither Approve took the row: the call still waits, to be denied (or approved once the
    # directory is set right), not failed as a "retryable" workspace outage.
    assert (own_status, admin_status) == (409, 409)
    row = host.invocations.get(WAITING)
    assert (row.state, row.reason_code, row.approver) == (
        InvocationState.AWAITING_APPROVAL, None, None)
    # The person deciding is told why; the path only to the admin.
    assert text(NOT_RUN + refusal + ".") in admin_page.decode()
    assert text(PATHLESS) in own_page.decode() and str(project).encode() not in own_page
    assert f'action="/ui/calls/{WAITING}/deny"'.encode() in own_page


def test_the_list_names_the_operators_directory_as_the_call_page_does(
        tmp_path: Path, host: Host) -> None:
    project, _ = paused_in(tmp_path, host)
    inbox, [(ada, _), (root, _)] = browser_logins(host, ADA, ROOT)

    async def probe() -> tuple[str, str]:
        own = await ask(inbox, "GET", "/ui/inbox.part", cookie=ada)
        admin = await ask(inbox, "GET", "/ui/inbox.part", cookie=root)
        return article(own[1].decode(), WAITING), article(admin[1].decode(), WAITING)

    own, admin = anyio.run(probe)
    # Its Approve runs the call in one click: the list says where, as the call's page does.
    assert (f"<dt>directory</dt><dd>{text(str(project))} on {text(socket.gethostname())}</dd>"
            in admin)
    assert ("<dt>directory</dt><dd>the operator&#x27;s own, kept as it is (its path shows to "
            "approvals.admin)</dd>") in own and str(project) not in own


def test_an_approve_sent_after_the_runs_deadline_leaves_the_call_waiting_to_be_denied(
        host: Host) -> None:
    now = host.clock.now()
    host.invocations.insert(record(id=WAITING, principal_id="ada",
                                   run_deadline=now - dt.timedelta(seconds=1),
                                   created_at=now - dt.timedelta(minutes=2)))
    inbox, [(ada, csrf)] = browser_logins(host, ADA)

    async def probe() -> tuple[tuple[int, bytes], int]:
        # The form of a page loaded before the deadline: the same POST it would send.
        approved = await ask(inbox, "POST", f"/ui/calls/{WAITING}/approve", cookie=ada,
                             form={"csrf": csrf})
        assert host.invocations.get(WAITING).state is InvocationState.AWAITING_APPROVAL
        denied, _ = await ask(inbox, "POST", f"/ui/calls/{WAITING}/deny", cookie=ada,
                              form={"csrf": csrf, "reason": "too late to matter"})
        return approved, denied

    (status, page), denied = anyio.run(probe)
    assert status == 409
    assert text(PASSED).encode() in page and b"/approve" not in page
    assert f'action="/ui/calls/{WAITING}/deny"'.encode() in page
    assert denied == 303
    row = host.invocations.get(WAITING)
    assert (row.state, row.approver, row.denial_reason) == (
        InvocationState.DENIED, "inbox:ada", "too late to matter")
