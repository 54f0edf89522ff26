"""A run's workspace is removed when the run pauses or ends, whatever other threads of the
process are doing: a child forked meanwhile (a sandbox command, a mount, between its fork and
its exec) holds a copy of every descriptor of the process, the workspace's lock with them,
and is no holder the end may leave the workspace to. What is left anyway (a process killed
between the end's steps, an older version's leak) is swept by ``toolhost recover`` and by a
server's recovery: a run directory no run is registered in, whose generations nobody holds.
One a live process holds is never touched.

Real forked children, real processes, real mounts where the machine can mount (root and loop
devices), else the plain-directory cases only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import nothing_left
from mount_support import mounts_under

from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._adapters.sized_fs import SizedFilesystems, is_mounted
from toolhost._testing.cli import run_toolhost

QUOTA = 16 * 1024 * 1024
_CANNOT_MOUNT = SizedFilesystems(QUOTA).problem()
needs_mount = pytest.mark.skipif(_CANNOT_MOUNT is not None,
                                 reason=f"the host cannot mount here ({_CANNOT_MOUNT})")
QUOTAS = [pytest.param(QUOTA, id="mounted", marks=needs_mount), pytest.param(0, id="plain")]
RUN = "3f2a9c0d1e4b4c5f8a7b6c5d4e3f2a1b"


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "workspaces"
    subprocess.run(["umount", "-R", "-l", str(tmp_path)], check=False, capture_output=True)


def _registry(root: Path, quota: int) -> RunWorkspaces:
    return RunWorkspaces(root, SizedFilesystems(quota) if quota else None)


@contextlib.contextmanager
def _forked() -> Iterator[None]:
    """A child of this process forked now, which keeps every descriptor it inherited (its
    close-on-exec ones too: it never execs) until the block ends: what another thread's
    ``subprocess.Popen`` is between its fork and its exec."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: waits for the parent's end of the pipe to close, then goes
        try:
            os.close(write)
            os.read(read, 1)
        finally:
            os._exit(0)
    os.close(read)
    try:
        yield
    finally:
        os.close(write)
        os.waitpid(pid, 0)


def _files(root: Path) -> list[str]:
    """Every run's entry left under ``root`` (the host's own dot entries aside)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if not p.relative_to(root).parts[0].startswith("."))


@pytest.mark.parametrize("quota", QUOTAS)
def test_a_run_ending_while_a_child_is_forked_has_its_workspace_removed(
        root: Path, quota: int) -> None:
    registry = _registry(root, quota)
    workspace, _ = registry.start(RUN)
    workspace.write("note.txt", b"session 15")
    generation = workspace.root
    assert is_mounted(generation) == bool(quota)
    with _forked():
        # Before: the end found the generation locked (by the child's copy of this
        # process's own lock) and left it "for its last holder", who never came: the run
        # directory, its file and its mount stayed for good, and nothing listed them.
        workspace.end()
        assert _files(root) == []
        assert mounts_under(root) == []
    assert nothing_left(root)
    assert registry.live() == []


@pytest.mark.parametrize("quota", QUOTAS)
def test_a_run_pausing_while_a_child_is_forked_has_its_workspace_removed(
        root: Path, quota: int) -> None:
    registry = _registry(root, quota)
    workspace, _ = registry.start(RUN)
    workspace.write("note.txt", b"before the pause")
    generation = workspace.root
    with _forked():
        workspace.discard()
        assert not generation.exists() and mounts_under(root) == []
        assert _files(root) == [f"{RUN}", f"{RUN}/run.json"]
    # The run goes on in a fresh generation.
    assert not workspace.listdir().entries
    workspace.end()
    assert nothing_left(root)


def test_the_registrys_lock_let_go_while_a_child_is_forked_is_free(root: Path) -> None:
    # A change of the registry that forked a child (another thread's) while it held the
    # lock lets the lock go all the same: the next change, in any process, need not wait
    # for the child to exec.
    registry = RunWorkspaces(root)
    with contextlib.ExitStack() as child:
        with registry._locked():
            child.enter_context(_forked())
        fd = os.open(root / ".lock", os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # before: BlockingIOError
        finally:
            os.close(fd)


#: A process holding a generation's directory as a process using it does (a shared
#: ``flock``), until its stdin closes or it is killed.
_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_SH)
print("held", flush=True)
sys.stdin.read()
"""


def _holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def _left_by_a_killed_end(registry: RunWorkspaces, run_id: str) -> Path:
    """A run's generation, written, left as a process killed between the end's first steps
    (``current`` and ``run.json`` removed) and the generation's removal leaves it: no run is
    registered in its directory any more."""
    workspace, _ = registry.start(run_id)
    workspace.write("note.txt", b"an ended session's")
    generation = workspace.root
    workspace.close()
    for name in ("current", "run.json"):
        (registry.run_dir(run_id) / name).unlink()
    assert registry.live() == []
    return generation


@pytest.mark.parametrize("quota", QUOTAS)
def test_recovery_removes_an_ended_runs_leftover_and_keeps_a_held_one(
        root: Path, quota: int) -> None:
    registry = _registry(root, quota)
    left = _left_by_a_killed_end(registry, RUN)
    held = _left_by_a_killed_end(registry, "held-run")
    live, _ = registry.start("live-run")
    live.write("mine.txt", b"still live")
    holder = _holder(held)
    try:
        # Before: nothing swept a run directory no run is registered in.
        registry.sweep_detached()
        assert not left.exists() and not registry.run_dir(RUN).exists()
        # Held by a live process: kept, mounted, its files there.
        assert (held / "note.txt").read_bytes() == b"an ended session's"
        assert is_mounted(held) == bool(quota)
        assert live.read("mine.txt") == b"still live"
        assert sorted(mounts_under(root)) == (sorted([str(held), str(live.root)])
                                              if quota else [])
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
    # Its holder killed: the next recovery removes it.
    registry.sweep_detached()
    assert not registry.run_dir("held-run").exists()
    assert live.read("mine.txt") == b"still live"
    assert registry.live() == [("live-run", None, True)]
    live.end()
    assert nothing_left(root) and mounts_under(root) == []


@pytest.mark.parametrize("quota", QUOTAS)
def test_toolhost_recover_removes_an_ended_runs_leftover(tmp_path: Path, quota: int) -> None:
    data = tmp_path / "data"
    root = data / "workspaces"
    try:
        generation = _left_by_a_killed_end(_registry(root, quota), RUN)
        assert is_mounted(generation) == bool(quota)
        recovered = run_toolhost("recover", data_dir=data)
        assert recovered.returncode == 0, recovered.stderr
        assert nothing_left(root)
        assert mounts_under(root) == []
        assert not list(root.rglob("*.img"))
    finally:
        subprocess.run(["umount", "-R", "-l", str(tmp_path)], check=False, capture_output=True)
