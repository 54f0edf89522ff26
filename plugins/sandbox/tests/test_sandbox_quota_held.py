"""Issue #26 item 3: the workspace's byte quota holds against parallel writers (D265).

Polled every 0.2 s, 120 parallel ``fallocate -l 63M`` put 7 GiB past a 1 GiB quota. Where the
host can mount, the workspace is a filesystem of the quota's size; these tests give the host a
data directory on a small filesystem of their own, so that what the command costs the host's
disk can be read from that filesystem, during the call and after it."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_support import ALLOW, NAME, PLUGINS, structured
from toolhost.testing import Harness

MiB = 1024 * 1024
QUOTA = 64 * MiB
#: What the data filesystem may gain beyond the quota: the image's extent index there and
#: the host's own rows (the invocation's, in SQLite), stated in D265 as well under 1 MiB
#: and 1 MiB.
MARGIN = 2 * MiB
#: 100, not the issue's 120: the sandbox's processes are capped at PROCESSES (128) for the
#: uid, and 120 writers with the shell, bwrap's init and the reaping a loaded machine delays
#: met it ("Cannot fork", the shell's exit 2, in combined `-n 2` runs).
WRITERS = "for i in $(seq 100); do fallocate -l 63M f$i & done; wait"


def _can_mount() -> bool:
    """CAP_SYS_ADMIN (bit 21 of CapEff; root in a container may lack it) and loop devices:
    what the test needs to make its filesystem, and the host to hold the quota."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            caps = next(line for line in status if line.startswith("CapEff:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caps.split()[1], 16) >> 21 & 1) and os.path.exists("/dev/loop-control")


_CAN_MOUNT = _can_mount()


def _used(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


@pytest.fixture
def data_fs(tmp_path: Path) -> Iterator[Path]:
    """A 512 MiB ext4 filesystem mounted at ``tmp_path/data``: the host's data directory."""
    if not _CAN_MOUNT:
        pytest.skip("the host cannot mount here (not root, or no loop devices): the quota is "
                    "only polled (test_the_poll_still_kills_in_an_operators_directory)")
    image, mount = tmp_path / "data.img", tmp_path / "data"
    mount.mkdir()
    with open(image, "wb") as f:
        f.truncate(512 * MiB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    try:
        yield mount
    finally:
        # Whatever the host left mounted below it too (it should have left nothing).
        subprocess.run(["umount", "-R", "-l", str(mount)], check=False)
        image.unlink()


def test_parallel_writers_stop_at_the_quota(data_fs: Path) -> None:
    settings = {**ALLOW, "TOOLHOST_WORKSPACE_QUOTA_BYTES": str(QUOTA)}
    with Harness.over(PLUGINS, settings=settings, data_dir=data_fs / "toolhost") as harness:
        run = harness.start_run()
        before = _used(data_fs)
        peak = [before]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.005):
                peak[0] = max(peak[0], _used(data_fs))

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            outcome = harness.call(NAME, {"command": WRITERS, "timeout_s": 120}, run=run)
        finally:
            done.set()
            sampler.join()
        after = _used(data_fs)
        # The host's disk gained at most the quota, during the call and after it.
        assert peak[0] - before <= QUOTA + MARGIN, f"{(peak[0] - before) / MiB} MiB"
        assert after - before <= QUOTA + MARGIN, f"{(after - before) / MiB} MiB"
        result = structured(outcome)
        # Every writer was refused by the workspace's filesystem (63 MiB never fits in 64
        # with ext4's metadata), and says so (their lines interleave).
        assert result["stderr"].count("No space left on device") == 100, (
            {k: v for k, v in result.items() if k != "stderr"}, result["stderr"][-200:])
        assert (result["exit_code"], result["timed_out"]) == (0, False)
        listing = harness.call("sandbox.run_command", {"command": "du -sk . ; ls | wc -l"},
                               run=run)
        assert int(structured(listing)["stdout"].split()[0]) <= QUOTA // 1024
        # Nothing outside the workspace: the data directory, its workspaces' filesystems
        # aside, holds no more than the host's own stores.
        outside = 0
        for top, dirs, files in os.walk(data_fs / "toolhost"):
            dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(top, d))]
            outside += sum(os.lstat(os.path.join(top, f)).st_blocks * 512 for f in files
                           if not f.endswith(".img"))
        assert outside < 8 * MiB
        harness.end_run(run)
        # The run's end unmounted its workspace and removed its image.
        assert not [line for line in Path("/proc/self/mounts").read_text().splitlines()
                    if str(data_fs / "toolhost") in line]
        assert not list((data_fs / "toolhost" / "workspaces").rglob("*.img"))


def test_the_poll_still_kills_in_an_operators_directory(tmp_path: Path) -> None:
    """An operator's ``--workspace`` is never a filesystem of the host's making: the 0.2 s poll
    bounds it, at the quota the host's setting gives."""
    settings = {**ALLOW, "TOOLHOST_WORKSPACE_QUOTA_BYTES": str(16 * MiB)}
    root = tmp_path / "mine"
    root.mkdir()
    with Harness.over(PLUGINS, settings=settings) as harness:
        run = harness.start_run(workspace=root)
        outcome = harness.call(NAME, {"command": "for i in $(seq 64); do head -c 1048576 "
                                      "/dev/zero > f$i; sleep 0.05; done; echo finished",
                                      "timeout_s": 60}, run=run)
        result = structured(outcome)
        assert (result["quota_exceeded"], result["exit_code"], result["stdout"]) == (
            True, None, "")
        assert outcome.content.startswith(
            "The workspace passed its quota (16 MiB, 200000 entries, 2048 levels deep); every "
            "process of the command was killed.")
        harness.end_run(run)
