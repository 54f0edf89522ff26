"""How the sandbox starts under the call's limits (runner's ``_Gate``, ``Cgroup.entered``).

bwrap is started directly: born in the call's cgroup where the calling thread can step into it
(v1), else its init is added to it (v2), and held back until its init is under the resource
limits, by the seccomp filter the host writes only then. A filter never written runs nothing,
and limits that cannot be applied fail the call closed."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sandbox_support import BOUND_S, Call, processes_with, structured
from toolhost import Settings, WorkspaceUsage
from toolhost_sandbox import cgroups, runner
from toolhost_sandbox.isolation import account_files, bwrap_argv, find_bwrap
from toolhost_sandbox.limits import (
    FILE_BYTES,
    MEMORY_BYTES,
    OPEN_FILES,
    PROCESSES,
    CallLimits,
    Cgroup,
)

CODE = "tool.upstream_unavailable.isolation_unavailable"


def _our_cgroups(pid: int | None = None) -> list[Path]:
    prefix = f"toolhost-sandbox-{os.getpid() if pid is None else pid}-"
    return [p for base in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup/memory"))
            if base.is_dir() for p in base.rglob(f"{prefix}*")]


def _line(text: str, controller: str) -> str:
    """``controller``'s line in a /proc/<pid>/cgroup text."""
    (line,) = [line for line in text.splitlines()
               if controller in line.split(":", 2)[1].split(",")]
    return line


def _pids_cgroup(text: str) -> str:
    """The pids line's path in a /proc/<pid>/cgroup text."""
    (path,) = [line.split(":", 2)[2] for line in text.splitlines()
               if "pids" in line.split(":", 2)[1].split(",")]
    return path


def test_every_resource_limit_holds_for_the_command(call: Call) -> None:
    out = structured(call("cat /proc/self/limits", 7))["stdout"]
    limits = {line[:26].strip(): line[26:].split()[:2] for line in out.splitlines()[1:]}
    assert limits["Max cpu time"] == ["8", "8"]  # timeout_s + CPU_SLACK_S
    assert limits["Max address space"] == [str(MEMORY_BYTES)] * 2
    assert limits["Max file size"] == [str(FILE_BYTES)] * 2
    assert limits["Max processes"] == [str(PROCESSES)] * 2
    assert limits["Max open files"] == [str(OPEN_FILES)] * 2
    assert limits["Max core file size"] == ["0", "0"]


def test_the_sandbox_is_born_in_the_calls_cgroup_not_moved_there(
        call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    # Moving a process (cgroup.procs) waited 10-12 ms for an RCU grace period at every call.
    def no_migration(self: Cgroup, pid: int) -> None:
        raise AssertionError("the sandbox was migrated into its cgroup")

    monkeypatch.setattr(Cgroup, "add", no_migration)
    out = structured(call("cat /proc/self/cgroup"))["stdout"]
    assert _pids_cgroup(out) == "/"  # its cgroup namespace is rooted at the call's cgroup
    # The thread that started it is back where it was.
    assert cgroups.THREAD_CGROUPS.read_text() == cgroups.OWN_CGROUPS.read_text()
    assert _our_cgroups() == []


def test_where_a_thread_cannot_step_in_a_launcher_is_added_first(
        call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    # As on cgroup v2, whose cgroups take no single thread.
    @contextmanager
    def cannot(self: Cgroup) -> Iterator[bool]:
        yield False

    monkeypatch.setattr(Cgroup, "entered", cannot)
    out = structured(call("cat /proc/self/cgroup"))["stdout"]
    # A launcher is added to the cgroup before it execs bwrap, whose cgroup namespace is then
    # rooted at the call's cgroup: the sandbox never sees its name (this process's pid and a
    # count of its calls), nor anything above it.
    assert _pids_cgroup(out) == "/"
    assert _our_cgroups() == []


def test_only_the_calling_thread_steps_in_and_back_out() -> None:
    group = Cgroup.create(PROCESSES, MEMORY_BYTES)
    assert group is not None and group.version == 1  # this machine's v1 pids hierarchy
    seen: list[tuple[bool, str, str]] = []

    def step_in() -> None:
        with group.entered() as inside:
            seen.append((inside, cgroups.THREAD_CGROUPS.read_text(),
                         cgroups.OWN_CGROUPS.read_text()))
        seen.append((False, cgroups.THREAD_CGROUPS.read_text(),
                     cgroups.OWN_CGROUPS.read_text()))

    before = cgroups.OWN_CGROUPS.read_text()
    try:
        worker = threading.Thread(target=step_in)
        worker.start()
        worker.join(BOUND_S)
        (inside, thread_in, process_in), (_, thread_out, process_out) = seen
        assert inside and _pids_cgroup(thread_in) == f"/{group.path.name}"
        assert process_in == process_out == thread_out == before
    finally:
        group.remove()


def test_killing_a_cgroup_never_kills_the_host_inside_it() -> None:
    # The cancellation's kill may come while a thread of the host is in the cgroup to start
    # the sandbox: cgroup.procs then lists the host itself.
    script = ("from toolhost_sandbox.limits import Cgroup, PROCESSES, MEMORY_BYTES\n"
              "group = Cgroup.create(PROCESSES, MEMORY_BYTES)\n"
              "with group.entered() as inside:\n"
              "    group.kill()\n"
              "group.remove()\n"
              "print('alive', inside)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        out, err = child.communicate(timeout=BOUND_S)
    finally:
        child.kill()
        child.wait()
        # A child that killed itself could not remove its cgroup: ours to remove then.
        for path in sorted(_our_cgroups(child.pid), key=lambda p: -len(p.parts)):
            path.rmdir()
    assert (child.returncode, out) == (0, "alive True\n"), err


def test_limits_that_cannot_be_applied_fail_the_call_closed(
        call: Call, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(pid: int, timeout_s: int) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(runner, "apply_rlimits", refused)
    outcome = call("touch ran")
    assert outcome.failure is not None and outcome.failure.reason_code == CODE
    assert not (root / "ran").exists()
    assert _our_cgroups() == []


def test_a_filter_never_written_runs_nothing(tmp_path: Path) -> None:
    # What the gate relies on: bwrap reads an empty filter where the host wrote none (it
    # failed, or died, before the limits were on), cannot load it, and never execs.
    fds = []
    for data in (*account_files(), b""):
        read, write = os.pipe()
        os.write(write, data)
        os.close(write)
        fds.append(read)
    workspace = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    status_read, status_write = os.pipe()
    argv = bwrap_argv(find_bwrap(Settings()), workspace_fd=workspace, status_fd=status_write,
                      passwd_fd=fds[0], group_fd=fds[1], seccomp_fd=fds[2],
                      command="touch /workspace/ran")
    try:
        result = subprocess.run(argv, pass_fds=(workspace, status_write, *fds),
                                capture_output=True, timeout=BOUND_S, check=False)
    finally:
        for fd in (workspace, status_read, status_write, *fds):
            os.close(fd)
    assert result.returncode != 0
    assert b"system call filtering" in result.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("where", ["launcher", "no_cgroup"])
def test_a_kill_while_the_init_is_unnamed_ends_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    # The kill lands when bwrap's init exists but the host has not read its pid (here: as
    # bwrap's status, naming it, arrives, and the host never reads it). bwrap alone killed,
    # its init would wait for ever, holding the output pipes (the call waiting out
    # KILL_GRACE_S for them) where no cgroup holds it (a host with none); and where a
    # launcher is added to the cgroup (v2, simulated), nothing of it may be left either.
    monkeypatch.setattr(runner, "KILL_GRACE_S", 30.0)  # a leaked init: the call hangs
    if where == "launcher":
        @contextmanager
        def cannot(self: Cgroup) -> Iterator[bool]:
            yield False

        monkeypatch.setattr(Cgroup, "entered", cannot)
    def killed_unread(self: runner._Streams, chunk: bytes) -> None:
        self._sandbox.kill("cancelled")

    monkeypatch.setattr(runner._Streams, "status", killed_unread)
    marker = f"unnamed-{os.getpid()}-{where}"
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(5):
            group = Cgroup.create(PROCESSES, MEMORY_BYTES) if where != "no_cgroup" else None
            limits = CallLimits(cgroup=group)
            started = time.monotonic()
            try:
                completed = runner.run_sandboxed(
                    find_bwrap(Settings()), fd, f"echo {marker}", timeout_s=5,
                    on_cancel=lambda callback: lambda: None, limits=limits, measure=None)
            finally:
                limits.release()
            assert completed.killed == "cancelled"
            assert time.monotonic() - started < BOUND_S
            assert processes_with(marker) == []
    finally:
        os.close(fd)
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_quota_passed_before_the_start_starts_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A workspace left over its quota (by an earlier call) is measured before bwrap starts:
    # no sandbox is started to be killed at a moment the workspace's size would set.
    def no_start(*args: object, **kwargs: object) -> None:
        raise AssertionError("a sandbox was started")

    monkeypatch.setattr(runner, "_start", no_start)
    over = WorkspaceUsage(disk_bytes=2**62, entries=1, depth=1, complete=False)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        completed = runner.run_sandboxed(
            find_bwrap(Settings()), fd, "true", timeout_s=5,
            on_cancel=lambda callback: lambda: None, limits=CallLimits(), measure=lambda: over)
    finally:
        os.close(fd)
    assert (completed.killed, completed.exit_code) == ("workspace_quota", None)


def test_a_thread_whose_step_out_fails_fails_the_call_closed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A step out refused both ways (the parent's tasks opened afresh, and the fd opened before
    # stepping in): every other directory is still left, and the call fails closed, bwrap
    # killed before it ran anything.
    group = Cgroup.create(PROCESSES, MEMORY_BYTES)
    assert group is not None and group.version == 1
    assert len(group._dirs) == 2  # this machine's v1 pids and memory hierarchies
    memory = group._dirs[1]
    refused_at = str(memory.parent / "tasks")  # the first way out tried: memory's
    real_write = os.write
    refused: list[str] = []

    def refuse_memorys_step_out(fd: int, data: bytes) -> int:
        target = ""
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
        if data == b"0" and target == refused_at:
            refused.append(target)
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))
        return real_write(fd, data)

    own = cgroups.THREAD_CGROUPS.read_text()
    monkeypatch.setattr(os, "write", refuse_memorys_step_out)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(runner.LimitsUnavailable, match="could not be left"):
            runner.run_sandboxed(
                find_bwrap(Settings()), fd, "touch /workspace/ran", timeout_s=5,
                on_cancel=lambda callback: lambda: None, limits=CallLimits(cgroup=group),
                measure=None)
        monkeypatch.undo()
        assert len(refused) == 2  # afresh, then through the fd opened before
        now = cgroups.THREAD_CGROUPS.read_text()
        assert _pids_cgroup(now) == _pids_cgroup(own)  # left, though memory's was refused
        assert _line(now, "memory").endswith(f"/{memory.name}")
        assert not (tmp_path / "ran").exists()
    finally:
        os.close(fd)
        monkeypatch.undo()
        if refused:  # this thread put back where it was
            (memory.parent / "tasks").write_text("0")
        group.remove()
