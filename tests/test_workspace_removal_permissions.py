"""A workspace a command locked its owner out of is removed all the same, and a run's end never
fails on one it cannot remove.

On a host that is not root the sandbox runs as the host's own uid, so a command can leave a
directory the host may not open or empty (``chmod 0``, ``chmod 300``, ``chmod 555``, ``chmod
500`` on the workspace itself). ``remove_tree`` gives such a directory its owner's rwx back
where the host's euid owns it, and tries again; a removal that still fails is logged and left
in ``workspaces/.trash`` for the next sweep, and the run ends without an error.

Root opens any directory whatever its mode, so each case runs in a forked child as nobody
(uid 65534) when the tests run as root, in a directory it owns; as another user, as that user.
Everything the child uses is imported here first: once it is nobody, it may not read the
interpreter's own files (under /root on this machine).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing
from conftest import nothing_left

import toolhost._pipeline.log  # noqa: F401 - the trash's log, imported before the child drops root
from toolhost._adapters.fs_workspace import remove_tree
from toolhost._adapters.run_workspaces import RunWorkspaces

NOBODY = 65534
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="needs root to make another user's directory")


def as_host_user(work: Callable[[], Any]) -> dict[str, Any]:
    """``work()`` in a forked child as the unprivileged host's user (nobody when the tests run
    as root): ``{"value": ...}``, or ``{"raised": name, "errno": ..., "trace": ...}``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(read)
            if ROOT:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            try:
                result: dict[str, Any] = {"value": work()}
            except BaseException as exc:
                result = {"raised": type(exc).__name__, "errno": getattr(exc, "errno", None),
                          "trace": traceback.format_exc()}
            with os.fdopen(write, "w") as out:
                json.dump(result, out)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as received:
        text = received.read()
    os.waitpid(pid, 0)
    found: dict[str, Any] = json.loads(text)
    return found


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory the host's user owns (nobody's when root), reachable by it."""
    path = Path(tempfile.mkdtemp(prefix="toolhost-removal-"))
    path.chmod(0o755)
    if ROOT:
        os.chown(path, NOBODY, NOBODY)
    yield path
    for top, dirs, _ in os.walk(path):  # whatever a failed case left locked
        for name in dirs:
            with_mode = Path(top, name)
            if not with_mode.is_symlink():
                with_mode.chmod(0o700)
    shutil.rmtree(path)


def lock_out(root: Path) -> None:
    """What commands leave: directories without their owner's read, write or search
    permission, nested, and the workspace itself read-only."""
    for name, mode in (("none", 0), ("write_only", 0o300), ("search_only", 0o100),
                       ("read_only", 0o400), ("no_write", 0o555)):
        (root / name / "sub").mkdir(parents=True)
        (root / name / "file").write_text("x")
        (root / name / "sub" / "file").write_text("x")
        (root / name / "sub").chmod(mode)
        (root / name).chmod(mode)
    deep = root / "n1" / "n2" / "n3"
    deep.mkdir(parents=True)
    (deep / "file").write_text("x")
    for level in (deep, deep.parent, deep.parent.parent):
        level.chmod(0)
    root.chmod(0o500)


def test_remove_tree_removes_directories_a_command_locked_its_owner_out_of(base: Path) -> None:
    root = base / "workspace"

    def work() -> bool:
        root.mkdir()
        lock_out(root)
        remove_tree(root)
        return root.exists()

    assert as_host_user(work) == {"value": False}
    assert not root.exists()


def test_remove_tree_opens_up_nothing_through_a_symlink(base: Path) -> None:
    root, outside = base / "workspace", base / "outside"

    def work() -> list[int]:
        root.mkdir()
        outside.mkdir()
        (outside / "kept").write_text("x")
        outside.chmod(0)
        (root / "link").symlink_to(outside)
        (root / "none").mkdir(mode=0)
        remove_tree(root)
        return [int(root.exists()), stat.S_IMODE(outside.stat().st_mode)]

    assert as_host_user(work) == {"value": [0, 0]}
    assert (outside / "kept").read_text() == "x"


@needs_root
def test_remove_tree_leaves_another_users_directory_as_it_was(base: Path) -> None:
    root = base / "workspace"
    root.mkdir()
    os.chown(root, NOBODY, NOBODY)
    (root / "theirs").mkdir(mode=0o755)  # root's, not the host's
    (root / "theirs" / "file").write_text("x")

    def work() -> None:
        remove_tree(root)

    result = as_host_user(work)
    assert (result["raised"], result["errno"]) == ("PermissionError", 13)
    assert stat.S_IMODE((root / "theirs").stat().st_mode) == 0o755
    assert (root / "theirs" / "file").read_text() == "x"


@pytest.mark.parametrize("how", ["end", "discard"])
def test_a_runs_end_or_pause_removes_a_workspace_a_command_locked(base: Path, how: str) -> None:
    workspaces = base / "workspaces"

    def work() -> dict[str, Any]:
        workspace = RunWorkspaces(workspaces).start("run-1")[0]
        workspace.write("notes.md", b"x")
        lock_out(workspace.root)
        with structlog.testing.capture_logs() as logs:
            getattr(workspace, how)()
            if how == "discard":
                workspace.end()
        return {"left": nothing_left(workspaces), "logs": logs}

    assert as_host_user(work) == {"value": {"left": True, "logs": []}}


@needs_root
def test_a_workspace_that_cannot_be_removed_is_logged_and_swept_by_a_later_block(
        base: Path) -> None:
    workspaces = base / "workspaces"

    def two_generations() -> list[str]:
        # Two generations of one run, neither held (their process was killed): the run's end
        # removes both in one block.
        registry = RunWorkspaces(workspaces)
        registry.start("run-1")
        first, held = registry.claim("run-1")
        registry.drop("run-1")
        second, also_held = registry.claim("run-1")
        for hold in (held, also_held):
            assert hold is not None
            os.close(hold)
        return sorted([first, second])

    generations = as_host_user(two_generations)["value"]
    # Another user's file in the one removed first: the host cannot remove it.
    theirs = workspaces / "run-1" / generations[0] / "theirs"
    theirs.mkdir()
    (theirs / "file").write_text("x")

    def end() -> dict[str, Any]:
        with structlog.testing.capture_logs() as logs:
            ended = RunWorkspaces(workspaces).end("run-1")
        return {"ended": ended, "logs": logs, "trash": sorted(os.listdir(workspaces / ".trash"))}

    result = as_host_user(end)
    assert "raised" not in result, result["trace"]  # the run's end never fails on it
    found = result["value"]
    assert found["ended"] is True
    assert found["trash"] == [f"run-1-{generations[0]}"]  # the other one was removed all the same
    assert [(log["event"], log["error"]) for log in found["logs"]] == [
        ("workspace_not_removed", "EACCES")]
    assert not (workspaces / "run-1").exists()
    trashed = workspaces / ".trash" / f"run-1-{generations[0]}"
    assert (trashed / "theirs" / "file").read_text() == "x"

    os.chown(trashed / "theirs", NOBODY, NOBODY)  # the operator hands it over
    os.chown(trashed / "theirs" / "file", NOBODY, NOBODY)

    def later() -> list[str]:
        RunWorkspaces(workspaces).live()  # a later process's first block sweeps the trash
        return os.listdir(workspaces / ".trash")

    assert as_host_user(later) == {"value": []}
    assert nothing_left(workspaces)
