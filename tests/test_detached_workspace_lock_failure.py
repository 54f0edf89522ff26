"""A workspace of one approved call's own (``workspaces/.detached``, D219, D468) whose lock
cannot be taken (no file handles left: EMFILE on the lock's open) is never handed out unheld:
``toolhost recover``'s sweep (another process) would take it for one a killed process left
and remove it under the running call. The make fails as the workspace's other failures do
(``WorkspaceUnavailable``: a static, retryable ``workspace_unavailable``), and nothing it made
is left in ``.detached`` (unmounted first where the host mounts).

The failure is simulated on the one ``os.open`` of the new workspace's directory that takes
its lock; every other open goes through.
"""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import nothing_left
from mount_support import mounts_under
from test_detached_workspace_sweep import QUOTA, needs_mount, root  # noqa: F401 - a fixture
from test_run_workspace import PLUGIN

from toolhost import OutcomeStatus, WorkspaceUnavailable
from toolhost._adapters import run_workspaces
from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._adapters.sized_fs import SizedFilesystems
from toolhost._model import host_reasons as core_messages
from toolhost.testing import host_for


def open_fails(monkeypatch: pytest.MonkeyPatch, parent: str) -> list[str]:
    """The first open of a directory in one named ``parent`` with the registry's flags (its
    lock's) fails with EMFILE; the paths it failed for."""
    real_open = os.open
    failed: list[str] = []

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if (not failed and flags == run_workspaces._O_DIR
                and Path(os.fsdecode(path)).parent.name == parent):
            failed.append(os.fsdecode(path))
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    return failed


@pytest.fixture
def lock_open_fails(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A detached workspace's lock cannot be taken (``open_fails``)."""
    return open_fails(monkeypatch, ".detached")


@pytest.mark.parametrize("quota", [pytest.param(QUOTA, id="mounted", marks=needs_mount),
                                   pytest.param(0, id="plain")])
def test_a_detached_workspace_whose_lock_cannot_be_taken_is_not_made(
        root: Path, quota: int, lock_open_fails: list[str]) -> None:  # noqa: F811
    registry = RunWorkspaces(root, SizedFilesystems(quota) if quota else None)
    workspace = registry.for_approval("gone-run")
    # Before: the write succeeded in a workspace nobody held, which a sweep (recover, the
    # next approval elsewhere) moved to the trash under the running call.
    with pytest.raises(WorkspaceUnavailable) as raised:
        workspace.write("out.txt", b"x")
    assert raised.value.reason == "the workspace directory cannot be opened (EMFILE)"
    assert len(lock_open_fails) == 1
    assert os.listdir(root / ".detached") == [] and mounts_under(root) == []
    workspace.close()
    # The next use (handles free again) makes a held one, as ever.
    again = registry.for_approval("gone-run")
    again.write("out.txt", b"y")
    RunWorkspaces(root).sweep_detached()  # another process's sweep keeps it: it is held
    assert again.read("out.txt") == b"y"
    again.close()
    assert nothing_left(root) and mounts_under(root) == []


def test_an_approved_call_whose_workspace_lock_cannot_be_taken_fails_retryable(
        tmp_path: Path, lock_open_fails: list[str]) -> None:
    with host_for({"toolhost-fx": PLUGIN}, data_dir=tmp_path / "data") as host:
        run = host.start_run()
        paused = asyncio.run(host.invoke("fx.gated_write", {"path": "a.txt"}, run=run))
        assert paused.status is OutcomeStatus.AWAITING_APPROVAL and paused.invocation_id
        host.end_run(run)  # the run is not live here: the approval gets a workspace of its own
        approved = host.approve_sync(paused.invocation_id, "operator")
    assert lock_open_fails, "the approved call made no detached workspace"
    assert approved.failure is not None
    assert (approved.failure.reason_code, approved.failure.retryable) == (
        core_messages.WORKSPACE_UNAVAILABLE, True)
    assert approved.content == core_messages.MESSAGES[core_messages.WORKSPACE_UNAVAILABLE]
    assert nothing_left(tmp_path / "data" / "workspaces")


def test_a_run_generation_whose_lock_cannot_be_taken_is_not_handed_out(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # The same for a run's own generation (``claim``): unheld, a pause elsewhere (``drop``)
    # would remove it under the call. The generation stays the run's, for the next call.
    registry = RunWorkspaces(root)
    workspace = registry.start("run-1")[0]
    failed = open_fails(monkeypatch, "run-1")
    with pytest.raises(WorkspaceUnavailable) as raised:
        workspace.write("out.txt", b"x")
    assert raised.value.reason == "the workspace directory cannot be opened (EMFILE)"
    assert len(failed) == 1
    workspace.write("out.txt", b"y")  # handles free again: a held one
    RunWorkspaces(root).drop("run-1")  # a pause elsewhere: the holder keeps it until done
    assert workspace.read("out.txt") == b"y"
    workspace.close()
    registry.end("run-1")
    assert nothing_left(root)


def test_a_commands_own_run_that_cannot_be_registered_leaves_nothing(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    # `toolhost call` (demo, upload) registers its run first: out of file handles, that was a
    # raw OSError (a traceback) and an empty run directory left behind.
    registry = RunWorkspaces(root)
    open_fails(monkeypatch, "workspaces")  # the run's own directory, in the registry
    with pytest.raises(WorkspaceUnavailable) as raised:
        registry.own("run-1")
    assert raised.value.reason == "the run cannot be registered (EMFILE)"
    assert registry.live() == [] and not (root / "run-1").exists()
