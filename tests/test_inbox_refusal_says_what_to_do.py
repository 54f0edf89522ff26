"""An inbox Approve refused because the call's run is live somewhere other than where the call
paused (D559) tells a login that is not an admin what to do, as `toolhost approve` tells the
operator: deny it, or end the run and approve it again. The paths stay an admin's (D458).
Before, that login read only the words about a directory failing its checks, which named no
remedy that fits (the directory may be fine; the run is elsewhere). Driven in-process as ASGI
over a real Host, its SQLite record and its run registry, as
test_inbox_approve_that_would_not_run is."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from test_inbox_app import record
from test_inbox_approve_that_would_not_run import ADA, NOT_RUN, PATHLESS, ROOT, browser_logins
from test_inbox_record_unavailable import ask
from test_inbox_run_deadline_passed import host

from toolhost._composition import Host
from toolhost._mcp.inbox.inert import text
from toolhost._model.invocations import InvocationState

__all__ = ["host"]  # the fixture, used by name

WAITING = "d" * 32


def test_an_approve_of_a_call_whose_run_is_live_elsewhere_says_what_to_do_without_paths(
        tmp_path: Path, host: Host) -> None:
    project, other = tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    found = os.stat(project)
    # Ada's call paused in `project`; its run has since been named afresh in `other`.
    host.invocations.insert(record(
        id=WAITING, principal_id="ada", run_id="r1", operator_directory={
            "host": socket.gethostname(), "path": str(project),
            "device": found.st_dev, "inode": found.st_ino}))
    host.run_workspaces.start("r1", other)[0].close()
    line = host.approval_refusal(host.invocations.get(WAITING))
    remedy = "deny it, or end the run (toolhost runs end r1) and approve it again"
    assert line is not None and line.endswith(remedy) and str(other) in line
    inbox, [(ada, ada_csrf), (root, root_csrf)] = browser_logins(host, ADA, ROOT)

    async def probe() -> tuple[tuple[int, bytes], tuple[int, bytes]]:
        own = await ask(inbox, "POST", f"/ui/calls/{WAITING}/approve", cookie=ada,
                        form={"csrf": ada_csrf})
        admin = await ask(inbox, "POST", f"/ui/calls/{WAITING}/approve", cookie=root,
                          form={"csrf": root_csrf})
        return own, admin

    (own_status, own_page), (admin_status, admin_page) = anyio.run(probe)
    assert (own_status, admin_status) == (409, 409)
    assert host.invocations.get(WAITING).state is InvocationState.AWAITING_APPROVAL
    assert text(NOT_RUN + line + ".") in admin_page.decode()
    # The same refusal and remedy, the paths left out; not the directory's words.
    own = own_page.decode()
    assert text(NOT_RUN + "run 'r1' is live in another place than the one the call paused "
                "in: it would run elsewhere; " + remedy + ".") in own
    assert text(PATHLESS) not in own
    assert str(project) not in own and str(other) not in own
    assert f'action="/ui/calls/{WAITING}/deny"' in own
