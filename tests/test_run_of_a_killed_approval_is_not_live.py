"""A run an approval registered for its call (the call paused in the operator's directory A,
its run then ended: D509) is the approving command's own: once `toolhost approve` is
SIGKILLed mid-command, `toolhost runs list` says the run is not live, and a command naming the
run now treats it as ended, as `runs list` says: `call --run R --workspace OTHER` runs in
OTHER, and `call --run R` in a workspace the host makes, not in A. Before, both took the dead
registration for a live run: the first was refused ("run 'r1' is live in A"), the second ran
in A, and R stayed live there until `runs end`.

Real `toolhost` processes, the real sandbox, the approver killed with SIGKILL (its whole
process group) while its command runs; one data directory per test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_support import wait_for
from test_cli import toolhost
from test_cli_runs import call
from test_operator_directory_approval import env, project

from toolhost._testing.cli import toolhost_command

__all__ = ["env", "project"]  # the fixtures, shared with the D509 tests

#: The approved command: it says it has started, then waits to be killed.
BLOCKS = {"command": "echo started > started.txt; sleep 120"}
GONE = "not live, its command is gone (toolhost recover ends it): "
NOTE = {"path": "note.md", "content": "the new run's"}


@pytest.fixture
def other(tmp_path: Path) -> Path:
    directory = tmp_path / "other"
    directory.mkdir()
    return directory


@pytest.fixture
def killed_approval(env: dict[str, str], project: Path) -> Iterator[str]:
    """Run r1's call paused in ``project``, r1 ended, and the approval that registered r1 in
    ``project`` for the call killed while the call's command ran: the call's id."""
    code, out, err = call(env, "sandbox.run_command", BLOCKS, "--run", "r1",
                          "--workspace", str(project))
    assert code == 3, err
    invocation_id = out.strip()
    assert toolhost("runs", "end", "r1", env=env).returncode == 0
    child = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    child.update(TOOLHOST_CONFIG="", **env)
    approver = subprocess.Popen([*toolhost_command(), "approve", invocation_id], env=child,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(lambda: (project / "started.txt").exists(), 60)
    finally:
        os.killpg(approver.pid, signal.SIGKILL)
        approver.wait()
    assert toolhost("runs", "list", env=env).stdout == f"r1  {GONE}{project}\n"
    yield invocation_id
    toolhost("runs", "end", "r1", env=env)


def test_a_run_named_with_another_directory_after_its_approval_was_killed_runs_there(
    env: dict[str, str], project: Path, other: Path, killed_approval: str,
) -> None:
    code, _, err = call(env, "workspace.write_text", NOTE, "--run", "r1",
                        "--workspace", str(other))
    assert (code, err) == (0, "")
    assert (other / "note.md").read_text() == NOTE["content"]
    assert not (project / "note.md").exists()
    assert toolhost("runs", "list", env=env).stdout == f"r1  {other}\n"


def test_a_run_named_without_a_directory_after_its_approval_was_killed_is_a_new_one(
    env: dict[str, str], project: Path, killed_approval: str,
) -> None:
    code, _, err = call(env, "workspace.write_text", NOTE, "--run", "r1")
    assert (code, err) == (0, "")
    assert not (project / "note.md").exists()  # the killed approval's directory is not taken
    listed = json.loads(toolhost("runs", "list", "--json", env=env).stdout)
    assert listed == [{"run_id": "r1", "directory": None, "workspace": True}]


@pytest.mark.parametrize("run_id", ["r1", "r2"])
def test_a_directory_inside_the_killed_approvals_is_nobodys_workspace(
    env: dict[str, str], project: Path, killed_approval: str, run_id: str,
) -> None:
    # The nesting check reads the runs live on this host: a run whose command is gone is not
    # one of them (D565), so a directory inside its directory may be any run's workspace.
    sub = project / "sub"
    sub.mkdir()
    code, _, err = call(env, "workspace.write_text", NOTE, "--run", run_id,
                        "--workspace", str(sub))
    assert (code, err) == (0, "")
    assert (sub / "note.md").read_text() == NOTE["content"]
