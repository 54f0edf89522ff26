"""sandbox.run_command attacked from what the host leaves behind and from its limits (a security
review), each checked from the host's side against real bubblewrap.

The sandbox's uid (65534 inside) maps to the host process's own uid, here root: a set-uid
file the command leaves in the workspace is a set-uid-root program on the host for any local
user who can reach the workspace directory (an operator's ``--workspace`` outlives the run).
"""

from __future__ import annotations

import os
import resource
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_support import BOUND_S, NAME, Call, structured, wait_for
from toolhost import Outcome
from toolhost.testing import Harness, Run
from toolhost_sandbox.isolation import TMP_BYTES

_SET_ID = stat.S_ISUID | stat.S_ISGID
#: What one call may add to the workspace's disk use, at most (the reviewer's bound: the
#: command's 64 MiB per file alone bounds nothing, since it may write any number of files).
WORKSPACE_GROWTH_BOUND = 2 * 1024 * 1024 * 1024


def _set_id_files(root: Path) -> list[bytes]:
    """Every regular file under ``root`` with a set-id bit, by bytes path (names that are not
    UTF-8 included), never following a symlink."""
    found = []
    for top, _, files in os.walk(os.fsencode(root)):
        for name in files:
            info = os.lstat(os.path.join(top, name))
            if stat.S_ISREG(info.st_mode) and info.st_mode & _SET_ID:
                found.append(os.path.join(top, name))
    return found


def test_a_set_uid_file_with_a_name_that_is_not_utf8_is_cleared(call: Call, root: Path) -> None:
    # The host's walk skips names that are not UTF-8 (no tool can name them), and with them
    # the clearing of set-id bits: a set-uid-root copy of a shell would stay on the host.
    evil = "$(printf 'e\\377')"
    structured(call(f"cp /bin/sh {evil}; chmod 6755 {evil}; "
                    f"mkdir {evil}.d; cp /bin/sh {evil}.d/sh; chmod 4755 {evil}.d/sh"))
    left = _set_id_files(root)
    for path in left:  # never leave a set-uid shell behind, even in pytest's directory
        os.unlink(path)
    assert left == []


@pytest.fixture
def few_fds() -> Iterator[int]:
    """This process's open-file limit lowered (soft only) for the test: the host's walk holds
    one fd a level, so a tree deeper than the limit is partly unseen, whatever the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = 1024 if soft > 1024 else soft
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    yield lowered
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_set_uid_file_deeper_than_the_walk_reaches_is_cleared(
    call: Call, root: Path, few_fds: int,
) -> None:
    depth = few_fds + 200
    script = ("import os, shutil\n"
              f"for _ in range({depth}):\n"
              "    os.mkdir('a'); os.chdir('a')\n"
              "shutil.copy('/bin/sh', 'sh'); os.chmod('sh', 0o4755)\n")
    structured(call(f"python3 -c \"{script}\"", 60))
    try:
        # Found from the host without holding an fd a level: descend with chdir-free openat.
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(depth):
                child = os.open("a", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = child
            mode = os.stat("sh", dir_fd=fd, follow_symlinks=False).st_mode
        finally:
            os.close(fd)
        assert mode & _SET_ID == 0, oct(mode)
    finally:
        structured(call("rm -rf a", 60))  # rm copes with any depth; pytest's cleanup may not


def test_no_set_uid_program_of_the_hosts_user_appears_while_the_command_runs(
    toolhost_host: Harness, run: Run, root: Path, isolation: None,
) -> None:
    # Clearing the bits afterwards leaves the whole call (up to 300 s) in which another local
    # user may run the workspace's set-uid copy of a shell as the host's user (root here).
    results: list[Outcome] = []
    command = "cp /bin/sh t; chmod 4755 t; touch ready; sleep 60"
    worker = threading.Thread(target=lambda: results.append(
        toolhost_host.call(NAME, {"command": command, "timeout_s": 60}, run=run)))
    worker.start()
    try:
        assert wait_for(root / "ready")
        info = os.lstat(root / "t")
        host_users = {0, os.geteuid()}
        assert not (info.st_mode & _SET_ID and info.st_uid in host_users), (
            oct(info.st_mode), info.st_uid)
    finally:
        run.cancellation.cancel()
        worker.join(BOUND_S)
    assert not worker.is_alive()


def test_no_writable_place_but_the_workspace_holds_more_than_the_tmp_bound(call: Call) -> None:
    # tmpfs pages are memory no process limit counts (isolation.TMP_BYTES says so); /tmp is
    # bounded, but the sandbox's root and /dev are tmpfs mounts of half the host's memory,
    # writable by the command, bounded only where a memory cgroup happens to exist.
    half = TMP_BYTES // 2 + 1024 * 1024  # two of these exceed TMP_BYTES; each is under FSIZE
    places = ["/tmp", "/", "/dev", "/dev/shm"]
    probes = "; ".join(
        f"(head -c {half} /dev/zero > {p.rstrip('/')}/review-1 && "
        f"head -c {half} /dev/zero > {p.rstrip('/')}/review-2) 2>/dev/null && echo 'held {p}'"
        for p in places)
    result = structured(call(f"{probes}; echo end", 60))
    assert result["stdout"] == "end\n"


def test_the_command_inherits_no_descriptor_and_no_host_variable(
    call: Call, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A leaked directory fd of the workspace (bwrap's --bind-fd) would reach the host's tree
    # through "..", and the status pipe would let the command forge its own exit status.
    monkeypatch.setenv("TOOLHOST_REVIEW_SECRET", "s3cret-7f3a")
    result = structured(call("ls /proc/$$/fd; echo --; env | cut -d= -f1 | sort"))
    fds, names = result["stdout"].split("--\n")
    assert fds.split() == ["0", "1", "2"]
    assert names.split() == ["HOME", "LANG", "PATH", "PWD", "TMPDIR"]
    assert "s3cret" not in result["stdout"] + result["stderr"]


def test_the_workspace_cannot_grow_without_bound_in_one_call(call: Call, root: Path) -> None:
    # RLIMIT_FSIZE bounds each file; nothing bounds their number, so one call can fill the
    # host's disk (the data directory's: its SQLite stores and artifacts too).
    files = WORKSPACE_GROWTH_BOUND // (64 * 1024 * 1024) + 2
    try:
        call(f"i=0; while [ $i -lt {files} ]; do head -c 67108864 /dev/zero > f$i || break; "
             "i=$((i+1)); done", 120)
        used = sum(p.stat().st_blocks * 512 for p in root.iterdir() if p.is_file())
        assert used <= WORKSPACE_GROWTH_BOUND
    finally:
        for p in root.iterdir():
            if p.is_file():
                p.unlink()
