"""A workspace of one approved call's own (``workspaces/.detached``, D219) that a SIGKILLed
process left, mounted (D265) or a plain directory, is removed by the next one made and by
``toolhost recover``: no run's end or pause ever comes for it. One a live process holds is
never touched.

Real processes killed with SIGKILL; real mounts where the machine can mount (root and loop
devices), else the plain-directory cases only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mount_support import mounts_under

from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._adapters.sized_fs import SizedFilesystems, is_mounted
from toolhost._testing.cli import run_toolhost, toolhost_command

QUOTA = 16 * 1024 * 1024
_CANNOT_MOUNT = SizedFilesystems(QUOTA).problem()
needs_mount = pytest.mark.skipif(_CANNOT_MOUNT is not None,
                                 reason=f"the host cannot mount here ({_CANNOT_MOUNT})")

#: An approver of a run not live here: its workspace made and written, its path printed,
#: then held until its stdin closes (or it is killed).
_APPROVER = """
import sys
from pathlib import Path
from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._adapters.sized_fs import SizedFilesystems
quota = int(sys.argv[2])
registry = RunWorkspaces(Path(sys.argv[1]), SizedFilesystems(quota) if quota else None)
workspace = registry.for_approval("gone-run")
workspace.write("out.txt", b"by an approver")
print(workspace.root, flush=True)
sys.stdin.read()
workspace.write("later.txt", b"still its own")
workspace.close()
"""


def _approver(root: Path, quota: int) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", _APPROVER, str(root), str(quota)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "workspaces"
    subprocess.run(["umount", "-R", "-l", str(tmp_path)], check=False, capture_output=True)


@pytest.mark.parametrize("quota", [pytest.param(QUOTA, id="mounted", marks=needs_mount),
                                   pytest.param(0, id="plain")])
def test_a_killed_approvers_workspace_is_swept_and_a_live_ones_is_kept(
        root: Path, quota: int) -> None:
    alive, held = _approver(root, quota)
    killed, left = _approver(root, quota)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    image = left.with_name(left.name + ".img")
    assert (left / "out.txt").exists() and is_mounted(left) == bool(quota) == image.exists()
    # The testing kit's own workspace there (``Host.fresh_workspace``) is nobody's leftover.
    kit = RunWorkspaces(root).detached_path("kit-run")
    kit.mkdir()
    try:
        registry = RunWorkspaces(root, SizedFilesystems(quota) if quota else None)
        # The next approved call's workspace: made after the sweep, and not swept by it.
        mine = registry.for_approval("another-gone-run")
        mine.write("a.txt", b"x")
        assert not left.exists() and not image.exists()
        assert (held / "out.txt").read_bytes() == b"by an approver" and kit.is_dir()
        assert is_mounted(held) == bool(quota)
        # recover's sweep keeps both held ones too.
        registry.sweep_detached()
        assert mine.read("a.txt") == b"x" and (held / "out.txt").exists()
        assert sorted(mounts_under(root)) == (sorted([str(held), str(mine.root)])
                                               if quota else [])
        mine.close()
    finally:
        alive.communicate("")
    assert alive.returncode == 0
    assert sorted(os.listdir(root / ".detached")) == [kit.name]
    assert not mounts_under(root) and not list((root / ".trash").iterdir())


def _detached_mounts(data: Path) -> list[str]:
    return mounts_under(data / "workspaces" / ".detached")


@needs_mount
def test_toolhost_recover_unmounts_the_workspace_a_killed_toolhost_approve_left(
        tmp_path: Path) -> None:
    # Before: recover settled the row but the ext4 mount, its loop device and its image
    # stayed for good (no run is live to end or pause), and the data directory could not
    # be removed (EBUSY).
    data = tmp_path / "data"
    plugins = "toolhost-sandbox"
    paused = run_toolhost("call", "sandbox.run_command", "--args",
                          json.dumps({"command": "sleep 30"}), data_dir=data, plugins=plugins)
    assert paused.returncode == 3, paused.stderr
    invocation_id = paused.stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_DATA_DIR=str(data), TOOLHOST_CONFIG="", TOOLHOST_PLUGINS=plugins)
    approver = subprocess.Popen([*toolhost_command(), "approve", invocation_id], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _detached_mounts(data) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _detached_mounts(data), "the approved call never made its workspace"
    finally:
        approver.send_signal(signal.SIGKILL)
        approver.wait()
    recovered = run_toolhost("recover", data_dir=data, plugins=plugins)
    assert recovered.returncode == 0, recovered.stderr
    assert "tool.internal.interrupted" in recovered.stdout
    assert _detached_mounts(data) == []
    assert os.listdir(data / "workspaces" / ".detached") == []
    assert not list((data / "workspaces" / ".detached").parent.rglob("*.img"))
