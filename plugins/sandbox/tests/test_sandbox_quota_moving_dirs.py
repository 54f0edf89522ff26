"""A host that is not root, where the 0.2 s poll is the workspace's byte quota: a directory
moved while the host's usage walk stands in it.

- A hostile mover watches a trap directory with inotify and moves it to another parent as
  soon as the host opens it, so that the walk's way back up by ``..`` is not the way it came
  down. It cannot keep what the command writes elsewhere from being counted: the walk comes
  down again from the root and goes on, and the sandbox is killed at the quota.
- Doing it without writing anything still makes every measurement incomplete: a few of those
  in a row and the workspace cannot be measured, and the sandbox is killed (fail closed).
- An honest command whose output directory is moved now and then, even while the walk is
  inside it, is never killed for it.

A sandboxed command can no longer watch the file system (the seccomp filter refuses inotify,
fanotify and dnotify), so the mover runs beside the host, outside the sandbox, in the
workspace the command set up: it stands for a command that learns the walk's timing some
other way. Those cases run the host as nobody (uid 65534) when the tests run as root, as the
host that is not root of test_sandbox_unlistable_dirs.py (whose helpers these are). Then the
same two halves alone: the host's walk going on past such a move (the move another
process's, beside the test), and the runner counting incomplete measurements in a row.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

import test_sandbox_unlistable_dirs as unlistable
from sandbox_support import BOUND_S
from toolhost import Settings, WorkspaceUsage
from toolhost.testing import Harness, Run
from toolhost_sandbox import quota, runner
from toolhost_sandbox.isolation import find_bwrap
from toolhost_sandbox.limits import CallLimits

data = unlistable.data  # the fixture: a data directory the host's user owns
MiB = unlistable.MiB

#: The mover, beside the host (never in the sandbox, which has no inotify). ``once TRAP TO``
#: moves ``TRAP`` to ``TO`` once the host opens it (``ready`` first), and says whether the walk
#: was still inside it (``under``) or not (``after``). ``trap DATA``: in the workspace under the
#: data directory ``DATA`` (found by the command's ``X/ready``), moves ``X/t`` between ``X``
#: and ``X/s`` each time the host opens it, until killed. ``honest DATA``: moves ``A/out``
#: between ``A`` and ``B`` three times (found by ``A/ready``), each time the host opens it,
#: 2.5 s apart, and says how many of the moves the walk was still inside the directory for
#: (its close came after).
_MOVER = textwrap.dedent("""
    import ctypes, glob, os, struct, sys, time

    IN_OPEN, IN_CLOSE_NOWRITE = 0x20, 0x10
    libc = ctypes.CDLL(None, use_errno=True)

    def watch(path):
        fd = libc.inotify_init1(0)
        if fd < 0 or libc.inotify_add_watch(fd, path.encode(), IN_OPEN | IN_CLOSE_NOWRITE) < 0:
            sys.exit("no inotify")
        return fd

    def events(fd):
        # The masks of the events on the watched directory itself (no name), in order.
        raw, at, masks = os.read(fd, 65536), 0, []
        while at < len(raw):
            _, mask, _, size = struct.unpack_from("iIII", raw, at)
            if size == 0:
                masks.append(mask)
            at += 16 + size
        return masks

    def move_on_open(path, to, ready=False):
        # Whether the host was still in ``path`` when it moved: its close came after.
        fd = watch(path)
        if ready:
            print("ready", flush=True)
        masks = events(fd)
        while not any(m & IN_OPEN for m in masks):
            masks = events(fd)
        opened = next(i for i, m in enumerate(masks) if m & IN_OPEN)
        closed = any(m & IN_CLOSE_NOWRITE for m in masks[opened:])
        os.rename(path, to)
        under = not closed
        while not closed:
            closed = any(m & IN_CLOSE_NOWRITE for m in events(fd))
        os.close(fd)
        return under

    def workspace(data, marker):
        # The generation's root the command made ``marker`` in.
        while not (found := glob.glob(f"{data}/workspaces/*/*/{marker}")):
            time.sleep(0.01)
        return found[0].removesuffix(f"/{marker}")

    mode = sys.argv[1]
    if mode == "once":
        print("under" if move_on_open(sys.argv[2], sys.argv[3], ready=True) else "after")
        sys.exit(0)
    if mode == "honest":
        root = workspace(sys.argv[2], "A/ready")
        places, under = [f"{root}/A/out", f"{root}/B/out"], 0
        for k in range(3):
            under += move_on_open(places[k % 2], places[(k + 1) % 2])
            time.sleep(2.5)
        print(f"moved under the walk: {under}", flush=True)
        sys.exit(0)
    x = workspace(sys.argv[2], "X/ready") + "/X"
    fd, where = watch(f"{x}/t"), x
    while True:
        if any(m & IN_OPEN for m in events(fd)):
            there = f"{x}/s" if where == x else x
            os.rename(f"{where}/t", f"{there}/t")
            where = there
""")

#: ``python3 c.py MODE``, the command, in /workspace. ``fill`` and ``hold`` set the trap up (a
#: directory of 30 000 files, slow to list) and wait for the mover to have moved it once, then
#: ``fill`` writes 20 x 16 MB under ``X/<d>`` (a name listed first in ``X``, so the walk, which
#: takes the last-listed subdirectory first, meets the trap before it), ``hold`` only waits.
#: ``honest``: an output directory of 10 000 files, left to the mover for a while.
_COMMAND = textwrap.dedent("""
    import os, sys, time

    def files(where, count):
        os.makedirs(where)
        for i in range(count):
            open(f"{where}/e{i}", "w").close()

    mode = sys.argv[1]
    if mode == "honest":
        os.mkdir("B")
        files("A/out", 10000)
        open("A/ready", "w").close()
        time.sleep(12)
        print("done", flush=True)
        sys.exit(0)

    os.makedirs("X/s")
    files("X/t", 30000)
    for i in range(1000):
        os.mkdir(f"X/d{i}")
        if os.listdir("X")[0] == f"d{i}":
            break
        os.rmdir(f"X/d{i}")
    else:
        sys.exit("no name listed first")
    data = f"X/d{i}"
    open("X/ready", "w").close()
    while not os.path.exists("X/s/t"):  # the mover is there: it moved the trap once
        time.sleep(0.01)
    print("trap set", flush=True)
    if mode == "fill":
        for k in range(20):
            with open(f"{data}/f{k}", "wb") as f:
                f.write(bytes(16_000_000))
            print(f"f{k}", flush=True)
            time.sleep(0.3)
    else:
        time.sleep(20)
    print("done", flush=True)
""")


def _command(mode: str) -> str:
    return f"cat > c.py <<'EOF'\n{_COMMAND}\nEOF\npython3 c.py {mode}"


@contextlib.contextmanager
def _mover(data: Path, mode: str) -> Iterator[subprocess.Popen[str]]:
    """The mover beside the host (``trap`` or ``honest``), killed when the block ends."""
    with subprocess.Popen([sys.executable, "-c", _MOVER, mode, str(data)],
                          stdout=subprocess.PIPE, text=True) as mover:
        try:
            yield mover
        finally:
            mover.kill()


def test_a_directory_moved_under_the_walk_hides_nothing_from_the_quota(data: Path) -> None:
    with _mover(data, "trap"):
        found = unlistable.as_host_user(data, _command("fill"))
    call = found["calls"][0]
    assert call["failure"] is None
    result = call["structured"]
    written = [line for line in result["stdout"].split() if line.startswith("f")]
    # Killed at the quota (16 MiB): not after 320 MB, as when every walk stopped at the trap.
    assert (result["signal"], result["quota_exceeded"]) == ("SIGKILL", True), result
    assert result["stdout"].startswith("trap set\n"), result
    assert "done" not in result["stdout"], result
    assert len(written) < 20
    assert found["ended"] == "ok"


def test_walks_kept_incomplete_by_a_moving_directory_kill_the_sandbox(data: Path) -> None:
    with _mover(data, "trap"):
        found = unlistable.as_host_user(data, _command("hold"))
    call = found["calls"][0]
    assert call["failure"] is None
    result = call["structured"]
    assert (result["exit_code"], result["signal"], result["quota_exceeded"]) \
        == (None, "SIGKILL", True), result
    assert call["content"].startswith("The workspace could not be measured against its quota")
    assert "do not keep moving directories in it while the command runs." in call["content"]
    assert result["stdout"] == "trap set\n"


def test_an_honest_command_moving_its_output_under_the_walk_runs_to_its_end(
        data: Path) -> None:
    with _mover(data, "honest") as mover:
        found = unlistable.as_host_user(data, _command("honest"))
        said, _ = mover.communicate(timeout=BOUND_S)
    call = found["calls"][0]
    assert call["failure"] is None
    result = call["structured"]
    assert (result["exit_code"], result["signal"], result["quota_exceeded"]) \
        == (0, None, False), result
    # At least one of its three moves came while the host's walk was inside the directory.
    under = int(said.removeprefix("moved under the walk: "))
    assert under >= 1, said
    assert found["ended"] == "ok"


def _listed_first(parent: Path) -> Path:
    """A new directory in ``parent`` that ``os.listdir`` gives first: the walk, which takes
    the last-listed subdirectory first, reaches it last."""
    for i in range(1000):
        made = parent / f"d{i}"
        made.mkdir()
        if os.listdir(parent)[0] == made.name:
            return made
        made.rmdir()
    raise AssertionError("no name listed first")


def test_the_walk_goes_on_past_a_directory_moved_while_it_stood_in_it(
        toolhost_host: Harness, run: Run, root: Path) -> None:
    # The move is the other process's, at the moment the host opens the trap; the walk has to
    # come back down to X to reach the data, listed before the trap and so walked after it.
    x = root / "X"
    (x / "s").mkdir(parents=True)
    (x / "t").mkdir()
    for i in range(30000):
        (x / "t" / f"e{i}").touch()
    (_listed_first(x) / "f").write_bytes(b"x" * MiB)
    workspace = cast(quota.Measurable, toolhost_host.context(run=run).workspace)
    verdicts = []
    for _ in range(5):  # until the mover moves the trap while the walk is inside it
        trap = x / "t" if (x / "t").exists() else x / "s" / "t"
        to = x / "s" / "t" if trap.parent == x else x / "t"
        with subprocess.Popen([sys.executable, "-c", _MOVER, "once", str(trap), str(to)],
                              stdout=subprocess.PIPE, text=True) as mover:
            assert mover.stdout is not None
            assert mover.stdout.readline() == "ready\n"
            usage = quota.measure(workspace, 2**40)
            verdicts.append(mover.stdout.read().strip())
        if verdicts[-1] == "under":
            # Incomplete (a directory moved under it), yet everything was counted: the data
            # the walk reached only by coming down again from the root.
            assert not usage.complete
            assert usage.disk_bytes >= MiB
            assert usage.entries >= 30003
            break
    assert "under" in verdicts, verdicts


def _scripted(*complete: bool) -> Callable[[], WorkspaceUsage]:
    """A workspace's measurements: small, complete or not in this order, round and round."""
    turns = itertools.cycle(complete)
    return lambda: WorkspaceUsage(disk_bytes=4096, entries=1, depth=1, complete=next(turns))


@pytest.mark.parametrize(("complete", "killed"), [
    ((False,), runner.UNMEASURABLE),  # every one: the quota cannot be held
    ((True, False, False), None),  # never three in a row: what a rename now and then costs
], ids=["always", "two-in-a-row"])
def test_incomplete_measurements_in_a_row_kill_the_sandbox(
        tmp_path: Path, isolation: None, complete: tuple[bool, ...], killed: str | None) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        completed = runner.run_sandboxed(
            find_bwrap(Settings()), fd, "sleep 3; echo done", timeout_s=30,
            on_cancel=lambda callback: lambda: None, limits=CallLimits(),
            measure=_scripted(*complete))
    finally:
        os.close(fd)
    assert completed.killed == killed
    assert completed.stdout == (b"" if killed else b"done\n")
