"""A run in an operator's directory stays ended too (D529): `toolhost runs end R` while a call
of R (`--workspace DIR`) is in flight, or an approval of one has started, and the call, when it
reaches for the workspace, ends cancelled with its run ("the run has ended") and writes nothing
more in DIR. Before, an operator's directory was never claimed, so nothing asked whether the
run was still live: the late call wrote in DIR after the end. DIR's own files are never removed.

The registry's side with two ``RunWorkspaces`` (two processes of one host); then real
``toolhost`` processes, the late call held at a barrier file (test_run_ended_stays_ended's
plugin).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import nothing_left
from installed import install_fake_plugin
from test_run_ended_stays_ended import PLUGINS, PUTTER

from toolhost import WorkspaceUnavailable
from toolhost._adapters.run_workspaces import RunWorkspaces
from toolhost._model import host_reasons as core_messages
from toolhost._testing.cli import run_toolhost, toolhost_command


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "mine.txt").write_text("the operator's\n")
    return directory


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())

# ---------------------------------------------------------------------------- the registry


def test_a_directory_runs_workspace_used_after_its_end_is_refused_and_writes_nothing(
        tmp_path: Path, project: Path) -> None:
    root = tmp_path / "workspaces"
    late = RunWorkspaces(root).start("r", project)[0]  # a command of the run, in flight
    late.refresh()  # its call starts
    assert RunWorkspaces(root).end("r")  # `toolhost runs end r`, another process
    with pytest.raises(WorkspaceUnavailable, match="the run has ended"):
        late.write("late.txt", b"after the end")
    late.close()
    assert _files(project) == ["mine.txt"]  # nothing written, nothing of the operator's gone
    assert RunWorkspaces(root).live() == []
    assert nothing_left(root)


def test_the_next_call_of_a_directory_run_ended_elsewhere_is_refused_its_files_stay(
        tmp_path: Path, project: Path) -> None:
    root = tmp_path / "workspaces"
    session = RunWorkspaces(root).start("r", project)[0]  # an MCP session's, say
    session.write("before.txt", b"while live")
    RunWorkspaces(root).end("r")
    session.refresh()  # its next call starts
    for use in (lambda: session.write("after.txt", b"late"), lambda: session.listdir()):
        with pytest.raises(WorkspaceUnavailable, match="the run has ended"):
            use()
    session.end()
    assert _files(project) == ["before.txt", "mine.txt"]  # what it wrote while live stays
    assert nothing_left(root)


def test_a_late_workspaces_end_leaves_the_run_named_afresh_live(
        tmp_path: Path, project: Path) -> None:
    root = tmp_path / "workspaces"
    late = RunWorkspaces(root).start("r", project)[0]
    RunWorkspaces(root).end("r")
    RunWorkspaces(root).start("r", project)  # the operator names r afresh
    late.end()  # the late command ends its run: the ended one, not the new one
    assert RunWorkspaces(root).live() == [("r", project, False)]
    assert RunWorkspaces(root).end("r")
    assert _files(project) == ["mine.txt"]


def test_an_approval_started_before_the_end_is_refused_one_after_it_runs_there(
        tmp_path: Path, project: Path) -> None:
    root = tmp_path / "workspaces"
    RunWorkspaces(root).start("r", project)
    approved = RunWorkspaces(root).for_approval("r")  # an approval of the live run
    RunWorkspaces(root).end("r")
    with pytest.raises(WorkspaceUnavailable, match="the run has ended"):
        approved.write("late.txt", b"x")
    approved.close()
    # One approved after the end runs in the directory its row recorded, as a run of its own
    # (D509), ended with the call.
    recorded = RunWorkspaces(root).start("q", project)[0].recorded_directory()
    RunWorkspaces(root).end("q")
    after = RunWorkspaces(root).for_approval("q", recorded)
    after.write("approved.txt", b"x")
    after.close()
    assert RunWorkspaces(root).live() == []
    # That run of its own is the approval's registration: `runs end q` before the call reaches
    # the directory, and q named afresh, is another run the late call neither uses nor ends.
    late = RunWorkspaces(root).for_approval("q", recorded)
    RunWorkspaces(root).end("q")
    RunWorkspaces(root).start("q")
    with pytest.raises(WorkspaceUnavailable, match="the run has ended"):
        late.write("late.txt", b"x")
    late.close()
    assert RunWorkspaces(root).live() == [("q", None, False)]
    assert _files(project) == ["approved.txt", "mine.txt"]
    assert RunWorkspaces(root).end("q")


def test_a_pause_keeps_the_directory_run_live(tmp_path: Path, project: Path) -> None:
    root = tmp_path / "workspaces"
    ours = RunWorkspaces(root).start("r", project)[0]
    ours.discard()  # a call of the run paused here
    ours.write("after-the-pause.txt", b"x")
    ours.end()
    assert _files(project) == ["after-the-pause.txt", "mine.txt"]
    assert nothing_left(root)

# ---------------------------------------------------------------------------- real processes


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    install_fake_plugin(tmp_path / "site", "fake-late", "fake_late", PUTTER)
    yield tmp_path / "data"


def _toolhost(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost(*args, data_dir=data, plugins=PLUGINS, path=[data.parent / "site"])


def _held_call(data: Path, barrier: Path, *options: str) -> subprocess.Popen[str]:
    """``toolhost call late.put --json OPTIONS``, its body started and held at ``barrier``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLHOST_")}
    env.update(TOOLHOST_DATA_DIR=str(data), TOOLHOST_CONFIG="", TOOLHOST_PLUGINS=PLUGINS,
               PYTHONPATH=os.pathsep.join(filter(None, [str(data.parent / "site"),
                                                        env.get("PYTHONPATH")])),
               LATE_BARRIER=str(barrier))
    call = subprocess.Popen(
        [*toolhost_command(), "call", "late.put", "--args", '{"tag": "late"}', "--json",
         *options], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    assert call.stderr is not None
    for line in call.stderr:
        if line.strip() == "waiting":
            return call
    call.kill()
    pytest.fail(f"the call never started its body: {call.communicate()}")


def test_runs_end_during_a_call_in_the_operators_directory_cancels_it_and_writes_nothing(
        data: Path, project: Path) -> None:
    early = _toolhost(data, "call", "late.put", "--args", '{"tag": "early"}', "--run", "R",
                      "--workspace", str(project))
    assert early.returncode == 0, early.stderr
    assert _toolhost(data, "runs", "list").stdout == f"R  {project}\n"
    barrier = data.parent / "go"
    late = _held_call(data, barrier, "--run", "R")
    try:
        ended = _toolhost(data, "runs", "end", "R")
        assert (ended.returncode, ended.stdout) == (0, "ended R\n"), ended.stderr
    finally:
        barrier.touch()
        out, err = late.communicate(timeout=120)
    # Before: exit 0, "late" printed, and late.txt in the operator's directory after the end.
    assert late.returncode == 1, (out, err)
    outcome = json.loads(out)
    assert (outcome["status"], outcome["reason_code"], outcome["retryable"]) == (
        "failed", core_messages.RUN_CANCELLED, False), outcome
    row = json.loads(_toolhost(data, "show", outcome["invocation_id"], "--json").stdout)
    assert (row["state"], row["failure_detail"]) == ("failed", {"problem": "the run has ended"})
    assert _files(project) == ["early.txt", "mine.txt"]
    assert _toolhost(data, "runs", "list").stdout == ""
    assert nothing_left(data / "workspaces")
